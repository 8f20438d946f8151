"""What the total-variance notebook shows of Sigma (Javani & Wang, Fig. 2 and Theorems
3-5): the closed forms beside simulation and the paper's values, their spread over Zipf size
draws, and other readings of "total variance". Its assertions are in
:mod:`aoi_fl.evidence.aoi.checks`.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from aoi_fl.aoi import sigma
from aoi_fl.core import stats
from aoi_fl.evidence.aoi import results as summaries
from aoi_fl.evidence.aoi import traces
from aoi_fl.evidence.aoi.paper import PAPER_SIGMA
from aoi_fl.evidence.aoi.selection_settings import MARKOV_POLICIES, POLICIES, SelectionSettings
from aoi_fl.pipeline import plotting
from aoi_fl.pipeline.notebook import print_table


def print_sizes(sizes: np.ndarray, seed: int) -> None:
    """The Zipf draw behind the figures: total, min, median, max, the data share of the largest
    clients and how many clients hold a single sample."""
    share = np.sort(sizes)[::-1] / sizes.sum()
    print(
        f"sizes (seed {seed}): total {sizes.sum():.0f}, min {sizes.min():.0f}, "
        f"median {np.median(sizes):.0f}, max {sizes.max():.0f}"
    )
    print(
        f"share of the data held by the largest 1 / 3 / 10 clients: {share[0]:.3f} / "
        f"{share[:3].sum():.3f} / {share[:10].sum():.3f}"
    )
    print(f"clients with d_i = 1: {(sizes == 1).sum()}")


def sigma_closed_forms(cfg: SelectionSettings, sizes: np.ndarray) -> dict[str, float]:
    """Sigma = sum_i Var[w_i] (eq. 14) per policy in ``cfg``'s setting
    (:func:`results.sigma_closed_forms`: Theorems 3-5)."""
    return summaries.sigma_closed_forms(sizes, cfg.m, cfg.m_prime)


def print_sigma_closed_forms(closed: dict[str, float], n: int, m: int) -> None:
    """Print the closed forms beside equal sizes (Remarks 4-5) and the paper's values,
    then Theorem 4's bound 1/m and Theorem 5 with the |S| = 0 term dropped (eq. 33) or forced."""
    theorem = {
        "random": "Theorem 3 (exact)",
        "probabilistic": "Theorem 4",
        "markov_optimal": "Theorem 5",
        "markov_nonoptimal": "Theorem 5",
    }
    equal = {
        "random": sigma.sigma_random_equal(n, m),
        "probabilistic": sigma.sigma_probabilistic_equal(n, m),
        "markov_optimal": sigma.sigma_markov(n, m / n),
        "markov_nonoptimal": sigma.sigma_markov(n, m / n),
    }
    table = pd.DataFrame(
        {
            "policy": [plotting.style(k).label for k in POLICIES],
            "formula": [theorem[k] for k in POLICIES],
            "closed form (Zipf sizes)": [closed[k] for k in POLICIES],
            "equal sizes (Remarks 4-5)": [equal[k] for k in POLICIES],
            "paper": [PAPER_SIGMA[k] for k in POLICIES],
        }
    )
    print_table(table, "{:.4f}", index=False)
    print(f"\n1/m = {1 / m:.4f}: Theorem 4's Sigma = (1 - sum q_i^2)/m can never exceed it")
    print(
        f"Theorem 5 with |S| = 0 as printed in eq. 33 (term dropped): "
        f"{sigma.sigma_markov(n, m / n, empty='paper'):.10f}; forced: "
        f"{sigma.sigma_markov(n, m / n, empty='forced'):.10f}"
    )


