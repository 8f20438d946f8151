"""What notebooks 01-04 show of the selection theory (Javani & Wang, Sec. III): Fig. 1's age
chain and Theorem 1 (01), Fig. 2's total variance Sigma and Theorems 3-5 (02), Fig. 3's
inter-selection intervals (03) and Fig. 4's window variance (04), with the tables printed
beside them. The assertions on what they print are in :mod:`aoi_fl.aoi.checks`.

Notebooks 02-04 share their settings (:data:`SELECTION_SETTINGS`, opened by
:func:`selection_setup`): the paper's n = 100 clients, m = 15 a round, m' = 10, 1000 rounds and
Zipf(a = 2) dataset sizes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from aoi_fl.aoi import markov, memoryless, samplers, sigma, traces
from aoi_fl.aoi import results as summaries
from aoi_fl.aoi.paper import PAPER_SIGMA, THEOREM1_GRID, WINDOWS
from aoi_fl.core import stats
from aoi_fl.core.stats import SelectionStats
from aoi_fl.core.validation import require_choice
from aoi_fl.data import partition
from aoi_fl.pipeline import notebook, plotting
from aoi_fl.pipeline.notebook import NotebookSetup, print_table
from aoi_fl.pipeline.profiles import resolve_profile, settings

POLICIES = samplers.POLICIES
MEMORYLESS_POLICIES, MARKOV_POLICIES = POLICIES[:2], POLICIES[2:]
#: Fig. 3's interval axis: the pmfs are computed for X = 1..X_MAX
X_MAX = 60

_PAPER_SETTINGS = {"n": 100, "m": 15, "m_prime": 10, "rounds": 1000, "zipf_a": 2.0, "size_seed": 0}
#: notebooks 02-04's settings per profile. The selection statistics are cheap: cpu and paper
#: use the paper's exact parameters; smoke only has fewer traces, Monte Carlo rounds and draws
SELECTION_SETTINGS = {
    "smoke": {**_PAPER_SETTINGS, "trace_seeds": 2, "mc_rounds": 20_000, "zipf_seeds": 10},
    "cpu": {**_PAPER_SETTINGS, "trace_seeds": 20, "mc_rounds": 400_000, "zipf_seeds": 200},
    "paper": {**_PAPER_SETTINGS, "trace_seeds": 20, "mc_rounds": 400_000, "zipf_seeds": 200},
}


@dataclass(frozen=True)
class SelectionSettings:
    """One profile's row of :data:`SELECTION_SETTINGS`, and what the four policies are under it.

    ``trace_seeds`` traces of ``rounds`` rounds each (Figs 2 and 4), ``mc_rounds`` rounds of
    Monte Carlo (Fig. 2), ``zipf_seeds`` independent Zipf(``zipf_a``) size draws for the spread
    of Policies 1-2's Sigma; the figures use the draw of seed ``size_seed``.
    """

    n: int
    m: int
    m_prime: int
    rounds: int
    zipf_a: float
    size_seed: int
    trace_seeds: int
    mc_rounds: int
    zipf_seeds: int

    def sizes(self, seed: int | None = None) -> np.ndarray:
        """The n dataset sizes, NumPy's Zipf(a) law P(d = k) ~ k^-a, of draw ``seed``
        (default ``size_seed``)."""
        seed = self.size_seed if seed is None else seed
        return partition.zipf_sizes(self.n, self.zipf_a, seed=seed).astype(float)

    def sampler(self, policy: str, sizes: np.ndarray, seed: int, start: str = "stationary"):
        """The policy's sampler (Markov policies from ``start``: stationary or eq. 4's zero)."""
        return samplers.make_sampler(
            policy, n=self.n, m=self.m, sizes=sizes, m_prime=self.m_prime, seed=seed, start=start
        )

    def chain(self, policy: str) -> np.ndarray:
        """p of a Markov policy: Theorem 1's (Policy 3) or the linear family's (Policy 4)."""
        if require_choice("policy", policy, MARKOV_POLICIES) == "markov_optimal":
            return markov.optimal_p(self.n, self.m, self.m_prime)
        return markov.calibrate_family("linear", self.n, self.m, self.m_prime)

    def trace_options(self) -> dict[str, int]:
        """The keywords of :func:`traces.simulate_traces` for ``trace_seeds`` traces of ``rounds``
        rounds."""
        return {
            "n": self.n,
            "m": self.m,
            "m_prime": self.m_prime,
            "seeds": self.trace_seeds,
            "rounds": self.rounds,
        }

    def rates(self, policy: str, sizes: np.ndarray) -> np.ndarray:
        """Per-round selection probabilities r_i of a memoryless policy (Policies 1-2)."""
        if require_choice("policy", policy, MEMORYLESS_POLICIES) == "random":
            return memoryless.random_rates(self.n, self.m)
        return memoryless.probabilistic_rates(sizes, self.m)


def selection_setup(profile: str) -> tuple[str, SelectionSettings, NotebookSetup]:
    """The opening of notebooks 02-04: (resolved profile, its settings, notebook setup); prints
    the profile and every setting."""
    profile = resolve_profile(profile)
    cfg = SelectionSettings(**settings(profile, SELECTION_SETTINGS))
    env = notebook.setup(profile, ", ".join(f"{k}={v}" for k, v in asdict(cfg).items()))
    return profile, cfg, env


# ---------------------------------------------------------------------------------------------
# Fig. 1 and Theorem 1 (notebook 01)


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
# Fig. 2: the total variance Sigma (notebook 02)


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


# ---------------------------------------------------------------------------------------------
# Fig. 3: inter-selection intervals (notebook 03)


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
# Fig. 4: window variance of the selection counts (notebook 04)


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
    "PAPER_SIGMA",
    "SELECTION_SETTINGS",
    "THEOREM1_GRID",
    "WINDOWS",
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
