"""Streaming selection statistics (Figs 2-4) against the dense reference functions, exact small
cases, and input validation."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aoi_fl.aoi.samplers import POLICIES, make_sampler
from aoi_fl.core.selection import Selection
from aoi_fl.core.stats import (
    SelectionStats,
    empirical_sigma_from_matrix,
    intervals_from_matrix,
    simulate,
    weight_matrix,
    window_std_ratio_from_matrix,
)


def selections_of(matrix):
    """One Selection per row of a (rounds, n) weight matrix (entry > 0: selected)."""
    for row in matrix:
        ids = np.flatnonzero(row > 0)
        yield Selection(ids, row[ids])


def random_trace(n, rounds, density, seed):
    """A generator and a (rounds, n) weight matrix: each entry selected with probability
    ``density`` (empty rounds included), with a positive weight."""
    rng = np.random.default_rng(seed)
    selected = rng.random((rounds, n)) < density
    return rng, np.where(selected, rng.uniform(0.01, 1.0, (rounds, n)), 0.0)


def assert_stream_equals_dense(matrix, windows):
    rounds, n = matrix.shape
    stats = SelectionStats(n, windows=windows, record_sigma=True)
    for sel in selections_of(matrix):
        stats.update(sel)
    selected = matrix > 0
    assert stats.rounds == rounds
    np.testing.assert_array_equal(stats.counts, selected.sum(axis=0))
    assert stats.selections == selected.sum()
    assert stats.selection_rate() == pytest.approx(selected.mean(), rel=1e-12)
    gaps = intervals_from_matrix(matrix)
    hist = stats.interval_histogram()
    np.testing.assert_array_equal(np.trim_zeros(hist, "b"), np.trim_zeros(np.bincount(gaps), "b"))
    assert stats.interval_count == gaps.size
    if gaps.size:
        assert stats.interval_mean() == pytest.approx(gaps.mean(), rel=1e-12)
        assert stats.interval_var() == pytest.approx(gaps.var(), rel=1e-9, abs=1e-12)
    for w in windows:
        if w <= rounds:
            assert stats.window_std_ratio(w) == pytest.approx(
                window_std_ratio_from_matrix(matrix, w), rel=1e-9, abs=1e-12
            )
    history = stats.sigma_history
    assert history.shape == (rounds,)
    for t in range(rounds):
        assert history[t] == pytest.approx(
            empirical_sigma_from_matrix(matrix[: t + 1]), rel=1e-9, abs=1e-12
        )
    assert stats.sigma() == history[-1]


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 12),
    st.integers(1, 40),
    st.floats(0.0, 1.0),
    st.integers(0, 2**32 - 1),
    st.lists(st.integers(1, 12), max_size=4),
)
def test_streaming_equals_dense_on_random_traces(n, rounds, density, seed, windows):
    """Arbitrary 0/1 patterns (empty rounds included) with arbitrary positive weights."""
    _, matrix = random_trace(n, rounds, density, seed)
    assert_stream_equals_dense(matrix, windows)


@pytest.mark.parametrize("policy", POLICIES)
def test_streaming_equals_dense_on_sampler_traces(policy):
    sizes = np.arange(1.0, 31.0) ** 2
    build = lambda: make_sampler(policy, n=30, m=5, sizes=sizes, m_prime=4, seed=1)  # noqa: E731
    matrix = weight_matrix(build(), 120)
    assert matrix.shape == (120, 30)
    assert_stream_equals_dense(matrix, (1, 7, 20, 120))
    # simulate() draws the same rounds from an identically built sampler
    stats = simulate(build(), 120, windows=(7,), record_sigma=True)
    assert stats.sigma() == pytest.approx(empirical_sigma_from_matrix(matrix), rel=1e-9)
    assert stats.window_std_ratio(7) == pytest.approx(window_std_ratio_from_matrix(matrix, 7))
    np.testing.assert_array_equal(stats.counts, (matrix > 0).sum(axis=0))


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 12),
    st.integers(1, 60),
    st.floats(0.0, 1.0),
    st.integers(0, 2**32 - 1),
    st.lists(st.integers(1, 12), max_size=3),
    st.lists(st.integers(1, 25), min_size=1, max_size=6),
)
def test_rounds_recorded_in_blocks_equal_rounds_recorded_one_by_one(
    n, rounds, density, seed, windows, blocks
):
    """Blocks that cross window ends, empty rounds and hits included: the same statistics to
    the last bit (every sum is taken in round order whatever the blocks)."""
    rng, matrix = random_trace(n, rounds, density, seed)
    hits = [rng.integers(1, 4, size=int((row > 0).sum())) for row in matrix]
    one, block = (SelectionStats(n, windows=windows, record_sigma=True) for _ in range(2))
    rows = list(selections_of(matrix))
    for sel, h in zip(rows, hits, strict=True):
        one.update(sel, h)
    start, k = 0, 0
    while start < rounds:
        stop = min(rounds, start + blocks[k % len(blocks)])
        block.update_rounds(rows[start:stop], hits[start:stop])
        start, k = stop, k + 1
    assert block.rounds == one.rounds and block.selections == one.selections
    np.testing.assert_array_equal(block.counts, one.counts)
    np.testing.assert_array_equal(block.interval_histogram(), one.interval_histogram())
    for w in windows:
        if w <= rounds:
            assert block.window_std_ratio(w) == one.window_std_ratio(w)
    np.testing.assert_array_equal(block.sigma_history, one.sigma_history)


def test_simulate_across_blocks_equals_the_dense_reference():
    """More rounds than :func:`simulate` records at once, with windows ending inside blocks."""
    sizes = np.arange(1.0, 31.0)
    build = lambda: make_sampler("markov_optimal", n=30, m=5, sizes=sizes, m_prime=4, seed=2)  # noqa: E731
    matrix = weight_matrix(build(), 2500)
    stats = simulate(build(), 2500, windows=(7, 1000))
    assert stats.rounds == 2500
    np.testing.assert_array_equal(stats.counts, (matrix > 0).sum(axis=0))
    gaps = intervals_from_matrix(matrix)
    np.testing.assert_array_equal(np.trim_zeros(stats.interval_histogram(), "b"), np.bincount(gaps))
    for w in (7, 1000):
        assert stats.window_std_ratio(w) == pytest.approx(
            window_std_ratio_from_matrix(matrix, w), rel=1e-12
        )
    assert stats.sigma() == pytest.approx(empirical_sigma_from_matrix(matrix), rel=1e-9)


def test_a_bad_round_in_a_block_records_none_of_it():
    stats = SelectionStats(5, windows=(1,))
    good = Selection(np.array([0, 2]), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match=r"\[0, 5\), got \[7\]"):
        stats.update_rounds([good, good, Selection(np.array([7]), np.array([1.0]))])
    with pytest.raises(ValueError, match="at least 1"):
        stats.update_rounds([good, good], [None, np.array([1, 0])])
    with pytest.raises(ValueError, match="one entry per round, got 1 for 2"):
        stats.update_rounds([good, good], [None])
    assert stats.rounds == 0 and stats.selections == 0 and stats.counts.sum() == 0


def test_exact_small_case():
    # n = 3 over 4 rounds: client 0 in rounds 0, 1, 3; client 1 in rounds 1, 3; client 2 never
    matrix = np.array(
        [
            [1.0, 0.0, 0.0],
            [0.5, 0.5, 0.0],
            [0.0, 0.0, 0.0],
            [0.25, 0.75, 0.0],
        ]
    )
    stats = SelectionStats(3, windows=(2, 4, 3))
    for sel in selections_of(matrix):
        stats.update(sel)
    assert stats.windows == (2, 3, 4)
    np.testing.assert_array_equal(stats.counts, [3, 2, 0])
    # intervals: client 0: 1, 2; client 1: 2
    np.testing.assert_array_equal(stats.interval_histogram(), [0, 1, 2])
    assert stats.interval_mean() == pytest.approx(5 / 3)
    assert stats.interval_var() == pytest.approx(2 / 9)
    # T = 2: Y = [2, 1, 0] and [1, 1, 0] -> mean 5/6, E[Y^2] = 7/6, Var = 17/36
    assert stats.window_std_ratio(2) == pytest.approx(np.sqrt(17 / 36) / 2)
    # T = 3: one window (rounds 0-2), Y = [2, 1, 0], Var = 2/3
    assert stats.window_std_ratio(3) == pytest.approx(np.sqrt(2 / 3) / 3)
    # T = 4: Y = [3, 2, 0], Var = 14/9
    assert stats.window_std_ratio(4) == pytest.approx(np.sqrt(14 / 9) / 4)
    # Sigma: client 0 weights (1, .5, 0, .25): var = 0.2421875; client 1 (0, .5, 0, .75)
    expected = np.var([1, 0.5, 0, 0.25]) + np.var([0, 0.5, 0, 0.75])
    assert stats.sigma() == pytest.approx(expected)
    assert stats.selection_rate() == pytest.approx(5 / 12)


def test_fig4_metric_is_zero_for_perfect_round_robin():
    # n = 4, one client per round in turn: every window of 4 rounds has Y = 1 for everyone
    matrix = np.tile(np.eye(4), (5, 1))
    stats = SelectionStats(4, windows=(4, 8))
    for sel in selections_of(matrix):
        stats.update(sel)
    assert stats.window_std_ratio(4) == 0.0 and stats.window_std_ratio(8) == 0.0
    np.testing.assert_array_equal(stats.interval_histogram(), [0, 0, 0, 0, 16])
    assert stats.interval_var() == 0.0


def test_large_n_streaming_is_cheap_and_consistent():
    n = 300_000
    stats = simulate(
        make_sampler("markov_optimal", n=n, m=n * 15 // 100, seed=2),
        40,
        windows=(10,),
        record_sigma=True,
    )
    assert stats.selection_rate() == pytest.approx(0.15, rel=0.01)
    hist = stats.interval_histogram()
    assert hist[:6].sum() == 0 and hist[8:].sum() == 0  # optimal X is 6 or 7 (Theorem 1)
    assert stats.sigma_history.shape == (40,)


# --- errors -------------------------------------------------------------------------------
def test_queries_that_cannot_be_answered_raise():
    stats = SelectionStats(5, windows=(10,))
    with pytest.raises(ValueError, match="no round"):
        stats.sigma()
    with pytest.raises(ValueError, match="no round"):
        stats.selection_rate()
    stats.update(Selection(np.array([0, 2]), np.array([0.5, 0.5])))
    with pytest.raises(ValueError, match="larger than the 1 rounds"):
        stats.window_std_ratio(10)
    with pytest.raises(ValueError, match=r"not tracked; tracked windows: \[10\]"):
        stats.window_std_ratio(3)
    with pytest.raises(ValueError, match="no interval"):
        stats.interval_mean()
    with pytest.raises(ValueError, match="record_sigma=True"):
        stats.sigma_history  # noqa: B018
    with pytest.raises(ValueError, match=r"\[0, 5\)"):
        stats.update(Selection(np.array([5]), np.array([1.0])))
    with pytest.raises(ValueError, match=r"\[0, 5\)"):
        stats.update(Selection(np.array([-1]), np.array([1.0])))


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: SelectionStats(0), ValueError, "n must be >= 1"),
        (lambda: SelectionStats(3, windows=(0,)), ValueError, "window must be >= 1"),
        (lambda: SelectionStats(3, windows=(2.5,)), TypeError, "window must be an integer"),
        (lambda: simulate(object(), 3), TypeError, "Sampler"),
        (lambda: simulate(make_sampler("random", n=3, m=1), 0), ValueError, "rounds"),
        (lambda: weight_matrix(make_sampler("random", n=3, m=1), 0), ValueError, "rounds"),
        (lambda: weight_matrix([1, 2], 3), TypeError, "Sampler"),
        (lambda: intervals_from_matrix(np.ones(3)), ValueError, "matrix"),
        (lambda: intervals_from_matrix(np.ones((0, 3))), ValueError, "matrix"),
        (lambda: intervals_from_matrix([[1.0, -1.0]]), ValueError, ">= 0"),
        (lambda: empirical_sigma_from_matrix([[np.nan, 1.0]]), ValueError, "finite"),
        (lambda: window_std_ratio_from_matrix(np.ones((3, 2)), 4), ValueError, "larger than"),
        (lambda: window_std_ratio_from_matrix(np.ones((3, 2)), 0), ValueError, "window"),
    ],
)
def test_bad_inputs_raise(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_policy_2_counts_its_draws_in_the_window_counts():
    """Policy 2's client "is selected l times out of m total selections" (AoI Sec. III-B):
    with ``count_hits`` each selected client counts its l_i draws in Y (the dense reference on a
    count matrix agrees); the default counts it once; intervals and Sigma do not change."""
    m, rounds, windows = 15, 60, (1, 2, 5)
    sizes = np.arange(1.0, 21.0)
    counted = simulate(
        make_sampler("probabilistic", n=20, m=m, sizes=sizes, seed=3), rounds,
        windows=windows, record_sigma=True, count_hits=True,
    )  # fmt: skip
    distinct = simulate(
        make_sampler("probabilistic", n=20, m=m, sizes=sizes, seed=3), rounds,
        windows=windows, record_sigma=True,
    )  # fmt: skip
    sampler = make_sampler("probabilistic", n=20, m=m, sizes=sizes, seed=3)
    hits = np.zeros((rounds, 20))
    for t in range(rounds):
        sel = sampler.sample()
        hits[t, sel.ids] = sel.hits
        np.testing.assert_array_equal(sel.hits, sel.weights * m)  # w_i = l_i / m, exactly
    np.testing.assert_array_equal(hits.sum(axis=1), m)
    assert counted.selections == rounds * m and counted.selection_rate() == pytest.approx(m / 20)
    assert distinct.selections == int((hits > 0).sum()) < rounds * m
    for w in windows:
        assert counted.window_std_ratio(w) == pytest.approx(
            window_std_ratio_from_matrix(hits, w, counts=True), rel=1e-12
        )
        assert distinct.window_std_ratio(w) == pytest.approx(
            window_std_ratio_from_matrix(hits, w), rel=1e-12
        )
    assert counted.window_std_ratio(1) > distinct.window_std_ratio(1)
    assert counted.sigma() == distinct.sigma()
    np.testing.assert_array_equal(counted.interval_histogram(), distinct.interval_histogram())


def test_hits_are_counted_only_where_a_sampler_draws_with_replacement():
    # Markov policies select each client once: there are no draws to count, so it raises
    markov = make_sampler("markov_optimal", n=100, m=15, sizes=np.ones(100), m_prime=10)
    with pytest.raises(ValueError, match="MarkovSampler's selections carry no hits"):
        simulate(markov, 20, windows=(1,), count_hits=True)
    with pytest.raises(ValueError, match="hits must be at least 1"):
        Selection(np.array([0, 1]), np.array([0.5, 0.5]), hits=np.array([1, 0]))
    with pytest.raises(ValueError, match="hits must be integers, one per selected id"):
        Selection(np.array([0, 1]), np.array([0.5, 0.5]), hits=np.array([1.0, 1.0]))
    with pytest.raises(ValueError, match="at least 1"):
        SelectionStats(3).update(
            Selection(np.array([0, 1]), np.array([0.5, 0.5])), np.array([1, 0])
        )
