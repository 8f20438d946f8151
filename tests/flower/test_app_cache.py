"""Notebook 18's pairs of runs in the cache (:func:`aoi_fl.evidence.flower.figures.flower_pairs`,
issue 38): computed once, both sides together, and re-read without starting Flower or Ray;
``rerun``, or a missing side, computes the pair again. ``flwr run`` is stood in for by the trainer
itself (the real one: ``test_app.py``)."""

import shutil

import pytest

pytest.importorskip("flwr")

from aoi_fl.evidence.flower import figures
from aoi_fl.flower import app, simulation  # noqa: E402
from aoi_fl.pipeline import runs  # noqa: E402
from aoi_fl.pipeline.cache import ResultStore  # noqa: E402

CONFIG = {
    "dataset": {"name": "mnist"},
    "partition": {"name": "iid", "n_clients": 4, "seed": 0},
    "model": {"name": "logistic_regression", "in_features": 784, "num_classes": 10, "seed": 0},
    "sampler": {"name": "random", "m": 2, "m_prime": 1, "seed": 0},
    "training": {
        "rounds": 2,
        "local_steps": 1,
        "batch_size": 8,
        "eval_every": 1,
        "lr": {"name": "constant", "lr": 0.05},
        "algorithm": {"name": "fedavg"},
        "client_chunk": 1,
    },
}


@pytest.fixture
def flwr_runs(monkeypatch):
    """The configurations ``run_flower_app`` was called with; each run is the trainer's."""
    called = []

    def stand_in(config, *, data_root, num_cpus):
        called.append(config)
        trainer = runs.build_trainer(config, data_root, device="cpu")
        trainer.run()
        final = {k: v.numpy().copy() for k, v in trainer.reported_params().items()}
        return simulation.FlowerRun(trainer.history, final)

    monkeypatch.setattr(app, "run_flower_app", stand_in)
    return called


def test_a_pair_is_computed_once_and_read_back(tmp_path, flwr_runs):
    configs = {"random": CONFIG}
    first = figures.flower_pairs(configs, str(tmp_path), "data")
    assert len(flwr_runs) == 1 and all(figures.agreement_table(first).all())
    stored = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert len(stored) == 2  # the Flower run and the in-process run

    again = figures.flower_pairs(configs, str(tmp_path), "data")
    assert len(flwr_runs) == 1  # read back: no flwr run
    (flower, trainer), (flower_again, trainer_again) = first["random"], again["random"]
    assert flower_again.history == flower.history and trainer_again.cached
    assert trainer_again.history == trainer.history
    assert figures.agreement_table(again).equals(figures.agreement_table(first))

    figures.flower_pairs(configs, str(tmp_path), "data", rerun=True)
    assert len(flwr_runs) == 2
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == stored


def test_a_pair_missing_one_side_is_computed_again_whole(tmp_path, flwr_runs):
    figures.flower_pairs({"random": CONFIG}, str(tmp_path), "data")
    in_process = ResultStore(str(tmp_path)).folder(runs.resolve_config(CONFIG))
    shutil.rmtree(in_process)  # the Flower record alone must not pair with a new trainer run
    ((_, trainer),) = figures.flower_pairs({"random": CONFIG}, str(tmp_path), "data").values()
    assert len(flwr_runs) == 2 and not trainer.cached and in_process.is_dir()
