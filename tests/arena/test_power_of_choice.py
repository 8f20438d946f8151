"""Power-of-d-Choice (Cho, Wang & Joshi, AISTATS 2022): pow-d, cpow-d and rpow-d.

The policy's defining properties, each exactly where it can be: the m selected are the m
highest-loss of the d candidates (a fake loss probe with known losses sees the candidates), the
candidates are d distinct clients drawn proportionally to size without replacement (Monte Carlo
against the exact successive-sampling law), d = m is the size-proportional draw itself, the
stale variant ranks by stored losses (+inf first) and asks for free losses only, availability
restricts every step, and a JSON round trip of the state continues the same sequence.
"""

import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aoi_fl.arena.power_of_choice import PowerOfChoice, PowerOfChoiceStale
from aoi_fl.core.registry import AVAILABILITY_AWARE, SAMPLERS
from aoi_fl.core.seeding import generator
from aoi_fl.core.selection import check_available_selection

SIZES = np.array([30.0, 5.0, 120.0, 60.0, 10.0, 45.0, 80.0, 20.0, 15.0, 200.0])
N = SIZES.size
CLASSES = (PowerOfChoice, PowerOfChoiceStale)


class FakeProbe:
    """A loss probe with known losses: ``table[t]`` holds every client's mean loss at time ``t``
    (set by the test), the rms loss is twice the mean; every call is recorded."""

    def __init__(self, table):
        self.table = np.atleast_2d(np.asarray(table, dtype=float))
        self.t = 0
        self.calls = []

    def __call__(self, ids, samples=None, *, free=False):
        ids = np.asarray(ids)
        assert ids.dtype == np.int64
        self.calls.append((ids.copy(), samples, free))
        mean = self.table[self.t % len(self.table)][ids]
        return mean, 2.0 * mean


def distinct_losses(seed, rows=1, n=N):
    """Losses of n clients without ties (a seeded permutation of 1..n, shifted per row)."""
    rng = generator(seed, "test losses")
    return np.array([rng.permutation(n) + 1.0 + 0.5 * t for t in range(rows)])


def spy_candidates(sampler):
    """Record the candidate sets (in draw order) that ``sampler.sample`` draws."""
    seen = []
    draw = sampler.candidates

    def recorded(available):
        c = draw(available)
        seen.append(c.copy())
        return c

    sampler.candidates = recorded
    return seen


def top_m(candidates, losses, m):
    """The m highest ``losses`` among ``candidates``, ties in draw order, as sorted ids."""
    ranking = np.argsort(-losses[candidates], kind="stable")
    return np.sort(candidates[ranking[:m]])


@st.composite
def setups(draw):
    n = draw(st.integers(2, 12))
    sizes = np.array(draw(st.lists(st.integers(1, 500), min_size=n, max_size=n)), dtype=float)
    m = draw(st.integers(1, n))
    d = draw(st.integers(m, n))
    return sizes, m, d, draw(st.integers(0, 2**16))


# --- pow-d and cpow-d ---------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(setups(), st.sampled_from([None, 1, 7]))
def test_selects_exactly_the_m_highest_loss_of_its_d_candidates(setup, probe_samples):
    sizes, m, d, seed = setup
    n = sizes.size
    sampler = PowerOfChoice(sizes, m=m, d=d, seed=seed, probe_samples=probe_samples)
    sampler.loss_probe = probe = FakeProbe(distinct_losses(seed, rows=5, n=n))
    for t in range(5):
        probe.t = t
        sel = sampler.sample()
        assert len(probe.calls) == t + 1  # one probe of the candidates per round
        candidates, samples, free = probe.calls[-1]
        # the candidates: d distinct clients, probed on probe_samples samples, not for free
        assert candidates.size == d and np.unique(candidates).size == d
        assert samples == probe_samples and free is False
        assert np.isin(sel.ids, candidates).all()  # never a client outside the candidates
        np.testing.assert_array_equal(sel.ids, top_m(candidates, probe.table[t], m))
        np.testing.assert_array_equal(sel.weights, np.full(m, 1.0 / m))  # equal weights 1/m
        assert sel.hits is None and sel.probabilities is None
    assert sampler.round == 5


