"""What the Figs 1-4 notebooks show of the selection theory (Javani & Wang, Sec. III): Fig. 1's
age chain and Theorem 1, Fig. 2's total variance Sigma and Theorems 3-5
(:mod:`~aoi_fl.evidence.aoi.sigma_figures`), Fig. 3's inter-selection intervals and Fig. 4's
window variance, each in its own notebook, with the tables printed beside them. The assertions on
what they print are in :mod:`aoi_fl.evidence.aoi.checks`.

The Figs 2-4 notebooks share their settings (:mod:`~aoi_fl.evidence.aoi.selection_settings`): the
paper's n = 100 clients, m = 15 a round, m' = 10, 1000 rounds and Zipf(a = 2) dataset sizes. Both
modules' names are importable from here, where the notebooks import them.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from aoi_fl.aoi import markov, memoryless
from aoi_fl.core import stats
from aoi_fl.core.stats import SelectionStats
from aoi_fl.evidence.aoi import results as summaries
from aoi_fl.evidence.aoi import traces
from aoi_fl.evidence.aoi.paper import PAPER_SIGMA, THEOREM1_GRID, WINDOWS
from aoi_fl.evidence.aoi.selection_settings import (
    MARKOV_POLICIES,
    MEMORYLESS_POLICIES,
    POLICIES,
    SELECTION_SETTINGS,
    SelectionSettings,
    selection_setup,
)
from aoi_fl.evidence.aoi.sigma_figures import (
    plot_fig2,
    plot_sigma_spread,
    print_sigma_closed_forms,
    print_sigma_readings,
    print_sizes,
    print_spread,
    second_moment_sums,
    sigma_closed_forms,
    sigma_over_sizes,
    simulate_sigma,
)
from aoi_fl.pipeline import plotting
from aoi_fl.pipeline.notebook import print_table

#: Fig. 3's interval axis: the pmfs are computed for X = 1..X_MAX
X_MAX = 60


# ---------------------------------------------------------------------------------------------
# Fig. 1 and Theorem 1


def plot_fig1(p_opt: np.ndarray, p_lin: np.ndarray, n: int, m: int) -> Figure:
    """Fig. 1: the age chain (m' + 1 states) with Theorem 1's p (Policy 3, top) and Policy 4's
    linear p (bottom); edges of probability 0 are faint."""
    fig, axes = plt.subplots(2, 1, figsize=(11, 5.6))
    plotting.draw_chain(p_opt, axes[0])
    axes[0].set_title(f"Policy 3, Markov optimal (Theorem 1): n={n}, m={m}, m'={len(p_opt) - 1}")
    plotting.draw_chain(p_lin, axes[1])
    axes[1].set_title(
        "Policy 4, Markov non-optimal: p_a proportional to a+1, calibrated to pi_0 = m/n"
    )
    fig.tight_layout()
    return fig


def print_chain_laws(p_opt: np.ndarray, p_lin: np.ndarray, n: int, m: int) -> None:
    """Print p and the stationary law pi of both chains per age a, then pi_0 (the
    selection rate, constraint 3: m/n)."""
    table = pd.DataFrame(
        {
            "p (optimal)": p_opt,
            "pi (optimal)": markov.stationary_distribution(p_opt),
            "p (linear, non-optimal)": p_lin,
            "pi (linear)": markov.stationary_distribution(p_lin),
        },
        index=pd.Index(range(len(p_opt)), name="age a"),
    )
    print_table(table, "{:.6f}")
    print(
        f"pi_0 optimal = {markov.selection_rate(p_opt):.6f}, "
        f"linear = {markov.selection_rate(p_lin):.6f}, m/n = {m / n:.6f}"
    )


def print_interval_moments(p_opt: np.ndarray, p_lin: np.ndarray, n: int, m: int) -> None:
    """Print E[X] and Var[X] of the optimal and linear chains and of random selection
    (geometric, Var[X] = n(n - m)/m^2)."""
    rows = [
        (name, markov.interval_mean(p), markov.interval_variance(p))
        for name, p in [("Markov optimal (Theorem 1)", p_opt), ("Markov linear (Policy 4)", p_lin)]
    ]
    rows.append(
        (
            "random, geometric n(n-m)/m^2",
            markov.random_interval_mean(n, m),
            markov.random_interval_variance(n, m),
        )
    )
    table = pd.DataFrame(rows, columns=["policy", "E[X]", "Var[X]"])
    print_table(table, "{:.6f}", index=False)


def print_families(n: int, m: int, m_prime: int) -> None:
    """Print Policy 4's calibrated families (:data:`markov.FAMILIES`) per age, then
    each one's pi_0, Var[X], saturated ages (p_a = 1) and last reachable age."""
    families = pd.DataFrame(
        {f: markov.calibrate_family(f, n, m, m_prime) for f in markov.FAMILIES},
        index=pd.Index(range(m_prime + 1), name="age a"),
    )
    print_table(families, "{:.6f}")
    for family, p in families.items():
        print(
            f"{family:>11}: pi_0 = {markov.selection_rate(p):.6f}, "
            f"Var[X] = {markov.interval_variance(p):.6f}, "
            f"ages with p_a = 1: {np.flatnonzero(p >= 1).tolist()}, "
            f"last reachable age: {markov.last_reachable_age(p)}"
        )


def print_theorem1(grid=THEOREM1_GRID) -> pd.DataFrame:
    """Print and return Theorem 1 on ``grid`` (:func:`results.theorem1_table`): its case, its
    closed-form minimum variance, Var[X] of the chain with its p (exact), whether that p meets
    pi_0 = m/n (eq. 3), and random selection's Var[X] for comparison."""
    table = summaries.theorem1_table(grid)
    print_table(table, "{:.6f}", index=False)
    return table


def print_optimiser(starts: int, grid=THEOREM1_GRID) -> pd.DataFrame:
    """Print and return the numerical minimum of Var[X] subject to E[X] = n/m against Theorem
    1's closed form on ``grid`` (:func:`results.optimiser_table`, ``starts`` random starts), then
    the tolerances and how often it agrees."""
    tol = markov.CONVERGED_RTOL
    table = summaries.optimiser_table(starts, grid)
    print_table(table, "{:.6f}", index=False)
    print(
        f"{starts} random starts per grid point; '=' within {tol:g} (relative), "
        f"pi_0 within {markov.FEASIBLE_RTOL:g}; most starts: more than half end within {tol:g} "
        "of the best one"
    )
    print(
        f"optimiser = Theorem 1 on {table['optimiser = closed form'].sum()} of "
        f"{len(table)} grid points; below it on {table['optimiser below it'].sum()}"
    )
    return table


# ---------------------------------------------------------------------------------------------
# Fig. 3: inter-selection intervals


def interval_laws(
    cfg: SelectionSettings, sizes: np.ndarray, x_max: int = X_MAX
) -> dict[str, np.ndarray]:
    """P(X = x), x = 1..x_max, per policy: the chain's exact law (Policies 3-4) or the pooled
    geometric law of the memoryless policies (Policies 1-2,
    :func:`memoryless.pooled_interval_pmf`)."""
    return {
        policy: (
            markov.interval_pmf(cfg.chain(policy), x_max)
            if policy in MARKOV_POLICIES
            else memoryless.pooled_interval_pmf(cfg.rates(policy, sizes), x_max)
        )
        for policy in POLICIES
    }


def interval_traces(cfg: SelectionSettings, sizes: np.ndarray) -> dict[str, SelectionStats]:
    """One trace of ``cfg.rounds`` rounds per policy (sampler seed 0, stationary start)."""
    return {
        policy: stats.simulate(cfg.sampler(policy, sizes, 0), cfg.rounds) for policy in POLICIES
    }


def plot_fig3(
    traces: dict[str, SelectionStats], theory: dict[str, np.ndarray], cfg: SelectionSettings
) -> Figure:
    """Fig. 3: per policy, the histogram of a trace's inter-selection intervals (fractions) with
    the law it should follow."""
    x_max = len(theory[POLICIES[0]])
    fig, axes = plt.subplots(2, 2, figsize=(9.5, 6.4), sharex=True)
    for ax, policy in zip(axes.ravel(), POLICIES, strict=True):
        st = plotting.style(policy)
        hist = traces[policy].interval_histogram()[1 : x_max + 1]
        total = traces[policy].interval_count
        ax.bar(
            np.arange(1, hist.size + 1),
            hist / total,
            color=st.color,
            alpha=0.75,
            width=0.9,
            label=f"simulated, {cfg.rounds} rounds",
        )
        ax.plot(
            np.arange(1, x_max + 1),
            theory[policy],
            color="0.15",
            lw=1.2,
            marker=".",
            ms=3,
            label="theory",
        )
        ax.set_title(st.label, fontsize="small")
        ax.set_xlim(0, 40)
        ax.legend(fontsize="x-small")
    for ax in axes[1]:
        ax.set_xlabel("inter-selection interval X (rounds)")
    for ax in axes[:, 0]:
        ax.set_ylabel("fraction of intervals")
    fig.suptitle(
        f"Fig. 3 · inter-selection intervals, n={cfg.n}, m={cfg.m}, m'={cfg.m_prime}, "
        f"{cfg.rounds} rounds",
        fontsize="medium",
    )
    fig.tight_layout()
    return fig


def interval_moments(
    traces: dict[str, SelectionStats],
    theory: dict[str, np.ndarray],
    cfg: SelectionSettings,
    sizes: np.ndarray,
) -> pd.DataFrame:
    """Per policy: intervals observed, mean, variance and mode of X simulated (the trace) and in
    theory (the chain's exact moments, or the pooled geometric law's in closed form:
    :func:`memoryless.pooled_interval_moments`)."""
    rows = []
    for policy in POLICIES:
        tr = traces[policy]
        if policy in MARKOV_POLICIES:
            p = cfg.chain(policy)
            mean, var = markov.interval_mean(p), markov.interval_variance(p)
        else:
            mean, var = memoryless.pooled_interval_moments(cfg.rates(policy, sizes))
        rows.append(
            {
                "policy": policy,
                "intervals observed": tr.interval_count,
                "mean (sim)": tr.interval_mean(),
                "mean (theory)": mean,
                "Var (sim)": tr.interval_var(),
                "Var (theory)": var,
                "mode (sim)": int(np.argmax(tr.interval_histogram())),
                "mode (theory)": int(np.argmax(theory[policy])) + 1,  # the pmf starts at X = 1
            }
        )
    return pd.DataFrame(rows).set_index("policy")


# ---------------------------------------------------------------------------------------------
# Fig. 4: window variance of the selection counts


def window_closed_forms(
    cfg: SelectionSettings, sizes: np.ndarray, windows=WINDOWS
) -> dict[str, np.ndarray]:
    """sqrt(Var(Y))/T of the memoryless policies at each window T: Policy 1's count is
    Binomial(T, m/n) per client, Policy 2's counts its m draws a round, Binomial(T m, q_i): the
    same formula at T m draws, times m."""
    q = sizes / sizes.sum()
    return {
        "random": np.array(
            [memoryless.window_std_ratio(cfg.rates("random", sizes), t) for t in windows]
        ),
        "probabilistic": np.array(
            [cfg.m * memoryless.window_std_ratio(q, t * cfg.m) for t in windows]
        ),
    }


def window_curves(
    cfg: SelectionSettings, sizes: np.ndarray, windows=WINDOWS
) -> dict[str, np.ndarray]:
    """sqrt(Var(Y))/T per policy, trace (``cfg.trace_seeds`` of ``cfg.rounds`` rounds) and window
    T (:func:`traces.window_std_ratios` of :func:`traces.window_traces`): Y is a client's count
    in consecutive, non-overlapping windows; Policy 2's counts its draws (Sec. III-B)."""
    return {
        policy: traces.window_std_ratios(
            traces.window_traces(policy, sizes, windows, **cfg.trace_options()), windows
        )
        for policy in POLICIES
    }


def plot_fig4(
    curves: dict[str, np.ndarray],
    closed: dict[str, np.ndarray],
    cfg: SelectionSettings,
    windows=WINDOWS,
) -> Figure:
    """Fig. 4: sqrt(Var(Y))/T against T (log-log), mean over traces with a min-max band, and the
    memoryless closed forms dashed."""
    fig, ax = plt.subplots(figsize=(7.0, 4.4))
    for policy in POLICIES:
        st = plotting.style(policy)
        c = curves[policy]
        ax.plot(windows, c.mean(axis=0), marker=st.marker, color=st.color, label=st.label, ms=4)
        if c.shape[0] > 1:
            ax.fill_between(windows, c.min(axis=0), c.max(axis=0), color=st.color, alpha=0.15, lw=0)
        if policy in closed:
            ax.plot(windows, closed[policy], color=st.color, ls="--", lw=1)
    ax.plot([], [], "k--", lw=1, label="closed form (memoryless)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("window size T (rounds)")
    ax.set_ylabel("sqrt(Var(Y)) / T")
    ax.set_title(
        f"Fig. 4 · n={cfg.n}, m={cfg.m}, {cfg.rounds} rounds; line: mean over "
        f"{cfg.trace_seeds} traces, band: min-max"
    )
    ax.legend(fontsize="x-small")
    fig.tight_layout()
    return fig


def print_window_table(
    curves: dict[str, np.ndarray],
    closed: dict[str, np.ndarray],
    shown: list[int],
    windows=WINDOWS,
) -> None:
    """Print Fig. 4 as a table at the windows ``shown``: the mean over traces per policy and the
    memoryless closed forms."""
    table = pd.DataFrame(
        {policy: curves[policy].mean(axis=0) for policy in POLICIES},
        index=pd.Index(windows, name="T"),
    )
    for policy, values in closed.items():
        table[f"{policy} (closed form)"] = values
    print_table(table.loc[shown], "{:.4f}")


__all__ = [
    "MARKOV_POLICIES",
    "MEMORYLESS_POLICIES",
    "PAPER_SIGMA",
    "POLICIES",
    "SELECTION_SETTINGS",
    "THEOREM1_GRID",
    "WINDOWS",
    "X_MAX",
    "SelectionSettings",
    "interval_laws",
    "interval_moments",
    "interval_traces",
    "plot_fig1",
    "plot_fig2",
    "plot_fig3",
    "plot_fig4",
    "plot_sigma_spread",
    "print_chain_laws",
    "print_families",
    "print_interval_moments",
    "print_optimiser",
    "print_sigma_closed_forms",
    "print_sigma_readings",
    "print_sizes",
    "print_spread",
    "print_theorem1",
    "print_window_table",
    "second_moment_sums",
    "selection_setup",
    "sigma_closed_forms",
    "sigma_over_sizes",
    "simulate_sigma",
    "window_closed_forms",
    "window_curves",
]
