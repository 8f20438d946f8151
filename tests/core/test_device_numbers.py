"""Training on an explicit ``device="cpu"`` reproduces committed results bit for bit (issue 16).

The first rounds of committed runs are replayed from their own configurations, and their
records compared with the committed ones exactly: the per-round update norms depend on every
bit of every parameter, and the evaluations on every bit of the model. The runs replayed are
those whose committed bits this machine kind reproduces with the code from before devices
existed too (the blocked CNN engine, the stacked linear model, the linear engine with FedSUM-B,
FedSUM-CR and FedAvg). The other committed linear-engine runs differ from any replay here in
their last bits, with the old code as with the new (they were computed in earlier sittings), so
they cannot be an exact oracle. (The conftest restores the thread count after each test.)
"""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from aoi_fl.fedsum.experiments import summarise
from aoi_fl.pipeline import cache, runs

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
DATA = str(ROOT / "data")
PER_ROUND = ("lr", "selected", "weights", "update_norms", "screen_accuracy")
PER_EVALUATION = ("test_loss", "test_accuracy", "client_losses")


def _entries():
    for path in sorted((RESULTS / "runs").glob("*/result.json")):
        yield path.parent.name, json.loads(path.read_text())["config"]


def _first(predicate):
    return next(key for key, config in _entries() if predicate(config))


def _training(config):
    return config.get("training") or config.get("run", {}).get("training") or {}


def _replay(config, rounds):
    # the committed grids ran in single-threaded workers; a convolution's sums are ordered by
    # the thread count, so two threads give other last bits
    torch.set_num_threads(1)
    trainer = runs.build_trainer(config, DATA, device="cpu")
    assert str(trainer.device) == "cpu"
    for _ in range(rounds):
        trainer.run_round()
    return trainer


def _is_run(config):
    return "training" in config


RUNS = {
    "aoi mcmahan_cnn blocked": lambda c: (
        _is_run(c) and c["model"]["name"] == "mcmahan_cnn" and c["training"]["screen_samples"]
    ),
    "agnostic linear regression": lambda c: (
        _is_run(c)
        and c["model"]["name"] == "linear_regression"
        and c["training"]["algorithm"]["name"] == "agnostic"
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("label", RUNS)
def test_a_committed_run_replays_exactly_on_cpu(label):
    key = _first(RUNS[label])
    body = cache._unseal(RESULTS / "runs" / key / "result.json")
    committed = body["result"]["history"]
    rounds = 2
    trainer = _replay(body["config"], rounds)
    ours = trainer.history
    compared = 0
    for name in PER_ROUND:
        if committed.get(name):
            assert ours[name][:rounds] == committed[name][:rounds], name
            compared += 1
    extra = set(committed) - set(PER_ROUND) - set(PER_EVALUATION) - {"eval_round"}
    for name in sorted(extra - {"client_loss_round"}):  # the recorder's per-round keys
        if committed[name]:
            assert ours[name][:rounds] == committed[name][:rounds], name
            compared += 1
    evaluations = [i for i, t in enumerate(committed["eval_round"]) if t <= rounds]
    assert ours["eval_round"][: len(evaluations)] == committed["eval_round"][: len(evaluations)]
    for name in PER_EVALUATION:
        for i in evaluations:
            if committed[name] and i < len(committed[name]):
                assert ours[name][i] == committed[name][i], (name, i)
                compared += 1
    assert compared >= 3, f"{label}: too little to compare in {key}"


LONG_ALGORITHMS = ("fedsum_b", "fedsum_cr", "fedavg")


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", LONG_ALGORITHMS)
def test_a_fedsum_long_run_replays_its_first_evaluation_exactly_on_cpu(algorithm):
    key = _first(
        lambda c: (
            "fedsum_summary" in c
            and _training(c)["rounds"] == 2000
            and _training(c)["algorithm"]["name"] == algorithm
        )
    )
    folder = RESULTS / "runs" / key
    body = cache._unseal(folder / "result.json")
    arrays = np.load(folder / "arrays.npz")
    config = body["config"]["run"]
    every = config["training"]["eval_every"]
    trainer = _replay(config, every)
    sizes = runs.client_sizes(config, DATA)
    communication = runs.ALGORITHMS[algorithm].communication
    ours = summarise(trainer.history, sizes, communication)
    assert list(ours["eval_round"]) == [0, every] == list(arrays["eval_round"][:2])
    for name in ("train_loss", "objective", "test_loss", "test_accuracy"):
        np.testing.assert_array_equal(ours[name], arrays[name][:2], err_msg=name)
