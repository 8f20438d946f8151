"""One look for every figure of the project.

Each policy (and, later, each algorithm) keeps the same colour, marker and display name in every
figure: look them up with :func:`style`. :func:`save_figure` writes PDF and PNG without timestamps,
so that re-running ``make figures`` on unchanged code leaves the files byte-identical, and stamps
each figure with the profile that produced it.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch

from aoi_fl.core import registry
from aoi_fl.core.registry import PALETTE, Style
from aoi_fl.core.validation import require_choice
from aoi_fl.pipeline import plugins
from aoi_fl.pipeline.profiles import PROFILES, traits

PAPER_STYLE = {"color": "0.35", "linestyle": ":", "linewidth": 1.2}
"""Reference lines that show a value printed in a paper (always labelled "paper")."""


def style(name: str) -> Style:
    """The fixed style of a policy, algorithm, rule or pattern (:mod:`aoi_fl.core.registry`).

    Styles come with the samplers' and algorithms' entry points and the evidence packages; a
    name not registered yet loads them first (:func:`plugins.load`), so that a notebook which has
    imported only a paper's method or tables still finds its styles.
    """
    if name not in registry.STYLES:
        plugins.load()
    return registry.style(name)


def apply_style() -> None:
    """The project's matplotlib defaults (call once at the top of a notebook)."""
    sns.set_theme(context="notebook", style="whitegrid", palette=PALETTE)
    mpl.rcParams.update(
        {
            "figure.dpi": 100,
            "savefig.dpi": 150,
            "figure.figsize": (6.4, 4.0),
            "axes.titlesize": "medium",
            "legend.fontsize": "small",
            "svg.hashsalt": "aoi-fl",
            "pdf.compression": 6,
        }
    )


def save_figure(
    fig: Figure, name: str, profile: str, directory: str | Path = "figures"
) -> list[Path]:
    """Write ``fig`` as ``<directory>/<name>.pdf`` and ``.png``, stamped with ``profile``.

    In the ``smoke`` profile nothing is written (smoke runs are for tests only) and an empty list
    is returned. The files carry no creation date, so identical figures give identical bytes.
    """
    profile = require_choice("profile", profile, PROFILES)
    fig.text(
        0.995,
        0.005,
        f"aoi-fl · profile: {profile}",
        ha="right",
        va="bottom",
        fontsize=6,
        color="0.5",
    )
    if not traits(profile).keeps_outputs:
        return []
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"{name}.pdf", directory / f"{name}.png"]
    fig.savefig(paths[0], bbox_inches="tight", metadata={"CreationDate": None, "ModDate": None})
    fig.savefig(paths[1], bbox_inches="tight", metadata={"Software": None})
    return paths


def plot_band(
    ax: plt.Axes, x: np.ndarray, values: np.ndarray, color: str, label: str, **line: object
) -> plt.Axes:
    """The mean over seeds of ``values`` (seeds, len(x)) against ``x``, band from min to max."""
    values = np.atleast_2d(values)
    ax.plot(x, values.mean(axis=0), color=color, label=label, lw=1.4, **line)
    if values.shape[0] > 1:
        ax.fill_between(x, values.min(axis=0), values.max(axis=0), color=color, alpha=0.15, lw=0)
    return ax


def plot_accuracy(
    ax: plt.Axes,
    curves: dict[str, tuple[np.ndarray, np.ndarray]],
    target: float | None = None,
) -> plt.Axes:
    """Test accuracy against rounds, one line per policy: mean over seeds, band from min to max.

    ``curves[policy] = (rounds, accuracy of shape (seeds, len(rounds)))``.
    """
    for name, (rounds, acc) in curves.items():
        st = style(name)
        plot_band(ax, rounds, acc, st.color, st.label)
    if target is not None:
        ax.axhline(target, color="0.3", lw=0.8, ls="--")
        ax.text(
            ax.get_xlim()[1],
            target,
            f"target {target:.0%} ",
            ha="right",
            va="bottom",
            fontsize=7,
            color="0.3",
        )
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy")
    return ax


