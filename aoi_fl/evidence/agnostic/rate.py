"""Theorem 4's O(1/sqrt(T)) rate read from the runs of :func:`experiments.rate_grid` (the
Fig. 1 notebook): the optimality gap of the averaged iterate at each horizon T (:func:`rate_table`),
its log-log slope per seed (:func:`rate_slopes`), :func:`rate_verdict` and the theorem's
conditions."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from aoi_fl.core.validation import renamed, require_real
from aoi_fl.evidence.agnostic.conditions import CONVEX, convexity
from aoi_fl.evidence.agnostic.experiments import RATE_TASK, TASKS, describe, process_p, rate_step
from aoi_fl.evidence.agnostic.objectives import Optima, objective_curves
from aoi_fl.pipeline import paired
from aoi_fl.pipeline.claims import Condition, capped, diverged, log_log_slope, sign_verdict

#: Theorem 4: E[f((1/T) sum_t theta_hat^{tH})] - f(theta*) = O(T^(-1/2)), an upper bound: the
#: gap falls at least as fast as T^(-1/2); a faster fall (our least squares are strongly convex)
#: is consistent with it, a slower one is not
THEOREM4_RATE = -0.5
#: how far above -1/2 a fitted slope may lie and still count as the rate, fixed before the grid
#: ran: the bound holds up to constants, and lower-order terms bend a log-log fit over a finite
#: grid; 0.1 over the cpu grid's 64x span of T is a factor 64^0.1 = 1.5 in the gap
RATE_TOLERANCE = 0.1
#: the step size Theorem 4 prescribes, and the iterate it bounds, as :func:`rate_conditions`
#: states them
THEOREM4_STEP = "eta = c / sqrt(TH), one c for every T"
THEOREM4_ALGORITHM = "Algorithm 1: theta_0 = 0, iterates projected onto C, averaged iterate"


def step_constant(config_: dict[str, Any]) -> float:
    """c = eta sqrt(TH) of a run (:func:`experiments.rate_step` inverted) to 10 significant
    digits, the last bits of the division being no property of the run; NaN for a step that is
    not constant over the run."""
    t = config_["training"]
    if t["lr"]["name"] != "constant":
        return float("nan")
    return float(f"{t['lr']['lr'] * np.sqrt(t['rounds'] * t['local_steps']):.10g}")


def rate_conditions(configs: Any) -> tuple[Condition, ...]:
    """Theorem 4's conditions against the runs of :func:`experiments.rate_grid` (their
    configurations, at least one): convex losses (Assumption 1), Algorithm 1 as analysed
    (:data:`THEOREM4_ALGORITHM`) and the step size :data:`THEOREM4_STEP`."""
    configs = list(configs)
    if not configs:
        raise ValueError("configs must hold at least one run of the rate grid, got none")
    analysed = all(
        describe(c)["protocol"] == "algorithm1" and c["model"].get("init") == "zeros"
        for c in configs
    )
    constants = {step_constant(c) for c in configs}
    one = len(constants) == 1 and np.isfinite(list(constants)).all()
    return (
        Condition("loss", CONVEX, convexity(c["model"]["name"] for c in configs)),
        Condition(
            "algorithm",
            THEOREM4_ALGORITHM,
            THEOREM4_ALGORITHM if analysed else "not Algorithm 1 as analysed",
        ),
        Condition(
            "step size",
            THEOREM4_STEP,
            THEOREM4_STEP if one else f"eta sqrt(TH) takes {len(constants)} values",
        ),
    )


@renamed("cache_dir", "results_dir")
def rate_table(
    configs: Any,
    results: Any,
    profile: str,
    optima: Optima | None = None,
    results_dir: str | None = None,
) -> pd.DataFrame:
    """One row per run of :func:`experiments.rate_grid` or :func:`experiments.rate_tuning_grid`:
    its ``seed``, horizon ``T``, step constant ``c`` (:func:`step_constant`), the problem-(3)
    loss of the averaged iterate at T (``loss_p``, with the p of its process), ``gap``: that
    loss minus the minimum of (3) in closed form (``optima``, :func:`least_squares_optima`; NaN
    without), and whether the run ``diverged`` (:func:`aoi_fl.pipeline.claims.diverged`)."""
    rows = []
    for cfg, res in zip(configs, results, strict=True):
        seed = describe(cfg)["seed"]
        _, obj_p, _ = objective_curves(res, process_p(cfg, profile, results_dir=results_dir))
        loss = float(obj_p[-1])
        rows.append(
            {
                "seed": seed,
                "T": cfg["training"]["rounds"],
                "c": step_constant(cfg),
                "loss_p": loss,
                "gap": loss - optima[seed][0][1] if optima is not None else float("nan"),
                "diverged": diverged(obj_p),
            }
        )
    return pd.DataFrame(rows, columns=["seed", "T", "c", "loss_p", "gap", "diverged"])


def tuning_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per step constant c of the tuning runs' :func:`rate_table`: the mean problem-(3) loss of
    the averaged iterate over the tuning seeds (at one horizon and on fixed seeds, its ranking is
    the optimality gap's), how many runs diverged, and which c is ``chosen``
    (:func:`tuned_step_constant`)."""
    summary = table.groupby("c").agg(
        **{"mean loss on (3)": ("loss_p", "mean"), "seeds": ("seed", "nunique")},
        diverged=("diverged", "sum"),
    )
    usable = summary.loc[summary["diverged"] == 0, "mean loss on (3)"]
    summary["chosen"] = summary.index == (usable.idxmin() if len(usable) else None)
    return summary


