"""The selection skew rho of eq. 24 against hand computations and closed-form local optima."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from aoi_fl.aoi.samplers import make_sampler
from aoi_fl.aoi.skew import (
    LocalOptimumCriterion,
    local_optimum_losses,
    local_optimum_to_criterion,
    skew,
    skew_of_run,
    skew_sensitivity,
)
from aoi_fl.core.models import build_model
from aoi_fl.core.tensors import TensorSplit
from aoi_fl.core.train import FederatedData, FederatedTrainer, TrainSettings
from aoi_fl.evidence.aoi import experiments as ex
from aoi_fl.pipeline.runs import client_sizes, run_experiment


def test_full_participation_with_data_weights_has_skew_one():
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 50, 8).astype(float)
    f, f_star = rng.uniform(1, 2, 8), rng.uniform(0, 1, 8)
    q = sizes / sizes.sum()
    assert skew(f, np.arange(8), q, sizes, f_star) == pytest.approx(1.0)


def test_hand_computed_case():
    sizes = np.array([1.0, 1.0, 2.0])  # q = 1/4, 1/4, 1/2
    f = np.array([3.0, 1.0, 2.0])
    f_star = np.array([1.0, 0.0, 1.0])  # gaps 2, 1, 1; global gap = 0.5 + 0.25 + 0.5 = 1.25
    assert skew(f, [0], [1.0], sizes, f_star) == pytest.approx(2 / 1.25)
    assert skew(f, [1, 2], [0.5, 0.5], sizes, f_star) == pytest.approx(1 / 1.25)


def test_skew_of_run_uses_current_and_final_models():
    sizes = np.ones(2)
    history = {
        "selected": [[0], [1]],
        "weights": [[1.0], [1.0]],
        "eval_round": [0, 1, 2],
        "client_losses": [[2.0, 1.0], [1.0, 3.0], [1.0, 1.0]],
    }
    s = skew_of_run(history, sizes, np.zeros(2))
    # round 0: gap (2, 1), global 1.5 -> rho = 2/1.5; round 1: gap (1, 3), global 2 -> 3/2
    np.testing.assert_allclose(s.rho_current, [2 / 1.5, 1.5])
    np.testing.assert_allclose(s.rho_final, [1.0, 1.0])
    np.testing.assert_array_equal(s.rounds, [0, 1])
    assert s.mean == pytest.approx((2 / 1.5 + 1.5) / 2)
    assert s.sd == pytest.approx(abs(2 / 1.5 - 1.5) / np.sqrt(2))
    assert s.lower == pytest.approx(4 / 3) and s.upper == pytest.approx(1.0)


# two clients with quadratic losses F_k(theta) = (theta - c_k)^2 + m_k: theta_k* = c_k and
# F_k(theta_k*) = m_k in closed form; sizes 1 and 3 (q = 1/4, 3/4)
C, M, SIZES2 = np.array([0.0, 2.0]), np.array([0.5, 1.0]), np.array([1.0, 3.0])


def quadratic_history(thetas):
    """Rounds 0..R-1 select client 0, 1, 0, ... alone (weight 1); losses of theta_t at every t."""
    return {
        "selected": [[t % 2] for t in range(len(thetas) - 1)],
        "weights": [[1.0] for _ in range(len(thetas) - 1)],
        "eval_round": list(range(len(thetas))),
        "client_losses": [((th - C) ** 2 + M).tolist() for th in thetas],
    }


def test_two_client_quadratic_against_closed_form():
    # theta_0 = 1: F = (1.5, 2), gaps (1, 1), global gap 1 -> rho(S={0}) = 1
    # theta_1 = 0: F = (0.5, 5), gaps (0, 4), global gap 3 -> rho(S={1}) = 4/3
    # theta* = theta_2 = 2: F = (4.5, 1), gaps (4, 0), global gap 1 -> rho({0}) 4, rho({1}) 0
    s = skew_of_run(quadratic_history([1.0, 0.0, 2.0]), SIZES2, M)
    np.testing.assert_allclose(s.rho_current, [1.0, 4 / 3])
    np.testing.assert_allclose(s.rho_final, [4.0, 0.0])
    assert (s.lower, s.upper) == pytest.approx((1.0, 4.0))
    # F* = 0 instead: theta_0 gaps (1.5, 2), global 1.875 -> 1.5/1.875 = 0.8;
    # theta_1 gaps (0.5, 5), global 0.125 + 3.75 = 3.875 -> 5/3.875
    zero = skew_sensitivity(quadratic_history([1.0, 0.0, 2.0]), SIZES2, M, [0.5, 0.25]).zero
    np.testing.assert_allclose(zero.rho_current, [0.8, 5 / 3.875])
    # F* lowered by the residual (0.5, 0.25) -> (0, 0.75): theta_0 gaps (1.5, 1.25), global
    # 0.375 + 0.9375 = 1.3125 -> 1.5/1.3125; raised -> (1, 1.25): gaps (0.5, 0.75), global
    # 0.125 + 0.5625 = 0.6875 -> 0.5/0.6875
    sens = skew_sensitivity(quadratic_history([1.0, 0.0, 2.0]), SIZES2, M, [0.5, 0.25])
    assert sens.lowered.rho_current[0] == pytest.approx(1.5 / 1.3125)
    assert sens.raised.rho_current[0] == pytest.approx(0.5 / 0.6875)


def test_sensitivity_with_zero_residual_is_the_estimate():
    history = quadratic_history([1.0, 0.0, 2.0, 1.5, 0.5])
    sens = skew_sensitivity(history, SIZES2, M, np.zeros(2))
    plain = skew_of_run(history, SIZES2, M)
    for variant in (sens.estimate, sens.lowered, sens.raised):
        np.testing.assert_array_equal(variant.rho_current, plain.rho_current)
        np.testing.assert_array_equal(variant.rho_final, plain.rho_final)
    # lowering never goes below 0 (losses are non-negative): a huge residual gives F* = 0
    np.testing.assert_array_equal(
        skew_sensitivity(history, SIZES2, M, [10.0, 10.0]).lowered.rho_current,
        sens.zero.rho_current,
    )


def fake_history(rounds=7, n=5, seed=0):
    rng = np.random.default_rng(seed)
    selected = [sorted(rng.choice(n, 2, replace=False).tolist()) for _ in range(rounds)]
    return {
        "selected": selected,
        "weights": [rng.uniform(0.1, 1.0, 2).tolist() for _ in range(rounds)],
        "eval_round": list(range(rounds + 1)),
        "client_losses": rng.uniform(1.0, 3.0, (rounds + 1, n)).tolist(),
    }


@pytest.mark.parametrize("screened", [False, True])
def test_subset_of_rounds_is_the_every_round_skew_restricted(screened):
    full = fake_history()
    sizes, f_star = np.arange(1.0, 6.0), np.linspace(0.1, 0.5, 5)
    every = skew_of_run(full, sizes, f_star)
    keep = [0, 3, 5, 7]  # every 5 rounds plus the final one, and an extra round 3
    part = {
        "selected": full["selected"],
        "weights": full["weights"],
        "client_losses": [full["client_losses"][t] for t in keep],
    }
    if screened:  # full-test evaluations at more rounds than the client losses
        part.update(eval_round=[0, 2, 3, 4, 5, 7], client_loss_round=keep)
    else:
        part["eval_round"] = keep
    s = skew_of_run(part, sizes, f_star)
    np.testing.assert_array_equal(s.rounds, [0, 3, 5])
    np.testing.assert_array_equal(s.rho_current, every.rho_current[[0, 3, 5]])
    np.testing.assert_array_equal(s.rho_final, every.rho_final)  # every round, theta* only
    assert s.n_rounds == 3 and every.n_rounds == 7
    assert s.upper == every.upper


def test_bad_histories_and_arguments_are_refused():
    history = {"selected": [[0]], "weights": [[1.0]], "eval_round": [1], "client_losses": [[1.0]]}
    with pytest.raises(ValueError, match="no round before the last"):
        skew_of_run(history, np.ones(1), np.zeros(1))
    history = {"selected": [[0]], "weights": [[1.0]], "eval_round": [0], "client_losses": [[1.0]]}
    with pytest.raises(ValueError, match="client_losses of the final model"):
        skew_of_run(history, np.ones(1), np.zeros(1))
    history["client_loss_round"] = [0, 1]
    with pytest.raises(ValueError, match="client_loss_round"):
        skew_of_run(history, np.ones(1), np.zeros(1))
    with pytest.raises(ValueError, match="record_clients"):
        skew_of_run({"selected": [], "weights": []}, np.ones(1), np.zeros(1))
    with pytest.raises(ValueError, match="one entry per client"):
        skew([1.0, 2.0], [0], [1.0], np.ones(3), np.zeros(2))
    h = quadratic_history([1.0, 0.0, 2.0])
    with pytest.raises(ValueError, match=r"residual\[1\]"):
        skew_sensitivity(h, SIZES2, M, [0.1, -0.1])
    with pytest.raises(ValueError, match="residual"):
        skew_sensitivity(h, SIZES2, M, [0.1, 0.1, 0.1])
    with pytest.raises(ValueError, match="chunk_epochs must be >= 1"):
        LocalOptimumCriterion(chunk_epochs=0)
    with pytest.raises(ValueError, match="tol must be > 0"):
        LocalOptimumCriterion(tol=0.0)
    with pytest.raises(ValueError, match="max_epochs .* multiple of chunk_epochs"):
        LocalOptimumCriterion(chunk_epochs=5, max_epochs=12)
    with pytest.raises(ValueError, match="max_epochs must be >= 5"):
        LocalOptimumCriterion(chunk_epochs=5, max_epochs=1)
    with pytest.raises(ValueError, match="unknown profile"):
        ex.selection_skew([], "fast")
    with pytest.raises(TypeError, match="criterion must be a LocalOptimumCriterion"):
        ex.selection_skew([], "smoke", criterion=(5, 0.1))


# ---------------------------------------------------------------------------------------------
# A tiny linear model whose local optima are known in closed form (least squares)


def linear_trainer(client_loss_samples=40):
    """Two clients of y = a_k x + b_k + noise (x standardised per client), linear regression.

    With full-batch steps the squared loss has Hessian 2 I in (slope, intercept), so gradient
    descent at lr 0.25 halves the distance to the least-squares fit every epoch.
    """
    gen = np.random.default_rng(3)
    xs, ys, partition = [], [], []
    for k, (n, a, b) in enumerate([(20, 2.0, -1.0), (30, -0.5, 3.0)]):
        x = gen.normal(size=n)
        x = (x - x.mean()) / x.std()
        xs.append(x), ys.append(a * x + b + gen.normal(scale=0.3, size=n))
        partition.append(np.arange(n) + (0 if k == 0 else 20))
    x = torch.tensor(np.concatenate(xs), dtype=torch.float32)[:, None]
    y = torch.tensor(np.concatenate(ys), dtype=torch.float32)
    data = FederatedData(TensorSplit(x, y), TensorSplit(x[:5], y[:5]), partition)
    settings = TrainSettings(
        rounds=1, batch_size=50, loss="mse", client_loss_samples=client_loss_samples
    )
    sampler = make_sampler("random", n=2, m=1)
    model = build_model("linear_regression", in_features=1, seed=0)
    trainer = FederatedTrainer(model, data, sampler, settings)
    return trainer, xs, ys


def least_squares_loss(x, y):
    design = np.stack([x, np.ones_like(x)], axis=1)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    return float(np.mean((design @ coef - y) ** 2))


def test_local_optima_of_a_linear_model_reach_the_least_squares_fit():
    trainer, xs, ys = linear_trainer()
    criterion = LocalOptimumCriterion(chunk_epochs=2, tol=1e-4, max_epochs=60, lr=0.25)
    opt = local_optimum_to_criterion(trainer, criterion)
    exact = np.array([least_squares_loss(x, y) for x, y in zip(xs, ys, strict=True)])
    np.testing.assert_allclose(opt.losses, exact, rtol=1e-4)
    # it stopped at the first chunk whose change is within the tolerance, well before 60 epochs
    assert opt.converged and opt.change <= 1e-4 < opt.changes[-2]
    assert opt.epochs == 2 * opt.changes.size < 60
    assert np.all(np.diff(opt.changes) < 0)  # a linear rate: the change shrinks every chunk
    q = np.array([20, 30]) / 50
    assert opt.change == pytest.approx(q @ opt.residual)
    # one chunk less: not converged, and the residual is that chunk's change
    short = local_optimum_to_criterion(
        trainer, LocalOptimumCriterion(2, 1e-4, opt.epochs - 2, 0.25)
    )
    assert not short.converged and short.change > 1e-4
    np.testing.assert_array_equal(short.changes, opt.changes[:-1])
    np.testing.assert_allclose(opt.residual, np.abs(opt.losses - short.losses))
    # deterministic, and its first chunk is the fixed-epochs estimate
    again = local_optimum_to_criterion(trainer, criterion)
    np.testing.assert_array_equal(again.losses, opt.losses)
    first = local_optimum_to_criterion(trainer, LocalOptimumCriterion(2, 1e-4, 2, 0.25))
    np.testing.assert_array_equal(first.losses, local_optimum_losses(trainer, 2, 0.25))
    # rho of a selection with the global model against its closed form
    a, b = (float(v.flatten()[0]) for v in trainer.params.values())
    f = np.array([np.mean((a * x + b - y) ** 2) for x, y in zip(xs, ys, strict=True)])
    closed = 1.0 * (f[1] - exact[1]) / (q @ (f - exact))
    rho = skew(trainer.client_losses(), [1], [1.0], np.array([20.0, 30.0]), opt.losses)
    assert rho == pytest.approx(closed, rel=1e-4)


def test_local_optimum_needs_client_losses_and_a_criterion():
    trainer, _, _ = linear_trainer(client_loss_samples=0)
    with pytest.raises(ValueError, match="client_loss_samples > 0"):
        local_optimum_to_criterion(trainer, LocalOptimumCriterion())
    with pytest.raises(TypeError, match="criterion must be a LocalOptimumCriterion"):
        local_optimum_to_criterion(trainer, {"tol": 1e-3})


# ---------------------------------------------------------------------------------------------
# Table II from runs (tiny linear-regression runs through the configuration machinery)


def linear_config(policy, seed, rounds=4):
    return {
        "dataset": {"name": "linear_regression", "n_clients": 4, "samples": 20, "features": 2},
        "partition": {"name": "natural", "n_clients": 4},
        "model": {"name": "linear_regression", "in_features": 2, "seed": seed},
        "sampler": {"name": policy, "m": 2, "seed": seed},
        "training": {
            "rounds": rounds,
            "local_steps": 2,
            "batch_size": 10,
            "loss": "mse",
            "seed": seed,
            "lr": {"name": "constant", "lr": 0.05},
            "client_loss_samples": 10,
        },
    }


def test_selection_skew_table(tmp_path):
    cache = str(tmp_path)
    results = [
        run_experiment(linear_config(p, s), results_dir=cache, progress=False)
        for p in ("random", "probabilistic")
        for s in (0, 1)
    ]
    criterion = LocalOptimumCriterion(chunk_epochs=2, tol=1e-3, max_epochs=10, lr=0.05)
    table = ex.selection_skew(results, "smoke", criterion=criterion, results_dir=cache)
    assert list(table.columns) == list(ex.SKEW_COLUMNS)
    row = table.loc[("noniid", "random")]  # a natural partition
    per_seed = []
    for r in results[:2]:
        opt = ex.local_optima_to_criterion(r.config, criterion, results_dir=cache)
        sens = skew_sensitivity(r.history, client_sizes(r.config), opt.losses, opt.residual)
        per_seed.append((sens.estimate.mean, sens.zero.mean, sens.raised.mean, opt.change))
    v = np.array(per_seed)
    assert row["rho (average)"] == pytest.approx(v[:, 0].mean())
    assert row["rho sd over seeds"] == pytest.approx(np.std(v[:, 0], ddof=1))
    assert row["rho (F* = 0)"] == pytest.approx(v[:, 1].mean())
    assert row["rho (F* + residual)"] == pytest.approx(v[:, 2].mean())
    assert row["F* residual (nats)"] == pytest.approx(v[:, 3].mean())
    assert row["rounds used"] == 4 and row["seeds"] == 2
    device = "cuda" if torch.cuda.is_available() else "cpu"  # the default device is auto
    assert opt.device.split(":")[0] == device and (table["F* device"] == opt.device).all()
    # the local optima were cached under the criterion: a cached copy gives the same table
    again = ex.selection_skew(results, "smoke", criterion=criterion, results_dir=cache)
    assert again.equals(table)
    # runs of two panels under one (split, policy) are refused
    other = run_experiment(linear_config("random", 2, rounds=3), results_dir=cache, progress=False)
    with pytest.raises(ValueError, match="differ in more than their seeds"):
        ex.selection_skew([*results, other], "smoke", criterion=criterion, results_dir=cache)
    no_losses = SimpleNamespace(config=results[0].config, history={"selected": []})
    with pytest.raises(ValueError, match="record_clients"):
        ex.selection_skew([no_losses], "smoke", criterion=criterion, results_dir=cache)
