"""The arena's tables on small hand-built frames (:mod:`aoi_fl.evidence.arena.results`).

Each frame has the columns :func:`aoi_fl.evidence.arena.results.run_row` produces. A comparison's
interval and minimum detectable effect are those of :mod:`aoi_fl.pipeline.paired` on the paired
differences; its word follows the interval's side of 0 and the measure's direction (rounds: lower
is better; accuracies: higher is better). Separation is Friedman's chi-square, which is largest,
r (k - 1), when every seed orders the k policies the same way.
"""

import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from aoi_fl.core.seeding import generator
from aoi_fl.evidence.arena import experiments as ex
from aoi_fl.evidence.arena import results as ar
from aoi_fl.pipeline.paired import minimum_detectable_effect, paired_interval

BETTER, WORSE, NO_DIFFERENCE, CENSORED = ar.WORDS


def row(policy, seed, rounds=50, *, availability="bernoulli", censored=False, **extra):
    """One run's row as :func:`aoi_fl.evidence.arena.results.run_row` lays it out."""
    out = {
        "availability": availability,
        "policy": policy,
        "seed": seed,
        "rounds": 200,
        "n": 100,
        "m": 10,
        "jain": 0.9,
        "interval_mean": 10.0,
        "interval_var": 4.0,
        "tau_max": 40,
        "tau_avg": 5.0,
        "sigma": 0.1,
        "rounds_short": 0,
        "mean_participants": 10.0,
        "mean_available": 33.0,
        "target": 0.78,
        "rounds_to_target": rounds,
        "final_accuracy": 0.8,
        "worst_share": 0.1,
        "worst_clients_accuracy": 0.5,
        "censored": censored,
    }
    out.update(extra)
    return out


def frame_of(values, column="rounds_to_target", availability="bernoulli"):
    """{policy: {seed: value}} as a frame (the other measures at their defaults)."""
    return pd.DataFrame(
        [
            row(policy, seed, availability=availability, **{column: value})
            for policy, by_seed in values.items()
            for seed, value in by_seed.items()
        ]
    )


def word_rule(low, high, lower_better):
    """The word a comparison must carry: the interval's side of 0 and the measure's direction."""
    if high < 0:
        return BETTER if lower_better else WORSE
    if low > 0:
        return WORSE if lower_better else BETTER
    return NO_DIFFERENCE


# ------------------------------------------------------------------------ compare


@pytest.mark.parametrize(
    ("measure", "column", "shift", "word"),
    [
        ("rounds", "rounds_to_target", -3, BETTER),
        ("rounds", "rounds_to_target", 3, WORSE),
        ("final", "final_accuracy", 0.125, BETTER),
        ("final", "final_accuracy", -0.125, WORSE),
        ("worst", "worst_clients_accuracy", 0.25, BETTER),
        ("worst", "worst_clients_accuracy", -0.25, WORSE),
    ],
)
def test_constant_differences_decide_by_the_measures_direction(measure, column, shift, word):
    if measure == "rounds":
        base = {0: 40, 1: 55, 2: 47, 3: 61}
    else:  # binary fractions: the differences are exactly ``shift``
        base = {0: 0.5, 1: 0.25, 2: 0.375, 3: 0.625}
    frame = frame_of({"uniform": base, "oort": {s: v + shift for s, v in base.items()}}, column)
    c = ar.compare(frame, "oort", "uniform", measure)
    assert (c.policy, c.reference, c.measure, c.n) == ("oort", "uniform", measure, 4)
    assert c.mean == c.low == c.high == shift  # no spread: the interval is the point
    assert c.mde == 0.0 and c.censored == 0
    assert c.word == word
    assert "MDE" not in c.text() and word in c.text()


def test_identical_runs_are_no_difference_with_a_zero_mde():
    base = {0: 40, 1: 55, 2: 47}
    c = ar.compare(frame_of({"uniform": base, "oort": base}), "oort", "uniform")
    assert (c.mean, c.low, c.high, c.mde, c.word) == (0.0, 0.0, 0.0, 0.0, NO_DIFFERENCE)
    assert c.text().endswith("(MDE 0)")


