"""Client participation patterns of the FedSUM paper (You & Pu, Sec. 2.1 and App. H) as samplers.

Each pattern is a :class:`~aoi_fl.core.selection.Sampler`: it draws the active set S_t of round t,
and every active client gets the weight 1/|S_t| (FedAvg over the active clients; the FedSUM
family ignores the weights). A Bernoulli round may select nobody: the selection is then empty,
and methods whose server moves every round (FedSUM, MIFA) still take their step.

- :class:`UniformSubset` (``"uniform"``), Case 1 / P1: S of the N clients uniformly without
  replacement, independently across rounds (the paper: S = 20, N = 100).
- :class:`Bernoulli` (``"bernoulli"``), Case 2 / P2: client i is active in round t with
  probability p_i, independently of everything else (P2: p_i = S/N = 0.2 for all i).
- :class:`SineBernoulli` (``"sine_bernoulli"``), P3: p_i^t = p (amplitude sin(2 pi t / period)
  + offset); the paper's p_i^t = (S/N)(0.3 sin(pi t / 5) + 0.7) is period 10 (the FedAWE
  reference code uses period 20).
- :class:`DeterministicCyclic` (``"cyclic"``), Case 3 (Sec. 2.1; App. F calls it Case 4):
  S_t = {(tS + j) mod N : j < S}, a fixed order.
- :class:`ReshuffledCyclic` (``"reshuffled_cyclic"``), Case 4 (Sec. 2.1; App. F: Case 3): a
  fresh random permutation of the clients at the start of every epoch, cut into consecutive
  blocks of S (the last block of an epoch is shorter when S does not divide N).
- :class:`BiasedBernoulli` (``"biased"``), App. H.8: stationary Bernoulli with p_i = 0.5 -
  0.05 floor(i / 11) for 0-based i (clients 1-11 of the paper: 0.5, ..., client 100: 0.05).

The AoI paper's Markov policies (:mod:`aoi_fl.aoi.samplers`) are further patterns on the same
interface. Every pattern draws from its own generator ``generator(seed, "sampler")`` and is
checkpointed with a JSON-serialisable ``state_dict``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import numpy as np

from aoi_fl.core.registry import declare_options, declared
from aoi_fl.core.selection import RandomWeighted, SeededSampler, Selection
from aoi_fl.core.validation import (
    require_int,
    require_n_s,
    require_probability_vector,
    require_real,
)


def _uniform_weights(ids: np.ndarray) -> Selection:
    ids = np.asarray(ids, dtype=np.int64)
    return Selection(ids, np.full(ids.size, 1.0 / max(ids.size, 1)))


class UniformSubset(RandomWeighted):
    """Case 1 / P1: ``s`` of the ``n`` clients uniformly without replacement, weights 1/s.

    The AoI paper's Policy 1 with equal dataset sizes (the same draws). Availability aware as
    Policy 1 is: ``s`` of the available clients (all of them, weights 1/|S|, when fewer are
    available).
    """

    name = "uniform"

    def __init__(self, n: int, s: int, seed: int = 0) -> None:
        n, s = require_n_s(n, s)
        super().__init__(np.ones(n), s, seed)

    def config(self) -> dict:
        return {"name": self.name, "n": self.n, "seed": self.seed, "s": self.m}


class Bernoulli(SeededSampler):
    """Case 2 / P2: client i is active in round t with probability p_i, independently.

    ``p`` is one probability for every client or one per client; each must lie in (0, 1].
    One uniform per client per round, so a client's decisions do not depend on the others'.
    """

    name = "bernoulli"

    def __init__(self, n: int, p: Any, seed: int = 0) -> None:
        n = require_int("n", n, minimum=1)
        self.p = self._check_p(n, p)
        super().__init__(n, seed)

    @staticmethod
    def _check_p(n: int, p: Any) -> np.ndarray:
        if np.asarray(p).dtype.kind not in "iuf":  # "0.5" would convert silently
            raise TypeError(f"p must be a probability or one per client (numbers), got {p!r}")
        arr = np.atleast_1d(np.asarray(p, dtype=float))
        if arr.size == 1:
            arr = np.full(n, arr[0])
        arr = require_probability_vector("p", arr, length=n)
        if (arr == 0).any():
            i = int(np.flatnonzero(arr == 0)[0])
            raise ValueError(f"p[{i}] = 0; every client needs p_i > 0 (Case 2: p_i >= delta > 0)")
        return arr

    def probabilities(self, t: int) -> np.ndarray:
        """p_i^t of every client in round ``t`` (0-based)."""
        return self.p

    def sample(self) -> Selection:
        ids = np.flatnonzero(self._rng.random(self.n) < self.probabilities(self.round))
        self.round += 1
        return _uniform_weights(ids)

    def config(self) -> dict:
        p = self.p
        return {**super().config(), "p": float(p[0]) if np.all(p == p[0]) else p.tolist()}


class SineBernoulli(Bernoulli):
    """P3: p_i^t = p (amplitude sin(2 pi t / period) + offset) for every client i.

    Defaults give the paper's P3 with p = S/N = 0.2: (S/N)(0.3 sin(pi t / 5) + 0.7), in
    [0.08, 0.2] with mean 0.14. Every p_i^t must lie in (0, 1].
    """

    name = "sine_bernoulli"

    def __init__(
        self,
        n: int,
        p: float,
        amplitude: float = 0.3,
        offset: float = 0.7,
        period: float = 10.0,
        seed: int = 0,
    ) -> None:
        p = require_real("p", p, minimum=0.0, maximum=1.0, strict_minimum=True)
        self.amplitude = require_real("amplitude", amplitude, minimum=0.0)
        self.offset = require_real("offset", offset)
        self.period = require_real("period", period, minimum=0.0, strict_minimum=True)
        low, high = p * (offset - amplitude), p * (offset + amplitude)
        if low <= 0.0 or high > 1.0:
            raise ValueError(
                f"p * (offset -+ amplitude) = [{low}, {high}] must lie in (0, 1] "
                f"(p={p}, amplitude={amplitude}, offset={offset})"
            )
        super().__init__(n, p, seed)

    def probabilities(self, t: int) -> np.ndarray:
        return self.p * (self.amplitude * np.sin(2.0 * np.pi * t / self.period) + self.offset)

    def config(self) -> dict:
        return {
            **super().config(),
            "amplitude": self.amplitude,
            "offset": self.offset,
            "period": self.period,
        }


def biased_probabilities(
    n: int = 100, top: float = 0.5, step: float = 0.05, group: int = 11
) -> np.ndarray:
    """p_i = top - step * floor(i / group), 0-based i (App. H.8: 0.5, 0.45, ..., 0.05).

    Every p_i must stay > 0 (at most 110 clients with the paper's constants).
    """
    n = require_int("n", n, minimum=1)
    top = require_real("top", top, minimum=0.0, maximum=1.0, strict_minimum=True)
    step = require_real("step", step, minimum=0.0)
    group = require_int("group", group, minimum=1)
    p = top - step * (np.arange(n) // group)
    if p[-1] <= 0.0:
        raise ValueError(
            f"biased probabilities reach p = {p[-1]:.3g} <= 0 at client {n - 1}; with top={top}, "
            f"step={step}, group={group} at most {group * int(np.ceil(top / step))} clients fit"
        )
    return p


class BiasedBernoulli(Bernoulli):
    """App. H.8: stationary Bernoulli with :func:`biased_probabilities`."""

    name = "biased"

    def __init__(
        self, n: int, seed: int = 0, top: float = 0.5, step: float = 0.05, group: int = 11
    ) -> None:
        self.top, self.step, self.group = top, step, group
        super().__init__(n, biased_probabilities(n, top, step, group), seed)

    def config(self) -> dict:
        return {
            "name": self.name,
            "n": self.n,
            "seed": self.seed,
            "top": self.top,
            "step": self.step,
            "group": self.group,
        }


class DeterministicCyclic(SeededSampler):
    """Case 3 (deterministic cyclic): S_t = {(t s + j) mod n : j = 0..s-1}.

    There is no randomness: ``seed`` is accepted so that every pattern is built alike, and
    changes nothing.
    """

    name = "cyclic"

    def __init__(self, n: int, s: int, seed: int = 0) -> None:
        n, self.s = require_n_s(n, s)
        super().__init__(n, seed)

    def sample(self) -> Selection:
        ids = np.sort((self.round * self.s + np.arange(self.s)) % self.n)
        self.round += 1
        return _uniform_weights(ids)

    def config(self) -> dict:
        return {"name": self.name, "n": self.n, "s": self.s}


class ReshuffledCyclic(SeededSampler):
    """Case 4 (reshuffled cyclic): a new permutation per epoch of ceil(n / s) rounds, in blocks.

    Round r of an epoch takes positions [r s, (r + 1) s) of the epoch's permutation, so every
    client is active exactly once per epoch.
    """

    name = "reshuffled_cyclic"

    def __init__(self, n: int, s: int, seed: int = 0) -> None:
        n, self.s = require_n_s(n, s)
        super().__init__(n, seed)
        self.epoch_rounds = -(-n // self.s)
        self._order = np.arange(n)

    def sample(self) -> Selection:
        r = self.round % self.epoch_rounds
        if r == 0:
            self._order = self._rng.permutation(self.n)
        ids = np.sort(self._order[r * self.s : (r + 1) * self.s])
        self.round += 1
        return _uniform_weights(ids)

    def config(self) -> dict:
        return {**super().config(), "s": self.s}

    def state_dict(self) -> dict:
        return {**super().state_dict(), "order": self._order.tolist()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        rng, t = self._check_state(state)
        order = np.asarray(state.get("order"))
        if order.shape != (self.n,) or not np.array_equal(np.sort(order), np.arange(self.n)):
            raise ValueError(f"state['order'] must be a permutation of range({self.n})")
        self._rng, self.round, self._order = rng, t, order.astype(np.int64)


def _ignore_sizes(cls: type) -> Any:
    factory = declare_options(lambda n, sizes, **options: cls(n, **options), cls)
    return declared(factory, availability=cls.availability_aware)


_PATTERN_CLASSES = (
    UniformSubset,
    Bernoulli,
    SineBernoulli,
    BiasedBernoulli,
    DeterministicCyclic,
    ReshuffledCyclic,
)
#: pattern name -> factory(n, sizes, **options) (the patterns ignore the clients' data sizes)
PATTERNS = {cls.name: _ignore_sizes(cls) for cls in _PATTERN_CLASSES}
#: the factories ``aoi_fl/entry_points.txt`` names (``aoi_fl.samplers``)
PLUGINS = SimpleNamespace(**PATTERNS)
