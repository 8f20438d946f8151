"""The arena's ``all_available`` sampler, and the FedSUM paper's participation patterns as
availability models with everyone available selected (:mod:`aoi_fl.arena.all_available`).

P2 (:class:`aoi_fl.fedsum.patterns.Bernoulli`, client i active with probability p_i) is
``bernoulli`` availability with rates p + AllAvailable; P3 (``SineBernoulli``: p_i^t = p (A sin(2
pi t / period) + offset), t = 0, 1, ... the pattern's round counter) is ``diurnal`` availability
with base p offset, amplitude p A, every phase 0 and the same (whole-number) period. The per-round
marginals agree in closed form; the laws agree by simulation on fixed seeds, each tolerance Z = 5
standard errors of the simulated statistic (derived next to the check).
"""

import inspect
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aoi_fl.arena.all_available import AllAvailable
from aoi_fl.core.availability import build_availability
from aoi_fl.core.registry import AVAILABILITY_AWARE, SAMPLERS, STYLES
from aoi_fl.core.seeding import generator
from aoi_fl.core.selection import check_available_selection
from aoi_fl.fedsum.patterns import Bernoulli, SineBernoulli, biased_probabilities

Z = 5.0


def masks(seed, rounds, n, share=0.5):
    rng = generator(seed, "test all_available masks")
    return rng.random((rounds, n)) < share


# ------------------------------------------------------------------------ the sampler


def test_selects_every_available_client_with_weights_one_over_the_count():
    sampler = AllAvailable(6, seed=0)
    for t, mask in enumerate(masks(1, 20, 6)):
        sel = check_available_selection(sampler.sample(mask), mask)
        np.testing.assert_array_equal(sel.ids, np.flatnonzero(mask))
        if mask.any():
            np.testing.assert_array_equal(sel.weights, np.full(mask.sum(), 1 / mask.sum()))
            assert sel.weights.sum() == pytest.approx(1.0)
        assert sel.probabilities is None and sel.procedure is None and sel.hits is None
        assert sampler.round == t + 1


def test_everyone_without_a_mask_and_nobody_when_nobody_is_available():
    sampler = AllAvailable(4, seed=3)
    sel = sampler.sample()
    np.testing.assert_array_equal(sel.ids, np.arange(4))
    np.testing.assert_array_equal(sel.weights, np.full(4, 0.25))
    sel = sampler.sample(np.zeros(4, dtype=bool))
    assert sel.ids.size == 0 and sel.weights.size == 0  # an empty round, no division by zero
    assert sampler.round == 2


@pytest.mark.parametrize(
    "mask",
    [np.ones(5, dtype=int), np.ones(4, dtype=bool), np.ones((1, 5), dtype=bool), [1] * 5],
)
def test_a_mask_must_be_a_boolean_vector_of_the_n_clients(mask):
    with pytest.raises(ValueError, match=r"available must be a boolean mask of the n=5 clients"):
        AllAvailable(5, seed=0).sample(mask)


def test_the_seed_changes_nothing_and_the_state_round_trips():
    a, b = AllAvailable(7, seed=1), AllAvailable(7, seed=99)
    rounds = masks(2, 10, 7)
    for mask in rounds[:5]:
        np.testing.assert_array_equal(a.sample(mask).ids, b.sample(mask).ids)
    state = json.loads(json.dumps(a.state_dict()))
    c = AllAvailable(7, seed=1)
    c.load_state_dict(state)
    assert c.round == 5
    for mask in rounds[5:]:
        np.testing.assert_array_equal(c.sample(mask).ids, a.sample(mask).ids)
    assert a.config() == {"name": "all_available", "n": 7, "seed": 1}


def test_registered_as_an_availability_aware_sampler_with_no_options():
    assert AllAvailable.availability_aware and "all_available" in AVAILABILITY_AWARE
    assert "all_available" in STYLES
    factory = SAMPLERS["all_available"]
    assert list(inspect.signature(factory).parameters) == ["n", "sizes", "seed"]
    sampler = factory(5, np.arange(1, 6), seed=4)
    assert isinstance(sampler, AllAvailable) and sampler.n == 5 and sampler.seed == 4


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=40))
def test_any_mask_gives_its_clients_with_equal_weights(bits):
    mask = np.array(bits)
    sel = AllAvailable(mask.size, seed=0).sample(mask)
    assert sel.ids.tolist() == [i for i, b in enumerate(bits) if b]
    assert np.all(sel.weights == 1 / max(mask.sum(), 1))