def simulate_sigma(
    cfg: SelectionSettings, sizes: np.ndarray, closed: dict[str, float]
) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Sigma simulated per policy: a Monte Carlo run of ``cfg.mc_rounds`` rounds (and its ratio to
    the closed form), the mean and sd over ``cfg.trace_seeds`` traces of 1000 rounds from a
    stationary start and, for the Markov policies, the mean from eq. 4's zero start; with the
    paper's value. Also returns the first stationary trace's running Sigma per policy."""
    rows, histories = [], {}
    for policy in POLICIES:
        mc = stats.simulate(cfg.sampler(policy, sizes, seed=10_000), cfg.mc_rounds).sigma()
        stationary = traces.simulate_traces(policy, sizes, **cfg.trace_options(), record_sigma=True)
        values = np.array([t.sigma() for t in stationary])
        histories[policy] = stationary[0].sigma_history
        zero = np.nan  # memoryless policies have no start state
        if policy in MARKOV_POLICIES:
            from_zero = traces.simulate_traces(policy, sizes, **cfg.trace_options(), start="zero")
            zero = np.mean([t.sigma() for t in from_zero])
        rows.append(
            {
                "policy": policy,
                "closed form": closed[policy],
                "Monte Carlo": mc,
                "MC / closed": mc / closed[policy],
                "1000 rounds (mean)": values.mean(),
                "1000 rounds (sd)": values.std(),
                "1000 rounds, zero start": zero,
                "paper": PAPER_SIGMA[policy],
            }
        )
    return pd.DataFrame(rows).set_index("policy"), histories


def plot_fig2(
    sim: pd.DataFrame,
    histories: dict[str, np.ndarray],
    closed: dict[str, float],
    cfg: SelectionSettings,
) -> Figure:
    """Fig. 2: per policy, bars of the 1000-round Sigma (mean ± sd over traces) beside the
    paper's value and the closed form (left); the running empirical Sigma of one trace with the
    closed forms dashed and the paper's values as open markers (right)."""
    fig, (bars, ax) = plt.subplots(
        1, 2, figsize=(11.5, 4.2), gridspec_kw={"width_ratios": [1, 1.6]}
    )
    x = np.arange(len(POLICIES))
    for i, policy in enumerate(POLICIES):
        st = plotting.style(policy)
        bars.bar(
            i - 0.2,
            sim.loc[policy, "1000 rounds (mean)"],
            0.4,
            color=st.color,
            yerr=sim.loc[policy, "1000 rounds (sd)"],
            capsize=3,
        )
        bars.bar(i + 0.2, PAPER_SIGMA[policy], 0.4, color="white", edgecolor=st.color, hatch="//")
        bars.plot([i - 0.4, i + 0.4], [closed[policy]] * 2, color="0.1", lw=1.2)
    bars.set_xticks(x, [f"Policy {i + 1}" for i in x])
    bars.set_ylabel("Sigma")
    bars.legend(
        handles=[
            Patch(color="0.5", label="ours: 1000 rounds (mean ± sd)"),
            Patch(facecolor="white", edgecolor="0.5", hatch="//", label="paper"),
            Line2D([], [], color="0.1", lw=1.2, label="closed form"),
        ],
        fontsize="x-small",
    )
    rounds = cfg.rounds
    t = np.arange(1, rounds + 1)
    for policy in POLICIES:
        st = plotting.style(policy)
        ax.plot(t, histories[policy], color=st.color, label=st.label, lw=1.4)
        ax.axhline(closed[policy], color=st.color, ls="--", lw=0.9)
        ax.plot(
            [rounds * 1.02],
            [PAPER_SIGMA[policy]],
            marker=st.marker,
            color=st.color,
            ms=7,
            mfc="white",
            clip_on=False,
            ls="none",
        )
    ax.plot([], [], "k--", lw=0.9, label="closed form (Theorems 3-5)")
    ax.plot([], [], marker="o", mfc="white", color="0.3", ls="none", label="paper (Fig. 2 text)")
    ax.set_xlim(0, rounds * 1.04)
    ax.set_ylim(0, max(max(closed.values()), max(PAPER_SIGMA.values())) * 1.35)
    ax.set_xlabel("round t")
    ax.set_ylabel("empirical Sigma, rounds 1..t")
    ax.legend(loc="upper right", ncol=2, fontsize="x-small")
    fig.suptitle(
        f"Fig. 2 · total variance Sigma, n={cfg.n}, m={cfg.m}, m'={cfg.m_prime}, Zipf(a=2) sizes "
        f"(seed {cfg.size_seed}), stationary start",
        fontsize="medium",
    )
    fig.tight_layout()
    return fig


