"""Sigma = sum_i Var[w_i] (eq. 14), Theorems 3-5 and Remarks 4-5.

Monte Carlo tolerances: every estimate must lie within 5 standard errors of the exact value.
The standard errors are estimated from the same draws: per client from the sample variance of
w_i (or w_i^2), and for Sigma from the spread of independent batch estimates (batch means).
The seeds are fixed, so the tests are deterministic. For a correct formula a 5-SE miss has
probability ~6e-7 per comparison.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from aoi_fl.aoi.sigma import (
    DISPLAY,
    _enumerated_moments,
    _log_grid,
    random_weight_moments,
    second_moment_sum_probabilistic,
    sigma_markov,
    sigma_probabilistic,
    sigma_probabilistic_equal,
    sigma_random,
    sigma_random_enumeration,
    sigma_random_equal,
)
from aoi_fl.core.seeding import generator

SE_FACTOR = 5.0
EMPTY_MODES = ("forced", "paper", "skip")


def _zipf_sizes(n: int, seed: int = 0) -> np.ndarray:
    return generator(seed, "test-sigma-sizes", n).zipf(2.0, n).astype(float)


def _rel(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a) / np.asarray(b) - 1.0)))


SMALL_SIZE_VECTORS = [
    np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]),
    generator(1, "test-sigma-uniform").uniform(0.1, 10.0, 11),
    _zipf_sizes(12, seed=3),
    _zipf_sizes(14, seed=4),
    # heavy tail: sizes from 1 to 1e6, repeated values
    np.array([1.0, 1e4, 3e5, 2.0, 1e6, 1.0, 1.0, 7.0, 1e3, 5.0, 1.0, 1.0, 2.0, 9e4]),
    np.array([2.5, 7.0]),
]


# --- Theorem 3: exact method against enumeration -------------------------------------------


@pytest.mark.parametrize("sizes", SMALL_SIZE_VECTORS, ids=lambda s: f"n{s.size}")
def test_exact_moments_match_enumeration_for_every_m(sizes):
    n = sizes.size
    for m in range(1, n + 1):
        first, second = random_weight_moments(sizes, m)
        e_first, e_second = _enumerated_moments(sizes, m)
        assert _rel(first, e_first) < 1e-9, m
        assert _rel(second, e_second) < 1e-9, m
        exact, enumerated = sigma_random(sizes, m), sigma_random_enumeration(sizes, m)
        if m < n:
            assert abs(exact / enumerated - 1.0) < 1e-9, m
        else:  # deterministic weights
            assert exact == 0.0 and abs(enumerated) < 1e-15


def test_enumeration_is_eqs_30_31_literally():
    sizes = np.array([1.0, 2.0, 4.0, 8.0])
    m = 2
    subsets = list(itertools.combinations(range(4), m))
    eq30 = sum(sizes[i] ** 2 / sizes[list(s)].sum() ** 2 for s in subsets for i in s)
    eq31 = sum(
        (sum(sizes[i] / sizes[list(s)].sum() for s in subsets if i in s) / len(subsets)) ** 2
        for i in range(4)
    )
    expected = eq30 / len(subsets) - eq31
    assert sigma_random_enumeration(sizes, m) == pytest.approx(expected, rel=1e-14)
    assert sigma_random(sizes, m) == pytest.approx(expected, rel=1e-12)


def test_closed_forms_at_m_1_and_m_n():
    sizes = _zipf_sizes(9)
    first, second = random_weight_moments(sizes, 1)
    np.testing.assert_array_equal(first, np.full(9, 1 / 9))
    np.testing.assert_array_equal(second, np.full(9, 1 / 9))
    first, second = random_weight_moments(sizes, 9)
    np.testing.assert_allclose(first, sizes / sizes.sum(), rtol=1e-15)
    assert sigma_random(sizes, 9) == 0.0


# --- Remarks 4 and 5 ------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "m"), [(1, 1), (5, 2), (14, 7), (100, 15), (1000, 150)])
def test_remarks_4_and_5_equal_sizes(n, m):
    assert sigma_random_equal(n, m) == 1 / m - 1 / n
    assert sigma_probabilistic_equal(n, m) == (1 - 1 / n) / m
    equal = np.full(n, 37.0)
    assert sigma_probabilistic(equal, m) == pytest.approx((1 - 1 / n) / m, rel=1e-13, abs=1e-16)
    if n <= 100:
        assert sigma_random(equal, m) == pytest.approx(1 / m - 1 / n, rel=1e-11, abs=1e-15)
    if n <= 14:
        assert sigma_random_enumeration(equal, m) == pytest.approx(
            1 / m - 1 / n, rel=1e-12, abs=1e-15
        )


# --- Monte Carlo helpers ----------------------------------------------------------------------


def _monte_carlo(draw, batches: int, rounds: int) -> dict[str, np.ndarray | float]:
    """Moments of w (rows: rounds) and Sigma with standard errors, from ``batches`` batches."""
    total = batches * rounds
    s1 = s2 = s4 = 0.0
    batch_sigma = []
    for b in range(batches):
        w = draw(b, rounds)
        s1 = s1 + w.sum(axis=0)
        s2 = s2 + np.square(w).sum(axis=0)
        s4 = s4 + np.square(np.square(w)).sum(axis=0)
        batch_sigma.append(w.var(axis=0, ddof=1).sum())  # unbiased per batch
    first, second = s1 / total, s2 / total
    batch_sigma = np.array(batch_sigma)
    return {
        "first": first,
        "first_se": np.sqrt((second - first**2) / total),
        "second": second,
        "second_se": np.sqrt((s4 / total - second**2) / total),
        "sigma": batch_sigma.mean(),
        "sigma_se": batch_sigma.std(ddof=1) / math.sqrt(batches),
    }


def _assert_within(estimate, se, exact):
    np.testing.assert_array_less(np.abs(np.asarray(estimate) - exact), SE_FACTOR * se)


@pytest.mark.slow
def test_policy_1_monte_carlo_n100_m15_zipf():
    n, m = 100, 15
    sizes = _zipf_sizes(n)
    assert sizes.max() / sizes.min() > 100  # genuinely heavy-tailed
    rng = generator(0, "test-sigma-policy1")

    def draw(_, rounds):
        chosen = rng.random((rounds, n)).argpartition(m - 1, axis=1)[:, :m]  # uniform m-subset
        picked = sizes[chosen]
        w = np.zeros((rounds, n))
        np.put_along_axis(w, chosen, picked / picked.sum(axis=1, keepdims=True), axis=1)
        return w

    mc = _monte_carlo(draw, batches=40, rounds=5000)  # 200k rounds
    first, second = random_weight_moments(sizes, m)
    _assert_within(mc["first"], mc["first_se"], first)
    _assert_within(mc["second"], mc["second_se"], second)
    _assert_within(mc["sigma"], mc["sigma_se"], sigma_random(sizes, m))


# --- Theorem 4 --------------------------------------------------------------------------------


@pytest.mark.slow
def test_policy_2_monte_carlo_multinomial():
    n, m = 100, 15
    sizes = _zipf_sizes(n, seed=1)
    q = sizes / sizes.sum()
    rng = generator(0, "test-sigma-policy2")
    mc = _monte_carlo(lambda _, r: rng.multinomial(m, q, size=r) / m, batches=40, rounds=5000)
    _assert_within(mc["first"], mc["first_se"], q)
    _assert_within(mc["second"], mc["second_se"], q * (1 - q) / m + q**2)
    _assert_within(mc["sigma"], mc["sigma_se"], sigma_probabilistic(sizes, m))


@pytest.mark.parametrize("sizes", SMALL_SIZE_VECTORS, ids=lambda s: f"n{s.size}")
@pytest.mark.parametrize("m", [1, 2, 5])
def test_policy_2_second_moment_sum_against_binomial_counts(sizes, m):
    # w_i = l_i / m with l_i ~ Binomial(m, q_i): E[w_i^2] summed over the pmf of l_i
    m = min(m, sizes.size)
    q = sizes / sizes.sum()
    k = np.arange(m + 1)
    second = sum(float(binom.pmf(k, m, qi) @ (k / m) ** 2) for qi in q)
    assert second_moment_sum_probabilistic(sizes, m) == pytest.approx(second, rel=1e-12)
    assert second_moment_sum_probabilistic(sizes, m) == pytest.approx(
        sigma_probabilistic(sizes, m) + float(np.sum(q**2)), rel=1e-12
    )


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.floats(1e-3, 1e6, allow_nan=False), min_size=1, max_size=40),
    m=st.integers(1, 40),
)
def test_policy_2_sigma_below_one_over_m(sizes, m):
    m = min(m, len(sizes))
    sigma = sigma_probabilistic(sizes, m)
    assert 0.0 <= sigma < 1.0 / m


# --- Theorem 5 --------------------------------------------------------------------------------


def _markov_enumeration(n: int, p: float, empty: str) -> float:
    """Sigma by listing every selected set of n independent Bernoulli(p) clients."""
    first, second, inv_nonempty = np.zeros(n), np.zeros(n), 0.0
    for bits in itertools.product((0, 1), repeat=n):
        s = sum(bits)
        prob = p**s * (1 - p) ** (n - s)
        if s:
            w = np.array(bits) / s
            inv_nonempty += prob / s
        elif empty == "forced":  # each client forced with probability 1/n, weight 1
            first += prob / n
            second += prob / n
            continue
        else:
            w = np.zeros(n)
        first += prob * w
        second += prob * w**2
    if empty == "paper":
        return inv_nonempty - 1 / n
    return float(np.sum(second - first**2))


@pytest.mark.parametrize("empty", EMPTY_MODES)
@pytest.mark.parametrize(("n", "p"), [(1, 0.3), (5, 0.3), (6, 0.05), (4, 1.0)])
def test_markov_matches_enumeration(n, p, empty):
    assert sigma_markov(n, p, empty) == pytest.approx(
        _markov_enumeration(n, p, empty), rel=1e-12, abs=1e-15
    )


@pytest.mark.parametrize("empty", EMPTY_MODES)
def test_markov_monte_carlo_small_n(empty):
    n, p = 5, 0.3  # P(|S| = 0) = 0.168
    rng = generator(0, "test-sigma-markov", EMPTY_MODES.index(empty))

    def draw(_, rounds):
        picked = rng.random((rounds, n)) < p
        count = picked.sum(axis=1, keepdims=True)
        w = np.where(picked, 1.0 / np.maximum(count, 1), 0.0)
        if empty == "forced":
            none = np.flatnonzero(count[:, 0] == 0)
            w[none, rng.integers(0, n, none.size)] = 1.0
        return w

    if empty == "paper":  # not a variance: estimate E[1/|S|; |S| >= 1] - 1/n directly
        inv = np.concatenate([draw(b, 5000).max(axis=1) for b in range(40)])
        estimate, se = inv.mean() - 1 / n, inv.std(ddof=1) / math.sqrt(inv.size)
    else:
        mc = _monte_carlo(draw, batches=40, rounds=5000)
        estimate, se = mc["sigma"], mc["sigma_se"]
        expected_first = 1 / n if empty == "forced" else (1 - (1 - p) ** n) / n
        _assert_within(mc["first"], mc["first_se"], expected_first)
    _assert_within(estimate, se, sigma_markov(n, p, empty))


@pytest.mark.slow
def test_markov_mode_relations_and_large_n():
    n, p = 7, 0.2
    p0 = (1 - p) ** n
    forced, paper, skip = (sigma_markov(n, p, e) for e in EMPTY_MODES)
    assert forced - paper == pytest.approx(p0, rel=1e-13)
    assert paper + 1 / n - (1 - p0) ** 2 / n == pytest.approx(skip, rel=1e-13)
    assert sigma_markov(1, 0.3, "paper") == pytest.approx(-0.7)  # eq. 33 as printed
    # n = 1e6: E[1/S] expanded around mu = np (central moments of the binomial up to 4th)
    n, p = 10**6, 0.15
    mu, var = n * p, n * p * (1 - p)
    mu3 = var * (1 - 2 * p)
    mu4 = 3 * var**2 + var * (1 - 6 * p * (1 - p))
    expansion = 1 / mu + var / mu**3 - mu3 / mu**4 + mu4 / mu**5 - 1 / n
    for empty in EMPTY_MODES:
        assert sigma_markov(n, p, empty) == pytest.approx(expansion, rel=1e-10)
    assert sigma_markov(n, 1.0) == pytest.approx(0.0, abs=1e-15)


# --- properties ------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.floats(1e-3, 1e6, allow_nan=False), min_size=1, max_size=30),
    m=st.integers(1, 30),
)
def test_random_moment_properties(sizes, m):
    m = min(m, len(sizes))
    first, second = random_weight_moments(sizes, m)
    assert np.all((first >= 0) & (first <= 1) & (second >= 0) & (second <= 1))
    assert np.all(second >= first**2 * (1 - 1e-12))
    assert abs(first.sum() - 1.0) < 1e-9
    assert sigma_random(sizes, m) >= 0.0


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.floats(1e-2, 1e5, allow_nan=False), min_size=2, max_size=9),
    m=st.integers(1, 9),
)
def test_random_exact_against_enumeration_property(sizes, m):
    m = min(m, len(sizes) - 1)
    assert sigma_random(sizes, m) == pytest.approx(sigma_random_enumeration(sizes, m), rel=1e-9)


@pytest.mark.slow
def test_permutation_and_scale_invariance_n1000():
    sizes = _zipf_sizes(1000, seed=2)
    first, second = random_weight_moments(sizes, 150)
    assert abs(first.sum() - 1.0) < 1e-9
    order = generator(0, "test-sigma-perm").permutation(1000)
    p_first, p_second = random_weight_moments(sizes[order] * 1e-3, 150)
    assert _rel(p_first, first[order]) < 1e-10
    assert _rel(p_second, second[order]) < 1e-10


# --- bad inputs ------------------------------------------------------------------------------

SIZES_FUNCTIONS = [
    random_weight_moments,
    sigma_random,
    sigma_random_enumeration,
    sigma_probabilistic,
]


@pytest.mark.parametrize("func", SIZES_FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("bad", [[1.0, np.nan], [1.0, np.inf], [1.0, 0.0], [-2.0, 1.0], []])
def test_bad_sizes(func, bad):
    with pytest.raises(ValueError, match="sizes"):
        func(bad, 1)


@pytest.mark.parametrize("func", SIZES_FUNCTIONS, ids=lambda f: f.__name__)
def test_bad_m(func):
    with pytest.raises(ValueError, match="m must be >= 1"):
        func([1.0, 2.0], 0)
    with pytest.raises(ValueError, match="m must be <= n"):
        func([1.0, 2.0], 3)
    with pytest.raises(TypeError, match="m must be an integer"):
        func([1.0, 2.0], 1.5)


@pytest.mark.parametrize("func", [sigma_random_equal, sigma_probabilistic_equal])
def test_bad_equal_arguments(func):
    with pytest.raises(ValueError, match="m must be <= n"):
        func(5, 6)
    with pytest.raises(ValueError, match="n must be >= 1"):
        func(0, 1)


def test_bad_markov_arguments():
    for p in (0.0, -0.1, 1.5, np.nan):
        with pytest.raises(ValueError, match="p_avg"):
            sigma_markov(10, p)
    with pytest.raises(TypeError, match="p_avg"):
        sigma_markov(10, "0.5")
    with pytest.raises(ValueError, match="n must be >= 1"):
        sigma_markov(0, 0.5)
    with pytest.raises(ValueError, match="empty.*forced, paper, skip"):
        sigma_markov(10, 0.5, empty="drop")


def test_sizes_spanning_too_many_orders_of_magnitude():
    sizes = [1e-60, 1.0, 1e60]
    assert sigma_random_enumeration(sizes, 2) > 0
    with pytest.raises(ValueError, match="sizes span max/min"):
        sigma_random(sizes, 2)


def test_enumeration_refuses_large():
    with pytest.raises(ValueError, match=r"C\(30, 15\) = 155117520 .*2000000"):
        sigma_random_enumeration(np.ones(30), 15)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(3, 120),
    m_frac=st.floats(0.0, 1.0),
    spread=st.floats(0.0, 4.0),
    seed=st.integers(0, 2**31 - 1),
)
def test_the_display_quadrature_is_within_1e6_of_the_exact_one(n, m_frac, spread, seed):
    # lognormal sizes up to e^(4 * 4) apart, every m from 2 to n - 1 (m = 1 and n are closed forms)
    m = 2 + round(m_frac * (n - 3))
    d = generator(seed, "display_quadrature").lognormal(0.0, spread, n)
    exact, display = sigma_random(d, m), sigma_random(d, m, DISPLAY)
    assert display == pytest.approx(exact, rel=1e-6)


def test_the_display_quadrature_uses_fewer_nodes():
    d = generator(0, "display_nodes").pareto(1.0, 1000) + 1.0
    assert _log_grid(d, 150, DISPLAY)[0].size < 0.6 * _log_grid(d, 150)[0].size