def test_mixed_signs_that_straddle_zero_are_no_difference_with_the_mde():
    diffs = np.array([5.0, -5.0, 3.0, -3.0])  # mean 0
    base = {s: 100 for s in range(4)}
    frame = frame_of({"uniform": base, "vrb": {s: 100 + d for s, d in enumerate(diffs)}})
    c = ar.compare(frame, "vrb", "uniform")
    ci = paired_interval(diffs)
    assert c.word == NO_DIFFERENCE and c.low < 0 < c.high
    assert (c.mean, c.low, c.high) == pytest.approx((0.0, ci.low, ci.high))
    assert c.mde == pytest.approx(minimum_detectable_effect(ci.sd, 4)) and c.mde > 0
    assert c.text().endswith(f"{NO_DIFFERENCE} (MDE {c.mde:.3g})")


@pytest.mark.parametrize(
    ("measure", "column", "word"),
    [("rounds", "rounds_to_target", WORSE), ("final", "final_accuracy", BETTER)],
)
def test_mixed_signs_above_zero_are_decided(measure, column, word):
    # one seed goes the other way, but the 95% interval [3.5, 13.5] lies above 0
    diffs = [10, 12, 11, -1, 9, 10]
    base = {s: 100 for s in range(6)}
    frame = frame_of({"uniform": base, "kvib": {s: 100 + d for s, d in enumerate(diffs)}}, column)
    c = ar.compare(frame, "kvib", "uniform", measure)
    ci = paired_interval(diffs)
    assert c.low > 0 and (c.low, c.high) == pytest.approx((ci.low, ci.high))
    assert c.word == word


def test_only_seeds_both_policies_have_are_paired():
    a = {0: 30, 1: 31, 2: 35, 3: 40, 4: 41}
    r = {2: 30, 3: 36, 4: 33, 5: 10, 6: 90}
    frame = frame_of({"mabs": a, "uniform": r, "oort": {s: 1 for s in range(7)}})
    shuffled = frame.iloc[generator(0, "test arena rows").permutation(len(frame))]
    for f in (frame, shuffled):
        c = ar.compare(f, "mabs", "uniform")
        ci = paired_interval([a[s] - r[s] for s in (2, 3, 4)])
        assert c.n == 3
        assert (c.mean, c.low, c.high) == pytest.approx((ci.mean, ci.low, ci.high), rel=1e-12)


def test_fewer_than_two_common_seeds_give_none():
    frame = frame_of({"mabs": {0: 3, 1: 4}, "uniform": {1: 5, 2: 6}})
    assert ar.compare(frame, "mabs", "uniform") is None  # one common seed
    assert ar.compare(frame, "oort", "uniform") is None  # a policy without runs
    assert ar.compare(frame.iloc[:0], "mabs", "uniform") is None


def test_censored_runs_of_the_paired_seeds_are_counted():
    frame = pd.DataFrame(
        [row("oort", s, 200 if s in (0, 9) else 40 + s, censored=s in (0, 9)) for s in (0, 1, 2, 9)]
        + [row("uniform", s, 200 if s == 1 else 50, censored=s == 1) for s in (0, 1, 2, 3)]
    )
    c = ar.compare(frame, "oort", "uniform")
    assert c.n == 3 and c.censored == 2  # seed 9 is not paired
    # a run counted at the horizon decides nothing about speed, whatever the interval says
    assert c.word == CENSORED and c.text().endswith(CENSORED)
    assert ar.compare(frame, "uniform", "oort").censored == 2
    # an accuracy comparison of the same runs is decided as usual, and says how many were short
    final = ar.compare(frame, "oort", "uniform", "final")
    assert final.word != CENSORED and final.text().endswith(
        "; 2 run(s) below the target at the end"
    )


