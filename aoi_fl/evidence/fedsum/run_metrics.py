"""What the FedSUM tables and claims read of one run
(:class:`aoi_fl.evidence.fedsum.experiments.RunSummary`): its metrics, final value, late oscillation
and first reach of a threshold; and runs grouped by (pattern, algorithm)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from aoi_fl.core.validation import require_choice, require_int

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
