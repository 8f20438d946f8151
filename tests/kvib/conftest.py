"""The committed ``cpu`` runs of notebooks 12 and 13, read from ``results/`` (never trained)."""

from pathlib import Path

import pytest

from aoi_fl.evidence.kvib import experiments as kx
from aoi_fl.evidence.kvib import results as kr
from aoi_fl.pipeline import runs

REPO = Path(__file__).resolve().parents[2]


def _cached(configs: list[dict]) -> list:
    found, missing = runs.cached_results(configs, results_dir=str(REPO / "results"))
    assert missing == 0, f"{missing} of {len(configs)} runs are not in the committed cache"
    return found


@pytest.fixture(scope="session")
def synthetic_cpu() -> kr.SyntheticRuns:
    """Notebook 12's runs: Fig. 2, the K grid and the gamma grid."""
    grids = (kx.fig2_grid("cpu"), kx.k_grid("cpu"), kx.gamma_grid("cpu"))
    return kr.SyntheticRuns(*(_cached(g) for g in grids), kx.synthetic_settings("cpu"))


@pytest.fixture(scope="session")
def mnist_cpu():
    """Notebook 13's (sizes, class histograms, configurations, runs, table)."""
    configs = kx.mnist_grid("cpu")
    results = _cached(configs)
    sizes, hist = kr.client_classes(configs[0], str(REPO / "data"))
    table = kr.speedup_table(results, kx.mnist_settings("cpu")["target"])
    return sizes, hist, configs, results, table
