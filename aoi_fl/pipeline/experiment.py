"""One run: its trainer built, resumed from its checkpoint, trained and stored in the cache.

:func:`run_experiment` trains one configuration; :func:`run_batch` trains several together
(:class:`~aoi_fl.core.batch.RunBatch`), each with the numbers it has alone, for
:func:`aoi_fl.pipeline.runs.run_grid` in this process or in a spawned worker.
"""

from __future__ import annotations

import copy
import numbers
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from aoi_fl.core import registry
from aoi_fl.core.batch import RunBatch
from aoi_fl.core.device import requested_device, resolve_device
from aoi_fl.core.models import build_model
from aoi_fl.core.train import FederatedTrainer, rounds_to_target
from aoi_fl.core.validation import (
    renamed,
    require_bool,
    require_folder,
    require_int,
)
from aoi_fl.pipeline import plugins
from aoi_fl.pipeline.cache import CheckpointStore, ResultStore
from aoi_fl.pipeline.parts import (
    availability_model,
    built,
    federated_data,
    full_information_recorder,
    training_parts,
)
from aoi_fl.pipeline.resolve import RunConfig


def build_trainer(
    config: Mapping[str, Any] | RunConfig, data_root: str = "data", device: str | None = None
) -> FederatedTrainer:
    """The :class:`FederatedTrainer` a configuration describes (see
    :func:`~aoi_fl.pipeline.resolve.resolve_config`; a :class:`RunConfig` is not resolved
    again), on ``device``, else the configuration's ``training.device``, else
    ``$AOI_FL_DEVICE``, else ``auto``."""
    run = RunConfig.parse(config)
    c = run.canonical()
    device = run.device if device is None else device
    data = federated_data(c, data_root)
    model_spec = dict(c["model"])
    model = build_model(model_spec.pop("name"), **model_spec)
    sampler = built(c["sampler"], registry.SAMPLERS, len(data.partition), data.sizes)
    settings, lr_schedule, algorithm = training_parts(c["training"])
    availability = availability_model(c, len(data.partition), data.sizes)
    return FederatedTrainer(
        model,
        data,
        sampler,
        settings,
        lr_schedule=lr_schedule,
        algorithm=algorithm,
        recorder=full_information_recorder() if settings.full_information else None,
        device=device,
        availability=availability,
    )


@dataclass(frozen=True)
class ExperimentResult:
    """A finished run: its resolved config, records, final model (the reported one: the last
    global model, or the averaged iterate of an algorithm that reports it), sampler config and
    the device that trained it (results cached before devices were recorded all trained on the
    CPU)."""

    key: str
    config: dict
    history: dict
    final_params: dict[str, np.ndarray]
    sampler: dict
    cached: bool
    device: str = "cpu"

    def rounds_to_target(self, target: float) -> int | None:
        h = self.history
        return rounds_to_target(h["test_accuracy"], target, rounds=h["eval_round"])


def result_from_cache(run: RunConfig, hit: tuple[dict, dict[str, np.ndarray]]) -> ExperimentResult:
    """The result of ``run`` from its cache entry ``hit`` (its key was computed when it was
    parsed)."""
    result, arrays = hit
    return ExperimentResult(
        run.key,
        run.canonical(),
        result["history"],
        arrays,
        result["sampler"],
        True,
        result.get("device", "cpu"),
    )


def require_writable(results_dir: str) -> None:
    """Fail before a run trains, not when its result is stored, if it could not be stored."""
    try:
        ResultStore(results_dir).check_writable()
    except OSError as exc:
        raise ValueError(
            f"results_dir={str(results_dir)!r} must be writable to store new runs: {exc}; make it "
            "writable or pass another results_dir"
        ) from exc


@renamed("cache_dir", "results_dir")
def run_experiment(
    config: Mapping[str, Any] | RunConfig,
    *,
    results_dir: str = "results",
    rerun: bool = False,
    progress: bool = True,
    data_root: str = "data",
    checkpoint_every: int = 5,
    checkpoint_seconds: float = 30.0,
    device: str | None = None,
) -> ExperimentResult:
    """The cached result of ``config``, or compute it (resuming from its latest checkpoint).

    A checkpoint is written after a round that is a multiple of ``checkpoint_every`` once
    ``checkpoint_seconds`` have passed since the last one (or since the start): a run killed
    mid-way loses at most about that much work, and cheap rounds (a few milliseconds for a
    linear model) are not slowed down by writing their state every few rounds. A run started
    again continues from the checkpoint and ends with exactly the numbers of an uninterrupted
    run.
    ``rerun=True`` ignores the cached result and any checkpoint and trains from scratch.
    ``device`` (else the configuration's ``training.device``, ``$AOI_FL_DEVICE``, ``auto``) is
    where a missing result is computed; a checkpoint written on another device resumes here.
    """
    run = RunConfig.parse(config)
    resolved = run.canonical()
    device = run.device if device is None else requested_device(device)
    results_dir = require_folder("results_dir", results_dir)
    rerun, progress = require_bool("rerun", rerun), require_bool("progress", progress)
    checkpoint_every = require_int("checkpoint_every", checkpoint_every, minimum=1)
    if isinstance(checkpoint_seconds, bool) or not isinstance(checkpoint_seconds, numbers.Real):
        raise TypeError(
            f"checkpoint_seconds must be a number of seconds, got {checkpoint_seconds!r} "
            f"({type(checkpoint_seconds).__name__})"
        )
    if not checkpoint_seconds >= 0:  # inf: checkpoints by the round count alone
        raise ValueError(f"checkpoint_seconds must be >= 0, got {checkpoint_seconds!r}")
    results = ResultStore(results_dir)
    if not rerun and (hit := results.load(resolved)) is not None:
        return result_from_cache(run, hit)
    resolve_device(device)  # a GPU that is not there, refused before the data load
    require_writable(results_dir)
    trainer, checkpoints = _resumed_trainer(run, results_dir, rerun, data_root, device)
    history = trainer.run(
        progress=progress, on_round=_checkpointer(checkpoints, checkpoint_every, checkpoint_seconds)
    )
    return _stored(run, trainer, history, results, checkpoints)


