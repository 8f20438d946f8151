"""Plots of the FedSUM experiments: metric curves over seeds, the label histogram (Fig. 4), and
the figures of the FedSUM notebooks (the participation delays against App. F; Figs 1, 4, 9-11 and
14; the long-horizon panel), each drawn as the notebook shows and saves it (:func:`show`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from aoi_fl.evidence.fedsum import traces
from aoi_fl.evidence.fedsum.experiments import (
    CASES,
    FAMILY,
    LONG_ALGORITHMS,
    LONG_MODELS,
    MAIN_ALGORITHMS,
    MAIN_PATTERNS,
    profile_settings,
)
from aoi_fl.evidence.fedsum.results import curve, group, p_grid_groups
from aoi_fl.pipeline.plotting import plot_band, style

AXIS_LABELS = {
    "train_loss": "training loss",
    "objective": "objective f = mean of client losses",
    "test_loss": "test loss",
    "test_accuracy": "test accuracy",
}


def plot_curves(
    ax: plt.Axes,
    groups: Mapping[str, Sequence[Any]],
    metric: str,
    *,
    x: str = "rounds",
    labels: Mapping[str, str] | None = None,
    colors: Mapping[str, Any] | None = None,
) -> plt.Axes:
    """One line per group (mean over seeds, band from min to max; a marker per evaluation) of
    ``metric`` against rounds or cumulative communication (``x="units"``, model-size vectors).

    ``groups[name]`` holds a group's :class:`~aoi_fl.evidence.fedsum.experiments.RunSummary`
    objects; ``name`` picks the style (:data:`aoi_fl.pipeline.plotting.STYLES`) unless ``colors``
    gives its colour (then ``labels`` its legend entry).
    """
    if x not in ("rounds", "units"):
        raise ValueError(f"x must be 'rounds' or 'units', got {x!r}")
    for name, runs in groups.items():
        rounds, values = curve(runs, metric)
        xs = rounds if x == "rounds" else np.mean([r.units() for r in runs], axis=0)
        if colors is not None and name in colors:
            color, label, marker = colors[name], name, "o"
        else:
            st = style(name)
            color, label, marker = st.color, st.label, st.marker
        label = (labels or {}).get(name, label)
        plot_band(ax, xs, values, color, label, marker=marker, ms=3.5)
    ax.set_xlabel("round" if x == "rounds" else "communication (model-size vectors)")
    ax.set_ylabel(AXIS_LABELS[metric])
    return ax


def plot_label_histogram(ax: plt.Axes, histogram: np.ndarray) -> plt.Axes:
    """Fig. 4: samples per client (bars), stacked by label; ``histogram`` is (clients, labels)."""
    histogram = np.asarray(histogram)
    clients = np.arange(histogram.shape[0])
    bottom = np.zeros(histogram.shape[0])
    colors = plt.get_cmap("tab10")
    for label in range(histogram.shape[1]):
        ax.bar(
            clients,
            histogram[:, label],
            bottom=bottom,
            width=1.0,
            color=colors(label % 10),
            label=str(label),
            lw=0,
        )
        bottom += histogram[:, label]
    ax.set_xlim(-0.5, histogram.shape[0] - 0.5)
    ax.set_xlabel("client")
    ax.set_ylabel("samples")
    return ax


def participation_delays(table: pd.DataFrame, profile: str) -> plt.Figure:
    """The delay notebook: tau_max (mean over seeds, min-max as error bars) and tau_avg of every
    pattern of ``table`` (:func:`aoi_fl.evidence.fedsum.traces.pattern_table` of ``profile``) as
    bars, and the bound on E[tau_max] as a tick, on a symmetric log scale of rounds."""
    n, s, t, _ = traces.sizes(profile)
    fig, ax = plt.subplots(figsize=(10, 4.6))
    y = np.arange(len(table))
    ax.barh(
        y - 0.2,
        table["tau_max"],
        height=0.4,
        color=style("P1").color,
        xerr=[table["tau_max"] - table["tau_max min"], table["tau_max max"] - table["tau_max"]],
        label="tau_max (mean, min-max over seeds)",
    )
    ax.barh(y + 0.2, table["tau_avg"], height=0.4, color=style("P2").color, label="tau_avg")
    ax.scatter(
        table["bound on E[tau_max]"],
        y - 0.2,
        marker="|",
        s=200,
        color="black",
        zorder=3,
        label="bound on E[tau_max] (App. F; ours where the table's source says so)",
    )
    ax.set_yticks(y, table.index)
    ax.invert_yaxis()
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlabel(f"rounds (N = {n}, S = {s}, T = {t})")
    ax.legend(fontsize="x-small", loc="lower right")
    ax.set_title("Participation delays (eqs 2-4) of every pattern and their App. F bounds")
    fig.tight_layout()
    return fig


def fig4(histogram: np.ndarray) -> plt.Figure:
    """Fig. 4: the MNIST samples of each client stacked by label (:func:`plot_label_histogram`)
    under the Dirichlet(0.1) label priors."""
    fig, ax = plt.subplots(figsize=(11, 3.2))
    plot_label_histogram(ax, histogram)
    ax.legend(
        title="label", ncol=10, fontsize="x-small", loc="upper center", bbox_to_anchor=(0.5, -0.22)
    )
    ax.set_title("Fig. 4 · samples per client by label, MNIST, Dirichlet(0.1) label priors")
    fig.tight_layout()
    return fig


def pattern_grid(
    groups: Mapping[tuple[str, str], Sequence[Any]],
    algorithms: Sequence[str],
    title: str,
    *,
    x: str = "rounds",
    model: str = "MNIST",
    figsize: tuple[float, float] = (15, 8),
    sharex: bool | str = "col",
    legend_columns: int = 2,
    title_y: float | None = 1.01,
) -> plt.Figure:
    """Training loss (top, log scale) and test accuracy (bottom) of ``algorithms`` under P1,
    P2 and P3 (columns), against rounds or communication (``x``, :func:`plot_curves`), from
    ``groups`` (:func:`~aoi_fl.evidence.fedsum.results.group`). ``title`` goes above the grid at
    height ``title_y`` after the layout, or with ``title_y=None`` inside the layout."""
    fig, axes = plt.subplots(2, 3, figsize=figsize, sharex=sharex)
    for col, pattern in enumerate(MAIN_PATTERNS):
        runs_by_alg = {a: groups[(pattern, a)] for a in algorithms}
        for row, metric in enumerate(("train_loss", "test_accuracy")):
            plot_curves(axes[row, col], runs_by_alg, metric, x=x)
        axes[0, col].set_title(f"{model} · {style(pattern).label}")
        axes[0, col].set_yscale("log")
    axes[1, 0].legend(fontsize="x-small", ncol=legend_columns, loc="lower right")
    if title_y is None:
        fig.suptitle(title, fontsize="medium")
        fig.tight_layout()
    else:
        fig.tight_layout()
        fig.suptitle(title, y=title_y, fontsize="medium")
    return fig


#: the x-axis of Fig. 1's panels: (a) against rounds, (b) against cumulative communication
FIG1_TITLES = {
    "rounds": "Fig. 1(a) / Figs 5-7 (MNIST) · against rounds",
    "units": "Fig. 1(b) (MNIST) · against communication",
}


def fig1(summaries: Sequence[Any], x: str) -> plt.Figure:
    """Fig. 1(a) (``x="rounds"``; its columns are Figs 5-7) or Fig. 1(b) (``x="units"``): the
    eight methods of Fig. 1 under P1-P3 on MNIST (the ``main`` panel's ``summaries``;
    :func:`pattern_grid`)."""
    return pattern_grid(group(summaries), MAIN_ALGORITHMS, FIG1_TITLES[x], x=x)


def fig11(summaries: Sequence[Any]) -> plt.Figure:
    """Fig. 11: FedSUM-B, FedSUM and FedSUM-CR under P1-P3 with a constant eta_l = 0.1 (the
    ``family`` panel's ``summaries``)."""
    return pattern_grid(
        group(summaries),
        FAMILY,
        "Fig. 11 · the FedSUM family, constant eta_l = 0.1",
        figsize=(15, 7.5),
        sharex=True,
        legend_columns=1,
        title_y=None,
    )


#: how the long-horizon panel's titles name its model
#: (:data:`~aoi_fl.evidence.fedsum.experiments.LONG_MODELS`)
MODEL_NAMES = {"logistic_regression": "logistic regression", "small_cnn": "CNN"}


def long_panel(summaries: Sequence[Any], x: str, profile: str) -> plt.Figure:
    """The long-horizon notebook: the nine methods of the long-horizon panel (its ``long`` runs,
    ``summaries``) under P1-P3 against rounds or communication (``x``), titled with the
    profile's model and horizon (:func:`pattern_grid`)."""
    against = {"rounds": "rounds", "units": "communication"}[x]
    rounds = profile_settings(profile)["long"]["rounds"]
    return pattern_grid(
        group(summaries),
        LONG_ALGORITHMS,
        f"FedSUM long-horizon panel ({rounds} rounds) · against {against}",
        x=x,
        model=f"MNIST, {MODEL_NAMES[LONG_MODELS[profile]['name']]}",
    )


def curve_pair(
    groups: Mapping[str, Sequence[Any]], title: str, colors: Mapping[str, Any] | None = None
) -> plt.Figure:
    """Training loss (log scale) and test accuracy side by side, one line per group
    (:func:`plot_curves`)."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for ax, metric in zip(axes, ("train_loss", "test_accuracy"), strict=True):
        plot_curves(ax, groups, metric, colors=colors)
    axes[0].set_yscale("log")
    axes[1].legend(fontsize="x-small", loc="lower right")
    fig.suptitle(title, fontsize="medium")
    fig.tight_layout()
    return fig


def fig9_fig14a(summaries: Sequence[Any]) -> plt.Figure:
    """Figs 9 and 14(a): FedSUM under Cases 1-4 and biased sampling (the ``cases`` panel)."""
    groups = group(summaries)
    return curve_pair(
        {p: groups[(p, "fedsum")] for p in CASES},
        "Fig. 9 (Cases 1-4) and Fig. 14(a) (with biased sampling) · FedSUM, MNIST",
    )


def fig14b(summaries: Sequence[Any]) -> plt.Figure:
    """Fig. 14(b): FedSUM against FedAvg under biased sampling (the ``cases`` panel)."""
    groups = group(summaries)
    return curve_pair(
        {a: groups[("biased", a)] for a in ("fedsum", "fedavg")},
        "Fig. 14(b) · FedSUM vs FedAvg under biased sampling, MNIST",
    )


def p_colors(ps: Sequence[str]) -> dict[str, Any]:
    """Fig. 10's colour of each p of the grid (``"p=..."``, by increasing p): viridis."""
    cmap = plt.get_cmap("viridis")
    return {p: cmap(i / max(1, len(ps) - 1)) for i, p in enumerate(ps)}


def fig10(summaries: Sequence[Any]) -> plt.Figure:
    """Fig. 10: FedSUM under Bernoulli participation with each p of the grid, constant
    eta_l = 0.01 (the ``p_grid`` panel), coloured by p."""
    by_p = p_grid_groups(summaries)
    return curve_pair(
        by_p,
        "Fig. 10 · FedSUM, Bernoulli participation, constant eta_l = 0.01, MNIST",
        colors=p_colors(list(by_p)),
    )


def fig10_tau(table: pd.DataFrame) -> plt.Figure:
    """Fig. 10's final training loss and test accuracy against each run's tau_avg (circles)
    and tau_max (squares), coloured by p as in :func:`fig10`; ``table`` is
    :func:`~aoi_fl.evidence.fedsum.results.p_grid_table`."""
    colors = p_colors(list(table.index))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, metric in zip(axes, ("train_loss", "test_accuracy"), strict=True):
        for tau, marker in (("tau_avg", "o"), ("tau_max", "s")):
            ax.scatter(table[tau], table[metric], marker=marker, label=tau, c=list(colors.values()))
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlabel("delay of the run's trace (rounds)")
        ax.set_ylabel(f"final {AXIS_LABELS[metric]}")
    axes[0].legend(fontsize="x-small")
    fig.suptitle("Fig. 10 · final metrics against tau (colour: p, as above)", fontsize="medium")
    fig.tight_layout()
    return fig
