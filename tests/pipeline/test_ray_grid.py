"""run_grid on a local Ray instance: the local executor's results, stored by the driver, and an
interrupted grid that resumes without recomputing what it stored (issue 17)."""

import pytest

pytest.importorskip("ray")

from aoi_fl.pipeline import runs  # noqa: E402


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
    local = runs.run_grid(configs, cache_dir=str(tmp_path / "local"), progress=False)
    finished = []

    def stop_after_two(i, result):
        finished.append(i)
        if len(finished) == 2:
            raise Stop

    on_ray = str(tmp_path / "ray")
    with pytest.raises(Stop):
        runs.run_grid(
            configs,
            cache_dir=on_ray,
            executor="ray",
            workers=2,
            threads=1,
            progress=False,
            on_result=stop_after_two,
        )
    stored = sorted((tmp_path / "ray" / "runs").glob("*/result.json"))
    assert len(stored) == 2  # what finished before the interruption is in the driver's cache
    written = [p.stat().st_mtime_ns for p in stored]
    # resumed (here on the local executor, one Ray start less): only the missing run trains
    resumed = runs.run_grid(configs, cache_dir=on_ray, progress=False)
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
