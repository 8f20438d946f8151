"""Participation and learning metrics of a run (aoi_fl.evidence.arena.participation): a
hand-computed trace, invariants against the dense reference functions of aoi_fl.core.stats, a
Monte-Carlo check against the closed forms of uniform m-of-n sampling, one real trainer history, and
every error message."""

import dataclasses
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chi2
from torch import nn

from aoi_fl.core.delays import delays
from aoi_fl.core.seeding import generator
from aoi_fl.core.selection import RandomWeighted
from aoi_fl.core.stats import empirical_sigma_from_matrix, intervals_from_matrix
from aoi_fl.core.tensors import TensorSplit
from aoi_fl.core.train import ConstantLR, FederatedData, FederatedTrainer, TrainSettings
from aoi_fl.evidence.arena.participation import (
    IntervalStats,
    RunMetrics,
    empirical_sigma,
    interval_stats,
    intervals,
    jain_index,
    rounds_short,
    run_metrics,
    selection_counts,
    worst_clients_accuracy,
)

# ---------------------------------------------------------------------------------------------
# A trace small enough to work out by hand: n = 3 clients, T = 6 rounds.
#
#   round      0       1     2       3    4       5
#   selected   {0,1}   {1}   {0,2}   {}   {1,2}   {0}
#   weights    .5 .5   1     .5 .5        .5 .5   1
#
# client 0: rounds 0, 2, 5 -> X = 2, 3;   client 1: rounds 0, 1, 4 -> X = 1, 3;
# client 2: rounds 2, 4 -> X = 2.  Pooled X = 1, 2, 2, 3, 3: mean 11/5, E[X^2] = 27/5,
# Var = 27/5 - 121/25 = 14/25.  Counts 3, 3, 2: Jain = 8^2 / (3 * 22) = 32/33.
# Last selections 5, 4, 4: final ages 0, 1, 1, so max_age = 1.
# tau_t (FedSUM eq. 4, unseen clients at a = -1): 1, 2, 1, 2, 2, 1 -> tau_max 2, tau_avg 3/2.
# Sigma, per client mean and E[w^2] over the 6 rounds (population variance):
#   client 0: w = .5 0 .5 0 0 1 -> 1/3, 1/4: Var = 5/36;  client 1: .5 1 0 0 .5 0 -> 5/36;
#   client 2: 0 0 .5 0 .5 0 -> 1/6, 1/12: Var = 2/36.   Sigma = 12/36 = 1/3.
# Rounds with fewer than m = 2 participants: rounds 1, 3, 5 -> 3.

N = 3
SELECTED = [[0, 1], [1], [0, 2], [], [1, 2], [0]]
WEIGHTS = [[0.5, 0.5], [1.0], [0.5, 0.5], [], [0.5, 0.5], [1.0]]


def hand_history(**extra):
    history = {
        "selected": SELECTED,
        "weights": WEIGHTS,
        "eval_round": [0, 3, 6],
        "test_accuracy": [0.1, 0.5, 0.7],
    }
    history.update(extra)
    return history


def test_hand_made_trace_counts_jain_intervals():
    np.testing.assert_array_equal(selection_counts(SELECTED, N), [3, 3, 2])
    assert jain_index([3, 3, 2]) == pytest.approx(32 / 33, rel=1e-15)
    np.testing.assert_array_equal(intervals(SELECTED, N), [1, 2, 2, 3, 3])
    stats = interval_stats(SELECTED, N)
    assert stats == IntervalStats(
        count=5,
        mean=pytest.approx(11 / 5),
        var=pytest.approx(14 / 25),
        p95=3.0,
        p99=3.0,
        max=3.0,
        never_selected=0,
        max_age=1,
    )


def test_hand_made_trace_sigma_and_short_rounds():
    assert empirical_sigma(SELECTED, WEIGHTS, N) == pytest.approx(1 / 3, rel=1e-12)
    assert rounds_short(SELECTED, 2) == 3
    assert rounds_short(SELECTED, 1) == 1  # the empty round 3
    assert rounds_short(SELECTED, 3) == 6


