"""What the Figs 1-2 notebooks show of the agnostic-FedAvg experiments: the participation process
and the weights it induces (eq. 2), Fig. 1's loss curves and optimality gaps, Theorem 4's rate over
the horizons, Fig. 2's gaps against the skew, the AoI policies' induced weights, and the printed
claims tables.

The numbers come from :mod:`aoi_fl.evidence.agnostic.results`; here they are drawn and printed.
"""

from __future__ import annotations

import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from aoi_fl.agnostic import algorithms as agnostic
from aoi_fl.evidence.agnostic import results as ar
from aoi_fl.evidence.agnostic.experiments import (
    AGGREGATIONS,
    BALL_RADIUS,
    DIVERGED_LOSS,
    FIG2_RULES,
    M_AVAILABLE,
    N_CLIENTS,
    POLICIES,
    TASK_TITLES,
    TASKS,
)
from aoi_fl.pipeline.notebook import print_table
from aoi_fl.pipeline.plotting import style

#: the titles of Fig. 1's panels, in the order of :data:`experiments.FIG1_PANELS`
PANEL_TITLES = {
    ("mnist", "last_iterate"): "MNIST (logistic regression), last iterate",
    ("linear_regression", "algorithm1"): "linear regression, Algorithm 1 (averaged iterate)",
    ("linear_regression", "last_iterate"): "linear regression, last iterate (variant)",
}


def plot_participation(process: ar.Participation) -> Figure:
    """Sec. 4's process at tau = 10: per client i the prior weight exp(-i/10), P(i in S) / M and
    the induced weight p_i of eq. 2, on a log scale."""
    fig, ax1 = plt.subplots(figsize=(8, 3))
    ax1.plot(process.prior, label="prior weight exp(-i/10) (normalised)", color="0.5")
    ax1.plot(process.inclusion / M_AVAILABLE, label="P(i in S) / M", ls="--", color="C1")
    ax1.plot(process.p, label="induced p_i = E[1(i in S)/|S|]", color="C0")
    ax1.set_xlabel("client i")
    ax1.set_yscale("log")
    ax1.legend(fontsize="x-small")
    fig.tight_layout()
    return fig


def participation_summary(process: ar.Participation) -> str:
    """The skew ||p - 1/N||_1 and sum p (Lemma 1), how many clients are drawn more often than
    not, the effective number of clients 1/sum p^2 and eq. 10's mean total weight N sum p^2."""
    p = process.p
    return (
        f"skew ||p - 1/N||_1 = {agnostic.l1_skew(p):.3f}; sum p = {p.sum():.6f} (Lemma 1)\n"
        f"clients with P(i in S) > 0.5: {(process.inclusion > 0.5).sum()}; "
        f"effective number of clients 1/sum p^2 = {1 / (p**2).sum():.1f}\n"
        f"mean total weight of eq. 10 per round, N sum p_i^2 = {N_CLIENTS * (p**2).sum():.2f}"
    )


def ball_summary(optima: ar.Optima) -> str:
    """Algorithm 1's ball C, R = 2 sqrt(d (1 + h^2)), against the largest optimum's norm."""
    spec = TASKS["linear_regression"]["dataset"]
    largest = ar.largest_optimum_norm(optima)
    return (
        f"ball C: R = 2 sqrt({spec['features']} (1 + {spec['heterogeneity']}^2)) = "
        f"{BALL_RADIUS:g}; largest ||theta*|| over {len(optima)} seeds and both objectives: "
        f"{largest:.2f} ({largest / BALL_RADIUS:.0%} of R) -> "
        f"{'inside C' if largest < BALL_RADIUS else 'NOT inside C'}"
    )


