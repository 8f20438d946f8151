"""The age chain of the AoI paper (Sec. III-C) when clients are not always available.

An extension beyond the paper, which assumes every client can answer in every round. Here each
client i is available in a round independently of everything else with a constant probability
r_i in (0, 1] (Bernoulli availability), and the sampler's rule (:class:`~aoi_fl.aoi.samplers.
MarkovSampler` under a mask) is: an unavailable client cannot answer, so it is not selected and
its age grows; an available client of age a selects itself with probability p_a.

**The chain under availability is the paper's chain with p'_a = r p_a.** In a round a client of
age a is selected exactly when it is available (probability r, independent of its age and of
its own coin) and its coin with success p_a comes up (probability p_a), so with probability
r p_a; otherwise, available or not, it moves to age min(a + 1, m'). These are the transitions of
Fig. 1 with p_a replaced by p'_a = r p_a, so eqs 5-8 (stationary law), the interval law
P(X = x) = p'_{x-1} prod_{j < x-1} (1 - p'_j), its mean and its variance all hold with p' in place
of p (:mod:`~aoi_fl.aoi.markov`), and the steady-state selection rate is pi'_0 = 1 / E[X'].
Like the paper's analysis (eqs 5-8 and Theorem 1), this ignores the sampler's forced selection
of one available client in a round in which nobody selects itself. In steady state the n
clients select themselves independently, each with probability m/n, so such rounds have
probability about (1 - m/n)^n: 9e-8 at n = 100, m = 15 (negligible), but 0.1 at n = 10, m = 2.

**Calibrating Theorem 1 under availability.** A client that keeps Theorem 1's p (eq. 9, ratio
n/m) but is available with rate r < 1 is selected less often: its effective chain r p has the
mean interval E[X] = n/m - 1 + 1/r (below) and so the rate 1 / (n/m - 1 + 1/r) < m/n, and the
round's expected |S| falls below m. :func:`calibrated_p` instead chooses p within Theorem 1's
optimal family at a real ratio rho >= 1 (:func:`theorem1_p`: the paper's eq. 9 with n/m
replaced by rho) such that the effective chain r p has mean interval n/m, i.e. the client's
long-run selection rate is m/n again and E|S| = m when every client calibrates. Solving
E[X'] = n/m in that family (closed form, :func:`calibrated_ratio`):

* Theorem 1's second case, i = floor(rho) <= m' (p_{i-1} = i + 1 - rho, p_a = 1 for a >= i):
  X' = i with probability s = r (i + 1 - rho), else i + G with G geometric on {1, 2, ...} of
  success r. So E[X'] = i + (1 - s)/r = rho - 1 + 1/r, whatever i is, and
  rho = n/m + 1 - 1/r. Its variance is Var[X'] = (1 - s)(1 - r + s) / r^2 (which is c(1 - c),
  Theorem 1's minimum, at r = 1).
* Theorem 1's first case, floor(rho) >= m' + 1 (p = (0, ..., 0, 1/(rho - m'))): X' = m' + G
  with G geometric of success r / (rho - m'), so E[X'] = m' + (rho - m')/r and
  rho = m' + r (n/m - m').

At r = 1 both give rho = n/m, and :func:`calibrated_p` returns exactly Theorem 1's p. rho
decreases with r and reaches 1 (p = all ones: select whenever available) at r = m/n. When
r < m/n no chain reaches the rate m/n: even selecting whenever available gives only r. Then
:func:`calibrated_p` returns all ones, whose rate is r < m/n (no warning: that is the most the
client can do; :func:`selection_rate_under` tells the caller the rate reached).

What calibration costs, at the paper's n = 100, m = 15, m' = 10 (n/m = 6.67; values from the
functions below, tested):

======  =======================  ============================  ==========================
r       Theorem 1's p, E[X']      calibrated (E[X'] = 6.67)      memoryless with rate m/n
        / Var[X']                 rho / Var[X']                  Var[X] = n(n - m)/m^2
======  =======================  ============================  ==========================
1.0     6.67 / 0.222              6.67 / 0.222                   37.8
0.8     6.92 / 0.535              6.42 / 0.556                   37.8
0.5     7.67 / 2.22               5.67 / 2.22                    37.8
0.2     10.67 / 20.2              2.67 / 20.2                    37.8
======  =======================  ============================  ==========================

Calibration restores the mean (and so the rate m/n) at almost no cost in variance: in Theorem
1's second case Var[X'] depends on r and on the fractional part of rho only (through
s = r (floor(rho) + 1 - rho)), and calibration shifts rho by 1 - 1/r, an integer at r = 1/2 and
1/5 (equal variances there). Over s in [0, r], (1 - s)(1 - r + s)/r^2 is at least (1 - r)/r^2:
the geometric wait for an available round, which no p of the family removes (p'_a <= r). That is
far below the memoryless policies' n(n - m)/m^2 while r is well above m/n, and equal to it at
r = m/n, where the calibrated chain selects whenever available (memoryless, rate m/n).
"""

