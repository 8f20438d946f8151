"""The four client selection policies of the AoI paper (Sec. III-B) as :class:`Sampler` objects.

1. :class:`RandomWeighted` (``"random"``): m of n clients uniformly without replacement,
   w_i = d_i / sum_{j in S} d_j.
2. :class:`Probabilistic` (``"probabilistic"``): m draws with replacement, P(draw = i) =
   q_i = d_i / sum_j d_j; a client hit l_i times gets w_i = l_i / m.
3. / 4. :class:`MarkovSampler` (``"markov_optimal"``, ``"markov_nonoptimal"``): every client runs
   its own age chain (eq. 4, ages capped at m'); a client of age a selects itself with
   probability p_a and all selected clients get w_i = 1/|S|. If nobody selects itself, one
   uniformly random client is forced (as in the proof of Theorem 5); its age resets like any
   selected client's.
5. :class:`CalibratedMarkovSampler` (``"markov_available"``, beyond the paper): Policy 3 for
   clients that are not always available, each running Theorem 1's family calibrated to its
   own availability rate (:func:`~aoi_fl.aoi.availability.calibrated_p`).

All five are availability aware (:mod:`aoi_fl.core.selection`): ``sample(available)`` picks
among the clients of the round's mask. Policy 1 takes m of the available clients; Policy 2 draws
from q restricted to the available clients and renormalised; in the Markov policies an
unavailable client cannot answer (it is not selected and its age grows) and an available client
of age a selects itself with probability p_a, so that under Bernoulli(r) availability the age
chain is the paper's with p' = r p (:mod:`aoi_fl.aoi.availability`); the forced selection picks
an available client. Nobody available: an empty selection. Without a mask (``available=None``)
each sampler draws exactly what it drew before availability existed.

Without a mask the Markov sampler never draws one uniform per client per round. A client's
selections form a renewal process whose inter-selection interval X has the law of
:mod:`aoi_fl.aoi.markov`, so each client only keeps the round of its next selection: after a
selection in round t the next one is t + X. At the start, a client of age a is next selected in
round X - 1 - a with X drawn from the law of X given X > a (age m' stands for "m' or more", which
is the same thing because the chain is memoryless from age m' on). Per round this is one O(n)
integer comparison plus O(|S|) draws, and it has exactly the law of the per-round chain (the
tests compare the two).

The renewal trick needs each client's future selections to depend on its own draws only; an
external mask breaks that. So the first mask switches a Markov sampler, for good, to the
per-round chain (eq. 4 with the mask): explicit ages a_i(t) = min(t - 1 - last_i, m'), with
last_i the round of client i's last selection (which the renewal mode keeps too, starting from
-1 - a_i(0)), and one uniform per client per round. The switch keeps the law: the age chain is
Markov, so continuing it from the current ages, and dropping the already drawn next-selection
rounds, gives the same process as before (with an all-available mask, the per-round mode has
the law of the renewal mode; the tests check both against the closed forms).

Every sampler owns a generator from ``generator(seed, "sampler")`` and can be checkpointed with
``state_dict()`` / ``load_state_dict()`` (JSON-serialisable) to continue the exact same sequence.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import numpy as np

from aoi_fl.aoi import availability, markov
from aoi_fl.core.registry import PALETTE, Style, declare_options, declared
from aoi_fl.core.selection import (
    RandomWeighted,
    Sampler,
    SeededSampler,
    Selection,
    SizeWeighted,
    available_ids,
    check_available,
)
from aoi_fl.core.validation import (
    check_chain,
    require_choice,
    require_int,
    require_n_m,
    require_sizes,
)

POLICIES: tuple[str, ...] = ("random", "probabilistic", "markov_optimal", "markov_nonoptimal")
STARTS: tuple[str, ...] = ("stationary", "zero")

# Next-selection rounds are int32 (half the memory traffic of int64 in the per-round scan).
# A wait reaching past _NEVER is stored as _NEVER: no simulation gets that far (checked).
_NEVER = np.iinfo(np.int32).max


class Probabilistic(SizeWeighted):
    """Policy 2: m draws with replacement with P(i) = q_i = d_i / sum_j d_j; w_i = l_i / m.

    Each distinct client appears once in the :class:`Selection`, weighted by its number of hits
    l_i over m. So E[l_i] = m q_i, while P(i in S) = 1 - (1 - q_i)^m.

    Under availability the m draws come from q restricted to the available clients and
    renormalised, q_i / sum_{j available} q_j (none when nobody is available).
    """

    name = "probabilistic"
    availability_aware = True

    def __init__(self, sizes: Any, m: int, seed: int = 0) -> None:
        super().__init__(sizes, m, seed)
        cdf = np.cumsum(self.sizes)
        self._cdf = cdf / cdf[-1]

    def sample(self, available: np.ndarray | None = None) -> Selection:
        available = check_available(available, self.n)
        pool, cdf = None, self._cdf
        if available is not None:
            pool = np.flatnonzero(available)
            if pool.size == 0:
                self.round += 1
                return Selection(np.empty(0, np.int64), np.empty(0), hits=np.empty(0, np.int64))
            cdf = np.cumsum(self.sizes[pool])
            cdf /= cdf[-1]
        # Inverse-CDF draws as in Generator.choice(n, m, p=q), without redoing the O(n) cumulative
        # sum every round. Only the multiset of draws matters, so the uniforms are sorted first:
        # the binary searches then walk the CDF in order (several times faster at large n), and
        # equal draws come out adjacent. u < 1 = cdf[-1], so every draw is < len(cdf).
        u = np.sort(self._rng.random(self.m))
        draws = np.searchsorted(cdf, u, side="right")
        first = np.flatnonzero(np.concatenate(([True], draws[1:] != draws[:-1])))
        hits = np.diff(first, append=self.m)
        ids = draws[first] if pool is None else pool[draws[first]]
        self.round += 1
        return Selection(ids, hits / self.m, hits=hits)


class _IntervalTable:
    """Draws of the interval X by inverse CDF (:func:`markov.interval_quantile`), tabulated.

    The quantile function is non-decreasing, so on a bin [b/K, (b+1)/K) of u it is constant as
    soon as it takes the same value at both ends of the bin. Those bins are answered by table
    lookup; the few others (around the jumps of the CDF) call interval_quantile itself. The
    result is exactly interval_quantile(p, u).
    """

    _BINS = 4096  # a power of two, so that u * _BINS and its floor are exact

    def __init__(self, p: np.ndarray) -> None:
        self.p = p
        edges = np.arange(self._BINS + 1) / self._BINS
        left = markov.interval_quantile(p, edges[:-1])
        right = markov.interval_quantile(p, np.nextafter(edges[1:], 0.0))
        self._table = np.where(left == right, left, -1)

    def quantile(self, u: np.ndarray) -> np.ndarray:
        x = self._table[(u * self._BINS).astype(np.intp)]
        unresolved = np.flatnonzero(x < 0)
        if unresolved.size:
            x[unresolved] = markov.interval_quantile(self.p, u[unresolved])
        return x


class MarkovSampler(SeededSampler):
    """Policies 3 and 4: decentralised age chains with selection probabilities p_a (eq. 4).

    Parameters
    ----------
    p:
        (p_0, ..., p_{m'}), m' >= 1, validated by :func:`~aoi_fl.core.validation.check_chain`.
    n:
        Number of clients.
    seed:
        Seed of the private generator.
    start:
        ``"stationary"`` draws every client's age from the stationary law pi (the Fig. 2 setting,
        "steady state for a fair comparison"); ``"zero"`` starts all ages at 0 as in eq. 4, so
        that all clients start in lockstep.
    name:
        The policy name reported by ``name`` / ``config()``.
    meta:
        Extra entries for ``config()`` (e.g. the m and the family p was calibrated from).

    Weights are 1/|S|. If no client selects itself in a round, one client drawn uniformly (among
    the available ones, under a mask) is selected (forced) with weight 1, and its age resets to 0.
    """

    availability_aware = True

    def __init__(
        self,
        p: Any,
        n: int,
        seed: int = 0,
        start: str = "stationary",
        name: str = "markov",
        *,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self.p = check_chain(p)
        n = require_int("n", n, minimum=1)
        self.start = require_choice("start", start, STARTS)
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        self.name = name
        self._meta = dict(meta or {})
        super().__init__(n, seed)
        self.m_prime = self.p.size - 1
        self._intervals = _IntervalTable(self.p)
        #: the round of each client's last selection (-1 - a_i(0) before its first)
        self._last = np.empty(self.n, dtype=np.int64)
        self._next = self._initial_next_rounds()
        #: each client's p in the per-round mode (n, m' + 1); None: the renewal mode
        self._chains: np.ndarray | None = None

    def _initial_ages(self, p: np.ndarray | None = None) -> np.ndarray:
        """Each client's age in round 0 (``start``): 0, or drawn from the stationary law of its
        chain (``p``: one row per client; default the sampler's p for everyone)."""
        if self.start == "zero":
            return np.zeros(self.n, dtype=np.int64)
        laws = [markov.stationary_distribution(self.p)] if p is None else list(map(_law, p))
        cdf = np.cumsum(np.asarray(laws), axis=1)
        cdf /= cdf[:, -1:]
        u = self._rng.random(self.n)
        # u < 1 = cdf[-1], so every age is <= m'
        return (u[:, None] >= cdf).sum(axis=1).astype(np.int64)

    def _initial_next_rounds(self) -> np.ndarray:
        """Round of each client's first selection, given its age a in round 0.

        With X drawn from the law of X given X > a (u uniform on [1 - S(a), 1), S the survival
        function of X), the first selection is in round X - 1 - a.
        """
        ages = self._initial_ages()
        self._last[:] = -1 - ages
        survival = markov.interval_survival(self.p, np.arange(self.m_prime + 1))[ages]
        u = 1.0 - survival + survival * self._rng.random(self.n)
        u = np.minimum(u, np.nextafter(1.0, 0.0))
        # Rounding in 1 - S(a) could land one CDF step early; X > a holds exactly in law.
        x = np.maximum(self._intervals.quantile(u), ages + 1)
        return np.minimum(x - 1 - ages, _NEVER).astype(np.int32)

    @property
    def selection_rate(self) -> float:
        """pi_0 = sum_a pi_a p_a: the stationary probability that a client selects itself."""
        return markov.selection_rate(self.p)

    def client_chains(self, rates: np.ndarray) -> np.ndarray:
        """The p each client runs when its long-run availability rates are ``rates`` (one row
        per client): the sampler's own p for everyone (Policies 3 and 4 ignore availability)."""
        return np.broadcast_to(self.p, (self.n, self.p.size))

    def set_availability_rates(self, rates: np.ndarray) -> None:
        """Before round 0, under an availability model: switch to the per-round mode with each
        client's chain (:meth:`client_chains`), its round-0 age drawn from the stationary law of
        its effective chain r_i p (:mod:`aoi_fl.aoi.availability`; a client never available
        starts at age m')."""
        if self.round != 0:
            raise RuntimeError("availability rates must be set before the first round")
        rates = np.asarray(rates, dtype=float)
        if rates.shape != (self.n,) or ((rates < 0) | (rates > 1) | np.isnan(rates)).any():
            raise ValueError(f"rates must be {self.n} availability rates in [0, 1]")
        chains = np.array(self.client_chains(rates), dtype=float)
        stuck = np.flatnonzero((chains[:, -1] == 0.0) & (rates > 0.0) & (rates < 1.0))
        if stuck.size:
            i = int(stuck[0])
            raise ValueError(
                f"client {i} runs p with p[m'] = p[{self.m_prime}] = 0: under its availability "
                f"rate r = {rates[i]} < 1 it can reach age m' and never be selected again"
            )
        # validated and drawn before anything changes: a refused call leaves the sampler as it was
        ages = self._initial_ages(np.where(rates[:, None] > 0, chains * rates[:, None], 0.0))
        self._chains = chains
        self._next[:] = _NEVER  # the renewal mode's next rounds are dropped (not used again)
        self._last[:] = -1 - ages

    def sample(self, available: np.ndarray | None = None) -> Selection:
        """One round of the age chains (eq. 4): client i selects itself with probability
        p_{age_i}, then its age resets to 0 or grows by 1; with ``available``, an unavailable
        client is not selected and its age grows. A round where nobody selects itself selects one
        client drawn uniformly (among the available ones; none if nobody is), with weight 1
        (Theorem 5, eq. 32)."""
        available = check_available(available, self.n)
        t = self.round
        if t >= _NEVER - 1:
            raise OverflowError(f"MarkovSampler supports at most {_NEVER - 1} rounds")
        if available is None and self._chains is None:
            return self._sample_renewal(t)
        if self._chains is None:
            # the first mask without rates set: continue the chain from the current ages (its
            # law is Markov, so dropping the drawn next-selection rounds keeps it)
            self._switch_to_per_round(np.ones(self.n))
        return self._sample_per_round(t, available)

    def _switch_to_per_round(self, rates: np.ndarray) -> None:
        self._chains = np.array(self.client_chains(rates), dtype=float)
        self._next[:] = _NEVER  # the renewal mode's next rounds are dropped (not used again)

    def _sample_renewal(self, t: int) -> Selection:
        ids = np.flatnonzero(self._next == t)
        if ids.size == 0:
            ids = np.array([self._rng.integers(self.n)], dtype=np.int64)
        x = self._intervals.quantile(self._rng.random(ids.size))
        self._next[ids] = np.minimum(x + t, _NEVER)
        self._last[ids] = t
        self.round = t + 1
        return Selection(ids, np.full(ids.size, 1.0 / ids.size))

    def ages(self) -> np.ndarray:
        """Every client's age a_i(t) = min(t - 1 - last_i, m') in the coming round t."""
        return np.minimum(self.round - 1 - self._last, self.m_prime)

    def _sample_per_round(self, t: int, available: np.ndarray | None) -> Selection:
        """Eq. 4 with the mask: an available client of age a selects itself with p_a."""
        p = self._chains[np.arange(self.n), self.ages()]
        chosen = self._rng.random(self.n) < p
        if available is not None:
            chosen &= available
        ids = np.flatnonzero(chosen)
        if ids.size == 0:
            pool = available_ids(available, self.n)
            ids = pool[self._rng.integers(pool.size)][None] if pool.size else pool
        self._last[ids] = t
        self.round = t + 1
        return Selection(ids, np.full(ids.size, 1.0 / max(ids.size, 1)))

    def config(self) -> dict:
        return {
            **super().config(),
            "p": self.p.tolist(),
            "m_prime": self.m_prime,
            "start": self.start,
            **self._meta,
        }

    def state_dict(self) -> dict:
        chains = None if self._chains is None else self._chains.tolist()
        return {
            **super().state_dict(),
            "next_round": self._next.tolist(),
            "last_round": self._last.tolist(),
            "chains": chains,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        rng, t = self._check_state(state)
        nxt = np.asarray(state.get("next_round"))
        if nxt.shape != (self.n,) or not np.issubdtype(nxt.dtype, np.integer):
            raise ValueError(f"state['next_round'] must be {self.n} integers")
        if (nxt < t).any() or (nxt > _NEVER).any():
            raise ValueError(f"state['next_round'] must lie in [round, {_NEVER}] = [{t}, {_NEVER}]")
        last = np.asarray(state.get("last_round"))
        if (
            last.shape != (self.n,)
            or not np.issubdtype(last.dtype, np.integer)
            or (last >= t).any()
        ):
            raise ValueError(f"state['last_round'] must be {self.n} integers below round {t}")
        chains = state.get("chains")
        if chains is not None:
            chains = np.asarray(chains, dtype=float)
            if chains.shape != (self.n, self.p.size):
                raise ValueError(f"state['chains'] must be {self.n} x {self.p.size}")
        self._rng, self.round, self._next = rng, t, nxt.astype(np.int32)
        self._last, self._chains = last.astype(np.int64), chains


def _law(p: np.ndarray) -> np.ndarray:
    """The stationary age law of chain p (all mass on age m' for a chain that never selects)."""
    if not p.any():
        law = np.zeros(p.size)
        law[-1] = 1.0
        return law
    return markov.stationary_distribution(p)


class CalibratedMarkovSampler(MarkovSampler):
    """Policy 3 calibrated to availability (beyond the paper; ``"markov_available"``).

    Client i, available with long-run rate r_i, runs Theorem 1's family at the ratio of
    :func:`~aoi_fl.aoi.availability.calibrated_p` instead of n/m, so that its long-run selection
    rate stays m/n (E|S| = m) where r_i >= m/n. The rates come from the trainer's availability
    model (:meth:`set_availability_rates`); the calibration is exact for Bernoulli availability
    and uses only the long-run rate for the others. Without an availability model every r_i = 1
    and it is Policy 3.
    """

    def __init__(
        self, n: int, m: int, m_prime: int = 10, seed: int = 0, start: str = "stationary"
    ) -> None:
        self.m = m
        p = markov.optimal_p(n, m, m_prime)
        super().__init__(p, n, seed, start, "markov_available", meta={"m": m})

    def client_chains(self, rates: np.ndarray) -> np.ndarray:
        table: dict[float, np.ndarray] = {}
        for r in np.unique(rates[rates > 0]):
            table[float(r)] = availability.calibrated_p(self.n, self.m, self.m_prime, float(r))
        ones = np.ones(self.p.size)
        return np.array([table[float(r)] if r > 0 else ones for r in rates])


def markov_optimal(
    n: int, m: int, m_prime: int = 10, *, seed: int = 0, start: str = "stationary"
) -> MarkovSampler:
    """Policy 3: the Markov sampler with Theorem 1's p (:func:`markov.optimal_p`)."""
    p = markov.optimal_p(n, m, m_prime)
    return MarkovSampler(p, n, seed, start, "markov_optimal", meta={"m": m})


def markov_nonoptimal(
    n: int,
    m: int,
    m_prime: int = 10,
    *,
    family: str = "linear",
    seed: int = 0,
    start: str = "stationary",
) -> MarkovSampler:
    """Policy 4: a monotone family of p (:data:`markov.FAMILIES`) calibrated to pi_0 = m/n."""
    p = markov.calibrate_family(family, n, m, m_prime)
    return MarkovSampler(p, n, seed, start, "markov_nonoptimal", meta={"m": m, "family": family})


def make_sampler(
    policy: str,
    *,
    n: int,
    m: int,
    sizes: Any = None,
    m_prime: int = 10,
    seed: int = 0,
    start: str = "stationary",
    p: Any = None,
    family: str = "linear",
) -> Sampler:
    """Build one of :data:`POLICIES` for n clients with m selected per round (on average).

    ``sizes`` (default: all equal) weight Policies 1-2 and are ignored by the Markov policies.
    ``start`` applies to the Markov policies. ``p`` may be given for ``"markov_nonoptimal"``
    only (Policy 4 with a user's vector, which must have length m_prime + 1, be non-decreasing in
    the age as Sec. III-B asks (:func:`markov.check_non_decreasing`) and satisfy constraint (3):
    pi_0 = m/n); otherwise ``family`` names the calibrated family.
    """
    policy = require_choice("policy", policy, POLICIES)
    # checked for every policy, though only Policy 4 reads it: a configuration names it anyway
    family = require_choice("family", family, markov.FAMILIES)
    n, m = require_n_m(n, m)
    m_prime = require_int("m_prime", m_prime, minimum=1)
    sizes = np.ones(n) if sizes is None else require_sizes("sizes", sizes)
    if sizes.size != n:
        raise ValueError(f"sizes must have one entry per client (n={n}), got {sizes.size}")
    if p is not None and policy != "markov_nonoptimal":
        raise ValueError(
            f"p can only be given for policy 'markov_nonoptimal', not {policy!r} "
            "(markov_optimal takes Theorem 1's p)"
        )
    start = require_choice("start", start, STARTS)
    if policy == "random":
        return RandomWeighted(sizes, m, seed)
    if policy == "probabilistic":
        return Probabilistic(sizes, m, seed)
    if policy == "markov_optimal":
        return markov_optimal(n, m, m_prime, seed=seed, start=start)
    if p is None:
        return markov_nonoptimal(n, m, m_prime, family=family, seed=seed, start=start)
    p = markov.check_non_decreasing(p)
    if p.size != m_prime + 1:
        raise ValueError(
            f"p has length {p.size} (m' = {p.size - 1}) but m_prime = {m_prime}; "
            f"pass m_prime={p.size - 1}"
        )
    rate = markov.selection_rate(p)
    if not np.isclose(rate, m / n, rtol=1e-9, atol=0.0):
        raise ValueError(
            f"p gives pi_0 = {rate!r}, but constraint (3) needs pi_0 = m/n = {m / n!r}; "
            "use markov.calibrate_shape(p, n, m), or MarkovSampler for an unconstrained p"
        )
    return MarkovSampler(p, n, seed, start, "markov_nonoptimal", meta={"m": m, "family": "custom"})


def _configured(policy: str, n: int, sizes: Any, **options: Any) -> SeededSampler:
    return make_sampler(policy, n=n, sizes=sizes, **options)


#: the four policies' plot styles (the factories carry them too, for their entry points)
STYLES = {
    "random": Style("Policy 1: random (size-weighted)", PALETTE[0], "o"),
    "probabilistic": Style("Policy 2: probabilistic", PALETTE[1], "s"),
    "markov_optimal": Style("Policy 3: Markov optimal", PALETTE[2], "^"),
    "markov_nonoptimal": Style("Policy 4: Markov non-optimal", PALETTE[3], "D"),
}


def markov_available(
    n: int, m: int, m_prime: int = 10, *, seed: int = 0, start: str = "stationary"
) -> CalibratedMarkovSampler:
    """Policy 3 calibrated to each client's availability rate (:class:`CalibratedMarkovSampler`)."""
    n, m = require_n_m(n, m)
    m_prime = require_int("m_prime", m_prime, minimum=1)
    return CalibratedMarkovSampler(n, m, m_prime, seed, require_choice("start", start, STARTS))


def _calibrated(n: int, sizes: Any, **options: Any) -> CalibratedMarkovSampler:
    return markov_available(n, **options)


#: the factories ``aoi_fl/entry_points.txt`` names (``aoi_fl.samplers``), each availability aware
PLUGINS = SimpleNamespace(
    **{
        policy: declared(
            declare_options(
                functools.partial(_configured, policy), make_sampler, passed=("policy",)
            ),
            STYLES[policy],
            availability=True,
        )
        for policy in POLICIES
    },
    markov_available=declared(
        declare_options(_calibrated, markov_available),
        Style("Policy 3 calibrated to availability (ours)", "#8c510a", "v"),
        availability=True,
    ),
)
