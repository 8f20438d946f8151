"""Plots of the FedSUM experiments: metric curves over seeds, and the label histogram (Fig. 4)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from aoi_fl.fedsum.results import curve
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

    ``groups[name]`` holds a group's :class:`~aoi_fl.fedsum.experiments.RunSummary` objects;
    ``name`` picks the style (:data:`aoi_fl.pipeline.plotting.STYLES`) unless ``colors`` gives its
    colour (then ``labels`` its legend entry).
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
