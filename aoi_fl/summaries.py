"""Tables of training results: accuracy curves, rounds to a target accuracy, speed-ups, skew.

Every function takes :class:`aoi_fl.runs.ExperimentResult` objects (or their histories) and
returns plain NumPy arrays or pandas tables; notebooks only print and plot them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd


def sample_sd(values: Sequence[float] | np.ndarray) -> float:
    """Sample standard deviation over seeds (divisor n - 1); NaN for fewer than two values."""
    values = np.asarray(values, dtype=float)
    return float(values.std(ddof=1)) if values.size > 1 else float("nan")


def _split_of(config: Mapping[str, Any]) -> str:
    return "iid" if config["partition"]["name"] == "iid" else "noniid"


def group_runs(results: Iterable[Any]) -> dict[tuple[str, str], list[Any]]:
    """Results grouped by (split, policy), each group ordered by seed."""
    groups: dict[tuple[str, str], list[Any]] = {}
    for r in results:
        groups.setdefault((_split_of(r.config), r.config["sampler"]["name"]), []).append(r)
    return {k: sorted(v, key=lambda r: r.config["training"]["seed"]) for k, v in groups.items()}


def accuracy_curves(runs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """(evaluation rounds, accuracy array of shape (seeds, evaluations)) of a group of runs."""
    rounds = np.asarray(runs[0].history["eval_round"])
    for r in runs[1:]:
        if not np.array_equal(r.history["eval_round"], rounds):
            raise ValueError("runs of one group must be evaluated at the same rounds")
    return rounds, np.array([r.history["test_accuracy"] for r in runs], dtype=float)


def rounds_to_target_table(
    results: Iterable[Any],
    target: float,
    paper: Mapping[tuple[str, str], Mapping[str, int]] | None = None,
    dataset: str | None = None,
) -> pd.DataFrame:
    """Rounds until the global model first reaches ``target`` test accuracy, per split and policy.

    Columns: one per seed (NaN when the target is never reached within the run), the mean and
    sample standard deviation (:func:`sample_sd`) over the seeds that reached it, how many did,
    and the paper's number (``paper[(dataset, split)][policy]``) where it reports one.
    """
    rows = []
    for (split, policy), runs in sorted(group_runs(results).items()):
        per_seed = [r.rounds_to_target(target) for r in runs]
        reached = np.array([v for v in per_seed if v is not None], dtype=float)
        row: dict[str, Any] = {"split": split, "policy": policy}
        for r, v in zip(runs, per_seed, strict=True):
            row[f"seed {r.config['training']['seed']}"] = v
        row["mean"] = reached.mean() if reached.size else np.nan
        row["sd"] = sample_sd(reached)
        row["reached"] = f"{reached.size}/{len(per_seed)}"
        if paper is not None and dataset is not None:
            row["paper"] = paper.get((dataset, split), {}).get(policy, np.nan)
        rows.append(row)
    return pd.DataFrame(rows).set_index(["split", "policy"])


def speedup_table(
    table: pd.DataFrame, fast: str = "markov_optimal", slow: str = "random"
) -> pd.DataFrame:
    """Relative speed-up (R_slow - R_fast) / R_slow of mean rounds to target, ours and paper's.

    Ours is NaN unless every seed of both policies reached the target: a mean over only the
    seeds that got there would favour the policy that missed it more often.
    """
    rows = []
    for split in table.index.get_level_values("split").unique():
        row: dict[str, Any] = {"split": split}
        for column in ("mean", "paper"):
            if column not in table:
                continue
            r_fast, r_slow = table.loc[(split, fast), column], table.loc[(split, slow), column]
            if column == "mean" and not all(
                _all_reached(table.loc[(split, p), "reached"]) for p in (fast, slow)
            ):
                r_fast = np.nan
            row[f"speed-up ({'ours' if column == 'mean' else 'paper'})"] = (
                r_slow - r_fast
            ) / r_slow
        rows.append(row)
    return pd.DataFrame(rows).set_index("split")


def _all_reached(reached: str) -> bool:
    hits, seeds = reached.split("/")
    return hits == seeds


def final_accuracy_table(results: Iterable[Any], last: int = 5) -> pd.DataFrame:
    """Mean test accuracy over the last ``last`` evaluations, mean and sd over seeds."""
    rows = []
    for (split, policy), runs in sorted(group_runs(results).items()):
        _, acc = accuracy_curves(runs)
        tail = acc[:, -last:].mean(axis=1)
        rows.append(
            {
                "split": split,
                "policy": policy,
                "final accuracy": tail.mean(),
                "sd over seeds": sample_sd(tail),
            }
        )
    return pd.DataFrame(rows).set_index(["split", "policy"])


__all__ = [
    "accuracy_curves",
    "final_accuracy_table",
    "group_runs",
    "rounds_to_target_table",
    "sample_sd",
    "speedup_table",
]
