"""Training runs from configurations, cached on disk (:func:`run_experiment`).

A configuration is a JSON-serialisable dict with the sections ``dataset``, ``partition``,
``model``, ``sampler``, ``training`` and, optionally, ``availability`` (see
:func:`resolve_config`). Its resolved form (defaults
filled in) is the key of the result cache (:mod:`aoi_fl.pipeline.cache`): the same configuration is
never trained twice, an interrupted run resumes from its latest checkpoint, and a corrupt entry is
recomputed.

Where a run trains (:mod:`aoi_fl.core.device`) is not part of its key: ``training.device`` in a
configuration, the ``device`` argument of :func:`run_experiment` / :func:`run_grid` or
``$AOI_FL_DEVICE`` choose it, and a cached result is served whatever device computed it. The
device that did is recorded with the result (:attr:`ExperimentResult.device`).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import multiprocessing as mp
import os
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from aoi_fl.core import registry
from aoi_fl.core.algorithms import Algorithm
from aoi_fl.core.availability import build_availability
from aoi_fl.core.batch import RunBatch
from aoi_fl.core.device import requested_device
from aoi_fl.core.models import build_model
from aoi_fl.core.train import (
    LR_SCHEDULES,
    FederatedData,
    FederatedTrainer,
    TrainSettings,
    rounds_to_target,
)
from aoi_fl.core.validation import require_choice, require_int, require_real
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
from aoi_fl.pipeline import batching, config_checks, plugins
from aoi_fl.pipeline.cache import (
    CheckpointStore,
    ResultStore,
    canonical_json,
    config_key,
)
from aoi_fl.pipeline.executors import EXECUTOR_VAR, EXECUTORS


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


def _built(spec: Mapping[str, Any], table: Mapping[str, Callable[..., Any]], *args: Any) -> Any:
    """What the (checked) ``spec`` names in ``table``, built from ``args`` and its options."""
    options = dict(spec)
    return table[options.pop("name")](*args, **options)


def _training_parts(
    t: Mapping[str, Any],
) -> tuple[TrainSettings, Callable[[int], float], Algorithm]:
    settings = TrainSettings(**{k: v for k, v in t.items() if k in config_checks.SETTINGS})
    return settings, _built(t["lr"], LR_SCHEDULES), _built(t["algorithm"], ALGORITHMS)


#: sampler name -> function(n, sizes, **options) -> Sampler (``sizes``: the clients' data sizes)
#: and algorithm name -> constructor(**options): the registries of :mod:`aoi_fl.core.registry`,
#: complete once :func:`plugins.load` (called at the end of this module) has imported the papers
SAMPLERS = registry.SAMPLERS
ALGORITHMS = registry.ALGORITHMS


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


@functools.lru_cache(maxsize=2)
def load_bundle(dataset_json: str, data_root: str) -> DatasetBundle:
    """The dataset a configuration's ``dataset`` section (canonical JSON) names.

    Kept for the next runs of the same process (grids run many configurations on one dataset;
    loading and normalising MNIST takes seconds). Its tensors are never modified.
    """
    spec = json.loads(dataset_json)
    return DATASETS[spec.pop("name")](data_root, **spec)


def _federated_data(c: Mapping[str, Any], data_root: str) -> FederatedData:
    """The clients' data of a resolved configuration."""
    bundle = load_bundle(canonical_json(c["dataset"]), str(data_root))
    part = dict(c["partition"])
    partition = PARTITIONS[part.pop("name")](bundle, **part)
    return FederatedData(bundle.train, bundle.test, partition)


@functools.lru_cache(maxsize=64)
def _sizes(dataset_json: str, partition_json: str, data_root: str) -> np.ndarray:
    c = {"dataset": json.loads(dataset_json), "partition": json.loads(partition_json)}
    sizes = _federated_data(c, data_root).sizes
    sizes.flags.writeable = False  # shared by every caller (cached)
    return sizes


def client_sizes(config: Mapping[str, Any], data_root: str = "data") -> np.ndarray:
    """The clients' data sizes of a configuration's partition (read-only, cached per process).

    Needs only the dataset and the partition: no model or sampler is built.
    """
    c = resolve_config(config)
    return _sizes(canonical_json(c["dataset"]), canonical_json(c["partition"]), str(data_root))


def config_device(config: Mapping[str, Any]) -> str | None:
    """The device a configuration names in ``training.device`` (checked), or None."""
    config_checks.require_mapping("config", config)
    training = config_checks.require_mapping(
        "config section 'training'", config.get("training", {})
    )
    name = training.get("device")
    return None if name is None else requested_device(name)


