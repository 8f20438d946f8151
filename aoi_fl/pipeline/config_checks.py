"""Checks of a run configuration that need no data: a bad configuration fails before any work.

A mistake found after the dataset is loaded costs seconds, one found after training costs the
run, and in a grid every run before the bad one is trained and cached first. So
:func:`aoi_fl.pipeline.runs.resolve_config` runs these checks on every configuration, and a grid
checks all of its configurations before it trains one:

- :func:`plain`: the values are JSON (NumPy numbers become Python's, so that they give the same
  cache key) and no number is written as a string (``"0.5"`` would be stored under another key
  than ``0.5``: the same run cached twice);
- :func:`check_config`: names; every option against the signature of what it configures
  (unknown and missing options are reported with the valid ones; the type an annotation names;
  seeds; the ranges of partition options); dry runs of the sampler, the algorithm, the training
  settings and the learning-rate schedule (every round's rate); the model against the dataset's
  facts (:mod:`aoi_fl.data.facts`: one forward pass of a zero sample, outputs against classes,
  loss against the task, the engine);
- memory: every option that sets how much a run allocates (generated samples, rounds, local
  steps and their mini-batch schedules, a Markov sampler's m', an availability model's states)
  against the machine's memory (:func:`aoi_fl.core.validation.require_memory`: a lower bound
  of the bytes, its formula in the message); what only the data can tell (a partition's total
  and clients against the training samples) against the dataset's facts;
- the sampler's first round (it must build a :class:`~aoi_fl.core.selection.Sampler` that
  selects among the clients; a user's factory that fails is named), the learning-rate schedule
  in closed form (:meth:`~aoi_fl.core.train._Schedule.first_outside`: no loop over rounds).

Values that are legal but almost surely a mistake give a :class:`ConfigWarning` and run: more
samples asked than the dataset holds, a batch over :data:`BATCH_SLACK` times the dataset, a
learning rate above :data:`PLAUSIBLE_LR`, a sampler tuned for another number of rounds
(:data:`aoi_fl.core.registry.HORIZONS`), availability that lets nobody take part in any round.

Every message names the parameter by its path in the configuration (``sampler.m``,
``training.lr``). Dry runs are cached per specification: a grid repeats its models and samplers.

The checks live by section: :mod:`~aoi_fl.pipeline.config_values` (:func:`plain`),
:mod:`~aoi_fl.pipeline.config_options` (names, options, dry runs),
:mod:`~aoi_fl.pipeline.config_data` (dataset, partition),
:mod:`~aoi_fl.pipeline.config_selection` (sampler, availability),
:mod:`~aoi_fl.pipeline.config_training` and :mod:`~aoi_fl.pipeline.config_model`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aoi_fl.pipeline.config_data import (
    MIN_SIZE_FLOOR,
    PARTITION_RANGES,
    _dataset,
    _partition,
    check_natural,
)
from aoi_fl.pipeline.config_model import TASK_LOSS, _model
from aoi_fl.pipeline.config_options import ConfigWarning, Table
from aoi_fl.pipeline.config_selection import (
    SAMPLER_MEMORY,
    _availability,
    _availability_rounds,
    _horizon,
    check_availability_section,
    check_sampler,
)
from aoi_fl.pipeline.config_training import (
    BATCH_SLACK,
    HISTORY_BYTES_PER_ROUND,
    PLAUSIBLE_LR,
    SETTINGS,
    _training,
)
from aoi_fl.pipeline.config_values import plain, require_mapping

# the checks live by section in the modules above; callers import them from here
__all__ = [
    "BATCH_SLACK",
    "HISTORY_BYTES_PER_ROUND",
    "MIN_SIZE_FLOOR",
    "PARTITION_RANGES",
    "PLAUSIBLE_LR",
    "SAMPLER_MEMORY",
    "SETTINGS",
    "TASK_LOSS",
    "ConfigWarning",
    "Table",
    "check_availability_section",
    "check_config",
    "check_natural",
    "check_sampler",
    "plain",
    "require_mapping",
]


def check_config(config: Mapping[str, Any], datasets: Table, partitions: Table) -> None:
    """Raise unless the resolved ``config`` can run (see the module docstring); reads no data.

    ``datasets`` and ``partitions`` are the name -> function tables of
    :mod:`aoi_fl.pipeline.runs`.
    """
    dataset = config["dataset"]
    facts = _dataset(dataset, datasets)
    n_clients, smallest = _partition(config["partition"], partitions, dataset["name"], facts)
    check_sampler(config["sampler"], n_clients)
    _availability(config.get("availability"), config["sampler"]["name"], n_clients)
    _training(config["training"], n_clients, smallest, facts)
    _model(config["model"], config["training"], dataset["name"], facts)
    rounds = config["training"]["rounds"]
    _horizon(config["sampler"], rounds)
    _availability_rounds(config.get("availability"), n_clients, rounds)