@pytest.mark.parametrize(("n", "m", "d"), [(N, 3, 7), (60, 10, 50)])
def test_ties_keep_the_draw_order_of_the_candidates(n, m, d):
    """Equal losses: the first m candidates drawn (and with losses in two tied levels, the
    first ones drawn of the higher level); 50 candidates go beyond numpy's small-array sort."""
    sizes = np.resize(SIZES, n)
    sampler = PowerOfChoice(sizes, m=m, d=d, seed=4)
    sampler.loss_probe = probe = FakeProbe(np.ones(n))  # every loss equal
    for _ in range(10):
        sel = sampler.sample()
        candidates = probe.calls[-1][0]
        np.testing.assert_array_equal(sel.ids, np.sort(candidates[:m]))
    probe.table = (np.arange(n) % 2 + 1.0)[None, :]  # odd clients 2, even ones 1
    for _ in range(10):
        sel = sampler.sample()
        candidates = probe.calls[-1][0]
        ordered = np.concatenate((candidates[candidates % 2 == 1], candidates[candidates % 2 == 0]))
        np.testing.assert_array_equal(sel.ids, np.sort(ordered[:m]))


def successive_sampling_law(p, d):
    """Exact law of d draws without replacement, each proportional to p among those left:
    P(first draw = i) and P(i among the d), by enumerating the ordered draws."""
    first, inclusion = np.zeros(p.size), np.zeros(p.size)
    for seq in itertools.permutations(range(p.size), d):
        prob, left = 1.0, 1.0
        for i in seq:
            prob *= p[i] / left
            left -= p[i]
        first[seq[0]] += prob
        inclusion[list(seq)] += prob
    return first, inclusion


@pytest.mark.parametrize("masked", [False, True])
def test_candidates_are_drawn_proportionally_to_size_without_replacement(masked):
    """Monte Carlo of the first draw and of the inclusion in the candidate set.

    Tolerance: each frequency over R rounds has standard deviation sqrt(pi (1 - pi) / R); with
    5 standard deviations the chance that one of the <= 2 * 6 comparisons fails by chance is
    below 12 * 5.8e-7 (normal tails; the draws are seeded, so the outcome is fixed anyway). The
    exact law differs from the naive alternatives (uniform candidates, inclusion d p_i) by more
    than that tolerance, so the test tells them apart.
    """
    sizes = np.array([1.0, 2.0, 3.0, 5.0, 8.0, 21.0, 4.0])
    mask = np.array([True, True, True, True, True, True, False]) if masked else None
    pool = np.arange(6)  # client 6 is unavailable when masked; p renormalised over the rest
    d, rounds = 3, 10_000
    sampler = PowerOfChoice(sizes if masked else sizes[:6], m=1, d=d, seed=11)
    first, included = np.zeros(6), np.zeros(6)
    for _ in range(rounds):
        c = sampler.candidates(mask)  # step 1 of sample(), in draw order
        assert c.size == d and np.unique(c).size == d and np.isin(c, pool).all()
        first[c[0]] += 1
        included[c] += 1
    p = sizes[pool] / sizes[pool].sum()
    exact_first, exact_inclusion = successive_sampling_law(p, d)
    np.testing.assert_allclose(exact_first, p)
    assert exact_inclusion.sum() == pytest.approx(d)
    for freq, exact in ((first / rounds, exact_first), (included / rounds, exact_inclusion)):
        tol = 5 * np.sqrt(exact * (1 - exact) / rounds)
        assert np.all(np.abs(freq - exact) <= tol), (freq, exact, tol)
    tol = 5 * np.sqrt(exact_inclusion * (1 - exact_inclusion) / rounds)
    assert np.max(np.abs(exact_inclusion - np.minimum(d * p, 1))) > 3 * tol.max()
    assert np.max(np.abs(exact_inclusion - d / 6)) > 3 * tol.max()


@settings(max_examples=25, deadline=None)
@given(setups(), st.booleans())
def test_d_equal_to_m_is_the_size_proportional_draw_without_replacement(setup, masked):
    """With d = m the losses do not matter: the selection is exactly numpy's draw of m clients
    without replacement with P proportional to size, from the sampler's own stream."""
    sizes, m, _, seed = setup
    n = sizes.size
    sampler = PowerOfChoice(sizes, m=m, d=m, seed=seed)
    sampler.loss_probe = probe = FakeProbe(distinct_losses(seed, rows=6, n=n))
    reference = generator(seed, "sampler")
    masks = generator(seed, "test masks").random((6, n)) < 0.7
    for t in range(6):
        probe.t = t
        available = masks[t] if masked else None
        pool = np.arange(n) if available is None else np.flatnonzero(available)
        sel = sampler.sample(available)
        if pool.size == 0:
            assert len(sel) == 0
            continue
        q = sizes[pool] / sizes[pool].sum()
        expected = reference.choice(pool, size=min(m, pool.size), replace=False, p=q)
        np.testing.assert_array_equal(sel.ids, np.sort(expected))


