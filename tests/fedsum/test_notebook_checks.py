"""The checks of notebooks 14-17 (:mod:`aoi_fl.evidence.fedsum.checks`) in the ``cpu`` profile, on
what the notebooks read: the committed ``results/`` cache (nothing trains; notebook 14 simulates its
participation traces, which trains nothing either) and the MNIST partition. What the Readings
state holds; a changed number fails the check that rests on it."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from aoi_fl.evidence.fedsum import checks, traces
from aoi_fl.evidence.fedsum import claims as fc
from aoi_fl.evidence.fedsum import experiments as fx
from aoi_fl.evidence.fedsum import results as fr

ROOT = Path(__file__).resolve().parents[2]
RESULTS, DATA = str(ROOT / "results"), str(ROOT / "data")


def cached(figure):
    """The committed ``cpu`` summaries of ``figure``, every planned run among them."""
    found, missing = fx.cached_summaries(fx.plan(figure, "cpu"), RESULTS)
    assert missing == 0, f"{missing} runs of {figure} are not in the committed cache"
    return found


@pytest.mark.slow
def test_notebook_14_checks_hold_on_the_cpu_traces():
    table, verdicts = traces.pattern_table("cpu"), fc.bound_table("cpu")
    assert checks.delay_patterns(table, verdicts, "cpu") == [
        "checks passed: closed forms of the cyclic and Markov patterns, bounds, mean |S_t|, 15 "
        "patterns, 12 verdicts on the same traces, the Reading's verdicts and comparisons"
    ]
    # a bound below a seed's tau_max (reshuffled cyclic: 8 in every seed) fails
    low = table.copy()
    low.loc["reshuffled cyclic", "bound on E[tau_max]"] = 7.0
    with pytest.raises(AssertionError, match="tau_max above its bound for: \\['reshuffled"):
        checks.delay_patterns(low, verdicts, "cpu")
    # verdicts from other traces than the table's fail
    other = verdicts.copy()
    other.loc["lemf1.p1", "tau_max max"] += 1
    with pytest.raises(AssertionError, match="the verdicts' tau_max differ from the table's"):
        checks.delay_patterns(table, other, "cpu")


@pytest.fixture(scope="module")
def fig4():
    if not (ROOT / "data" / "MNIST" / "raw").is_dir():
        pytest.skip("no MNIST under data/ (`make data` fetches it)")
    return fr.label_histogram(fx.plan("main", "cpu")[0].config, DATA)


def test_notebook_15_checks_hold_on_the_committed_runs(fig4):
    summaries = cached("main")
    histogram, n_train = fig4
    assert checks.mnist_panel(summaries, histogram, n_train, "cpu") == [
        "checks passed: partition, 48 runs (rounds, finite metrics, shared traces), "
        "communication and memory per method, the verdicts on claims (i), (ii) and (cr), the "
        "Reading's comparisons"
    ]
    # a partition that misses a sample fails; so does a run with a non-finite metric
    with pytest.raises(AssertionError, match="not 100 clients with the 60001 training samples"):
        checks.mnist_panel(summaries, histogram, n_train + 1, "cpu")
    # a run whose unit is not what its method sends in the trainer (measured now) fails
    recounted = list(summaries)
    recounted[0] = dataclasses.replace(recounted[0], communication=(3, 1))
    with pytest.raises(AssertionError, match=r"runs record \{.*\} vectors \(down, up\); the"):
        checks.mnist_panel(recounted, histogram, n_train, "cpu")
    broken = list(summaries)
    accuracy = broken[5].test_accuracy.copy()
    accuracy[3] = np.nan
    broken[5] = dataclasses.replace(broken[5], test_accuracy=accuracy)
    with pytest.raises(AssertionError, match="non-finite test_accuracy"):
        checks.mnist_panel(broken, histogram, n_train, "cpu")


def test_notebook_16_checks_hold_on_the_committed_runs():
    cases, grid, family = cached("cases"), cached("p_grid"), cached("family")
    assert checks.pattern_panels(cases, grid, family, "cpu") == [
        "checks passed: 20 runs (rounds, finite metrics, shared traces, closed-form delays), "
        "Case 1 = notebook 15's run, the verdicts' rule, the Reading's verdicts"
    ]
    # the deterministic cyclic run with a delay its closed form does not have fails
    cyclic = next(i for i, r in enumerate(cases) if r.planned.pattern == "cyclic")
    shifted = list(cases)
    shifted[cyclic] = dataclasses.replace(cases[cyclic], tau_max=cases[cyclic].tau_max + 1)
    with pytest.raises(AssertionError, match="cases cyclic fedsum seed 0: tau_max 5"):
        checks.pattern_panels(shifted, grid, family, "cpu")


def test_notebook_17_checks_hold_on_the_committed_runs():
    runs = {figure: cached(figure) for figure in fx.LONG_FIGURES}
    assert checks.long_panel(runs, "cpu") == [
        "checks passed: 72 runs (horizon, finite metrics, shared traces), 9 verdicts against "
        "their parts, the Reading's verdicts and numbers"
    ]
    # two methods of one (pattern, seed) on different traces fail: the pairing is gone
    other = list(runs["long"])
    active = other[1].active.copy()
    active[0] += 1
    other[1] = dataclasses.replace(other[1], active=active)
    with pytest.raises(AssertionError, match="not the participation trace of its pattern"):
        checks.long_panel({**runs, "long": other}, "cpu")
    # a run missing from the cache fails before anything is read from the runs
    with pytest.raises(AssertionError, match="summaries per figure"):
        checks.long_panel({**runs, "long": runs["long"][1:]}, "cpu")
