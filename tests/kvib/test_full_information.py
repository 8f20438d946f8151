"""The trainer's full-information mode (K-Vib metrics), its config keys, the linear engine."""

from pathlib import Path

import numpy as np
import pytest
import torch

from aoi_fl.core.engines import LocalTraining, local_batches
from aoi_fl.core.models import LinearRegression, LogisticRegression
from aoi_fl.core.tensors import TensorSplit, stack
from aoi_fl.core.train import TrainSettings
from aoi_fl.kvib.estimators import FULL_INFORMATION_KEYS, dynamic_regret
from aoi_fl.pipeline import runs
from aoi_fl.pipeline.cache import config_key

#: the repository's data folder, whatever the working directory
DATA = str(Path(__file__).resolve().parents[2] / "data")


def config(sampler="kvib", rounds=4, k=3, **training):
    options = {"k": k, "seed": 1}
    if sampler in ("kvib", "vrb", "mabs"):
        options["rounds"] = rounds
    return {
        "dataset": {"name": "fedprox_synthetic", "n_clients": 8, "seed": 0},
        "partition": {"name": "natural", "n_clients": 8},
        "model": {"name": "logistic_regression", "in_features": 60, "num_classes": 10, "seed": 0},
        "sampler": {"name": sampler, **options},
        "training": {
            "rounds": rounds,
            "local_epochs": 1,
            "batch_size": 64,
            "seed": 0,
            "lr": {"name": "constant", "lr": 0.02},
            "algorithm": {"name": "fedavg", "aggregation": "weighted_delta"},
            "engine": "linear",
            "full_information": True,
            **training,
        },
    }


def flat(params):
    return torch.cat([v.flatten() for v in params.values()]).double().cpu().numpy()


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["kvib", "uniform_unbiased", "vrb", "optimal"])
def test_records_and_their_meaning(sampler):
    trainer = runs.build_trainer(config(sampler), DATA)
    sizes = trainer.data.sizes / trainer.data.sizes.sum()
    for _ in range(4):
        before = trainer.params
        n = len(trainer.data.partition)
        everyone = trainer._train(trainer.round, 0.02, np.arange(n), np.zeros(n))
        g = (
            torch.cat([v.flatten(1) for v in everyone.deltas().values()], dim=1)
            .double()
            .cpu()
            .numpy()
        )
        trainer.run_round()
        # with weighted_delta and server_lr 1 the model moves by exactly d = sum_S w_i g_i
        d = flat(trainer.params) - flat(before)
        error = d - sizes @ g
        assert trainer.history["squared_error"][-1] == pytest.approx(error @ error, rel=1e-4)
    h = trainer.history
    assert all(len(h[key]) == 4 for key in FULL_INFORMATION_KEYS)
    cost, optimum = np.array(h["cost"]), np.array(h["optimal_cost"])
    if sampler == "optimal":
        np.testing.assert_allclose(dynamic_regret(cost, optimum), 0.0, atol=1e-12)
    elif sampler != "vrb":  # K q may exceed 1 with replacement, then l(Kq) can undercut eq. 4
        assert (cost >= optimum * (1 - 1e-12)).all()
    if sampler == "uniform_unbiased":
        np.testing.assert_allclose(h["uniform_cost"], cost)
    assert len(h["selected"]) == 4


@pytest.mark.slow
def test_full_information_changes_no_trajectory():
    plain = runs.build_trainer(config("kvib", full_information=False), DATA)
    full = runs.build_trainer(config("kvib"), DATA)
    plain.run()
    full.run()
    assert plain.history["selected"] == full.history["selected"]
    np.testing.assert_allclose(flat(plain.params), flat(full.params), rtol=1e-5, atol=1e-7)
    assert "cost" not in plain.history


def test_checkpoint_round_trip_keeps_the_records():
    a = runs.build_trainer(config("kvib", rounds=5, record_clients=False), DATA)
    for _ in range(3):
        a.run_round()
    tensors, state = a.state_dict()
    b = runs.build_trainer(config("kvib", rounds=5, record_clients=False), DATA)
    b.load_state_dict(tensors, state)
    a.run()
    b.run()
    assert a.history == b.history
    assert a.history["selected"] == [] and len(a.history["cost"]) == 5


def test_optional_training_keys_leave_existing_cache_keys_alone():
    base = config("uniform_unbiased", full_information=False)
    del base["training"]["full_information"]
    explicit = config("uniform_unbiased", full_information=False, record_clients=True)
    resolved = runs.resolve_config(explicit)
    assert "full_information" not in resolved["training"]
    assert config_key(resolved) == config_key(runs.resolve_config(base))
    assert runs.resolve_config(config("uniform_unbiased"))["training"]["full_information"] is True
    with pytest.raises(TypeError, match="full_information must be True or False"):
        TrainSettings(rounds=1, full_information=1)
    with pytest.raises(ValueError, match="unknown training options.*record_clients"):
        runs.resolve_config(config("uniform_unbiased", records=False))


def test_full_information_needs_an_unbiased_sampler():
    cfg = config("random")
    cfg["sampler"] = {"name": "random", "m": 2, "seed": 0}
    trainer = runs.build_trainer(cfg, DATA)
    with pytest.raises(ValueError, match="carry probabilities"):
        trainer.run_round()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["softmax", "least_squares"])
def test_linear_engine_equals_the_sequential_reference(kind):
    gen = torch.Generator().manual_seed(0)
    sizes = [37, 120, 5, 64]
    total = sum(sizes)
    x = torch.randn(total, 2, 3, generator=gen)
    if kind == "softmax":
        model, loss = LogisticRegression(6, 4, seed=0), "cross_entropy"
        y = torch.randint(0, 4, (total,), generator=gen)
    else:
        model, loss = LinearRegression(6, seed=0), "mse"
        y = torch.randn(total, generator=gen)
    data = TensorSplit(x, y)
    bounds = np.cumsum([0, *sizes])
    schedules = []
    for c, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        rows = local_batches(0, 0, c, hi - lo, 2, 16)
        schedules.append(np.where(rows >= 0, rows + lo, -1))
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    start = stack(params, len(sizes))
    ref = LocalTraining(model, loss, "sequential")(start, data, schedules, 0.1)
    out = LocalTraining(model, loss, "linear")(start, data, schedules, 0.1)
    for k in ref:
        torch.testing.assert_close(out[k], ref[k], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="engine 'linear' supports"):
        LocalTraining(torch.nn.Sequential(torch.nn.Linear(6, 3), torch.nn.ReLU()), loss, "linear")
