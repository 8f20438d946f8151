"""run_grid on a real Ray cluster (issue 30): a head and a worker node started with the ``ray``
CLI on this machine, the grid's tasks run on both, the results are the local executor's, and the
package reaches the nodes only through ``runtime_env``'s ``py_modules``.

The nodes must not be able to import aoi_fl on their own, or the last point proves nothing. The
package is installed editable: a ``.pth`` file in site-packages installs an import finder that
maps ``aoi_fl`` to the checkout. So the nodes run a Python environment of their own (``venv
--without-pip``) whose one ``.pth`` file puts the project's site-packages on ``sys.path`` as a
plain path: Python runs ``.pth`` files only in site directories, so Ray, torch and numpy import
there, but the editable finder is never installed. The nodes start without ``PYTHONPATH``, and
they and the driver run from temporary folders (Ray puts the driver's working directory on its
workers' ``sys.path``). A task sent without ``py_modules`` checks that ``import aoi_fl`` fails on
both nodes; the grid's tasks unpickle functions of ``aoi_fl``, so without ``py_modules`` in
``ray_grid`` they would fail too.
"""

import contextlib
import importlib.util
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

# ray_grid before ray: it turns Ray's telemetry off, which ray reads on import
from aoi_fl.pipeline import ray_grid, runs

ray = pytest.importorskip("ray", reason="the optional extra 'ray' is not installed")

import torch  # noqa: E402

DATA = str(Path(__file__).resolve().parents[2] / "data")
#: how long a node may take to start (the tests share the machine's cores with other work)
START_S = 120


