"""Table II of the AoI paper (selection skew rho, eq. 24) on a toy whose every number is known.

The toy: two clients of least-squares regression (the ``linear_regression`` synthetic dataset,
two features and an intercept, squared loss), a linear model that starts at theta_0 = 0, local
work of full-batch gradient steps (the batch is larger than every client) and a constant
learning rate. Then, with X_k = [x, 1] the client's design matrix:

- F_k(theta) = mean_j (X_k theta - y_k)_j^2 and its gradient 2/d_k X_k^T (X_k theta - y_k);
- the local optimum F_k(theta_k*) is the least-squares residual (``numpy.linalg.lstsq``);
- a round of FedAvg (eq. 15) is theta_{t+1} = sum_{i in S_t} w_i GD_K(theta_t; client i);
- rho(S, theta) = sum_{k in S} w_k (F_k(theta) - F_k*) / sum_k q_k (F_k(theta) - F_k*) with
  q_k = d_k / sum_j d_j (eq. 24 for one realised selection).

The oracle below recomputes all of it in float64 NumPy from the raw data alone (none of the
library's training, loss or skew code). The library trains in float32.

Tolerances. ``FLOAT32`` (relative 1e-6) for every loss the library computes: a float32 run of
a few dozen to a few hundred gradient steps on well-scaled data (losses O(1), Hessian
eigenvalues in [0.3, 8]) stays within 1e-7 (relative) of the float64 oracle (measured: at most
8e-8), and the bugs these tests look for (a skipped or extra step, a wrong learning rate, a
client's loss on another client's data, q and w swapped, an off-by-one round) change the values
by 1e-3 or more. rho is a ratio of loss *gaps*, so its tolerance is that relative error
propagated through eq. 24 (:func:`rho_tol`). The distance of the library's F_k* from the *exact*
least-squares optimum is bounded from the convergence rate of gradient descent (see the test).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from aoi_fl.aoi.skew import LocalOptimumCriterion, skew_of_run, skew_sensitivity
from aoi_fl.data import synthetic
from aoi_fl.data.partition import iid_sizes, zipf_sizes
from aoi_fl.evidence.aoi import experiments as ex
from aoi_fl.pipeline.runs import client_sizes, run_experiment

FLOAT32 = 1e-6
DATASET = {
    "name": "linear_regression",
    "n_clients": 2,
    "samples": 30,
    "test_samples": 5,
    "features": 2,
    "noise": 0.5,
    "seed": 0,
}
#: two partitions: the generator's own clients (heterogeneous, equal sizes: q = 1/2, 1/2) and
#: Zipf sizes over the pooled data (47 and 13 samples: q = 47/60, 13/60, so q != 1/|S|)
PARTITIONS = {
    "natural": {"name": "natural", "n_clients": 2},
    "zipf": {"name": "zipf", "n_clients": 2, "seed": 1, "a": 2.0, "min_size": 5},
}
LR = 0.1  # below 2 / (largest Hessian eigenvalue, about 7.9): gradient descent converges
BATCH = 64  # larger than every client: every local step is a full-batch gradient step


def config(partition="natural", policy="random", m=1, seed=0, rounds=6, local_steps=3):
    return {
        "dataset": dict(DATASET),
        "partition": dict(PARTITIONS[partition]),
        "model": {"name": "linear_regression", "in_features": 2, "init": "zeros", "seed": seed},
        "sampler": {"name": policy, "m": m, "seed": seed},
        "training": {
            "rounds": rounds,
            "local_steps": local_steps,
            "batch_size": BATCH,
            "loss": "mse",
            "seed": seed,
            "lr": {"name": "constant", "lr": LR},
            "client_loss_samples": 100,  # more than any client holds: F_k on all its samples
        },
    }


# ---------------------------------------------------------------------------------------------
# the float64 oracle


def clients(partition):
    """[(X_k with an intercept column, y_k)] of the toy's two clients, in float64."""
    bundle = synthetic.linear_regression(**{k: v for k, v in DATASET.items() if k != "name"})
    x = bundle.train.x.numpy().astype(np.float64)
    y = bundle.train.y.numpy().astype(np.float64)
    if partition == "natural":
        parts = [np.arange(30), np.arange(30, 60)]  # generated client after client
    else:
        p = PARTITIONS["zipf"]
        sizes = zipf_sizes(2, p["a"], p["seed"], total=60, min_size=p["min_size"])
        parts = iid_sizes(60, sizes, p["seed"])
    return [(np.column_stack([x[i], np.ones(len(i))]), y[i]) for i in parts]


