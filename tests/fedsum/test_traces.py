"""Notebook 14's table (aoi_fl.evidence.fedsum.traces): every pattern of the ledger's App. F list
and the AoI Markov policies, with its bound and the columns derived from it, on the smoke profile's
traces (N = 100, S = 20, T = 200, 2 seeds)."""

import numpy as np
import pytest

from aoi_fl.core.delays import sampler_metrics
from aoi_fl.core.registry import SAMPLERS
from aoi_fl.evidence.fedsum import claims as fc
from aoi_fl.evidence.fedsum import traces
from aoi_fl.fedsum import delays
from aoi_fl.fedsum.patterns import UniformSubset


@pytest.fixture(scope="module")
def table():
    return traces.pattern_table("smoke")


def test_sizes_and_description_of_a_profiles_traces():
    assert traces.sizes("smoke") == (100, 20, 200, (0, 1))
    assert traces.describe("cpu") == "N = 100, S = 20, T = 2000, seeds: 5"


def test_rows_columns_and_bounds(table):
    cases = fc.bound_cases(100, 20, 200)
    # the ledger's cases, then the AoI paper's four policies in its numbering (Policy 2 is a
    # case; Policy 1 is P1 and has none of its own)
    rows = [c.row for k, c in cases.items() if k != "lemf2.aoi_probabilistic"]
    aoi = ["AoI Policy 1: random", "AoI Policy 2: probabilistic", *list(traces.AOI_ROWS)[1:]]
    assert list(table.index) == rows + aoi
    assert tuple(table.columns) == traces.COLUMNS
    assert traces.rows("smoke")["lemf1.p1"] == "P1 / Case 1: uniform S=20"
    p1 = table.loc["P1 / Case 1: uniform S=20"]
    assert p1["bound on E[tau_max]"] == delays.uniform_bound(100, 20, 200)
    assert p1["source"] == "F.1"
    # P1's tau_max by hand: mean over the seeds of each trace's maximum
    by_hand = [sampler_metrics(UniformSubset(100, 20, seed), 200).tau_max for seed in (0, 1)]
    assert p1["tau_max"] == np.mean(by_hand) and p1["tau_max max"] == max(by_hand)
    assert p1["bound / tau_max"] == pytest.approx(p1["bound on E[tau_max]"] / p1["tau_max"])
    assert p1["sqrt(1 + tau_avg)"] == pytest.approx(np.sqrt(1 + p1["tau_avg"]))
    # the optimal Markov policy selects a client surely at age N/S - 1 = 4: a sure bound, ours
    optimal = table.loc["AoI Policy 3: Markov optimal"]
    assert (optimal["bound on E[tau_max]"], optimal["source"]) == (4.0, "ours (sure)")
    linear = table.loc["AoI Policy 4: Markov linear"]
    p = SAMPLERS["markov_nonoptimal"](100, None, m=20, seed=0).p
    assert linear["bound on E[tau_max]"] == delays.markov_bound(p, 100, 200)
    # full participation: no delay, so no ratio (bug: inf or 0)
    assert np.isnan(table.loc["Case 2: Bernoulli p=1", "bound / tau_max"])


def test_closed_form_looseness_and_the_cyclic_comparison(table):
    assert traces.cyclic_matches(table, "smoke")
    off = table.copy()
    off.loc["deterministic cyclic", "tau_avg"] += 0.01
    assert not traces.cyclic_matches(off, "smoke")
    loose = traces.looseness(table)
    # the paper's bounds only (not ours, nor its proofs extended by us), and only where there
    # is a delay to compare with
    ours = ["AoI Policy 3: Markov optimal", "AoI Policy 2: probabilistic"]
    assert not {*ours, "Case 2: Bernoulli p=1"} & set(loose.index)
    assert "P3: sine, period 20 (FedAWE code)" in loose.index  # Case 2 of the lemma
    assert len(loose) == len(table) - 4
    ratio = table.loc["P1 / Case 1: uniform S=20", "tau_max"] / 4  # cyclic: N/S - 1 = 4
    assert traces.p1_over_cyclic(table, "smoke") == pytest.approx(ratio)
