"""What a configuration's dataset is, known without loading it: sample shape, task, clients.

A run's model, loss and natural partition must fit its dataset; :func:`dataset_facts` tells
the checks of a configuration (:mod:`aoi_fl.pipeline.config_checks`) what they must fit, from
the dataset's name and options alone, so that a mismatch is reported before any file is read or
any sample generated. The options are checked as the loader checks them.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aoi_fl.data import datasets, synthetic


@dataclass(frozen=True)
class DatasetFacts:
    """One sample's ``input_shape``; ``num_classes`` (None: regression, one real target per
    sample); ``clients``: the number of clients a natively federated dataset is generated with
    (None: it has no natural partition); ``train_samples``: the training samples a run gets
    (None: known only once generated); ``client_samples``: the fewest training samples a client
    of the natural partition holds (None: no natural partition)."""

    input_shape: tuple[int, ...]
    num_classes: int | None
    clients: int | None = None
    train_samples: int | None = None
    client_samples: int | None = None

    @property
    def features(self) -> int:
        """Numbers per sample (what a model that flattens its input sees)."""
        return math.prod(self.input_shape)

    def task(self) -> str:
        if self.num_classes is None:
            return "regression, one real target per sample"
        return f"classification, {self.num_classes} classes"


def _arguments(loader: Callable[..., Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with ``loader``'s defaults filled in (its seed left out: no fact needs it)."""
    bound = inspect.signature(loader).bind_partial(**options)
    bound.apply_defaults()
    return {k: v for k, v in bound.arguments.items() if k != "seed"}


def _real(name: str) -> Callable[..., DatasetFacts]:
    def facts(**options: Any) -> DatasetFacts:
        n_train, _ = datasets.split_limits(options.get("n_train"), options.get("n_test"))
        full = datasets.TRAIN_SAMPLES[name]
        return DatasetFacts(
            datasets.IMAGE_SHAPES[name],
            datasets.NUM_CLASSES[name],
            train_samples=full if n_train is None else min(n_train, full),
        )

    return facts


def _synthetic_cifar(**options: Any) -> DatasetFacts:
    args = _arguments(datasets.synthetic_cifar, options)
    datasets.synthetic_cifar_options(**args)
    return DatasetFacts(
        datasets.IMAGE_SHAPES["cifar10"], args["num_classes"], train_samples=args["n_train"]
    )


def _linear_regression(**options: Any) -> DatasetFacts:
    args = _arguments(synthetic.linear_regression, options)
    synthetic.linear_regression_options(**args)
    n, samples = args["n_clients"], args["samples"]
    return DatasetFacts((args["features"],), None, n, n * samples, samples)


def _fedprox_synthetic(**options: Any) -> DatasetFacts:
    args = _arguments(synthetic.fedprox_synthetic, options)
    synthetic.fedprox_synthetic_options(**args)
    # every client draws at least 50 samples and trains on the first train_fraction of them
    smallest = int(args["train_fraction"] * 50)
    return DatasetFacts((args["features"],), args["classes"], args["n_clients"], None, smallest)


#: dataset name (as configurations name it) -> function(**options) -> DatasetFacts
DATASET_FACTS: dict[str, Callable[..., DatasetFacts]] = {
    **{name: _real(name) for name in datasets.IMAGE_SHAPES},
    "synthetic_cifar": _synthetic_cifar,
    "linear_regression": _linear_regression,
    "fedprox_synthetic": _fedprox_synthetic,
}


def dataset_facts(name: str, options: Mapping[str, Any]) -> DatasetFacts | None:
    """The facts of dataset ``name`` with ``options`` (checked), or None for a dataset added
    without facts (it is checked when it loads)."""
    facts = DATASET_FACTS.get(name)
    return None if facts is None else facts(**options)