def loss(theta, xy):
    x, y = xy
    return float(np.mean((x @ theta - y) ** 2))


def gd(theta, xy, steps, lr=LR):
    x, y = xy
    for _ in range(steps):
        theta = theta - lr * 2.0 / len(y) * x.T @ (x @ theta - y)
    return theta


def contraction(xy, lr=LR):
    """max_j |1 - lr * eigenvalue_j| of the Hessian 2/d X^T X: gradient descent's rate."""
    x, y = xy
    eig = np.linalg.eigvalsh(2.0 / len(y) * x.T @ x)
    return float(np.max(np.abs(1 - lr * eig)))


def least_squares(xy):
    x, y = xy
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return loss(coef, xy)


def trajectory(data, history, local_steps=3):
    """theta_0 = 0, ..., theta_R of FedAvg (eq. 15) with the run's selections and weights."""
    thetas = [np.zeros(3)]
    for ids, w in zip(history["selected"], history["weights"], strict=True):
        start = thetas[-1]
        thetas.append(
            sum(wi * gd(start, data[i], local_steps) for i, wi in zip(ids, w, strict=True))
        )
    return thetas


def rho(f, f_star, ids, w, q):
    gap = np.asarray(f) - np.asarray(f_star)
    return sum(wi * gap[i] for i, wi in zip(ids, w, strict=True)) / float(q @ gap)


def rhos(f_rows, f_star, history, q):
    """(rho(S_t, theta) for t = 0, 1, ... with F_k(theta) = f_rows[t], their tolerances)."""
    sel, w = history["selected"], history["weights"]
    args = [(f, f_star, sel[t], w[t], q) for t, f in enumerate(f_rows)]
    return np.array([rho(*a) for a in args]), np.array([rho_tol(*a) for a in args])


def rho_tol(f, f_star, ids, w, q):
    """How far rho may move when every F_k moves by FLOAT32 * F_k (float32 losses).

    rho = N / D with N = sum_S w_i gap_i, D = q . gap; to first order |d rho| <= (|dN| +
    |rho| |dD|) / |D| with |dN| <= FLOAT32 sum_S w_i F_i and |dD| <= FLOAT32 q . F. Doubled
    for the second-order terms and the float32 rounding of the run's own F_k*.
    """
    f = np.asarray(f)
    d_num = FLOAT32 * sum(wi * f[i] for i, wi in zip(ids, w, strict=True))
    d_den = FLOAT32 * float(q @ f)
    den = abs(float(q @ (f - np.asarray(f_star))))
    return 2 * (d_num + abs(rho(f, f_star, ids, w, q)) * d_den) / den


# ---------------------------------------------------------------------------------------------
# local optima F_k(theta_k*)