def _finite(y: np.ndarray) -> np.ndarray:
    """``y`` with diverged values (not finite, or above :data:`experiments.DIVERGED_LOSS`) as NaN:
    they leave the axes."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(np.isfinite(y) & (y < DIVERGED_LOSS), y, np.nan)


def _band(a: plt.Axes, rounds: np.ndarray, y: np.ndarray, rule: str) -> None:
    """Mean over seeds (rows of ``y``) in the rule's style, band from min to max."""
    st = style(rule)
    with warnings.catch_warnings():  # rounds where every seed diverged stay NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        mean, low, high = (f(y, axis=0) for f in (np.nanmean, np.nanmin, np.nanmax))
    a.plot(
        rounds,
        mean,
        color=st.color,
        label=st.label,
        lw=1.3,
        ls={"weighted": "--", "weighted_rescaled": ":"}.get(rule, "-"),
    )
    if y.shape[0] > 1:
        a.fill_between(rounds, low, high, color=st.color, alpha=0.12, lw=0)


def plot_fig1_loss(curves: dict[tuple[str, str, str], ar.Curves]) -> Figure:
    """Fig. 1: the loss of every rule on problem (3), sum p_i f_i (top), and on the uniform
    objective (1/N) sum f_i (bottom), per panel (:data:`PANEL_TITLES`); mean over seeds, band
    from min to max, diverged values left out."""
    fig, axes = plt.subplots(2, 3, figsize=(15, 7), sharex="col")
    for col, ((task, protocol), title) in enumerate(PANEL_TITLES.items()):
        for row, which in enumerate(("problem (3): sum p_i f_i", "uniform: (1/N) sum f_i")):
            a = axes[row, col]
            for rule in AGGREGATIONS:
                c = curves[(task, protocol, rule)]
                _band(a, c.rounds, _finite(c.problem3 if row == 0 else c.uniform), rule)
            a.set_yscale("log")
            a.set_ylabel(f"loss, {which}")
            if row == 0:
                a.set_title(title, fontsize="small")
            else:
                a.set_xlabel("round")
    axes[0, 0].legend(fontsize="x-small")
    fig.suptitle(
        "Fig. 1 · M = 10 of N = 100 from exp(-i/10); mean over seeds, band: min-max",
        fontsize="medium",
    )
    fig.tight_layout()
    return fig


def plot_fig1_gap(curves: dict[tuple[str, str, str], ar.Curves], optima: ar.Optima) -> Figure:
    """The linear regression's optimality gap sum p_i f_i - min (:func:`results.optimality_gaps`)
    under Algorithm 1 (left) and with the last iterate (right); a rule whose every value
    diverged is left out."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8), sharey=True)
    for a, protocol in zip(axes, ("algorithm1", "last_iterate"), strict=True):
        for rule in AGGREGATIONS:
            c = curves[("linear_regression", protocol, rule)]
            gap = _finite(ar.optimality_gaps(c, optima))
            if np.isnan(gap).all():
                continue
            _band(a, c.rounds, gap, rule)
        a.set_yscale("log")
        a.set_xlabel("round")
        a.set_title(PANEL_TITLES[("linear_regression", protocol)], fontsize="small")
    axes[0].set_ylabel("sum p_i f_i - min (problem (3))")
    axes[0].legend(fontsize="x-small")
    fig.tight_layout()
    return fig


def gap_progress(
    curves: dict[tuple[str, str, str], ar.Curves],
    optima: ar.Optima,
    half: int,
) -> str:
    """Per linear-regression protocol and rule (eq. 10 as printed left out: it diverges) the
    mean optimality gap at the last evaluation by round ``half`` and at the end."""
    lines = []
    for (task, protocol, rule), c in curves.items():
        if task == "linear_regression" and rule != "weighted":
            gap = ar.optimality_gaps(c, optima).mean(axis=0)
            by_half = c.rounds <= half
            lines.append(
                f"{protocol:12s} {rule:20s} gap to min of (3): round {c.rounds[by_half][-1]} "
                f"{gap[by_half][-1]:.3f}, round {c.rounds[-1]} {gap[-1]:.3f}"
            )
    return "\n".join(lines)


_SIGNED = {
    "gap mean": "{:+.4f}".format,
    "95% low": "{:+.4f}".format,
    "95% high": "{:+.4f}".format,
    "relative gap": "{:+.1%}".format,
}
_PERCENT = {
    c: "{:+.2%}".format
    for c in (
        "relative gap MNIST",
        "relative gap linear regression",
        "difference",
        "95% low",
        "95% high",
    )
}


def print_claims_tables(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Print and return Fig. 1's claims tables from :func:`results.run_table`'s ``table``: claim
    1 on the converged loss (:func:`results.fig1_claims_table`), the same on the mean loss over
    the run (ours, measure ``"horizon"``) and claim 2's contrast between the tasks
    (:func:`results.fig1_contrast_table`). "-": a pair diverged in every seed."""
    lower = ar.fig1_claims_table(table)
    print(lower.to_string(sparsify=False, formatters=_SIGNED, na_rep="-"), "\n")
    speed = ar.fig1_claims_table(table, measure="horizon")
    print(speed.to_string(sparsify=False, formatters=_SIGNED, na_rep="-"), "\n")
    contrast = ar.fig1_contrast_table(table)
    print(contrast.to_string(na_rep="-", formatters=_PERCENT))
    return lower, speed, contrast