def test_cpow_d_passes_probe_samples_and_pow_d_asks_for_all_samples():
    for probe_samples in (None, 1, 13):
        sampler = PowerOfChoice(SIZES, m=2, d=5, seed=1, probe_samples=probe_samples)
        sampler.loss_probe = probe = FakeProbe(distinct_losses(1))
        for _ in range(4):
            sampler.sample()
        assert [(s, f) for _, s, f in probe.calls] == [(probe_samples, False)] * 4


# --- rpow-d: stale losses ------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(setups(), st.sampled_from([None, 3]), st.booleans())
def test_stale_variant_ranks_by_stored_losses_and_only_asks_for_free_ones(
    setup, probe_samples, masked
):
    sizes, m, d, seed = setup
    n = sizes.size
    sampler = PowerOfChoiceStale(sizes, m=m, d=d, seed=seed, probe_samples=probe_samples)
    sampler.loss_probe = probe = FakeProbe(distinct_losses(seed, rows=8, n=n))
    candidates = spy_candidates(sampler)
    masks = generator(seed, "test masks").random((8, n)) < 0.6
    stored = np.full(n, np.inf)  # what the sampler must remember: +inf until a client takes part
    for t in range(8):
        probe.t = t
        available = masks[t] if masked else None
        calls_before = len(probe.calls)
        sel = sampler.sample(available)
        c = candidates[-1]
        np.testing.assert_array_equal(sel.ids, top_m(c, stored, m))
        never = c[np.isinf(stored[c])]
        if never.size <= m:  # every never-selected candidate goes first
            assert np.isin(never, sel.ids).all()
        else:
            assert np.isin(sel.ids, never).all()
        # the participants, and only they, report their loss of the model received, for free
        new_calls = probe.calls[calls_before:]
        if sel.ids.size:
            assert len(new_calls) == 1
            ids, samples, free = new_calls[0]
            np.testing.assert_array_equal(ids, sel.ids)
            assert samples == probe_samples and free is True
            stored[sel.ids] = probe.table[t][sel.ids]
        else:
            assert new_calls == []
        np.testing.assert_array_equal(sampler.losses, stored)
    assert all(free for _, _, free in probe.calls)  # no extra (non-free) evaluation, ever


def test_stale_variant_first_round_is_the_first_m_candidates_drawn():
    """Before anybody has taken part every stored loss is +inf: a tie kept in draw order."""
    sampler = PowerOfChoiceStale(SIZES, m=4, d=8, seed=2)
    sampler.loss_probe = FakeProbe(distinct_losses(2))
    candidates = spy_candidates(sampler)
    sel = sampler.sample()
    np.testing.assert_array_equal(sel.ids, np.sort(candidates[0][:4]))


# --- availability ------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(setups(), st.sampled_from(CLASSES), st.floats(0.0, 1.0))
def test_never_selects_an_unavailable_client_and_selects_min_m_available(setup, cls, share):
    sizes, m, d, seed = setup
    n = sizes.size
    sampler = cls(sizes, m=m, d=d, seed=seed)
    sampler.loss_probe = probe = FakeProbe(distinct_losses(seed, rows=10, n=n))
    candidates = spy_candidates(sampler)
    rng = generator(seed, "test masks")
    for t in range(10):
        probe.t = t
        available = rng.random(n) < share
        calls_before = len(probe.calls)
        sel = check_available_selection(sampler.sample(available), available)
        k = int(available.sum())
        assert available[candidates[-1]].all() and candidates[-1].size == min(d, k)
        assert len(sel) == min(m, k)
        np.testing.assert_allclose(sel.weights.sum(), 1.0 if k else 0.0)
        assert all(available[ids].all() for ids, _, _ in probe.calls[calls_before:])


def test_nobody_available_gives_an_empty_round_without_probing():
    for cls in CLASSES:
        sampler = cls(SIZES, m=3, d=5, seed=0)
        sampler.loss_probe = probe = FakeProbe(np.ones(N))
        sel = sampler.sample(np.zeros(N, dtype=bool))
        assert len(sel) == 0 and sel.weights.size == 0 and probe.calls == []
        assert sampler.round == 1
        with pytest.raises(ValueError, match="available must be a boolean mask"):
            sampler.sample(np.ones(N))


