"""The unbiased samplers under client availability: restricted to the available clients, unbiased
for the data-weighted mean update of those clients, and unchanged without a mask."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aoi_fl.core.registry import AVAILABILITY_AWARE, SAMPLERS
from aoi_fl.core.seeding import generator
from aoi_fl.core.selection import check_available_selection
from aoi_fl.fedsum.patterns import UniformSubset
from aoi_fl.kvib.estimators import expected_squared_error
from aoi_fl.kvib.samplers import UNBIASED_SAMPLERS

SIZES = np.array([50, 80, 400, 60, 2000, 90, 55, 120, 700, 65])
N = SIZES.size
AWARE = sorted(set(UNBIASED_SAMPLERS) - {"optimal"})
#: the estimator is unbiased for these (uniform_normalised is FedAvg's biased rule)
UNBIASED = sorted(set(AWARE) - {"uniform_normalised"})


def build(name, k=3, seed=0):
    options = {"rounds": 50} if name in ("kvib", "vrb", "mabs") else {}
    return UNBIASED_SAMPLERS[name](SIZES, k=k, seed=seed, **options)


def feed(sampler, available=None):
    """One round with feedback that depends on (round, client) only and grows with the size."""
    sel = check_available_selection(sampler.sample(available), available)
    norms = np.log(SIZES[sel.ids]) * (1.2 + np.sin(sampler.round + 3 * sel.ids))
    sampler.feedback(sel.ids, norms)
    return sel


def round_masks(seed, rounds, share=0.6):
    rng = generator(seed, "test masks")
    return [rng.random(N) < share for _ in range(rounds)]


def budget(sampler, available):
    """sum_{i in A} p'_i: min(K, |A|) for ISP and uniform, K (= K sum q') with replacement,
    0 when nobody is available."""
    if sampler.procedure == "with_replacement" and available.any():
        return sampler.k
    return min(sampler.k, int(available.sum()))


def test_registered_as_availability_aware():
    for name in AWARE:
        assert name in AVAILABILITY_AWARE and UNBIASED_SAMPLERS[name].availability_aware
    assert "optimal" not in AVAILABILITY_AWARE
    assert not UNBIASED_SAMPLERS["optimal"].availability_aware
    assert "uniform" in AVAILABILITY_AWARE and UniformSubset.availability_aware
    for name in ("bernoulli", "cyclic", "reshuffled_cyclic"):
        assert name not in AVAILABILITY_AWARE
    sampler = SAMPLERS["kvib"](N, SIZES, k=3, rounds=20, seed=1)
    assert sampler.availability_aware


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from(AWARE),
    k=st.integers(1, N),
    seed=st.integers(0, 10**6),
    share=st.floats(0.0, 1.0),
)
def test_draws_only_available_clients_with_budget_fitted_among_them(name, k, seed, share):
    sampler = build(name, k=k, seed=seed)
    for available in round_masks(seed, 12, share):
        sel = feed(sampler, available)
        p = sel.probabilities
        assert available[sel.ids].all()
        assert (p[~available] == 0).all()
        assert p[available].sum() == pytest.approx(budget(sampler, available), rel=1e-9)
        if sampler.procedure != "with_replacement":
            assert (p <= 1 + 1e-12).all()
        if available.any():
            assert (p[available] > 0).all()
        if name == "uniform_normalised":
            assert sel.weights.sum() == pytest.approx(float(sel.ids.size > 0))
        else:
            lam = SIZES[available] / SIZES[available].sum()
            lam_prime = np.zeros(N)
            lam_prime[available] = lam
            counts = sampler._last_counts[sel.ids]
            np.testing.assert_allclose(sel.weights, counts * lam_prime[sel.ids] / p[sel.ids])


def test_uniform_takes_every_available_client_when_fewer_than_k():
    sampler = build("uniform_unbiased", k=5)
    available = np.zeros(N, dtype=bool)
    available[[1, 4, 7]] = True
    sel = sampler.sample(available)
    np.testing.assert_array_equal(sel.ids, [1, 4, 7])
    # p' = 1: the estimate is exactly the data-weighted mean over the available clients
    np.testing.assert_allclose(sel.weights, SIZES[[1, 4, 7]] / SIZES[[1, 4, 7]].sum())


@pytest.mark.parametrize("name", UNBIASED)
def test_unbiased_for_the_available_population(name):
    """Monte Carlo of E[sum_{i in S} w_i g_i] against sum_{i in A} lambda'_i g_i.

    After 15 adaptive rounds (skewed p) the sampler draws R times without feedback, so its p
    stays fixed and the R estimates are i.i.d.; their standard deviation is known exactly from
    eq. 2 (:func:`expected_squared_error` with x'_i = lambda'_i g_i over A and p'), and the mean
    must lie within 4.5 standard errors (a false alarm about once in 150,000 runs)."""
    sampler = build(name, k=3, seed=7)
    masks = round_masks(11, 15)
    for available in masks:
        feed(sampler, available)
    available = np.zeros(N, dtype=bool)
    available[[0, 2, 3, 4, 6, 8]] = True  # |A| = 6 > K = 3, the two largest clients included
    g = generator(5, "test updates").normal(size=N) + 2.0
    lam_prime = SIZES[available] / SIZES[available].sum()
    target = lam_prime @ g[available]
    reps = 6000
    estimates = np.empty(reps)
    for r in range(reps):
        sel = sampler.sample(available)
        estimates[r] = sel.weights @ g[sel.ids]
    p_prime = sel.probabilities[available]
    variance = expected_squared_error(sampler.procedure, lam_prime * g[available], p_prime)
    assert variance > 0
    assert abs(estimates.mean() - target) < 4.5 * np.sqrt(variance / reps)
    # and the spread is eq. 2's: the sample variance within 15 % (R = 6000, light tails)
    assert estimates.var() == pytest.approx(variance, rel=0.15)


@pytest.mark.parametrize("name", AWARE)
def test_all_available_draws_like_no_mask(name):
    """Restricting to everyone is the identity: the same clients, the same weights."""
    plain, masked = build(name, seed=4), build(name, seed=4)
    everyone = np.ones(N, dtype=bool)
    for _ in range(30):
        a, b = feed(plain), feed(masked, everyone)
        np.testing.assert_array_equal(a.ids, b.ids)
        np.testing.assert_allclose(a.weights, b.weights, rtol=1e-9)
        np.testing.assert_allclose(a.probabilities, b.probabilities, rtol=1e-9)


@pytest.mark.parametrize("name", AWARE)
def test_nobody_available_gives_an_empty_round(name):
    sampler = build(name, seed=2)
    feed(sampler)
    sel = sampler.sample(np.zeros(N, dtype=bool))
    assert sel.ids.size == 0 and sel.weights.size == 0
    assert (sel.probabilities == 0).all()
    sampler.feedback(sel.ids, np.zeros(0))
    feed(sampler)
    assert sampler.round == 3


@pytest.mark.parametrize("name", AWARE)
def test_state_round_trip_under_availability(name):
    original = build(name, seed=9)
    masks = round_masks(3, 30)
    for available in masks[:15]:
        feed(original, available)
    restored = build(name, seed=9)
    restored.load_state_dict(json.loads(json.dumps(original.state_dict())))
    for available in masks[15:]:
        a, b = feed(original, available), feed(restored, available)
        np.testing.assert_array_equal(a.ids, b.ids)
        np.testing.assert_array_equal(a.weights, b.weights)


def test_optimal_refuses_a_mask():
    sampler = build("optimal")
    sampler.inform(np.ones(N))
    with pytest.raises(ValueError, match="'optimal' is not availability aware"):
        sampler.sample(np.ones(N, dtype=bool))


def test_bad_mask_is_refused():
    with pytest.raises(ValueError, match="boolean mask of the n=10 clients"):
        build("kvib").sample(np.ones(N))
    with pytest.raises(ValueError, match="boolean mask of the n=10 clients"):
        build("vrb").sample(np.ones(N - 1, dtype=bool))


def test_uniform_pattern_picks_among_the_available():
    sampler = UniformSubset(N, 4, seed=1)
    for available in round_masks(8, 20, share=0.5):
        sel = check_available_selection(sampler.sample(available), available)
        assert sel.ids.size == min(4, int(available.sum()))
        np.testing.assert_allclose(sel.weights, 1.0 / max(sel.ids.size, 1))
