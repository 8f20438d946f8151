"""Participation processes of "Convergence of Agnostic Federated Averaging" as samplers.

:class:`PriorSampler` draws M of N clients without replacement from a fixed prior (the paper's
experiments, Sec. 4: weights exp(-i/tau), :func:`exponential_prior`; registered as
``"exp_prior"``), and :class:`ProcessSampler` wraps any process given as a function of the
round. Every selected client gets the weight 1/|S| (agnostic FedAvg's aggregation; the weighted
rules reweight in :mod:`aoi_fl.agnostic.algorithms`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from aoi_fl.core.selection import SeededSampler, Selection
from aoi_fl.core.validation import require_int, require_n_m, require_real


def exponential_prior(n: int, tau: float) -> np.ndarray:
    """Prior weights proportional to exp(-i/tau) over clients i = 1..n (Sec. 4), normalised.

    tau = inf gives the uniform prior.
    """
    n = require_int("n", n, minimum=1)
    if tau != float("inf"):
        tau = require_real("tau", tau, minimum=0.0, strict_minimum=True)
    w = np.exp(-np.arange(1, n + 1) / tau)
    return w / w.sum()


class PriorSampler(SeededSampler):
    """M of N clients drawn without replacement from fixed prior weights (Sec. 4).

    Successive sampling: the first client is drawn with probability proportional to its prior
    weight, the next one likewise among the remaining clients, and so on. It is drawn in one
    pass as the M smallest of E_i / w_i with E_i ~ Exp(1) independent (the order of these keys
    has exactly the law of successive sampling). Every selected client gets the agnostic weight
    1/M (Algorithm 1, line 5).
    """

    name = "prior"

    def __init__(self, weights: Any, m: int, seed: int = 0, label: str = "custom") -> None:
        w = np.asarray(weights, dtype=float)
        if w.ndim != 1 or w.size == 0 or not np.all(np.isfinite(w)) or (w < 0).any():
            raise ValueError(
                f"weights must be a non-empty 1-d array of finite values >= 0, got {w}"
            )
        n, self.m = require_n_m(w.size, m)
        if np.count_nonzero(w) < self.m:
            raise ValueError(
                f"m={m} clients cannot be drawn without replacement when only "
                f"{np.count_nonzero(w)} have a positive weight"
            )
        super().__init__(n, seed)
        self.prior = w / w.sum()
        self.label = label

    def sample(self) -> Selection:
        with np.errstate(divide="ignore"):
            keys = self._rng.exponential(size=self.n) / self.prior
        ids = np.sort(np.argpartition(keys, self.m - 1)[: self.m])
        self.round += 1
        return Selection(ids, np.full(self.m, 1.0 / self.m))

    def config(self) -> dict:
        return {**super().config(), "m": self.m, "prior": self.label}


def prior_sampler(n: int, sizes: Any = None, *, m: int, tau: float, seed: int = 0) -> PriorSampler:
    """The paper's participation process: M = m of n clients from the prior exp(-i/tau)."""
    return PriorSampler(exponential_prior(n, tau), m, seed, label=f"exp(-i/{tau})")


class ProcessSampler(SeededSampler):
    """Any participation process given as a function ``process(t, rng) -> selected ids``.

    ``rng`` is the sampler's private generator; the selected clients get the agnostic weights
    1/|S|. The function must be deterministic given (t, rng) for runs to be reproducible and
    resumable.
    """

    name = "process"

    def __init__(
        self, n: int, process: Callable[[int, np.random.Generator], Iterable[int]], seed: int = 0
    ) -> None:
        super().__init__(require_int("n", n, minimum=1), seed)
        self.process = process

    def sample(self) -> Selection:
        ids = np.unique(np.asarray(list(self.process(self.round, self._rng)), dtype=np.int64))
        if ids.size and (ids[0] < 0 or ids[-1] >= self.n):
            raise ValueError(f"the process selected ids outside [0, {self.n}): {ids.tolist()}")
        self.round += 1
        return Selection(ids, np.full(ids.size, 1.0 / max(ids.size, 1)))