def test_compare_refuses_rows_of_several_availability_models():
    frame = pd.DataFrame(
        [
            row(p, s, 40 + s, availability=a)
            for p in ("oort", "uniform")
            for s in (0, 1)
            for a in ("bernoulli", "diurnal")
        ]
    )
    with pytest.raises(ValueError, match="one availability model; got rows of"):
        ar.compare(frame, "oort", "uniform")


def test_an_unknown_measure_is_refused_with_the_valid_ones():
    frame = frame_of({"oort": {0: 1, 1: 2}, "uniform": {0: 1, 1: 3}})
    with pytest.raises(ValueError, match="measure 'speed'; valid: final, rounds, worst"):
        ar.compare(frame, "oort", "uniform", "speed")


def _paired(n):
    # the policy's values are the reference's plus a common shift and per-seed noise, so that
    # the examples hold decided comparisons (either side) as well as undecided ones
    values = st.lists(st.integers(80, 140), min_size=n, max_size=n)  # all in [10, 210]
    noise = st.lists(st.integers(-20, 20), min_size=n, max_size=n)
    censored = st.lists(st.booleans(), min_size=n, max_size=n)
    return st.tuples(values, st.integers(-50, 50), noise, censored).map(
        lambda v: ([x + v[1] + e for x, e in zip(v[0], v[2], strict=True)], v[0], v[3])
    )


paired_values = st.integers(2, 8).flatmap(_paired)


@settings(max_examples=60, deadline=None)
@given(paired_values, st.sampled_from(sorted(ar.MEASURES)))
def test_compare_is_the_paired_interval_of_the_differences(values, measure):
    a, r, censored = values
    column, lower_better, _ = ar.MEASURES[measure]
    scale = 1 if measure == "rounds" else 1 / 256  # accuracies in (0, 1]
    seeds = range(len(a))
    frame = pd.DataFrame(
        [row("oort", s, **{column: a[s] * scale}, censored=censored[s]) for s in seeds]
        + [row("uniform", s, **{column: r[s] * scale}) for s in seeds]
    )
    c = ar.compare(frame, "oort", "uniform", measure)
    ci = paired_interval([(x - y) * scale for x, y in zip(a, r, strict=True)])
    assert c.n == ci.n == len(a) and c.censored == sum(censored)
    assert (c.mean, c.low, c.high) == pytest.approx((ci.mean, ci.low, ci.high), rel=1e-12)
    assert c.mde == pytest.approx(minimum_detectable_effect(ci.sd, ci.n), rel=1e-12)
    if measure == "rounds" and any(censored):
        assert c.word == CENSORED
    else:
        assert c.word == word_rule(c.low, c.high, lower_better)


@settings(max_examples=60, deadline=None)
@given(paired_values, st.sampled_from(sorted(ar.MEASURES)))
def test_swapping_policy_and_reference_mirrors_the_comparison(values, measure):
    a, r, _ = values
    column = ar.MEASURES[measure][0]
    scale = 1 if measure == "rounds" else 1 / 256
    frame = frame_of(
        {
            "oort": dict(enumerate(np.multiply(a, scale))),
            "uniform": dict(enumerate(np.multiply(r, scale))),
        },
        column,
    )
    forward = ar.compare(frame, "oort", "uniform", measure)
    back = ar.compare(frame, "uniform", "oort", measure)
    assert back.mean == -forward.mean
    assert (back.low, back.high) == pytest.approx((-forward.high, -forward.low), rel=1e-12)
    assert back.mde == pytest.approx(forward.mde) and back.n == forward.n
    swap = {BETTER: WORSE, WORSE: BETTER, NO_DIFFERENCE: NO_DIFFERENCE}
    assert back.word == swap[forward.word]


# ------------------------------------------------------------------------ leaderboard


