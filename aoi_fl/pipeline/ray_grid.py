"""Grids of runs on Ray (optional extra ``ray``): the executor behind ``run_grid(executor="ray")``,
and the Ray node of this machine that it and the Flower simulation start (:func:`local_ray`).

One Ray task per missing configuration. A task trains its run into a throw-away cache on the
worker (checkpoints included, so nothing is shared between machines), and returns the stored
result (the JSON record, the arrays and the final weights if the configuration keeps them apart)
to the driver, which writes it into its own cache as each task finishes: no shared file system is
needed, and an interrupted grid resumes from the results the driver has stored.

``address``: ``"local"`` starts a Ray node of this machine alone with ``num_cpus`` CPUs
(:func:`local_ray`, ended afterwards); ``"auto"`` or ``"ray://host:port"`` / ``"host:port"``
joins an existing cluster, to which the package's code is shipped (``runtime_env``'s
``py_modules``). Every worker needs the datasets under ``data_root`` (``python -m aoi_fl.data
fetch-mnist --root <data_root>`` there). Each task sets its torch thread count to ``threads``
and asks Ray for that many CPUs; a run on CUDA (device ``cuda``, ``cuda:N``, or ``auto`` where
this machine has CUDA) also asks for one GPU and trains on the one Ray assigns it. Which node
trained each configuration is logged (logger ``aoi_fl.pipeline.ray_grid``, level INFO; the
record's ``config_index`` and ``node_id`` attributes), to see where a grid's runs went.

A local node comes up on a machine busy with other work, where ``ray.init()``'s own start fails
now and then: its raylet waits 15 s at most for each port file that the dashboard agent writes
once it has bound a port of its choosing, and ends the node when a loaded machine makes the
agent slower (ray-project/ray#65983; the raylet's error: ``Check failed: ... Timed out waiting
for file <session>/metrics_agent_port_<node id>``). Here every port is picked beforehand and
given to ``ray start`` (:func:`node_ports`), so that the raylet waits for none of the agent's
port files, except the one of its listen port, which ``ray start`` does not pass on to the
raylet: that file is written for it (:func:`_report_listen_port`). A start that fails anyway is
retried once. The node's servers listen on 127.0.0.1 only (:data:`LOCAL_ENV`).

Ray's usage telemetry is turned off in everything this module starts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
# keeps Ray from rewriting CUDA_VISIBLE_DEVICES for tasks that ask for no GPU (and its warning)
os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")

import aoi_fl  # noqa: E402  (after the telemetry switch: ray reads it on import)
from aoi_fl.core.device import requested_device  # noqa: E402
from aoi_fl.core.validation import require_int  # noqa: E402
from aoi_fl.pipeline import plugins  # noqa: E402
from aoi_fl.pipeline.resolve import RunConfig  # noqa: E402

log = logging.getLogger(__name__)

#: where a local node's servers listen, and the address it gives: nothing beyond this machine
LOOPBACK = "127.0.0.1"
#: how many times a node is started before its failure is raised
START_ATTEMPTS = 2
#: the seconds a node may take to come up (two cores busy with other work: 15-45 s measured)
START_TIMEOUT_S = 180.0
#: the seconds a node's processes get to end when asked, before they are killed
STOP_TIMEOUT_S = 30.0
#: the environment of a local node's processes (its workers and actors inherit it)
LOCAL_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "FLWR_TELEMETRY_ENABLED": "0",
    # Ray turns a node address of 127.0.0.1 into the machine's outward address, where its
    # servers then listen, unless multi-node clusters are off (resolve_ip_for_localhost)
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    # the raylet ends the node when the runtime-env agent has not answered within this when a
    # worker starts (30 s by default), which a loaded machine can exceed
    "RAY_agent_register_timeout_ms": "300000",
}
#: the environment of the tasks sent to a cluster (a local node's processes have LOCAL_ENV)
TELEMETRY_OFF = {"RAY_USAGE_STATS_ENABLED": "0", "FLWR_TELEMETRY_ENABLED": "0"}
#: the servers of a Ray node, by the ``ray start`` option that sets each one's port; the raylet
#: waits for the port file of the dashboard agent's metrics ports and of the runtime-env agent
#: only where the port is 0 (of the agent's listen port always: :func:`_report_listen_port`)
_NODE_PORTS = (
    "node-manager-port",
    "object-manager-port",
    "metrics-export-port",
    "dashboard-agent-grpc-port",
    "dashboard-agent-listen-port",
    "runtime-env-agent-port",
)
#: the head node's servers besides those: its GCS, the Ray client's server, the API server
_HEAD_PORTS = ("port", "ray-client-server-port", "dashboard-port")


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on :data:`LOOPBACK` now (all held while they are picked)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind((LOOPBACK, 0))
        return [s.getsockname()[1] for s in sockets]


def node_ports(head: bool) -> dict[str, int]:
    """A free port, picked now, for every server of a node (a head node with ``head``), by the
    ``ray start`` option that sets it: with its port given, no process of the node waits for
    another to report the port it bound."""
    names = (_HEAD_PORTS if head else ()) + _NODE_PORTS
    return dict(zip(names, free_ports(len(names)), strict=True))


def _processes(folder: Path) -> dict[int, list[str]]:
    """The processes whose command line names ``folder`` (a node's, and no other Ray's), with
    their command lines."""
    found = {}
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if str(folder).encode() in (args := cmdline.read_bytes()):
                found[int(cmdline.parent.name)] = args.decode(errors="replace").split("\0")
    return found


def _stop(process: subprocess.Popen, folder: Path) -> None:
    """End a node started by :func:`ray_node` and remove its folder: ``ray start --block`` ends
    its node's processes on SIGTERM; whatever outlives it (or hangs) is killed, found by its
    process group or by ``folder`` in its command line."""
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # its group: the leader is not reaped yet
        process.wait()
    for pid in _processes(folder):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(folder, ignore_errors=True)


def _report_listen_port(folder: Path, port: int) -> bool:
    """Write the dashboard agent's listen port where the node's raylet waits for it, once the
    raylet runs; True once it is there. ``ray start`` gives that port to the agent but not to
    the raylet (``services.start_raylet`` passes no ``--dashboard_agent_listen_port``), so
    the raylet waits 15 s at most for the agent to write it, the agent's last step of its
    start, which a loaded machine delays past that (ray-project/ray#65983)."""
    from ray._raylet import DASHBOARD_AGENT_LISTEN_PORT_NAME as NAME
    from ray._raylet import get_port_filename, persist_port

    for args in _processes(folder).values():
        if Path(args[0]).name == "raylet":
            flags = dict(a[2:].split("=", 1) for a in args[1:] if a.startswith("--") and "=" in a)
            session, node = flags["session_dir"], flags["node_id"]
            if not Path(session, get_port_filename(node, NAME)).exists():  # the agent was first
                persist_port(session, node, NAME, port)
            return True
    return False


def _why(folder: Path) -> str:
    """What a node that did not come up logged: the end of ``ray start``'s output, and the
    raylet's fatal errors (a port file it timed out on, say)."""
    start = (folder / "start.log").read_text(errors="replace").splitlines()[-15:]
    raylet = [
        line
        for log in folder.glob("session_*/logs/raylet.err")
        for line in log.read_text(errors="replace").splitlines()
        if "Check failed" in line
    ]
    return "\n".join(["ray start:", *start, "the raylet's errors:", *(raylet or ["(none)"])])


def _wait_until_up(process: subprocess.Popen, folder: Path, listen_port: int) -> str | None:
    """The cluster's address once the node is up (``ray start`` writes it), or None when the
    node ended or was not up after :data:`START_TIMEOUT_S`; the dashboard agent's
    ``listen_port`` is reported to the raylet meanwhile (:func:`_report_listen_port`)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    reported = False
    while process.poll() is None and time.monotonic() < deadline:
        reported = reported or _report_listen_port(folder, listen_port)
        with contextlib.suppress(FileNotFoundError):
            if address := (folder / "ray_current_cluster").read_text().strip():
                return address
        time.sleep(0.2)
    return None


@contextlib.contextmanager
def ray_node(
    options: Sequence[str],
    *,
    python: str = sys.executable,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
) -> Iterator[str]:
    """A Ray node for the block, started by ``python -m ray.scripts.scripts start --block
    options...`` (a head node when ``options`` has ``--head``; ``env``: its environment, by
    default this process's) in a new folder of its own, every server on a free port
    (:func:`node_ports`): yields the cluster's address, then ends the node's processes and
    removes its folder.

    A start that fails (``ray start`` ends, or the node is not up after
    :data:`START_TIMEOUT_S`) is cleaned up and tried again with other ports, once; a second
    failure raises RuntimeError with ``ray start``'s output and the raylet's errors.
    """
    head = "--head" in options
    for attempt in range(1, START_ATTEMPTS + 1):
        ports = node_ports(head)
        # short: Ray's socket paths in the session folder must stay under 107 characters
        folder = Path(tempfile.mkdtemp(prefix="aoi-ray-"))
        with open(folder / "start.log", "w") as out:
            process = subprocess.Popen(
                [python, "-m", "ray.scripts.scripts", "start", "--block", *options]
                + [f"--{name}={port}" for name, port in ports.items()]
                # workers and drivers bind a port the system picks: by default every node takes
                # them from 10002 up, so two nodes on one machine (two test workers, two
                # notebooks) race for the same port, and a driver that loses aborts its process
                + ["--min-worker-port=0", "--max-worker-port=0"]
                + [f"--temp-dir={folder}", "--disable-usage-stats"],
                env=os.environ if env is None else env,
                cwd=cwd,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group, to be killed whole if it hangs
            )
        try:
            address = _wait_until_up(process, folder, ports["dashboard-agent-listen-port"])
            why = None if address else _why(folder)
        except BaseException:
            _stop(process, folder)
            raise
        if why is not None:
            _stop(process, folder)
            if attempt == START_ATTEMPTS:
                raise RuntimeError(
                    f"the Ray node ({' '.join(options)}) did not come up in {attempt} "
                    f"attempts of {START_TIMEOUT_S:.0f} s at most:\n{why}"
                )
            log.warning("the Ray node did not come up; starting it again:\n%s", why)
            continue
        try:
            yield address
        finally:
            _stop(process, folder)
        return


@contextlib.contextmanager
def local_ray(num_cpus: int | None = None, num_gpus: int = 0) -> Iterator[str]:
    """A Ray node of this machine alone for the block (:func:`ray_node`, ``num_cpus`` CPUs,
    default all, and ``num_gpus`` GPUs): its servers listen on :data:`LOOPBACK` only, its
    processes have :data:`LOCAL_ENV` (no ``RAY_ADDRESS``), no dashboard. Yields its address."""
    options = [
        "--head",
        "--no-monitor",  # the autoscaler: nothing to scale
        f"--node-ip-address={LOOPBACK}",
        f"--dashboard-host={LOOPBACK}",
        "--include-dashboard=false",
        f"--num-gpus={require_int('num_gpus', num_gpus, minimum=0)}",
    ]
    if num_cpus is not None:
        options.append(f"--num-cpus={require_int('num_cpus', num_cpus, minimum=1)}")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    with ray_node(options, env={**env, **LOCAL_ENV}) as address:
        yield address


@contextlib.contextmanager
def _loopback_bootstrap() -> Iterator[None]:
    # ray.init turns a bootstrap address of 127.0.0.1 into the machine's outward address,
    # where a local node does not listen, unless multi-node clusters are off: off while this
    # process connects (LOCAL_ENV turns them off in processes that import ray after it)
    from ray._private import ray_constants

    before = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before


@contextlib.contextmanager
def connected(
    address: str = "local", *, num_cpus: int | None = None, num_gpus: int = 0, **init_args: Any
) -> Iterator[None]:
    """This process connected to Ray for the block (``ray.init(address, **init_args)``), and
    disconnected afterwards: for ``"local"`` to a node of its own (:func:`local_ray` with
    ``num_cpus`` and ``num_gpus``, ended afterwards), else to the cluster at ``address``
    (``"auto"``, ``"host:port"``, ``"ray://host:port"``; ``num_cpus`` and ``num_gpus`` unused).
    Nothing is started or ended when this process is connected already. A failed start or
    connection leaves nothing behind."""
    import ray

    if not isinstance(address, str) or not address:
        raise ValueError(f"address must be 'local', 'auto' or a cluster address, got {address!r}")
    if ray.is_initialized():
        yield
        return
    with contextlib.ExitStack() as stack:
        if address == "local":
            address = stack.enter_context(local_ray(num_cpus, num_gpus))
            with _loopback_bootstrap():
                ray.init(address=address, **init_args)
        else:
            ray.init(address=address, **init_args)
        stack.callback(ray.shutdown)
        yield


def _train(
    run: Callable[..., Any],
    config: RunConfig,
    data_root: str,
    threads: int,
    device: str | None,
    shipped: tuple,
) -> tuple[dict, dict, bytes | None, str]:
    """Train one run (resolved already) with ``run`` (``run_experiment``, sent by reference) in a
    throw-away cache, after registering the user's factories (``shipped``); return what the
    driver stores and the id of the node that trained it."""
    import ray
    import torch

    from aoi_fl.pipeline.cache import ResultStore

    plugins.install(shipped)
    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory(prefix="aoi-fl-ray-") as tmp:
        result = run(config, results_dir=tmp, progress=False, data_root=data_root, device=device)
        stored, arrays = ResultStore(tmp).load(result.config)
        weights = Path(tmp) / "weights" / f"{result.key}.npz"
        node = ray.get_runtime_context().get_node_id()
        return stored, arrays, (weights.read_bytes() if weights.exists() else None), node


def on_gpu(device: str | None) -> bool:
    """Whether a run on ``device`` (None: ``$AOI_FL_DEVICE``, else ``auto``) trains on CUDA:
    ``cuda``, ``cuda:N``, or ``auto`` where this machine has CUDA."""
    import torch

    name = requested_device(device)
    return name.startswith("cuda") or (name == "auto" and torch.cuda.is_available())


def ray_results(
    jobs: Mapping[int, tuple[RunConfig, str | None]],
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
    import torch

    gpus = {i: on_gpu(device) for i, (_, device) in jobs.items()}
    local = address == "local"
    if local and any(gpus.values()) and not torch.cuda.is_available():
        device = next(jobs[i][1] for i, gpu in gpus.items() if gpu)
        raise ValueError(
            f"device {device!r} trains on a GPU, but this machine has none for its local Ray "
            "node (torch.cuda.is_available() is False): use device 'cpu' or 'auto', or a "
            "cluster with GPUs (ray_address)"
        )
    if local:
        gpus_here = torch.cuda.device_count() if any(gpus.values()) else 0
        init: dict[str, Any] = {"num_gpus": gpus_here, "log_to_driver": False}
    else:
        package = str(Path(aoi_fl.__file__).parent)
        init = {"runtime_env": {"env_vars": TELEMETRY_OFF, "py_modules": [package]}}
    with connected(address, num_cpus=num_cpus, **init):
        task = ray.remote(num_cpus=threads)(_train)
        pending = {
            # Ray shows a GPU task the one GPU it assigns, as device cuda
            task.options(num_gpus=int(gpus[i])).remote(
                run, config, str(data_root), threads, "cuda" if gpus[i] else device, shipped
            ): i
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


def store_result(results_dir: str, config: dict, stored: dict, arrays: dict, weights: Any) -> None:
    """Write a task's result into the driver's cache, as a local run would have: the weights
    (the task's ``.npz`` bytes) through the same atomic write of the whole entry, so that a full
    disk leaves nothing half-written here either."""
    import io

    import numpy as np

    from aoi_fl.pipeline.cache import ResultStore

    if weights is not None:
        with np.load(io.BytesIO(weights), allow_pickle=False) as npz:
            weights = {name: npz[name] for name in npz.files}
    ResultStore(results_dir).save(config, stored, arrays, weights=weights)
