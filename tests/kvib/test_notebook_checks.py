"""The checks of notebooks 11-13 (aoi_fl.evidence.kvib.checks) on the ``cpu`` profile's numbers.

The notebooks skip the checks of their Readings in the smoke profile; here they run on what the
committed outputs show: Fig. 1 recomputed (pure NumPy, seeded), the training runs read from the
committed ``results/`` cache (the fixtures of ``conftest.py``: nothing is trained). Each check
is also shown to fail on numbers that contradict it.
"""

import numpy as np
import pytest

from aoi_fl.evidence.kvib import checks
from aoi_fl.evidence.kvib import claims as kc
from aoi_fl.evidence.kvib import experiments as kx
from aoi_fl.evidence.kvib import results as kr

# ---------------------------------------------------------------------------------------------
# notebook 11


@pytest.fixture(scope="module")
def fig1a():
    cfg = kx.example_3_1_settings("cpu")
    g = kx.example_3_1_vectors(cfg["n"], cfg["dim"], cfg["scale_sigma"])
    mse, _ = kr.example_3_1_table(g, cfg["ks"], cfg["repetitions"])
    curve = kc.example_3_1_curve(kx.EXAMPLE_3_1_SCALES, cfg["ks"], cfg["n"], cfg["dim"])
    return g, mse, curve, cfg


def test_notebook_11_checks_hold_in_the_cpu_profile(fig1a, capsys):
    g, mse, curve, cfg = fig1a
    checks.notebook_11(g, mse, kr.example_3_2(), curve, cfg, "cpu")
    out = capsys.readouterr().out
    assert "skipped" not in out and out.startswith("checks passed: repetitions against closed")


def test_the_scale_curve_check_fails_on_a_curve_that_contradicts_the_reading(fig1a):
    _, mse, curve, cfg = fig1a
    checks.check_scale_curve(curve, mse, cfg["scale_sigma"])
    # a curve of other vectors does not pass through the table's closed forms
    shifted = curve.assign(isp=curve["isp"] * 1.01)
    with pytest.raises(AssertionError, match="scale 1, K = 10, ISP, eq. 4: curve"):
        checks.check_scale_curve(shifted, mse, cfg["scale_sigma"])
    with pytest.raises(AssertionError, match="the curve has no point at scale 0.95"):
        checks.check_scale_curve(curve, mse, 0.95)
    # K = 10's ratio below 1.5 up to 1.4: not the Reading's range
    at = (curve["K"] == 10) & (curve["scale"] == 1.4)
    lower = curve.assign(**{"RSP / ISP": curve["RSP / ISP"].where(~at, 1.49)})
    with pytest.raises(AssertionError, match=r"K = 10: RSP / ISP below 1.5 at scales .* not 0.5"):
        checks.check_scale_curve(lower, mse, cfg["scale_sigma"])


def test_notebook_11_checks_fail_on_numbers_that_contradict_them(fig1a):
    g, mse, _, cfg = fig1a
    ks = cfg["ks"]
    far = mse.assign(z=mse["z"].where(mse.index != 0, 3.0))
    with pytest.raises(AssertionError, match="not within 2 standard errors"):
        checks.check_fig1a_repetitions(far)
    checks.check_fig1a(g, far, ks)  # |z| < 4 still holds
    swapped = mse.copy()
    isp = swapped["procedure"] == kr.ISP_LABEL
    swapped.loc[isp, "MSE (closed form)"] *= 10
    with pytest.raises(AssertionError, match="not in that order"):
        checks.check_fig1a(g, swapped, ks)
    with pytest.raises(AssertionError, match="not the paper's printed norms"):
        checks.check_example_3_2(kr.example_3_2(2 * kx.EXAMPLE_3_2_G))


def test_notebook_11_skips_the_repetitions_check_in_smoke(fig1a, capsys):
    g, mse, curve, cfg = fig1a
    far = mse.assign(z=mse["z"].where(mse.index != 0, 3.0))  # |z| < 4, not < 2
    checks.notebook_11(g, far, kr.example_3_2(), curve, cfg, "smoke")
    assert capsys.readouterr().out.startswith("skipped in smoke: |z| < 2")


# ---------------------------------------------------------------------------------------------
# notebook 12


def test_notebook_12_checks_hold_on_the_committed_cache(synthetic_cpu, capsys):
    checks.notebook_12(kr.synthetic_client_sizes()[0], synthetic_cpu, "cpu")
    out = capsys.readouterr().out
    assert out == (
        "checks passed: data sizes, 44 runs (configs, rounds, regret against the optimum, "
        "uniform samplers' regret ratio), the Reading's verdicts and numbers\n"
    )


def test_notebook_12_checks_fail_on_runs_that_contradict_them(synthetic_cpu):
    with pytest.raises(AssertionError, match="lambda_max N / K"):
        checks.check_synthetic_sizes(np.full(100, 10))
    # the paper profile's grids are not the cpu run's
    with pytest.raises(AssertionError, match="results for"):
        checks.check_synthetic_runs(synthetic_cpu, "paper")
    # without the K grid's diverged runs the Reading's list of them is wrong
    stable = kr.SyntheticRuns(synthetic_cpu.fig2, [], synthetic_cpu.gamma, synthetic_cpu.settings)
    with pytest.raises(AssertionError, match="not those the Reading names"):
        checks.check_synthetic_reading(stable)


# ---------------------------------------------------------------------------------------------
# notebook 13


def test_notebook_13_checks_hold_on_the_committed_cache(mnist_cpu, capsys):
    checks.notebook_13(*mnist_cpu, "cpu")
    assert capsys.readouterr().out == (
        "checks passed: partition, 30 runs (configs, evaluations, shared initial models), the "
        "verdicts and claims 1-3 as the Reading states them\n"
    )


def test_notebook_13_checks_fail_on_runs_that_contradict_them(mnist_cpu):
    sizes, hist, configs, results, table = mnist_cpu
    settings = kx.mnist_settings("cpu")
    with pytest.raises(AssertionError, match="do not add up"):
        checks.check_mnist_partition(sizes, np.zeros_like(hist), settings)
    # seed 1's runs put where seed 0's are expected: another configuration, another start
    shifted = results[1:] + results[:1]
    with pytest.raises(AssertionError, match="cached result of another configuration"):
        checks.check_mnist_runs(configs, shifted, table, settings)
    slow = table.copy()
    slow.loc["kvib", "rounds to 90%"] = 1000.0
    with pytest.raises(AssertionError, match="rounds to 90%"):
        checks.check_mnist_reading(sizes, slow, settings)
