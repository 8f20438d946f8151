"""Unbiased sampling (K-Vib paper Secs 2-3): eq. 4 water-filling, estimator, eq. 3, eq. 8."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aoi_fl.core.selection import Selection
from aoi_fl.kvib.estimators import (
    draw,
    dynamic_regret,
    enumerate_outcomes,
    estimate,
    estimation_errors,
    expected_squared_error,
    optimal_isp_probabilities,
    optimal_rsp_probabilities,
    optimal_sampling_cost,
    round_record,
    sampling_cost,
)


def literal_eq4(a, k):
    """Lemma 2.2 as printed: sort ascending; l = the largest integer with
    0 < K + l - N <= sum_{i<=l} a_i / a_l; p_i = (K + l - N) a_i / sum_{j<=l} a_j for i <= l,
    else 1 (distinct positive a, p_min = 0)."""
    order = np.argsort(a)
    s = np.asarray(a, dtype=float)[order]
    n = s.size
    ell = max(l for l in range(1, n + 1) if 0 < k + l - n <= s[:l].sum() / s[l - 1])  # noqa: E741
    p_sorted = np.where(np.arange(1, n + 1) <= ell, (k + ell - n) * s / s[:ell].sum(), 1.0)
    p = np.empty(n)
    p[order] = p_sorted
    return p


def brute_force(a, k, p_min=0.0):
    """The constrained optimum by exhaustive search over active sets (small n).

    For every assignment of each client to "at p_min", "at 1" or "free", the free clients'
    stationary point of sum a^2 / p under sum p = k is p = c a; the best feasible candidate is
    the global minimum (the problem is convex, so its minimiser is such a point of some face).
    """
    a = np.asarray(a, dtype=float)
    best, best_p = math.inf, None
    for roles in itertools.product((0, 1, 2), repeat=a.size):
        roles = np.array(roles)
        free = roles == 2
        left = k - (roles == 0).sum() * p_min - (roles == 1).sum()
        if free.any():
            if a[free].sum() == 0 or left <= 0:
                continue
            p = np.where(roles == 0, p_min, 1.0)
            p[free] = left * a[free] / a[free].sum()
        elif abs(left) > 1e-12:
            continue
        else:
            p = np.where(roles == 0, p_min, 1.0)
        if p.min() < p_min - 1e-12 or p.max() > 1 + 1e-12 or (p <= 0).any():
            continue
        value = float((a**2 / p).sum())
        if value < best:
            best, best_p = value, p
    return best_p


def test_example_3_2_probabilities():
    # K-Vib paper, Example 3.2: norms ||g|| = [1, 3, 6] (see A11: the text calls them squares)
    g = np.array(
        [
            [math.sqrt(2) / 2, math.sqrt(2) / 2],
            [1, -2 * math.sqrt(2)],
            [2 * math.sqrt(7), 2 * math.sqrt(2)],
        ]
    )
    norms = np.linalg.norm(g, axis=1)
    np.testing.assert_allclose(norms, [1, 3, 6], rtol=1e-12)
    np.testing.assert_allclose(optimal_isp_probabilities(norms, 2), [0.25, 0.75, 1.0], rtol=1e-12)
    np.testing.assert_allclose(optimal_rsp_probabilities(norms, 2), 2 * np.array([0.1, 0.3, 0.6]))
    # ISP sample sizes of the example: P(|S| = 3) = P(|S| = 1) = 3/16
    sizes = {}
    for m, prob in enumerate_outcomes("isp", [0.25, 0.75, 1.0]):
        sizes[int(m.sum())] = sizes.get(int(m.sum()), 0.0) + prob
    assert sizes[3] == pytest.approx(3 / 16) and sizes[1] == pytest.approx(3 / 16)


def test_public_reference_defect_is_not_reproduced():
    # a = [1, 3, 6], K = 2: the public reference solver assigns its formula to the boundary
    # client too and returns [0.25, 0.75, 1.5] (p > 1, sum 2.5); eq. 4 caps that client at 1
    p = optimal_isp_probabilities([1.0, 3.0, 6.0], 2)
    np.testing.assert_allclose(p, [0.25, 0.75, 1.0])
    assert p.sum() == pytest.approx(2.0) and p.max() <= 1.0


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(2, 7),
    seed=st.integers(0, 10**6),
    k_frac=st.floats(0.05, 0.95),
    sigma=st.floats(0.0, 3.0),
)
def test_water_filling_matches_literal_eq4_and_brute_force(n, seed, k_frac, sigma):
    rng = np.random.default_rng(seed)
    a = rng.lognormal(0.0, sigma, n) + 1e-3 * rng.random(n)  # distinct, positive
    k = max(1, round(k_frac * n))
    p = optimal_isp_probabilities(a, k)
    assert p.sum() == pytest.approx(k, rel=1e-12) and (p > 0).all() and (p <= 1).all()
    np.testing.assert_allclose(p, literal_eq4(a, k), rtol=1e-9)
    ref = brute_force(a, k)
    cost = float((a**2 / p).sum())
    assert cost <= float((a**2 / ref).sum()) * (1 + 1e-9)
    np.testing.assert_allclose(p, ref, rtol=1e-9)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 7), seed=st.integers(0, 10**6), floor=st.floats(0.05, 1.0))
def test_floor_of_lemma_b8_matches_brute_force(n, seed, floor):
    rng = np.random.default_rng(seed)
    a = rng.lognormal(0.0, 2.0, n)
    k = max(1, n // 3)
    p_min = floor * k / n
    p = optimal_isp_probabilities(a, k, p_min=p_min)
    assert p.sum() == pytest.approx(k, rel=1e-12)
    assert p.min() >= p_min * (1 - 1e-12) and p.max() <= 1.0
    ref = brute_force(a, k, p_min)
    assert float((a**2 / p).sum()) <= float((a**2 / ref).sum()) * (1 + 1e-9)
    np.testing.assert_allclose(p, ref, rtol=1e-9)


@settings(max_examples=80, deadline=None)
@given(
    a=st.lists(st.one_of(st.just(0.0), st.just(1.0), st.floats(0.0, 1e6)), min_size=1, max_size=30),
    k_frac=st.floats(0.01, 1.0),
)
def test_water_filling_invariants_with_ties_and_zeros(a, k_frac):
    a = np.array(a)
    k = max(1e-3, k_frac * a.size)
    p = optimal_isp_probabilities(a, k)
    assert p.sum() == pytest.approx(k, rel=1e-9, abs=1e-9)
    assert (p >= 0).all() and (p <= 1.0).all()
    # equal inputs get equal probabilities, and the order of a is kept
    for value in np.unique(a):
        assert np.ptp(p[a == value]) <= 1e-12
    order = np.argsort(a, kind="stable")
    assert (np.diff(p[order]) >= -1e-12).all()


def test_water_filling_zero_cases():
    np.testing.assert_allclose(optimal_isp_probabilities([0, 0, 0, 0], 2), 0.5)
    # two positive clients cannot absorb K = 3: both at 1, the zeros share the rest
    np.testing.assert_allclose(optimal_isp_probabilities([0, 5, 0, 2], 3), [0.5, 1, 0.5, 1])
    np.testing.assert_allclose(optimal_isp_probabilities([0, 5, 0, 5], 1), [0, 0.5, 0, 0.5])
    np.testing.assert_allclose(optimal_isp_probabilities([1, 2, 3], 3), [1, 1, 1])
    assert optimal_isp_probabilities([3, 1], 2, p_min=1.0).tolist() == [1.0, 1.0]


def test_water_filling_rejects_bad_input():
    with pytest.raises(ValueError, match=r"a\[1\] = -1.0"):
        optimal_isp_probabilities([1, -1], 1)
    with pytest.raises(ValueError, match="k must be <= 2"):
        optimal_isp_probabilities([1, 1], 3)
    with pytest.raises(ValueError, match="k must be > 0"):
        optimal_isp_probabilities([1, 1], 0)
    with pytest.raises(ValueError, match="p_min must be <= 0.5"):
        optimal_isp_probabilities([1, 1], 1, p_min=0.6)
    with pytest.raises(ValueError, match="non-empty 1-d"):
        optimal_rsp_probabilities([], 1)


def weighted_updates(n=8, d=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.lognormal(0, 1, n)[:, None] * rng.standard_normal((n, d))


@pytest.mark.parametrize(
    "procedure, p",
    [
        ("isp", optimal_isp_probabilities(np.linalg.norm(weighted_updates(), axis=1), 3)),
        ("isp", np.full(8, 3 / 8)),
        (
            "with_replacement",
            optimal_rsp_probabilities(np.linalg.norm(weighted_updates(), axis=1), 3),
        ),
        ("without_replacement", np.full(8, 3 / 8)),
    ],
)
def test_estimator_is_unbiased_and_eq3_is_exact_by_enumeration(procedure, p):
    x = weighted_updates()
    outcomes = enumerate_outcomes(procedure, p)
    assert sum(prob for _, prob in outcomes) == pytest.approx(1.0)
    mean = sum(prob * estimate(m, p, x) for m, prob in outcomes)
    np.testing.assert_allclose(mean, x.sum(axis=0), rtol=1e-10, atol=1e-12)
    variance = sum(prob * np.sum((estimate(m, p, x) - x.sum(axis=0)) ** 2) for m, prob in outcomes)
    assert expected_squared_error(procedure, x, p) == pytest.approx(variance, rel=1e-10)


@pytest.mark.slow
@pytest.mark.parametrize("procedure", ["isp", "with_replacement", "without_replacement"])
def test_closed_form_variance_against_monte_carlo(procedure):
    rng = np.random.default_rng(1)
    x = weighted_updates(n=20, d=6, seed=3)
    k = 6
    norms = np.linalg.norm(x, axis=1)
    p = {
        "isp": optimal_isp_probabilities(norms, k),
        "with_replacement": optimal_rsp_probabilities(norms, k),
        "without_replacement": np.full(20, k / 20),
    }[procedure]
    errors = estimation_errors(procedure, x, p, 10_000, rng)
    sq = (errors**2).sum(axis=1)
    closed = expected_squared_error(procedure, x, p)
    # the mean of 10,000 squared errors: 5 standard errors is far beyond chance
    assert abs(sq.mean() - closed) < 5 * sq.std() / math.sqrt(sq.size)
    np.testing.assert_allclose(errors.mean(axis=0), 0.0, atol=5 * errors.std(axis=0).max() / 100)


@pytest.mark.slow
def test_draw_sizes_and_errors():
    rng = np.random.default_rng(0)
    p = np.array([0.2, 0.5, 1.0, 0.3])
    sizes = np.array([draw("isp", p, rng).sum() for _ in range(20_000)])
    assert sizes.mean() == pytest.approx(p.sum(), abs=0.03)
    counts = draw("with_replacement", [0.5, 1.5, 1.0], rng)
    assert counts.sum() == 3 and counts.dtype == np.int64
    chosen = draw("without_replacement", np.full(5, 0.4), rng)
    assert chosen.sum() == 2 and chosen.max() == 1
    with pytest.raises(ValueError, match="must be <= 1"):
        draw("isp", [0.5, 1.5], rng)
    with pytest.raises(ValueError, match="positive integer"):
        draw("with_replacement", [0.5, 0.7], rng)
    with pytest.raises(ValueError, match="uniform p only"):
        draw("without_replacement", [0.5, 1.5], rng)
    with pytest.raises(ValueError, match="unknown procedure 'rsp'"):
        draw("rsp", p, rng)


def test_cost_regret_on_a_hand_made_sequence():
    # three rounds, two clients, budget K = 1 (no cap binds: p* = pi / sum pi)
    pis = [[1.0, 1.0], [3.0, 1.0], [0.0, 2.0]]
    ps = [[0.5, 0.5], [0.5, 0.5], [0.25, 0.75]]
    cost = [sampling_cost(pi, p) for pi, p in zip(pis, ps, strict=True)]
    optimum = [optimal_sampling_cost(pi, 1) for pi in pis]
    assert cost == pytest.approx([4.0, 20.0, 16 / 3])
    assert optimum == pytest.approx([4.0, 16.0, 4.0])  # (sum pi)^2 / K
    np.testing.assert_allclose(dynamic_regret(cost, optimum), [0.0, 4.0, 4 + 4 / 3])
    assert sampling_cost([1.0, 0.0], [0.0, 1.0]) == math.inf
    assert sampling_cost([0.0, 1.0], [0.0, 1.0]) == 1.0
    with pytest.raises(ValueError, match="equal length"):
        dynamic_regret([1.0, 2.0], [1.0])


def test_round_record_agrees_with_its_parts():
    rng = np.random.default_rng(5)
    g = rng.standard_normal((6, 4))
    lam = rng.random(6)
    lam /= lam.sum()
    x = lam[:, None] * g
    p = optimal_isp_probabilities(np.linalg.norm(x, axis=1), 2)
    counts = draw("isp", p, rng)
    ids = np.flatnonzero(counts)
    selection = Selection(ids, lam[ids] / p[ids], probabilities=p, procedure="isp")
    record = round_record(selection, g, lam)
    error = estimate(counts, p, x) - x.sum(axis=0)
    assert record["squared_error"] == pytest.approx(float(error @ error))
    assert record["sample_size"] == ids.size
    assert record["cost"] == pytest.approx(record["optimal_cost"])  # p is the optimum
    assert record["expected_squared_error"] == pytest.approx(expected_squared_error("isp", x, p))
    with pytest.raises(ValueError, match="carry probabilities"):
        round_record(Selection(ids, lam[ids]), g, lam)