def test_hand_made_run_metrics():
    history = hand_history(available=[3, 2, 3, 0, 2, 1], client_accuracy=[[0.9, 0.2, 0.5]])
    metrics = run_metrics(history, N, 2, 0.5)
    assert metrics.counts == (3, 3, 2)
    assert metrics.rounds == 6
    assert metrics.jain == pytest.approx(32 / 33)
    assert metrics.intervals == interval_stats(SELECTED, N)
    assert (metrics.tau_max, metrics.tau_avg) == (2, 1.5)
    assert metrics.sigma == pytest.approx(1 / 3, rel=1e-12)
    assert metrics.rounds_short == 3
    assert metrics.mean_participants == pytest.approx(8 / 6)
    assert metrics.mean_available == pytest.approx(11 / 6)
    assert metrics.rounds_to_target == 3  # 0.5 is first reached at the evaluation after round 3
    assert metrics.final_accuracy == 0.7
    assert metrics.worst_clients_accuracy == 0.2  # ceil(0.1 * 3) = 1 client: the worst one
    assert run_metrics(history, N, 2, 0.75).rounds_to_target is None


def test_as_dict_is_one_flat_row_and_the_metrics_are_frozen():
    metrics = run_metrics(hand_history(), N, 2, 0.5)
    row = metrics.as_dict()
    assert "counts" not in row and "intervals" not in row
    assert row["interval_var"] == pytest.approx(14 / 25)
    assert row["never_selected"] == 0 and row["max_age"] == 1
    assert row["mean_available"] is None and row["worst_clients_accuracy"] is None
    assert all(v is None or isinstance(v, int | float) for v in row.values())
    expected = {f.name for f in dataclasses.fields(RunMetrics)} - {"counts", "intervals"}
    assert expected | set(metrics.intervals.as_dict()) == set(row)
    with pytest.raises(dataclasses.FrozenInstanceError):
        metrics.sigma = 0.0


def test_censored_waits_are_reported_apart_from_the_intervals():
    # client 2 is never selected, client 1 only once: neither has a complete interval
    selected = [[0], [0, 1], [], [0]]
    stats = interval_stats(selected, 3)
    np.testing.assert_array_equal(intervals(selected, 3), [1, 2])
    assert stats.never_selected == 1
    assert stats.max_age == 4  # client 2 aged through all 4 rounds (eq. 4 from A(0) = 0)


def test_a_trace_without_any_repeat_selection_has_nan_interval_statistics():
    stats = interval_stats([[0], [1], [2]], 4)
    assert stats.count == 0 and stats.never_selected == 1 and stats.max_age == 3
    assert all(math.isnan(v) for v in (stats.mean, stats.var, stats.p95, stats.p99, stats.max))


def test_a_run_where_nobody_was_selected_has_nan_jain_and_zero_sigma():
    history = {"selected": [[], []], "weights": [[], []], "eval_round": [0], "test_accuracy": [0.1]}
    metrics = run_metrics(history, 2, 1, 0.5)
    assert math.isnan(metrics.jain) and metrics.intervals.count == 0
    assert metrics.sigma == 0.0 and metrics.rounds_short == 2
    stats = metrics.intervals
    assert (metrics.tau_max, stats.max_age, stats.never_selected) == (2, 2, 2)


def test_tail_quantiles_are_observed_intervals():
    # 100 intervals: 1 x 95 and then 5 .. 9 once each
    selected = [[0] for _ in range(96)]
    for gap in range(5, 10):
        selected += [[] for _ in range(gap - 1)] + [[0]]
    gaps = intervals(selected, 1)
    assert gaps.size == 100 and list(gaps[-5:]) == [5, 6, 7, 8, 9]
    stats = interval_stats(selected, 1)
    # the 95th of 100 sorted values is the last 1; the 99th is 8
    assert (stats.p95, stats.p99, stats.max) == (1.0, 8.0, 9.0)


def test_jain_index_extremes():
    assert jain_index([4, 4, 4, 4]) == 1.0
    assert jain_index([0, 0, 7, 0]) == 0.25
    assert jain_index([1, 2, 3]) == pytest.approx(36 / 42)
    assert jain_index([5]) == 1.0


