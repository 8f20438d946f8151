"""The model against the dataset's facts: declared sizes, the loss the task trains with, the
engine, and the outputs of one forward pass of a zero sample."""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any

import torch

from aoi_fl.core.engines import LocalTraining
from aoi_fl.core.models import MODELS, build_model
from aoi_fl.data.facts import DatasetFacts
from aoi_fl.pipeline.cache import canonical_json
from aoi_fl.pipeline.config_options import _check_options, _dry_run, _name, _options, _parameters

#: the loss each kind of task trains with (classification needs an accuracy; a regression
#: target has no class to take a cross-entropy against)
TASK_LOSS = {"classification": "cross_entropy", "regression": "mse"}


def _model_options(spec: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    name = _name("model", "model name", spec, MODELS)
    options = _options(spec)
    params = _parameters(MODELS[name], 0)
    if params is not None:  # build_model's own option comes with the model's
        params = (*params, inspect.signature(build_model).parameters["init"])
    _check_options("model", name, options, params)
    return name, options


def _task_loss(facts: DatasetFacts, dataset: str, loss: str) -> None:
    wanted = TASK_LOSS["regression" if facts.num_classes is None else "classification"]
    if loss != wanted:
        raise ValueError(
            f"training.loss={loss!r} does not fit dataset {dataset!r} ({facts.task()}); "
            f"use loss {wanted!r}"
        )


def _declared_sizes(options: Mapping[str, Any], facts: DatasetFacts, dataset: str) -> None:
    if "in_features" in options and options["in_features"] != facts.features:
        raise ValueError(
            f"model.in_features={options['in_features']!r} does not match dataset {dataset!r} "
            f"({facts.features} features per sample)"
        )
    if "num_classes" in options and options["num_classes"] != facts.num_classes:
        raise ValueError(
            f"model.num_classes={options['num_classes']!r} does not match dataset {dataset!r} "
            f"({facts.task()})"
        )


def _outputs(model: torch.nn.Module, name: str, facts: DatasetFacts, dataset: str) -> int:
    """Outputs per sample of ``model`` on one zero sample of the dataset's shape."""
    model.eval()  # no dropout: no draw from torch's global RNG
    try:
        with torch.no_grad():
            out = model(torch.zeros(1, *facts.input_shape))
    except RuntimeError as exc:
        raise ValueError(
            f"model {name!r} cannot take the samples of dataset {dataset!r} (shape "
            f"{facts.input_shape}): {str(exc).splitlines()[0]}"
        ) from exc
    return out.numel()


@functools.lru_cache(maxsize=256)
def _model_fits(
    factory: Callable[..., Any],
    name: str,
    options_json: str,
    facts: DatasetFacts,
    dataset: str,
    training: tuple[str, str, int | None],
) -> None:
    """Raise unless model ``name`` (built by ``factory``: part of the key, so that a model
    registered anew is checked anew) fits the dataset and the (loss, engine, chunk) of its
    training."""
    loss, engine, chunk = training
    options = json.loads(options_json)
    _task_loss(facts, dataset, loss)
    # the shapes do not depend on the seed: one build serves every seed of a grid
    model = _dry_run("model", options, lambda: build_model(name, **options))
    _declared_sizes(options, facts, dataset)
    _dry_run(
        f"model {name!r} with training.engine={engine!r}",
        {},
        lambda: LocalTraining(model, loss, engine, chunk),
    )
    width = _outputs(model, name, facts, dataset)
    wanted = 1 if facts.num_classes is None else facts.num_classes
    if width != wanted:
        raise ValueError(
            f"model {name!r} gives {width} outputs per sample but dataset {dataset!r} "
            f"({facts.task()}) needs {wanted}"
        )


def _model(
    spec: Mapping[str, Any],
    training: Mapping[str, Any],
    dataset: str,
    facts: DatasetFacts | None,
) -> None:
    name, options = _model_options(spec)
    if facts is None:
        return
    unseeded = {k: v for k, v in options.items() if k != "seed"}
    _model_fits(
        MODELS[name],
        name,
        canonical_json(unseeded),
        facts,
        dataset,
        (training["loss"], training["engine"], training["client_chunk"]),
    )