def build_trainer(
    config: Mapping[str, Any], data_root: str = "data", device: str | None = None
) -> FederatedTrainer:
    """The :class:`FederatedTrainer` a configuration describes (see :func:`resolve_config`),
    on ``device``, else the configuration's ``training.device``, else ``$AOI_FL_DEVICE``, else
    ``auto``."""
    c = resolve_config(config)
    device = config_device(config) if device is None else device
    data = _federated_data(c, data_root)
    model_spec = dict(c["model"])
    model = build_model(model_spec.pop("name"), **model_spec)
    sampler = _built(c["sampler"], SAMPLERS, len(data.partition), data.sizes)
    settings, lr_schedule, algorithm = _training_parts(c["training"])
    availability = _availability(c, len(data.partition), data.sizes)
    return FederatedTrainer(
        model,
        data,
        sampler,
        settings,
        lr_schedule=lr_schedule,
        algorithm=algorithm,
        recorder=_recorder() if settings.full_information else None,
        device=device,
        availability=availability,
    )


def _availability(c: Mapping[str, Any], n: int, sizes: np.ndarray) -> Any:
    spec = c.get("availability")
    if spec is None:
        return None
    return build_availability(spec, n, sizes)


def _recorder() -> Any:
    # the full-information mode's per-round metrics are a paper's (K-Vib's), registered by it
    mode = require_choice("training mode", "full_information", registry.RECORDERS)
    return registry.RECORDERS[mode]


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


def _cached(resolved: dict, hit: tuple[dict, dict[str, np.ndarray]]) -> ExperimentResult:
    result, arrays = hit
    key = config_key(resolved)
    return ExperimentResult(
        key,
        resolved,
        result["history"],
        arrays,
        result["sampler"],
        True,
        result.get("device", "cpu"),
    )


def _require_writable(cache_dir: str) -> None:
    """Fail before a run trains, not when its result is stored, if it could not be stored."""
    try:
        ResultStore(cache_dir).check_writable()
    except OSError as exc:
        raise ValueError(
            f"cache_dir={str(cache_dir)!r} must be writable to store new runs: {exc}; make it "
            "writable or pass another cache_dir"
        ) from exc


def run_experiment(
    config: Mapping[str, Any],
    *,
    cache_dir: str = "results",
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
    resolved = resolve_config(config)
    device = config_device(config) if device is None else requested_device(device)
    checkpoint_every = require_int("checkpoint_every", checkpoint_every, minimum=1)
    if not checkpoint_seconds >= 0:
        raise ValueError(f"checkpoint_seconds must be >= 0, got {checkpoint_seconds!r}")
    results = ResultStore(cache_dir)
    if not rerun and (hit := results.load(resolved)) is not None:
        return _cached(resolved, hit)
    _require_writable(cache_dir)
    trainer, checkpoints = _resumed_trainer(resolved, cache_dir, rerun, data_root, device)
    history = trainer.run(
        progress=progress, on_round=_checkpointer(checkpoints, checkpoint_every, checkpoint_seconds)
    )
    return _stored(resolved, trainer, history, results, checkpoints)


def _resumed_trainer(
    resolved: dict, cache_dir: str, rerun: bool, data_root: str, device: str | None
) -> tuple[FederatedTrainer, CheckpointStore]:
    """The trainer of a missing run, resumed from its latest checkpoint (``rerun``: cleared)."""
    checkpoints = CheckpointStore(cache_dir, resolved)
    if rerun:
        checkpoints.clear()
    trainer = build_trainer(resolved, data_root, device)
    if (checkpoint := checkpoints.load()) is not None:
        _, tensors, state = checkpoint
        try:
            trainer.load_state_dict(tensors, state)
        # a state that does not fit the run may fail anywhere in a sampler's or an algorithm's
        # loader; it costs the rounds the checkpoint saved, never the run
        except Exception as exc:
            checkpoints.ignore(checkpoints.folder / "latest.json", exc)
            # loading may have changed some parts
            trainer = build_trainer(resolved, data_root, device)
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
    resolved: dict,
    trainer: FederatedTrainer,
    history: dict,
    results: ResultStore,
    checkpoints: CheckpointStore,
) -> ExperimentResult:
    """Store a finished run in the cache, clear its checkpoints, and return it."""
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
        config_key(resolved),
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


