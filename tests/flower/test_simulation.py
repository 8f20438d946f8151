"""One end-to-end Flower simulation (10 nodes, 3 rounds, Ray backend) against the trainer."""

import numpy as np
import pytest

pytest.importorskip("flwr")

from aoi_fl.flower.simulation import run_flower  # noqa: E402
from aoi_fl.pipeline import runs  # noqa: E402

CONFIG = {
    "dataset": {"name": "mnist"},
    "partition": {"name": "iid", "n_clients": 10, "seed": 0},
    "model": {"name": "small_cnn", "seed": 0},
    "sampler": {"name": "markov_optimal", "m": 3, "m_prime": 2, "seed": 0},
    "training": {
        "rounds": 3,
        "local_steps": 2,
        "batch_size": 20,
        "eval_every": 1,
        "lr": {"name": "constant", "lr": 0.05},
        "algorithm": {"name": "fedavg"},
    },
}


@pytest.mark.slow
def test_a_flower_simulation_reproduces_the_in_process_run():
    flower = run_flower(CONFIG, data_root="data", num_cpus=2)
    trainer = runs.build_trainer(CONFIG, "data", device="cpu")
    history = trainer.run()
    assert flower.history["selected"] == history["selected"]
    assert flower.history["weights"] == history["weights"]
    assert flower.history["eval_round"] == history["eval_round"] == [0, 1, 2, 3]
    np.testing.assert_allclose(flower.history["test_accuracy"], history["test_accuracy"], atol=2e-4)
    np.testing.assert_allclose(flower.history["test_loss"], history["test_loss"], rtol=1e-5)
    for k, v in trainer.params.items():
        np.testing.assert_allclose(flower.final_params[k], v.numpy(), rtol=0, atol=1e-6)


def test_a_stateful_method_is_refused_before_anything_starts():
    config = {**CONFIG, "training": {**CONFIG["training"], "algorithm": {"name": "scaffold"}}}
    with pytest.raises(ValueError, match="does not run in Flower"):
        run_flower(config)