def board_frame(column="rounds_to_target", spread=1):
    """Five policies with distinct means on ``column``; uniform and markov_optimal among them."""
    means = {"uniform": 60, "markov_optimal": 45, "oort": 30, "kvib": 75, "random": 52}
    rng = generator(1, "test arena leaderboard")
    rows = []
    for policy, mean in means.items():
        for seed in range(4):
            value = mean + int(rng.integers(-spread, spread + 1))
            if column != "rounds_to_target":
                value /= 100
            rows.append(row(policy, seed, **{column: value}))
    return pd.DataFrame(rows), means


@pytest.mark.parametrize(
    ("measure", "column"),
    [
        ("rounds", "rounds_to_target"),
        ("final", "final_accuracy"),
        ("worst", "worst_clients_accuracy"),
    ],
)
def test_leaderboard_is_best_first_and_marks_the_references(measure, column):
    frame, means = board_frame(column)
    table = ar.leaderboard(frame, measure)
    lower_better = ar.MEASURES[measure][1]
    expected = sorted(means, key=means.get, reverse=not lower_better)
    assert table.index.tolist() == expected
    values = table[column].to_numpy()
    assert (np.diff(values) >= 0).all() if lower_better else (np.diff(values) <= 0).all()
    assert table.loc["uniform", "vs uniform"] == "(reference)"
    assert table.loc["markov_optimal", "vs markov_optimal"] == "(reference)"
    for policy in table.index:
        assert table.loc[policy, "seeds"] == 4 and table.loc[policy, "censored"] == 0
        for reference in ex.REFERENCES:
            if policy != reference:
                c = ar.compare(frame, policy, reference, measure)
                assert table.loc[policy, f"vs {reference}"] == c.text()
    assert table.loc["oort", column] == pytest.approx(frame[frame.policy == "oort"][column].mean())


def test_leaderboard_counts_seeds_and_censored_runs_and_says_when_unpaired():
    frame = pd.DataFrame(
        [row("uniform", s, 200, censored=True) for s in range(3)]
        + [row("markov_optimal", s, 40) for s in range(3)]
        + [row("oort", 0, 10)]
    )
    table = ar.leaderboard(frame)
    assert table.index.tolist() == ["oort", "markov_optimal", "uniform"]
    assert table["seeds"].to_dict() == {"oort": 1, "markov_optimal": 3, "uniform": 3}
    assert table["censored"].to_dict() == {"oort": 0, "markov_optimal": 0, "uniform": 3}
    assert table.loc["oort", "vs uniform"] == "fewer than 2 paired seeds"
    assert table.loc["markov_optimal", "vs uniform"].endswith(CENSORED)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(sorted(ar.MEASURES)))
def test_leaderboard_sorts_any_frame(seed, measure):
    column, lower_better, _ = ar.MEASURES[measure]
    rng = generator(seed, "test arena leaderboard order")
    policies = ["uniform", "markov_optimal", "oort", "vrb"]
    frame = pd.DataFrame(
        [row(p, s, **{column: float(rng.integers(1, 20))}) for p in policies for s in range(3)]
    )
    values = ar.leaderboard(frame, measure)[column].to_numpy()
    assert (np.diff(values) >= 0).all() if lower_better else (np.diff(values) <= 0).all()


# ------------------------------------------------------------------------ ranks, best others


def rank_frame(column="rounds_to_target"):
    values = {
        ("a", 0): {"x": 10, "y": 20, "z": 30},
        ("a", 1): {"x": 20, "y": 20, "z": 10},  # x and y tie: 2.5 each
        ("b", 0): {"x": 5, "y": 5, "z": 5},  # all tie: 2 each (seed 0 again, another model)
    }
    return pd.DataFrame(
        [
            row(p, seed, availability=model, **{column: v})
            for (model, seed), by_policy in values.items()
            for p, v in by_policy.items()
        ]
    )


def test_mean_ranks_average_ties_within_each_model_and_seed():
    ranks = ar.mean_ranks(rank_frame())
    assert ranks.index.tolist() == ["x", "z", "y"]
    assert ranks.to_dict() == pytest.approx({"x": 11 / 6, "z": 2.0, "y": 13 / 6})


