"""Paired comparisons over seeds: the sample standard deviation, a confidence interval of the
mean paired difference, the minimum detectable effect, and a verdict on a claimed speed-up.

The papers' training claims compare two methods on the same seeds (same partition, model
initialisation and mini-batches; only the compared thing differs), so the unit of evidence is
one difference per seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats


def sample_sd(values: Sequence[float] | np.ndarray) -> float:
    """Sample standard deviation over seeds (divisor n - 1); NaN for fewer than two values."""
    values = np.asarray(values, dtype=float)
    return float(values.std(ddof=1)) if values.size > 1 else float("nan")


@dataclass(frozen=True)
class PairedInterval:
    """Confidence interval [low, high] of the mean paired difference at confidence ``level``.

    ``n`` differences with mean ``mean`` and sample standard deviation ``sd`` (divisor n - 1);
    ``method`` is ``"t"`` or ``"bootstrap"``.
    """

    n: int
    mean: float
    sd: float
    low: float
    high: float
    method: str
    level: float


def paired_interval(
    differences: Sequence[float] | np.ndarray | pd.Series,
    level: float = 0.95,
    method: str = "t",
    seed: int = 0,
    resamples: int = 10_000,
) -> PairedInterval:
    """Confidence interval of the mean of paired differences (one per seed).

    ``method="t"``: mean ± t_{(1+level)/2, n-1} · sd / sqrt(n), exact for normal differences.
    ``method="bootstrap"``: percentile bootstrap of the mean from ``resamples`` resamples drawn
    with ``numpy.random.default_rng(seed)``, so the interval is reproducible and no global
    random state is touched. It assumes no normality but is too narrow for a handful of seeds
    (it ignores the n - 1 in the t quantile); it is a check on the t interval, not a substitute.

    NaN differences (a run that never reached the target) are refused: dropping them would keep
    only the seeds where the slower policy got there, and the horizon must be extended instead.
    """
    values = np.asarray(differences, dtype=float)
    if values.ndim != 1:
        raise ValueError(f"differences must be one-dimensional, got shape {values.shape}")
    if np.isnan(values).any():
        raise ValueError(
            f"differences: {int(np.isnan(values).sum())} of {values.size} are NaN (a run did not "
            "reach the target, so it cannot be paired); extend the number of rounds"
        )
    if not np.isfinite(values).all():
        raise ValueError("differences must be finite")
    if values.size < 2:
        raise ValueError(f"differences: need at least 2 values, got {values.size}")
    _check_probability("level", level)
    if method not in ("t", "bootstrap"):
        raise ValueError(f"unknown method {method!r}; valid: t, bootstrap")
    n, mean, sd = values.size, float(values.mean()), sample_sd(values)
    if method == "t":
        half = float(stats.t.ppf((1 + level) / 2, n - 1)) * sd / np.sqrt(n)
        low, high = mean - half, mean + half
    else:
        if resamples < 1:
            raise ValueError(f"resamples must be at least 1, got {resamples}")
        rng = np.random.default_rng(seed)
        means = values[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
        low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return PairedInterval(n, mean, sd, float(low), float(high), method, level)


def paired_p_value(differences: Sequence[float] | np.ndarray) -> float:
    """Two-sided p-value of the paired t-test that the mean difference is 0 (the test whose
    95% interval :func:`paired_interval` gives): 0 when every difference is the same non-zero
    value, 1 when all are 0."""
    values = np.asarray(differences, dtype=float)
    if values.ndim != 1 or values.size < 2 or not np.isfinite(values).all():
        raise ValueError(
            f"differences must be at least 2 finite values in one dimension, got {values!r}"
        )
    sd = sample_sd(values)
    if sd == 0:
        return 1.0 if values[0] == 0 else 0.0
    t = values.mean() / (sd / np.sqrt(values.size))
    return float(2 * stats.t.sf(abs(t), values.size - 1))


def holm(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values of a family of m tests (Holm 1979): sorted ascending,
    the j-th (from 0) is multiplied by m - j, made non-decreasing, and capped at 1. A test is
    rejected at family-wise error a when its adjusted p-value is at most a; the adjustment
    controls the chance of any false rejection in the family, whatever the tests' dependence."""
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1 or not ((p >= 0) & (p <= 1)).all():
        raise ValueError(f"p_values must be probabilities in one dimension, got {p!r}")
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate((p.size - np.arange(p.size)) * p[order])
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted


def _check_probability(name: str, value: float) -> None:
    if not 0 < value < 1:  # also false for NaN
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value}")


