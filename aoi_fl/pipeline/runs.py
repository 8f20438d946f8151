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

import dataclasses
import multiprocessing as mp
import os
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from aoi_fl.core.device import requested_device, resolve_device
from aoi_fl.core.models import build_model
from aoi_fl.core.validation import (
    renamed,
    require_bool,
    require_choice,
    require_folder,
    require_int,
    require_real,
)
from aoi_fl.data.datasets import require_dataset_files
from aoi_fl.pipeline import batching, plugins
from aoi_fl.pipeline.cache import ResultStore, config_key
from aoi_fl.pipeline.executors import EXECUTOR_VAR, EXECUTORS
from aoi_fl.pipeline.experiment import (
    DeadlineReached,
    ExperimentResult,
    build_trainer,
    require_writable,
    result_from_cache,
    run_batch,
    run_experiment,
)
from aoi_fl.pipeline.parts import DATASETS, PARTITIONS, load_bundle
from aoi_fl.pipeline.resolve import (
    OPTIONAL_TRAINING,
    TRAINING_DEFAULTS,
    RunConfig,
    client_sizes,
    config_device,
    resolve_config,
)

# the whole pipeline from one module: its parts live in parts, resolve and experiment (and the
# registries SAMPLERS and ALGORITHMS, loaded when asked for: __getattr__ below)
__all__ = [
    "DATASETS",
    "OPTIONAL_TRAINING",
    "PARTITIONS",
    "RunConfig",
    "TRAINING_DEFAULTS",
    "DeadlineReached",
    "ExperimentResult",
    "build_trainer",
    "cached_results",
    "client_sizes",
    "config_device",
    "load_bundle",
    "resolve_config",
    "run_experiment",
    "run_grid",
]

#: ``SAMPLERS`` (sampler name -> function(n, sizes, **options) -> Sampler, ``sizes``: the
#: clients' data sizes) and ``ALGORITHMS`` (algorithm name -> constructor(**options)): the
#: registries of :mod:`aoi_fl.core.registry`, the papers loaded when one is first asked for
#: (:func:`plugins.samplers`); importing this module loads nothing
_TABLES = {"SAMPLERS": plugins.samplers, "ALGORITHMS": plugins.algorithms}