def test_worst_clients_accuracy():
    acc = [0.9, 0.1, 0.5, 0.3, 0.8, 0.2, 0.7, 0.6, 0.4, 1.0]
    assert worst_clients_accuracy(acc) == 0.1  # ceil(0.1 * 10) = 1
    assert worst_clients_accuracy(acc, 0.25) == pytest.approx(0.2)  # ceil(2.5) = 3: .1 .2 .3
    assert worst_clients_accuracy(acc, 1.0) == pytest.approx(np.mean(acc))
    # 0.1 * 30 is 3.0000000000000004 in floating point; the worst 10% of 30 is 3 clients
    thirty = np.linspace(0.0, 0.29, 30)
    assert worst_clients_accuracy(thirty, 0.1) == pytest.approx(0.01)
    assert worst_clients_accuracy([0.3, 0.4], 1e-12) == 0.3  # at least one client


def test_final_accuracy_is_none_when_the_last_evaluation_measured_none():
    history = hand_history(test_accuracy=[0.1, 0.6, None])
    metrics = run_metrics(history, N, 2, 0.5)
    assert metrics.final_accuracy is None and metrics.rounds_to_target == 3


def test_client_accuracy_record_without_its_entry_gives_none():
    # a run stopped before its last round has the record but not the entry
    assert run_metrics(hand_history(client_accuracy=[]), N, 2, 0.5).worst_clients_accuracy is None


# ---------------------------------------------------------------------------------------------
# Invariants on random traces


@st.composite
def traces(draw, max_n=6, max_rounds=10):
    n = draw(st.integers(1, max_n))
    rounds = draw(st.integers(1, max_rounds))
    selected = [sorted(draw(st.sets(st.integers(0, n - 1)))) for _ in range(rounds)]
    weight = st.floats(0.0, 1.0, allow_nan=False, allow_infinity=False)
    weights = [draw(st.lists(weight, min_size=len(ids), max_size=len(ids))) for ids in selected]
    return n, selected, weights


def dense(selected, weights, n):
    w = np.zeros((len(selected), n))
    chosen = np.zeros((len(selected), n))
    for t, (ids, ws) in enumerate(zip(selected, weights, strict=True)):
        w[t, ids] = ws
        chosen[t, ids] = 1.0
    return w, chosen


@settings(max_examples=60, deadline=None)
@given(traces())
def test_counts_and_intervals_agree_with_their_definitions(trace):
    n, selected, _ = trace
    counts = selection_counts(selected, n)
    assert counts.sum() == sum(len(ids) for ids in selected)
    gaps = intervals(selected, n)
    # every client selected c_i times closes c_i - 1 intervals, which add up to last - first
    assert gaps.size == np.maximum(counts - 1, 0).sum()
    rounds_of = [[t for t, ids in enumerate(selected) if i in ids] for i in range(n)]
    assert gaps.sum() == sum(r[-1] - r[0] for r in rounds_of if r)
    assert (gaps >= 1).all() and (gaps <= len(selected) - 1).all()
    assert (np.diff(gaps) >= 0).all()
    _, chosen = dense(selected, [[0.0] * len(ids) for ids in selected], n)
    np.testing.assert_array_equal(gaps, np.sort(intervals_from_matrix(chosen)))
    stats = interval_stats(selected, n)
    assert stats.never_selected == int((counts == 0).sum())
    assert stats.max_age == delays(selected, n)[-1]  # eq. 4's final age is FedSUM's tau_{T-1}
    if gaps.size:
        assert stats.mean == pytest.approx(gaps.mean()) and stats.var >= 0.0
        assert gaps.min() <= stats.p95 <= stats.p99 <= stats.max == gaps.max()
    assert 0 <= stats.max_age <= len(selected)


@settings(max_examples=60, deadline=None)
@given(traces())
def test_sigma_is_the_dense_sum_of_variances_and_order_free(trace):
    n, selected, weights = trace
    sigma = empirical_sigma(selected, weights, n)
    w, _ = dense(selected, weights, n)
    assert sigma >= 0.0
    assert sigma == pytest.approx(empirical_sigma_from_matrix(w), rel=1e-9, abs=1e-12)
    # a variance over rounds does not depend on the order of the rounds
    order = generator(0, "participation-test", len(selected)).permutation(len(selected))
    shuffled = empirical_sigma([selected[t] for t in order], [weights[t] for t in order], n)
    assert shuffled == pytest.approx(sigma, rel=1e-9, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 8), st.integers(1, 30), st.data())
