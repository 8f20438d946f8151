"""The rules notebooks 14-17 check in every profile (aoi_fl.evidence.fedsum.checks), on runs built
by hand that break one rule each, and notebook 14's checks on the smoke profile's traces (the cpu
profile's run in test_notebook_checks.py)."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from aoi_fl.evidence.fedsum import checks, traces
from aoi_fl.evidence.fedsum import claims as fc
from aoi_fl.evidence.fedsum import experiments as fx


def run(pattern, algorithm, sampler, *, active, tau=(3, 1.5), rounds=4, seed=0):
    """A run over ``rounds`` rounds of a 10-client federation, evaluated every 2 rounds."""
    config = {"sampler": sampler, "partition": {"n_clients": 10}}
    planned = fx.Planned("cases", "mnist", pattern, algorithm, seed, config)
    evals = np.arange(0, rounds + 1, 2)
    ones = np.ones(evals.size)
    return fx.RunSummary(
        planned, evals, ones, ones, ones, ones, np.asarray(active), tau[0], tau[1], (1, 1)
    )


UNIFORM = {"name": "uniform", "s": 5}
CYCLIC = {"name": "cyclic", "s": 5}  # m = 2: tau_t = min(t + 1, 1) = 1
GOOD = [
    run("P1", "fedsum", UNIFORM, active=[5] * 4),
    run("P1", "fedavg", UNIFORM, active=[5] * 4),
    run("cyclic", "fedsum", CYCLIC, active=[5] * 4, tau=(1, 1.0)),
    run("reshuffled", "fedsum", {"name": "reshuffled_cyclic", "s": 5}, active=[5] * 4, tau=(2, 1)),
    run("p=1", "fedsum", {"name": "bernoulli", "p": 1.0}, active=[10] * 4, tau=(0, 0.0)),
]


def test_complete_runs_on_shared_traces_pass():
    checks.runs_complete(GOOD, 4, "cases")


@pytest.mark.parametrize(
    ("index", "change", "message"),
    [
        (0, {"eval_round": np.array([2, 3, 4])}, "evaluations from round 2 to 4, 4 rounds"),
        (0, {"active": np.array([5, 5, 5])}, "3 rounds, not 0 to 4"),
        (0, {"train_loss": np.array([1.0, np.inf, 1.0])}, "non-finite train_loss"),
        (1, {"tau_max": 4}, "P1 fedavg seed 0: not the participation trace of its pattern"),
        (2, {"tau_avg": 1.25}, "cyclic fedsum seed 0: tau_max 1, tau_avg 1.2500; closed form 1"),
        (3, {"tau_max": 3}, "tau_max 3 above 2m - 2"),
        (4, {"tau_max": 1}, "p = 1 with a delay 1"),
    ],
)
def test_a_run_that_breaks_a_rule_fails(index, change, message):
    runs = list(GOOD)
    runs[index] = dataclasses.replace(runs[index], **change)
    with pytest.raises(AssertionError, match=message):
        checks.runs_complete(runs, 4, "cases")


def test_uniform_s_of_n_draws_s_every_round():
    # both runs of the (pattern, seed) share the short-handed trace; only the rule on S catches it
    short = [dataclasses.replace(r, active=np.array([5, 4, 5, 5])) for r in GOOD[:2]]
    with pytest.raises(AssertionError, match="did not draw S clients every round"):
        checks.runs_complete(short, 4, "cases")


def test_short_of_the_papers_horizon_no_claim_is_decided():
    table = pd.DataFrame(
        {
            "rounds": [40, 40],
            "by the criterion": ["held", "inconclusive"],
            "verdict": ["inconclusive at this budget", "inconclusive"],
        }
    )
    checks.budget_rule(table, 40)
    with pytest.raises(AssertionError, match="at 40 rounds"):
        checks.budget_rule(table.assign(verdict=["held", "inconclusive"]), 40)
    # at the paper's horizon the criterion's verdict stands
    checks.budget_rule(table.assign(rounds=2000, verdict=["held", "inconclusive"]), 2000)


def test_notebook_14_checks_in_smoke_skip_the_readings_comparisons():
    table, verdicts = traces.pattern_table("smoke"), fc.bound_table("smoke")
    out = checks.delay_patterns(table, verdicts, "smoke")
    assert len(out) == 2 and out[0].startswith("skipped in smoke: the Reading's verdicts")
    # AoI Policy 1 is shown beside P1 but has no verdict of its own (it is P1)
    assert out[1].endswith("15 patterns, 12 verdicts on the same traces")
    # the optimal Markov policy away from its closed form fails
    off = table.copy()
    off.loc["AoI Policy 3: Markov optimal", "tau_max max"] = 5.0
    with pytest.raises(AssertionError, match="Markov optimal: tau_max from 4.0 to 5.0"):
        checks.delay_patterns(off, verdicts, "smoke")
