"""K-Vib (Alg. 2) and the unbiased baselines on the common sampler interface."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aoi_fl.kvib.estimators import optimal_isp_probabilities
from aoi_fl.kvib.samplers import (
    MABS,
    UNBIASED_SAMPLERS,
    VRB,
    KVib,
    OptimalSampler,
    UniformNormalised,
    kvib_theta,
)

SIZES = np.array([50, 80, 400, 60, 2000, 90, 55, 120, 700, 65])


def build(name, sizes=SIZES, k=3, seed=0, **options):
    if name in ("kvib", "vrb", "mabs"):
        options.setdefault("rounds", 50)
    return UNBIASED_SAMPLERS[name](sizes, k=k, seed=seed, **options)


def feed(sampler, scale=None):
    """One round: sample, then feed back norms that grow with the client's data size and
    depend only on (round, client), so that two samplers in the same state get the same."""
    sel = sampler.sample()
    scale = np.log(SIZES) if scale is None else scale
    norms = scale[sel.ids] * (1.2 + np.sin(sampler.round + 3 * sel.ids))
    sampler.feedback(sel.ids, norms)
    return sel


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    k=st.integers(1, 10),
    theta=st.one_of(st.none(), st.floats(0.01, 1.0)),
    spread=st.floats(0.0, 6.0),
)
def test_kvib_probabilities_in_unit_interval_sum_to_k(seed, k, theta, spread):
    rng = np.random.default_rng(seed)
    sampler = KVib(SIZES, k=k, rounds=40, seed=seed, theta=theta)
    scale = np.exp(spread * rng.random(SIZES.size))
    for _ in range(40):
        sel = feed(sampler, scale)
        p = sel.probabilities
        assert p.sum() == pytest.approx(k, rel=1e-9)
        assert (p > 0).all() and (p <= 1 + 1e-12).all()
        assert p.min() >= sampler.theta * k / SIZES.size * (1 - 1e-12)  # the mixing floor


def test_kvib_follows_algorithm_2():
    rng = np.random.default_rng(0)
    sampler = KVib(SIZES, k=3, rounds=50, seed=1)
    assert sampler.theta == pytest.approx((10 / (50 * 3)) ** (1 / 3)) == kvib_theta(10, 3, 50)
    first = sampler.sample()
    np.testing.assert_allclose(first.probabilities, 0.3)  # omega = 0: uniform whatever gamma
    assert sampler.gamma is None
    norms = rng.random(first.ids.size) + 0.5
    sampler.feedback(first.ids, norms)
    pi = sampler.lam[first.ids] * norms
    assert sampler.G == pytest.approx(pi.mean())  # Sec. 6: mean first-round feedback
    assert sampler.gamma == pytest.approx(pi.mean() ** 2 * 10 / (3 * sampler.theta))
    omega = np.zeros(10)
    omega[first.ids] = pi**2 / 0.3
    scores = np.sqrt(omega + sampler.gamma)
    expected = (1 - sampler.theta) * optimal_isp_probabilities(scores, 3) + sampler.theta * 0.3
    np.testing.assert_allclose(sampler.probabilities(), expected)
    second = sampler.sample()
    np.testing.assert_allclose(second.weights, sampler.lam[second.ids] / expected[second.ids])
    # App. F's fixed G, and the gamma scale of Fig. 3c
    fixed = KVib(SIZES, k=3, rounds=50, G=0.01, gamma_scale=10.0, theta=0.3)
    assert fixed.gamma == pytest.approx(10 * 0.01**2 * 10 / (3 * 0.3))


@pytest.mark.parametrize("name", sorted(set(UNBIASED_SAMPLERS) - {"optimal", "uniform_normalised"}))
def test_estimator_is_unbiased_for_the_current_probabilities(name):
    rng = np.random.default_rng(2)
    sampler = build(name, seed=3)
    for _ in range(5):  # some adaptation first
        feed(sampler)
    g = rng.standard_normal((SIZES.size, 3))
    p = sampler.probabilities()
    estimates, sizes = [], []
    for _ in range(5000):
        sel = sampler.sample()  # no feedback in between: p stays the same
        np.testing.assert_allclose(sel.probabilities, p)
        estimates.append(sel.weights @ g[sel.ids])
        sizes.append(len(sel))
    estimates = np.array(estimates)
    standard_error = estimates.std(axis=0) / np.sqrt(len(estimates))
    assert (np.abs(estimates.mean(axis=0) - sampler.lam @ g) < 5 * standard_error).all()
    if sampler.procedure != "with_replacement":
        assert np.mean(sizes) == pytest.approx(sampler.k, abs=0.1)


def test_uniform_samplers():
    uni = build("uniform_unbiased", seed=4)
    sel = uni.sample()
    assert len(sel) == 3 and sel.procedure == "without_replacement"
    np.testing.assert_allclose(sel.weights, uni.lam[sel.ids] * 10 / 3)
    isp = build("uniform_isp")
    assert isp.sample().procedure == "isp"
    normalised = UniformNormalised(SIZES, k=3, seed=4)
    sel_n = normalised.sample()
    np.testing.assert_array_equal(sel_n.ids, sel.ids)  # same draw as "uniform_unbiased", same seed
    assert sel_n.weights.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(sel_n.probabilities, 0.3)


def test_optimal_sampler_needs_full_information():
    sampler = OptimalSampler(SIZES, k=3)
    with pytest.raises(ValueError, match="full_information=True"):
        sampler.sample()
    norms = np.linspace(1, 2, 10)
    sampler.inform(norms)
    sel = sampler.sample()
    np.testing.assert_allclose(sel.probabilities, optimal_isp_probabilities(sampler.lam * norms, 3))
    with pytest.raises(ValueError, match="full_information=True"):
        sampler.sample()  # the norms are used once
    with pytest.raises(ValueError, match="one norm per client"):
        sampler.inform(norms[:3])


def test_vrb_and_mabs_updates():
    rng = np.random.default_rng(5)
    vrb = VRB(SIZES, k=4, rounds=50, seed=0)
    assert vrb.theta == pytest.approx((10 / 50) ** (1 / 3))
    assert VRB(SIZES, k=4, rounds=5).theta == 0.3  # N > T (App. F)
    sel = vrb.sample()
    counts = vrb._last_counts[sel.ids]
    assert counts.sum() == 4 and sel.procedure == "with_replacement"
    np.testing.assert_allclose(sel.weights, counts * vrb.lam[sel.ids] / sel.probabilities[sel.ids])
    norms = rng.random(sel.ids.size) + 1
    vrb.feedback(sel.ids, norms)
    q = sel.probabilities[sel.ids] / 4
    np.testing.assert_allclose(vrb._omega[sel.ids], counts * (vrb.lam[sel.ids] * norms) ** 2 / q)
    mabs = MABS(SIZES, k=4, rounds=50, seed=0)
    np.testing.assert_allclose(mabs.probabilities(), 0.4)
    sel = mabs.sample()
    counts = mabs._last_counts[sel.ids]
    mabs.feedback(sel.ids, np.ones(sel.ids.size))
    pi = mabs.lam[sel.ids]
    assert mabs.delta == pytest.approx(math.sqrt(0.4**4 * math.log(10) / (10**5 * 50 * mabs.G**2)))
    np.testing.assert_allclose(mabs._log_w[sel.ids], counts * mabs.delta * (pi / 10) ** 2 / 0.1**3)


@pytest.mark.parametrize("name", sorted(set(UNBIASED_SAMPLERS) - {"optimal"}))
def test_checkpoint_resumes_the_exact_sequence(name):
    a = build(name, seed=11)
    for _ in range(7):
        feed(a)
    state = json.loads(json.dumps(a.state_dict()))
    b = build(name, seed=11)
    b.load_state_dict(state)
    for _ in range(10):
        sa, sb = feed(a), feed(b)
        np.testing.assert_array_equal(sa.ids, sb.ids)
        np.testing.assert_array_equal(sa.weights, sb.weights)
    json.dumps(a.config())


def test_bad_arguments_and_feedback_are_refused():
    with pytest.raises(ValueError, match="theta must be <= 1.0"):
        KVib(SIZES, k=3, rounds=10, theta=1.5)
    with pytest.raises(ValueError, match="k must be <= 10"):
        KVib(SIZES, k=11, rounds=10)
    with pytest.raises(ValueError, match="G must be > 0"):
        VRB(SIZES, k=3, rounds=10, G=0.0)
    with pytest.raises(ValueError, match=r"sizes\[0\] = -1.0"):
        MABS([-1, 2], k=1, rounds=10)
    sampler = build("kvib")
    sel = sampler.sample()
    with pytest.raises(ValueError, match="exactly the clients of the last sample"):
        sampler.feedback(np.setdiff1d(np.arange(10), sel.ids)[:1], np.ones(1))
    state = sampler.state_dict()
    state["omega"] = [0.0]
    with pytest.raises(ValueError, match="state\\['omega'\\] must hold 10 finite values"):
        build("kvib").load_state_dict(state)
