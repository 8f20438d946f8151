"""The contract every registered sampler keeps, and a pinned reference trace per sampler.

Every name in :data:`aoi_fl.pipeline.runs.SAMPLERS` is built here from a configuration the way a
training run builds it, and must: give the same selections for the same seed, return valid
:class:`Selection` objects, and continue exactly the same sequence after a JSON round trip of
its state. The digests in :data:`PINNED` were recorded from the code before the modules were
reorganised (issue 14): a change of a sampler's random stream fails here even where a cache key
still matches.
"""

import hashlib
import json

import numpy as np
import pytest

from aoi_fl.core import registry
from aoi_fl.core.selection import Selection
from aoi_fl.pipeline import runs
from aoi_fl.pipeline.policies import make_policy

N = 24
SIZES = np.arange(1, N + 1) * 7.0
ROUNDS = 40

#: name -> the options of its configuration section (besides "name" and "seed")
OPTIONS = {
    "random": {"m": 5, "m_prime": 4},
    "probabilistic": {"m": 5, "m_prime": 4},
    "markov_optimal": {"m": 5, "m_prime": 4},
    "markov_nonoptimal": {"m": 5, "m_prime": 4},
    "exp_prior": {"m": 5, "tau": 10.0},
    "uniform_unbiased": {"k": 5},
    "uniform_normalised": {"k": 5},
    "uniform_isp": {"k": 5},
    "optimal": {"k": 5},
    "kvib": {"k": 5, "rounds": ROUNDS},
    "vrb": {"k": 5, "rounds": ROUNDS},
    "mabs": {"k": 5, "rounds": ROUNDS},
    "uniform": {"s": 5},
    "bernoulli": {"p": 0.2},
    "sine_bernoulli": {"p": 0.2},
    "biased": {},
    "cyclic": {"s": 6},
    "reshuffled_cyclic": {"s": 6},
    # the selection arena's (issue 29)
    "all_available": {},
    "markov_available": {"m": 5, "m_prime": 4},
    "power_of_choice": {"m": 5, "d": 10},
    "power_of_choice_stale": {"m": 5, "d": 10},
    "clustered_size": {"m": 5},
    "clustered_similarity": {"m": 5},
    "oort": {"m": 5},
}

#: sha256 (first 16 hex digits) of the first ROUNDS selections (ids, weights to 12 significant
#: digits) under the feedback of :func:`_drive`, seed 3; recorded before the reorganisation
PINNED = {
    "bernoulli": "548acebe79c4d7de",
    "biased": "874f9fef2855f7c5",
    "cyclic": "6dcfb17eeb5a24a7",
    "exp_prior": "3fe8b8f339279696",
    "kvib": "954b8e7b8ace2922",
    "mabs": "92c7f845d71ece93",
    "markov_nonoptimal": "d0acad741e4a9374",
    "markov_optimal": "5d2dfb3dd5309b32",
    "optimal": "665d927d960d1014",
    "probabilistic": "1993f00991da8701",
    "random": "7f76a74fca364c76",
    "reshuffled_cyclic": "01406fec32608db1",
    "sine_bernoulli": "3cf19a53ba0fb0ff",
    "uniform": "7b5f81c7b67029bc",
    "uniform_isp": "be10feb703fe3413",
    "uniform_normalised": "d72eee3d354a748e",
    "uniform_unbiased": "a8a7ff7614e5cb94",
    "vrb": "2630bdda028d3066",
    # recorded when the selection arena added them (issue 29)
    "all_available": "6a740dde6b86b1d4",
    # without an availability model, Policy 3 itself (the same digest as markov_optimal)
    "markov_available": "5d2dfb3dd5309b32",
    "power_of_choice": "afa202c088d480cf",
    "power_of_choice_stale": "120a3a480bd9873f",
    "clustered_size": "2ef6c6fa9d2fd5c3",
    "clustered_similarity": "e7fd5462cd2d1e66",
    "oort": "d4284465a7613cc9",
}


def build(name, seed=3):
    sampler = runs.SAMPLERS[name](N, SIZES, seed=seed, **OPTIONS[name])
    if sampler.wants_losses:
        sampler.loss_probe = _probe(sampler)
    return sampler


def _probe(sampler):
    """A loss probe whose losses depend on (round, client) only, as the trainer's depend on the
    model of the round and the client's samples."""

    def probe(ids, samples=None, *, free=False):
        loss = _norms(sampler.round)[ids] + 0.01 * (samples or 0)
        return loss, 1.1 * loss

    return probe


def _norms(t):
    # a fixed, skewed feedback sequence: what adaptive samplers learn from
    rng = np.random.default_rng(1000 + t)
    return (np.linspace(0.1, 3.0, N) * rng.uniform(0.5, 1.5, N)) ** 2


def _drive(sampler, rounds, start=0):
    out = []
    for t in range(start, start + rounds):
        sampler.inform(_norms(t))
        sel = sampler.sample()
        sampler.feedback(sel.ids, _norms(t)[sel.ids])
        if sampler.wants_updates:
            # updates that point one of three ways by client, scaled by the round's norms
            directions = np.eye(3)[sel.ids % 3] + 0.1 * sel.ids[:, None]
            sampler.feedback_updates(sel.ids, directions * _norms(t)[sel.ids, None])
        out.append(sel)
    return out


