"""The K-Vib paper's experiment configurations and the curves/tables built from results."""

import numpy as np
import pytest

from aoi_fl.evidence.kvib import experiments as kx
from aoi_fl.evidence.kvib import results as kr
from aoi_fl.pipeline import runs
from aoi_fl.pipeline.cache import config_key


@pytest.mark.parametrize("profile", ["smoke", "cpu", "paper"])
def test_grids_resolve_and_are_distinct(profile):
    configs = kx.fig2_grid(profile) + kx.k_grid(profile) + kx.gamma_grid(profile)
    keys = [config_key(runs.resolve_config(c)) for c in configs]
    s = kx.synthetic_settings(profile)
    assert len(kx.fig2_grid(profile)) == len(kx.FIG2_SAMPLERS) * s["seeds"]
    assert len(kx.k_grid(profile)) == len(s["k_grid"]) * len(kx.GRID_SAMPLERS) * s["grid_seeds"]
    # the K grid at the default K reuses Fig. 2's runs; everything else is a new run
    shared = s["grid_seeds"] * len(kx.GRID_SAMPLERS) if s["k"] in s["k_grid"] else 0
    assert len(set(keys)) == len(keys) - shared
    for c in kx.mnist_grid(profile):
        runs.resolve_config(c)


def test_paper_settings_are_the_papers():
    c = kx.synthetic_config("kvib", 3, "paper")
    t = c["training"]
    assert (t["rounds"], t["local_epochs"], t["batch_size"], t["lr"]["lr"]) == (500, 1, 64, 0.02)
    assert t["algorithm"] == {"name": "fedavg", "aggregation": "weighted_delta", "server_lr": 1.0}
    assert c["sampler"] == {"name": "kvib", "k": 10, "seed": 3, "rounds": 500}
    assert c["dataset"]["seed"] == kx.DATA_SEED and t["full_information"]
    g = kx.gamma_grid("paper")[0]["sampler"]
    assert g["theta"] == 0.3 and g["gamma_scale"] == 0.01
    m = kx.mnist_config("vrb", 1, "paper")
    assert m["sampler"]["k"] == 5 and m["training"]["local_epochs"] == 3
    with pytest.raises(ValueError, match="unknown sampler 'avare'"):
        kx.synthetic_config("avare", 0, "cpu")


def _first_reaching(history, target):
    hits = [
        r
        for r, a in zip(history["eval_round"], history["test_accuracy"], strict=True)
        if a >= target
    ]
    return hits[0] if hits else None


