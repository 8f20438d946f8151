"""Tables of the FedSUM experiments' results: final metrics, rounds and communication to a
threshold, metrics at a communication budget and head-to-head comparisons.

Every function takes :class:`aoi_fl.evidence.fedsum.experiments.RunSummary` objects and returns
NumPy arrays or pandas tables; runs are grouped by (pattern, algorithm) and summarised over seeds
(mean, and min-max as the spread). What they read of one run is in
:mod:`~aoi_fl.evidence.fedsum.run_metrics`; the paper's qualitative claims, judged on measures fixed
before looking (speed: the area under the curve against rounds or communication; "comparable":
non-inferiority margins), are in :mod:`~aoi_fl.evidence.fedsum.criteria`. The names of both are
importable from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from aoi_fl.core.validation import require_choice
from aoi_fl.evidence.fedsum.criteria import (
    ADDED_CRITERIA,
    ALL_CRITERIA,
    CASES_SPREAD,
    CLAIM_CRITERIA,
    CLAIM_METRICS,
    DELAY_PATTERNS,
    DELAY_RHO,
    LEVEL,
    NONINFERIORITY_MARGIN,
    P_GRID_RHO,
    VERDICTS,
    all_claims,
    combine_verdicts,
    deficit,
    diverged_runs,
    horizon,
    horizon_to_budget,
    long_claims,
    not_worse,
    paired_margins,
    part_verdict,
)
from aoi_fl.evidence.fedsum.run_metrics import (
    HIGHER_IS_BETTER,
    METRICS,
    curve,
    final_value,
    first_reach,
    group,
    oscillation,
)
from aoi_fl.pipeline.parts import DATASETS, PARTITIONS

__all__ = [
    "ADDED_CRITERIA",
    "ALL_CRITERIA",
    "CASES_SPREAD",
    "CLAIM_CRITERIA",
    "CLAIM_METRICS",
    "DELAY_PATTERNS",
    "DELAY_RHO",
    "FOUR_CASES",
    "HIGHER_IS_BETTER",
    "LEVEL",
    "METRICS",
    "NONINFERIORITY_MARGIN",
    "P_GRID_RHO",
    "THRESHOLD",
    "VERDICTS",
    "ahead",
    "all_claims",
    "at_budget",
    "best_of",
    "budget_table",
    "combine_verdicts",
    "curve",
    "deficit",
    "diverged_runs",
    "family_margins",
    "final_table",
    "final_value",
    "first_reach",
    "four_cases",
    "group",
    "head_to_head",
    "horizon",
    "horizon_to_budget",
    "label_histogram",
    "late_loss_ratio",
    "long_claims",
    "not_worse",
    "oscillation",
    "p_grid_groups",
    "p_grid_table",
    "paired_margins",
    "part_verdict",
]


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


#: the test accuracy whose first reach the tables of the MNIST and pattern notebooks report, per
#: profile (ours: the paper gives no numbers)
THRESHOLD = {"smoke": 0.1, "cpu": 0.7, "paper": 0.95}
#: Cases 1-4 of Sec. 2.1 (P1 and P2 are Cases 1 and 2), over which claim (iii) reads FedSUM
FOUR_CASES = ("P1", "P2", "cyclic", "reshuffled")


def label_histogram(config: dict[str, Any], data_root: str) -> tuple[np.ndarray, int]:
    """Fig. 4: (samples per client and label, shape (clients, labels); the training samples)
    of the partition a run's ``config`` draws, from the data under ``data_root``."""
    from aoi_fl.data.partition import label_histogram as histogram

    dataset = {k: v for k, v in config["dataset"].items() if k != "name"}
    bundle = DATASETS[config["dataset"]["name"]](data_root, **dataset)
    spec = {k: v for k, v in config["partition"].items() if k not in ("name", "n_clients")}
    n_clients = config["partition"]["n_clients"]
    clients = PARTITIONS[config["partition"]["name"]](bundle, n_clients, **spec)
    counts = histogram(bundle.train.y.numpy(), clients, bundle.num_classes)
    return counts, len(bundle.train)


def best_of(values: pd.DataFrame, metric: str) -> pd.Series:
    """Per row of ``values`` (methods in columns), the method best in ``metric``."""
    return values.idxmax(axis=1) if HIGHER_IS_BETTER[metric] else values.idxmin(axis=1)


def ahead(values: Any, rivals: Any, metric: str) -> Any:
    """Where ``values`` are better than ``rivals`` in ``metric`` (elementwise)."""
    return values > rivals if HIGHER_IS_BETTER[metric] else values < rivals


def late_loss_ratio(
    groups: dict[tuple[str, str], list[Any]], patterns: Sequence[str], algorithms: Sequence[str]
) -> pd.DataFrame:
    """How fast each method's training loss still falls at the end: its loss at the last
    evaluation over its loss two evaluations earlier, mean over seeds; patterns in rows,
    algorithms in columns (smaller: still falling faster)."""
    return pd.DataFrame(
        {
            a: {
                p: np.mean([r.train_loss[-1] / r.train_loss[-3] for r in groups[(p, a)]])
                for p in patterns
            }
            for a in algorithms
        }
    )


def four_cases(
    table: pd.DataFrame, groups: dict[tuple[str, str], list[Any]]
) -> tuple[pd.DataFrame, dict[str, bool]]:
    """Claim (iii)'s view of the Figs 9 and 14 panel (``table``: its :func:`final_table`;
    ``groups``: its runs by :func:`group`): FedSUM's rows under Cases 1-4 (:data:`FOUR_CASES`),
    and per case whether the first seed's training loss ended below its start."""
    four = table.xs("fedsum", level="algorithm").loc[list(FOUR_CASES)]
    first = {p: groups[(p, "fedsum")][0].train_loss for p in four.index}
    return four, {p: bool(loss[-1] < loss[0]) for p, loss in first.items()}


def p_grid_groups(summaries: Iterable[Any]) -> dict[str, list[Any]]:
    """Fig. 10's runs by p of the grid (``"p=..."``), by increasing p (each ordered by seed)."""
    by_p = {p: runs for (p, _), runs in group(summaries).items()}
    return {p: by_p[p] for p in sorted(by_p, key=lambda name: float(name[2:]))}


def p_grid_table(summaries: Iterable[Any], last: int) -> pd.DataFrame:
    """Fig. 10: FedSUM's :func:`final_table` rows over the Bernoulli p grid, by increasing p,
    with p first and "loss rises", the evaluations of the first seed at which the training loss
    rose since the previous one (a non-monotone run)."""
    summaries = list(summaries)
    by_p = p_grid_groups(summaries)
    ps = list(by_p)
    table = final_table(summaries, last=last).xs("fedsum", level="algorithm").loc[ps]
    table.insert(0, "p", [float(p[2:]) for p in ps])
    table["loss rises"] = [int(np.sum(np.diff(by_p[p][0].train_loss) > 0)) for p in ps]
    return table


def family_margins(table: pd.DataFrame) -> pd.DataFrame:
    """Fig. 11: FedSUM-B's and FedSUM-CR's margins over FedSUM (:func:`head_to_head`; positive:
    better than FedSUM) in final training loss and test accuracy, per pattern."""
    margins = {
        label: head_to_head(table, metric, ["fedsum_b", "fedsum_cr"], ["fedsum"])["margin"]
        for label, metric in (
            ("train_loss margin", "train_loss"),
            ("accuracy margin", "test_accuracy"),
        )
    }
    return pd.concat(margins, axis=1)


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