def test_sigma_of_constant_weights_is_zero(n, rounds, data):
    # every client always in, each with its own fixed weight: nothing varies over rounds
    fixed = data.draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n))
    selected = [list(range(n))] * rounds
    assert empirical_sigma(selected, [fixed] * rounds, n) == pytest.approx(0.0, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(traces(), st.integers(1, 7))
def test_rounds_short_counts_rounds_below_m(trace, m):
    _, selected, _ = trace
    short = rounds_short(selected, m)
    assert short == sum(len(ids) < m for ids in selected)
    assert 0 <= short <= len(selected) and short <= rounds_short(selected, m + 1)


counts_lists = st.lists(st.integers(0, 1000), min_size=1, max_size=20).filter(any)


@settings(max_examples=100, deadline=None)
@given(counts_lists)
def test_jain_lies_between_one_over_n_and_one(counts):
    j = jain_index(counts)
    n = len(counts)
    assert 1.0 / n - 1e-12 <= j <= 1.0 + 1e-12
    assert jain_index([c * 3 for c in counts]) == pytest.approx(j)  # scale free
    # 1/J = 1 + CV^2, the squared coefficient of variation (population) of the counts
    x = np.asarray(counts, dtype=float)
    assert 1.0 / j == pytest.approx(1.0 + x.var() / x.mean() ** 2)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 1000), st.integers(1, 30))
def test_jain_is_one_for_equal_counts(count, n):
    assert jain_index([count] * n) == pytest.approx(1.0, rel=1e-15)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=40),
    st.floats(1e-6, 1.0, exclude_min=False),
)
def test_worst_clients_accuracy_is_the_mean_of_the_lowest_k(acc, share):
    value = worst_clients_accuracy(acc, share)
    k = max(1, math.ceil(round(share * len(acc), 9)))
    assert value == pytest.approx(np.mean(sorted(acc)[:k]))
    assert min(acc) <= value + 1e-12 and value <= np.mean(acc) + 1e-12


