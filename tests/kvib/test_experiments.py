"""The K-Vib paper's experiment configurations and the curves/tables built from results."""

import numpy as np
import pytest

from aoi_fl.kvib import experiments as kx
from aoi_fl.kvib import results as kr
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


def test_smoke_runs_give_curves_and_a_table(tmp_path):
    configs = [
        kx.synthetic_config(name, 0, "smoke") for name in ("uniform_unbiased", "kvib", "optimal")
    ]
    results = runs.run_grid(configs, cache_dir=str(tmp_path), progress=False)
    groups = kr.curves_by_label(results)
    assert set(groups) == {("uniform_unbiased", 4, None), ("kvib", 4, None), ("optimal", 4, None)}
    optimal = groups[("optimal", 4, None)][0]
    np.testing.assert_allclose(optimal["regret"], 0.0, atol=1e-12)
    uniform = groups[("uniform_unbiased", 4, None)][0]
    np.testing.assert_allclose(uniform["regret"], uniform["uniform_regret"])
    table = kr.summary_table(results, target=0.1)
    assert list(table["sampler"]) == ["uniform_unbiased", "kvib", "optimal"]
    assert table.loc[table["sampler"] == "optimal", "regret"].item() == pytest.approx(0.0)
    assert {"rounds to 10%", "seeds reaching it"} <= set(table.columns)