def print_rate(tuning: pd.DataFrame, table: pd.DataFrame, rate: ar.Rate) -> None:
    """Print Theorem 4's check: the tuning runs per step constant
    (:func:`results.tuning_summary`), the rate grid's gap per horizon
    (:func:`results.rate_summary`), then the slope against the bound and the verdict, by the
    criterion (:func:`results.rate_verdict`) and under the theorem's conditions (the ledger's
    ``agnostic.thm4.rate``)."""
    print_table(ar.tuning_summary(tuning), "{:.4f}")
    print()
    print_table(ar.rate_summary(table), "{:.4g}")
    print(
        f"\nTheorem 4 rate: {ar.rate_text(rate)}; by the criterion {rate.criterion}; "
        f"under the theorem's conditions: {rate.verdict}"
    )


def plot_rate(table: pd.DataFrame, rate: ar.Rate) -> Figure:
    """Theorem 4 on log-log axes: the averaged iterate's gap to the minimum of problem (3) at
    each horizon T (one line per seed, the mean over seeds as dots) against T^(-1/2) drawn
    through the mean at the smallest T; the legend gives the mean fitted slope."""
    fig, a = plt.subplots(figsize=(6, 3.8))
    for _, run in table.groupby("seed"):
        a.plot(run["T"], run["gap"], color=style("agnostic").color, lw=0.7, alpha=0.4)
    mean = table.groupby("T")["gap"].mean()
    a.plot(
        mean.index,
        mean.to_numpy(),
        "o",
        color=style("agnostic").color,
        label=f"agnostic FedAvg, mean over seeds (slope {rate.slopes.mean():+.2f})",
    )
    t = mean.index.to_numpy(dtype=float)
    a.plot(t, mean.iloc[0] * (t / t[0]) ** ar.THEOREM4_RATE, "k--", lw=1, label="T^(-1/2)")
    a.set_xscale("log")
    a.set_yscale("log")
    a.set_xlabel("horizon T (rounds), eta = c / sqrt(TH)")
    a.set_ylabel("sum p_i f_i - min (problem (3))")
    a.legend(fontsize="x-small")
    a.set_title("Theorem 4: averaged iterate at T, linear regression", fontsize="small")
    fig.tight_layout()
    return fig


def print_temperatures(ps: dict[float, list[np.ndarray]], lemma1: tuple[float, str]) -> None:
    """Print :func:`results.temperature_table` of the induced p over the temperature grid, then
    Lemma 1's check (:func:`results.lemma1_check`: the largest error in standard errors, the
    verdict)."""
    print_table(ar.temperature_table(ps), "{:.3f}")
    worst, verdict = lemma1
    print(
        f"\nLemma 1 on {ar.EXACT_CASE}: largest |estimate - exact p| = {worst:.2f} standard "
        f"errors (tolerance {ar.EXACT_Z:g}): {verdict}"
    )