def sigma_over_sizes(cfg: SelectionSettings) -> pd.DataFrame:
    """Policies 1-2's closed-form Sigma and Policy 2's sum_i E[w_i^2] for ``cfg.zipf_seeds``
    Zipf size draws (seeds 0, 1, ...); the Markov policies' Sigma does not depend on the sizes."""
    rows = []
    for s in range(cfg.zipf_seeds):
        d = cfg.sizes(seed=s)
        rows.append(
            {
                "seed": s,
                "random": sigma.sigma_random(d, cfg.m),
                "probabilistic": sigma.sigma_probabilistic(d, cfg.m),
                "probabilistic: sum E[w^2]": sigma.second_moment_sum_probabilistic(d, cfg.m),
            }
        )
    return pd.DataFrame(rows).set_index("seed")


def print_spread(spread: pd.DataFrame) -> None:
    """Print the quantiles over size draws of :func:`sigma_over_sizes`'s columns, the
    paper's value and the share of draws at or below it (its percentile)."""
    summary = spread.quantile([0.05, 0.25, 0.5, 0.75, 0.95]).T
    # "probabilistic: sum E[w^2]" is a reading of the paper's Policy 2 value
    summary["paper"] = [PAPER_SIGMA[k.split(":")[0]] for k in summary.index]
    summary["paper's percentile"] = [
        (spread[k] <= v).mean() * 100 for k, v in zip(spread, summary["paper"], strict=True)
    ]
    print_table(summary, "{:.4f}")


def plot_sigma_spread(spread: pd.DataFrame, m: int) -> Figure:
    """Histograms of Policies 1-2's closed-form Sigma over the size draws, with the paper's
    values and Theorem 4's bound 1/m."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for k in ("random", "probabilistic"):
        st = plotting.style(k)
        ax.hist(spread[k], bins=30, color=st.color, alpha=0.6, label=st.label)
        ax.axvline(PAPER_SIGMA[k], **{**plotting.PAPER_STYLE, "color": st.color})
    ax.axvline(1 / m, color="0.2", lw=0.8)
    ax.text(1 / m, ax.get_ylim()[1] * 0.95, " 1/m", fontsize=8, va="top")
    ax.plot([], [], **plotting.PAPER_STYLE, label="paper")
    ax.set_xlabel("closed-form Sigma")
    ax.set_ylabel(f"Zipf realisations (of {len(spread)})")
    ax.set_title("Sigma of Policies 1-2 across Zipf(a=2) size realisations")
    ax.legend(fontsize="x-small")
    fig.tight_layout()
    return fig


def second_moment_sums(sizes: np.ndarray, n: int, m: int) -> dict[str, float]:
    """sum_i E[w_i^2] per policy (eq. 13's gamma_i summed), a reading of "total variance" other
    than eq. 14's Sigma; for the Markov policies Sigma + n (1/n)^2 with E[w_i] = 1/n."""
    markov_sum = sigma.sigma_markov(n, m / n) + 1 / n
    return {
        "random": sigma.random_weight_moments(sizes, m)[1].sum(),
        "probabilistic": sigma.second_moment_sum_probabilistic(sizes, m),
        "markov_optimal": markov_sum,
        "markov_nonoptimal": markov_sum,
    }


def print_sigma_readings(closed: dict[str, float], gamma: dict[str, float], n: int, m: int) -> None:
    """Print Sigma beside two other readings of the paper's "total variance": sum_i
    E[w_i^2] (``gamma``) and, for the Markov policies, Sigma with w = 1/m instead of 1/|S|
    ((1 - m/n)/m exactly); with the paper's values."""
    table = pd.DataFrame(
        {
            "Sigma (closed form)": closed,
            "sum_i E[w_i^2]": gamma,
            "Sigma with w = 1/m": {
                k: ((1 - m / n) / m if k in MARKOV_POLICIES else np.nan) for k in POLICIES
            },
            "paper": PAPER_SIGMA,
        }
    )
    print_table(table, "{:.4f}")