def minimum_detectable_effect(sd: float, n: int, level: float = 0.95, power: float = 0.8) -> float:
    """Smallest true mean difference that ``n`` paired seeds detect with probability ``power``.

    For a two-sided paired t-test at confidence ``level`` (significance a = 1 - level) on
    differences with standard deviation ``sd``::

        MDE = (t_{1-a/2, n-1} + t_{power, n-1}) · sd / sqrt(n)

    the usual normal-approximation formula with Student-t quantiles in place of normal ones
    (slightly optimistic against the exact noncentral-t power for very small n). It shrinks like
    1 / sqrt(n): halving the MDE takes about four times as many seeds. A claimed effect below it
    cannot be told apart from no effect by this many seeds.
    """
    if not (np.isfinite(sd) and sd >= 0):
        raise ValueError(f"sd must be finite and non-negative, got {sd}")
    if n < 2:
        raise ValueError(f"n must be at least 2, got {n}")
    _check_probability("level", level)
    _check_probability("power", power)
    quantiles = stats.t.ppf(1 - (1 - level) / 2, n - 1) + stats.t.ppf(power, n - 1)
    return float(quantiles * sd / np.sqrt(n))


def seeds_needed(
    sd: float, effect: float, level: float = 0.95, power: float = 0.8, most: int = 1_000_000
) -> int:
    """The fewest paired seeds n >= 2 whose :func:`minimum_detectable_effect` is at most
    ``effect``: MDE(sd, n) <= effect < MDE(sd, n - 1) (it falls with n). Raises if more than
    ``most`` would be needed."""
    if not (np.isfinite(effect) and effect > 0):
        raise ValueError(f"effect must be a positive number, got {effect}")
    if minimum_detectable_effect(sd, 2, level, power) <= effect:
        return 2
    if minimum_detectable_effect(sd, most, level, power) > effect:
        raise ValueError(
            f"effect {effect} needs more than most={most} seeds at sd {sd}: ask for a larger "
            "effect or a larger most"
        )
    low, high = 2, most  # MDE(low) > effect >= MDE(high)
    while high - low > 1:
        mid = (low + high) // 2
        if minimum_detectable_effect(sd, mid, level, power) <= effect:
            high = mid
        else:
            low = mid
    return high


class Verdict(NamedTuple):
    """A verdict label and a one-line reason quoting the interval and the claim."""

    label: str
    reason: str


def verdict(interval: PairedInterval, claimed: float, relative_to: float | None = None) -> Verdict:
    """Whether an interval of R_fast - R_slow supports the claim "fast is faster by ``claimed``".

    ``claimed`` > 0 is the claimed speed-up R_slow - R_fast in rounds (the paper's MNIST IID
    45 - 39 = 6). With ``relative_to``, ``claimed`` is instead a relative speed-up (the paper's
    (45 - 39) / 45) and the claim in rounds is ``claimed * relative_to``; pass our mean R_slow
    so that a claim made at the paper's scale is tested at ours.

    The interval is tested against two values, no speed-up (0) and the claimed one (-claim):

    - "held": every value is a speed-up (high < 0) and the claimed one is not excluded;
    - "held (smaller effect than claimed)": every value is a speed-up, but a smaller one than
      claimed (-claim < low and high < 0);
    - "not held": every value is a smaller speed-up than claimed, and the interval reaches
      no speed-up or a slow-down (-claim < low, 0 <= high);
    - "inconclusive at this power": the interval holds both 0 and -claim; more seeds are needed
      (see :func:`minimum_detectable_effect`).

    An interval entirely below -claim (a larger speed-up than claimed) is "held".
    """
    if not (np.isfinite(claimed) and claimed > 0):
        raise ValueError(
            f"claimed must be a positive speed-up, got {claimed}; swap fast and slow if the "
            "claim is that the first policy is slower"
        )
    if relative_to is not None and not (np.isfinite(relative_to) and relative_to > 0):
        raise ValueError(f"relative_to must be a positive number of rounds, got {relative_to}")
    claim = claimed * relative_to if relative_to is not None else claimed
    speedup, smaller = interval.high < 0, interval.low > -claim
    if speedup and smaller:
        label = "held (smaller effect than claimed)"
    elif speedup:
        label = "held"
    elif smaller:
        label = "not held"
    else:
        label = "inconclusive at this power"
    reason = (
        f"{interval.level:.0%} {interval.method} interval of R_fast - R_slow "
        f"[{interval.low:.3g}, {interval.high:.3g}] (n = {interval.n}) "
        f"{_position(interval, 0.0, 'no speed-up')}, "
        f"{_position(interval, -claim, 'the claimed speed-up')}"
    )
    return Verdict(label, reason)


def _position(interval: PairedInterval, value: float, name: str) -> str:
    if interval.high < value:
        return f"lies below {value:.3g} ({name})"
    if interval.low > value:
        return f"lies above {value:.3g} ({name})"
    return f"contains {value:.3g} ({name})"