# ------------------------------------------------ FedSUM's patterns as availability models


def p2_availability(p, n, seed=0):
    """P2 with probability p (one or per client) as availability: bernoulli with those rates."""
    p = np.broadcast_to(np.asarray(p, dtype=float), (n,))
    if np.all(p == p[0]):
        return build_availability({"name": "bernoulli", "seed": seed, "mean": float(p[0])}, n, None)
    return build_availability({"name": "bernoulli", "seed": seed, "rates": p.tolist()}, n, None)


def p3_availability(n, p, amplitude, offset, period, seed=0):
    """P3 as availability: diurnal with base p offset, amplitude p A, every phase 0."""
    spec = {
        "name": "diurnal",
        "seed": seed,
        "base": p * offset,
        "amplitude": p * amplitude,
        "period": period,
        "phases": 0.0,
    }
    return build_availability(spec, n, None)


@pytest.mark.parametrize("p", [0.2, 1.0, biased_probabilities(30), np.linspace(0.05, 1, 30)])
def test_p2_marginals_are_bernoulli_availability_rates_exactly(p):
    n = 30
    pattern, model = Bernoulli(n, p), p2_availability(p, n)
    for t in (0, 1, 9, 10, 1234):
        np.testing.assert_array_equal(model.rates(t), pattern.probabilities(t))
    np.testing.assert_array_equal(model.long_run_rates(), pattern.probabilities(0))


#: (p, amplitude, offset, period): the paper's P3 (period 10), the FedAWE code's period 20, and
#: others (the largest reaches 1 at the peak: the diurnal clip at 1 does not act)
P3_CASES = [(0.2, 0.3, 0.7, 10), (0.2, 0.3, 0.7, 20), (0.5, 0.9, 1.0, 7), (0.8, 0.25, 1.0, 4)]


@pytest.mark.parametrize("p, amplitude, offset, period", P3_CASES)
def test_p3_marginals_are_diurnal_availability_rates(p, amplitude, offset, period):
    """Equal up to rounding: p (A s + offset) against p offset + (p A) s, the same angle
    2 pi t / period (same float operations, plus phase 0) and the same time origin t = 0."""
    n = 5
    pattern = SineBernoulli(n, p, amplitude, offset, float(period))
    model = p3_availability(n, p, amplitude, offset, period)
    for t in [*range(3 * period), 10**5 + 3]:
        want = pattern.probabilities(t)
        assert ((want > 0) & (want <= 1)).all()  # a valid pattern never needs the clip
        np.testing.assert_allclose(model.rates(t), want, rtol=1e-13, atol=1e-15)
    # long run: the period mean of p (A sin + offset) is p offset (the sine averages out)
    np.testing.assert_allclose(model.long_run_rates(), p * offset, rtol=1e-12)


def test_p3_is_the_papers_formula_from_round_zero():
    """The paper's p_i^t = (S/N)(0.3 sin(pi t / 5) + 0.7), S/N = 0.2, round t = 0 first."""
    model = p3_availability(4, 0.2, 0.3, 0.7, 10)
    for t in range(25):
        want = 0.2 * (0.3 * math.sin(math.pi * t / 5) + 0.7)
        np.testing.assert_allclose(model.rates(t), want, rtol=1e-13)


def test_a_p3_period_that_is_not_a_whole_number_has_no_diurnal_counterpart():
    SineBernoulli(3, 0.2, period=7.5)  # a valid pattern...
    with pytest.raises(TypeError, match="period must be an integer, got 7.5"):
        p3_availability(3, 0.2, 0.3, 0.7, 7.5)  # ...but diurnal periods are whole rounds
    with pytest.raises(TypeError, match="period must be an integer, got 10.0"):
        p3_availability(3, 0.2, 0.3, 0.7, 10.0)  # (the pattern's default is the float 10.0)


def run_pattern(pattern, rounds):
    out = np.zeros((rounds, pattern.n), dtype=bool)
    for t in range(rounds):
        sel = pattern.sample()
        if sel.ids.size:
            np.testing.assert_array_equal(sel.weights, np.full(sel.ids.size, 1 / sel.ids.size))
        out[t, sel.ids] = True
    return out