def tuned_step_constant(table: pd.DataFrame) -> float:
    """Theorem 4's step constant c, fixed by the tuning runs before the rate grid runs: the c of
    :func:`tuning_summary` with the lowest mean loss among those none of whose runs diverged;
    NaN when every c has a diverged run."""
    chosen = tuning_summary(table).query("chosen").index
    return float(chosen[0]) if len(chosen) else float("nan")


def rate_slopes(table: pd.DataFrame) -> pd.Series:
    """Per seed of the rate grid's :func:`rate_table`: :func:`log_log_slope` of its gaps."""
    return table.groupby("seed").apply(
        lambda r: log_log_slope(r["T"], r["gap"]), include_groups=False
    )


def rate_verdict(
    slopes: Any,
    rate: float = THEOREM4_RATE,
    tolerance: float = RATE_TOLERANCE,
    level: float = 0.95,
    diverged_run: bool = False,
) -> tuple[str, paired.PairedInterval | None]:
    """(verdict, interval) on "the gap falls at least as fast as T^rate" (Theorem 4: rate -1/2,
    an upper bound) from per-seed log-log slopes (:func:`rate_slopes`): their t interval over
    the seeds against the bound ``rate + tolerance`` (:func:`aoi_fl.pipeline.claims.sign_verdict`):
    "held" when it lies below the bound (at least as fast, within the tolerance), "not held" when
    it lies above it (measurably slower), else "inconclusive at this budget". "inconclusive"
    (no interval) with fewer than 2 seeds, a slope that is not finite, or a diverged run."""
    tolerance = require_real("tolerance", tolerance, minimum=0.0)
    s = np.asarray(slopes, dtype=float)
    if diverged_run or s.size < 2 or not np.isfinite(s).all():
        return "inconclusive", None
    interval = paired.paired_interval(s, level)
    bound = rate + tolerance
    return sign_verdict(interval.low - bound, interval.high - bound, "negative"), interval


class Rate(NamedTuple):
    """Theorem 4's check on the rate grid: the per-seed ``slopes``, their t ``interval`` (None
    without one), the ``criterion`` verdict (:func:`rate_verdict`), the ``verdict`` under the
    theorem's ``conditions`` (:func:`rate_conditions`, :func:`capped`)."""

    slopes: pd.Series
    interval: paired.PairedInterval | None
    criterion: str
    verdict: str
    conditions: tuple[Condition, ...]


def theorem4_rate(configs: Any, table: pd.DataFrame) -> Rate:
    """:class:`Rate` of the rate grid's ``configs`` and their :func:`rate_table`."""
    slopes = rate_slopes(table)
    criterion, interval = rate_verdict(slopes, diverged_run=bool(table["diverged"].any()))
    conditions = rate_conditions(configs)
    return Rate(slopes, interval, criterion, capped(criterion, conditions), conditions)


def rate_text(rate: Rate) -> str:
    """:class:`Rate` in words: the per-seed slopes' mean and t interval against the bound
    -1/2 + :data:`RATE_TOLERANCE` (the ledger row's spread, the line the Fig. 1 notebook prints)."""
    bound = THEOREM4_RATE + RATE_TOLERANCE
    n = len(rate.slopes)
    if rate.interval is None:
        return (
            f"log-log slope of the gap on T over {n} seed(s): no interval (fewer than 2 seeds, "
            "a gap that is not positive, or a diverged run)"
        )
    i = rate.interval
    return (
        f"log-log slope of the gap on T, mean {i.mean:+.3f}, 95% t interval [{i.low:+.3f}, "
        f"{i.high:+.3f}] over {n} seeds, against -1/2 + {RATE_TOLERANCE:g} = {bound:+.2f}"
    )


def rate_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per horizon T of the rate grid's :func:`rate_table`: the step eta = c / sqrt(TH) (from
    the constant and H of the runs, :func:`experiments.rate_step`), the mean, smallest and
    largest optimality gap over the seeds."""
    local_steps = TASKS[RATE_TASK]["training"]["local_steps"]
    summary = table.groupby("T").agg(
        c=("c", "first"), gap=("gap", "mean"), low=("gap", "min"), high=("gap", "max")
    )
    eta = [rate_step(c, int(t), local_steps) for t, c in summary["c"].items()]
    return summary.assign(eta=eta)[["eta", "gap", "low", "high"]]
