"""Tables of the FedSUM experiments' results: final metrics, rounds and communication to a
threshold, metrics at a communication budget, and head-to-head comparisons for the paper's
qualitative claims.

Every function takes :class:`aoi_fl.fedsum_experiments.RunSummary` objects and returns NumPy
arrays or pandas tables; runs are grouped by (pattern, algorithm) and summarised over seeds
(mean, and min-max as the spread).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ._validation import require_choice, require_int

METRICS = ("train_loss", "objective", "test_loss", "test_accuracy")
#: whether a larger value of a metric is better
HIGHER_IS_BETTER = {
    "train_loss": False,
    "objective": False,
    "test_loss": False,
    "test_accuracy": True,
}


def group(summaries: Iterable[Any]) -> dict[tuple[str, str], list[Any]]:
    """Summaries grouped by (pattern, algorithm), each group ordered by seed."""
    out: dict[tuple[str, str], list[Any]] = {}
    for s in summaries:
        out.setdefault((s.planned.pattern, s.planned.algorithm), []).append(s)
    return {k: sorted(v, key=lambda s: s.planned.seed) for k, v in out.items()}


def curve(runs: Sequence[Any], metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(evaluation rounds, values of shape (seeds, evaluations)) of one group."""
    metric = require_choice("metric", metric, METRICS)
    rounds = runs[0].eval_round
    if any(not np.array_equal(r.eval_round, rounds) for r in runs[1:]):
        raise ValueError("the runs of one group must be evaluated at the same rounds")
    return rounds, np.array([getattr(r, metric) for r in runs], dtype=float)


def final_value(run: Any, metric: str, last: int) -> float:
    """Mean of ``metric`` over the run's last ``last`` evaluations."""
    return float(np.mean(getattr(run, metric)[-require_int("last", last, minimum=1) :]))


def oscillation(run: Any, metric: str = "test_accuracy") -> float:
    """Standard deviation of the evaluation-to-evaluation changes of ``metric`` over the second
    half of the run: how unsteady the late curve is (0 for a monotone straight line)."""
    values = getattr(run, metric)
    half = values[len(values) // 2 :]
    return float(np.std(np.diff(half))) if half.size > 2 else float("nan")


def first_reach(run: Any, threshold: float, metric: str = "test_accuracy") -> tuple[float, float]:
    """(round, communication units) of the first evaluation reaching ``threshold`` (NaN if
    never); "reaching" is >= for accuracy and <= for losses."""
    values = getattr(run, metric)
    hit = values >= threshold if HIGHER_IS_BETTER[metric] else values <= threshold
    if not hit.any():
        return float("nan"), float("nan")
    i = int(np.argmax(hit))
    return float(run.eval_round[i]), float(run.units()[i])


def _spread(values: Sequence[float]) -> dict[str, float]:
    v = np.asarray(values, dtype=float)
    return {
        "mean": float(np.nanmean(v)) if np.isfinite(v).any() else float("nan"),
        "min": float(np.min(v)),
        "max": float(np.max(v)),
    }


def final_table(summaries: Iterable[Any], last: int = 3, threshold: float | None = None):
    """Per (pattern, algorithm): final training loss, objective and test accuracy (mean of the
    last ``last`` evaluations; mean over seeds with min-max), the late oscillation of the test
    accuracy, the trace's tau_max / tau_avg, and, with ``threshold``, the rounds and
    communication units to that test accuracy (mean over the seeds that reach it)."""
    rows = []
    for (pattern, algorithm), runs in group(summaries).items():
        row: dict[str, Any] = {"pattern": pattern, "algorithm": algorithm, "seeds": len(runs)}
        for metric in ("train_loss", "objective", "test_accuracy"):
            s = _spread([final_value(r, metric, last) for r in runs])
            row[metric] = s["mean"]
            row[f"{metric} min"], row[f"{metric} max"] = s["min"], s["max"]
        row["oscillation"] = float(np.mean([oscillation(r) for r in runs]))
        row["tau_max"] = float(np.mean([r.tau_max for r in runs]))
        row["tau_avg"] = float(np.mean([r.tau_avg for r in runs]))
        if threshold is not None:
            reach = np.array([first_reach(r, threshold) for r in runs])
            row["rounds to threshold"] = _spread(reach[:, 0])["mean"]
            row["units to threshold"] = _spread(reach[:, 1])["mean"]
            row["reached"] = f"{int(np.isfinite(reach[:, 0]).sum())}/{len(runs)}"
        rows.append(row)
    return pd.DataFrame(rows).set_index(["pattern", "algorithm"])


def at_budget(run: Any, metric: str, units: float) -> float:
    """``metric`` of the last evaluation at or before ``units`` of communication (NaN if the
    run evaluated nothing within the budget but its initial model)."""
    spent = run.units()
    i = int(np.searchsorted(spent, units, side="right")) - 1
    return float(getattr(run, metric)[i]) if i >= 1 else float("nan")


def budget_table(summaries: Iterable[Any], metric: str, units: float | None = None) -> pd.DataFrame:
    """``metric`` at a communication budget, per pattern (rows) and algorithm (columns), mean
    over seeds; the column ``budget`` holds each pattern's budget: ``units``, or by default the
    largest budget that every run of the pattern spent."""
    groups = group(summaries)
    budgets: dict[str, float] = {}
    for (pattern, _), runs in groups.items():
        spent = min(float(r.units()[-1]) for r in runs)
        budgets[pattern] = min(budgets.get(pattern, spent), spent)
    data: dict[str, dict[str, float]] = {}
    for (pattern, algorithm), runs in groups.items():
        budget = budgets[pattern] if units is None else units
        data.setdefault(algorithm, {})[pattern] = float(
            np.mean([at_budget(r, metric, budget) for r in runs])
        )
    table = pd.DataFrame(data)
    table.insert(0, "budget", [float(budgets[p] if units is None else units) for p in table.index])
    return table


def head_to_head(
    table: pd.DataFrame, metric: str, candidates: Sequence[str], rivals: Sequence[str]
) -> pd.DataFrame:
    """For each pattern of ``table`` (from :func:`final_table`) and each candidate: its
    ``metric``, the best rival and its value, the margin (positive: the candidate is better)
    and whether the candidate beats every rival."""
    higher = HIGHER_IS_BETTER[require_choice("metric", metric, METRICS)]
    rows = []
    for pattern in table.index.get_level_values("pattern").unique():
        sub = table.loc[pattern]
        present = [r for r in rivals if r in sub.index]
        if not present:
            continue
        values = sub.loc[present, metric]
        best = values.idxmax() if higher else values.idxmin()
        for cand in candidates:
            if cand not in sub.index:
                continue
            value = float(sub.loc[cand, metric])
            margin = value - values[best] if higher else values[best] - value
            rows.append(
                {
                    "pattern": pattern,
                    "candidate": cand,
                    metric: value,
                    "best rival": best,
                    "rival value": float(values[best]),
                    "margin": float(margin),
                    "beats all": bool(margin > 0),
                }
            )
    return pd.DataFrame(rows).set_index(["pattern", "candidate"])