@pytest.mark.parametrize("partition", ["natural", "zipf"])
def test_local_optima_are_gradient_descent_from_theta0_and_reach_least_squares(partition, tmp_path):
    """Catches: solo training that starts elsewhere than the global model, takes another number
    of steps or another learning rate, measures a client's loss on another client's samples or
    with another client's parameters, a criterion that weights the loss changes by anything but
    q, a residual that is not the last chunk's change, and a stopping rule off by a chunk."""
    data = clients(partition)
    sizes = np.array([len(y) for _, y in data], dtype=float)
    q = sizes / sizes.sum()
    np.testing.assert_array_equal(client_sizes(config(partition)), sizes)  # the oracle's split
    if partition == "zipf":
        assert sizes.tolist() == [47.0, 13.0]  # unequal sizes: q differs from 1/2
    cache = str(tmp_path)
    # the fixed budget (local_optima): exactly 7 full-batch steps from theta_0 = 0
    fixed = ex.local_optima(config(partition), epochs=7, lr=LR, results_dir=cache)
    expected = [loss(gd(np.zeros(3), xy, 7), xy) for xy in data]
    np.testing.assert_allclose(fixed, expected, rtol=FLOAT32)

    criterion = LocalOptimumCriterion(chunk_epochs=10, tol=1e-6, max_epochs=400, lr=LR)
    opt = ex.local_optima_to_criterion(config(partition), criterion, results_dir=cache)
    # the losses after opt.epochs steps and the chunk before, in closed form
    after = np.array([loss(gd(np.zeros(3), xy, opt.epochs), xy) for xy in data])
    before = np.array([loss(gd(np.zeros(3), xy, opt.epochs - 10), xy) for xy in data])
    np.testing.assert_allclose(opt.losses, after, rtol=FLOAT32)
    # the residual is a difference of two losses, each within FLOAT32 * F of the oracle's
    assert np.all(after < 1)
    np.testing.assert_allclose(opt.residual, np.abs(after - before), rtol=0, atol=2 * FLOAT32)
    # stopped at the first chunk whose q-weighted mean change is within tol
    assert opt.converged and opt.change <= 1e-6 < opt.changes[-2]
    assert opt.change == pytest.approx(q @ opt.residual)
    two_chunks_back = np.array([loss(gd(np.zeros(3), xy, opt.epochs - 20), xy) for xy in data])
    assert q @ np.abs(before - two_chunks_back) > 1e-6  # the oracle agrees it could not stop
    # ... and it is the least-squares optimum. Gradient descent never goes below the minimum;
    # on a quadratic the excess loss is E_n = sum_j a_j c_j^(2n) over the Hessian's
    # eigendirections (c_j = 1 - lr * eigenvalue_j, |c_j| <= c < 1), so a chunk of 10 steps
    # removes E_{n-10} - E_n >= E_n (c^-20 - 1): the excess left after the stop is at most the
    # last chunk's change times c^20 / (1 - c^20) (about 1.1 here, c about 0.97).
    exact = np.array([least_squares(xy) for xy in data])
    c = np.array([contraction(xy) for xy in data])
    assert np.all(c < 1)
    excess = np.abs(after - before) * c**20 / (1 - c**20) + FLOAT32 * exact
    assert np.all(opt.losses >= exact * (1 - FLOAT32))
    assert np.all(opt.losses - exact <= excess)
    assert np.all(excess < 1e-4 * exact)  # the bound is tight enough to mean something
    # a second call is a cache hit with the same numbers
    again = ex.local_optima_to_criterion(config(partition), criterion, results_dir=cache)
    np.testing.assert_array_equal(again.losses, opt.losses)
    assert again.epochs == opt.epochs and again.converged
    # where both were computed is recorded beside them (not in the key, as for runs)
    stored = [json.loads(p.read_text())["result"] for p in tmp_path.glob("runs/*/result.json")]
    assert len(stored) == 2
    device = "cuda" if torch.cuda.is_available() else "cpu"  # the default device is auto
    assert all(r["kind"] == "local_optimum" for r in stored)
    assert all(r["device"].split(":")[0] == device for r in stored)
    assert all(r["torch_version"] == torch.__version__ for r in stored)


# ---------------------------------------------------------------------------------------------
# rho of a run


