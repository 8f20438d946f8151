"""The AoI paper's tables of training results (aoi_fl.evidence.aoi.results): pairing runs by seed
and the per-split paired table built from the statistics of aoi_fl.pipeline.paired."""

import numpy as np
import pandas as pd
import pytest

from aoi_fl.aoi import markov, samplers, sigma
from aoi_fl.evidence.aoi import results
from aoi_fl.evidence.aoi.results import final_accuracy_table, paired_differences, paired_table
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
    # the paper's 6 of 45 rounds scaled to our random mean: the value the verdict tests against
    assert row["claimed difference"] == pytest.approx(-6 / 45 * 45)
    later = runs_of("iid", "markov_optimal", fast) + runs_of(
        "iid", "random", {s: r + 10 for s, r in slow.items()}
    )
    assert paired_table(later, 0.97, paper, "mnist").loc["iid", "claimed difference"] == (
        pytest.approx(-6 / 45 * 55)
    )
    # noniid: a run missed the target, so nothing is estimated; the paper gives no number
    row = table.loc["noniid"]
    assert (row["n"], row["reached"]) == (2, "1/2") and pd.isna(row["verdict"])
    assert np.isnan(row["t 95% low"]) and np.isnan(row["paper random"])
    assert paired_table(results, 0.97)["verdict"].isna().all()


def test_a_substitute_can_make_a_claim_neither_held_nor_not_held():
    # Markov optimal one round slower in every seed against a claimed 6-round speed-up: "not
    # held" under the paper's conditions, "inconclusive at this budget" for a substitute model
    pair = runs_of("iid", "markov_optimal", {0: 46, 1: 45, 2: 47}) + runs_of(
        "iid", "random", {0: 45, 1: 44, 2: 46}
    )
    paper = {("mnist", "iid"): {"markov_optimal": 39, "random": 45}}
    assert paired_table(pair, 0.97, paper, "mnist").loc["iid", "verdict"] == "not held"
    capped = paired_table(pair, 0.97, paper, "mnist", substitute=True)
    assert capped.loc["iid", "verdict"] == "inconclusive at this budget"
    assert capped.loc["iid", "criterion verdict"] == "not held"
    # nor held: a 6-round speed-up in every seed holds the claim with the paper's model only
    fast = runs_of("iid", "markov_optimal", {0: 39, 1: 38, 2: 40}) + runs_of(
        "iid", "random", {0: 45, 1: 44, 2: 46}
    )
    assert paired_table(fast, 0.97, paper, "mnist").loc["iid", "verdict"] == "held"
    sub = paired_table(fast, 0.97, paper, "mnist", substitute=True).loc["iid"]
    assert (sub["criterion verdict"], sub["verdict"]) == ("held", "inconclusive at this budget")
    assert results.substitute_verdict("held (smaller effect than claimed)") == (
        "inconclusive at this budget"
    )
    # outside the regime more seeds would not decide it either: the budget, not the power
    assert results.substitute_verdict("inconclusive at this power") == (
        "inconclusive at this budget"
    )
    assert results.substitute_verdict("inconclusive") == "inconclusive"
    assert results.substitute_verdict(None) is None
    # which runs are substitutes: another model than the paper's for the dataset
    for run in pair:
        run.config["model"] = {"name": "mcmahan_cnn"}
    assert not results.substitute_model(pair, "mnist")
    pair[0].config["model"] = {"name": "small_cnn"}
    assert results.substitute_model(pair, "mnist")


def curve_run(split, policy, seed, accuracy, rounds=None):
    """A FakeRun with an accuracy curve (evaluated at rounds 0, 1, ... unless ``rounds``)."""
    run = FakeRun(split, policy, seed, None)
    rounds = range(len(accuracy)) if rounds is None else rounds
    run.history = {"eval_round": list(rounds), "test_accuracy": list(accuracy)}
    return run