# --- checkpoints ------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("masked", [False, True])
def test_state_round_trip_through_json_continues_the_same_sequence(cls, masked):
    table = distinct_losses(5, rows=30)
    masks = generator(5, "test masks").random((30, N)) < 0.6
    a = cls(SIZES, m=3, d=6, seed=5, probe_samples=4)
    a.loss_probe = probe_a = FakeProbe(table)
    for t in range(2):
        probe_a.t = t
        a.sample(masks[t] if masked else None)
    state = json.loads(json.dumps(a.state_dict(), allow_nan=False))  # strict JSON: no Infinity
    assert state["round"] == 2
    if cls is PowerOfChoiceStale:
        never = np.isinf(a.losses)
        assert never.any() and (~never).any()  # both kinds present
        assert [x is None for x in state["losses"]] == never.tolist()
        assert np.array_equal(np.array(state["losses"], dtype=float)[~never], a.losses[~never])
    b = cls(SIZES, m=3, d=6, seed=5, probe_samples=4)
    b.load_state_dict(state)
    b.loss_probe = probe_b = FakeProbe(table)
    for t in range(2, 30):
        probe_a.t = probe_b.t = t
        available = masks[t] if masked else None
        sa, sb = a.sample(available), b.sample(available)
        np.testing.assert_array_equal(sa.ids, sb.ids)
        np.testing.assert_array_equal(sa.weights, sb.weights)
    if cls is PowerOfChoiceStale:
        np.testing.assert_array_equal(a.losses, b.losses)
    assert a.state_dict() == b.state_dict()


def test_bad_states_are_refused():
    a = PowerOfChoiceStale(SIZES, m=3, d=6, seed=5)
    good = a.state_dict()
    for losses, message in (
        ([None] * (N - 1), "state\\['losses'\\] must be a list"),
        ("nope", "state\\['losses'\\] must be a list"),
        ([float("nan")] + [None] * (N - 1), "real losses"),
        ([float("-inf")] + [None] * (N - 1), "real losses"),
    ):
        with pytest.raises(ValueError, match=message):
            a.load_state_dict({**good, "losses": losses})
    with pytest.raises(ValueError, match="cannot be loaded"):
        PowerOfChoiceStale(SIZES[:5], m=3, d=4).load_state_dict(good)
    with pytest.raises(ValueError, match="cannot be loaded"):  # pow-d and rpow-d do not mix
        PowerOfChoice(SIZES, m=3, d=6, seed=5).load_state_dict(good)
    assert a.state_dict() == good  # a refused state changes nothing


# --- parameters -------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", CLASSES)
def test_bad_parameters_raise_naming_the_parameter(cls):
    with pytest.raises(ValueError, match="d must be >= m"):
        cls(SIZES, m=4, d=3)
    with pytest.raises(ValueError, match=f"d must be <= {N}"):
        cls(SIZES, m=4, d=N + 1)
    with pytest.raises(ValueError, match="probe_samples must be >= 1"):
        cls(SIZES, m=2, d=3, probe_samples=0)
    with pytest.raises(TypeError, match="probe_samples must be an integer"):
        cls(SIZES, m=2, d=3, probe_samples=2.5)
    with pytest.raises(TypeError, match="d must be an integer"):
        cls(SIZES, m=2, d=3.0)
    with pytest.raises(ValueError, match="m must be <= n"):
        cls(SIZES, m=N + 1, d=N)
    with pytest.raises(ValueError, match="sizes"):
        cls(np.array([1.0, 0.0, 2.0]), m=1, d=2)
    sampler = cls(SIZES, m=2, d=3)
    with pytest.raises(RuntimeError, match="loss_probe"):
        sampler.sample()


@pytest.mark.parametrize("cls", CLASSES)
def test_a_bad_loss_probe_is_refused(cls):
    sampler = cls(SIZES, m=2, d=3)
    sampler.loss_probe = lambda ids, samples=None, *, free=False: (np.full(ids.size, np.nan),) * 2
    with pytest.raises(ValueError, match="loss probe must return one mean loss"):
        sampler.sample()
    sampler.loss_probe = lambda ids, samples=None, *, free=False: (np.ones(1 + ids.size),) * 2
    with pytest.raises(ValueError, match="loss probe must return one mean loss"):
        sampler.sample()


@pytest.mark.parametrize("cls", CLASSES)
def test_registered_availability_aware_and_built_from_a_configuration(cls):
    assert cls.name in AVAILABILITY_AWARE and cls.wants_losses and cls.availability_aware
    sampler = SAMPLERS[cls.name](N, SIZES, m=2, d=4, seed=3, probe_samples=5)
    assert type(sampler) is cls
    assert sampler.config()["d"] == 4 and sampler.config()["probe_samples"] == 5
    with pytest.raises(ValueError, match="one size per client"):
        SAMPLERS[cls.name](N + 1, SIZES, m=2, d=4)
