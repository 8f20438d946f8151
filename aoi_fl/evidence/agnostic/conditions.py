"""Assumption 1 (convex losses) and the conditions it puts on a claim about one task's runs:
what a ledger row or a table states as :class:`aoi_fl.pipeline.claims.Condition` (agnostic
FedAvg, Sec. 4)."""

from __future__ import annotations

from typing import Any

from aoi_fl.core.validation import require_choice
from aoi_fl.evidence.agnostic.experiments import TASKS
from aoi_fl.pipeline.claims import Condition

#: models whose loss is convex in the parameters (the analysis's Assumption 1)
CONVEX_MODELS = ("logistic_regression", "linear_regression")
#: how :func:`convexity` describes runs whose models are all convex, and runs that are not
CONVEX, NOT_CONVEX = "convex (Assumption 1)", "not convex (outside Assumption 1)"
#: the paper's MNIST model: Sec. 4 calls only the linear regression's loss "convex (and covered
#: exactly by our analysis)", and its lead there "particularly" large, so its MNIST model is one
#: the analysis does not cover (the paper does not name it)
PAPER_MNIST_MODEL = NOT_CONVEX


def convexity(models: Any) -> str:
    """Assumption 1 (convex losses) for runs of the models named ``models``: :data:`CONVEX`
    when every one is in :data:`CONVEX_MODELS`, else :data:`NOT_CONVEX`."""
    names = set(models)
    if not names:
        raise ValueError("models must name at least one model, got none")
    return CONVEX if names <= set(CONVEX_MODELS) else NOT_CONVEX


def task_conditions(task: str, models: Any = None) -> tuple[Condition, ...]:
    """The stated conditions of a claim about ``task``'s runs, from the models those runs train
    (``models``: their names; None: the model :data:`experiments.TASKS` configures): on MNIST
    the paper's model, which is not convex (:data:`PAPER_MNIST_MODEL`); none on the linear
    regression, the paper's convex task."""
    task = require_choice("task", task, TASKS)
    if task != "mnist":
        return ()
    names = sorted(set([TASKS[task]["model"]["name"]] if models is None else models))
    return (Condition(f"MNIST model ({', '.join(names)})", PAPER_MNIST_MODEL, convexity(names)),)
