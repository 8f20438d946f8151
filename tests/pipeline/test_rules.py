"""The shared rules a row of a ``claims.toml`` names (:mod:`aoi_fl.pipeline.rules`), on cases
worked by hand."""

import pytest

from aoi_fl.pipeline.claims import run_verdict
from aoi_fl.pipeline.rules import (
    Reading,
    above,
    at_most,
    below,
    covers,
    criterion,
    paired_sign,
    prediction,
    value,
)


def test_bounds_test_the_tested_number_and_leave_a_missing_one_inconclusive():
    assert above(Reading(1.0, "s"), 0.5) == (1.0, "s", "held")
    assert above(Reading(1.0, "s", tested=0.4), 0.5) == (1.0, "s", "not held")
    assert above(Reading(None, "2 of 4 runs not cached"), 0.5)[2] == "inconclusive"
    assert below(Reading(0.004, "s"), 0.01)[2] == "held"
    assert below(Reading(0.02, "s"), 0.01)[2] == "not held"
    # below the measure's noise floor a bound says nothing, whatever the estimate
    assert below(Reading(0.004, "s", resolution=0.02), 0.01)[2] == "inconclusive at this budget"
    assert below(Reading(None, "s", resolution=0.02), 0.01)[2] == "inconclusive"
    # to the decimals the bound is stated with: 0.0064 is 0.006
    assert at_most(Reading(0.0064, "s"), 0.006, 3)[2] == "held"
    assert at_most(Reading(0.0066, "s"), 0.006, 3)[2] == "not held"


def test_intervals_decide_equality_and_direction():
    assert covers(Reading(4.17, "s", interval=(-0.1, 0.2)))[2] == "held"
    assert covers(Reading(4.17, "s", interval=(0.1, 0.2)))[2] == "not held"
    assert covers(Reading(4.17, "no trace"))[2] == "inconclusive"
    assert paired_sign(Reading(0.5, "s", interval=(0.1, 0.9)))[2] == "held"
    assert paired_sign(Reading(0.5, "s", interval=(0.1, 0.9)), "negative")[2] == "not held"
    assert paired_sign(Reading(0.1, "s", interval=(-0.1, 0.3)))[2] == "inconclusive at this budget"
    assert paired_sign(Reading(None, "s"))[2] == "inconclusive"
    with pytest.raises(ValueError, match="claimed"):
        paired_sign(Reading(0.5, "s", interval=(0.1, 0.9)), "zero")


def test_a_criterion_a_table_applied_is_the_rows_and_the_paper_value_rules_are_the_ledgers():
    assert criterion(Reading(0.1, "s", verdict="held")) == (0.1, "s", "held")
    assert criterion(Reading(None, "3 of 12 runs not cached")) == (
        None,
        "3 of 12 runs not cached",
        "inconclusive",
    )
    seeds = [38.0, 40.0, 41.0, 39.5]
    assert prediction(seeds, paper_value=39) == run_verdict(39, seeds)
    assert value(Reading(1.04, "closed form"), paper_value=1.0, rtol=0.05)[2] == "held"
    assert value(Reading(1.06, "closed form"), paper_value=1.0, rtol=0.05)[2] == "not held"
    assert value(Reading(None, "s"), paper_value=1.0, rtol=0.05)[2] == "inconclusive"
