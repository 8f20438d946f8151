"""What notebooks 11-13 show (aoi_fl.evidence.kvib.figures) and the tables behind it
(aoi_fl.evidence.kvib.results): Fig. 1's estimation errors, Figs 2, 3, 6 and 7 and the MNIST
substitute for Fig. 4, the last two from the committed ``cpu`` runs (``conftest.py``)."""

from types import SimpleNamespace

import matplotlib

matplotlib.use("agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from aoi_fl.evidence.kvib import experiments as kx  # noqa: E402
from aoi_fl.evidence.kvib import figures as kf  # noqa: E402
from aoi_fl.evidence.kvib import results as kr  # noqa: E402
from aoi_fl.kvib import estimators  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _legend(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


# ---------------------------------------------------------------------------------------------
# Fig. 1


@pytest.fixture(scope="module")
def example_3_1():
    """Example 3.1 on 20 vectors in R^5, 50 repetitions."""
    rng = np.random.default_rng(0)
    g = rng.lognormal(0, 1, 20)[:, None] * rng.standard_normal((20, 5))
    return g, *kr.example_3_1_table(g, (2, 6), 50)


def test_example_3_1_table_rows_and_closed_forms(example_3_1):
    g, mse, errors = example_3_1
    assert list(mse["procedure"]) == list(kr.EXAMPLE_3_1_PROCEDURES) * 2
    assert set(errors) == {(k, label) for k in (2, 6) for label in kr.EXAMPLE_3_1_PROCEDURES}
    assert errors[(2, kr.ISP_LABEL)].shape == (50, 5)
    a = np.linalg.norm(g, axis=1)
    for _, row in mse.iterrows():
        procedure = kr.EXAMPLE_3_1_PROCEDURES[row["procedure"]][0]
        p = kr.example_3_1_probabilities(procedure, a, row["K"])
        assert p.sum() == pytest.approx(row["K"])
        assert row["MSE (closed form)"] == estimators.expected_squared_error(procedure, g, p)
        err = errors[(row["K"], row["procedure"])]
        assert row["MSE (repetitions)"] == pytest.approx((err**2).sum(axis=1).mean())
    assert (mse.loc[mse["procedure"] == kr.ISP_LABEL, "closed form / ISP"] == 1).all()


def test_fig1a_has_a_panel_per_budget_and_a_cloud_per_procedure(example_3_1):
    _, mse, errors = example_3_1
    fig = kf.plot_fig1a(mse, errors, {"ks": (2, 6), "repetitions": 50, "dim": 5})
    assert [ax.get_title() for ax in fig.axes] == ["K = 2", "K = 6"]
    for ax in fig.axes:
        assert [label.split(":")[0] for label in _legend(ax)] == list(kr.EXAMPLE_3_1_PROCEDURES)
        assert [len(c.get_offsets()) for c in ax.collections] == [50, 50, 50]


def test_the_scale_curve_has_a_line_per_budget_and_the_thresholds(capsys):
    from aoi_fl.evidence.kvib import claims as kc

    curve = kc.example_3_1_curve((0.5, 1.0, 1.5), (2, 6), 20, 5)
    kf.print_scale_curve(curve)
    header = capsys.readouterr().out.splitlines()[0].split("  ")
    assert [h.strip() for h in header if h.strip()] == [
        "RSP / ISP, K = 2",
        "RSP / ISP, K = 6",
        "uniform / ISP, K = 2",
        "uniform / ISP, K = 6",
    ]
    (ax,) = kf.plot_scale_curve(curve, 1.0).axes
    assert _legend(ax) == ["RSP / ISP, K = 2", "RSP / ISP, K = 6"]
    ratios = curve.pivot(index="scale", columns="K", values="RSP / ISP")
    for line, k in zip(ax.get_lines()[:2], (2, 6), strict=True):
        assert list(line.get_xdata()) == [0.5, 1.0, 1.5]
        assert list(line.get_ydata()) == pytest.approx(list(ratios[k]))
    # the thresholds of "comparable" and "ISP outperforms", and the scale of the vectors above
    assert [line.get_ydata()[0] for line in ax.get_lines()[2:4]] == [
        kc.COMPARABLE_RATIO,
        kc.OUTPERFORMS_RATIO,
    ]
    assert ax.get_lines()[4].get_xdata()[0] == 1.0


def test_example_3_2_is_enumerated_exactly():
    ex = kr.example_3_2()
    for name in ("RSP", "ISP"):
        table = ex.outcomes[name]
        assert table["probability"].sum() == pytest.approx(1, abs=1e-12)
        mean, variance = ex.moments(name)
        np.testing.assert_allclose(mean, ex.total, atol=1e-12)
        assert variance == pytest.approx(ex.closed_form(name), abs=1e-9)
    # K = 2 of 3 with replacement: the multisets 11, 12, ..., 33
    assert list(ex.outcomes["RSP"]["draw"]) == ["11", "12", "13", "22", "23", "33"]
    assert dict(ex.isp_sizes()) == pytest.approx({1: 3 / 16, 2: 10 / 16, 3: 3 / 16})


def test_example_3_2_prints_the_papers_numbers_and_plots_every_outcome(capsys):
    ex = kr.example_3_2()
    kf.print_example_3_2(ex)
    out = capsys.readouterr().out
    assert "(paper: ||g_i||^2 = [1.0, 3.0, 6.0])" in out
    assert "P(|S| = 1) = 0.1875, P(|S| = 2) = 0.6250, P(|S| = 3) = 0.1875" in out
    assert out.endswith("ISP with K = 3: p = [1.0, 1.0, 1.0], error 0\n")
    fig = kf.plot_fig1b(ex)
    annotations = [t.get_text() for t in fig.axes[0].texts]
    assert len(annotations) == len(ex.outcomes["RSP"]) + len(ex.outcomes["ISP"])
    assert "ISP(123)" in annotations and "RSP(33)" in annotations


# ---------------------------------------------------------------------------------------------
# Divergence, shares, speed-ups


def _run(name, k, loss, seed=0, accuracy=None):
    history = {
        "eval_round": list(range(len(loss))),
        "test_loss": list(loss),
        "test_accuracy": list(accuracy if accuracy is not None else np.full(len(loss), 0.5)),
    }
    config = {"sampler": {"name": name, "k": k}, "training": {"seed": seed}}
    return SimpleNamespace(config=config, history=history)


def test_diverged_runs_names_each_sampler_with_its_budgets():
    exploding, stable = [2.0, 20.0, 50.0], [2.0, 1.0, 0.9]
    results = [
        _run("mabs", 10, exploding),
        _run("kvib", 10, stable),
        _run("uniform_unbiased", 5, exploding),
        _run("mabs", 5, exploding),
        _run("mabs", 20, stable),
    ]
    diverged = kr.diverged_runs(results)
    assert diverged == {"mabs": {5, 10}, "uniform_unbiased": {5}}
    assert list(diverged) == ["mabs", "uniform_unbiased"]
    assert kr.diverged_runs(results[1:2]) == {}


def test_largest_shares_are_sorted_and_sum_to_one():
    share = kr.largest_shares(np.array([1, 5, 4]))
    np.testing.assert_allclose(share, [0.5, 0.4, 0.1])


def test_speedup_table_divides_the_references_rounds_by_each_samplers():
    accuracy = {"uniform_unbiased": [0.0, 0.5, 0.95], "kvib": [0.0, 0.95, 0.95]}
    results = [_run(name, 5, [1.0] * 3, accuracy=acc) for name, acc in accuracy.items()]
    table = kr.speedup_table(results, 0.9)
    assert table.loc["kvib", "speed-up vs uniform_unbiased"] == 2.0
    assert table.loc["uniform_unbiased", "speed-up vs uniform_unbiased"] == 1.0
    assert "speed-up vs uniform_normalised" not in table


# ---------------------------------------------------------------------------------------------
# Figs 2, 3, 6 and 7 (the committed cpu run)


def test_fig3a_sizes(capsys):
    sizes, test_samples = kr.synthetic_client_sizes()
    assert sizes.size == 100 and test_samples > 0
    kf.print_synthetic_sizes(sizes, test_samples)
    assert "lambda_max N / K: 4.11 (K = 10)" in capsys.readouterr().out
    (ax,) = kf.plot_fig3a(sizes).axes
    heights = [bar.get_height() for bar in ax.patches]
    assert heights == sorted(sizes, reverse=True) and ax.get_yscale() == "log"


def test_fig2_draws_every_sampler_and_no_regret_for_the_optimum(synthetic_cpu):
    fig = kf.plot_fig2(synthetic_cpu.fig2, synthetic_cpu.settings)
    regret, variance, loss = fig.axes
    assert len(regret.lines) == len(kx.FIG2_SAMPLERS) - 1
    assert len(variance.lines) == len(loss.lines) == len(kx.FIG2_SAMPLERS)
    assert all(ax.get_yscale() == "log" for ax in (regret, variance, loss))
    assert len(fig.legends[0].get_texts()) == len(kx.FIG2_SAMPLERS)


def test_k_grid_panels_and_fig7(synthetic_cpu):
    ks = synthetic_cpu.settings["k_grid"]
    fig = kf.plot_k_grid(synthetic_cpu.grid, synthetic_cpu.settings)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[0] == "Fig. 3(b) · K-Vib" and titles[-1] == "Fig. 7 · variance against K"
    assert all(title.startswith("Fig. 6 · ") for title in titles[1:-1])
    for ax in fig.axes[:-1]:
        assert _legend(ax) == [f"K = {k}" for k in ks]
    fig7 = fig.axes[-1]
    assert len(fig7.lines) == len(kx.GRID_SAMPLERS)
    kvib = synthetic_cpu.by_k(kr.VARIANCE).loc["kvib"]
    np.testing.assert_array_equal(fig7.lines[-1].get_ydata(), kvib.to_numpy())


def test_fig3c_draws_one_line_per_gamma_scale(synthetic_cpu):
    fig = kf.plot_fig3c(synthetic_cpu.gamma, synthetic_cpu.settings)
    scales = synthetic_cpu.settings["gamma_scales"]
    for ax in fig.axes:
        assert _legend(ax) == [f"gamma x {s:g}" for s in scales]


def test_the_synthetic_numbers_the_reading_cites(synthetic_cpu, capsys):
    kf.print_synthetic_numbers(synthetic_cpu)
    out = capsys.readouterr().out
    assert (
        "uniform_unbiased at K = [5, 10, 20]; uniform_isp at K = [10]; mabs at K = [5, 10, 20]"
        in (out)
    )
    assert "; log-log slope -1.87 (Theorem 5.2's rate: -4/3)" in out
    whole, after = synthetic_cpu.consistency("kvib")
    assert f"kvib {whole:.2f} | {after:.2f}" in out


def test_the_k_grid_and_gamma_tables_print_every_sampler_and_scale(synthetic_cpu, capsys):
    kf.print_k_grid(synthetic_cpu.grid, synthetic_cpu.settings)
    kf.print_gamma_grid(synthetic_cpu.gamma, synthetic_cpu.settings)
    out = capsys.readouterr().out
    for column in kf.K_GRID_COLUMNS:
        assert f"\n{column}:\n" in out
    assert out.count("\nkvib ") == len(kf.K_GRID_COLUMNS)
    assert "scales (0.1, 1.0, 10.0) (ours)" in out


# ---------------------------------------------------------------------------------------------
# The MNIST substitute (the committed cpu run)


def test_the_mnist_partition(mnist_cpu, capsys):
    sizes, hist = mnist_cpu[:2]
    kf.print_mnist_partition(sizes, hist)
    assert "the largest 10% hold 59.3%, the largest client 10.4%" in capsys.readouterr().out
    sizes_ax, mix = kf.plot_mnist_partition(sizes, hist).axes
    assert len(sizes_ax.patches) == sizes.size and len(mix.patches) == 30 * hist.shape[1]
    top = np.argmax(sizes)
    assert sum(bar.get_height() for bar in mix.patches[::30]) == pytest.approx(
        hist[top].sum() / sizes[top]
    )


def test_the_mnist_accuracy_figure_and_table(mnist_cpu, capsys):
    results, table = mnist_cpu[3:]
    settings = kx.mnist_settings("cpu")
    accuracy, loss = kf.plot_mnist_accuracy(results, settings).axes
    assert len(loss.lines) == len(settings["samplers"]) and loss.get_yscale() == "log"
    assert accuracy.get_ylim() == pytest.approx((0.65, 0.98))
    kf.print_mnist_table(table, settings)
    out = capsys.readouterr().out
    assert out.startswith("rounds to 90% test accuracy: mean over the seeds that reach it (of 5)")
    assert "K-Vib 3x faster on v1, 2x faster on v2 than the baselines" in out