def __getattr__(name: str) -> Any:
    if name in _TABLES:
        return _TABLES[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@renamed("cache_dir", "results_dir")
def cached_results(
    configs: Iterable[dict[str, Any]], *, results_dir: str = "results"
) -> tuple[list[ExperimentResult], int]:
    """(the results of ``configs`` already in the cache, in order; how many are missing).

    For looking at a grid while it is still being computed (over several sittings); nothing
    is trained.
    """
    store = ResultStore(require_folder("results_dir", results_dir))
    found, missing = [], 0
    for config in _configurations(configs):
        run = RunConfig.parse(config)
        if (hit := store.load(run.canonical())) is None:
            missing += 1
        else:
            found.append(result_from_cache(run, hit))
    return found, missing


@renamed("cache_dir", "results_dir")
def run_grid(
    configs: Iterable[dict[str, Any]],
    *,
    results_dir: str = "results",
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
    None), and results come back to this process, which stores them in ``results_dir``.

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
    if executor is None:
        executor = os.environ.get(EXECUTOR_VAR) or "local"
    require_choice("executor", executor, EXECUTORS)
    results_dir = require_folder("results_dir", results_dir)
    rerun, progress = require_bool("rerun", rerun), require_bool("progress", progress)
    workers, threads = _options(workers, threads, batch, deadline)
    on_ray = executor == "ray"
    _check_callers(on_result, on_ray, ray_address, deadline)
    runs, devices = _checked(configs, device)
    found = _Found(runs, results_dir, on_result)
    configs = found.configs
    loaded = {} if rerun else {i: found.store.load(c) for i, c in enumerate(configs)}
    hits = {i: hit for i, hit in loaded.items() if hit is not None}
    todo = [i for i in range(len(configs)) if i not in hits]
    _check_missing(found, todo, devices, on_ray, data_root)
    # what other processes need of the user's registrations, refused here if they cannot have it
    apart = bool(todo) and (on_ray or workers > 1)
    shipped = plugins.shipped((configs[i] for i in todo), by_value=on_ray) if apart else ()
    for i, hit in hits.items():
        found.finish(i, hit)
    if on_ray and todo:
        address = ray_address or os.environ.get("RAY_ADDRESS") or "local"
        _train_on_ray(found, todo, devices, shipped, data_root, address, workers, threads, progress)
        return found.ordered()
    jobs = _Jobs(todo, devices, shipped, rerun, data_root, threads if workers > 1 else None, batch)
    if left := _train_here(found, jobs, workers, deadline, progress):
        raise DeadlineReached(
            f"deadline reached: {len(todo) - left} of {len(todo)} missing runs trained and "
            f"stored in {results_dir}, {left} left (checkpointed; run the grid again to resume)"
        )
    return found.ordered()


def _options(
    workers: int, threads: int | None, batch: int | None, deadline: float | None
) -> tuple[int, int | None]:
    """The grid's own numbers checked, before any configuration is read: workers, threads (each
    worker's ``torch.set_num_threads``), the batch cap and the deadline."""
    workers = require_int("workers", workers, minimum=1)
    batching.batch_cap(batch)
    if deadline is not None:
        require_real("deadline", deadline)
    if threads is not None:
        threads = require_int("threads", threads, minimum=1)
    return workers, threads


#: 2001-09-09 in seconds since the epoch: a deadline before it was meant as a duration
_EPOCH_2001 = 1e9


def _check_callers(on_result: Any, on_ray: bool, ray_address: Any, deadline: float | None) -> None:
    """The grid's other arguments checked before any configuration is read: the callback, the
    Ray address and the deadline (local only, and a moment, not a duration)."""
    if on_result is not None and not callable(on_result):
        raise TypeError(f"on_result must be a function (i, result) or None, got {on_result!r}")
    if ray_address is not None and (not isinstance(ray_address, str) or not ray_address):
        raise ValueError(
            f"ray_address must be 'local', 'auto' or a cluster address, got {ray_address!r}"
        )
    if deadline is not None:
        if on_ray:
            raise ValueError("deadline needs executor='local' (Ray tasks train whole runs)")
        if deadline < _EPOCH_2001:  # a duration or a zero, not a moment: nothing would train
            raise ValueError(
                f"deadline={deadline!r} is before 2001; it is a time in seconds since the epoch "
                "(time.time() + seconds), not a duration"
            )


def _check_missing(
    found: _Found, todo: list[int], devices: list[str | None], on_ray: bool, data_root: str
) -> None:
    """Refuse, before any of the missing runs ``todo`` trains, what one of them would fail on
    later, after others had trained: a device or a dataset that is not here (a Ray cluster's
    GPUs and data are its own), then a results folder that cannot take them (the one check
    that creates the folder, so a refused grid leaves none)."""
    if not todo:
        return
    if not on_ray:
        for name in {devices[i] for i in todo}:
            resolve_device(name)
        for name in sorted({found.configs[i]["dataset"]["name"] for i in todo}):
            require_dataset_files(name, data_root)
    require_writable(found.results_dir)


def _configurations(configs: Any) -> list[Any]:
    """``configs`` as a list, refusing one configuration passed alone (a dict)."""
    if isinstance(configs, (Mapping, RunConfig)):
        raise TypeError("configs must be a list of configurations, got one: pass [config]")
    try:
        return list(configs)
    except TypeError:
        raise TypeError(
            f"configs must be a list of configurations, got {configs!r} ({type(configs).__name__})"
        ) from None


def _checked(
    configs: Iterable[dict[str, Any]], device: str | None
) -> tuple[list[RunConfig], list[str | None]]:
    """The runs, each configuration resolved once and every one before any trains, and the
    device of each."""
    runs = [RunConfig.parse(c) for c in _configurations(configs)]
    devices = [run.device if device is None else requested_device(device) for run in runs]
    return runs, devices


class _Found:
    """A grid's results by configuration index, each read from the cache as it lands there
    (then ``on_result``)."""

    def __init__(
        self,
        runs: list[RunConfig],
        results_dir: str,
        on_result: Callable[[int, ExperimentResult], None] | None,
    ) -> None:
        self.runs, self.results_dir, self.on_result = runs, results_dir, on_result
        self.configs = [run.canonical() for run in runs]
        self.store = ResultStore(results_dir)
        self.results: dict[int, ExperimentResult] = {}

    def finish(self, i: int, hit: tuple | None = None) -> None:
        # a run trained just now is read back from the cache, as a cached one was read already
        trained = hit is None
        hit = self.store.load(self.configs[i]) if trained else hit
        if hit is None:  # stored by the run a moment ago, unreadable now (warned about above)
            raise RuntimeError(
                f"the result of configuration {i} (key {config_key(self.configs[i])}) was trained "
                f"but cannot be read back from {self.results_dir}; rerun the grid to recompute it"
            )
        self.results[i] = dataclasses.replace(
            result_from_cache(self.runs[i], hit), cached=not trained
        )
        if self.on_result is not None:
            self.on_result(i, self.results[i])

    def ordered(self) -> list[ExperimentResult]:
        return [self.results[i] for i in range(len(self.configs))]


def _train_on_ray(
    found: _Found,
    todo: list[int],
    devices: list[str | None],
    shipped: tuple,
    data_root: str,
    address: str,
    workers: int,
    threads: int | None,
    progress: bool,
) -> None:
    """Train the missing runs ``todo`` as Ray tasks, storing each here as it comes back."""
    from aoi_fl.pipeline.ray_grid import ray_results, store_result

    configs = found.configs
    results_iter = ray_results(
        {i: (found.runs[i], devices[i]) for i in todo},
        run=run_experiment,
        shipped=shipped,
        data_root=data_root,
        address=address,
        num_cpus=workers,
        threads=threads or 1,
    )
    for i, stored, arrays, weights in _progress(results_iter, progress, "runs", len(todo)):
        store_result(found.results_dir, configs[i], stored, arrays, weights)
        found.finish(i)


@dataclasses.dataclass(frozen=True)
class _Jobs:
    """What the local executor trains: the missing runs ``todo`` and how (see :func:`run_batch`)."""

    todo: list[int]
    devices: list[str | None]
    shipped: tuple
    rerun: bool
    data_root: str
    threads: int | None
    batch: int | None

    def batches(self, found: _Found, deadline: float | None) -> tuple[list[list[int]], list]:
        """The batches (configuration indices) and the :func:`run_batch` argument of each."""
        groups = _batches(self.todo, found.configs, self.devices, self.batch)
        args = [
            (
                [found.runs[i] for i in group],
                found.results_dir,
                self.rerun,
                self.data_root,
                self.threads,
                self.devices[group[0]],
                self.shipped,
                deadline,
            )
            for group in groups
        ]
        return groups, args


def _train_here(
    found: _Found, jobs: _Jobs, workers: int, deadline: float | None, progress: bool
) -> int:
    """Train the missing runs in batches, in this process or ``workers`` spawned ones; returns
    how many were left unfinished at the ``deadline``."""
    groups, args = jobs.batches(found, deadline)
    left = 0
    bar = _bar(progress and bool(jobs.todo), len(jobs.todo))
    if workers == 1 or len(args) <= 1:
        for group, job in zip(groups, args, strict=True):

            def stored(j: int, group: list[int] = group) -> None:
                found.finish(group[j])
                bar.update(1)

            if deadline is not None and time.time() >= deadline:
                left += len(group)
                continue
            left += run_batch(job, stored)
    elif args:
        ctx = mp.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures = {pool.submit(run_batch, job): g for job, g in zip(args, groups, strict=True)}
            for future in as_completed(futures):
                unfinished = future.result()  # a failed run raises here
                left += unfinished
                for i in futures[future]:
                    if found.store.load(found.configs[i]) is not None:
                        found.finish(i)
                bar.update(len(futures[future]) - unfinished)
    bar.close()
    return left


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
