"""Grids of runs on Ray (optional extra ``ray``): the executor behind ``run_grid(executor="ray")``.

One Ray task per missing configuration. A task trains its run into a throw-away cache on the
worker (checkpoints included, so nothing is shared between machines), and returns the stored
result (the JSON record, the arrays and the final weights if the configuration keeps them apart)
to the driver, which writes it into its own cache as each task finishes: no shared file system is
needed, and an interrupted grid resumes from the results the driver has stored.

``address``: ``"local"`` starts a Ray instance on this machine with ``num_cpus`` CPUs (and ends
it afterwards); ``"auto"`` or ``"ray://host:port"`` / ``"host:port"`` joins an existing cluster,
to which the package's code is shipped (``runtime_env``'s ``py_modules``). Every worker needs the
datasets under ``data_root`` (``python -m aoi_fl.data fetch-mnist --root <data_root>`` there).
Each task sets its torch thread count to ``threads`` and asks Ray for that many CPUs. Which node
trained each configuration is logged (logger ``aoi_fl.pipeline.ray_grid``, level INFO; the
record's ``config_index`` and ``node_id`` attributes), to see where a grid's runs went.

Ray's usage telemetry is turned off in everything this module starts.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
# keeps Ray from rewriting CUDA_VISIBLE_DEVICES for tasks that ask for no GPU (and its warning)
os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")

import aoi_fl  # noqa: E402  (after the telemetry switch: ray reads it on import)
from aoi_fl.pipeline import plugins  # noqa: E402

log = logging.getLogger(__name__)


def _train(
    run: Callable[..., Any],
    config: dict,
    data_root: str,
    threads: int,
    device: str | None,
    shipped: tuple,
) -> tuple[dict, dict, bytes | None, str]:
    """Train one configuration with ``run`` (``run_experiment``, sent by reference) in a
    throw-away cache, after registering the user's factories (``shipped``); return what the
    driver stores and the id of the node that trained it."""
    import ray
    import torch

    from aoi_fl.pipeline.cache import ResultStore

    plugins.install(shipped)
    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory(prefix="aoi-fl-ray-") as tmp:
        result = run(config, cache_dir=tmp, progress=False, data_root=data_root, device=device)
        stored, arrays = ResultStore(tmp).load(result.config)
        weights = Path(tmp) / "weights" / f"{result.key}.npz"
        node = ray.get_runtime_context().get_node_id()
        return stored, arrays, (weights.read_bytes() if weights.exists() else None), node


def ray_results(
    jobs: Mapping[int, tuple[dict, str | None]],
    *,
    run: Callable[..., Any],
    shipped: tuple = (),
    data_root: str,
    address: str = "local",
    num_cpus: int | None = None,
    threads: int = 1,
) -> Iterator[tuple[int, dict, dict, bytes | None]]:
    """``(i, stored result, arrays, weights)`` for every job ``i: (config, device)``, trained by
    ``run`` (:func:`aoi_fl.pipeline.runs.run_experiment`) after :func:`plugins.install` of
    ``shipped``, in the order the tasks finish."""
    import ray

    if not isinstance(address, str) or not address:
        raise ValueError(f"address must be 'local', 'auto' or a cluster address, got {address!r}")
    started = not ray.is_initialized()
    session = None
    if started:
        env = {"env_vars": {"RAY_USAGE_STATS_ENABLED": "0", "FLWR_TELEMETRY_ENABLED": "0"}}
        if address == "local":
            # a fresh instance in a session folder of its own, removed afterwards: a stale
            # session left in the shared temp folder can make a later ray.init fail
            session = tempfile.mkdtemp(prefix="aoi-fl-ray-")
            ray.init(
                address="local",
                num_cpus=num_cpus,
                include_dashboard=False,
                log_to_driver=False,
                runtime_env=env,
                _temp_dir=session,
            )
        else:
            package = str(Path(aoi_fl.__file__).parent)
            ray.init(address=address, runtime_env={**env, "py_modules": [package]})
    try:
        task = ray.remote(num_cpus=threads)(_train)
        pending = {
            task.remote(run, config, str(data_root), threads, device, shipped): i
            for i, (config, device) in jobs.items()
        }
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            i = pending.pop(done[0])
            stored, arrays, weights, node = ray.get(done[0])
            log.info(
                "configuration %d trained on Ray node %s",
                i,
                node,
                extra={"config_index": i, "node_id": node},
            )
            yield i, stored, arrays, weights
    finally:
        if started:
            ray.shutdown()
        if session is not None:
            shutil.rmtree(session, ignore_errors=True)


def store_result(cache_dir: str, config: dict, stored: dict, arrays: dict, weights: Any) -> None:
    """Write a task's result into the driver's cache, as a local run would have: the weights
    (the task's ``.npz`` bytes) through the same atomic write of the whole entry, so that a full
    disk leaves nothing half-written here either."""
    import io

    import numpy as np

    from aoi_fl.pipeline.cache import ResultStore

    if weights is not None:
        with np.load(io.BytesIO(weights), allow_pickle=False) as npz:
            weights = {name: npz[name] for name in npz.files}
    ResultStore(cache_dir).save(config, stored, arrays, weights=weights)