def test_mean_ranks_of_an_accuracy_rank_the_highest_first():
    ranks = ar.mean_ranks(rank_frame("final_accuracy"), "final")
    # a/0: z 1, y 2, x 3; a/1: x and y tie for best (1.5 each), z 3; b/0: 2 each
    assert ranks.index.tolist() == ["y", "z", "x"]
    assert ranks.to_dict() == pytest.approx({"y": 11 / 6, "z": 2.0, "x": 13 / 6})


def test_best_others_skip_the_fixed_entrants():
    order = ["uniform", "markov_optimal", "oort", "random", "vrb", "kvib", "mabs"]
    frame = pd.DataFrame(
        [
            row(p, s, 10 + i, availability=m)
            for i, p in enumerate(order)
            for s in range(2)
            for m in ("always", "diurnal")
        ]
    )
    assert ar.best_others(frame) == ("oort", "vrb", "kvib")
    assert ar.best_others(frame, k=1) == ("oort",)
    assert ar.best_others(frame, k=10) == ("oort", "vrb", "kvib", "mabs")


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_best_others_are_the_best_ranked_non_fixed_policies(seed):
    rng = generator(seed, "test arena best others")
    frame = pd.DataFrame(
        [
            row(p, s, int(rng.integers(1, 10)), availability=m)
            for p in ex.POLICIES
            for s in range(2)
            for m in ("always", "bernoulli")
        ]
    )
    best = ar.best_others(frame)
    assert len(best) == 3 and not set(best) & set(ex.CONFIRM_FIXED)
    ranks = ar.mean_ranks(frame)
    others = ranks.drop(list(ex.CONFIRM_FIXED))
    assert ranks[list(best)].max() <= others.drop(list(best)).min()


# ------------------------------------------------------------------------ separation


def ordered_frame(orders, availability="bernoulli"):
    """One seed per entry of ``orders`` (the policies fastest first): rounds 10, 20, ..."""
    return pd.DataFrame(
        [
            row(p, seed, 10 * (place + 1), availability=availability)
            for seed, order in enumerate(orders)
            for place, p in enumerate(order)
        ]
    )


POLICIES5 = ("uniform", "markov_optimal", "oort", "kvib", "vrb")


def random_orders(seed, seeds=8, first=None):
    rng = generator(seed, "test arena orders")
    out = []
    for _ in range(seeds):
        rest = [p for p in POLICIES5 if p != first]
        order = [rest[i] for i in rng.permutation(len(rest))]
        out.append(([first] if first else []) + order)
    return out


def test_one_policy_always_fastest_separates_more_than_random_orders():
    k, r = len(POLICIES5), 8
    always_first = ordered_frame(random_orders(3, r, first="oort"), "markov_onoff")
    shuffled = ordered_frame(random_orders(3, r), "diurnal")
    same = ordered_frame([POLICIES5] * r, "bernoulli")
    chi2 = ar.separation(pd.concat([always_first, shuffled, same]))
    assert chi2.index.tolist() == ["markov_onoff", "diurnal", "bernoulli"]
    assert chi2["bernoulli"] == pytest.approx(r * (k - 1))  # the largest possible
    assert chi2["bernoulli"] >= chi2["markov_onoff"] > chi2["diurnal"]
    wide = shuffled.pivot_table(index="seed", columns="policy", values="rounds_to_target")
    assert chi2["diurnal"] == pytest.approx(stats.friedmanchisquare(*wide.to_numpy().T).statistic)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_a_policy_always_fastest_gives_at_least_the_bound(seed):
    # one policy ranked 1 in each of r seeds: rank sums r and, at best for the others, r (k + 2) / 2
    # each, so chi2 >= 12 / (r k (k + 1)) (r^2 + (k - 1) r^2 (k + 2)^2 / 4) - 3 r (k + 1)
    k, r = len(POLICIES5), 8
    bound = 12 / (r * k * (k + 1)) * (r**2 + (k - 1) * (r * (k + 2) / 2) ** 2) - 3 * r * (k + 1)
    chi2 = ar.separation(ordered_frame(random_orders(seed, r, first="vrb")))["bernoulli"]
    assert chi2 >= bound - 1e-9 and bound == pytest.approx(16.0)


