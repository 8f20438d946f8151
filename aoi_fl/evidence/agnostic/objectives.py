"""The losses of agnostic-FedAvg runs on the objectives they are judged on (problem (3), weights
p, and the uniform objective), and the closed-form view of Fig. 1 that its notebook prints: the
linear regression's optima, the gaps to them and what eq. 10 solves instead."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from aoi_fl.agnostic import algorithms as agnostic
from aoi_fl.core.validation import renamed
from aoi_fl.data import synthetic
from aoi_fl.evidence.agnostic.experiments import (
    LAST_EVALUATIONS,
    TASKS,
    TAU,
    describe,
    induced_p,
    process_p,
    schedule,
)


def objective_curves(result: Any, p: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(evaluation rounds, sum_i p_i f_i, (1/N) sum_i f_i) of a run's global models."""
    losses = np.asarray(result.history["client_losses"], dtype=float)
    return (
        np.asarray(result.history["eval_round"]),
        agnostic.objective(losses, p),
        agnostic.objective(losses),
    )


def converged_value(curve: np.ndarray, last: int = LAST_EVALUATIONS) -> float:
    """The converged value of a loss curve: the mean of its last ``last`` evaluations."""
    return float(np.mean(curve[-last:]))


# ---------------------------------------------------------------------------------------------
# The Fig. 1 notebook: the closed-form view of Fig. 1


#: one optimum of :func:`algorithms.least_squares_optimum`: (theta* = (w, b), the minimum)
Optimum = tuple[np.ndarray, float]
#: seed -> (optimum of problem (3), optimum of the uniform objective): :func:`least_squares_optima`
Optima = dict[int, tuple[Optimum, Optimum]]


def linear_regression_bundle(seed: int) -> Any:
    """The linear-regression task's data for ``seed`` (:data:`experiments.TASKS`)."""
    spec = {k: v for k, v in TASKS["linear_regression"]["dataset"].items() if k != "name"}
    return synthetic.linear_regression(**spec, seed=seed)


@renamed("cache_dir", "results_dir")
def least_squares_optima(profile: str, results_dir: str | None = None) -> Optima:
    """seed -> (optimum of problem (3), sum_i p_i f_i with the seed's p at tau = 10, optimum of
    the uniform objective (1/N) sum_i f_i) of the linear regression, in closed form: Fig. 1's
    optimality gaps and the check that Algorithm 1's ball C holds every optimum."""
    optima = {}
    for seed in range(schedule(profile)["seeds"]):
        bundle = linear_regression_bundle(seed)
        p = induced_p("exp_prior", seed, profile, TAU, results_dir=results_dir)
        optima[seed] = (
            agnostic.least_squares_optimum(bundle, p),
            agnostic.least_squares_optimum(bundle),
        )
    return optima


def largest_optimum_norm(optima: Optima) -> float:
    """The largest ||theta*|| over the seeds and both objectives of :func:`least_squares_optima`
    (Algorithm 1's ball C must hold it)."""
    return max(np.linalg.norm(theta) for pair in optima.values() for theta, _ in pair)


class Curves(NamedTuple):
    """Fig. 1's loss curves of one (task, protocol, rule): the evaluation rounds and, one row
    per seed (``seeds``), sum_i p_i f_i (problem (3)) and (1/N) sum_i f_i (uniform)."""

    rounds: np.ndarray
    problem3: np.ndarray
    uniform: np.ndarray
    seeds: list[int]


@renamed("cache_dir", "results_dir")
def figure1_curves(
    configs: Any,
    results: Any,
    profile: str,
    data_root: str = "data",
    results_dir: str | None = None,
) -> dict[tuple[str, str, str], Curves]:
    """(task, protocol, rule) -> :class:`Curves` of :func:`experiments.figure1_grid`'s runs, each
    run's objectives taken with the p of its process (:func:`objective_curves`)."""
    parts: dict[tuple[str, str, str], tuple[np.ndarray, list, list, list]] = {}
    for cfg, res in zip(configs, results, strict=True):
        d = describe(cfg)
        rounds, obj_p, obj_u = objective_curves(
            res, process_p(cfg, profile, data_root, results_dir)
        )
        entry = parts.setdefault((d["task"], d["protocol"], d["aggregation"]), (rounds, [], [], []))
        entry[1].append(obj_p)
        entry[2].append(obj_u)
        entry[3].append(d["seed"])
    return {
        key: Curves(rounds, np.array(obj_p), np.array(obj_u), seeds)
        for key, (rounds, obj_p, obj_u, seeds) in parts.items()
    }