def clean(row):
    """``row`` with NaN (unequal to itself) replaced by a string, to compare rows."""
    return {k: ("nan" if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}


@settings(max_examples=40, deadline=None)
@given(traces(), st.floats(0.0, 1.0))
def test_run_metrics_agrees_with_the_single_metrics(trace, target):
    n, selected, weights = trace
    m = min(2, n)
    history = {
        "selected": selected,
        "weights": weights,
        "eval_round": list(range(len(selected) + 1)),
        "test_accuracy": [t / len(selected) for t in range(len(selected) + 1)],
    }
    metrics = run_metrics(history, n, m, target)
    counts = selection_counts(selected, n)
    assert metrics.counts == tuple(counts.tolist())
    if counts.any():
        assert metrics.jain == jain_index(counts)
    assert clean(metrics.intervals.as_dict()) == clean(interval_stats(selected, n).as_dict())
    assert metrics.sigma == empirical_sigma(selected, weights, n)
    assert metrics.rounds_short == rounds_short(selected, m)
    assert metrics.final_accuracy == 1.0
    accuracy = history["test_accuracy"]
    assert metrics.rounds_to_target == min(t for t, a in enumerate(accuracy) if a >= target)


# ---------------------------------------------------------------------------------------------
# Monte Carlo: uniform m-of-n sampling with weights 1/m


def test_uniform_sampling_matches_the_geometric_and_sigma_closed_forms():
    """Each client is selected in each round independently of the past with p = m/n, so its
    intervals are geometric on {1, 2, ...}: mean n/m, variance q/p^2 = n(n-m)/m^2 (q = 1 - p).
    Its weight is 1/m w.p. p, else 0: Var[w_i] = p q / m^2, so Sigma = n p q / m^2 = 1/m - 1/n
    (the AoI paper's Remark 4).

    Tolerances, 5 standard errors each, treating the N pooled intervals as independent (the
    clients of a round are only weakly, negatively dependent through the fixed total m):
    SE(mean) = sqrt(q/p^2 / N); SE(var) = sqrt((mu_4 - sigma^4) / N) with the geometric's
    fourth central moment mu_4 = sigma^4 (9 + p^2/q) (excess kurtosis 6 + p^2/q). Sigma is a sum
    of n functions p_i(1 - p_i)/m^2 of selection frequencies with SD sqrt(p q / T) each, so by
    the delta method SD(Sigma) = sqrt(n) |1 - 2p| sqrt(p q / T) / m^2. The finite window biases
    are far smaller: the pooled mean is low by about Var[X]/T (a complete gap of x rounds fits
    in T - x places) and Sigma by Sigma/T (population variance), 1e-3 and 2e-5 here.
    """
    n, m, rounds = 10, 2, 20_000
    p, q = m / n, 1 - m / n
    rng = generator(0, "participation-monte-carlo")
    # the first m of a uniform random permutation per round: a uniform m-subset
    chosen = np.argsort(rng.random((rounds, n)), axis=1)[:, :m]
    selected = [np.sort(row) for row in chosen]
    weights = [np.full(m, 1.0 / m)] * rounds

    gaps = intervals(selected, n)
    stats = interval_stats(selected, n)
    count = gaps.size
    mean, var = n / m, n * (n - m) / m**2
    assert count == m * rounds - n  # every client selected at least once (whp), each closes c_i - 1
    assert abs(stats.mean - mean) < 5 * math.sqrt(var / count)
    assert abs(stats.var - var) < 5 * var * math.sqrt((8 + p**2 / q) / count)
    assert stats.never_selected == 0

    sigma = empirical_sigma(selected, weights, n)
    expected = n * p * q / m**2
    assert expected == pytest.approx(1 / m - 1 / n)
    sd = math.sqrt(n) * abs(1 - 2 * p) * math.sqrt(p * q / rounds) / m**2
    assert abs(sigma - expected) < 5 * sd

    # 1/J - 1 is the squared coefficient of variation of the counts c_i, whose sum is fixed
    # (m T): approximately normal with covariance T p q n/(n-1) (I - 11'/n), so
    # (1/J - 1) (n - 1) T p / q is chi-square with n - 1 degrees of freedom
    metrics = run_metrics(
        {"selected": selected, "weights": weights, "eval_round": [0], "test_accuracy": [0.5]},
        n,
        m,
        0.9,
    )
    statistic = (1 / metrics.jain - 1) * (n - 1) * rounds * p / q
    assert chi2.ppf(1e-4, n - 1) < statistic < chi2.ppf(1 - 1e-4, n - 1)
    assert metrics.rounds_short == 0 and metrics.mean_participants == m


# ---------------------------------------------------------------------------------------------
# A real trainer history


def test_run_metrics_reads_a_trainer_history():
    sizes = [12, 30, 18, 24, 9, 15]
    gen = torch.Generator().manual_seed(0)
    total = sum(sizes)
    y = torch.randint(0, 3, (total,), generator=gen)
    x = torch.randn(3, 4, generator=gen)[y] + 0.3 * torch.randn(total, 4, generator=gen)
    bounds = np.cumsum([0, *sizes])
    partition = [np.arange(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    data = FederatedData(TensorSplit(x, y), TensorSplit(x[:40], y[:40]), partition)
    model = nn.Linear(4, 3)
    with torch.no_grad():  # a private generator: no global RNG
        for param in model.parameters():
            param.copy_(0.3 * torch.randn(param.shape, generator=gen))
    settings_ = TrainSettings(rounds=5, local_epochs=1, batch_size=8, client_accuracy=True)
    trainer = FederatedTrainer(
        model, data, RandomWeighted(sizes, 2, seed=0), settings_, lr_schedule=ConstantLR(0.1)
    )
    history = trainer.run()
    metrics = run_metrics(history, 6, 2, 0.0)
    assert metrics.rounds == 5 and sum(metrics.counts) == 10 and metrics.rounds_short == 0
    assert metrics.rounds_to_target == 0  # any accuracy reaches 0, first at the initial model
    assert metrics.final_accuracy == history["test_accuracy"][-1]
    assert metrics.worst_clients_accuracy == min(history["client_accuracy"][0])
    sigma = empirical_sigma(history["selected"], history["weights"], 6)
    assert metrics.sigma == pytest.approx(sigma)
    assert metrics.mean_available is None


# ---------------------------------------------------------------------------------------------
# Errors name the parameter, the value and what is allowed


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: selection_counts(SELECTED, 0), ValueError, r"n must be >= 1, got 0"),
        (lambda: selection_counts(SELECTED, 2.0), TypeError, r"n must be an integer, got 2.0"),
        (lambda: intervals("abc", 3), TypeError, r"selected must be a sequence .* got str"),
        (lambda: intervals(5, 3), TypeError, r"selected must be a sequence .* got int"),
        (
            lambda: intervals([], 3),
            ValueError,
            r"selected must hold at least one round \(a list of ids\), got 0 rounds",
        ),
        (
            lambda: intervals([[0], [1, 3]], 3),
            ValueError,
            r"selected\[1\]\[1\] \(a client id, n = 3\) must be <= 2, got 3",
        ),
        (
            lambda: interval_stats([[-1]], 3),
            ValueError,
            r"selected\[0\]\[0\] \(a client id, n = 3\) must be >= 0, got -1",
        ),
        (
            lambda: selection_counts([[0, 1.5]], 3),
            TypeError,
            r"selected\[0\]\[1\] \(a client id, n = 3\) must be an integer, got 1.5",
        ),
        (
            lambda: selection_counts([[True]], 3),
            TypeError,
            r"selected\[0\]\[0\] \(a client id, n = 3\) must be an integer, got True",
        ),
        (lambda: selection_counts([[0], "1"], 3), TypeError, r"selected\[1\] must be a sequence"),
        (
            lambda: selection_counts([[0], [[1], [2, 0]]], 3),
            ValueError,
            r"selected\[1\] must be a flat list of client ids, got \[\[1\], \[2, 0\]\]",
        ),
        (
            lambda: selection_counts([[[]]], 3),
            ValueError,
            r"selected\[0\] must be a flat list of client ids, got shape \(1, 0\)",
        ),
        (
            lambda: selection_counts([np.array([0.0, 1.0])], 3),
            TypeError,
            r"selected\[0\]\[0\] \(a client id, n = 3\) must be an integer, got 0.0",
        ),
        (
            lambda: selection_counts([[[0, 1]]], 3),
            ValueError,
            r"selected\[0\] must be a flat list of client ids, got shape \(1, 2\)",
        ),
        (
            lambda: selection_counts([[0], [2, 1, 1, 2, 2]], 3),
            ValueError,
            r"selected\[1\] lists client 1 2 times; the ids of a round must be distinct",
        ),
        (lambda: rounds_short(SELECTED, 0), ValueError, r"m must be >= 1, got 0"),
        (
            lambda: rounds_short([[-2]], 1),
            ValueError,
            r"selected\[0\]\[0\] \(a client id\) must be >= 0, got -2",
        ),
        (
            lambda: empirical_sigma(SELECTED, WEIGHTS[:-1], N),
            ValueError,
            r"weights has 5 rounds but selected has 6; one list of weights per round",
        ),
        (
            lambda: empirical_sigma([[0, 1]], [[0.5]], N),
            ValueError,
            r"weights\[0\] has 1 entries but selected\[0\] has 2 clients; one weight per",
        ),
        (
            lambda: empirical_sigma([[0], [1]], [[1.0], [-0.5]], N),
            ValueError,
            r"weights\[1\]\[0\] must be >= 0.0, got -0.5",
        ),
        (
            lambda: empirical_sigma([[0]], [[float("nan")]], N),
            ValueError,
            r"weights\[0\]\[0\] must be finite, got nan",
        ),
        (
            lambda: empirical_sigma([[0]], [["x"]], N),
            TypeError,
            r"weights\[0\] must be a sequence of real numbers, got \['x'\]",
        ),
        (lambda: empirical_sigma([[0]], 1.0, N), TypeError, r"weights must be a sequence"),
        (lambda: jain_index([]), ValueError, r"x must be a non-empty 1-d sequence"),
        (lambda: jain_index([1, -1]), ValueError, r"x\[1\] = -1.0; every entry must be finite"),
        (lambda: jain_index([0, 0, 0]), ValueError, r"x is all zero \(n = 3\).* 0/0"),
        (lambda: jain_index(["a"]), TypeError, r"x must be a sequence of real numbers"),
        (lambda: worst_clients_accuracy([0.5], 0.0), ValueError, r"share must be > 0.0, got 0.0"),
        (lambda: worst_clients_accuracy([0.5], 1.5), ValueError, r"share must be <= 1.0, got 1.5"),
        (lambda: worst_clients_accuracy([0.5], "all"), TypeError, r"share must be a real number"),
        (
            lambda: worst_clients_accuracy([0.5, 1.2]),
            ValueError,
            r"client_accuracy\[1\] = 1.2 is outside \[0, 1\]",
        ),
        (lambda: worst_clients_accuracy([]), ValueError, r"client_accuracy must be a non-empty"),
    ],
)
def test_errors_of_the_single_metrics(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize(
    ("history", "args", "error", "match"),
    [
        ([], (N, 2, 0.5), TypeError, r"history must be a mapping of records .* got list"),
        (
            {"selected": SELECTED},
            (N, 2, 0.5),
            ValueError,
            r"history has no 'weights', 'eval_round', 'test_accuracy' record",
        ),
        (hand_history(), (N, 4, 0.5), ValueError, r"m must be <= n .* got m=4, n=3"),
        (hand_history(), (N, 0, 0.5), ValueError, r"m must be >= 1, got 0"),
        (hand_history(), (0, 1, 0.5), ValueError, r"n must be >= 1, got 0"),
        (hand_history(), (N, 2, 50), ValueError, r"target must be <= 1.0, got 50.0"),
        (hand_history(), (N, 2, None), TypeError, r"target must be a real number, got None"),
        (
            hand_history(eval_round=[0, 3]),
            (N, 2, 0.5),
            ValueError,
            r"history\['eval_round'\] has 2 entries but history\['test_accuracy'\] has 3",
        ),
        (
            hand_history(eval_round=[], test_accuracy=[]),
            (N, 2, 0.5),
            ValueError,
            r"history\['test_accuracy'\] is empty; at least one evaluation is needed",
        ),
        (
            hand_history(eval_round=[0, 3, 7]),
            (N, 2, 0.5),
            ValueError,
            r"history\['eval_round'\]\[2\] must be <= 6, got 7",
        ),
        (
            hand_history(test_accuracy=[0.1, 50.0, 0.7]),
            (N, 2, 0.5),
            ValueError,
            r"history\['test_accuracy'\]\[1\] must be <= 1.0, got 50.0",
        ),
        (
            hand_history(selected=SELECTED[:-1]),
            (N, 2, 0.5),
            ValueError,
            r"weights has 6 rounds but selected has 5",
        ),
        (
            hand_history(available=[3, 3]),
            (N, 2, 0.5),
            ValueError,
            r"history\['available'\] has 2 rounds but selected has 6",
        ),
        (
            hand_history(available=[3, 2, 1, 0, 2, 1]),
            (N, 2, 0.5),
            ValueError,
            r"history\['available'\]\[2\] = 1 but selected\[2\] has 2 clients",
        ),
        (
            hand_history(available=[3, 2, 3, 0, 2, 4]),
            (N, 2, 0.5),
            ValueError,
            r"history\['available'\]\[5\] must be <= 3, got 4",
        ),
        (
            hand_history(client_accuracy=[[0.5, 0.5]]),
            (N, 2, 0.5),
            ValueError,
            r"history\['client_accuracy'\]\[-1\] has 2 entries but n = 3",
        ),
    ],
)
def test_errors_of_run_metrics(history, args, error, match):
    with pytest.raises(error, match=match):
        run_metrics(history, *args)


def test_worst_share_of_run_metrics_is_checked():
    with pytest.raises(ValueError, match=r"worst_share must be > 0.0, got -0.1"):
        run_metrics(hand_history(), N, 2, 0.5, worst_share=-0.1)