def test_separation_is_nan_for_ties_too_few_seeds_or_policies():
    tied = pd.DataFrame(
        [row(p, s, 200, availability="diurnal") for p in POLICIES5 for s in range(4)]
    )
    one_seed = ordered_frame([POLICIES5], "markov_onoff")
    two = ordered_frame([POLICIES5[:2], POLICIES5[1::-1], POLICIES5[:2]], "bernoulli_size")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NaN by the rule, not by a division by zero
        chi2 = ar.separation(pd.concat([tied, one_seed, two]))
    assert chi2.isna().all() and len(chi2) == 3


def test_separation_uses_only_the_seeds_where_every_policy_ran():
    orders = random_orders(5, 6)
    full = ordered_frame(orders)
    gap = full[~((full.seed == 2) & (full.policy == "kvib"))]  # seed 2 is incomplete
    complete = ordered_frame([o for s, o in enumerate(orders) if s != 2])
    assert ar.separation(gap)["bernoulli"] == pytest.approx(ar.separation(complete)["bernoulli"])


def test_most_separating_ignores_full_availability():
    r = 6
    frame = pd.concat(
        [
            ordered_frame([POLICIES5] * r, "always"),  # the largest, but not partial
            ordered_frame(random_orders(7, r), "bernoulli"),
            ordered_frame(random_orders(7, r, first="oort"), "diurnal"),
        ]
    )
    chi2 = ar.separation(frame)
    assert chi2["always"] > chi2["diurnal"] > chi2["bernoulli"]
    assert ar.most_separating(frame) == "diurnal"


def test_most_separating_falls_back_to_the_first_partial_model():
    first = next(name for name in ex.AVAILABILITY if name != "always")
    ties = pd.concat(
        [
            pd.DataFrame([row(p, s, 4, availability=m) for p in POLICIES5 for s in range(2)])
            for m in ("diurnal", "markov_onoff")
        ]
        + [ordered_frame([POLICIES5] * 3, "always")]
    )
    assert ar.separation(ties)[["diurnal", "markov_onoff"]].isna().all()
    assert ar.most_separating(ties) == first == "bernoulli"
    assert ar.most_separating(ordered_frame([POLICIES5] * 3, "always")) == first


# ------------------------------------------------------------------------ comparisons, run_row


def test_comparisons_hold_every_policy_against_each_reference_per_model():
    rng = generator(2, "test arena comparisons")
    policies = ["uniform", "markov_optimal", "oort", "vrb"]
    frame = pd.DataFrame(
        [
            row(p, s, int(rng.integers(20, 60)), availability=m)
            for m in ("always", "diurnal")
            for p in policies
            for s in range(3)
        ]
        + [row("mabs", 0, 10, availability="diurnal")]  # one seed: no comparison
    )
    table = ar.comparisons(frame)
    assert len(table) == 2 * 2 * 3
    assert not (table.policy == table.reference).any() and "mabs" not in set(table.policy)
    for r in table.itertuples():
        c = ar.compare(frame[frame.availability == r.availability], r.policy, r.reference)
        assert (r.mean, r.low, r.high, r.word, r.n) == (c.mean, c.low, c.high, c.word, c.n)


def history(accuracy, n=20, m=4, rounds=4):
    ids = [list(range(t, t + m)) for t in range(rounds)]
    return {
        "selected": ids,
        "weights": [[1 / m] * m for _ in ids],
        "eval_round": list(range(rounds + 1)),
        "test_accuracy": accuracy,
        "available": [10, 9, 8, 7][:rounds],
        "client_accuracy": [[0.05 * i for i in range(n)]],
    }


