"""aoi_fl.evidence.aoi.checks: each notebook check passes on what it should and names what fails."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from aoi_fl.aoi import markov
from aoi_fl.evidence.aoi import checks, experiments
from aoi_fl.evidence.aoi import theory_figures as figs
from aoi_fl.evidence.aoi.figures import table2
from aoi_fl.pipeline.profiles import settings

N, M, M_PRIME = 100, 15, 10
CFG = figs.SelectionSettings(**settings("smoke", figs.SELECTION_SETTINGS))
P_OPT = markov.optimal_p(N, M, M_PRIME)
P_LIN = markov.calibrate_family("linear", N, M, M_PRIME)
GRID = figs.THEOREM1_GRID[:3]


def test_fig1_passes_on_the_papers_chains_and_fails_on_a_wrong_rate_or_shape():
    assert checks.check_fig1(P_OPT, P_LIN, N, M) == [
        "stationary laws",
        "pi_0 = m/n",
        "E[X] = n/m",
        "Var[X] ordering",
    ]
    with pytest.raises(AssertionError, match="linear: pi_0"):
        checks.check_fig1(P_OPT, markov.calibrate_family("linear", N, 20, M_PRIME), N, M)
    with pytest.raises(AssertionError, match="must rise strictly"):
        checks.check_fig1(P_OPT, P_OPT, N, M)  # Theorem 1's p is 0 up to age 4


@pytest.fixture(scope="module")
def theorem1_tables():
    return figs.print_theorem1(GRID), figs.print_optimiser(4, GRID)


def test_theorem1_checks_and_what_smoke_skips(theorem1_tables, capsys):
    theorem1, optimiser = theorem1_tables
    assert checks.check_theorem1(theorem1, optimiser, "smoke") == [
        "Theorem 1 on 3 grid points",
        "optimiser on 3",
    ]
    assert "skipped in smoke: 'most starts reach it'" in capsys.readouterr().out
    lost = optimiser.assign(**{"most starts reach it": False})
    checks.check_theorem1(theorem1, lost, "smoke")
    with pytest.raises(AssertionError, match="fewer than half the starts"):
        checks.check_theorem1(theorem1, lost, "cpu")


@pytest.mark.parametrize(
    ("table", "column", "value", "message"),
    [
        (0, "chain Var[X]", 1.0, "closed form differs from the chain"),
        (0, "pi_0 = m/n", False, "misses constraint"),
        (1, "optimiser = closed form", False, "missed Theorem 1's minimum"),
        (1, "optimiser below it", True, "went below Theorem 1"),
    ],
)
def test_theorem1_fails_on_a_tampered_table(theorem1_tables, table, column, value, message):
    tables = [t.copy() for t in theorem1_tables]
    tables[table].loc[1, column] = value
    with pytest.raises(AssertionError, match=message):
        checks.check_theorem1(*tables, "cpu")


def fig2_inputs():
    sizes = CFG.sizes()
    closed = figs.sigma_closed_forms(CFG, sizes)
    sim = pd.DataFrame(
        {
            "closed form": closed,
            "MC / closed": 1.001,
            "1000 rounds (mean)": {k: 1.01 * v for k, v in closed.items()},
            "1000 rounds (sd)": 0.001,
            "1000 rounds, zero start": {k: 1.2 * v for k, v in closed.items()},
        }
    )
    spread = pd.DataFrame({"probabilistic": [0.05, 0.06]})
    return closed, sim, spread, figs.second_moment_sums(sizes, CFG.n, CFG.m)


def test_fig2_checks_the_simulation_outside_smoke_only(capsys):
    closed, sim, spread, gamma = fig2_inputs()
    done = checks.check_fig2(closed, sim, spread, gamma, CFG, "cpu")
    assert done[0] == "Theorems 3-5 against Monte Carlo and traces"
    off = sim.assign(**{"MC / closed": 1.02})
    with pytest.raises(AssertionError, match="Monte Carlo off"):
        checks.check_fig2(closed, off, spread, gamma, CFG, "cpu")
    lockstep = sim.assign(**{"1000 rounds, zero start": sim["1000 rounds (mean)"]})
    with pytest.raises(AssertionError, match="zero start"):
        checks.check_fig2(closed, lockstep, spread, gamma, CFG, "cpu")
    checks.check_fig2(closed, off, spread, gamma, CFG, "smoke")
    assert "20,000 Monte Carlo rounds and 2 traces" in capsys.readouterr().out


def test_fig2_fails_where_the_theorems_disagree():
    closed, sim, spread, gamma = fig2_inputs()
    with pytest.raises(AssertionError, match="Policies 3 and 4 must agree"):
        checks.check_fig2({**closed, "markov_nonoptimal": 0.07}, sim, spread, gamma, CFG, "smoke")
    with pytest.raises(AssertionError, match="can never reach 1/m"):
        checks.check_fig2(closed, sim, spread + 0.02, gamma, CFG, "smoke")
    with pytest.raises(AssertionError, match="random: sum E"):
        checks.check_fig2(closed, sim, spread, {**gamma, "random": 0.0}, CFG, "smoke")


def test_fig3_passes_on_a_trace_and_fails_on_a_wrong_law_or_mode():
    sizes = CFG.sizes()
    theory = figs.interval_laws(CFG, sizes)
    moments = figs.interval_moments(figs.interval_traces(CFG, sizes), theory, CFG, sizes)
    assert checks.check_fig3(moments, theory, CFG.n, CFG.m)[0] == "Theorem 1's two-point law"
    shifted = {**theory, "markov_optimal": np.roll(theory["markov_optimal"], 1)}
    with pytest.raises(AssertionError, match="1/3 on X = 6|0.333333 on X = 6"):
        checks.check_fig3(moments, shifted, CFG.n, CFG.m)
    moved = moments.copy()
    moved.loc["random", "mode (sim)"] = 3
    with pytest.raises(AssertionError, match="random: simulated mode 3"):
        checks.check_fig3(moved, theory, CFG.n, CFG.m)
    uncensored = moments.copy()
    uncensored.loc["probabilistic", "Var (sim)"] = 1e6
    with pytest.raises(AssertionError):
        checks.check_fig3(uncensored, theory, CFG.n, CFG.m)


def fig4_curves(windows):
    """Curves in Fig. 4's order: Markov optimal < non-optimal < random < probabilistic, the
    0/1 policies tied at T = 1 on sqrt(r (1 - r))."""
    base = np.sqrt(0.15 * 0.85) / np.sqrt(np.asarray(windows, dtype=float))
    step = np.where(np.asarray(windows) == 1, 0.0, 0.01 * base)
    return {
        "markov_optimal": (base - step)[None, :],
        "markov_nonoptimal": base[None, :],
        "random": (base + step)[None, :],
        "probabilistic": (2 * base + 0.1)[None, :],
    }


def test_fig4_checks_the_order_of_the_policies(capsys):
    windows = figs.WINDOWS
    curves = fig4_curves(windows)
    closed = {"random": curves["random"][0], "probabilistic": curves["probabilistic"][0]}
    assert checks.check_fig4(curves, closed, CFG, "cpu", windows)[-1] == "memoryless closed forms"
    swapped = {**curves, "markov_optimal": curves["random"], "random": curves["markov_optimal"]}
    with pytest.raises(AssertionError, match="ordering of the policies broken at T = 2"):
        checks.check_fig4(swapped, closed, CFG, "cpu", windows)
    low = {**curves, "probabilistic": curves["random"] * 0.5}
    with pytest.raises(AssertionError, match="Policy 2 not the highest at T = 1"):
        checks.check_fig4(low, closed, CFG, "cpu", windows)
    off = {**closed, "random": closed["random"] * 1.05}
    with pytest.raises(AssertionError, match="random, T = 1:"):
        checks.check_fig4(curves, off, CFG, "cpu", windows)
    checks.check_fig4(curves, off, replace(CFG, trace_seeds=2), "smoke", windows)
    assert "(2 traces are too few" in capsys.readouterr().out


def skew_table(seeds=3, epochs=25.0):
    index = pd.MultiIndex.from_product([experiments.SPLITS, experiments.POLICIES])
    table = pd.DataFrame(1.0, index=index, columns=experiments.SKEW_COLUMNS)
    table["rho_lower (min_t)"] = 0.7
    table["seeds"] = seeds
    table["F* epochs"] = epochs
    table["F* device"] = "cpu"
    return table


def test_table2_checks_seeds_bounds_and_the_epoch_cap(capsys):
    tables = {"mnist": skew_table()}
    assert checks.check_table2(tables, table2(tables), "cpu") == [
        "seeds",
        "finite values",
        "rho_lower <= average",
        "Table II equals the per-dataset tables",
    ]
    short = {"mnist": skew_table(seeds=2)}
    with pytest.raises(AssertionError, match="not over all 3 seeds"):
        checks.check_table2(short, table2(short), "cpu")
    above = {"mnist": skew_table()}
    above["mnist"]["rho_lower (min_t)"] = 1.5
    with pytest.raises(AssertionError, match="rho_lower above the average"):
        checks.check_table2(above, table2(above), "cpu")
    with pytest.raises(AssertionError, match=r"\('mnist', 'iid', 'random'\)"):
        checks.check_table2(tables, table2(tables) * 2, "cpu")
    capped = {"mnist": skew_table(epochs=60.0)}
    with pytest.raises(AssertionError, match="hit the epoch cap"):
        checks.check_table2(capped, table2(capped), "cpu")
    smoke = {"mnist": skew_table(seeds=experiments.panel("main_mnist", "smoke")["seeds"])}
    checks.check_table2(smoke, table2(smoke), "smoke")
    assert "skipped in smoke: local optima" in capsys.readouterr().out