@pytest.mark.parametrize("partition", ["natural", "zipf"])
def test_skew_of_a_run_is_eq_24_on_the_closed_form_trajectory(partition, tmp_path):
    """Catches: client losses recorded for the wrong model or round (theta_{t+1} for theta_t),
    rho_current evaluated with the final model or rho_final with the current one, numerator
    weights other than the round's own w_i or the wrong clients, a denominator weighted by w
    or 1/n instead of q = d_k / sum d, and F_k* not subtracted (or subtracted from one side)."""
    data = clients(partition)
    sizes = client_sizes(config(partition))
    q = sizes / sizes.sum()
    run = run_experiment(config(partition), results_dir=str(tmp_path), progress=False)
    h = run.history
    assert [len(s) for s in h["selected"]] == [1] * 6 and all(w == [1.0] for w in h["weights"])
    assert len({s[0] for s in h["selected"]}) == 2  # both clients are selected at some round
    thetas = trajectory(data, h)
    # the run itself is the closed-form trajectory: losses of theta_t, t = 0..6, and theta_6
    f = np.array([[loss(th, xy) for xy in data] for th in thetas])
    np.testing.assert_allclose(h["client_losses"], f, rtol=FLOAT32)
    final = np.concatenate([run.final_params["1.weight"].ravel(), run.final_params["1.bias"]])
    np.testing.assert_allclose(final, thetas[-1], rtol=FLOAT32, atol=1e-6)

    exact = np.array([least_squares(xy) for xy in data])
    s = skew_of_run(h, sizes, exact)
    current, tol_current = rhos(f[:6], exact, h, q)
    at_final, tol_final = rhos([f[6]] * 6, exact, h, q)
    assert np.all(np.abs(s.rho_current - current) <= tol_current)
    assert np.all(np.abs(s.rho_final - at_final) <= tol_final)
    np.testing.assert_array_equal(s.rounds, np.arange(6))
    assert abs(s.mean - current.mean()) <= tol_current.mean()
    assert abs(s.lower - current.min()) <= tol_current.max()
    assert abs(s.upper - at_final.max()) <= tol_final.max()
    # one client selected with weight 1: rho(S={k}) = gap_k / (q . gap), so the selected
    # client's share of the global gap decides whether rho is above or below 1
    gaps = f - exact
    for t, (k,) in enumerate(h["selected"]):
        assert (current[t] > 1) == (gaps[t, k] > gaps[t, 1 - k])

    # F_k* = 0 (skew_sensitivity's bound) and F_k* moved by a residual, by hand; client 1's
    # residual exceeds its F_k* (about 0.25 and 0.29), so lowering must stop at 0
    r = np.array([0.05, 0.4])
    assert r[1] > exact[1]
    sens = skew_sensitivity(h, sizes, exact, r)
    for got, f_star in (
        (sens.zero, np.zeros(2)),
        (sens.raised, exact + r),
        (sens.lowered, np.maximum(exact - r, 0.0)),
    ):
        want, tol = rhos(f[:6], f_star, h, q)
        assert np.all(np.abs(got.rho_current - want) <= tol)


