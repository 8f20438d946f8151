"""The age Markov chain of one client (AoI paper, Sec. III-C) and Theorem 1.

A client's age a in {0, ..., m'} is the number of rounds since it was last selected, capped at m'
(eq. 4). A client of age a selects itself with probability p_a; selected, it returns to age 0,
otherwise it moves to min(a + 1, m'). The load metric X is the number of rounds between two
selections (the peak age):

    P(X = x) = p_{x-1} * prod_{j < x-1} (1 - p_j),      with p_j = p_{m'} for j >= m'.

So X has a finite head (x = 1..m') and, with probability s = prod_{j < m'} (1 - p_j), the tail
m' + 1 + G with G geometric on {0, 1, ...} of success probability p_{m'}. Everything below is
computed from that head/tail split in closed form; nothing is truncated.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import optimize

from aoi_fl.core.seeding import generator
from aoi_fl.core.validation import (
    check_chain,
    require_choice,
    require_int,
    require_n_m,
)

#: Named monotone families for the non-optimal Markov policy (Policy 4): unnormalised shapes of
#: p_a as a function of the age a; calibration scales them, p = min(beta * shape, 1), so that
#: pi_0 = m/n (:func:`calibrate_shape`). Where the target rate needs it, the largest entries
#: saturate at 1; at the paper's n = 100, m = 15, m' = 10 only "exponential" does (p_8 = p_9 =
#: p_10 = 1, see :func:`calibrate_family`).
FAMILIES: dict[str, str] = {
    "linear": "p_a proportional to a + 1",
    "quadratic": "p_a proportional to (a + 1)^2",
    "exponential": "p_a proportional to 2^a",
}


def check_non_decreasing(p: object, name: str = "p") -> np.ndarray:
    """Validate Policy 4's p: a chain (:func:`check_chain`) whose p_a does not decrease with age.

    The paper's Sec. III-B asks for p_0 < p_1 < ... < p_{m'} (older clients are more likely to
    select themselves). Equal neighbours are accepted: a calibrated shape saturates at 1 when the
    target rate needs it (:func:`calibrate_shape`), and entries after the first p_a = 1 belong to
    ages the chain never reaches, so they cannot change its law.
    """
    p = check_chain(p)
    drops = np.flatnonzero(np.diff(p) < 0.0)
    if drops.size:
        a = int(drops[0])
        raise ValueError(
            f"{name} must be non-decreasing in the age for Policy 4 (Sec. III-B: p_0 < p_1 < ... "
            f"< p_m'; equal neighbours allowed), got {name}[{a}] = {float(p[a])!r} > "
            f"{name}[{a + 1}] = {float(p[a + 1])!r} in {name} = {p.tolist()}"
        )
    return p


def last_reachable_age(p: object) -> int:
    """The largest age a client can reach: the first age with p_a = 1, else m'."""
    p = check_chain(p)
    ones = np.flatnonzero(p[:-1] >= 1.0)
    return int(ones[0]) if ones.size else p.size - 1


def _head_tail(p: np.ndarray) -> tuple[np.ndarray, float]:
    """Head probabilities P(X = x) for x = 1..m' and the tail mass s = P(X > m')."""
    survive = np.concatenate(([1.0], np.cumprod(1.0 - p[:-1])))  # P(X > x) for x = 0..m'
    head = p[:-1] * survive[:-1]
    return head, float(survive[-1])


def transition_matrix(p: object) -> np.ndarray:
    """The (m'+1) x (m'+1) transition matrix of the age chain (Fig. 1)."""
    p = check_chain(p)
    k = p.size
    P = np.zeros((k, k))
    P[:, 0] = p
    P[np.arange(k - 1), np.arange(1, k)] = 1.0 - p[:-1]
    P[k - 1, k - 1] += 1.0 - p[-1]
    return P


def stationary_distribution(p: object) -> np.ndarray:
    """Stationary law pi of the age chain, eqs 5-8.

    pi_i is proportional to prod_{j <= i-1} (1 - p_j) for i < m' (pi_0 to 1) and pi_{m'} to
    prod_{j < m'} (1 - p_j) / p_{m'}. (The PDF text of eq. 6 reads prod_{j <= i}; that is an index
    slip: balance of state i needs the product up to i - 1, as the LaTeX version and the generic
    solve of pi P = pi in the tests confirm.)
    """
    p = check_chain(p)
    survive = np.concatenate(([1.0], np.cumprod(1.0 - p[:-1])))
    weights = survive.copy()
    weights[-1] = survive[-1] / p[-1] if survive[-1] > 0.0 else 0.0
    return weights / weights.sum()


