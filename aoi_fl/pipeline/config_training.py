"""The training section: its settings, the learning-rate schedule over every round, the
algorithm, and the memory the run's length and local steps take."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from aoi_fl.core import registry
from aoi_fl.core.train import LR_SCHEDULES, TrainSettings
from aoi_fl.core.validation import require_memory
from aoi_fl.data.facts import DatasetFacts
from aoi_fl.pipeline.cache import canonical_json
from aoi_fl.pipeline.config_options import (
    Table,
    _check_options,
    _dry_run,
    _name,
    _options,
    _parameters,
    _warn,
)

#: the learning rates float32 parameters can step with: a larger rate overflows in the first
#: step, a smaller one is 0
_FLOAT32_RATES = (float(np.finfo(np.float32).smallest_subnormal), float(np.finfo(np.float32).max))
#: the training options that are :class:`TrainSettings` fields (the others configure the run)
SETTINGS = tuple(f.name for f in dataclasses.fields(TrainSettings))
#: the largest learning rate that is not almost surely a mistake: SGD diverges beyond 2/L,
#: and on the normalised data here the smoothness L of the loss is about 1 or more (the
#: papers train with 0.001 to 0.1)
PLAUSIBLE_LR = 10.0
#: how many times the whole training set a batch may hold without a warning: any batch of at
#: least the data trains the same (full batch), but the mini-batch schedules are padded to it
BATCH_SLACK = 10
#: the least history a round adds (its learning rate, a float in a list: 8 + 24 bytes)
HISTORY_BYTES_PER_ROUND = 32


def _named(label: str, path: str, spec: Any, table: Table) -> tuple[Callable[..., Any], dict]:
    if not isinstance(spec, Mapping):
        raise ValueError(f"{label} must be a dict with a 'name', got {spec!r}")
    name = _name(path, label, spec, table)
    options = _options(spec)
    _check_options(path, name, options, _parameters(table[name], 0))
    return table[name], options


def _lr(spec: Any, rounds: int) -> None:
    """Every round's rate within :data:`_FLOAT32_RATES` (in O(log rounds) rates,
    :meth:`~aoi_fl.core.train._Schedule.first_outside`); a warning above :data:`PLAUSIBLE_LR`."""
    factory, options = _named("training lr", "training.lr", spec, LR_SCHEDULES)
    schedule = _dry_run("training.lr", options, lambda: factory(**options))
    bad = schedule.first_outside(*_FLOAT32_RATES, rounds)
    if bad is not None:
        raise ValueError(
            f"training.lr={dict(spec)!r} gives the learning rate {bad[1]!r} in round {bad[0]}; "
            f"the rate of every round 0..{rounds - 1} must be within [{_FLOAT32_RATES[0]:.3g}, "
            f"{_FLOAT32_RATES[1]:.4g}] (> 0 and finite in float32)"
        )
    if rounds and (first := float(schedule(0))) > PLAUSIBLE_LR:
        _warn(
            f"training.lr={dict(spec)!r} starts at the learning rate {first!r}, more than "
            f"{PLAUSIBLE_LR}: SGD almost surely diverges (the papers train with 0.001 to 0.1)"
        )


@functools.lru_cache(maxsize=1024)
def _algorithm_dry_run(factory: Callable[..., Any], options_json: str, n_clients: int) -> None:
    algorithm = factory(**json.loads(options_json))
    # the per-client state of a one-number model: the algorithm's own checks against the
    # number of clients (e.g. one weight per client) at no cost in memory
    algorithm.setup(n_clients, {"placeholder": torch.zeros(1)})


def _algorithm(training: Mapping[str, Any], n_clients: int) -> None:
    factory, options = _named(
        "training algorithm", "training.algorithm", training["algorithm"], registry.ALGORITHMS
    )
    # an algorithm option that is also a training setting describes the same thing (FedSUM's
    # local_steps: its correction assumes the clients take exactly that many steps)
    for key in sorted(set(options) & set(training)):
        if options[key] != training[key]:
            raise ValueError(
                f"training.algorithm.{key}={options[key]!r} differs from "
                f"training.{key}={training[key]!r}; they must be equal"
            )
    _dry_run(
        "training.algorithm",
        options,
        lambda: _algorithm_dry_run(factory, canonical_json(options), n_clients),
    )


def _training_memory(t: TrainSettings, smallest: int) -> None:
    """The memory the run's length and its clients' local steps imply (lower bounds).

    The history keeps :data:`HISTORY_BYTES_PER_ROUND` per round at least. A client trains from
    an int64 schedule of its mini-batches (:mod:`aoi_fl.core.engines`): ``local_steps`` rows of
    min(batch_size, its samples), or ``local_epochs`` epochs of rows padded to batch_size
    (>= max(batch_size, its samples) entries each); every client has at least ``smallest``
    samples (:func:`~aoi_fl.pipeline.config_data._smallest_client`).
    """
    require_memory(
        {"training.rounds": t.rounds},
        lambda rounds: HISTORY_BYTES_PER_ROUND * rounds,
        f"{HISTORY_BYTES_PER_ROUND} bytes * rounds: every round's learning rate in the history",
    )
    if t.local_steps is not None:
        width = min(t.batch_size, max(smallest, 1))  # a client without samples cannot step
        require_memory(
            {"training.local_steps": t.local_steps},
            lambda steps: 8 * steps * width,
            f"8 bytes * local_steps * {width} (min(batch_size, the smallest client's {smallest} "
            "samples)): one client's mini-batch schedule of a round",
        )
    elif smallest:
        require_memory(
            {"training.local_epochs": t.local_epochs, "training.batch_size": t.batch_size},
            lambda epochs, batch: 8 * epochs * max(batch, smallest),
            f"8 bytes * local_epochs * max(batch_size, {smallest}, the smallest client's "
            "samples): one client's mini-batch schedule of a round",
        )


def _training(
    training: Mapping[str, Any], n_clients: int, smallest: int, facts: DatasetFacts | None
) -> None:
    settings = {k: v for k, v in training.items() if k in SETTINGS}
    checked = _dry_run("training", settings, lambda: TrainSettings(**settings))
    for key in ("keep_params", "compress"):
        if not isinstance(training.get(key, False), bool):
            raise TypeError(f"training.{key} must be True or False, got {training[key]!r}")
    _training_memory(checked, smallest)
    _lr(training["lr"], checked.rounds)
    _algorithm(training, n_clients)
    samples = None if facts is None else facts.train_samples
    if samples is not None and checked.batch_size > BATCH_SLACK * samples:
        _warn(
            f"training.batch_size={checked.batch_size} is more than {BATCH_SLACK} times the "
            f"{samples} training samples of the whole dataset: every local step takes all of a "
            f"client's samples (full batch), as with batch_size={samples}, but the mini-batch "
            f"schedules are padded to batch_size; allowed without this warning: 1.."
            f"{BATCH_SLACK * samples}"
        )