def _run_batch(
    args: tuple[list[dict], str, bool, str, int | None, str | None, tuple, float | None],
    on_stored: Callable[[int], None] | None = None,
) -> int:
    """Train the missing runs ``configs`` together (:class:`RunBatch`), each resumed from its
    checkpoint, checkpointed as alone and stored in the cache as soon as it has finished
    (then ``on_stored(i)``, for configuration i of the batch). At the ``deadline`` (seconds
    since the epoch, None: none) every unfinished run is checkpointed; returns how many."""
    configs, cache_dir, rerun, data_root, threads, device, shipped, deadline = args
    if deadline is not None and time.time() >= deadline:  # queued in a worker past it
        return len(configs)
    plugins.install(shipped)  # in a spawned worker: the user's registrations
    if threads is not None:
        torch.set_num_threads(threads)
    results = ResultStore(cache_dir)
    started = [_resumed_trainer(c, cache_dir, rerun, data_root, device) for c in configs]
    trainers = [trainer for trainer, _ in started]
    savers = [_checkpointer(checkpoints, 5, 30.0) for _, checkpoints in started]

    def finish(i: int, trainer: FederatedTrainer) -> None:
        _stored(configs[i], trainer, trainer.history, results, started[i][1])
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


def cached_results(
    configs: Iterable[dict[str, Any]], *, cache_dir: str = "results"
) -> tuple[list[ExperimentResult], int]:
    """(the results of ``configs`` already in the cache, in order; how many are missing).

    For looking at a grid while it is still being computed (over several sittings); nothing
    is trained.
    """
    store = ResultStore(cache_dir)
    found, missing = [], 0
    for config in configs:
        resolved = resolve_config(config)
        if (hit := store.load(resolved)) is None:
            missing += 1
        else:
            found.append(_cached(resolved, hit))
    return found, missing


def run_grid(
    configs: Iterable[dict[str, Any]],
    *,
    cache_dir: str = "results",
    rerun: bool = False,
    data_root: str = "data",
    workers: int = 1,
    threads: int | None = None,
    progress: bool = True,
    on_result: Callable[[int, ExperimentResult], None] | None = None,
    device: str | None = None,
    executor: str | None = None,
    ray_address: str | None = None,
    batch: int | None = None,
    deadline: float | None = None,
) -> list:
    """Results of ``configs`` (in order): cached ones are read, missing ones computed.

    With ``workers > 1`` the missing runs go to that many processes, each with ``threads``
    torch threads (on a 2-core machine two single-threaded workers train small models faster
    than one two-threaded process); with one worker they run in this process, whose thread
    setting is left alone. Every run checkpoints, so an interrupted grid resumes.

    ``on_result(i, result)`` is called once per configuration as soon as its result exists
    (cached ones first, then computed ones in the order they finish), so a caller can keep
    what a grid has finished even if the grid is interrupted later.

    ``device`` is where missing runs train (see :func:`run_experiment`); each configuration's
    own ``training.device`` applies when it is None.

    ``executor`` (default ``$AOI_FL_EXECUTOR``, else ``"local"``; ``make figures EXECUTOR=ray``
    sets it) ``"ray"`` sends the missing runs to Ray instead (:mod:`aoi_fl.pipeline.ray_grid`;
    optional extra ``ray``): ``ray_address`` (default ``$RAY_ADDRESS``, else ``"local"``: a
    local instance of ``workers`` CPUs) names the cluster, each task takes ``threads`` CPUs (1 if
    None), and results come back to this process, which stores them in ``cache_dir``.

    Locally, missing runs that can share a batch (one dataset, model architecture, device,
    local-work shape and method: :mod:`aoi_fl.pipeline.batching`) train together, as one
    computation (:class:`~aoi_fl.core.batch.RunBatch`), each with the numbers it has alone;
    ``batch`` (default ``$AOI_FL_BATCH``, else a rule from the free memory) is the most runs a
    batch takes (1: every run alone). With ``workers > 1`` each worker trains whole batches.
    Ray tasks train one run each.

    ``deadline`` (seconds since the epoch, as ``time.time()``; local executor only) ends the
    grid there: no batch starts after it, the batches running stop after their current round
    with every unfinished run checkpointed, and :class:`DeadlineReached` says how many runs
    are left (the finished ones are stored and passed to ``on_result``).
    """
    executor = executor or os.environ.get(EXECUTOR_VAR) or "local"
    require_choice("executor", executor, EXECUTORS)
    given = list(configs)
    configs = [resolve_config(c) for c in given]  # every one checked before any trains
    devices = [config_device(c) if device is None else requested_device(device) for c in given]
    workers = require_int("workers", workers, minimum=1)
    batching.batch_cap(batch)  # checked here, before anything is read or trained
    if deadline is not None:
        require_real("deadline", deadline)
    if threads is not None:  # each worker's torch.set_num_threads(threads)
        threads = require_int("threads", threads, minimum=1)
    store = ResultStore(cache_dir)
    results: dict[int, ExperimentResult] = {}

    def finish(i: int, hit: tuple | None = None) -> None:
        # a run trained just now is read back from the cache, as a cached one was read already
        trained = hit is None
        hit = store.load(configs[i]) if trained else hit
        if hit is None:  # stored by the run a moment ago, unreadable now (warned about above)
            raise RuntimeError(
                f"the result of configuration {i} (key {config_key(configs[i])}) was trained but "
                f"cannot be read back from {cache_dir}; rerun the grid to recompute it"
            )
        results[i] = dataclasses.replace(_cached(configs[i], hit), cached=not trained)
        if on_result is not None:
            on_result(i, results[i])

    loaded = {} if rerun else {i: store.load(c) for i, c in enumerate(configs)}
    hits = {i: hit for i, hit in loaded.items() if hit is not None}
    todo = [i for i in range(len(configs)) if i not in hits]
    if todo:
        _require_writable(cache_dir)
    # what other processes need of the user's registrations, refused here if they cannot have it
    on_ray = executor == "ray"
    apart = bool(todo) and (on_ray or workers > 1)
    shipped = plugins.shipped((configs[i] for i in todo), by_value=on_ray) if apart else ()
    for i, hit in hits.items():
        finish(i, hit)
    own = threads if workers > 1 else None
    if on_ray and todo:
        from aoi_fl.pipeline.ray_grid import ray_results, store_result

        address = ray_address or os.environ.get("RAY_ADDRESS") or "local"
        results_iter = ray_results(
            {i: (configs[i], devices[i]) for i in todo},
            run=run_experiment,
            shipped=shipped,
            data_root=data_root,
            address=address,
            num_cpus=workers,
            threads=threads or 1,
        )
        for i, stored, arrays, weights in _progress(results_iter, progress, "runs", len(todo)):
            store_result(cache_dir, configs[i], stored, arrays, weights)
            finish(i)
        return [results[i] for i in range(len(configs))]
    if deadline is not None and on_ray:
        raise ValueError("deadline needs executor='local' (Ray tasks train whole runs)")
    groups = _batches(todo, configs, devices, batch)
    jobs = [
        (
            [configs[i] for i in group],
            cache_dir,
            rerun,
            data_root,
            own,
            devices[group[0]],
            shipped,
            deadline,
        )
        for group in groups
    ]
    left = 0
    bar = _bar(progress and bool(todo), len(todo))
    if workers == 1 or len(jobs) <= 1:
        for group, job in zip(groups, jobs, strict=True):

            def stored(j: int, group: list[int] = group) -> None:
                finish(group[j])
                bar.update(1)

            if deadline is not None and time.time() >= deadline:
                left += len(group)
                continue
            left += _run_batch(job, stored)
    elif jobs:
        ctx = mp.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures = {pool.submit(_run_batch, job): g for job, g in zip(jobs, groups, strict=True)}
            for future in as_completed(futures):
                unfinished = future.result()  # a failed run raises here
                left += unfinished
                for i in futures[future]:
                    if store.load(configs[i]) is not None:
                        finish(i)
                bar.update(len(futures[future]) - unfinished)
    bar.close()
    if left:
        raise DeadlineReached(
            f"deadline reached: {len(todo) - left} of {len(todo)} missing runs trained and "
            f"stored in {cache_dir}, {left} left (checkpointed; run the grid again to resume)"
        )
    return [results[i] for i in range(len(configs))]