def test_full_participation_with_size_weights_has_skew_one_in_every_round(tmp_path):
    """Every client selected with w_k = d_k / sum d (``random`` with m = n) gives rho = 1 at
    every round and every model (eq. 24's numerator is then its denominator). Catches sizes from
    client_sizes that do not match the sampler's or the partition's client order, and a
    denominator or numerator weighted by anything but the data sizes."""
    c = config("zipf", m=2)
    run = run_experiment(c, results_dir=str(tmp_path), progress=False)
    sizes = client_sizes(c)
    assert all(w == pytest.approx([47 / 60, 13 / 60]) for w in run.history["weights"])
    opt = ex.local_optima(c, epochs=50, lr=LR, results_dir=str(tmp_path))
    s = skew_of_run(run.history, sizes, opt)
    np.testing.assert_allclose(s.rho_current, 1.0, rtol=1e-12)
    np.testing.assert_allclose(s.rho_final, 1.0, rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# Table II


def test_selection_skew_table_is_the_closed_form_over_seeds(tmp_path):
    """The table row of two seeds of ``random`` (m = 1) on the Zipf clients against the oracle.

    Catches: a table that averages rounds and seeds in the other order or pools them, takes
    the sd over rounds for the sd over seeds, mixes up rho_lower (min over t of rho(S_t,
    theta_t)) and rho_upper (max over t of rho(S_t, theta*)), uses local optima of another
    configuration, or drops a seed."""
    cache = str(tmp_path)
    configs = [config("zipf", seed=s) for s in (0, 1)]
    results = [run_experiment(c, results_dir=cache, progress=False) for c in configs]
    assert results[0].history["selected"] != results[1].history["selected"]  # seeds differ
    criterion = LocalOptimumCriterion(chunk_epochs=10, tol=1e-6, max_epochs=400, lr=LR)
    table = ex.selection_skew(results, "smoke", criterion=criterion, results_dir=cache)
    assert list(table.index) == [("noniid", "random")]  # a Zipf partition is not "iid"
    row = table.loc[("noniid", "random")]

    data = clients("zipf")
    q = np.array([47.0, 13.0]) / 60
    # F_k* to the criterion, by the oracle: chunks of 10 steps until q . |change| <= 1e-6
    epochs, f_star = 0, np.array([loss(np.zeros(3), xy) for xy in data])
    while True:
        epochs += 10
        now = np.array([loss(gd(np.zeros(3), xy, epochs), xy) for xy in data])
        residual, f_star = np.abs(now - f_star), now
        if q @ residual <= 1e-6:
            break
    assert row["F* epochs"] == epochs
    # a difference of two losses, each within FLOAT32 * F (F < 1 here) of the oracle's
    assert row["F* residual (nats)"] == pytest.approx(q @ residual, rel=0, abs=2 * FLOAT32)
    columns = {
        "rho (average)": (f_star, np.mean),
        "rho (F* - residual)": (np.maximum(f_star - residual, 0.0), np.mean),
        "rho (F* + residual)": (f_star + residual, np.mean),
        "rho (F* = 0)": (np.zeros(2), np.mean),
        "rho_lower (min_t)": (f_star, np.min),
    }
    per_seed = {col: [] for col in [*columns, "rho_upper (max_t, theta*)", "sd over rounds"]}
    tol = dict.fromkeys(per_seed, 0.0)
    for r in results:
        h = r.history
        f = np.array([[loss(th, xy) for xy in data] for th in trajectory(data, h)])
        for col, (moved, summary) in columns.items():
            values, tols = rhos(f[:6], moved, h, q)
            per_seed[col].append(summary(values))
            tol[col] = max(tol[col], tols.max())
        values, tols = rhos([f[6]] * 6, f_star, h, q)  # theta* = the final model
        per_seed["rho_upper (max_t, theta*)"].append(values.max())
        tol["rho_upper (max_t, theta*)"] = max(tol["rho_upper (max_t, theta*)"], tols.max())
        per_seed["sd over rounds"].append(np.std(rhos(f[:6], f_star, h, q)[0], ddof=1))
    for col in [*columns, "rho_upper (max_t, theta*)"]:
        assert abs(row[col] - np.mean(per_seed[col])) <= tol[col], col
    # sds are of differences of rho values, each within its tolerance: twice the tolerance
    mean = per_seed["rho (average)"]
    assert (
        abs(row["rho sd over seeds"] - abs(mean[0] - mean[1]) / np.sqrt(2))
        <= 2 * tol["rho (average)"]
    )
    sd_rounds = np.mean(per_seed["sd over rounds"])
    assert abs(row["rho sd over rounds"] - sd_rounds) <= 2 * tol["rho (average)"]
    assert (row["rounds used"], row["seeds"]) == (6, 2)
