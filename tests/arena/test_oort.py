"""Oort's statistical participant selection (Lai et al., OSDI 2021), without system utility.

Exact checks of the pieces (statistical utility, temporal uncertainty, the exploration factor's
schedule, the clipped and rescaled utility), of the round's split between exploitation and
exploration (the module docstring's rule), of the admission cut-off of exploitation and its
utility-proportional draw (Monte Carlo), of availability, and of the JSON checkpoint.
"""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aoi_fl.arena.oort import Oort, staleness_bonus, statistical_utility
from aoi_fl.core.registry import AVAILABILITY_AWARE, SAMPLERS
from aoi_fl.core.seeding import generator
from aoi_fl.core.selection import check_available_selection

SIZES = np.array([30.0, 5.0, 120.0, 60.0, 10.0, 45.0, 80.0, 20.0, 15.0, 200.0, 70.0, 25.0])
N = SIZES.size


class FakeProbe:
    """Known losses: client i's rms loss at time ``t`` is ``table[t][i]`` (mean: half of it)."""

    def __init__(self, table):
        self.table = np.atleast_2d(np.asarray(table, dtype=float))
        self.t = 0
        self.calls = []

    def __call__(self, ids, samples=None, *, free=False):
        ids = np.asarray(ids)
        self.calls.append((ids.copy(), samples, free))
        rms = self.table[self.t % len(self.table)][ids]
        return 0.5 * rms, rms


def loss_table(seed, rows, n=N):
    return 0.1 + generator(seed, "test losses").random((rows, n)) * 3.0


def reference_utilities(u, last, round_number, clip_quantile=0.95):
    """Alg. 1's utility as the module docstring states it, written out independently: U clipped
    at the order statistic floor(len * q) (capped at the largest), rescaled to [0, 1] by the
    unclipped smallest and largest U, plus sqrt(0.1 ln R / L)."""
    u = [float(x) for x in u]
    clip = sorted(u)[min(int(len(u) * clip_quantile + 1e-9), len(u) - 1)]
    lo, hi = min(u), max(u)
    return np.array(
        [
            ((min(x, clip) - lo) / (hi - lo) if hi > lo else 0.0)
            + math.sqrt(0.1 * math.log(round_number) / last_i)
            for x, last_i in zip(u, last, strict=True)
        ]
    )


# --- the pieces ---------------------------------------------------------------------------------


def test_statistical_utility_is_samples_times_rms_loss_on_a_hand_case():
    losses = np.array([1.0, 2.0, 3.0, 4.0])  # |B| = 4, mean of squares 30 / 4
    u = statistical_utility(losses.size, math.sqrt(np.mean(losses**2)))
    # |B| sqrt((1/|B|) sum Loss^2) = sqrt(|B| sum Loss^2) = sqrt(4 * 30)
    assert u == pytest.approx(math.sqrt(120.0), rel=1e-15)
    np.testing.assert_allclose(
        statistical_utility([4, 10, 7], [math.sqrt(7.5), 0.5, 0.0]), [math.sqrt(120.0), 5.0, 0.0]
    )


def test_staleness_bonus_is_sqrt_of_a_tenth_of_ln_r_over_l():
    np.testing.assert_allclose(
        staleness_bonus(10, [1, 2, 5, 10]),
        [math.sqrt(0.1 * math.log(10) / last) for last in (1, 2, 5, 10)],
        rtol=1e-15,
    )
    assert staleness_bonus(10, 1) == pytest.approx(0.479852, abs=1e-6)  # sqrt(0.2302585)
    np.testing.assert_array_equal(staleness_bonus(1, [1, 3]), [0.0, 0.0])  # ln 1 = 0


def test_observed_utility_and_last_round_after_each_round():
    sampler = Oort(SIZES, m=4, seed=3)
    sampler.loss_probe = probe = FakeProbe(loss_table(3, 6))
    expected_u, expected_last = np.zeros(N), np.zeros(N, dtype=np.int64)
    for t in range(6):
        probe.t = t
        sel = sampler.sample()
        ids, samples, free = probe.calls[-1]
        assert len(probe.calls) == t + 1  # one probe per round: the participants', for free
        np.testing.assert_array_equal(ids, sel.ids)
        assert samples is None and free is True
        expected_u[sel.ids] = SIZES[sel.ids] * probe.table[t][sel.ids]  # |B_i| = d_i
        expected_last[sel.ids] = t + 1  # rounds counted from 1
        np.testing.assert_array_equal(sampler.utility, expected_u)
        np.testing.assert_array_equal(sampler.last_round, expected_last)
        # FedAvg's weights
        np.testing.assert_allclose(sel.weights, SIZES[sel.ids] / SIZES[sel.ids].sum())