def test_final_accuracy_table_averages_each_seeds_tail_then_over_seeds():
    """Hand-computed: per seed the mean of the last ``last`` accuracies, then the mean and the
    sample sd (n - 1) of those over the seeds. Catches a tail taken from the start of the curve
    or of the wrong length, a ``last`` longer than the curve not meaning "all of it", an sd
    over all (seed, round) values or with divisor n, seeds or groups mixed up, and a group of
    one seed given an sd of 0 instead of NaN."""
    results = [
        curve_run("iid", "random", 1, [0.10, 0.50, 0.60, 0.80]),  # out of seed order
        curve_run("iid", "random", 0, [0.20, 0.40, 0.80, 1.00]),
        curve_run("iid", "markov_optimal", 0, [0.30, 0.60, 0.90, 0.90]),
        curve_run("iid", "markov_optimal", 1, [0.30, 0.50, 0.70, 0.80]),
        curve_run("iid", "markov_optimal", 2, [0.20, 0.50, 0.60, 0.60]),
        curve_run("noniid", "random", 0, [0.10, 0.20, 0.30, 0.50]),
    ]
    table = final_accuracy_table(results, last=2)
    assert list(table.index) == [
        ("iid", "markov_optimal"),
        ("iid", "random"),
        ("noniid", "random"),
    ]
    assert list(table.columns) == ["final accuracy", "sd over seeds"]
    # iid/random: tails (0.8 + 1.0)/2 = 0.9 and (0.6 + 0.8)/2 = 0.7 -> mean 0.8, sd 0.2/sqrt 2
    assert table.loc[("iid", "random"), "final accuracy"] == pytest.approx(0.8)
    assert table.loc[("iid", "random"), "sd over seeds"] == pytest.approx(0.2 / np.sqrt(2))
    # iid/markov_optimal: tails 0.9, 0.75, 0.6 -> mean 0.75; deviations +-0.15 and 0, so the
    # sample variance is 2 * 0.15^2 / 2 and the sd 0.15 (divisor n would give 0.1225)
    assert table.loc[("iid", "markov_optimal"), "final accuracy"] == pytest.approx(0.75)
    assert table.loc[("iid", "markov_optimal"), "sd over seeds"] == pytest.approx(0.15)
    # noniid/random: one seed, tail (0.3 + 0.5)/2 = 0.4, no sd
    assert table.loc[("noniid", "random"), "final accuracy"] == pytest.approx(0.4)
    assert np.isnan(table.loc[("noniid", "random"), "sd over seeds"])
    # last=1: the final evaluations; the default last=5 exceeds the 4 evaluations: all of them
    assert final_accuracy_table(results, last=1).loc[
        ("iid", "random"), "final accuracy"
    ] == pytest.approx((1.0 + 0.8) / 2)
    everything = final_accuracy_table(results)
    assert everything.loc[("iid", "random"), "final accuracy"] == pytest.approx((0.6 + 0.5) / 2)
    assert everything.loc[("iid", "random"), "sd over seeds"] == pytest.approx(0.1 / np.sqrt(2))


def test_final_accuracy_table_of_screened_runs_uses_the_common_evaluations():
    """Screened runs share the schedule 0, 5, 10, ... and add seed-dependent rounds near the
    target (here 12 and 11): the last 2 *common* evaluations are rounds 15 and 20. (The table
    used to require identical rounds and raised on every screened panel.)"""
    results = [
        curve_run("iid", "random", 0, [0.1, 0.5, 0.7, 0.80, 0.9, 0.9], [0, 5, 10, 12, 15, 20]),
        curve_run("iid", "random", 1, [0.1, 0.4, 0.6, 0.75, 0.8, 1.0], [0, 5, 10, 11, 15, 20]),
    ]
    table = final_accuracy_table(results, last=2)
    # tails (0.9 + 0.9)/2 = 0.9 and (0.8 + 1.0)/2 = 0.9 -> mean 0.9, sd 0
    assert table.loc[("iid", "random"), "final accuracy"] == pytest.approx(0.9)
    assert table.loc[("iid", "random"), "sd over seeds"] == pytest.approx(0.0)