@pytest.mark.slow
def test_smoke_runs_give_curves_and_a_table(tmp_path):
    configs = [
        kx.synthetic_config(name, seed, "smoke")
        for name, seed in (("uniform_unbiased", 0), ("kvib", 0), ("kvib", 1), ("optimal", 0))
    ]
    results = runs.run_grid(configs, results_dir=str(tmp_path), progress=False)
    groups = kr.curves_by_label(results)
    assert set(groups) == {("uniform_unbiased", 4, None), ("kvib", 4, None), ("optimal", 4, None)}
    assert len(groups[("kvib", 4, None)]) == 2
    optimal = groups[("optimal", 4, None)][0]
    np.testing.assert_allclose(optimal["regret"], 0.0, atol=1e-12)
    uniform = groups[("uniform_unbiased", 4, None)][0]
    np.testing.assert_allclose(uniform["regret"], uniform["uniform_regret"])
    target = 0.1
    table = kr.summary_table(results, target=target)
    assert list(table["sampler"]) == ["uniform_unbiased", "kvib", "optimal"]
    assert table.loc[table["sampler"] == "optimal", "regret"].item() == pytest.approx(0.0)
    # catches a table whose numbers are not what its columns say: every entry recomputed from
    # the runs' raw histories (regret = sum of cost - optimal cost, eq. 8; means over rounds
    # and seeds; the first evaluation reaching the target)
    by_name = {}
    for result in results:
        by_name.setdefault(result.config["sampler"]["name"], []).append(result.history)
    for name, histories in by_name.items():
        row = table.set_index("sampler").loc[name]
        cost = [np.asarray(h["cost"]) - np.asarray(h["optimal_cost"]) for h in histories]
        uniform_cost = [
            np.asarray(h["uniform_cost"]) - np.asarray(h["optimal_cost"]) for h in histories
        ]
        regret = np.array([c.sum() for c in cost])
        assert row["seeds"] == len(histories) and row["K"] == 4
        assert row["regret"] == pytest.approx(regret.mean(), abs=1e-12)
        if len(histories) > 1:
            assert row["regret sd"] == pytest.approx(regret.std(ddof=1))
        else:
            assert np.isnan(row["regret sd"])
        # 3 rounds: the first tenth is the first round
        assert row["regret after T/10"] == pytest.approx(
            np.mean([c[1:].sum() for c in cost]), abs=1e-12
        )
        if name != "optimal":
            assert row["regret / uniform-p regret"] == pytest.approx(
                np.mean([c.sum() / u.sum() for c, u in zip(cost, uniform_cost, strict=True)])
            )
        assert row["variance (eq. 2, mean over rounds)"] == pytest.approx(
            np.mean([h["expected_squared_error"] for h in histories])
        )
        assert row["realised sq. error (mean)"] == pytest.approx(
            np.mean([h["squared_error"] for h in histories])
        )
        assert row["final test loss"] == pytest.approx(
            np.mean([h["test_loss"][-1] for h in histories])
        )
        assert row["final test accuracy"] == pytest.approx(
            np.mean([h["test_accuracy"][-1] for h in histories])
        )
        # the speed measure: the mean height of the piecewise-linear test-loss curve
        areas = []
        for h in histories:
            r, y = h["eval_round"], h["test_loss"]
            steps = zip(r[:-1], r[1:], y[:-1], y[1:], strict=True)
            area = sum((t1 - t0) * (y0 + y1) / 2 for t0, t1, y0, y1 in steps)
            areas.append(area / (r[-1] - r[0]))
        assert row["test loss, horizon mean"] == pytest.approx(np.mean(areas))
        reached = [r for r in (_first_reaching(h, target) for h in histories) if r is not None]
        assert row["seeds reaching it"] == len(reached)
        if reached:
            assert row["rounds to 10%"] == pytest.approx(np.mean(reached))
        else:
            assert np.isnan(row["rounds to 10%"])
    # the uniform sampler's probabilities are the uniform ones: its regret ratio is 1
    assert table.set_index("sampler").loc["uniform_unbiased", "regret / uniform-p regret"] == (
        pytest.approx(1.0)
    )
    # the target splits the runs (smoke data, seed 0: uniform 0.089, K-Vib 0.19, optimal 0.54
    # at round 3), so both branches of "rounds to" are exercised
    assert set(table["seeds reaching it"]) >= {0, 1}


def test_example_3_1_settings_and_vectors():
    # every profile runs the paper's sizes; only the Monte Carlo repetitions change
    cpu, smoke = kx.example_3_1_settings("cpu"), kx.example_3_1_settings("smoke")
    assert {k: v for k, v in cpu.items() if k != "repetitions"} == {
        k: v for k, v in smoke.items() if k != "repetitions"
    }
    assert (cpu["n"], cpu["dim"], cpu["ks"]) == (100, 1000, (10, 30))
    assert (
        smoke["repetitions"] < cpu["repetitions"] == kx.example_3_1_settings("paper")["repetitions"]
    )
    g = kx.example_3_1_vectors(5, 7, 1.0)
    assert g.shape == (5, 7) and np.array_equal(g, kx.example_3_1_vectors(5, 7, 1.0))
    # Example 3.2's norms are the [1, 3, 6] the paper calls squared norms
    assert np.allclose(np.linalg.norm(kx.EXAMPLE_3_2_G, axis=1), [1, 3, 6])
