"""Participation delays of a selection trace: how long the longest-waiting client has waited.

For a trace {S_t}, a_{i,t} = max{j <= t : i in S_j} is the last round client i was active by
round t (a_{i,t} = -1 before its first participation), and

    tau_t = max_i (t - a_{i,t}) = t - min_i a_{i,t},
    tau_max = max_{0 <= t < T} tau_t,   tau_avg = (1/T) sum_{t < T} tau_t

(the FedSUM paper's eqs 2-4 and the unnumbered definitions after them, Sec. 2.2; every paper's
policies are measured by them, so they live here). The paper prints tau_max over 0 <= t <= T,
one round past the trace {S_t}_{t=0}^{T-1} it defines, so the maximum here runs over the T rounds
the trace has, as tau_avg's sum does. tau_t = 0 exactly when every client is active
in round t; a client not yet seen counts t + 1. :class:`DelayTracker` computes them streaming
(O(N) memory, O(|S_t| + N) per round, vectorised).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from aoi_fl.core.selection import Sampler
from aoi_fl.core.validation import require_int


def _ids(ids: Iterable[int]) -> np.ndarray:
    if isinstance(ids, np.ndarray):
        return ids.astype(np.int64, copy=False)
    return np.fromiter(ids, dtype=np.int64)


class DelayTracker:
    """tau_t of each round as the trace streams in (:meth:`update` once per round)."""

    def __init__(self, n: int) -> None:
        self.n = require_int("n", n, minimum=1)
        self.last = np.full(self.n, -1, dtype=np.int64)
        self.rounds = 0
        self.tau_max = 0
        self._tau_sum = 0

    def update(self, ids: Iterable[int]) -> int:
        """Record S_t (the next round's active clients); return tau_t."""
        ids = _ids(ids)
        if ids.size and (ids.min() < 0 or ids.max() >= self.n):
            raise ValueError(f"client ids must lie in [0, {self.n}), got {ids.min()}..{ids.max()}")
        t = self.rounds
        self.last[ids] = t
        tau = t - int(self.last.min())
        self.rounds = t + 1
        self.tau_max = max(self.tau_max, tau)
        self._tau_sum += tau
        return tau

    @property
    def tau_avg(self) -> float:
        if self.rounds == 0:
            raise ValueError("tau_avg needs at least one round")
        return self._tau_sum / self.rounds


def delays(trace: Iterable[Iterable[int]], n: int) -> np.ndarray:
    """tau_t for every round of ``trace`` (a sequence of active-client id lists)."""
    tracker = DelayTracker(n)
    return np.array([tracker.update(ids) for ids in trace], dtype=np.int64)


@dataclass(frozen=True)
class DelayMetrics:
    """tau_max and tau_avg (Sec. 2.2, from eq. 4's tau_t) of one trace, and its mean number
    of active clients."""

    tau_max: int
    tau_avg: float
    mean_active: float
    rounds: int


def trace_metrics(trace: Iterable[Iterable[int]], n: int) -> DelayMetrics:
    """:class:`DelayMetrics` of a finished trace (e.g. a run's ``history["selected"]``)."""
    tracker = DelayTracker(n)
    active = 0
    for ids in trace:
        ids = _ids(ids)
        tracker.update(ids)
        active += ids.size
    return DelayMetrics(tracker.tau_max, tracker.tau_avg, active / tracker.rounds, tracker.rounds)


def sampler_metrics(sampler: Sampler, rounds: int) -> DelayMetrics:
    """:class:`DelayMetrics` of the next ``rounds`` selections of ``sampler`` (which advances)."""
    rounds = require_int("rounds", rounds, minimum=1)
    return trace_metrics((sampler.sample().ids for _ in range(rounds)), sampler.n)
