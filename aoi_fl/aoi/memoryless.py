"""Closed forms for memoryless selection: Policies 1 and 2 of the AoI paper (Sec. III-B).

Under Policy 1 (m of n uniformly each round) and Policy 2 (m draws with replacement, P(i) = q_i)
the rounds are independent, so client i is selected in each round independently with a fixed
probability r_i: r_i = m/n for Policy 1 and r_i = 1 - (1 - q_i)^m for Policy 2. Its
inter-selection interval is then geometric with success probability r_i (Sec. III-C), and its
count in a window of T rounds is Binomial(T, r_i). These give the reference curves of Figs 3-4.
"""

from __future__ import annotations

import numpy as np

from aoi_fl.core.validation import require_int, require_n_m, require_sizes


def _require_rates(rates: object) -> np.ndarray:
    r = np.asarray(rates, dtype=float)
    if r.ndim != 1 or r.size == 0 or (~np.isfinite(r)).any() or (r <= 0).any() or (r > 1).any():
        raise ValueError(
            f"rates must be a non-empty 1-d array with entries in (0, 1], got {rates!r}"
        )
    return r


def random_rates(n: int, m: int) -> np.ndarray:
    """r_i = m/n for every client (Policy 1)."""
    n, m = require_n_m(n, m)
    return np.full(n, m / n)


def probabilistic_rates(sizes: object, m: int) -> np.ndarray:
    """r_i = 1 - (1 - q_i)^m with q_i = d_i / sum_j d_j (Policy 2: hit at least once in m draws)."""
    d = require_sizes("sizes", sizes)
    m = require_int("m", m, minimum=1)
    q = d / d.sum()
    return -np.expm1(m * np.log1p(-np.minimum(q, 1.0 - 1e-300)))


def pooled_interval_pmf(rates: object, x_max: int) -> np.ndarray:
    """P(X = x), x = 1..x_max, of an interval drawn from the pool of all clients' intervals.

    Over a long run client i contributes intervals in proportion to r_i, each geometric(r_i):
    P(X = x) = sum_i r_i * r_i (1 - r_i)^(x-1) / sum_i r_i. This is the law the pooled histogram
    of Fig. 3 estimates.
    """
    r = _require_rates(rates)
    x_max = require_int("x_max", x_max, minimum=1)
    x = np.arange(1, x_max + 1)[:, None]
    per_client = r * (1.0 - r) ** (x - 1)
    return per_client @ r / r.sum()


def pooled_interval_moments(rates: object) -> tuple[float, float]:
    """E[X] and Var[X] of the pooled law of :func:`pooled_interval_pmf`, in closed form.

    Client i contributes intervals in proportion to r_i, each geometric(r_i) with E[X | i] = 1/r_i
    and E[X^2 | i] = (2 - r_i)/r_i^2 (Sec. III-C), so E[X] = n / sum_i r_i (n/m for Policy 1:
    the renewal identity E[X] = 1/pi_0) and E[X^2] = sum_i (2 - r_i)/r_i / sum_i r_i. No
    truncation of the geometric tails.
    """
    r = _require_rates(rates)
    mean = r.size / r.sum()
    second = float(np.sum((2.0 - r) / r) / r.sum())
    return float(mean), max(second - mean * mean, 0.0)


def window_std_ratio(rates: object, window: int) -> float:
    """sqrt(Var(Y))/T of Fig. 4 for independent per-round selection with rates r_i.

    Y, the count of a uniformly chosen client in a window of T rounds, has
    Var(Y) = mean_i T r_i (1 - r_i) + T^2 var_i(r_i) (law of total variance over clients).
    """
    r = _require_rates(rates)
    t = require_int("window", window, minimum=1)
    var = np.mean(t * r * (1.0 - r)) + t**2 * np.var(r)
    return float(np.sqrt(var) / t)