def plot_selections(
    ax: plt.Axes,
    traces: dict[str, list[list[int]]],
    n: int,
    color: str,
) -> plt.Axes:
    """Which clients (y) each round (x) selected, one marker per trace, drawn over each other:
    where the traces agree every ring holds a cross. ``traces[label]`` is a run's per-round list
    of selected client indices (the ``selected`` record); at most two traces (a ring, a cross)."""
    if not 1 <= len(traces) <= 2:
        raise ValueError(f"traces must hold one or two runs, got {len(traces)}")
    marks = ({"marker": "o", "facecolors": "none", "s": 36}, {"marker": "x", "s": 16})
    for (label, selected), mark in zip(traces.items(), marks, strict=False):
        rounds = [t + 1 for t, ids in enumerate(selected) for _ in ids]
        clients = [i for ids in selected for i in ids]
        ax.scatter(rounds, clients, color=color, label=label, lw=1, **mark)
    ax.set_ylim(-0.5, n - 0.5)
    ax.set_xlabel("round")
    ax.set_ylabel("client")
    return ax


def draw_chain(p: np.ndarray, ax: plt.Axes | None = None, *, precision: int = 2) -> plt.Axes:
    """Fig. 1: the age chain with states 0..m', edges labelled with p_a and 1 - p_a.

    Edges of probability zero are drawn faint, so the optimal chain's structure (deterministic
    ageing, then selection) is visible at a glance.
    """
    p = np.asarray(p, dtype=float)
    k = p.size
    if ax is None:
        _, ax = plt.subplots(figsize=(max(6.0, 1.15 * k), 3.2))
    xs = np.arange(k) * 1.4
    radius = 0.32

    def fmt(v: float) -> str:
        return f"{v:.{precision}f}".rstrip("0").rstrip(".") if v not in (0.0, 1.0) else f"{v:g}"

    def edge_alpha(v: float) -> float:
        return 1.0 if v > 0 else 0.18

    def arrow(start, end, v: float, color: str = "0.2", scale: int = 9, **curve) -> None:
        ax.add_patch(
            FancyArrowPatch(
                start,
                end,
                arrowstyle="-|>",
                mutation_scale=scale,
                lw=1.0,
                color=color,
                alpha=edge_alpha(v),
                **curve,
            )  # fmt: skip
        )

    for a, x in enumerate(xs):
        ax.add_patch(
            Circle((x, 0.0), radius, facecolor="white", edgecolor="0.15", lw=1.2, zorder=3)
        )
        ax.text(x, 0.0, str(a), ha="center", va="center", fontsize=11, zorder=4)
    for a in range(k - 1):
        stay = 1.0 - p[a]
        arrow((xs[a] + radius, 0.0), (xs[a + 1] - radius, 0.0), stay, scale=10)
        ax.text(
            (xs[a] + xs[a + 1]) / 2,
            0.08,
            fmt(stay),
            ha="center",
            va="bottom",
            fontsize=7,
            alpha=edge_alpha(stay),
        )
    # self-loop of the last state: not selected at the maximum age
    stay = 1.0 - p[-1]
    end = (xs[-1] + radius - 0.02, 0.12)
    arrow((xs[-1] + 0.2, radius - 0.05), end, stay, connectionstyle="arc3,rad=-2.2")
    ax.text(xs[-1] + 0.75, 0.55, fmt(stay), fontsize=7, alpha=edge_alpha(stay))
    # selection edges back to state 0, as arcs below the row of states (depth grows with a)
    for a in range(k):
        color = {"color": PALETTE[2], "alpha": edge_alpha(p[a])}
        y = -radius + 0.02
        if a == 0:
            start, end, rad = (xs[0] + 0.12, y), (xs[0] - 0.12, y), -1.6
        else:
            start, end = (xs[a] - 0.1, y), (xs[0] + 0.1, y)
            rad = -2 * (0.2 + 0.06 * a) / (xs[a] - xs[0])  # arc depth is |rad| * length / 2
        arrow(start, end, p[a], PALETTE[2], connectionstyle=f"arc3,rad={rad}")
        ax.text(xs[a] + 0.22, -radius - 0.05, fmt(p[a]), ha="left", va="top", fontsize=7, **color)
    ax.set_xlim(xs[0] - 0.9, xs[-1] + 1.2)
    ax.set_ylim(-0.75 - 0.1 * k, 0.9)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax
