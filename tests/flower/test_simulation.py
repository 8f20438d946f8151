"""One end-to-end Flower simulation (10 nodes, Ray backend) against the trainer: FedSUM-CR, whose
clients keep h_i, z_i and a_i in their nodes' state between the rounds they train (every other
method is checked on the in-process grid, tests/flower/test_algorithms.py). It runs beside two
busy processes, and its Ray node listens on loopback only (issue 38)."""

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("flwr")

from aoi_fl.flower.simulation import agreement, run_flower  # noqa: E402
from aoi_fl.pipeline import runs  # noqa: E402

spec = importlib.util.spec_from_file_location(
    "busy_machine", Path(__file__).parents[1] / "test_busy_machine.py"
)
busy_machine = importlib.util.module_from_spec(spec)
spec.loader.exec_module(busy_machine)

CONFIG = {
    "dataset": {"name": "mnist"},
    "partition": {"name": "iid", "n_clients": 10, "seed": 0},
    "model": {"name": "logistic_regression", "in_features": 784, "num_classes": 10, "seed": 0},
    "sampler": {"name": "markov_optimal", "m": 3, "m_prime": 2, "seed": 0},
    "training": {
        "rounds": 3,
        "local_steps": 2,
        "batch_size": 20,
        "eval_every": 1,
        "lr": {"name": "constant", "lr": 0.05},
        "algorithm": {"name": "fedavg"},
        "client_chunk": 1,  # one client per step, as a Flower client trains: same bits
    },
}


@pytest.mark.slow
def test_a_flower_simulation_reproduces_the_in_process_run(user_module):
    # one Ray simulation (each costs a minute) for what only run_flower does and what Ray's
    # runtime must keep: the user's sampler, on this process's path only, travels to the Ray
    # actors by value; it selects every other client, so under FedSUM-CR every client trains
    # again after a missed round, from the state its node kept (h_i, z_i, a_i)
    algorithm = {"name": "fedsum_cr", "local_steps": 2}
    training = {**CONFIG["training"], "algorithm": algorithm, "rounds": 4}
    config = {**CONFIG, "sampler": {"name": user_module, "seed": 0}, "training": training}
    with busy_machine.busy(), busy_machine.watch() as seen:
        flower = run_flower(config, data_root="data", num_cpus=2, threads=1, on_failure="error")
    assert seen and not busy_machine.beyond_loopback(seen)
    assert not busy_machine.listening(busy_machine.descendants(os.getpid()))  # all ended
    assert flower.history["selected"] == [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]] * 2
    assert flower.history["failed"] == [[]] * 4  # every client trained
    torch.set_num_threads(1)  # as the Flower clients (the conftest restores it)
    trainer = runs.build_trainer(config, "data", device="cpu")
    history = trainer.run()
    assert flower.history["selected"] == history["selected"]
    assert flower.history["weights"] == history["weights"]
    assert flower.history["eval_round"] == history["eval_round"] == [0, 1, 2, 3, 4]
    assert flower.history["update_norms"] == history["update_norms"]
    assert flower.history["test_accuracy"] == history["test_accuracy"]
    assert flower.history["test_loss"] == history["test_loss"]
    for k, v in trainer.params.items():
        np.testing.assert_array_equal(flower.final_params[k], v.numpy())
    assert all(agreement(flower, trainer).values())
    # a model one step further is not the same model, and other selections are not the same
    trainer.run_round()
    differs = agreement(flower, trainer)
    assert not differs["same model"] and not differs["same selections"]