def test_utilities_are_clipped_rescaled_and_given_the_staleness_bonus():
    sampler = Oort(SIZES[:5], m=2, seed=0, clip_quantile=0.6)
    sampler.round = 7  # the coming round is R = 8
    sampler.utility = np.array([10.0, 20.0, 30.0, 40.0, 1000.0])
    sampler.last_round = np.array([1, 2, 7, 4, 5])
    ids = np.arange(5)
    # clip at the order statistic floor(5 * 0.6) = 3: 40; span 1000 - 10 = 990
    hand = np.array([0.0, 10.0, 20.0, 30.0, 30.0]) / 990 + np.sqrt(
        0.1 * math.log(8) / np.array([1, 2, 7, 4, 5])
    )
    np.testing.assert_allclose(sampler.utilities(ids), hand, rtol=1e-14)
    np.testing.assert_allclose(
        sampler.utilities(ids),
        reference_utilities(sampler.utility, sampler.last_round, 8, 0.6),
        rtol=1e-14,
    )
    sampler.utility[:] = 5.0  # no spread: only the bonus is left
    np.testing.assert_allclose(sampler.utilities(ids[1:3]), staleness_bonus(8, [2, 7]))


# --- the exploration factor ---------------------------------------------------------------------


def test_exploration_factor_schedule_and_zero_once_everybody_was_tried():
    sampler = Oort(SIZES, m=4)
    for t in range(150):
        sampler.round = t
        assert sampler.exploration_factor() == max(0.9 * 0.98**t, 0.2)
    sampler.round = 74
    assert sampler.exploration_factor() > 0.2  # 0.9 * 0.98^74 = 0.2005
    sampler.round = 75
    assert sampler.exploration_factor() == 0.2  # 0.9 * 0.98^75 = 0.1965: the floor
    sampler.last_round[:] = 1
    assert sampler.exploration_factor() == 0.0
    sampler.last_round[3] = 0
    assert sampler.exploration_factor() == 0.2
    custom = Oort(SIZES, m=4, epsilon=0.5, epsilon_decay=0.5, epsilon_min=0.1)
    for t in range(6):
        custom.round = t
        assert custom.exploration_factor() == max(0.5 * 0.5**t, 0.1)


def test_exploration_factor_follows_the_rounds_of_sampling():
    sampler = Oort(np.ones(200), m=3, seed=1)
    sampler.loss_probe = FakeProbe(loss_table(1, 1, 200))
    for t in range(40):
        assert sampler.exploration_factor() == max(0.9 * 0.98**t, 0.2)
        sampler.sample()
    everybody = Oort(np.ones(6), m=3, seed=1)
    everybody.loss_probe = FakeProbe(loss_table(1, 1, 6))
    everybody.sample(), everybody.sample()
    assert everybody.exploration_factor() == 0.0  # 6 clients, 3 new per round


# --- one round: exploitation and exploration ----------------------------------------------------


def expected_split(sampler, available):
    """The module docstring's rule: (exploited, explored, total) for the coming round."""
    pool = np.arange(sampler.n) if available is None else np.flatnonzero(available)
    total = min(sampler.m, pool.size)
    tried = int((sampler.last_round[pool] > 0).sum())
    eps = sampler.exploration_factor()
    slots = math.floor(sampler.m * (1 - eps) + 1e-9)
    exploit = min(slots, tried, total)
    explore = min(pool.size - tried, total - exploit)
    return exploit, explore, total


def test_hand_round_one_exploitation_slot_and_nine_exploration_slots():
    """m = 10, eps = 0.9 (no decay): m (1 - eps) = 1 up to round-off, so 1 + 9 slots."""
    sizes = np.arange(1.0, 41.0)
    sampler = Oort(sizes, m=10, seed=2, epsilon=0.9, epsilon_decay=1.0)
    sampler.loss_probe = FakeProbe(loss_table(2, 1, 40))
    first = sampler.sample()
    assert len(first) == 10  # round 1: nobody tried, all 10 explore
    second = sampler.sample()
    tried_twice = np.intersect1d(first.ids, second.ids)
    assert len(second) == 10 and tried_twice.size == 1  # 1 exploited, 9 new
    assert expected_split(sampler, None) == (1, 9, 10)


