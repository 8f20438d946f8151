"""run_grid on a local Ray node: the local executor's results, stored by the driver, and an
interrupted grid that resumes without recomputing what it stored (issue 17); the node comes up
beside two busy processes and listens on loopback only, its start is retried once and leaves
nothing behind when it fails (issue 38)."""

import importlib.util
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")

from aoi_fl.pipeline import ray_grid, runs  # noqa: E402

spec = importlib.util.spec_from_file_location(
    "busy_machine", Path(__file__).parents[1] / "test_busy_machine.py"
)
busy_machine = importlib.util.module_from_spec(spec)
spec.loader.exec_module(busy_machine)


def config(seed):
    return {
        "dataset": {"name": "mnist"},
        "partition": {"name": "iid", "n_clients": 10, "seed": seed},
        "model": {"name": "logistic_regression", "in_features": 784, "num_classes": 10, "seed": 0},
        "sampler": {"name": "random", "m": 3, "m_prime": 2, "seed": seed},
        "training": {
            "rounds": 3,
            "local_steps": 2,
            "batch_size": 20,
            "lr": {"name": "constant", "lr": 0.05},
            "algorithm": {"name": "fedavg"},
        },
    }


class Stop(Exception):
    pass


@pytest.mark.slow
def test_a_ray_grid_gives_the_local_results_and_resumes(tmp_path):
    configs = [config(s) for s in range(3)]
    local = runs.run_grid(configs, results_dir=str(tmp_path / "local"), progress=False)
    finished, up = [], set()

    def stop_after_two(i, result):
        # a task has finished: the node and a worker are up
        up.update(busy_machine.listening(busy_machine.descendants(os.getpid())))
        finished.append(i)
        if len(finished) == 2:
            raise Stop

    on_ray = str(tmp_path / "ray")
    with busy_machine.busy(), busy_machine.watch() as seen, pytest.raises(Stop):
        runs.run_grid(
            configs,
            results_dir=on_ray,
            executor="ray",
            workers=2,
            threads=1,
            progress=False,
            on_result=stop_after_two,
        )
    # the GCS, the raylet's two servers, the agents, the driver and its worker at least
    assert len(up) >= 5 and up <= seen
    assert not busy_machine.beyond_loopback(seen)
    assert not busy_machine.listening(busy_machine.descendants(os.getpid()))  # all ended
    stored = sorted((tmp_path / "ray" / "runs").glob("*/result.json"))
    assert len(stored) == 2  # what finished before the interruption is in the driver's cache
    written = [p.stat().st_mtime_ns for p in stored]
    # resumed (here on the local executor, one Ray start less): only the missing run trains
    resumed = runs.run_grid(configs, results_dir=on_ray, progress=False)
    assert [p.stat().st_mtime_ns for p in stored] == written  # not recomputed
    assert len(list((tmp_path / "ray" / "runs").glob("*/result.json"))) == 3
    # the two results computed by Ray tasks are exactly the local executor's
    assert [r.key for r in resumed] == [r.key for r in local]
    assert [r.history for r in resumed] == [r.history for r in local]
    for a, b in zip(resumed, local, strict=True):
        assert all((a.final_params[k] == b.final_params[k]).all() for k in b.final_params)


def test_an_unknown_executor_is_refused(monkeypatch):
    with pytest.raises(ValueError, match="executor"):
        runs.run_grid([config(0)], executor="dask")
    # make figures EXECUTOR=... reaches run_grid through the environment
    monkeypatch.setenv(runs.EXECUTOR_VAR, "dask")
    with pytest.raises(ValueError, match="unknown executor 'dask'; valid: local, ray"):
        runs.run_grid([config(0)])


def test_a_tasks_weights_are_stored_with_its_entry(tmp_path):
    # the driver decodes the task's .npz bytes and writes them with the rest of the entry
    import io

    import numpy as np

    from aoi_fl.pipeline.cache import ResultStore, arrays_bytes
    from aoi_fl.pipeline.ray_grid import store_result

    cfg = config(0)
    weights = {"fc.weight": np.arange(6, dtype=np.float32).reshape(2, 3)}
    store_result(str(tmp_path), cfg, {"rounds": 3}, {"acc": np.ones(3)}, arrays_bytes(weights))
    store = ResultStore(str(tmp_path))
    assert store.load(cfg)[0] == {"rounds": 3}
    with np.load(io.BytesIO(store.weights_file(cfg).read_bytes())) as npz:
        assert np.array_equal(npz["fc.weight"], weights["fc.weight"])