@pytest.mark.parametrize("availability", sorted(ex.AVAILABILITY))
def test_run_row_names_the_run_and_censors_at_the_horizon(availability):
    config = ex.config("markov_optimal", availability, 1, profile="smoke")
    reached = ar.run_row(
        SimpleNamespace(config=config, history=history([0.1, 0.5, 0.8, 0.7, 0.9])),
        "screen",
        "smoke",
    )
    assert (reached["availability"], reached["policy"], reached["seed"]) == (
        availability,
        "markov_optimal",
        1,
    )
    assert reached["rounds_to_target"] == 2 and reached["censored"] is False
    assert reached["mean_available"] == pytest.approx(8.5)
    assert reached["final_accuracy"] == pytest.approx(np.mean([0.1, 0.5, 0.8, 0.7, 0.9]))
    never = ar.run_row(
        SimpleNamespace(config=config, history=history([0.1, 0.5, 0.7, 0.7, 0.77])),
        "screen",
        "smoke",
    )
    rounds = ex.tier_settings("screen", "smoke")["rounds"]
    assert never["rounds_to_target"] == rounds and never["censored"] is True
    assert set(reached) >= set(row("x", 0))


def test_run_row_of_a_resolved_config_without_availability_is_always():
    config = ex.config("uniform", "always", 0, profile="smoke")
    del config["availability"]  # how a resolved run without availability reads
    out = ar.run_row(SimpleNamespace(config=config, history=history([0.9] * 5)), "screen", "smoke")
    assert (out["availability"], out["policy"], out["rounds_to_target"]) == ("always", "uniform", 0)


def test_frame_holds_one_run_row_per_result():
    runs = [
        SimpleNamespace(
            config=ex.config(p, "diurnal", s, profile="smoke"), history=history([0.9] * 5)
        )
        for p in ("uniform", "oort")
        for s in range(2)
    ]
    table = ar.frame(runs, "screen", "smoke")
    assert table.to_dict("records") == [ar.run_row(r, "screen", "smoke") for r in runs]
    assert list(table.columns[:3]) == ["availability", "policy", "seed"]
    assert ar.frame([], "screen", "smoke").empty


def test_the_power_plan_sizes_each_comparison_from_its_paired_sd():
    # markov_optimal is a reference: vrb and oort are compared with it and with uniform
    base = {s: 100 for s in range(4)}
    frame = frame_of(
        {
            "uniform": base,
            "markov_optimal": {s: 100 + d for s, d in enumerate([1.0, -1.0, 1.0, -1.0])},
            "vrb": {s: 100 + d for s, d in enumerate([4.0, -4.0, 2.0, -2.0])},
        }
    )
    plan = ar.power_plan(frame, effect=1.0).set_index(["policy", "reference"])
    # one reference against the other (once), and vrb against both: the ledger's family
    assert len(plan) == 3
    sd = float(np.std([4.0, -4.0, 2.0, -2.0], ddof=1))
    vrb = plan.loc[("vrb", "uniform")]
    assert vrb["sd"] == pytest.approx(sd) and vrb["n"] == 4
    assert vrb["mde"] == pytest.approx(minimum_detectable_effect(sd, 4))
    # the fewest seeds whose MDE is at most 1 round, alone and at Holm's first step (0.05 / 3)
    n = int(vrb["seeds"])
    assert minimum_detectable_effect(sd, n) <= 1.0 < minimum_detectable_effect(sd, n - 1)
    strict = 1 - ar.FAMILY_ALPHA / 3
    m = int(vrb["seeds_holm"])
    assert (
        minimum_detectable_effect(sd, m, strict)
        <= 1.0
        < minimum_detectable_effect(sd, m - 1, strict)
    )
    assert m > n
    assert ar.power_plan(frame_of({"uniform": {0: 50}}), effect=1.0).empty
    # a family of fixed hypotheses: every policy against uniform only
    fixed = ar.power_plan(frame, effect=1.0, hypotheses=("uniform",))
    assert sorted(fixed.policy) == ["markov_optimal", "vrb"]
    assert (fixed.seeds_holm.to_numpy() <= plan.seeds_holm.max()).all()