def selection_rate(p: object) -> float:
    """p_avg = sum_a pi_a p_a = pi_0 = 1 / E[X]: the steady-state probability of being selected."""
    pi = stationary_distribution(p)
    return float(pi @ np.asarray(p, dtype=float))


def interval_pmf(p: object, x_max: int) -> np.ndarray:
    """P(X = x) for x = 1, ..., x_max (the inter-selection interval, Sec. III-C)."""
    p = check_chain(p)
    x_max = require_int("x_max", x_max, minimum=1)
    head, s = _head_tail(p)
    m_prime = p.size - 1
    pmf = np.zeros(x_max)
    upto = min(x_max, m_prime)
    pmf[:upto] = head[:upto]
    if x_max > m_prime:
        k = np.arange(x_max - m_prime)
        pmf[m_prime:] = s * p[-1] * (1.0 - p[-1]) ** k
    return pmf


def interval_survival(p: object, x: object) -> np.ndarray:
    """P(X > x) for integer x >= 0 (vectorised)."""
    p = check_chain(p)
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.integer) or (x < 0).any():
        raise ValueError(f"x must be integers >= 0, got {x!r}")
    head, s = _head_tail(p)
    m_prime = p.size - 1
    survive = np.concatenate(([1.0], 1.0 - np.cumsum(head)))  # P(X > x), x = 0..m'
    survive[-1] = s
    beyond = np.maximum(x - m_prime, 0)
    return np.where(x <= m_prime, survive[np.minimum(x, m_prime)], s * (1.0 - p[-1]) ** beyond)


def interval_quantile(p: object, u: object) -> np.ndarray:
    """Inverse CDF of X: the smallest x >= 1 with P(X <= x) > u, for u in [0, 1) (vectorised).

    ``interval_quantile(p, rng.random(k))`` draws k exact samples of X; drawing u uniformly in
    [1 - S, 1) with S = P(X > a) samples X conditioned on X > a.
    """
    p = check_chain(p)
    u = np.asarray(u, dtype=float)
    if ((u < 0.0) | (u >= 1.0) | ~np.isfinite(u)).any():
        raise ValueError("u must lie in [0, 1)")
    head, s = _head_tail(p)
    m_prime = p.size - 1
    cdf = np.cumsum(head)
    x = np.searchsorted(cdf, u, side="right") + 1  # in 1..m'+1
    in_tail = x > m_prime
    if in_tail.any():
        q = p[-1]
        if q >= 1.0:
            extra = np.zeros(int(in_tail.sum()), dtype=np.int64)
        else:
            # P(G >= g) = (1 - q)^g for the geometric tail; invert the conditional CDF.
            rest = np.clip((1.0 - u[in_tail]) / s, np.finfo(float).tiny, 1.0)
            extra = np.floor(np.log(rest) / np.log1p(-q)).astype(np.int64)
        x = x.astype(np.int64)
        x[in_tail] = m_prime + 1 + extra
    return x.astype(np.int64)


def _moments(p: np.ndarray) -> tuple[float, float]:
    head, s = _head_tail(p)
    m_prime = p.size - 1
    xs = np.arange(1, m_prime + 1)
    q = p[-1]
    if s > 0.0:
        g_mean = (1.0 - q) / q
        g_var = (1.0 - q) / q**2
        base = m_prime + 1
        tail1 = s * (base + g_mean)
        tail2 = s * (base**2 + 2 * base * g_mean + g_var + g_mean**2)
    else:
        tail1 = tail2 = 0.0
    return float(head @ xs + tail1), float(head @ xs**2 + tail2)


def interval_mean(p: object) -> float:
    """E[X], exactly; equals 1/pi_0 by the renewal identity."""
    return _moments(check_chain(p))[0]


def interval_variance(p: object) -> float:
    """Var[X], exactly (the objective of eq. 2)."""
    m1, m2 = _moments(check_chain(p))
    return max(m2 - m1 * m1, 0.0)