@settings(max_examples=30, deadline=None)
@given(
    st.integers(2, 30),
    st.data(),
    st.integers(0, 2**16),
    st.sampled_from([None, 0.3, 0.7, 1.0]),
)
def test_each_round_exploits_and_explores_as_the_docstring_says(n, data, seed, share):
    m = data.draw(st.integers(1, n))
    cutoff = data.draw(st.sampled_from([0.95, 0.5, 1.0]))
    sizes = 1.0 + generator(seed, "test sizes").integers(1, 300, n)
    sampler = Oort(sizes, m=m, seed=seed, epsilon_decay=0.9, cutoff=cutoff)
    sampler.loss_probe = probe = FakeProbe(loss_table(seed, 1, n))
    rng = generator(seed, "test masks")
    for t in range(12):
        probe.t = t
        available = None if share is None else rng.random(n) < share
        n_exploit, n_explore, total = expected_split(sampler, available)
        tried = sampler.last_round > 0
        pool = np.arange(n) if available is None else np.flatnonzero(available)
        explored_pool = pool[tried[pool]]
        admitted = np.empty(0, dtype=np.int64)
        if n_exploit:
            util = sampler.utilities(explored_pool)
            kth = np.sort(util)[::-1][n_exploit - 1]
            admitted = explored_pool[util >= cutoff * kth]
        sel = check_available_selection(sampler.sample(available), available)
        assert len(sel) == total  # min(m, #available)
        new = sel.ids[~tried[sel.ids]]
        assert new.size == n_explore
        again = sel.ids[tried[sel.ids]]
        assert again.size == total - n_explore
        if again.size == n_exploit:  # no slot left over for the fill: all exploited
            assert np.isin(again, admitted).all()


@pytest.mark.parametrize(("cutoff", "expected"), [(0.95, [0, 1, 2, 3]), (0.5, [0, 1, 2, 3, 5, 6])])
def test_exploitation_admits_only_clients_above_the_cutoff_and_draws_by_utility(cutoff, expected):
    """k = 2 of 8 explored clients with known utilities: the admitted set is exactly those with
    Util >= cutoff * the second best, and the first exploited client is drawn with probability
    Util_i / sum over the admitted (Monte Carlo over R draws, 5 standard deviations of a
    frequency, sqrt(q (1 - q) / R), per client). With the lower cut-off the admitted utilities
    differ enough that a uniform draw among them would fail the same tolerance."""
    sampler = Oort(np.ones(10), m=4, seed=9, cutoff=cutoff)
    sampler.round = 99  # R = 100
    sampler.last_round = np.array([90, 60, 95, 99, 80, 99, 70, 85, 0, 0])
    sampler.utility = np.array([50.0, 48.0, 47.5, 49.0, 10.0, 30.0, 44.0, 1.0, 0.0, 0.0])
    explored = np.arange(8)
    util = sampler.utilities(explored)
    np.testing.assert_allclose(
        util, reference_utilities(sampler.utility[:8], sampler.last_round[:8], 100), rtol=1e-14
    )
    bar = cutoff * np.sort(util)[::-1][1]
    admitted = util >= bar
    np.testing.assert_array_equal(np.flatnonzero(admitted), expected)  # the cut-off matters
    assert np.min(np.abs(util - bar)) > 0.02  # and nobody is near it
    rounds, counts, first = 4000, np.zeros(8), np.zeros(8)
    for _ in range(rounds):
        chosen = sampler.exploit(explored, 2)
        assert chosen.size == 2 and np.unique(chosen).size == 2
        counts[chosen] += 1
        first[chosen[0]] += 1
    assert np.all(counts[~admitted] == 0) and np.all(counts[admitted] > 0)
    q = np.where(admitted, util, 0.0) / util[admitted].sum()
    tol = 5 * np.sqrt(q * (1 - q) / rounds)
    assert np.all(np.abs(first / rounds - q) <= tol), (first / rounds, q, tol)
    if cutoff == 0.5:
        uniform = admitted / admitted.sum()
        assert np.max(np.abs(uniform - q) - 2 * tol) > 0
    assert sampler.exploit(explored, 0).size == 0


# --- availability -------------------------------------------------------------------------------


def test_unavailable_clients_are_never_picked_and_nobody_available_is_an_empty_round():
    sampler = Oort(SIZES, m=5, seed=4)
    sampler.loss_probe = probe = FakeProbe(loss_table(4, 20))
    rng = generator(4, "test masks")
    for t in range(20):
        probe.t = t
        available = rng.random(N) < 0.4
        sel = check_available_selection(sampler.sample(available), available)
        assert len(sel) == min(5, available.sum())
    calls = len(probe.calls)
    sel = sampler.sample(np.zeros(N, dtype=bool))
    assert len(sel) == 0 and sel.weights.size == 0 and len(probe.calls) == calls
    with pytest.raises(ValueError, match="available must be a boolean mask"):
        sampler.sample(np.ones(N, dtype=int))