@pytest.mark.parametrize(
    "policy", ["random", "probabilistic", "markov_optimal", "markov_nonoptimal"]
)
def test_a_long_trace_agrees_with_its_policy_theory(policy):
    from aoi_fl.aoi import samplers

    def build():
        # unequal sizes (Policies 1-2 weight by size), moderately: the rarest client's intervals
        # must fit the trace many times over, or the trace undercounts the long ones. m' = 3 < the
        # mean interval 5 keeps the Markov chains random: with Theorem 1's deterministic
        # intervals every client keeps its phase, and one trace cannot average over phases as
        # Theorem 5's expectation does
        sizes = np.linspace(1.0, 3.0, 20)
        return samplers.make_sampler(policy, n=20, m=4, m_prime=3, sizes=sizes, seed=3)

    sampler = build()
    trace = [sampler.sample() for _ in range(6000)]
    table = results.participation_table(
        build(), [s.ids.tolist() for s in trace], [s.weights.tolist() for s in trace]
    )
    # Monte Carlo over ~24,000 intervals: a few percent of relative error
    np.testing.assert_allclose(
        table.loc["Var[X]", "trace"], table.loc["Var[X]", "theory"], rtol=0.08
    )
    np.testing.assert_allclose(table.loc["Sigma", "trace"], table.loc["Sigma", "theory"], rtol=0.05)
    assert table.loc["largest interval", "trace"] <= table.loc["largest interval", "theory"]
    assert table["intervals"].iloc[0] > 20000


def test_policy_theory_refuses_other_samplers():
    from aoi_fl.pipeline.runs import SAMPLERS

    uniform = SAMPLERS["uniform"](10, np.ones(10), s=2, seed=0)
    with pytest.raises(ValueError, match="not one of the AoI paper's policies"):
        results.policy_theory(uniform)


def test_sigma_closed_forms_are_theorems_3_to_5():
    sizes = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0])
    closed = results.sigma_closed_forms(sizes, 3, 4)
    assert list(closed) == list(samplers.POLICIES)
    assert closed["random"] == sigma.sigma_random(sizes, 3)
    assert closed["probabilistic"] == sigma.sigma_probabilistic(sizes, 3)
    assert closed["markov_optimal"] == sigma.sigma_markov(
        10, markov.selection_rate(markov.optimal_p(10, 3, 4))
    )
    assert closed["markov_nonoptimal"] == pytest.approx(sigma.sigma_markov(10, 0.3), rel=1e-12)


def test_theorem1_and_optimiser_tables():
    grid = ((100, 15, 10), (100, 15, 3), (100, 20, 10))
    theorem1 = results.theorem1_table(grid)
    assert theorem1["case"].tolist() == [2, 1, 2]  # case 1 when m' <= floor(n/m) - 1
    np.testing.assert_allclose(theorem1["closed form"], theorem1["chain Var[X]"], atol=1e-12)
    assert theorem1["pi_0 = m/n"].all()
    assert (theorem1["chain Var[X]"] <= theorem1["random Var[X]"]).all()
    optimiser = results.optimiser_table(3, grid[:1])
    assert optimiser["optimiser = closed form"].all() and optimiser["pi_0 = m/n"].all()
    assert not optimiser["optimiser below it"].any()


def test_complete_pairs_keeps_the_seeds_where_every_policy_is_cached():
    from types import SimpleNamespace

    def run(split, policy, seed):
        partition = {"name": "iid" if split == "iid" else "dirichlet"}
        config = {"partition": partition, "training": {"seed": seed}, "sampler": {"name": policy}}
        return SimpleNamespace(config=config)

    runs = [
        run("iid", "random", 0),
        run("iid", "markov_optimal", 0),
        run("iid", "random", 1),  # its pair is missing
        run("noniid", "markov_optimal", 0),
        run("noniid", "random", 0),
        run("noniid", "probabilistic", 0),  # not one of the pair
    ]
    kept = results.complete_pairs(runs, ("random", "markov_optimal"))
    assert kept == [runs[0], runs[1], runs[3], runs[4]]
    assert results.complete_pairs(runs, ("random", "oort")) == []
