"""A configuration checked and resolved: its defaults filled in, the form that keys the cache.

:func:`resolve_config` does it for a dict; :class:`RunConfig` holds the result, so that a run
that goes from a grid to a worker to its trainer is checked and resolved once.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aoi_fl.core.device import requested_device
from aoi_fl.pipeline import config_checks, plugins
from aoi_fl.pipeline.cache import canonical_json, config_key
from aoi_fl.pipeline.parts import DATASETS, PARTITIONS, cached_sizes

_SECTIONS = ("dataset", "partition", "model", "sampler", "training", "availability")
#: the sections a configuration may leave out
_OPTIONAL_SECTIONS = {"training", "availability"}
#: defaults of the "training" section (the AoI paper's MNIST setting, 100 rounds)
TRAINING_DEFAULTS: dict[str, Any] = {
    "rounds": 100,
    "local_epochs": 5,
    "batch_size": 50,
    "seed": 0,
    "eval_every": 1,
    "loss": "cross_entropy",
    "engine": "auto",
    "client_chunk": None,
    "client_loss_samples": 0,
    "local_steps": None,
    "lr": {"name": "exponential", "lr0": 0.1, "decay": 0.998},
    "algorithm": {"name": "fedavg"},
}
#: training options added after results were first cached: a resolved configuration (hence
#: its cache key) holds them only when they differ from these defaults, so that adding one
#: never invalidates a cached result
OPTIONAL_TRAINING: dict[str, Any] = {
    "full_information": False,
    "record_clients": True,
    "screen_samples": 0,
    "screen_target": 0.0,
    "screen_margin": 0.015,
    # False: the final model is not part of the cached result (which stays small enough to
    # commit) but goes to ``<cache>/weights/<key>.npz``, a folder that is not committed
    "keep_params": True,
    "client_accuracy": False,
    "record_norms": True,
    # True: the cached result is stored gzip-compressed (result.json.gz), for grids whose
    # hundreds of runs are committed
    "compress": False,
}


def resolve_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with the training defaults filled in, checked (the cache key's input).

    Sections, each a dict with a ``name`` and options: ``dataset`` (:data:`DATASETS`),
    ``partition`` (:data:`PARTITIONS`; "n_clients", "seed", options), ``model``
    (:data:`models.MODELS`; "seed", options), ``sampler`` (:data:`SAMPLERS`; "seed", options)
    and ``training`` (:data:`TRAINING_DEFAULTS`, optional; its ``lr`` and ``algorithm`` are
    {"name", options} dicts naming entries of :data:`train.LR_SCHEDULES` and
    :data:`ALGORITHMS`); optionally ``availability`` (:data:`availability.AVAILABILITY`; "seed",
    options), which needs an availability-aware sampler. Everyone available (no section, or
    ``{"name": "always"}``) resolves to no section, the key of a run without one.

    Every configuration is checked before it is resolved (:mod:`aoi_fl.pipeline.config_checks`:
    types, names, options, ranges, the model against the dataset), without loading any data.
    NumPy numbers are taken as the Python numbers they equal (the same key).
    """
    plugins.load()  # names an installed package declares (entry points) are found from here on
    config_checks.require_mapping("config", config)
    unknown = set(config) - set(_SECTIONS)
    missing = set(_SECTIONS) - set(config) - _OPTIONAL_SECTIONS
    if unknown or missing:
        raise ValueError(
            f"config sections must be {list(_SECTIONS)} "
            f"({' and '.join(sorted(_OPTIONAL_SECTIONS))} optional); "
            f"unknown: {sorted(unknown)}, missing: {sorted(missing)}"
        )
    config = config_checks.plain(config)
    for section, spec in config.items():
        config_checks.require_mapping(f"config section {section!r}", spec)
    training = dict(config.get("training", {}))
    config_device(config)  # checked here; where a run trains is not part of its key
    training.pop("device", None)
    if extra := set(training) - set(TRAINING_DEFAULTS) - set(OPTIONAL_TRAINING):
        raise ValueError(
            f"unknown training options {sorted(extra)}; valid: "
            f"{list(TRAINING_DEFAULTS) + list(OPTIONAL_TRAINING)}"
        )
    for key, default in OPTIONAL_TRAINING.items():
        if key in training and type(training[key]) is type(default) and training[key] == default:
            del training[key]
    # config_checks.plain has copied every section already
    resolved = {s: dict(config[s]) for s in _SECTIONS if s not in _OPTIONAL_SECTIONS}
    resolved["training"] = {**copy.deepcopy(TRAINING_DEFAULTS), **training}
    if "availability" in config:
        canonical = config_checks.check_availability_section(config["availability"])
        if canonical["name"] == "trace":
            # the file's content, not only its path, is part of the key: an edited trace file
            # is another configuration (and a file that changed since is refused)
            resolved["availability"] = {**config["availability"], "sha256": canonical["sha256"]}
        elif canonical["name"] != "always":  # everyone available: the key of no section
            resolved["availability"] = dict(config["availability"])
    config_checks.check_config(resolved, DATASETS, PARTITIONS)
    return resolved


def client_sizes(config: Mapping[str, Any], data_root: str = "data") -> np.ndarray:
    """The clients' data sizes of a configuration's partition (read-only, cached per process).

    Needs only the dataset and the partition: no model or sampler is built.
    """
    c = resolve_config(config)
    dataset, partition = canonical_json(c["dataset"]), canonical_json(c["partition"])
    return cached_sizes(dataset, partition, str(data_root))


def config_device(config: Mapping[str, Any]) -> str | None:
    """The device a configuration names in ``training.device`` (checked), or None."""
    config_checks.require_mapping("config", config)
    training = config_checks.require_mapping(
        "config section 'training'", config.get("training", {})
    )
    name = training.get("device")
    return None if name is None else requested_device(name)


@dataclass(frozen=True)
class RunConfig:
    """One run's configuration, checked and resolved once (:meth:`parse`).

    ``text`` is the resolved configuration as canonical JSON (what the cache stores), ``key``
    its cache key (computed from ``text`` here, never given), ``device`` the device its
    ``training.device`` names (None: not named; where a run trains is not part of its key).
    Frozen and made of strings: it is the same in a worker process or a Ray task as here.
    """

    text: str
    device: str | None = None
    key: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", config_key(json.loads(self.text)))

    @classmethod
    def parse(cls, config: Mapping[str, Any] | RunConfig) -> RunConfig:
        """``config`` checked and resolved (:func:`resolve_config`); a RunConfig as it is."""
        if isinstance(config, RunConfig):
            return config
        resolved = resolve_config(config)
        return cls(canonical_json(resolved), config_device(config))

    def canonical(self) -> dict[str, Any]:
        """The resolved configuration (a new dict at each call: this one cannot change)."""
        return json.loads(self.text)