def random_interval_mean(n: int, m: int) -> float:
    """E[X] = n/m for any memoryless policy with marginal m/n (geometric X, Sec. III-C)."""
    n, m = require_n_m(n, m)
    return n / m


def random_interval_variance(n: int, m: int) -> float:
    """Var[X] = n(n - m)/m^2 for random selection (geometric X with success m/n, Sec. III-C)."""
    n, m = require_n_m(n, m)
    return n * (n - m) / m**2


def _check_theorem_args(n: int, m: int, m_prime: int) -> tuple[int, int, int]:
    n, m = require_n_m(n, m)
    m_prime = require_int("m_prime", m_prime, minimum=1)
    return n, m, m_prime


def optimal_p(n: int, m: int, m_prime: int) -> np.ndarray:
    """Theorem 1: the selection probabilities that minimise Var[X] subject to pi_0 = m/n.

    With r = n/m: if m' <= floor(r) - 1, p = (0, ..., 0, 1/(r - m')); otherwise, with
    i = floor(r), p_0..p_{i-2} = 0, p_{i-1} = i + 1 - r and p_i..p_{m'} = 1 (eq. 9).
    """
    n, m, m_prime = _check_theorem_args(n, m, m_prime)
    r = Fraction(n, m)
    i = n // m
    p = np.zeros(m_prime + 1)
    if m_prime <= i - 1:
        p[m_prime] = float(1 / (r - m_prime))
    else:
        p[i - 1] = float(i + 1 - r)
        p[i:] = 1.0
    return p


def optimal_variance(n: int, m: int, m_prime: int) -> float:
    """Theorem 1's minimum Var[X]: (r - m')(r - m' - 1) if m' <= floor(r) - 1, else c(1 - c)."""
    n, m, m_prime = _check_theorem_args(n, m, m_prime)
    r = Fraction(n, m)
    i = n // m
    if m_prime <= i - 1:
        return float((r - m_prime) * (r - m_prime - 1))
    c = r - i
    return float(c * (1 - c))


def _family_shape(family: str, m_prime: int) -> np.ndarray:
    a = np.arange(m_prime + 1, dtype=float)
    return {"linear": a + 1.0, "quadratic": (a + 1.0) ** 2, "exponential": 2.0**a}[family]


