"""Sigma = sum_i Var[w_i] (eq. 14) of the aggregation weights of one round, per policy.

Theorems 3-5 of the AoI paper and Remarks 4-5, computed exactly.

Policy 1 (Theorem 3, eqs 28-31) is a sum over all C(n, m) subsets, hopeless at n = 100, m = 15.
:func:`random_weight_moments` evaluates it exactly through a Laplace transform. Client i is
selected with probability m/n, and then w_i = d_i / (d_i + Y), where Y is the size total of a
uniform (m-1)-subset of the other clients. Since 1/x = int_0^inf e^{-tx} dt and
1/x^2 = int_0^inf t e^{-tx} dt,

    E[d_i / (d_i + Y)]       = d_i   int_0^inf   e^{-t d_i} phi_i(t) dt,
    E[(d_i / (d_i + Y))^2]   = d_i^2 int_0^inf t e^{-t d_i} phi_i(t) dt,
    phi_i(t) = E[e^{-tY}]    = e_{m-1}(x_{-i}) / C(n-1, m-1),   x_j = e^{-t d_j},

with e_k the elementary symmetric polynomial. We never form e_k itself (it overflows at
n = 1000), only normalised means M_k = e_k / C(size, k), the mean of prod x over uniform
k-subsets. Adding one client to a set of size s-1 gives
M_k <- ((s-k)/s) M_k + (k/s) x M_{k-1}, a convex combination. For the leave-one-out means, the
other clients are split into a prefix (clients < i) and a suffix (clients > i): a uniform
k-subset of the others takes a hypergeometric number a of its members from the prefix, so
phi_i = sum_a Hyp(a) M_a(prefix) M_{k-a}(suffix). Every operation adds or multiplies
non-negative numbers: nothing cancels, and the relative rounding error grows like n * eps.

Quadrature: substitute t = e^s. For a fixed total lambda = d_i + Y, the two integrands become
(d_i/lambda) g_1(s + log lambda) and (d_i/lambda)^2 g_2(s + log lambda), where
g_1(s) = exp(s - e^s) and g_2(s) = exp(2s - e^s) both integrate to 1 over the real line.
phi_i is a positive mixture over lambda, so the relative error of any rule is at most its
worst relative error on a shifted g_k. Both g_k are analytic in the strip |Im s| < pi/2. The
trapezoidal rule with step h therefore has error of order |Gamma(k - 2 pi i / h)|
~ exp(-pi^2 / h) (Poisson summation). With h = 1/4 the measured worst case over all shifts is
below 5e-15. The grid is shared by every client: it runs from s where lambda_max e^s = 1e-16
(left tail, relative error <= 1e-16) to where lambda_min e^s = 42 (right tail
(1 + u) e^{-u} < 3e-17). Here lambda_min and lambda_max are the sums of the m smallest and the
m largest sizes. Cost: O(n m) per node, with 4 (log(lambda_max/lambda_min) + 40.6) nodes.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom

from aoi_fl.core.validation import (
    require_choice,
    require_int,
    require_n_m,
    require_real,
    require_sizes,
)


@dataclass(frozen=True)
class Quadrature:
    """The trapezoid rule on s = log t of the module docstring: its ``step``, the relative mass
    ``left_tail`` = lambda_max t_min lost below the grid, and ``right_u`` = lambda_min t_max,
    which loses (1 + u) e^{-u} above it."""

    step: float
    left_tail: float
    right_u: float


#: to float64 precision (worst discretisation error measured < 5e-15): the default
EXACT = Quadrature(step=0.25, left_tail=1e-16, right_u=42.0)
#: half the nodes, for a display (the live explorer): Sigma within a relative 5e-8 of EXACT's
#: (measured over Zipf(1.05-3) and lognormal(0, 3) sizes, n = 50-1000, m = 2 to n - 1;
#: tests/aoi/test_sigma.py asserts 1e-6)
DISPLAY = Quadrature(step=1 / 3, left_tail=1e-10, right_u=27.0)
_MAX_SIZE_RATIO = 1e100
_TABLE_BYTES = 1 << 26  # memory for the suffix table of one chunk of nodes
_ENUMERATION_LIMIT = 2_000_000
_ENUMERATION_CHUNK = 1 << 15
_EMPTY_MODES = ("forced", "paper", "skip")


def _require_quadrature(quadrature: object) -> Quadrature:
    if not isinstance(quadrature, Quadrature):
        raise TypeError(
            "quadrature must be a Quadrature: sigma.EXACT (the default), sigma.DISPLAY or your "
            f"own Quadrature(step, left_tail, right_u); got {quadrature!r} "
            f"({type(quadrature).__name__})"
        )
    return quadrature


def _log_grid(sizes: np.ndarray, m: int, rule: Quadrature = EXACT) -> tuple[np.ndarray, np.ndarray]:
    """Nodes t and trapezoid weights h t (dt = t ds) of the rule on s = log t described above."""
    ordered = np.sort(sizes)
    lam_min, lam_max = ordered[:m].sum(), ordered[-m:].sum()
    s_lo, s_hi = np.log(rule.left_tail / lam_max), np.log(rule.right_u / lam_min)
    t = np.exp(s_lo + rule.step * np.arange(int(np.ceil((s_hi - s_lo) / rule.step)) + 1))
    return t, rule.step * t


def _add_client(means: np.ndarray, x: np.ndarray, size: int) -> np.ndarray:
    """Subset means M_0..M_k of a set of ``size`` - 1 clients, after adding one with values x."""
    orders = np.arange(means.shape[0])[:, None]
    # Orders above the set size have zero weight, so their slots stay exactly 0.
    out = (np.maximum(size - orders, 0) / size) * means
    out[1:] += (orders[1:] / size) * x * means[:-1]
    return out


def _prefix_split(n: int, k: int) -> np.ndarray:
    """hyper[i, a]: probability that a uniform k-subset of the n - 1 clients other than i has
    exactly a members among the i clients before i (hypergeometric).

    Built from the ratio hyper[i, a+1] / hyper[i, a] = (i-a)(k-a) / ((a+1)(n-i-k+a)) in log
    space and normalised per row: relative error ~ k * eps, no overflow for any n.
    """
    i = np.arange(n, dtype=float)[:, None]
    a = np.arange(k + 1, dtype=float)[None, :]
    possible = (a >= k - (n - 1 - i)) & (a <= i)
    step = possible[:, :-1] & possible[:, 1:]
    num = ((i - a) * (k - a))[:, :-1]
    den = ((a + 1) * (n - i - k + a))[:, :-1]
    ratio = np.divide(num, den, out=np.ones_like(num), where=step)
    log_p = np.concatenate([np.zeros((n, 1)), np.cumsum(np.log(ratio), axis=1)], axis=1)
    log_p = np.where(possible, log_p, -np.inf)
    p = np.exp(log_p - log_p.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def _leave_one_out_laplace(x: np.ndarray, hyper: np.ndarray) -> np.ndarray:
    """phi[i, t] = mean of prod_{j in U} x[j, t] over uniform k-subsets U of clients != i,
    where k + 1 = hyper.shape[1]."""
    n, nodes = x.shape
    k = hyper.shape[1] - 1
    empty = np.zeros((k + 1, nodes))
    empty[0] = 1.0
    suffix = np.empty((n + 1, k + 1, nodes))  # suffix[j]: means over clients j..n-1
    suffix[n] = empty
    for j in range(n - 1, 0, -1):
        suffix[j] = _add_client(suffix[j + 1], x[j], n - j)
    phi = np.empty((n, nodes))
    prefix = empty
    for i in range(n):
        phi[i] = hyper[i] @ (prefix * suffix[i + 1][::-1])
        prefix = _add_client(prefix, x[i], i + 1)
    return phi


def random_weight_moments(
    sizes, m: int, quadrature: Quadrature = EXACT
) -> tuple[np.ndarray, np.ndarray]:
    """Exact E[w_i] and E[w_i^2] of Policy 1 (eq. 28): m of n uniformly, w_i = d_i / sum_S d_j.

    Laplace-transform method of the module docstring; relative accuracy about 1e-13 with the
    default ``quadrature`` (:data:`DISPLAY` takes half the time for about 1e-8). Works
    for n in the thousands and for sizes spanning up to 100 orders of magnitude. m = 1 (every
    selected weight is 1) and m = n (deterministic weights d_i / sum d) are closed forms.
    """
    quadrature = _require_quadrature(quadrature)
    d = require_sizes("sizes", sizes)
    n, m = require_n_m(d.size, m)
    if m == 1:
        first = np.full(n, 1.0 / n)
        return first, first.copy()
    if m == n:
        q = d / d.sum()
        return q, np.square(q)
    if d.max() > _MAX_SIZE_RATIO * d.min():
        # beyond this, E[w_i^2] of the smallest clients nears the float64 underflow
        raise ValueError(
            f"sizes span max/min = {d.max() / d.min():.3g}, more than the "
            f"{_MAX_SIZE_RATIO:.0e} that the quadrature of random_weight_moments supports"
        )
    d = d / d.max()  # the weights are scale-free; this keeps sums of sizes from overflowing
    t, weights = _log_grid(d, m, quadrature)
    hyper = _prefix_split(n, m - 1)
    chunk = max(1, _TABLE_BYTES // (8 * (n + 1) * m))
    first = np.zeros(n)
    second = np.zeros(n)
    for lo in range(0, t.size, chunk):
        tc, wc = t[lo : lo + chunk], weights[lo : lo + chunk]
        x = np.exp(-np.outer(d, tc))
        integrand = wc * x * _leave_one_out_laplace(x, hyper)
        first += integrand.sum(axis=1)
        second += integrand @ tc
    selected = m / n
    return selected * d * first, selected * np.square(d) * second


def _sigma_from_moments(first: np.ndarray, second: np.ndarray) -> float:
    """Eq. 14: Sigma = sum_i (E[w_i^2] - E[w_i]^2)."""
    return float(np.sum(second - np.square(first)))


def sigma_random(sizes, m: int, quadrature: Quadrature = EXACT) -> float:
    """Theorem 3 (eqs 29-31): Sigma of Policy 1, from :func:`random_weight_moments`."""
    return _sigma_from_moments(*random_weight_moments(sizes, m, quadrature))


def _enumerated_moments(sizes, m: int) -> tuple[np.ndarray, np.ndarray]:
    """E[w_i] and E[w_i^2] of Policy 1 by visiting all C(n, m) subsets (eqs 30-31)."""
    d = require_sizes("sizes", sizes)
    n, m = require_n_m(d.size, m)
    count = math.comb(n, m)
    if count > _ENUMERATION_LIMIT:
        raise ValueError(
            f"enumeration over C(n, m) = C({n}, {m}) = {count} subsets exceeds the limit of "
            f"{_ENUMERATION_LIMIT}; reduce n (len(sizes)) or m, or use sigma_random"
        )
    members = itertools.chain.from_iterable(itertools.combinations(range(n), m))
    first, second = np.zeros(n), np.zeros(n)
    remaining = count
    while remaining:
        rows = min(remaining, _ENUMERATION_CHUNK)
        subsets = np.fromiter(members, dtype=np.intp, count=rows * m).reshape(rows, m)
        w = d[subsets] / d[subsets].sum(axis=1, keepdims=True)
        first += np.bincount(subsets.ravel(), weights=w.ravel(), minlength=n)
        second += np.bincount(subsets.ravel(), weights=np.square(w).ravel(), minlength=n)
        remaining -= rows
    return first / count, second / count


def sigma_random_enumeration(sizes, m: int) -> float:
    """Eqs 30-31 literally: average over all C(n, m) subsets (refused above 2e6 subsets).

    Eq. 30 is sum_i E[w_i^2] and eq. 31 is sum_i E[w_i]^2; both come from one pass.
    """
    return _sigma_from_moments(*_enumerated_moments(sizes, m))


def sigma_probabilistic(sizes, m: int) -> float:
    """Theorem 4: Sigma = sum_i q_i (1 - q_i) / m, q_i = d_i / sum_j d_j (Policy 2).

    Always below 1/m, since sum_i q_i (1 - q_i) = 1 - sum_i q_i^2 < 1.
    """
    d = require_sizes("sizes", sizes)
    _, m = require_n_m(d.size, m)
    q = d / d.sum()
    return float(np.sum(q * (1.0 - q)) / m)


def second_moment_sum_probabilistic(sizes, m: int) -> float:
    """sum_i E[w_i^2] of Policy 2, the gamma_i of eq. 13 summed: with q_i = d_i / sum_j d_j,

        sum_i E[w_i^2] = sum_i (Var[w_i] + E[w_i]^2) = sum_i (q_i (1 - q_i) / m + q_i^2),

    Theorem 4's Var[w_i] = q_i (1 - q_i)/m plus E[w_i]^2 = q_i^2 (w_i = l_i/m, l_i ~
    Binomial(m, q_i)). A reading of the paper's "total variance" other than eq. 14's Sigma.
    """
    q = sizes / sizes.sum()
    return float((q * (1 - q) / m + q**2).sum())


def sigma_markov(n: int, p_avg: float, empty: str = "forced") -> float:
    """Theorem 5 (eq. 33): Sigma of the Markov policies, w_i = 1/|S|, |S| ~ Binomial(n, p_avg).

    With P(s) the Binomial(n, p_avg) pmf and E_+ = sum_{s>=1} P(s)/s, the round with |S| = 0 is
    treated according to ``empty``:

    - ``"forced"``: one uniformly random client is forced in with weight 1 (the sampler, and
      the proof of Theorem 5). The weights always sum to 1, so E[w_i] = 1/n, and
      sum_i w_i^2 is 1/s, or 1 when s = 0: Sigma = E_+ + P(0) - 1/n.
    - ``"paper"``: eq. 33 as printed, E_+ - 1/n (the s = 0 term dropped). This is "forced"
      minus P(0). It is not a variance in general (negative when n = 1 and p_avg < 1).
    - ``"skip"``: a round with nobody selected has all weights 0, so
      E[w_i] = (1 - P(0))/n and Sigma = E_+ - (1 - P(0))^2 / n.

    P(s) comes from ``scipy.stats.binom.pmf`` (accurate for n = 1e6). The sum is O(n).
    """
    n = require_int("n", n, minimum=1)
    p_avg = require_real("p_avg", p_avg, minimum=0.0, strict_minimum=True, maximum=1.0)
    empty = require_choice("empty", empty, _EMPTY_MODES)
    s = np.arange(1, n + 1)
    inverse_mean = float(np.sum(binom.pmf(s, n, p_avg) / s))
    p_none = float(binom.pmf(0, n, p_avg))
    if empty == "forced":
        return inverse_mean + p_none - 1.0 / n
    if empty == "paper":
        return inverse_mean - 1.0 / n
    return inverse_mean - (1.0 - p_none) ** 2 / n


def sigma_random_equal(n: int, m: int) -> float:
    """Remark 4: with equal sizes, Policy 1 has Sigma = 1/m - 1/n."""
    n, m = require_n_m(n, m)
    return 1.0 / m - 1.0 / n


def sigma_probabilistic_equal(n: int, m: int) -> float:
    """Remark 5: with equal sizes, Policy 2 has Sigma = (1 - 1/n)/m."""
    n, m = require_n_m(n, m)
    return (1.0 - 1.0 / n) / m
