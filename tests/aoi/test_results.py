"""The AoI paper's tables of training results (aoi_fl.aoi.results): pairing runs by seed and the
per-split paired table built from the statistics of aoi_fl.pipeline.paired."""

import numpy as np
import pandas as pd
import pytest

from aoi_fl.aoi.results import paired_differences, paired_table
from aoi_fl.pipeline.paired import minimum_detectable_effect, paired_interval, verdict


class FakeRun:
    """Stand-in for ExperimentResult: a config and a fixed rounds-to-target (None: never)."""

    def __init__(self, split, policy, seed, rounds):
        self.config = {
            "partition": {"name": "iid" if split == "iid" else "dirichlet"},
            "sampler": {"name": policy},
            "training": {"seed": seed},
        }
        self.rounds = rounds

    def rounds_to_target(self, target):
        return self.rounds


def runs_of(split, policy, rounds_by_seed):
    return [FakeRun(split, policy, seed, r) for seed, r in rounds_by_seed.items()]


def test_paired_differences_pairs_by_seed_and_drops_unpaired_seeds():
    results = (
        runs_of("iid", "random", {3: 50, 0: 40, 1: 44})  # seed 3 has no Markov run
        + runs_of("iid", "markov_optimal", {1: 41, 0: 37, 2: 30})  # seed 2 has no random run
        + runs_of("iid", "markov_nonoptimal", {0: 1, 1: 1})  # neither compared policy
        + runs_of("noniid", "random", {0: 90, 1: None})
        + runs_of("noniid", "markov_optimal", {0: 95, 1: 80})
    )
    d = paired_differences(results, 0.97)
    assert list(d.index) == [("iid", 0), ("iid", 1), ("noniid", 0), ("noniid", 1)]
    assert list(d.columns) == ["markov_optimal", "random", "difference"]
    np.testing.assert_array_equal(d["difference"].iloc[:3], [-3.0, -3.0, 5.0])
    assert np.isnan(d.loc[("noniid", 1), "random"]) and np.isnan(d.loc[("noniid", 1), "difference"])
    swapped = paired_differences(results, 0.97, fast="random", slow="markov_optimal")
    np.testing.assert_array_equal(swapped["difference"].iloc[:3], [3.0, 3.0, -5.0])
    with pytest.raises(ValueError, match="two iid/random runs with seed 0"):
        paired_differences(results + runs_of("iid", "random", {0: 41}), 0.97)


def test_paired_table_uses_the_paired_statistics_and_the_papers_claim():
    fast = {0: 38, 1: 40, 2: 37, 3: 41, 4: 39}
    slow = {0: 45, 1: 44, 2: 46, 3: 43, 4: 47}
    results = (
        runs_of("iid", "markov_optimal", fast)
        + runs_of("iid", "random", slow)
        + runs_of("noniid", "markov_optimal", {0: 90, 1: 95})
        + runs_of("noniid", "random", {0: None, 1: 99})
    )
    paper = {("mnist", "iid"): {"markov_optimal": 39, "random": 45}}
    table = paired_table(results, 0.97, paper, "mnist")
    row = table.loc["iid"]
    diffs = [fast[s] - slow[s] for s in range(5)]
    t = paired_interval(diffs)
    boot = paired_interval(diffs, method="bootstrap")
    assert (row["n"], row["reached"]) == (5, "5/5")
    assert row["mean difference"] == pytest.approx(-6.0)
    assert (row["t 95% low"], row["t 95% high"]) == (t.low, t.high)
    assert (row["bootstrap 95% low"], row["bootstrap 95% high"]) == (boot.low, boot.high)
    assert row["speed-up"] == pytest.approx(6 / 45)
    assert row["MDE (80% power)"] == pytest.approx(minimum_detectable_effect(t.sd, 5))
    assert (row["paper markov_optimal"], row["paper random"], row["paper difference"]) == (
        39,
        45,
        -6,
    )
    assert row["verdict"] == verdict(t, 6 / 45, relative_to=45).label == "held"
    # noniid: a run missed the target, so nothing is estimated; the paper gives no number
    row = table.loc["noniid"]
    assert (row["n"], row["reached"]) == (2, "1/2") and pd.isna(row["verdict"])
    assert np.isnan(row["t 95% low"]) and np.isnan(row["paper random"])
    assert paired_table(results, 0.97)["verdict"].isna().all()