def calibrate_shape(shape: object, n: int, m: int) -> np.ndarray:
    """Scale a non-negative shape vector, p = min(beta * shape, 1), so that pi_0 = m/n.

    pi_0 increases continuously with beta (every p_a does), so beta is found by bracketing root
    finding. Raises if no beta reaches m/n (e.g. the shape is zero at every reachable age).
    """
    n, m = require_n_m(n, m)
    shape = np.asarray(shape, dtype=float)
    if shape.ndim != 1 or shape.size < 2 or (~np.isfinite(shape)).any() or (shape < 0).any():
        raise ValueError(
            "shape must be a 1-d vector of length m' + 1 >= 2 with finite entries >= 0, "
            f"got {shape!r}"
        )
    if shape[-1] <= 0.0:
        raise ValueError("shape[m'] must be > 0 so that the chain keeps selecting")
    target = m / n

    def rate(beta: float) -> float:
        return selection_rate(np.minimum(beta * shape, 1.0)) - target

    hi = 1.0 / shape[shape > 0].min()  # every positive entry clipped to 1: the largest rate
    if rate(hi) < 0.0:
        raise ValueError(f"no scaling of shape reaches pi_0 = m/n = {target}")
    if rate(hi) == 0.0:
        return np.minimum(hi * shape, 1.0)
    lo = hi
    while rate(lo) > 0.0:
        lo /= 2.0
    beta = optimize.brentq(rate, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    return np.minimum(beta * shape, 1.0)


def calibrate_family(family: str, n: int, m: int, m_prime: int) -> np.ndarray:
    """Policy 4's p: the named monotone family of :data:`FAMILIES`, calibrated to pi_0 = m/n.

    The result is non-decreasing, and strictly increasing up to the first age with p_a = 1 (the
    last age a client can reach, :func:`last_reachable_age`): the paper's p_0 < ... < p_{m'}
    holds on every reachable age. Entries saturate at 1 only when beta * shape would exceed 1.
    At the paper's n = 100, m = 15, m' = 10, "linear" (p_10 = 0.358) and "quadratic" (p_10 =
    0.766) stay below 1, while "exponential" needs beta = 0.0068 and clips p_8, p_9 and p_10 to 1
    (beta * 2^8 = 1.73): every client is selected by age 8 at the latest, ages 9 and 10 are never
    reached, and X <= 9 rounds. That is allowed: on the reachable ages the order is still strict,
    p_0 < ... < p_7 < p_8 = 1, and p_9, p_10 cannot change the chain's law.
    """
    family = require_choice("family", family, FAMILIES)
    n, m, m_prime = _check_theorem_args(n, m, m_prime)
    return calibrate_shape(_family_shape(family, m_prime), n, m)


#: Relative feasibility of an optimiser's end point: |E[X] - n/m| <= FEASIBLE_RTOL * n/m. The
#: starts that converge meet it to about 1e-11 (6e-10 at worst, seen); the slack moves Var[X] by
#: about 1e-9 only, so its 6-decimal value is the same on every machine (with 1e-7, an end point
#: off the constraint "beat" Theorem 1 by 2e-6 under other BLAS kernels).
FEASIBLE_RTOL = 1e-9
#: A start has converged when its variance is within CONVERGED_RTOL * max(best, 1) of the best
#: end point: far above the optimiser's last-bit noise (about 1e-11 here), far below the gaps to
#: other local optima (0.1 and more), so the count is the same on every machine.
CONVERGED_RTOL = 1e-6


@dataclass(frozen=True)
class NumericalOptimum:
    """Result of :func:`minimise_variance_numerically`.

    ``converged`` counts the starts whose end point is feasible and within ``CONVERGED_RTOL``
    (relative, at least 1 in absolute scale) of the best one; ``feasible`` those feasible at all.
    """

    p: np.ndarray
    variance: float
    rate: float
    starts: int
    converged: int
    feasible: int


def minimise_variance_numerically(
    n: int, m: int, m_prime: int, *, starts: int = 20, seed: int = 0
) -> NumericalOptimum:
    """Minimise Var[X] over p in [0, 1]^{m'+1} subject to E[X] = n/m (i.e. pi_0 = m/n), eqs 2-3.

    An independent check of Theorem 1 that never sees its answer: SLSQP from ``starts`` random
    starting points (own generator from ``seed``), keeping the best feasible end point.

    SLSQP's own success flag is not used: with ftol near machine precision most runs that reach
    the optimum stop with "positive directional derivative in linesearch" (status 8), and which
    ones do depends on last-bit rounding (the BLAS kernels of the CPU), so counting successes
    gave different counts on different machines. Feasibility and the distance to the best end
    point (:data:`CONVERGED_RTOL`) do not.
    """
    n, m, m_prime = _check_theorem_args(n, m, m_prime)
    starts = require_int("starts", starts, minimum=1)
    rng = generator(seed, "theorem1_optimiser", n, m, m_prime)
    r = n / m
    bounds = [(0.0, 1.0)] * m_prime + [(1e-9, 1.0)]
    constraint = {"type": "eq", "fun": lambda q: _moments(q)[0] - r}

    def objective(q: np.ndarray) -> float:
        m1, m2 = _moments(q)
        return m2 - m1 * m1

    ends: list[tuple[float, np.ndarray]] = []  # feasible end points, in the order of the starts
    for _ in range(starts):
        x0 = rng.uniform(0.0, 1.0, m_prime + 1)
        x0[-1] = max(x0[-1], 0.05)
        res = optimize.minimize(
            objective,
            x0,
            method="SLSQP",
            bounds=bounds,
            constraints=[constraint],
            options={"maxiter": 500, "ftol": 1e-13},
        )
        q = np.clip(res.x, 0.0, 1.0)
        if abs(_moments(q)[0] - r) <= FEASIBLE_RTOL * r:
            ends.append((objective(q), q))
    if not ends:
        raise RuntimeError(f"no start ended at a feasible point for n={n}, m={m}, m'={m_prime}")
    best, p = min(ends, key=lambda end: end[0])
    margin = CONVERGED_RTOL * max(abs(best), 1.0)
    return NumericalOptimum(
        p=p,
        variance=float(best) if best > 0.0 else 0.0,  # never -0.0, which prints as "-0.000000"
        rate=selection_rate(p),
        starts=starts,
        converged=sum(value - best <= margin for value, _ in ends),
        feasible=len(ends),
    )
