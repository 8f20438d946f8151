"""Which missing runs of a grid train together, and how many at once (:class:`~aoi_fl.core.batch.
RunBatch`): :func:`batch_groups` and :func:`runs_per_batch`.

Runs can share a batch when they have one dataset, model architecture, device and local-work
shape and one federated method (:func:`batch_key`; the trainer checks the same things again,
:func:`aoi_fl.core.batch.batch_signature`). Their seeds, partitions, samplers, availability
models, learning-rate schedules and horizons may differ.

The batch size rule (stated, overridable): a run is charged its model state (parameters and the
method's state, :func:`run_bytes`: four copies of the model, a conservative bound for every
method here but the per-client tables) plus three copies of the model per client that can
train in a round (start, result, update); a batch takes at most half of the memory free now on
its device, and at most :data:`MAX_RUNS` runs. ``run_grid(batch=R)`` or ``$AOI_FL_BATCH`` sets
the most runs a batch may take instead (1: every run alone, as before batching existed).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from aoi_fl.core import registry
from aoi_fl.core.batch import SHARED_SETTINGS
from aoi_fl.core.validation import require_int
from aoi_fl.pipeline.cache import canonical_json

#: the environment variable that caps the runs per batch when ``run_grid`` is not told
BATCH_VAR = "AOI_FL_BATCH"
#: the most runs a batch takes when memory allows more: beyond this the shared engine call is
#: already wide (hundreds of clients) and a batch only delays its first stored result
MAX_RUNS = {"cpu": 64, "cuda": 256}
#: what shapes an engine call besides the model and the data: the local work and the method
_SHAPE_SETTINGS = (*SHARED_SETTINGS, "algorithm")


def batch_key(config: Mapping[str, Any], device: str | None) -> str:
    """The key of the runs a resolved configuration may share a batch with."""
    model = {k: v for k, v in config["model"].items() if k != "seed"}
    training = config["training"]
    shape = {k: training.get(k) for k in _SHAPE_SETTINGS}
    return canonical_json(
        {"dataset": config["dataset"], "model": model, "training": shape, "device": device}
    )


def clients_per_round(config: Mapping[str, Any]) -> int:
    """How many clients can train in a round: all of them in the full-information mode, else
    the sampler's count (:func:`~aoi_fl.core.registry.clients_option`), else all of them."""
    n = int(config["partition"]["n_clients"])
    if config["training"].get("full_information"):
        return n
    sampler = config["sampler"]
    option = registry.clients_option(sampler["name"])
    return n if option is None or option not in sampler else min(n, int(sampler[option]))


def run_bytes(parameters: int, clients: int, bytes_per_value: int = 4) -> int:
    """The memory a run is charged in a batch (module docstring)."""
    return bytes_per_value * parameters * (4 + 3 * clients)


def free_bytes(device: str | None) -> int:
    """Memory free now on ``device`` (a CUDA device's free memory, else the machine's
    available memory)."""
    if device is not None and device.startswith("cuda") and torch.cuda.is_available():
        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def batch_cap(batch: int | None) -> int | None:
    """The most runs per batch the caller (or ``$AOI_FL_BATCH``) asks for, checked; None: the
    memory rule decides."""
    if batch is None:
        value = os.environ.get(BATCH_VAR)
        if value is None or value == "":
            return None
        try:
            batch = int(value)
        except ValueError:
            raise ValueError(
                f"{BATCH_VAR}={value!r}: must be a whole number of runs per batch (1: every "
                "run alone), or unset for the memory rule"
            ) from None
        return require_int(BATCH_VAR, batch, minimum=1)
    return require_int("batch", batch, minimum=1)


def runs_per_batch(per_run: int, device: str | None, cap: int | None) -> int:
    """Runs per batch: ``cap`` if given, else half the free memory over ``per_run`` bytes,
    between 1 and :data:`MAX_RUNS` of the device's kind."""
    if cap is not None:
        return cap
    kind = "cuda" if device is not None and device.startswith("cuda") else "cpu"
    fits = free_bytes(device) // (2 * max(per_run, 1))
    return int(max(1, min(MAX_RUNS[kind], fits)))


def batch_groups(keys: Sequence[str], size: Sequence[int]) -> list[list[int]]:
    """The positions of ``keys`` cut into batches: runs of one key together, in their order,
    at most ``size[i]`` runs in a batch that starts with run i."""
    by_key: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        by_key.setdefault(key, []).append(i)
    batches = []
    for members in by_key.values():
        while members:
            take = size[members[0]]
            batches.append(members[:take])
            members = members[take:]
    return batches
