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
``ray_grid`` they would fail too. The nodes start, and the grid runs, beside two busy processes
(``tests/test_busy_machine.py``): a node comes up on a machine busy with other work (issue 38).
"""

import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import numpy as np
import pytest

# ray_grid before ray: it turns Ray's telemetry off, which ray reads on import
from aoi_fl.pipeline import ray_grid, runs

ray = pytest.importorskip("ray", reason="the optional extra 'ray' is not installed")

import torch  # noqa: E402

DATA = str(Path(__file__).resolve().parents[2] / "data")

spec = importlib.util.spec_from_file_location(
    "busy_machine", Path(__file__).parents[1] / "test_busy_machine.py"
)
busy_machine = importlib.util.module_from_spec(spec)
spec.loader.exec_module(busy_machine)


def _grid_tests():
    """tests/pipeline/test_ray_grid.py, whose configurations the cluster runs."""
    path = Path(__file__).with_name("test_ray_grid.py")
    spec = importlib.util.spec_from_file_location("_ray_grid_tests", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


@pytest.fixture
def busy():
    with busy_machine.busy():
        yield


@pytest.fixture
def cluster(busy):
    """The address of a cluster of two nodes of one CPU each, with resources ``head_node`` and
    ``worker_node``, running a Python that cannot import aoi_fl. The nodes are started as
    ``ray_grid`` starts its local one (:func:`ray_grid.ray_node`: every port given, so that it
    comes up on a busy machine; one retry), but on the machine's address: a node on 127.0.0.1
    takes no other node."""
    root = Path(tempfile.mkdtemp(prefix="aoi-ray-"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_ADDRESS")}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    try:
        python = _bare_python(root / "env")
        node = {"python": python, "env": env, "cwd": root}
        head = ["--head", "--no-monitor", "--num-cpus=1", "--include-dashboard=false"]
        with (
            ray_grid.ray_node(
                [*head, "--resources=" + json.dumps({"head_node": 1})], **node
            ) as address,
            ray_grid.ray_node(
                [f"--address={address}", "--num-cpus=1"]
                + ["--resources=" + json.dumps({"worker_node": 1})],
                **node,
            ),
        ):
            yield address
    finally:
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
        return {
            name: ray.get(task, timeout=ray_grid.START_TIMEOUT_S) for name, task in tasks.items()
        }
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
        configs, results_dir=str(tmp_path / "local"), data_root=DATA, progress=False
    )
    with caplog.at_level(logging.INFO, logger=ray_grid.log.name):
        on_ray = runs.run_grid(
            configs,
            results_dir=str(tmp_path / "ray"),
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