from __future__ import annotations

import math

import numpy as np

from aoi_fl.aoi import markov
from aoi_fl.core.validation import check_chain, require_int, require_n_m, require_real


def require_rate(name: str, r: object) -> float:
    """An availability rate: a real number in (0, 1]."""
    return require_real(name, r, minimum=0.0, strict_minimum=True, maximum=1.0)


def effective_p(p: object, r: float) -> np.ndarray:
    """p'_a = r p_a: the paper's chain (Fig. 1) of a client available with probability r.

    Under availability every age is reachable (a client with p_j = 1 may be away at age j), so
    p'_{m'} must be > 0: a p with p_{m'} = 0 is refused (:func:`check_chain`).
    """
    p = check_chain(p)
    r = require_rate("r", r)
    if p[-1] == 0.0 and r < 1.0:
        raise ValueError(
            f"p[m'] = p[{p.size - 1}] = 0: under availability r = {r} < 1 a client can reach "
            "age m' and never be selected again; p[m'] must be > 0"
        )
    return check_chain(r * p)


def stationary_distribution_under(p: object, r: float) -> np.ndarray:
    """Stationary law of the age under availability r: eqs 5-8 with p' = r p."""
    return markov.stationary_distribution(effective_p(p, r))


def interval_mean_under(p: object, r: float) -> float:
    """E[X] under availability r (the interval law of Sec. III-C with p' = r p)."""
    return markov.interval_mean(effective_p(p, r))


def interval_variance_under(p: object, r: float) -> float:
    """Var[X] under availability r (the objective of eq. 2 with p' = r p)."""
    return markov.interval_variance(effective_p(p, r))


def selection_rate_under(p: object, r: float) -> float:
    """The long-run selection rate pi'_0 = sum_a pi'_a r p_a = 1 / E[X] under availability r.

    Without the forced selection of a round in which nobody selects itself (module docstring).
    """
    return markov.selection_rate(effective_p(p, r))


def theorem1_p(rho: float, m_prime: int) -> np.ndarray:
    """Theorem 1's p (eq. 9) with the ratio n/m replaced by a real rho >= 1.

    If m' <= floor(rho) - 1: p = (0, ..., 0, 1/(rho - m')); otherwise, with i = floor(rho),
    p_0..p_{i-2} = 0, p_{i-1} = i + 1 - rho, p_i..p_{m'} = 1. Its interval has mean rho in both
    cases. In the second case X takes the values floor(rho) and floor(rho) + 1 only, the least
    variance, c(1 - c) with c = rho - floor(rho), that any integer X with mean rho can have.
    p is continuous in rho and every p_a is non-increasing in rho.
    """
    rho = require_real("rho", rho, minimum=1.0)
    m_prime = require_int("m_prime", m_prime, minimum=1)
    i = math.floor(rho)
    p = np.zeros(m_prime + 1)
    if m_prime <= i - 1:
        p[m_prime] = 1.0 / (rho - m_prime)
    else:
        p[i - 1] = i + 1 - rho
        p[i:] = 1.0
    return p


def calibrated_ratio(n: int, m: int, m_prime: int, r: float) -> float:
    """The rho of :func:`theorem1_p` whose chain, run at availability r, has E[X] = n/m.

    rho = n/m + 1 - 1/r while that is below m' + 1 (Theorem 1's second case), else
    rho = m' + r (n/m - m') (module docstring); rho = n/m at r = 1 and 1 at r = m/n. For
    r < m/n no rho reaches n/m: the result is 1 (select whenever available).
    """
    n, m = require_n_m(n, m)
    m_prime = require_int("m_prime", m_prime, minimum=1)
    r = require_rate("r", r)
    ratio = n / m
    if r == 1.0:
        return ratio
    rho = ratio + 1.0 - 1.0 / r
    if rho >= m_prime + 1:
        rho = m_prime + r * (ratio - m_prime)
    return max(rho, 1.0)


def calibrated_p(n: int, m: int, m_prime: int, r: float) -> np.ndarray:
    """The p a client available with rate r runs so that its selection rate stays m/n.

    :func:`theorem1_p` at :func:`calibrated_ratio`: at r = 1 exactly Theorem 1's p
    (:func:`markov.optimal_p`); for r in [m/n, 1] the effective chain r p has E[X] = n/m; for
    r < m/n all ones, whose rate r stays below m/n (no chain does better).
    """
    rho = calibrated_ratio(n, m, m_prime, r)
    if rho == n / m:  # r = 1: Theorem 1's p, computed in exact arithmetic
        return markov.optimal_p(n, m, m_prime)
    return theorem1_p(rho, m_prime)


def calibrated_variance(n: int, m: int, m_prime: int, r: float) -> float:
    """Var[X] of the calibrated chain under availability r (module docstring's table)."""
    return interval_variance_under(calibrated_p(n, m, m_prime, r), r)