def optimality_gaps(curves: Curves, optima: Optima) -> np.ndarray:
    """sum_i p_i f_i - min (problem (3)) along a linear-regression run, one row per seed: the
    quantity Theorem 4's O(1/sqrt(T)) bound is about for Algorithm 1's averaged iterate."""
    return np.array(
        [y - optima[s][0][1] for y, s in zip(curves.problem3, curves.seeds, strict=True)]
    )


def gap_to_minimum(table: pd.DataFrame, optima: Optima) -> pd.Series:
    """Per run of :func:`run_table`: its converged loss on problem (3) minus its seed's minimum
    (the linear regression; NaN for MNIST, which has no closed form)."""
    lr = table["task"] == "linear_regression"
    minimum = table.loc[lr, "seed"].map(lambda s: optima[s][0][1])
    return (table.loc[lr, "loss_p"] - minimum).reindex(table.index)


def converged_summary(table: pd.DataFrame, optima: Optima) -> pd.DataFrame:
    """Per (task, protocol, rule) of :func:`run_table`: mean and sd over seeds of the converged
    loss on problem (3) and on the uniform objective, the mean :func:`gap_to_minimum`, and the
    round by which each seed's run diverged ("-": never)."""
    return (
        table.assign(gap_min_p=gap_to_minimum(table, optima))
        .groupby(["task", "protocol", "aggregation"], sort=False)
        .agg(
            **{
                "problem (3) mean": ("loss_p", "mean"),
                "problem (3) sd": ("loss_p", "std"),
                "uniform mean": ("loss_uniform", "mean"),
                "uniform sd": ("loss_uniform", "std"),
                "gap to min of (3)": ("gap_min_p", "mean"),
                "diverged at round": (
                    "diverged_at",
                    lambda v: ", ".join("-" if pd.isna(x) else str(int(x)) for x in v),
                ),
            }
        )
    )


#: the three problems a linear-regression run's converged model is measured against
Q_GAP_COLUMNS = (
    "gap on problem (3), weights p",
    "gap on weights q = p^2 / sum p^2",
    "gap on the uniform objective",
)


@renamed("cache_dir", "results_dir")
def q_gaps(
    configs: Any,
    results: Any,
    profile: str,
    optima: Optima,
    data_root: str = "data",
    results_dir: str | None = None,
) -> pd.DataFrame:
    """What eq. 10 on the updates solves instead: per linear-regression run (eq. 10 as printed
    left out, it diverges), the converged gap to the minimum of problem (3) (weights p), of
    sum_i q_i f_i with q_i = p_i^2 / sum_j p_j^2 (the fixed point of eq. 10's weights on the
    updates in expectation over S), and of the uniform objective (:data:`Q_GAP_COLUMNS`)."""
    rows, bundles = [], {}
    for cfg, res in zip(configs, results, strict=True):
        d = describe(cfg)
        if d["task"] != "linear_regression" or d["aggregation"] == "weighted":
            continue
        p = process_p(cfg, profile, data_root, results_dir)
        q = p**2 / (p**2).sum()
        losses = np.asarray(res.history["client_losses"])
        if d["seed"] not in bundles:
            bundles[d["seed"]] = linear_regression_bundle(d["seed"])
        (_, min_p), (_, min_u) = optima[d["seed"]]
        values = (
            converged_value(agnostic.objective(losses, p)) - min_p,
            converged_value(agnostic.objective(losses, q))
            - agnostic.least_squares_optimum(bundles[d["seed"]], q)[1],
            converged_value(agnostic.objective(losses)) - min_u,
        )
        rows.append(
            {
                "protocol": d["protocol"],
                "rule": d["aggregation"],
                **dict(zip(Q_GAP_COLUMNS, values, strict=True)),
            }
        )
    return pd.DataFrame(rows, columns=["protocol", "rule", *Q_GAP_COLUMNS])
