"""aoi_fl.evidence.aoi.theory_figures: the settings, tables and figures of notebooks 01-04."""

from dataclasses import replace

import matplotlib

matplotlib.use("agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from aoi_fl.aoi import markov, samplers, sigma  # noqa: E402
from aoi_fl.evidence.aoi import theory_figures as figs  # noqa: E402
from aoi_fl.pipeline.plotting import style  # noqa: E402
from aoi_fl.pipeline.profiles import ENV_VAR, settings  # noqa: E402

N, M, M_PRIME = 100, 15, 10
#: the paper's setting with short traces, so that every simulation here takes a moment
CFG = replace(
    figs.SelectionSettings(**settings("smoke", figs.SELECTION_SETTINGS)),
    rounds=200,
    mc_rounds=2_000,
    zipf_seeds=3,
)
P_OPT = markov.optimal_p(N, M, M_PRIME)
P_LIN = markov.calibrate_family("linear", N, M, M_PRIME)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def sizes():
    return CFG.sizes()


def test_the_profiles_differ_only_in_the_simulation_budget():
    rows = figs.SELECTION_SETTINGS
    budget = {"trace_seeds", "mc_rounds", "zipf_seeds"}
    paper = {k: v for k, v in rows["paper"].items() if k not in budget}
    assert paper == {"n": N, "m": M, "m_prime": M_PRIME, "rounds": 1000, "zipf_a": 2.0,
                     "size_seed": 0}  # fmt: skip
    for row in rows.values():
        assert {k: v for k, v in row.items() if k not in budget} == paper
    assert rows["cpu"] == rows["paper"]


def test_selection_setup_prints_every_setting(monkeypatch, capsys):
    monkeypatch.delenv(ENV_VAR, raising=False)
    profile, cfg, env = figs.selection_setup("cpu")
    assert (profile, env.profile, cfg.trace_seeds, cfg.mc_rounds) == ("cpu", "cpu", 20, 400_000)
    assert capsys.readouterr().out == (
        "profile: cpu; n=100, m=15, m_prime=10, rounds=1000, zipf_a=2.0, size_seed=0, "
        "trace_seeds=20, mc_rounds=400000, zipf_seeds=200\n"
    )
    monkeypatch.setenv(ENV_VAR, "smoke")
    assert figs.selection_setup("cpu")[0] == "smoke"


def test_the_settings_give_each_policy_its_chain_rates_and_sampler(sizes):
    np.testing.assert_array_equal(CFG.chain("markov_optimal"), P_OPT)
    np.testing.assert_array_equal(CFG.chain("markov_nonoptimal"), P_LIN)
    np.testing.assert_array_equal(CFG.rates("random", sizes), np.full(N, M / N))
    q = sizes / sizes.sum()
    np.testing.assert_allclose(CFG.rates("probabilistic", sizes), 1 - (1 - q) ** M)
    assert CFG.sizes(seed=1).sum() != sizes.sum()
    for policy in samplers.POLICIES:
        assert CFG.sampler(policy, sizes, seed=0).name == policy
    with pytest.raises(ValueError, match="policy"):
        CFG.chain("random")  # memoryless: no chain
    with pytest.raises(ValueError, match="policy"):
        CFG.rates("markov_optimal", sizes)


def test_fig1_draws_both_chains():
    fig = figs.plot_fig1(P_OPT, P_LIN, N, M)
    top, bottom = fig.axes
    assert top.get_title() == "Policy 3, Markov optimal (Theorem 1): n=100, m=15, m'=10"
    assert bottom.get_title().startswith("Policy 4, Markov non-optimal")


def test_fig1_tables(capsys):
    figs.print_chain_laws(P_OPT, P_LIN, N, M)
    figs.print_interval_moments(P_OPT, P_LIN, N, M)
    figs.print_families(N, M, M_PRIME)
    out = capsys.readouterr().out
    assert "pi_0 optimal = 0.150000, linear = 0.150000, m/n = 0.150000" in out
    assert "random, geometric n(n-m)/m^2 6.666667 37.777778" in " ".join(out.split())
    assert "exponential: pi_0 = 0.150000" in out and "ages with p_a = 1: [8, 9, 10]" in out


def test_theorem1_tables(capsys):
    grid = ((100, 15, 10), (100, 15, 3), (100, 20, 10))
    theorem1 = figs.print_theorem1(grid)
    assert theorem1["case"].tolist() == [2, 1, 2]  # case 1 when m' <= floor(n/m) - 1
    np.testing.assert_allclose(theorem1["closed form"], theorem1["chain Var[X]"], atol=1e-12)
    assert theorem1.loc[2, "closed form"] == 0  # integer r = 5: every client every 5 rounds
    optimiser = figs.print_optimiser(3, grid[:1])
    assert optimiser["optimiser = closed form"].all()
    assert "optimiser = Theorem 1 on 1 of 1 grid points; below it on 0" in capsys.readouterr().out


def test_fig2_closed_forms_and_readings(sizes, capsys):
    closed = figs.sigma_closed_forms(CFG, sizes)
    assert list(closed) == list(samplers.POLICIES)
    assert closed["markov_optimal"] == pytest.approx(closed["markov_nonoptimal"], rel=1e-12)
    assert closed["probabilistic"] == pytest.approx(sigma.sigma_probabilistic(sizes, M))
    gamma = figs.second_moment_sums(sizes, N, M)
    assert all(gamma[k] >= closed[k] for k in closed)
    assert gamma["probabilistic"] == sigma.second_moment_sum_probabilistic(sizes, M)
    figs.print_sizes(sizes, 0)
    figs.print_sigma_closed_forms(closed, N, M)
    figs.print_sigma_readings(closed, gamma, N, M)
    out = capsys.readouterr().out
    assert f"total {sizes.sum():.0f}" in out and "1/m = 0.0667" in out
    assert "Theorem 3 (exact)" in out and "Sigma with w = 1/m" in out


def test_fig2_simulation_and_plot(sizes):
    closed = figs.sigma_closed_forms(CFG, sizes)
    sim, histories = figs.simulate_sigma(CFG, sizes, closed)
    assert list(sim.columns) == [
        "closed form",
        "Monte Carlo",
        "MC / closed",
        "1000 rounds (mean)",
        "1000 rounds (sd)",
        "1000 rounds, zero start",
        "paper",
    ]
    assert sim.loc[["random", "probabilistic"], "1000 rounds, zero start"].isna().all()
    assert sim.loc[["markov_optimal", "markov_nonoptimal"], "1000 rounds, zero start"].gt(0).all()
    assert sim["paper"].to_dict() == figs.PAPER_SIGMA
    assert all(len(h) == CFG.rounds for h in histories.values())
    fig = figs.plot_fig2(sim, histories, closed, CFG)
    bars, curves = fig.axes
    assert len(curves.get_lines()) >= 3 * len(samplers.POLICIES)
    assert "Zipf(a=2) sizes (seed 0)" in fig._suptitle.get_text()


def test_fig2_spread_over_size_draws(capsys):
    spread = figs.sigma_over_sizes(CFG)
    assert list(spread.index) == [0, 1, 2]
    assert (spread["probabilistic"] < 1 / M).all()  # Theorem 4 for any sizes
    figs.print_spread(spread)
    out = capsys.readouterr().out
    # the paper's Policy 2 value is compared with both of its readings
    assert [line.split()[-2] for line in out.splitlines()[1:]] == ["0.2040", "0.1160", "0.1160"]
    fig = figs.plot_sigma_spread(spread, M)
    assert fig.axes[0].get_ylabel() == "Zipf realisations (of 3)"


def test_fig3_laws_moments_and_plot(sizes):
    theory = figs.interval_laws(CFG, sizes, x_max=40)
    assert all(len(pmf) == 40 for pmf in theory.values())
    np.testing.assert_allclose(theory["markov_optimal"][5:7], [1 / 3, 2 / 3])
    traces = figs.interval_traces(CFG, sizes)
    moments = figs.interval_moments(traces, theory, CFG, sizes)
    assert moments.loc["markov_optimal", "mode (theory)"] == 7
    assert moments.loc["random", "mean (theory)"] == pytest.approx(N / M)
    assert moments.loc["random", "Var (theory)"] == pytest.approx(N * (N - M) / M**2)
    assert moments.loc["random", "intervals observed"] == traces["random"].interval_count
    fig = figs.plot_fig3(traces, theory, CFG)
    assert [ax.get_title() for ax in fig.axes] == [style(p).label for p in samplers.POLICIES]


def test_fig4_closed_forms_curves_table_and_plot(sizes, capsys):
    windows = (1, 2, 5)
    closed = figs.window_closed_forms(CFG, sizes, windows)
    r = M / N
    np.testing.assert_allclose(closed["random"], np.sqrt(r * (1 - r) / np.array(windows)))
    curves = figs.window_curves(replace(CFG, trace_seeds=2), sizes, windows)
    assert all(c.shape == (2, 3) for c in curves.values())
    assert abs(curves["markov_optimal"][:, 0].mean() - np.sqrt(r * (1 - r))) < 0.01
    figs.print_window_table(curves, closed, [1, 5], windows)
    out = capsys.readouterr().out.splitlines()
    assert "random (closed form)" in out[0] and len(out) == 4  # header, index name, T = 1, 5
    fig = figs.plot_fig4(curves, closed, CFG, windows)
    assert fig.axes[0].get_xscale() == "log"
    assert f"mean over {CFG.trace_seeds} traces" in fig.axes[0].get_title()