def _resumed_trainer(
    run: RunConfig, results_dir: str, rerun: bool, data_root: str, device: str | None
) -> tuple[FederatedTrainer, CheckpointStore]:
    """The trainer of a missing run, resumed from its latest checkpoint (``rerun``: cleared)."""
    checkpoints = CheckpointStore(results_dir, run.canonical())
    if rerun:
        checkpoints.clear()
    trainer = build_trainer(run, data_root, device)
    if (checkpoint := checkpoints.load()) is not None:
        _, tensors, state = checkpoint
        try:
            trainer.load_state_dict(tensors, state)
        # a state that does not fit the run may fail anywhere in a sampler's or an algorithm's
        # loader; it costs the rounds the checkpoint saved, never the run
        except Exception as exc:
            checkpoints.ignore(checkpoints.folder / "latest.json", exc)
            # loading may have changed some parts
            trainer = build_trainer(run, data_root, device)
    return trainer, checkpoints


def _checkpointer(
    checkpoints: CheckpointStore, every: int, seconds: float
) -> Callable[[FederatedTrainer], None]:
    """Saves a run's state after a round that is a multiple of ``every`` once ``seconds`` have
    passed since the last save (see :func:`run_experiment`)."""
    last_saved = time.monotonic()

    def save(tr: FederatedTrainer) -> None:
        nonlocal last_saved
        due = time.monotonic() - last_saved >= seconds
        if due and tr.round % every == 0 and tr.round < tr.settings.rounds:
            checkpoints.save(tr.round, *tr.state_dict())
            last_saved = time.monotonic()

    return save


def _stored(
    run: RunConfig,
    trainer: FederatedTrainer,
    history: dict,
    results: ResultStore,
    checkpoints: CheckpointStore,
) -> ExperimentResult:
    """Store a finished run in the cache, clear its checkpoints, and return it."""
    resolved = run.canonical()
    final = {k: v.cpu().numpy() for k, v in trainer.reported_params().items()}
    sampler = trainer.sampler.config()
    result = {
        "history": history,
        "sampler": sampler,
        "torch_version": torch.__version__,
        "device": str(trainer.device),
        "engine": trainer.local.engine,
    }
    if resolved["training"].get("keep_params", True):
        results.save(resolved, result, final)
    else:
        results.save(resolved, result, weights=final)
        final = {}  # as a later cache hit gives it
    checkpoints.clear()
    return ExperimentResult(
        run.key,
        resolved,
        copy.deepcopy(history),
        final,
        sampler,
        False,
        str(trainer.device),
    )


class DeadlineReached(RuntimeError):
    """``run_grid(deadline=...)`` ended before every run was trained: the finished runs are
    stored, every unfinished one is checkpointed (the same call later resumes them)."""


def run_batch(
    args: tuple[list[RunConfig], str, bool, str, int | None, str | None, tuple, float | None],
    on_stored: Callable[[int], None] | None = None,
) -> int:
    """Train the missing runs ``runs`` together (:class:`RunBatch`), each resumed from its
    checkpoint, checkpointed as alone and stored in the cache as soon as it has finished
    (then ``on_stored(i)``, for configuration i of the batch). At the ``deadline`` (seconds
    since the epoch, None: none) every unfinished run is checkpointed; returns how many."""
    runs, results_dir, rerun, data_root, threads, device, shipped, deadline = args
    if deadline is not None and time.time() >= deadline:  # queued in a worker past it
        return len(runs)
    plugins.install(shipped)  # in a spawned worker: the user's registrations
    if threads is not None:
        torch.set_num_threads(threads)
    results = ResultStore(results_dir)
    started = [_resumed_trainer(run, results_dir, rerun, data_root, device) for run in runs]
    trainers = [trainer for trainer, _ in started]
    savers = [_checkpointer(checkpoints, 5, 30.0) for _, checkpoints in started]

    def finish(i: int, trainer: FederatedTrainer) -> None:
        _stored(runs[i], trainer, trainer.history, results, started[i][1])
        if on_stored is not None:
            on_stored(i)

    unfinished = RunBatch(trainers).run(
        on_round=lambda i, tr: savers[i](tr),
        on_finish=finish,
        stop=None if deadline is None else lambda: time.time() >= deadline,
    )
    for i in unfinished:
        if trainers[i].round:
            started[i][1].save(trainers[i].round, *trainers[i].state_dict())
    return len(unfinished)
