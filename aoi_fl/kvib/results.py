"""Tables of the K-Vib experiments (Figs 2-4, 6-7): per-run curves, curves grouped by setting
and the summary table of regret, variance and accuracy."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from aoi_fl.core.train import rounds_to_target
from aoi_fl.kvib.estimators import dynamic_regret
from aoi_fl.kvib.experiments import FIG2_SAMPLERS
from aoi_fl.pipeline import claims as shared_claims
from aoi_fl.pipeline.paired import sample_sd

#: the ledger's one divergence rule (:func:`aoi_fl.pipeline.claims.diverged`), re-exported for
#: notebook 12
DIVERGENCE_FACTOR = shared_claims.DIVERGENCE_FACTOR


def diverged(arrays: dict[str, np.ndarray], factor: float = DIVERGENCE_FACTOR) -> bool:
    """Whether FedAvg diverged in a run (its :func:`run_arrays`): the ledger's rule
    (:func:`aoi_fl.pipeline.claims.diverged`) on its test loss. A sampler's regret or variance on
    such a run measures the exploding trajectory more than the sampler."""
    return shared_claims.diverged(arrays["test_loss"], factor)


def run_label(result: Any) -> tuple[str, int, float | None]:
    """(sampler name, K, gamma scale or None): what distinguishes the curves of a figure."""
    spec = result.config["sampler"]
    return spec["name"], int(spec["k"]), spec.get("gamma_scale")


def run_arrays(result: Any) -> dict[str, np.ndarray]:
    """One run's per-round curves.

    ``regret``: cumulative dynamic regret (eq. 8) of the sampler's probabilities;
    ``uniform_regret``: that of p = K / n on the same feedback; ``variance``: eq. 2 in closed
    form per round; ``squared_error``: the realised ||d - sum lambda g||^2; ``uniform_cost``:
    l_t(K / n) = (n / K) sum_i pi_t(i)^2 per round, every client's feedback aggregated;
    ``eval_round``, ``test_loss``, ``test_accuracy``: the evaluations (round 0 = the initial
    model). All but the last three exist only for full-information runs.
    """
    h = result.history
    out = {key: np.asarray(h[key], dtype=float) for key in ("test_loss", "test_accuracy")}
    out["eval_round"] = np.asarray(h["eval_round"], dtype=int)
    if "cost" in h:
        out["regret"] = dynamic_regret(h["cost"], h["optimal_cost"])
        out["uniform_regret"] = dynamic_regret(h["uniform_cost"], h["optimal_cost"])
        out["variance"] = np.asarray(h["expected_squared_error"], dtype=float)
        out["squared_error"] = np.asarray(h["squared_error"], dtype=float)
        out["uniform_cost"] = np.asarray(h["uniform_cost"], dtype=float)
    return out


def curves_by_label(results: Sequence[Any]) -> dict[tuple, list[dict[str, np.ndarray]]]:
    """The runs' curves grouped by :func:`run_label` (seeds of one setting together)."""
    groups: dict[tuple, list[dict[str, np.ndarray]]] = defaultdict(list)
    for result in results:
        groups[run_label(result)].append(run_arrays(result))
    return dict(groups)


def stacked(runs: Sequence[dict[str, np.ndarray]], key: str) -> np.ndarray:
    """``key`` of every run of a group as a (seeds, length) array."""
    return np.stack([run[key] for run in runs])


def summary_table(results: Sequence[Any], target: float | None = None):
    """Per setting (sampler, K, gamma scale), means over seeds (and the seed spread).

    Columns: final regret (eq. 8) with its standard deviation, the part of it accrued after the
    first tenth of the rounds (the regret of the first rounds, when the feedback is largest,
    dominates the total), the ratio of the final regret to that of uniform probabilities on
    the same runs' feedback, the mean over rounds of the
    closed-form variance (eq. 2) and of the realised squared error, the final test loss and
    accuracy, the accuracy averaged over the last tenth of the evaluations and, with ``target``,
    the first round whose test accuracy reaches it (mean and standard deviation over the seeds
    that reach it, and how many do).
    """
    import pandas as pd

    rows = []
    for (name, k, scale), runs in sorted(curves_by_label(results).items(), key=_order):
        row: dict[str, Any] = {"sampler": name, "K": k, "gamma scale": scale, "seeds": len(runs)}
        if "regret" in runs[0]:
            regret = stacked(runs, "regret")
            final = regret[:, -1]
            row["regret"] = final.mean()
            row["regret sd"] = sample_sd(final)
            row["regret after T/10"] = (final - regret[:, max(1, regret.shape[1] // 10) - 1]).mean()
            row["regret / uniform-p regret"] = np.mean(
                final / stacked(runs, "uniform_regret")[:, -1]
            )
            row["variance (eq. 2, mean over rounds)"] = stacked(runs, "variance").mean()
            row["realised sq. error (mean)"] = stacked(runs, "squared_error").mean()
        accuracy = stacked(runs, "test_accuracy")
        row["final test loss"] = stacked(runs, "test_loss")[:, -1].mean()
        row["final test accuracy"] = accuracy[:, -1].mean()
        row["test accuracy, last 10%"] = accuracy[:, -max(1, accuracy.shape[1] // 10) :].mean()
        if target is not None:
            hits = [rounds_to_target(r["test_accuracy"], target, r["eval_round"]) for r in runs]
            reached = [h for h in hits if h is not None]
            row[f"rounds to {target:.0%}"] = np.mean(reached) if reached else np.nan
            row[f"rounds to {target:.0%} sd"] = sample_sd(reached)
            row["seeds reaching it"] = len(reached)
        rows.append(row)
    return pd.DataFrame(rows)


def _order(item: tuple) -> tuple:
    (name, k, scale), _ = item
    known = list(FIG2_SAMPLERS)
    return (k, known.index(name) if name in known else len(known), scale or 0.0)