def run_all_available(model, rounds, seed):
    sampler = AllAvailable(model.n, seed)
    out = np.zeros((rounds, model.n), dtype=bool)
    for t in range(rounds):
        mask = model.mask(t)
        sel = sampler.sample(mask)
        np.testing.assert_array_equal(sel.ids, np.flatnonzero(mask))  # pathwise: the mask
        if sel.ids.size:
            np.testing.assert_array_equal(sel.weights, np.full(sel.ids.size, 1 / sel.ids.size))
        out[t, sel.ids] = True
    return out


def assert_same_law(pattern_runs, model_runs, probs):
    """Participation indicators (seeds, rounds, n) of both against the marginals probs (rounds,).

    Under either construction the indicators are independent Bernoulli(p_t) across clients,
    rounds and seeds, so with m = seeds n draws per round:
    - round t's frequency has standard error sqrt(p_t (1 - p_t) / m): each within Z of it, and
      the two constructions' difference within Z sqrt(2 p_t (1 - p_t) / m);
    - both clients i and t + 1 of round t: frequency of Bernoulli(p_t p_{t+1}), within Z
      sqrt(q (1 - q) / m), q = p_t p_{t+1} (independence across rounds);
    - |S_t| is Binomial(n, p_t): standardised, its mean over the seeds x rounds samples is within
      Z / sqrt(samples) of 0 and its variance within Z sqrt(2 / samples) of 1 (normal
      approximation of the sample variance; clients are independent within a round).
    """
    seeds, rounds, n = pattern_runs.shape
    m = seeds * n
    se = np.sqrt(probs * (1 - probs) / m)
    q = probs[:-1] * probs[1:]
    for runs in (pattern_runs, model_runs):
        freq = runs.mean(axis=(0, 2))
        assert np.all(np.abs(freq - probs) <= Z * se)
        both = (runs[:, :-1] & runs[:, 1:]).mean(axis=(0, 2))
        assert np.all(np.abs(both - q) <= Z * np.sqrt(q * (1 - q) / m))
        counts = runs.sum(axis=2)
        z = (counts - n * probs) / np.sqrt(n * probs * (1 - probs))
        assert abs(z.mean()) <= Z / math.sqrt(z.size)
        assert abs(z.var() - 1) <= Z * math.sqrt(2 / z.size)
    diff = pattern_runs.mean(axis=(0, 2)) - model_runs.mean(axis=(0, 2))
    assert np.all(np.abs(diff) <= Z * math.sqrt(2) * se)


def test_p2_equals_bernoulli_availability_with_all_available_in_law():
    n, rounds, seeds, p = 50, 20, 60, 0.2
    pattern_runs = np.stack([run_pattern(Bernoulli(n, p, seed=s), rounds) for s in range(seeds)])
    model_runs = np.stack(
        [run_all_available(p2_availability(p, n, seed=s), rounds, s) for s in range(seeds)]
    )
    assert_same_law(pattern_runs, model_runs, np.full(rounds, p))


def test_p3_equals_diurnal_availability_with_all_available_in_law():
    """The paper's P3 with a larger p, so that the per-round rates (0.16 to 0.4) are far apart
    compared with the standard errors: a shifted time origin or period would fail."""
    n, rounds, seeds, (p, amplitude, offset, period) = 50, 20, 60, (0.4, 0.3, 0.7, 10)
    probs = np.array(
        [SineBernoulli(n, p, amplitude, offset, period).probabilities(t)[0] for t in range(rounds)]
    )
    pattern_runs = np.stack(
        [
            run_pattern(SineBernoulli(n, p, amplitude, offset, float(period), seed=s), rounds)
            for s in range(seeds)
        ]
    )
    model_runs = np.stack(
        [
            run_all_available(p3_availability(n, p, amplitude, offset, period, seed=s), rounds, s)
            for s in range(seeds)
        ]
    )
    assert_same_law(pattern_runs, model_runs, probs)
    # shifted by one round, the marginals are off by far more than the tolerance
    shifted = np.roll(probs, 1)
    se = np.sqrt(probs * (1 - probs) / (seeds * n))
    assert np.any(np.abs(model_runs.mean(axis=(0, 2)) - shifted) > Z * se)