def plot_fig2(points: pd.DataFrame) -> Figure:
    """Fig. 2: the converged gap weighted - agnostic on problem (3) against the skew
    ||p - 1/N||_1, one dot per seed and temperature (coloured by log10 tau), a panel per task
    (rows) and weighted rule (columns), each with its own y scale."""
    fig, axes = plt.subplots(2, 3, figsize=(14, 7), layout="constrained")
    for row, task in enumerate(TASKS):
        for col, rule in enumerate(FIG2_RULES):
            a = axes[row, col]
            pts = points[(points.task == task) & (points.rule == rule)]
            tau = np.log10(np.minimum(pts["tau"], 1e3))
            sc = a.scatter(
                pts["skew"],
                pts["gap_p"],
                c=tau,
                vmin=0.5,
                vmax=3,
                cmap="viridis",
                s=26,
                edgecolor="k",
                lw=0.3,
            )
            a.axhline(0, color="0.3", lw=0.8)
            a.set_title(f"{TASK_TITLES[task]}\n{style(rule).label}", fontsize="small")
            if row == 1:
                a.set_xlabel("participation skew ||p - 1/N||_1")
            if col == 0:
                a.set_ylabel("converged loss (problem (3)):\nweighted - agnostic")
    cb = fig.colorbar(sc, ax=axes, shrink=0.8)
    cb.set_label("log10 tau (inf shown at 3)")
    fig.suptitle(
        "Fig. 2 · one dot per seed and temperature; each panel its own y scale", fontsize="medium"
    )
    return fig


def print_fig2_tables(points: pd.DataFrame) -> pd.DataFrame:
    """Print Fig. 2's claim per (task, rule), :func:`results.trend_table` (Spearman's rho and
    the slope with their bootstrap intervals over seeds, the share of points where the
    weighted rule ends higher, the criterion's verdict and the verdict under the task's
    conditions; nothing without 2 temperatures and 2 seeds), then
    :func:`results.fig2_summary`. Returns the trend table."""
    trends = ar.trend_table(points)
    if len(trends):
        rows = list(trends.itertuples())
        formatted = pd.DataFrame(
            {
                "rho": [f"{t.rho:+.2f} [{t.rho_low:+.2f}, {t.rho_high:+.2f}]" for t in rows],
                "slope": [
                    f"{t.slope:+.3g} [{t.slope_low:+.3g}, {t.slope_high:+.3g}]" for t in rows
                ],
                "weighted worse": [f"{t.weighted_worse:.0%}" for t in rows],
                "diverged": trends["diverged"],
                "criterion verdict": trends["criterion verdict"],
                "verdict": trends["verdict"],
            },
            index=trends.index,
        )
        print(formatted.to_string(), "\n")
    print_table(ar.fig2_summary(points), "{:.4f}")
    return trends


def print_aoi_policy_ps(ps: dict[tuple[str, int, str], np.ndarray], cycle: np.ndarray) -> None:
    """Print :func:`results.aoi_policy_p_table` (the AoI policies' skew and N sum p^2), then the
    skew of the m = 10 cycle (:func:`results.markov_cycle_p`)."""
    print_table(ar.aoi_policy_p_table(ps), "{:.3f}")
    print(
        "\nmarkov_optimal with m = 10 (n/m = 10, a deterministic cycle): "
        f"skew {agnostic.l1_skew(cycle):.3f}"
    )


def plot_aoi_policy_ps(ps: dict[tuple[str, int, str], np.ndarray]) -> Figure:
    """The induced p of each AoI policy (:func:`results.aoi_policy_ps`, seed 0), clients sorted
    by decreasing p_i, per task, against uniform participation 1/N."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4), sharey=True)
    for a, task in zip(axes, TASKS, strict=True):
        for policy in POLICIES:
            p = np.sort(ps[(task, 0, policy)])[::-1]
            a.plot(p, **{k: v for k, v in style(policy).kwargs().items() if k != "marker"})
        a.axhline(1 / N_CLIENTS, color="0.3", lw=0.8, ls=":")
        a.set_xlabel("clients, by decreasing p_i")
        a.set_title(f"{TASK_TITLES[task]} sizes (seed 0)")
    axes[0].set_ylabel("induced weight p_i (eq. 2)")
    axes[0].set_yscale("log")
    axes[0].legend(fontsize="x-small")
    fig.tight_layout()
    return fig
