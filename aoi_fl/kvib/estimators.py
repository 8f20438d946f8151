"""Unbiased client sampling (K-Vib paper, Secs 2-3 and 5.1): procedures, estimator, optimum.

Write x_i = lambda_i g_i for client i's weighted update and pi_i = ||x_i|| for its feedback. A
sampling procedure draws every client m_i >= 0 times with probabilities p such that

    d = sum_i m_i x_i / p_i        (Alg. 1 line 12)

is an unbiased estimate of sum_i x_i (Def. 2.1). The procedures (:data:`selection.PROCEDURES`):

- ``"isp"``, the independent sampling procedure: client i is drawn once with probability p_i,
  independently of the others; sum_i p_i = K is only the *expected* sample size;
- ``"with_replacement"``: K i.i.d. draws from q = p / K (the RSP samplers VRB and MABS);
- ``"without_replacement"``: K distinct clients, uniformly (p_i = K / n).

The estimator's variance E||d - sum_i x_i||^2 (eq. 2) has the closed forms of
:func:`expected_squared_error` (eq. 3 for ISP). :func:`optimal_isp_probabilities` is eq. 4 (with
the optional floor of Lemma B.8) and :func:`optimal_rsp_probabilities` eq. 5. The online problem
of Sec. 5.1 scores a round by l_t(p) = sum_i pi_i^2 / p_i (:func:`sampling_cost`), and the
dynamic regret of eq. 8 accumulates l_t(p^t) - min_p l_t(p) (:func:`dynamic_regret`).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from aoi_fl.core.selection import PROCEDURES, Selection
from aoi_fl.core.train import RoundRecorder
from aoi_fl.core.validation import (
    require_choice,
    require_int,
    require_nonnegative_vector,
    require_real,
)


def _budget(k: Any, n: int) -> float:
    return require_real("k", k, minimum=0.0, strict_minimum=True, maximum=n)


def optimal_isp_probabilities(a: Any, k: float, p_min: float = 0.0) -> np.ndarray:
    """argmin_p sum_i a_i^2 / p_i subject to sum_i p_i = k and p_min <= p_i <= 1 (eq. 4).

    The solution is p_i = clip(c a_i, p_min, 1) with c >= 0 such that the p_i sum to k ("capped
    water-filling"); with p_min = 0 this is Lemma 2.2's eq. 4, with p_min > 0 Lemma B.8 (eqs
    23-27). c is found exactly: the sum is piecewise linear in c with breakpoints p_min / a_i and
    1 / a_i, so the breakpoint bracketing k fixes which clients are floored and capped, and c
    follows from one linear equation. Ties need no special care. Clients with a_i = 0 cost
    nothing: they get p_min, or, when the others cannot absorb the budget (all of them at 1),
    an equal share of what is left. All a_i = 0 gives p_i = k / n.

    ``k`` may be any real in (0, n] (the expected sample size); ``p_min`` must lie in
    [0, k / n]. The result always satisfies p_min <= p_i <= 1 and sum p = k up to rounding.
    """
    a = require_nonnegative_vector("a", a)
    n = a.size
    k = _budget(k, n)
    p_min = require_real("p_min", p_min, minimum=0.0, maximum=k / n)
    positive = a > 0
    m = int(positive.sum())
    if m == 0 or k >= m + (n - m) * p_min:
        # the positive entries all sit at 1 and the zero-cost clients share the rest
        share = (k - m) / (n - m) if m < n else 1.0
        return np.where(positive, 1.0, share)
    s = np.sort(a[positive])
    prefix = np.concatenate(([0.0], np.cumsum(s)))
    floor_breaks = p_min / s if p_min > 0 else np.zeros(0)
    breaks = np.unique(np.concatenate(([0.0], floor_breaks, 1.0 / s)))

    def groups(c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # lo: how many positive a_i have c a_i <= p_min; hi: index of the first with c a_i >= 1
        with np.errstate(divide="ignore", invalid="ignore"):
            lo = np.searchsorted(s, np.where(c > 0, p_min / c, np.inf), side="right")
            hi = np.searchsorted(s, np.where(c > 0, 1.0 / c, np.inf), side="left")
        return np.minimum(lo, hi), hi

    def total(c: np.ndarray) -> np.ndarray:
        lo, hi = groups(c)
        return (n - m + lo) * p_min + c * (prefix[hi] - prefix[lo]) + (m - hi)

    sums = total(breaks)
    j = int(np.searchsorted(sums, k, side="left"))  # sums[0] = n p_min <= k < sums[-1]
    if sums[j] == k:
        c = breaks[j]
    else:
        lo, hi = groups(np.array([(breaks[j - 1] + breaks[j]) / 2]))
        lo, hi = int(lo[0]), int(hi[0])
        c = (k - (n - m + lo) * p_min - (m - hi)) / (prefix[hi] - prefix[lo])
    return np.where(positive, np.clip(c * a, p_min, 1.0), p_min)


def optimal_rsp_probabilities(a: Any, k: float) -> np.ndarray:
    """p_i = k a_i / sum_j a_j (eq. 5): the RSP optimum, k times the per-draw law q = a / sum a.

    Entries may exceed 1: they are not inclusion probabilities but the p = K q of K draws with
    replacement. All a_i = 0 gives the uniform p_i = k / n.
    """
    a = require_nonnegative_vector("a", a)
    k = _budget(k, a.size)
    total = a.sum()
    return np.full(a.size, k / a.size) if total == 0 else k * a / total


def _draw_budget(p: np.ndarray, procedure: str) -> int:
    k = float(p.sum())
    if not math.isclose(k, round(k), rel_tol=1e-9, abs_tol=1e-9) or round(k) < 1:
        raise ValueError(
            f"procedure {procedure!r} draws K clients, so sum(p) must be a positive integer; "
            f"got {k!r}"
        )
    return int(round(k))


def draw(procedure: str, p: Any, rng: np.random.Generator) -> np.ndarray:
    """How many times each client is drawn in one round (an int64 vector over all clients).

    ``p`` is the probability vector of :mod:`aoi_fl.kvib.estimators` (see the module docstring): for
    ``"isp"`` inclusion probabilities in [0, 1]; for ``"with_replacement"`` p = K q with an
    integer K = sum p; for ``"without_replacement"`` the uniform K / n with integer K.
    """
    procedure = require_choice("procedure", procedure, PROCEDURES)
    p = require_nonnegative_vector("p", p)
    n = p.size
    if procedure == "isp":
        if (p > 1).any():
            raise ValueError(f"ISP inclusion probabilities must be <= 1, got max {p.max()!r}")
        return (rng.random(n) < p).astype(np.int64)
    k = _draw_budget(p, procedure)
    if procedure == "with_replacement":
        cdf = np.cumsum(p)
        # u < 1 = cdf[-1] / cdf[-1], so every pick is < n
        picks = np.searchsorted(cdf / cdf[-1], rng.random(k), side="right")
        return np.bincount(picks, minlength=n).astype(np.int64)
    if not np.allclose(p, k / n, rtol=1e-12, atol=0.0):
        raise ValueError("procedure 'without_replacement' is implemented for uniform p only")
    counts = np.zeros(n, dtype=np.int64)
    counts[rng.choice(n, size=k, replace=False)] = 1
    return counts


def estimate(counts: np.ndarray, p: np.ndarray, x: np.ndarray) -> np.ndarray:
    """d = sum_i m_i x_i / p_i over the drawn clients (Alg. 1 line 12); zero if none is drawn."""
    drawn = np.flatnonzero(counts)
    return (counts[drawn] / p[drawn]) @ np.asarray(x, dtype=float)[drawn]


def _rows(x: Any) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or not np.all(np.isfinite(x)):
        raise ValueError(f"x must be a finite (clients, dimensions) array, got shape {x.shape}")
    return x


def expected_squared_error(procedure: str, x: Any, p: Any) -> float:
    """E||d - sum_i x_i||^2 (eq. 2) of the estimator d under ``procedure`` with ``p``.

    ``x`` holds the weighted updates x_i = lambda_i g_i as rows. Closed forms:

    - ISP (eq. 3, exact): sum_i (1 - p_i) ||x_i||^2 / p_i;
    - with replacement (K draws from q = p / K):
      (1/K) (sum_i ||x_i||^2 / q_i - ||sum_i x_i||^2);
    - uniform without replacement (p = K / n):
      n (n - K) / (K (n - 1)) (sum_i ||x_i||^2 - ||sum_i x_i||^2 / n).

    A client with x_i != 0 and p_i = 0 makes the estimator biased: the result is inf.
    """
    procedure = require_choice("procedure", procedure, PROCEDURES)
    x = _rows(x)
    p = require_nonnegative_vector("p", p)
    if p.size != x.shape[0]:
        raise ValueError(f"p has {p.size} entries but x has {x.shape[0]} rows")
    return _expected_squared_error(procedure, np.einsum("ij,ij->i", x, x), x.sum(axis=0), p)


def _expected_squared_error(
    procedure: str, sq: np.ndarray, total: np.ndarray, p: np.ndarray
) -> float:
    """:func:`expected_squared_error` from ||x_i||^2 (``sq``) and sum_i x_i (``total``)."""
    if procedure == "isp":
        return sampling_cost(np.sqrt(sq), p) - float(sq[p > 0].sum())
    k = _draw_budget(p, procedure)
    if procedure == "with_replacement":
        return sampling_cost(np.sqrt(sq), p) - float(total @ total) / k
    n = p.size
    if n == 1:
        return 0.0
    return n * (n - k) / (k * (n - 1)) * (float(sq.sum()) - float(total @ total) / n)


def sampling_cost(pi: Any, p: Any) -> float:
    """l_t(p) = sum_i pi_i^2 / p_i (Sec. 5.1); terms with pi_i = 0 cost 0, pi_i > 0 = p_i inf."""
    pi = require_nonnegative_vector("pi", pi)
    p = require_nonnegative_vector("p", p)
    if p.size != pi.size:
        raise ValueError(f"p has {p.size} entries but pi has {pi.size}")
    used = pi > 0
    if (p[used] == 0).any():
        return math.inf
    return float((pi[used] ** 2 / p[used]).sum())


def optimal_sampling_cost(pi: Any, k: float) -> float:
    """min_p l_t(p) over ISP probabilities with sum p = k (the comparator of eq. 8, eq. 4)."""
    return sampling_cost(pi, optimal_isp_probabilities(pi, k))


def dynamic_regret(cost: Any, optimal_cost: Any) -> np.ndarray:
    """Cumulative dynamic regret (eq. 8): sum_{tau <= t} l_tau(p^tau) - min_p l_tau(p), per t."""
    cost = np.asarray(cost, dtype=float)
    optimal_cost = np.asarray(optimal_cost, dtype=float)
    if cost.shape != optimal_cost.shape or cost.ndim != 1:
        raise ValueError(
            f"cost and optimal_cost must be 1-d of equal length, got {cost.shape} and "
            f"{optimal_cost.shape}"
        )
    return np.cumsum(cost - optimal_cost)


def estimation_errors(
    procedure: str, x: Any, p: Any, repetitions: int, rng: np.random.Generator
) -> np.ndarray:
    """d - sum_i x_i for ``repetitions`` independent draws (rows): a Monte Carlo of eq. 2."""
    x = _rows(x)
    repetitions = require_int("repetitions", repetitions, minimum=1)
    p = require_nonnegative_vector("p", p)
    target = x.sum(axis=0)
    return np.stack([estimate(draw(procedure, p, rng), p, x) - target for _ in range(repetitions)])


def enumerate_outcomes(procedure: str, p: Any) -> list[tuple[np.ndarray, float]]:
    """Every possible draw (counts per client) with its probability, for small n.

    ISP: the 2^n subsets; with replacement: the multisets of K draws (multinomial
    probabilities); uniform without replacement: the C(n, K) subsets. n is limited to 16.
    """
    procedure = require_choice("procedure", procedure, PROCEDURES)
    p = require_nonnegative_vector("p", p)
    n = p.size
    if n > 16:
        raise ValueError(f"enumerate_outcomes is for small n (<= 16), got n = {n}")
    outcomes = []
    if procedure == "isp":
        for bits in itertools.product((0, 1), repeat=n):
            m = np.array(bits, dtype=np.int64)
            outcomes.append((m, float(np.prod(np.where(m == 1, p, 1.0 - p)))))
        return outcomes
    k = _draw_budget(p, procedure)
    if procedure == "with_replacement":
        q = p / k
        for picks in itertools.combinations_with_replacement(range(n), k):
            m = np.bincount(picks, minlength=n).astype(np.int64)
            ways = math.factorial(k) / math.prod(math.factorial(int(c)) for c in m)
            outcomes.append((m, float(ways * np.prod(q**m))))
        return outcomes
    for chosen in itertools.combinations(range(n), k):
        m = np.zeros(n, dtype=np.int64)
        m[list(chosen)] = 1
        outcomes.append((m, 1.0 / math.comb(n, k)))
    return outcomes


#: per-round records of the trainer's ``full_information`` mode (:data:`KVIB_RECORDER`)
FULL_INFORMATION_KEYS = (
    "sample_size",
    "cost",
    "optimal_cost",
    "uniform_cost",
    "squared_error",
    "expected_squared_error",
)


def round_record(selection: Selection, g: Any, lam: Any) -> dict[str, float]:
    """The full-information scalars of one round of an unbiased sampler.

    ``g`` holds every client's update g_i as a row, ``lam`` the weights lambda_i, and
    ``selection`` the round's draw with its probabilities p and procedure. Returns
    ``sample_size`` (|S|, counting each client once), ``cost`` l_t(p), ``optimal_cost``
    min_p l_t(p) and ``uniform_cost`` l_t(K / n), all at the same budget K = sum p
    (pi_i = lambda_i ||g_i||), ``squared_error`` ||d - sum_i lambda_i g_i||^2 of this draw's
    estimate d = sum_{i in S} w_i g_i, and ``expected_squared_error``: eq. 2 in closed form for
    the unbiased estimator with p (the expectation of ``squared_error`` when the weights are
    the unbiased ones).
    """
    if selection.probabilities is None or selection.procedure is None:
        raise ValueError(
            "the full-information records need a sampler whose selections carry probabilities "
            "and a procedure (see aoi_fl.kvib.samplers)"
        )
    g = _rows(g)
    lam = require_nonnegative_vector("lam", lam)
    p = selection.probabilities
    if not lam.size == p.size == g.shape[0]:
        raise ValueError(
            f"g has {g.shape[0]} rows, lam {lam.size} entries and the probabilities {p.size}"
        )
    x = lam[:, None] * g
    sq, total = np.einsum("ij,ij->i", x, x), x.sum(axis=0)
    pi = np.sqrt(sq)
    error = selection.weights @ g[selection.ids] - total
    return {
        "sample_size": len(selection),
        "cost": sampling_cost(pi, p),
        "optimal_cost": optimal_sampling_cost(pi, float(p.sum())),
        "uniform_cost": sampling_cost(pi, np.full(p.size, p.sum() / p.size)),
        "squared_error": float(error @ error),
        "expected_squared_error": _expected_squared_error(selection.procedure, sq, total, p),
    }


#: what the trainer records each round of its ``full_information`` mode: K-Vib's metrics, named
#: by ``aoi_fl/entry_points.txt`` (``aoi_fl.recorders``), so training in that mode needs no
#: module of the evidence
KVIB_RECORDER = RoundRecorder(FULL_INFORMATION_KEYS, round_record)