def _digest(selections):
    h = hashlib.sha256()
    for sel in selections:
        h.update(sel.ids.tobytes())
        h.update(np.array2string(sel.weights, precision=12, floatmode="maxprec").encode())
    return h.hexdigest()[:16]


def test_the_contract_covers_every_registered_sampler():
    # a sampler added to the registry must be added here (and so be checked and pinned)
    assert set(OPTIONS) == set(runs.SAMPLERS)


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_same_seed_same_selections_and_valid(name):
    a, b = _drive(build(name), ROUNDS), _drive(build(name), ROUNDS)
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x.ids, y.ids) and np.array_equal(x.weights, y.weights)
    for sel in a:
        assert isinstance(sel, Selection)
        assert np.all(np.diff(sel.ids) > 0), "ids must be distinct and increasing"
        assert sel.ids.size == 0 or (sel.ids[0] >= 0 and sel.ids[-1] < N)
        assert np.all(np.isfinite(sel.weights)) and np.all(sel.weights >= 0)
    other = _drive(build(name, seed=4), ROUNDS)
    if name not in ("cyclic", "all_available"):  # deterministic: no randomness
        assert _digest(other) != _digest(a), "the seed must change the selections"


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_state_round_trip_continues_the_same_sequence(name):
    original = build(name)
    _drive(original, 15)
    state = json.loads(json.dumps(original.state_dict()))  # checkpoints hold JSON, no pickle
    restored = build(name, seed=99)  # the state, not the seed, must carry the stream
    restored.load_state_dict(state)
    assert _digest(_drive(restored, 15, start=15)) == _digest(_drive(original, 15, start=15))


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_pinned_reference_trace(name):
    assert _digest(_drive(build(name), ROUNDS)) == PINNED[name]


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_make_policy_takes_m_for_every_policy_and_draws_the_pinned_trace(name):
    # one name for the clients per round (K-Vib's k and FedSUM's s mapped): the same sampler
    options = dict(OPTIONS[name])
    if (own := registry.clients_option(name)) is not None:
        options["m"] = options.pop(own)
    sampler = make_policy(name, N, SIZES, seed=3, **options)
    if sampler.wants_losses:
        sampler.loss_probe = _probe(sampler)
    assert _digest(_drive(sampler, ROUNDS)) == PINNED[name]


AWARE = sorted(
    name for name in OPTIONS if runs.SAMPLERS[name](N, SIZES, **OPTIONS[name]).availability_aware
)


def _masks(seed, rounds, share):
    rng = np.random.default_rng(seed)
    return [rng.random(N) < share for _ in range(rounds)]


def _drive_masked(sampler, masks, start=0):
    out = []
    for t, mask in enumerate(masks, start=start):
        sel = sampler.sample(mask)
        sampler.feedback(sel.ids, _norms(t)[sel.ids])
        if sampler.wants_updates:
            directions = np.eye(3)[sel.ids % 3] + 0.1 * sel.ids[:, None]
            sampler.feedback_updates(sel.ids, directions * _norms(t)[sel.ids, None])
        out.append(sel)
    return out


def test_availability_aware_samplers_are_registered_as_such():
    from aoi_fl.core.registry import AVAILABILITY_AWARE

    assert set(AWARE) == set(AVAILABILITY_AWARE) & set(OPTIONS)
    # the policies of the papers that define their own participation stay unaware
    assert {"bernoulli", "sine_bernoulli", "cyclic", "optimal", "exp_prior"}.isdisjoint(AWARE)


@pytest.mark.parametrize("name", AWARE)
@pytest.mark.parametrize("share", [0.0, 0.1, 0.5, 1.0])
def test_availability_aware_samplers_select_available_clients_only(name, share):
    masks = _masks(7, ROUNDS, share)
    for mask, sel in zip(masks, _drive_masked(build(name), masks), strict=True):
        assert np.all(np.diff(sel.ids) > 0)
        assert mask[sel.ids].all(), f"{name} selected an unavailable client"
        assert np.all(np.isfinite(sel.weights)) and np.all(sel.weights >= 0)
        if sel.ids.size and name not in ("kvib", "vrb", "mabs", "uniform_unbiased", "uniform_isp"):
            # every policy but the unbiased estimators averages: weights sum to one
            assert sel.weights.sum() == pytest.approx(1.0)
        if not mask.any():
            assert sel.ids.size == 0


@pytest.mark.parametrize("name", AWARE)
def test_state_round_trip_under_availability(name):
    masks = _masks(8, 30, 0.4)
    original = build(name)
    _drive_masked(original, masks[:15])
    state = json.loads(json.dumps(original.state_dict()))
    restored = build(name, seed=99)
    restored.load_state_dict(state)
    later = masks[15:]
    assert _digest(_drive_masked(restored, later, 15)) == _digest(
        _drive_masked(original, later, 15)
    )
