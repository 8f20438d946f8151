"""The checks notebooks 01, 03 and 08 make in the ``cpu`` profile (skipped in their smoke runs),
run here on the same numbers: the theory notebooks' (recomputed: simulations and an optimiser,
no training) and Table II's, read from the committed ``results/`` cache (nothing is trained).
Notebooks 02 and 04 make theirs in ``tests/test_reproducible_notebooks.py``, which re-executes
them in the ``cpu`` profile to their committed output (a failed check would change it); running
the same two-minute simulations here again would check nothing more."""

from pathlib import Path

import pytest

from aoi_fl.aoi import markov
from aoi_fl.evidence.aoi import checks, experiments, figures, skew_table
from aoi_fl.evidence.aoi import theory_figures as figs
from aoi_fl.pipeline import experiment, runs
from aoi_fl.pipeline.profiles import settings

ROOT = Path(__file__).resolve().parents[2]
PROFILE = "cpu"
CFG = figs.SelectionSettings(**settings(PROFILE, figs.SELECTION_SETTINGS))


@pytest.fixture(scope="module")
def sizes():
    return CFG.sizes()


@pytest.mark.slow
def test_notebook_01_checks(capsys):
    n, m, m_prime = CFG.n, CFG.m, CFG.m_prime
    p_opt, p_lin = markov.optimal_p(n, m, m_prime), markov.calibrate_family("linear", n, m, m_prime)
    theorem1 = figs.print_theorem1(figs.THEOREM1_GRID)
    optimiser = figs.print_optimiser(30, figs.THEOREM1_GRID)  # notebook 01's cpu starts
    done = checks.check_fig1(p_opt, p_lin, n, m) + checks.check_theorem1(
        theorem1, optimiser, PROFILE
    )
    assert "skipped" not in capsys.readouterr().out
    assert done[-2:] == ["Theorem 1 on 15 grid points", "optimiser on 15"]


def test_notebook_03_checks(sizes):
    theory = figs.interval_laws(CFG, sizes)
    traces = figs.interval_traces(CFG, sizes)
    checks.check_fig3(figs.interval_moments(traces, theory, CFG, sizes), theory, CFG.n, CFG.m)


def test_notebook_08_checks_on_the_committed_cache(monkeypatch, capsys):
    def no_training(*args, **kwargs):
        raise AssertionError("a local optimum is missing from the committed cache")

    monkeypatch.setattr(experiment, "build_trainer", no_training)
    monkeypatch.setattr(skew_table, "build_trainer", no_training)  # where local_optima looks
    results_dir, data_root = str(ROOT / "results"), str(ROOT / "data")
    tables = {}
    for dataset in ("mnist",):  # CIFAR cannot be had offline: the cache has none of its runs
        found, missing = runs.cached_results(
            experiments.aoi_grid(dataset, PROFILE), results_dir=results_dir
        )
        assert found and not missing, f"{dataset}: {missing} runs of the cpu panel not cached"
        tables[dataset] = experiments.selection_skew(
            found, PROFILE, results_dir=results_dir, data_root=data_root
        )
    checks.check_table2(tables, figures.table2(tables), PROFILE)
    assert "skipped" not in capsys.readouterr().out
