"""Tables of the agnostic-FedAvg experiments (Figs 1-2): objective curves, converged losses,
the gap between the rules over the skew, and the trend verdict."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from aoi_fl.agnostic import algorithms as agnostic
from aoi_fl.agnostic.experiments import (
    AGGREGATIONS,
    DIVERGED_LOSS,
    FIG2_RULES,
    TASKS,
    describe,
    process_p,
)
from aoi_fl.core.validation import require_choice, require_int, require_real


def objective_curves(result: Any, p: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(evaluation rounds, sum_i p_i f_i, (1/N) sum_i f_i) of a run's global models."""
    losses = np.asarray(result.history["client_losses"], dtype=float)
    return (
        np.asarray(result.history["eval_round"]),
        agnostic.objective(losses, p),
        agnostic.objective(losses),
    )


def converged_value(curve: np.ndarray, last: int = 5) -> float:
    """The converged value of a loss curve: the mean of its last ``last`` evaluations."""
    return float(np.mean(curve[-last:]))


def trend_over_seeds(
    skew: Any,
    gap: Any,
    seeds: Any,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    rng_seed: int = 0,
) -> dict[str, float]:
    """Does ``gap`` grow with ``skew``? Statistics over all points, with intervals over seeds.

    ``rho``: Spearman's rank correlation of all (skew, gap) points; ``slope``: the least-squares
    slope of gap on skew. Their ``level`` intervals (``rho_low`` .. ``rho_high``, ``slope_low``
    .. ``slope_high``) are percentile bootstrap intervals over seeds: ``n_boot`` times, as many
    seeds as there are are drawn with replacement and all points of each drawn seed (every
    temperature) enter the statistic, so the interval reflects how much the answer depends on
    the seeds (the data, model initialisation, participation trace and batches they drive).
    A resample whose points all share one skew has no rank correlation and is left out.
    """
    from scipy import stats as sps

    x, y = np.asarray(skew, dtype=float), np.asarray(gap, dtype=float)
    s = np.asarray(seeds)
    if not (x.shape == y.shape == s.shape) or x.ndim != 1:
        raise ValueError(
            f"skew, gap and seeds must be 1-d of one length, got shapes {x.shape}, {y.shape}, "
            f"{s.shape}"
        )
    n_boot = require_int("n_boot", n_boot, minimum=1)
    level = require_real("level", level, minimum=0.0, maximum=1.0, strict_minimum=True)
    unique = np.unique(s)
    if unique.size < 2 or np.unique(x).size < 2:
        raise ValueError(
            f"a trend over seeds needs >= 2 seeds and >= 2 distinct skews, got {unique.size} "
            f"seeds and {np.unique(x).size} skews"
        )
    rows = {u: np.flatnonzero(s == u) for u in unique}

    def statistics(idx: np.ndarray) -> tuple[float, float]:
        if np.unique(x[idx]).size < 2:
            return float("nan"), float("nan")
        rho = sps.spearmanr(x[idx], y[idx]).statistic
        return float(rho), float(np.polyfit(x[idx], y[idx], 1)[0])

    rng = np.random.default_rng(rng_seed)
    boot = np.array(
        [
            statistics(np.concatenate([rows[u] for u in rng.choice(unique, unique.size)]))
            for _ in range(n_boot)
        ]
    )
    tail = 100 * (1 - level) / 2
    (rho_low, slope_low), (rho_high, slope_high) = np.nanpercentile(
        boot, [tail, 100 - tail], axis=0
    )
    rho, slope = statistics(np.arange(x.size))
    return {
        "rho": rho,
        "rho_low": float(rho_low),
        "rho_high": float(rho_high),
        "slope": slope,
        "slope_low": float(slope_low),
        "slope_high": float(slope_high),
        "seeds": int(unique.size),
        "points": int(x.size),
    }


def trend_verdict(low: float, high: float) -> str:
    """The verdict on "the gap grows with the skew" from an interval of its trend statistic:
    ``"held"`` when the interval lies above 0, ``"NOT held"`` when below, else
    ``"inconclusive at this budget"``."""
    if low > 0:
        return "held"
    if high < 0:
        return "NOT held"
    return "inconclusive at this budget"


def run_table(
    configs: Any,
    results: Any,
    profile: str,
    data_root: str = "data",
    cache_dir: str | None = None,
    last: int = 5,
) -> pd.DataFrame:
    """One row per run of :func:`config`: its :func:`describe` fields, the skew of its p, the
    converged loss (:func:`converged_value` over the last ``last`` evaluations) on problem (3)
    (``loss_p``) and on the uniform objective (``loss_uniform``), and ``diverged_at``: the first
    evaluation round whose problem-(3) loss is not finite or above :data:`DIVERGED_LOSS`
    (None if none)."""
    rows = []
    for cfg, res in zip(configs, results, strict=True):
        d = describe(cfg)
        p = process_p(cfg, profile, data_root, cache_dir)
        rounds, obj_p, obj_u = objective_curves(res, p)
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(obj_p) | (obj_p > DIVERGED_LOSS)
        rows.append(
            {
                **d,
                "skew": agnostic.l1_skew(p),
                "loss_p": converged_value(obj_p, last),
                "loss_uniform": converged_value(obj_u, last),
                "diverged_at": int(rounds[np.argmax(bad)]) if bad.any() else None,
            }
        )
    return pd.DataFrame(rows)


def gaps(table: pd.DataFrame, rules: Any = FIG2_RULES) -> pd.DataFrame:
    """Converged loss of each weighted rule minus agnostic FedAvg's, run by run.

    Pairs the rows of ``table`` (:func:`run_table`) that share (task, protocol, process, tau,
    seed): one row per pair and rule in ``rules``, with ``gap_p`` and ``gap_uniform`` (weighted
    minus agnostic, on problem (3) and on the uniform objective), the agnostic run's
    ``agnostic_p`` and the ``skew``; ordered by task, then rule.
    """
    keys = ["task", "protocol", "process", "tau", "seed"]
    base = table[table["aggregation"] == "agnostic"].set_index(keys)
    out = []
    for rule in rules:
        rule = require_choice("rule", rule, AGGREGATIONS[1:])
        other = table[table["aggregation"] == rule].set_index(keys)
        both = base.merge(other, left_index=True, right_index=True, suffixes=("_agnostic", ""))
        out.append(
            pd.DataFrame(
                {
                    "rule": rule,
                    "skew": both["skew"],
                    "gap_p": both["loss_p"] - both["loss_p_agnostic"],
                    "gap_uniform": both["loss_uniform"] - both["loss_uniform_agnostic"],
                    "agnostic_p": both["loss_p_agnostic"],
                }
            ).reset_index()
        )
    table = pd.concat(out, ignore_index=True)
    order = {name: i for i, name in enumerate([*TASKS, *AGGREGATIONS])}
    return table.sort_values(  # task by task (in TASKS order), then rule by rule; stable
        ["task", "rule"], key=lambda col: col.map(order), kind="stable", ignore_index=True
    )