# --- checkpoints --------------------------------------------------------------------------------


@pytest.mark.parametrize("masked", [False, True])
def test_state_round_trip_through_json_continues_the_same_sequence(masked):
    table = loss_table(6, 40)
    masks = generator(6, "test masks").random((40, N)) < 0.6
    a = Oort(SIZES, m=4, seed=6, epsilon_decay=0.9)
    a.loss_probe = probe_a = FakeProbe(table)
    for t in range(3):
        probe_a.t = t
        a.sample(masks[t] if masked else None)
    state = json.loads(json.dumps(a.state_dict(), allow_nan=False))
    b = Oort(SIZES, m=4, seed=6, epsilon_decay=0.9)
    b.load_state_dict(state)
    b.loss_probe = probe_b = FakeProbe(table)
    for t in range(3, 40):
        probe_a.t = probe_b.t = t
        available = masks[t] if masked else None
        sa, sb = a.sample(available), b.sample(available)
        np.testing.assert_array_equal(sa.ids, sb.ids)
        np.testing.assert_array_equal(sa.weights, sb.weights)
    assert a.exploration_factor() == 0.0  # the run got to pure exploitation
    assert a.state_dict() == b.state_dict()


def test_bad_states_are_refused():
    a = Oort(SIZES, m=4, seed=6)
    a.loss_probe = FakeProbe(loss_table(6, 1))
    a.sample(), a.sample()
    good = a.state_dict()
    for key, value, message in (
        ("utility", [1.0] * (N - 1), "state\\['utility'\\]"),
        ("utility", [-1.0] * N, "state\\['utility'\\]"),
        ("utility", None, "state\\['utility'\\]"),
        ("last_round", [3] * N, "state\\['last_round'\\] must hold 12 rounds in \\[0, 2\\]"),
        ("last_round", [0.5] * N, "state\\['last_round'\\]"),
        ("last_round", [-1] * N, "state\\['last_round'\\]"),
    ):
        with pytest.raises(ValueError, match=message):
            a.load_state_dict({**good, key: value})
    with pytest.raises(ValueError, match="cannot be loaded"):
        Oort(SIZES[:5], m=4).load_state_dict(good)
    assert a.state_dict() == good


# --- parameters ---------------------------------------------------------------------------------


def test_bad_parameters_raise_naming_the_parameter():
    for options, error, message in (
        ({"epsilon": 1.5}, ValueError, "epsilon must be <= 1"),
        ({"epsilon": -0.1}, ValueError, "epsilon must be >= 0"),
        ({"epsilon_decay": 0.0}, ValueError, "epsilon_decay must be > 0"),
        ({"epsilon_decay": 1.1}, ValueError, "epsilon_decay must be <= 1"),
        ({"epsilon": 0.3, "epsilon_min": 0.5}, ValueError, "epsilon_min must be <= epsilon"),
        ({"cutoff": 0.0}, ValueError, "cutoff must be > 0"),
        ({"cutoff": 1.2}, ValueError, "cutoff must be <= 1"),
        ({"clip_quantile": 0.0}, ValueError, "clip_quantile must be > 0"),
        ({"epsilon": "0.9"}, TypeError, "epsilon must be a real number"),
        ({"m": N + 1}, ValueError, "m must be <= n"),
        ({"m": 0}, ValueError, "m must be >= 1"),
    ):
        with pytest.raises(error, match=message):
            Oort(SIZES, **{"m": 3, **options})
    with pytest.raises(RuntimeError, match="loss_probe"):
        Oort(SIZES, m=3).sample()


def test_a_bad_loss_probe_is_refused():
    for rms in (np.nan, -1.0, np.inf):
        sampler = Oort(SIZES, m=3)
        sampler.loss_probe = lambda ids, samples=None, *, free=False, r=rms: (
            np.ones(ids.size),
            np.full(ids.size, r),
        )
        with pytest.raises(ValueError, match="root-mean-square loss"):
            sampler.sample()


def test_registered_availability_aware_and_built_from_a_configuration():
    assert "oort" in AVAILABILITY_AWARE and Oort.wants_losses and not Oort.wants_updates
    sampler = SAMPLERS["oort"](N, SIZES, m=3, seed=2, cutoff=0.9)
    assert type(sampler) is Oort and sampler.config()["cutoff"] == 0.9
    with pytest.raises(ValueError, match="one size per client"):
        SAMPLERS["oort"](N + 1, SIZES, m=3)