def _batches(
    todo: list[int], configs: list[dict], devices: list[str | None], batch: int | None
) -> list[list[int]]:
    """The missing runs ``todo`` cut into batches (:mod:`aoi_fl.pipeline.batching`)."""
    cap = batching.batch_cap(batch)
    keys = [batching.batch_key(configs[i], devices[i]) for i in todo]
    sizes: dict[str, int] = {}
    for i, key in zip(todo, keys, strict=True):
        if key not in sizes:
            spec = dict(configs[i]["model"])
            parameters = sum(p.numel() for p in build_model(spec.pop("name"), **spec).parameters())
            clients = batching.clients_per_round(configs[i])
            per_run = batching.run_bytes(parameters, clients)
            sizes[key] = batching.runs_per_batch(per_run, devices[i], cap)
    groups = batching.batch_groups(keys, [sizes[k] for k in keys])
    return [[todo[j] for j in group] for group in groups]


def _bar(enabled: bool, total: int) -> Any:
    """A progress bar over ``total`` runs (a silent stand-in when ``enabled`` is false)."""
    from tqdm import tqdm  # plain bars: tqdm.auto warns (with a machine path) without ipywidgets

    return tqdm(total=total, unit="runs", disable=not enabled)


def _progress(items: Iterable, enabled: bool, unit: str, total: int | None = None) -> Iterable:
    if not enabled:
        return items
    from tqdm import tqdm  # plain bars: tqdm.auto warns (with a machine path) without ipywidgets

    return tqdm(items, unit=unit, total=total)


# the papers' samplers, algorithms and styles, so that the tables above are complete on import
plugins.load()