def _grid_tests():
    """tests/pipeline/test_ray_grid.py, whose configurations the cluster runs."""
    path = Path(__file__).with_name("test_ray_grid.py")
    spec = importlib.util.spec_from_file_location("_ray_grid_tests", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _bare_python(root: Path) -> str:
    """A Python that imports what this environment's site-packages has, but not aoi_fl (see the
    module's docstring)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    bare_site = subprocess.run(
        [root / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(bare_site, "project-site-packages.pth").write_text("\n".join(sorted(site)) + "\n")
    return str(root / "bin" / "python")


def _start_node(procs: list, python: str, root: Path, name: str, env: dict, *options: str) -> str:
    """Start one node with ``ray start --block`` (its process appended to ``procs``), in a folder
    of its own under ``root``; return the cluster's address once the node is up. Tried twice:
    Ray gives a node 30 s to register with the cluster, which a machine busy with other work can
    exceed."""
    for attempt in (1, 2):
        temp, log = root / f"{name}{attempt}", root / f"{name}{attempt}.log"
        with open(log, "w") as out:
            procs.append(
                subprocess.Popen(
                    [python, "-m", "ray.scripts.scripts", "start", "--block", "--num-cpus=1"]
                    # a temp folder and ports of its own: nothing shared with other Ray
                    # instances on this machine
                    + [f"--temp-dir={temp}", f"--dashboard-agent-listen-port={_free_port()}"]
                    + ["--disable-usage-stats", *options],
                    cwd=root,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        deadline = time.monotonic() + START_S
        while procs[-1].poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(FileNotFoundError):
                if address := (temp / "ray_current_cluster").read_text().strip():
                    return address
            time.sleep(0.5)
        text = log.read_text()
        if attempt == 2 or "timed out during startup" not in text:
            raise RuntimeError(f"the {name} node did not come up:\n{text[-3000:]}")


def _ours(root: Path) -> list[int]:
    """Processes whose command line names ``root``: the cluster's, and no other Ray's."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if str(root).encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
    return found


def _stop(procs: list[subprocess.Popen], root: Path) -> None:
    """``ray start --block`` ends its node's processes on SIGTERM; whatever outlives it (or
    hangs) is killed, found by its process group or by ``root`` in its command line."""
    for proc in reversed(procs):  # the worker node first, while the head is still there
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # its group: the leader is not reaped yet
            proc.wait()
    for pid in _ours(root):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def cluster():
    """The address of a cluster of two nodes of one CPU each, with resources ``head_node`` and
    ``worker_node``, running a Python that cannot import aoi_fl."""
    # short: Ray's socket paths in the session folder must stay under 107 characters
    root = Path(tempfile.mkdtemp(prefix="aoi-ray-"))
    procs: list[subprocess.Popen] = []
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_ADDRESS")}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    try:
        python = _bare_python(root / "env")
        address = _start_node(
            procs,
            python,
            root,
            "head",
            env,
            "--head",
            f"--port={_free_port()}",
            f"--ray-client-server-port={_free_port()}",
            "--include-dashboard=false",
            f"--dashboard-port={_free_port()}",  # not 8265: another Ray may have it
            "--resources=" + json.dumps({"head_node": 1}),
        )
        _start_node(
            procs,
            python,
            root,
            "worker",
            env,
            f"--address={address}",
            "--resources=" + json.dumps({"worker_node": 1}),
        )
        yield address
    finally:
        _stop(procs, root)
        shutil.rmtree(root, ignore_errors=True)


def _nodes_without_py_modules(address: str) -> dict[str, tuple[str, str | None]]:
    """{"head_node" / "worker_node": (its node id, where ``import aoi_fl`` found the package, or
    None)}, from tasks sent without ``py_modules``."""

    def probe():
        import ray

        try:
            import aoi_fl
        except ModuleNotFoundError:
            return ray.get_runtime_context().get_node_id(), None
        return ray.get_runtime_context().get_node_id(), aoi_fl.__file__

    ray.init(address=address, log_to_driver=False)
    try:
        tasks = {
            name: ray.remote(num_cpus=0, resources={name: 1})(probe).remote()
            for name in ("head_node", "worker_node")
        }
        return {name: ray.get(task, timeout=START_S) for name, task in tasks.items()}
    finally:
        ray.shutdown()


def _configs() -> list[dict]:
    """test_ray_grid's configurations, enough of them, with rounds enough (each about a second
    on one thread), that the node whose worker starts first cannot train the whole grid before
    the other node's worker has started (seconds later on a busy machine): Ray hands a queued
    task to a worker that has just finished one, so one-CPU nodes alone do not spread a grid of
    runs that are over in a moment."""
    configs = [_grid_tests().config(seed) for seed in range(6)]
    for c in configs:
        c["training"]["rounds"] = 30
    return configs


@pytest.mark.slow
def test_a_grid_on_a_two_node_cluster_gives_the_local_results(
    cluster, tmp_path, monkeypatch, caplog
):
    monkeypatch.chdir(tmp_path)  # not the checkout: Ray would put it on the workers' sys.path
    nodes = _nodes_without_py_modules(cluster)
    assert {name: found for name, (_, found) in nodes.items()} == {
        "head_node": None,
        "worker_node": None,
    }, "the nodes import aoi_fl without py_modules, so the check below would prove nothing"

    configs = _configs()
    torch.set_num_threads(1)  # as each Ray task does: the same numbers by construction
    local = runs.run_grid(
        configs, cache_dir=str(tmp_path / "local"), data_root=DATA, progress=False
    )
    with caplog.at_level(logging.INFO, logger=ray_grid.log.name):
        on_ray = runs.run_grid(
            configs,
            cache_dir=str(tmp_path / "ray"),
            data_root=DATA,  # an absolute path: the nodes run from other folders
            executor="ray",
            ray_address=cluster,
            threads=1,
            progress=False,
        )
    trained_on = {r.config_index: r.node_id for r in caplog.records if hasattr(r, "node_id")}
    assert sorted(trained_on) == list(range(len(configs)))
    assert set(trained_on.values()) == {node for node, _ in nodes.values()}

    assert not any(r.cached for r in on_ray)
    assert [r.key for r in on_ray] == [r.key for r in local]
    assert [r.history for r in on_ray] == [r.history for r in local]
    assert [(r.sampler, r.device) for r in on_ray] == [(r.sampler, r.device) for r in local]
    for a, b in zip(on_ray, local, strict=True):
        assert a.final_params.keys() == b.final_params.keys()
        assert all(np.array_equal(a.final_params[k], b.final_params[k]) for k in b.final_params)
