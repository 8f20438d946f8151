"""The dataset and partition sections: options, the dataset's facts, and what the partition
takes from the training samples (at most all; its smallest client)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from aoi_fl.core.validation import require_int, require_real
from aoi_fl.data.facts import DatasetFacts, dataset_facts
from aoi_fl.data.partition import MAX_LOGNORMAL_SIGMA
from aoi_fl.pipeline.config_options import (
    Table,
    _check_options,
    _dry_run,
    _name,
    _options,
    _parameters,
    _warn,
)


def _optional(check: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
    return lambda path, value: None if value is None else check(path, value)


#: ranges of the partition options (besides n_clients >= 1, which every partition takes) that
#: mean the same in every partition taking them; what needs the data (e.g. n_clients <= the
#: number of samples) is checked when partitioning
PARTITION_RANGES: dict[str, Callable[[str, Any], Any]] = {
    "alpha": functools.partial(require_real, minimum=0.0, strict_minimum=True),
    "a": functools.partial(require_real, minimum=1.0, strict_minimum=True),
    "sigma": functools.partial(require_real, minimum=0.0, maximum=MAX_LOGNORMAL_SIGMA),
    "total": _optional(functools.partial(require_int, minimum=1)),
}
#: the smallest min_size: a Dirichlet label split may leave a client empty, a size law may not
#: (:mod:`aoi_fl.data.partition`)
MIN_SIZE_FLOOR = {"dirichlet": 0, "dirichlet_prior": 0}


def _dataset(spec: Mapping[str, Any], datasets: Table) -> DatasetFacts | None:
    name = _name("dataset", "dataset name", spec, datasets)
    options = _options(spec)
    _check_options("dataset", name, options, _parameters(datasets[name], 1))  # after the root
    facts = _dry_run("dataset", options, lambda: dataset_facts(name, options))
    kept = None if facts is None else facts.train_samples
    if kept is not None and (n_train := options.get("n_train") or 0) > kept:
        _warn(
            f"dataset.n_train={n_train} is more than the {kept} training samples of dataset "
            f"{name!r}: all {kept} are used (allowed: 1..{kept}, or None for all)"
        )
    return facts


def check_natural(n_clients: int, dataset: str, clients: int | None) -> None:
    """Partition ``natural`` of ``dataset``, generated with ``clients`` clients (None: not
    generated client by client), into ``n_clients``: raise ValueError unless it exists."""
    if clients is None:
        raise ValueError(
            f"partition 'natural' needs a dataset generated client by client; {dataset!r} has "
            "no natural partition (use e.g. 'iid' or 'dirichlet')"
        )
    if clients != n_clients:
        raise ValueError(
            f"partition.n_clients={n_clients} but dataset {dataset!r} is generated with "
            f"{clients} clients (its n_clients)"
        )


def _partition(
    spec: Mapping[str, Any], partitions: Table, dataset: str, facts: DatasetFacts | None
) -> tuple[int, int]:
    """Check the partition; return its number of clients and a lower bound of the training
    samples of its smallest client (:func:`_smallest_client`)."""
    name = _name("partition", "partition name", spec, partitions)
    options = _options(spec)
    params = _parameters(partitions[name], 1)  # after the data
    _check_options("partition", name, options, params)
    n_clients = require_int("partition.n_clients", options.get("n_clients"), minimum=1)
    for key, check in PARTITION_RANGES.items():
        if key in options:
            check(f"partition.{key}", options[key])
    if "min_size" in options:
        require_int("partition.min_size", options["min_size"], minimum=MIN_SIZE_FLOOR.get(name, 1))
    min_size = options.get("min_size", {p.name: p.default for p in params or ()}.get("min_size"))
    if options.get("total") is not None and min_size:
        require_int("partition.total", options["total"], minimum=n_clients * min_size)
    if facts is None:  # a dataset without facts is checked on load
        return n_clients, 0
    if name == "natural":
        check_natural(n_clients, dataset, facts.clients)
    if facts.train_samples is not None:
        _fits_samples(name, options, n_clients, min_size, facts.train_samples, dataset)
    return n_clients, _smallest_client(name, n_clients, min_size, facts)


def _fits_samples(
    name: str,
    options: Mapping[str, Any],
    n_clients: int,
    min_size: int | None,
    samples: int,
    dataset: str,
) -> None:
    """What the partition takes from the dataset's ``samples`` training samples: at most all."""
    where = f"the {samples} training samples of dataset {dataset!r}"
    if options.get("total") is not None and options["total"] > samples:
        raise ValueError(f"partition.total must be <= {samples} ({where}), got {options['total']}")
    smallest = 1 if name == "iid" else min_size
    if smallest and n_clients * smallest > samples:
        raise ValueError(
            f"partition.n_clients={n_clients} clients of at least {smallest} samples each need "
            f"more than {where}; allowed: n_clients <= {samples // smallest}"
        )


def _smallest_client(name: str, n_clients: int, min_size: int | None, facts: DatasetFacts) -> int:
    """A lower bound of the training samples of the partition's smallest client: the natural
    partition's known sizes, an IID split's floor(samples / n_clients), a partition's min_size
    (its draws are repeated, or its sizes shifted, until every client has that many), else 0."""
    if name == "natural":
        return facts.client_samples or 0
    if name == "iid":
        return (facts.train_samples or 0) // n_clients
    return min_size or 0
