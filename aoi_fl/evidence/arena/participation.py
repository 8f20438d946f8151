"""Participation and learning metrics of one finished training run (the selection arena).

A run's records (:attr:`aoi_fl.core.train.FederatedTrainer.history`) hold, for rounds
t = 0, ..., T-1, the selected clients S_t (``selected[t]``, distinct ids in [0, n)) and their
aggregation weights (``weights[t]``, same order), the test accuracy at the evaluated rounds
(``eval_round``: rounds completed, 0 = the initial model), optionally the number of clients
available per round (``available``) and every client's accuracy on its own samples after the
last round (``client_accuracy``). From them:

- participation: the selection counts c_i and Jain's fairness index of them; the AoI paper's
  inter-selection intervals X (Sec. III), their variance (the objective Var[X] of eqs 2-3) and
  tail; the FedSUM delays tau_max and tau_avg (Sec. 2.2, :mod:`aoi_fl.core.delays`); the
  empirical Sigma of Theorem 2 (eq. 14); the rounds with fewer than m participants;
- learning: the first round reaching a target accuracy, the final accuracy, and the mean
  accuracy of the worst-served clients on their own data.

The intervals and Sigma are computed by :class:`aoi_fl.core.stats.SelectionStats`, the code
behind the AoI paper's Figs 2-3, so an arena table and those figures share one definition
(the AoI package's ``sigma`` module holds the theoretical Sigma of each policy). Variances are
population variances (divided by the number of terms), as there.

:func:`run_metrics` collects everything into a :class:`RunMetrics`; its ``as_dict()`` is one
flat table row.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aoi_fl.core.delays import trace_metrics
from aoi_fl.core.selection import Selection
from aoi_fl.core.stats import SelectionStats
from aoi_fl.core.train import AVAILABILITY_KEY, CLIENT_ACCURACY_KEY, rounds_to_target
from aoi_fl.core.validation import (
    require_int,
    require_n_m,
    require_nonnegative_vector,
    require_probability_vector,
    require_real,
)

#: the share of clients :func:`worst_clients_accuracy` averages by default (the worst 10%)
WORST_SHARE = 0.1
#: the history records :func:`run_metrics` cannot do without
REQUIRED_KEYS = ("selected", "weights", "eval_round", "test_accuracy")

# ---------------------------------------------------------------------------------------------
# Input checks


def _sequence(name: str, value: Any) -> Sequence:
    # A string is a Sequence too, but never a list of rounds or of ids.
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray):
        raise TypeError(f"{name} must be a sequence (a list per round), got {type(value).__name__}")
    return value


def _floats(name: str, values: Any) -> np.ndarray:
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be a sequence of real numbers, got {values!r}") from err


def _round_ids(t: int, ids: Any, n: int | None) -> np.ndarray:
    name = f"selected[{t}]"
    ids = _sequence(name, ids)
    try:
        arr = np.asarray(ids)
    except ValueError as err:  # ragged nesting
        raise ValueError(f"{name} must be a flat list of client ids, got {ids!r}") from err
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a flat list of client ids, got shape {arr.shape}")
    if arr.size == 0:
        return np.empty(0, dtype=np.int64)  # np.asarray([]) is float; an empty round is valid
    valid = arr.dtype.kind in "iu" and arr.min() >= 0 and (n is None or arr.max() < n)
    if not valid:
        # Only to name the first offending entry: the entries as given, since the array has
        # cast ints to float next to a float.
        for k, v in enumerate(ids.tolist() if isinstance(ids, np.ndarray) else ids):
            what = f"{name}[{k}] (a client id" + ("" if n is None else f", n = {n}") + ")"
            require_int(what, v, minimum=0, maximum=None if n is None else n - 1)
    arr = arr.astype(np.int64, copy=False)
    if arr.size > 1 and not (np.diff(arr) > 0).all():  # the trainer records increasing ids
        unique, seen = np.unique(arr, return_counts=True)
        if (seen > 1).any():
            first = int(np.flatnonzero(seen > 1)[0])
            raise ValueError(
                f"{name} lists client {int(unique[first])} {int(seen[first])} times; the ids of "
                "a round must be distinct (a client drawn several times is recorded once)"
            )
    return arr


def _trace(selected: Any, n: int | None) -> list[np.ndarray]:
    """``selected`` as one int64 array per round, checked: at least one round, distinct ids
    per round, each id in [0, n) (or >= 0 when ``n`` is None)."""
    rounds = _sequence("selected", selected)
    if len(rounds) == 0:
        raise ValueError("selected must hold at least one round (a list of ids), got 0 rounds")
    return [_round_ids(t, ids, n) for t, ids in enumerate(rounds)]


def _trace_weights(weights: Any, trace: list[np.ndarray]) -> list[np.ndarray]:
    """``weights`` as one float array per round, aligned with ``trace``, each entry >= 0."""
    rounds = _sequence("weights", weights)
    if len(rounds) != len(trace):
        raise ValueError(
            f"weights has {len(rounds)} rounds but selected has {len(trace)}; "
            "one list of weights per round is needed"
        )
    out = []
    for t, (w, ids) in enumerate(zip(rounds, trace, strict=True)):
        arr = _floats(f"weights[{t}]", _sequence(f"weights[{t}]", w))
        if arr.shape != ids.shape:
            raise ValueError(
                f"weights[{t}] has {arr.size} entries but selected[{t}] has {ids.size} clients; "
                "one weight per selected client is needed"
            )
        if arr.size:
            bad = ~np.isfinite(arr) | (arr < 0.0)
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                require_real(f"weights[{t}][{k}]", float(arr[k]), minimum=0.0)
        out.append(arr)
    return out


def _gaps(stats: SelectionStats) -> np.ndarray:
    """The pooled intervals of ``stats``, in increasing order, from its histogram."""
    histogram = stats.interval_histogram()
    return np.repeat(np.arange(histogram.size, dtype=np.int64), histogram)


def _stats(trace: list[np.ndarray], weights: list[np.ndarray] | None, n: int) -> SelectionStats:
    stats = SelectionStats(n)
    # intervals and counts do not depend on the weights: zeros stand in when none are given
    stats.update_rounds(
        [Selection(ids, np.zeros(ids.size) if weights is None else weights[t])
         for t, ids in enumerate(trace)]
    )  # fmt: skip
    return stats


# ---------------------------------------------------------------------------------------------
# Participation


def selection_counts(selected: Sequence[Sequence[int]], n: int) -> np.ndarray:
    """c_i = |{t : i in S_t}|, the number of rounds client i was selected (int64, length n)."""
    n = require_int("n", n, minimum=1)
    trace = _trace(selected, n)
    return np.bincount(np.concatenate(trace), minlength=n).astype(np.int64)


def jain_index(x: Sequence[float]) -> float:
    """Jain's fairness index J(x) = (sum_i x_i)^2 / (n sum_i x_i^2) of x_i >= 0 (Jain, Chiu and
    Hawe, 1984), in [1/n, 1]: 1 when every x_i is equal, 1/n when one client takes everything.

    The all-zero vector raises ValueError: J is 0/0 there, and its limit depends on the direction
    of approach (1 along equal vectors, 1/n along one client), so no value is right for it.
    """
    arr = require_nonnegative_vector("x", _floats("x", x))
    total_sq = float(np.sum(np.square(arr)))
    if total_sq == 0.0:
        raise ValueError(
            f"x is all zero (n = {arr.size}): Jain's index (sum x)^2 / (n sum x^2) is 0/0 there; "
            "at least one entry must be > 0"
        )
    return float(np.sum(arr)) ** 2 / (arr.size * total_sq)


def intervals(selected: Sequence[Sequence[int]], n: int) -> np.ndarray:
    """The inter-selection intervals X (AoI paper, Sec. III): for every client and every pair of
    consecutive selections of it in rounds t1 < t2, X = t2 - t1 (1 for back-to-back rounds).

    Pooled over clients, in increasing order (int64). Only complete gaps are counted: the
    censored waits (before a client's first selection, after its last, and the whole trace of
    a client never selected) are left out; :func:`interval_stats` reports them separately.
    """
    n = require_int("n", n, minimum=1)
    return _gaps(_stats(_trace(selected, n), None, n))


@dataclass(frozen=True)
class IntervalStats:
    """Summary of the complete intervals X (:func:`intervals`) and of the censored waits.

    ``mean``, ``var`` (population variance, the empirical Var[X] of the AoI paper's objective,
    eqs 2-3), the tail ``p95``, ``p99`` (empirical quantiles: the smallest observed x with at
    least 95% / 99% of the intervals <= x, numpy's "inverted_cdf") and ``max`` are NaN when
    ``count`` = 0 (no client was selected twice). ``never_selected`` counts clients with no
    selection at all; ``max_age`` is the largest age after the last round, eq. 4's
    A_i(T) = T - 1 - (last round i was selected), or T if never selected: every wait still open
    at the end is at least ``max_age`` + 1 rounds. It equals FedSUM's tau_{T-1}.
    """

    count: int
    mean: float
    var: float
    p95: float
    p99: float
    max: float
    never_selected: int
    max_age: int

    def as_dict(self) -> dict[str, float | int]:
        """The fields as table columns (``interval_...``, ``never_selected``, ``max_age``)."""
        return {
            "interval_count": self.count,
            "interval_mean": self.mean,
            "interval_var": self.var,
            "interval_p95": self.p95,
            "interval_p99": self.p99,
            "interval_max": self.max,
            "never_selected": self.never_selected,
            "max_age": self.max_age,
        }


def _interval_stats(gaps: np.ndarray, trace: list[np.ndarray], n: int) -> IntervalStats:
    last = np.full(n, -1, dtype=np.int64)  # -1: never selected, so its age is T
    for t, ids in enumerate(trace):
        last[ids] = t
    never = int(np.count_nonzero(last < 0))
    max_age = len(trace) - 1 - int(last.min())
    if gaps.size == 0:
        nan = float("nan")
        return IntervalStats(0, nan, nan, nan, nan, nan, never, max_age)
    p95, p99 = np.percentile(gaps, [95, 99], method="inverted_cdf")
    return IntervalStats(
        count=int(gaps.size),
        mean=float(gaps.mean()),
        var=float(gaps.var()),
        p95=float(p95),
        p99=float(p99),
        max=float(gaps.max()),
        never_selected=never,
        max_age=max_age,
    )


def interval_stats(selected: Sequence[Sequence[int]], n: int) -> IntervalStats:
    """:class:`IntervalStats` of a trace: the complete intervals X of :func:`intervals` (AoI
    paper, Sec. III) and the censored waits (clients never selected, the largest final age)."""
    n = require_int("n", n, minimum=1)
    trace = _trace(selected, n)
    return _interval_stats(_gaps(_stats(trace, None, n)), trace, n)


def empirical_sigma(
    selected: Sequence[Sequence[int]], weights: Sequence[Sequence[float]], n: int
) -> float:
    """The empirical Sigma = sum_i Var_t[w_{i,t}] of the AoI paper's Theorem 2 (eq. 14).

    w_{i,t} is client i's aggregation weight in round t, 0 when it is not selected; Var_t is the
    population variance over the T rounds of the trace (as in Fig. 2), summed over the n
    clients. Computed by :meth:`aoi_fl.core.stats.SelectionStats.sigma`.
    """
    n = require_int("n", n, minimum=1)
    trace = _trace(selected, n)
    return _stats(trace, _trace_weights(weights, trace), n).sigma()


def rounds_short(selected: Sequence[Sequence[int]], m: int) -> int:
    """The number of rounds t with |S_t| < m: fewer distinct participants than the target m
    (a round's ids are distinct, see the module docstring)."""
    m = require_int("m", m, minimum=1)
    return sum(ids.size < m for ids in _trace(selected, None))


# ---------------------------------------------------------------------------------------------
# Learning


def worst_clients_accuracy(client_accuracy: Sequence[float], share: float = WORST_SHARE) -> float:
    """Mean accuracy of the k = ceil(share * n) clients with the lowest accuracy on their own
    training data (the worst-served clients; share = 0.1: the worst 10%).

    share * n is rounded to 9 decimals before the ceiling, so that 0.1 * 30 gives k = 3, not
    the 4 of its floating-point value 3.0000000000000004; k is at least 1.
    """
    share = require_real("share", share, minimum=0.0, strict_minimum=True, maximum=1.0)
    acc = require_probability_vector("client_accuracy", _floats("client_accuracy", client_accuracy))
    k = max(1, math.ceil(round(share * acc.size, 9)))
    return float(np.mean(np.sort(acc)[:k]))


# ---------------------------------------------------------------------------------------------
# One run


@dataclass(frozen=True)
class RunMetrics:
    """The metrics of one run (:func:`run_metrics`); see the module docstring.

    ``counts`` holds every client's selection count; the other fields are scalars, and
    :meth:`as_dict` gives them as one flat table row. ``jain`` is NaN when no client was ever
    selected (:func:`jain_index` is undefined there). ``mean_available`` is None without an
    availability record, ``worst_clients_accuracy`` None without a ``client_accuracy`` record,
    ``rounds_to_target`` None when the target was never reached and ``final_accuracy`` None when
    the last evaluation measured no accuracy (a loss without one, e.g. mse).
    """

    rounds: int
    n: int
    m: int
    counts: tuple[int, ...]
    jain: float
    intervals: IntervalStats
    tau_max: int
    tau_avg: float
    sigma: float
    rounds_short: int
    mean_participants: float
    mean_available: float | None
    target: float
    rounds_to_target: int | None
    final_accuracy: float | None
    worst_share: float
    worst_clients_accuracy: float | None

    def as_dict(self) -> dict[str, Any]:
        """Every field but ``counts``, with ``intervals`` spread into its own columns."""
        row: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if name == "intervals":
                row.update(value.as_dict())
            elif name != "counts":
                row[name] = value
        return row


def _history(history: Any) -> Mapping[str, Any]:
    if not isinstance(history, Mapping):
        raise TypeError(
            "history must be a mapping of records (FederatedTrainer.history), "
            f"got {type(history).__name__}"
        )
    missing = [key for key in REQUIRED_KEYS if key not in history]
    if missing:
        raise ValueError(
            f"history has no {', '.join(map(repr, missing))} record; run_metrics needs "
            f"{', '.join(REQUIRED_KEYS)} (selected and weights: TrainSettings.record_clients)"
        )
    return history


def _accuracy_record(history: Mapping[str, Any], rounds: int) -> tuple[list[int], list]:
    eval_round = _sequence("history['eval_round']", history["eval_round"])
    accuracy = _sequence("history['test_accuracy']", history["test_accuracy"])
    if len(eval_round) != len(accuracy):
        raise ValueError(
            f"history['eval_round'] has {len(eval_round)} entries but history['test_accuracy'] "
            f"has {len(accuracy)}; one accuracy per evaluated round is needed"
        )
    if len(accuracy) == 0:
        raise ValueError("history['test_accuracy'] is empty; at least one evaluation is needed")
    # an evaluation happens after a recorded round (0: the initial model), never beyond them
    checked_rounds = [
        require_int(f"history['eval_round'][{k}]", r, minimum=0, maximum=rounds)
        for k, r in enumerate(eval_round)
    ]
    checked_accuracy = [
        None
        if a is None
        else require_real(f"history['test_accuracy'][{k}]", a, minimum=0.0, maximum=1.0)
        for k, a in enumerate(accuracy)
    ]
    return checked_rounds, checked_accuracy


def _mean_available(history: Mapping[str, Any], trace: list[np.ndarray], n: int) -> float | None:
    if AVAILABILITY_KEY not in history:
        return None
    available = _sequence("history['available']", history[AVAILABILITY_KEY])
    if len(available) != len(trace):
        raise ValueError(
            f"history['available'] has {len(available)} rounds but selected has {len(trace)}; "
            "one count of available clients per round is needed"
        )
    for t, (a, ids) in enumerate(zip(available, trace, strict=True)):
        a = require_int(f"history['available'][{t}]", a, minimum=0, maximum=n)
        if a < ids.size:
            raise ValueError(
                f"history['available'][{t}] = {a} but selected[{t}] has {ids.size} clients; "
                "only available clients can be selected, so it must be >= that"
            )
    return float(np.mean(available))


def _worst(history: Mapping[str, Any], n: int, share: float) -> float | None:
    record = history.get(CLIENT_ACCURACY_KEY)
    if not record:  # absent, or a run stopped before its last round recorded it
        return None
    accuracy = _sequence("history['client_accuracy'][-1]", record[-1])
    if len(accuracy) != n:
        raise ValueError(
            f"history['client_accuracy'][-1] has {len(accuracy)} entries but n = {n}; "
            "one accuracy per client is needed"
        )
    return worst_clients_accuracy(accuracy, share)


def _final(accuracy: list, window: int) -> float | None:
    last = accuracy[-window:]
    if any(a is None for a in last):
        return None
    return float(np.mean(last))


def run_metrics(
    history: Mapping[str, Any],
    n: int,
    m: int,
    target: float,
    *,
    worst_share: float = WORST_SHARE,
    final_window: int = 1,
) -> RunMetrics:
    """Every participation and learning metric of one run from its ``history``
    (:attr:`aoi_fl.core.train.FederatedTrainer.history`) with n clients and m targeted per
    round; ``target`` is the test accuracy in [0, 1] whose first round is reported.
    ``final_accuracy`` is the mean of the last ``final_window`` evaluations' accuracies (a
    window smooths the round-to-round noise of a run that has levelled off)."""
    n, m = require_n_m(n, m)
    final_window = require_int("final_window", final_window, minimum=1)
    target = require_real("target", target, minimum=0.0, maximum=1.0)
    worst_share = require_real(
        "worst_share", worst_share, minimum=0.0, strict_minimum=True, maximum=1.0
    )
    history = _history(history)
    trace = _trace(history["selected"], n)
    stats = _stats(trace, _trace_weights(history["weights"], trace), n)
    counts = stats.counts.astype(np.int64)
    delays = trace_metrics(trace, n)
    eval_round, accuracy = _accuracy_record(history, len(trace))
    return RunMetrics(
        rounds=len(trace),
        n=n,
        m=m,
        counts=tuple(counts.tolist()),
        jain=jain_index(counts) if counts.any() else float("nan"),
        intervals=_interval_stats(_gaps(stats), trace, n),
        tau_max=int(delays.tau_max),
        tau_avg=float(delays.tau_avg),
        sigma=stats.sigma(),
        rounds_short=sum(ids.size < m for ids in trace),
        mean_participants=float(delays.mean_active),
        mean_available=_mean_available(history, trace, n),
        target=target,
        rounds_to_target=rounds_to_target(accuracy, target, rounds=eval_round),
        final_accuracy=_final(accuracy, final_window),
        worst_share=worst_share,
        worst_clients_accuracy=_worst(history, n, worst_share),
    )