def test_every_server_of_a_node_gets_a_port_of_its_own():
    head, worker = ray_grid.node_ports(head=True), ray_grid.node_ports(head=False)
    assert set(head) == {
        "port",
        "ray-client-server-port",
        "dashboard-port",
        "node-manager-port",
        "object-manager-port",
        "metrics-export-port",
        "dashboard-agent-grpc-port",
        "dashboard-agent-listen-port",
        "runtime-env-agent-port",
    }
    assert set(worker) == set(head) - {"port", "ray-client-server-port", "dashboard-port"}
    assert len(set(head.values())) == len(head) and all(p > 0 for p in head.values())


@pytest.mark.parametrize(
    ("device", "cuda", "gpu"),
    [
        ("cpu", True, False),
        ("cuda", False, True),
        ("cuda:1", False, True),
        ("auto", True, True),
        ("auto", False, False),
        (None, False, False),
    ],
)
def test_a_run_on_cuda_asks_ray_for_a_gpu(monkeypatch, device, cuda, gpu):
    import torch

    monkeypatch.delenv("AOI_FL_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    assert ray_grid.on_gpu(device) is gpu


def test_a_gpu_run_without_a_gpu_is_refused_before_ray_starts(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(ray_grid, "local_ray", None)  # would fail if reached
    jobs = {0: (config(0), "cpu"), 1: (config(1), "cuda:0")}
    with pytest.raises(ValueError, match=r"device 'cuda:0' trains on a GPU, but this machine"):
        next(ray_grid.ray_results(jobs, run=runs.run_experiment, data_root="data"))


#: a stand-in for ``python`` in ray_node: its first {failures} starts fail, a later one comes
#: up (writes the cluster's address where ``ray start`` does) and runs until it is ended
FAKE_RAY_START = """#!{python}
import pathlib, sys, time
temp = pathlib.Path(next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--temp-dir=")))
starts = pathlib.Path(sys.argv[0]).with_suffix(".starts")
starts.write_text(starts.read_text() + "x" if starts.exists() else "x")
if len(starts.read_text()) <= {failures}:
    print("the current node timed out during startup", flush=True)
    sys.exit(1)
(temp / "ray_current_cluster").write_text("127.0.0.1:6379")
time.sleep(600)
"""


def _fake_ray_start(tmp_path: Path, failures: int) -> str:
    fake = tmp_path / "fake_python"
    fake.write_text(FAKE_RAY_START.format(python=sys.executable, failures=failures))
    fake.chmod(0o755)
    return str(fake)


@pytest.fixture
def node_folders(monkeypatch):
    """The folders ray_node makes, in order."""
    made = []
    mkdtemp = ray_grid.tempfile.mkdtemp

    def recorded(**kwargs):
        made.append(Path(mkdtemp(**kwargs)))
        return str(made[-1])

    monkeypatch.setattr(ray_grid.tempfile, "mkdtemp", recorded)
    return made


def test_a_node_that_fails_to_start_is_started_again_and_cleaned_up(tmp_path, node_folders):
    with ray_grid.ray_node(["--head"], python=_fake_ray_start(tmp_path, 1)) as address:
        assert address == "127.0.0.1:6379"
        assert len(node_folders) == 2 and not node_folders[0].exists()
        assert ray_grid._processes(node_folders[1])  # the node's process runs
    assert not node_folders[1].exists() and not ray_grid._processes(node_folders[1])


def test_a_node_that_never_starts_is_reported_with_its_log(tmp_path, node_folders):
    with pytest.raises(RuntimeError, match=r"(?s)did not come up in 2 attempts.*timed out during"):
        with ray_grid.ray_node(["--head"], python=_fake_ray_start(tmp_path, 2)):
            pass
    assert len(node_folders) == 2 and not any(f.exists() for f in node_folders)


def test_a_failed_connection_ends_the_node_it_started(monkeypatch):
    import ray

    ended = []

    @ray_grid.contextlib.contextmanager
    def node(num_cpus, num_gpus):
        try:
            yield "127.0.0.1:1"
        finally:
            ended.append(True)

    def refuse(**kwargs):
        raise ConnectionError("no GCS there")

    monkeypatch.setattr(ray_grid, "local_ray", node)
    monkeypatch.setattr(ray, "init", refuse)
    with pytest.raises(ConnectionError, match="no GCS there"):
        with ray_grid.connected("local", num_cpus=1):
            pass
    assert ended == [True] and not ray.is_initialized()
    with pytest.raises(ValueError, match=r"address must be 'local', 'auto' or a cluster address"):
        with ray_grid.connected(""):
            pass
