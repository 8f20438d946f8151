"""What a configuration's names build: the datasets, the partitions, the training parts.

:data:`DATASETS` and :data:`PARTITIONS` are the tables a configuration's ``dataset`` and
``partition`` sections name; samplers and algorithms come from :mod:`aoi_fl.core.registry`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from aoi_fl.core import registry
from aoi_fl.core.algorithms import Algorithm
from aoi_fl.core.availability import build_availability
from aoi_fl.core.train import LR_SCHEDULES, FederatedData, TrainSettings
from aoi_fl.core.validation import require_choice
from aoi_fl.data import synthetic
from aoi_fl.data.datasets import DatasetBundle, load_dataset, synthetic_cifar
from aoi_fl.data.partition import (
    dirichlet_class_mix,
    dirichlet_client_prior,
    dirichlet_label_skew,
    iid_equal,
    iid_sizes,
    lognormal_sizes,
    zipf_sizes,
)
from aoi_fl.pipeline import config_checks
from aoi_fl.pipeline.cache import canonical_json


def _iid(bundle: DatasetBundle, n_clients: int, seed: int) -> list[np.ndarray]:
    return iid_equal(len(bundle.train), n_clients, seed)


def _dirichlet(
    bundle: DatasetBundle, n_clients: int, seed: int, alpha: float, min_size: int = 10
) -> list[np.ndarray]:
    labels = bundle.train.y.numpy()
    return dirichlet_label_skew(labels, n_clients, alpha, seed, min_size=min_size)


def _dirichlet_prior(
    bundle: DatasetBundle, n_clients: int, seed: int, alpha: float, min_size: int = 1
) -> list[np.ndarray]:
    labels = bundle.train.y.numpy()
    return dirichlet_client_prior(labels, n_clients, alpha, seed, bundle.num_classes, min_size)


def _zipf(
    bundle: DatasetBundle, n_clients: int, seed: int, a: float, min_size: int = 1
) -> list[np.ndarray]:
    """IID samples with Zipf(a) client sizes that use the whole training set."""
    total = len(bundle.train)
    sizes = zipf_sizes(n_clients, a, seed, total=total, min_size=min_size)
    return iid_sizes(total, sizes, seed)


def _lognormal_dirichlet(
    bundle: DatasetBundle,
    n_clients: int,
    seed: int,
    sigma: float,
    alpha: float,
    total: int | None = None,
    min_size: int = 1,
) -> list[np.ndarray]:
    """Lognormal(sigma) client sizes summing to ``total`` (default: the whole training set),
    each client's classes from its own Dirichlet(alpha) prior (algorithm (B))."""
    total = len(bundle.train) if total is None else total
    sizes = lognormal_sizes(n_clients, sigma, seed, total=total, min_size=min_size)
    return dirichlet_class_mix(bundle.train.y.numpy(), sizes, alpha, seed)


def _natural(bundle: DatasetBundle, n_clients: int) -> list[np.ndarray]:
    """The clients a natively federated dataset was generated with."""
    clients = None if bundle.partition is None else len(bundle.partition)
    config_checks.check_natural(n_clients, bundle.name, clients)
    return list(bundle.partition)


#: partition name -> function(bundle, n_clients, [seed], **options) -> list of index arrays
PARTITIONS: dict[str, Callable[..., list[np.ndarray]]] = {
    "iid": _iid,
    "dirichlet": _dirichlet,
    "dirichlet_prior": _dirichlet_prior,
    "zipf": _zipf,
    "natural": _natural,
    "lognormal_dirichlet": _lognormal_dirichlet,
}


def _generated(make: Callable[..., DatasetBundle]) -> Callable[..., DatasetBundle]:
    """``make(**options)`` as a function(root, **options): generated data reads no file."""
    return registry.declare_options(lambda root, **options: make(**options), make)


#: dataset name -> function(root, **options) -> DatasetBundle
DATASETS: dict[str, Callable[..., DatasetBundle]] = {
    **{
        name: functools.partial(load_dataset, name)
        for name in ("mnist", "fashion_mnist", "cifar10", "cifar100")
    },
    "synthetic_cifar": _generated(synthetic_cifar),
    "linear_regression": _generated(synthetic.linear_regression),
    "fedprox_synthetic": _generated(synthetic.fedprox_synthetic),
}


def built(spec: Mapping[str, Any], table: Mapping[str, Callable[..., Any]], *args: Any) -> Any:
    """What the (checked) ``spec`` names in ``table``, built from ``args`` and its options."""
    options = dict(spec)
    return table[options.pop("name")](*args, **options)


def training_parts(
    t: Mapping[str, Any],
) -> tuple[TrainSettings, Callable[[int], float], Algorithm]:
    settings = TrainSettings(**{k: v for k, v in t.items() if k in config_checks.SETTINGS})
    return settings, built(t["lr"], LR_SCHEDULES), built(t["algorithm"], registry.ALGORITHMS)


@functools.lru_cache(maxsize=2)
def load_bundle(dataset_json: str, data_root: str) -> DatasetBundle:
    """The dataset a configuration's ``dataset`` section (canonical JSON) names.

    Kept for the next runs of the same process (grids run many configurations on one dataset;
    loading and normalising MNIST takes seconds). Its tensors are never modified.
    """
    spec = json.loads(dataset_json)
    return DATASETS[spec.pop("name")](data_root, **spec)


def federated_data(c: Mapping[str, Any], data_root: str) -> FederatedData:
    """The clients' data of a resolved configuration."""
    bundle = load_bundle(canonical_json(c["dataset"]), str(data_root))
    part = dict(c["partition"])
    partition = PARTITIONS[part.pop("name")](bundle, **part)
    return FederatedData(bundle.train, bundle.test, partition)


@functools.lru_cache(maxsize=64)
def cached_sizes(dataset_json: str, partition_json: str, data_root: str) -> np.ndarray:
    c = {"dataset": json.loads(dataset_json), "partition": json.loads(partition_json)}
    sizes = federated_data(c, data_root).sizes
    sizes.flags.writeable = False  # shared by every caller (cached)
    return sizes


def availability_model(c: Mapping[str, Any], n: int, sizes: np.ndarray) -> Any:
    spec = c.get("availability")
    if spec is None:
        return None
    return build_availability(spec, n, sizes)


def full_information_recorder() -> Any:
    # the full-information mode's per-round metrics are a paper's (K-Vib's): its entry point's
    mode = require_choice("training mode", "full_information", registry.RECORDERS)
    return registry.RECORDERS[mode]
