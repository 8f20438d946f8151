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

    def stop_after_first(i, result):
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
            on_result=stop_after_first,
        )
    stored = sorted((tmp_path / "ray" / "runs").glob("*/result.json"))
    assert len(stored) == 1  # the first finished task was stored before the interruption
    first_written = stored[0].stat().st_mtime_ns
    resumed = runs.run_grid(
        configs, cache_dir=on_ray, executor="ray", workers=2, threads=1, progress=False
    )
    assert stored[0].stat().st_mtime_ns == first_written  # not recomputed
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
