"""The FedSUM plots draw what they are given: mean over seeds with a min-max band, against rounds
or communication, and the per-client label histogram stacked label by label."""

import matplotlib

matplotlib.use("agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from aoi_fl.data.partition import label_histogram  # noqa: E402
from aoi_fl.evidence.fedsum import figures  # noqa: E402
from aoi_fl.evidence.fedsum.experiments import (  # noqa: E402
    CASES,
    FAMILY,
    LONG_ALGORITHMS,
    MAIN_ALGORITHMS,
    MAIN_PATTERNS,
    Planned,
    RunSummary,
)
from aoi_fl.evidence.fedsum.figures import AXIS_LABELS as AXIS  # noqa: E402
from aoi_fl.evidence.fedsum.results import group  # noqa: E402
from aoi_fl.pipeline.plotting import style  # noqa: E402


def summary(seed, eval_round, accuracy, active, communication=(1, 1)):
    """A run summary with only what the plots read filled in by hand."""
    n = len(eval_round)
    return RunSummary(
        planned=seed,
        eval_round=np.asarray(eval_round),
        train_loss=np.zeros(n),
        objective=np.zeros(n),
        test_loss=np.zeros(n),
        test_accuracy=np.asarray(accuracy, dtype=float),
        active=np.asarray(active),
        tau_max=0,
        tau_avg=0.0,
        communication=communication,
    )


def band_bounds(collection, xs):
    """(lowest y, highest y) of a fill_between polygon's vertices at each x of ``xs``."""
    vertices = np.concatenate([path.vertices for path in collection.get_paths()])
    at = [vertices[np.isclose(vertices[:, 0], x), 1] for x in xs]
    return np.array([(ys.min(), ys.max()) for ys in at])


GROUPS = {
    "P1": [
        summary(0, [0, 2, 4], [0.1, 0.4, 0.6], [2, 3, 1, 4]),
        summary(1, [0, 2, 4], [0.3, 0.2, 0.8], [1, 1, 1, 1]),
    ],
    "P2": [
        summary(0, [0, 2, 4], [0.5, 0.5, 0.5], [5, 5, 5, 5]),
        summary(1, [0, 2, 4], [0.1, 0.9, 0.2], [0, 0, 0, 0]),
        summary(2, [0, 2, 4], [0.3, 0.4, 0.5], [1, 2, 3, 4]),
    ],
}


def test_curves_against_rounds_are_the_seed_mean_with_a_min_max_band():
    fig, ax = plt.subplots()
    assert figures.plot_curves(ax, GROUPS, "test_accuracy") is ax
    p1, p2 = ax.lines
    for line in (p1, p2):
        np.testing.assert_array_equal(line.get_xdata(), [0, 2, 4])
    # mean over seeds, by hand (bug: mean over evaluations, or one seed drawn)
    np.testing.assert_allclose(p1.get_ydata(), [0.2, 0.3, 0.7])
    np.testing.assert_allclose(p2.get_ydata(), [0.3, 0.6, 0.4])
    np.testing.assert_allclose(
        band_bounds(ax.collections[0], [0, 2, 4]), [(0.1, 0.3), (0.2, 0.4), (0.6, 0.8)]
    )
    np.testing.assert_allclose(
        band_bounds(ax.collections[1], [0, 2, 4]), [(0.1, 0.5), (0.4, 0.9), (0.2, 0.5)]
    )
    # each pattern in its registered style (bug: styles assigned by position)
    for line, name in zip(ax.lines, GROUPS, strict=True):
        st = style(name)
        assert (line.get_label(), line.get_marker()) == (st.label, st.marker)
        assert to_rgba(line.get_color()) == to_rgba(st.color)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("round", "test accuracy")
    plt.close(fig)


def test_curves_against_communication_use_the_mean_cumulative_units():
    fig, ax = plt.subplots()
    figures.plot_curves(ax, {"P1": GROUPS["P1"]}, "test_accuracy", x="units")
    # run 0: active 2, 3, 1, 4 -> cumulative 0, 2, 5, 6, 10 clients, 2 vectors each (down + up),
    # read at rounds 0, 2, 4: 0, 10, 20; run 1: 0, 4, 8; mean 0, 7, 14
    (line,) = ax.lines
    np.testing.assert_allclose(line.get_xdata(), [0.0, 7.0, 14.0])
    np.testing.assert_allclose(line.get_ydata(), [0.2, 0.3, 0.7])
    assert ax.get_xlabel() == "communication (model-size vectors)"
    plt.close(fig)


def test_custom_colours_and_labels():
    fig, ax = plt.subplots()
    groups = {"mine": GROUPS["P2"], "P1": GROUPS["P1"]}
    figures.plot_curves(
        ax, groups, "objective", colors={"mine": "#aa0011"}, labels={"P1": "renamed"}
    )
    mine, p1 = ax.lines
    # an unregistered name with a colour: its own name, a plain marker (bug: style lookup first)
    assert (mine.get_label(), mine.get_marker()) == ("mine", "o")
    assert to_rgba(mine.get_color()) == to_rgba("#aa0011")
    # a label overrides the legend entry only, the colour stays the registered one
    assert p1.get_label() == "renamed"
    assert to_rgba(p1.get_color()) == to_rgba(style("P1").color)
    assert ax.get_ylabel() == figures.AXIS_LABELS["objective"]
    plt.close(fig)


def test_curves_refuse_bad_arguments():
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="x must be 'rounds' or 'units', got 'time'"):
        figures.plot_curves(ax, GROUPS, "test_accuracy", x="time")
    ragged = {"P1": [GROUPS["P1"][0], summary(1, [0, 1, 4], [0.1, 0.2, 0.3], [1, 1, 1, 1])]}
    # bug: runs evaluated at different rounds averaged point by point
    with pytest.raises(ValueError, match="evaluated at the same rounds"):
        figures.plot_curves(ax, ragged, "test_accuracy")
    plt.close(fig)


def test_label_histogram_bars_stack_the_hand_counted_labels():
    labels = np.array([0, 2, 2, 1, 0, 2, 1, 1, 1, 0])
    clients = [
        np.array([0, 1, 2]),
        np.array([3, 6, 7, 8]),
        np.array([], dtype=int),
        np.array([4, 5, 9]),
    ]
    # by hand: client 0 holds labels 0, 2, 2; client 1: 1, 1, 1, 1; client 2: none;
    # client 3: 0, 2, 0
    counts = np.array([[1, 0, 2], [0, 4, 0], [0, 0, 0], [2, 0, 1]])
    histogram = label_histogram(labels, clients, 3)
    np.testing.assert_array_equal(histogram, counts)
    fig, ax = plt.subplots()
    assert figures.plot_label_histogram(ax, histogram) is ax
    assert len(ax.containers) == 3  # one stack layer per label
    bottom = np.zeros(4)
    for label, bars in enumerate(ax.containers):
        assert bars.get_label() == str(label)
        # bug: layers not stacked (all from 0) or stacked on the wrong label's counts
        np.testing.assert_array_equal([b.get_height() for b in bars], counts[:, label])
        np.testing.assert_array_equal([b.get_y() for b in bars], bottom)
        np.testing.assert_array_equal([b.get_x() + b.get_width() / 2 for b in bars], range(4))
        assert {to_rgba(b.get_facecolor()) for b in bars} == {plt.get_cmap("tab10")(label)}
        bottom += counts[:, label]
    # the top of each stack is the client's number of samples
    np.testing.assert_array_equal(bottom, [3, 4, 0, 3])
    assert ax.get_xlim() == (-0.5, 3.5)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("client", "samples")
    plt.close(fig)


# ---------------------------------------------------------------------------------------------
# the figures of notebooks 14-17


def run(pattern, algorithm, seed=0, accuracy=(0.1, 0.5, 0.7), figure="main"):
    """A run of ``figure`` evaluated at rounds 0, 2, 4, ... with 4 clients a round."""
    n = len(accuracy)
    loss = 2.0 - np.asarray(accuracy, dtype=float)
    planned = Planned(figure, "mnist", pattern, algorithm, seed, {})
    return RunSummary(
        planned=planned,
        eval_round=np.arange(n) * 2,
        train_loss=loss,
        objective=loss,
        test_loss=loss,
        test_accuracy=np.asarray(accuracy, dtype=float),
        active=np.full(2 * (n - 1), 4),
        tau_max=5,
        tau_avg=2.5,
        communication=(1, 1),
    )


def panel(algorithms, patterns=MAIN_PATTERNS):
    return [run(p, a, seed) for seed in (0, 1) for p in patterns for a in algorithms]


def test_pattern_grid_puts_patterns_in_columns_and_metrics_in_rows():
    groups = group(panel(["fedsum", "fedavg"]))
    fig = figures.pattern_grid(groups, ["fedsum", "fedavg"], "a title", model="toy")
    axes = np.array(fig.axes).reshape(2, 3)
    for col, pattern in enumerate(MAIN_PATTERNS):
        assert axes[0, col].get_title() == f"toy · {style(pattern).label}"
        assert (axes[0, col].get_yscale(), axes[1, col].get_yscale()) == ("log", "linear")
        assert axes[0, col].get_ylabel() == "training loss"
        assert axes[1, col].get_ylabel() == "test accuracy"
        # one line per algorithm, in the order given (bug: patterns and algorithms swapped)
        labels = [line.get_label() for line in axes[1, col].lines]
        assert labels == [style("fedsum").label, style("fedavg").label]
    # mean over the two seeds of the P2 column's accuracy
    np.testing.assert_allclose(axes[1, 1].lines[0].get_ydata(), [0.1, 0.5, 0.7])
    assert axes[1, 0].get_legend()._ncols == 2
    # columns share x, rows do not (sharex="col")
    shared = axes[0, 0].get_shared_x_axes()
    assert shared.joined(axes[0, 0], axes[1, 0]) and not shared.joined(axes[0, 0], axes[0, 1])
    # the title above the laid-out grid
    assert fig._suptitle.get_text() == "a title" and fig._suptitle.get_position()[1] == 1.01
    inside = figures.pattern_grid(
        groups, ["fedsum"], "a title", sharex=True, legend_columns=1, title_y=None
    )
    inner = np.array(inside.axes).reshape(2, 3)
    assert inner[0, 0].get_shared_x_axes().joined(inner[0, 0], inner[0, 1])
    assert inner[1, 0].get_legend()._ncols == 1
    # laid out with the title: the top row ends lower, leaving it room
    assert inner[0, 0].get_position().y1 < axes[0, 0].get_position().y1
    plt.close("all")


def test_the_grids_of_figs_1_and_11_and_of_the_long_panel():
    fig = figures.fig1(panel(MAIN_ALGORITHMS), "units")
    assert fig._suptitle.get_text() == "Fig. 1(b) (MNIST) · against communication"
    assert fig.axes[3].get_xlabel() == "communication (model-size vectors)"
    assert len(fig.axes[3].lines) == len(MAIN_ALGORITHMS)
    fig = figures.fig11(panel(FAMILY))
    assert fig._suptitle.get_text() == "Fig. 11 · the FedSUM family, constant eta_l = 0.1"
    assert tuple(fig.get_size_inches()) == (15, 7.5) and fig.axes[3].get_xlabel() == "round"
    long = panel(LONG_ALGORITHMS)
    fig = figures.long_panel(long, "rounds", "cpu")
    assert fig._suptitle.get_text() == "FedSUM long-horizon panel (2000 rounds) · against rounds"
    assert fig.axes[0].get_title() == f"MNIST, logistic regression · {style('P1').label}"
    assert len(fig.axes[0].lines) == len(LONG_ALGORITHMS)
    # the paper profile trains the paper's CNN
    assert figures.long_panel(long, "units", "paper").axes[0].get_title().startswith("MNIST, CNN")
    plt.close("all")


def test_the_case_figures_draw_fedsum_per_case_and_fedsum_against_fedavg():
    cases = [run(p, "fedsum", figure="cases") for p in reversed(CASES)]
    cases.append(run("biased", "fedavg", figure="cases"))
    fig = figures.fig9_fig14a(cases)
    loss, accuracy = fig.axes
    # every case in the order of Sec. 2.1, whatever the runs' order; FedAvg not among them
    assert [line.get_label() for line in accuracy.lines] == [style(p).label for p in CASES]
    assert loss.get_yscale() == "log" and accuracy.get_legend() is not None
    assert fig._suptitle.get_text().startswith("Fig. 9 (Cases 1-4) and Fig. 14(a)")
    fig = figures.fig14b(cases)
    labels = [line.get_label() for line in fig.axes[1].lines]
    assert labels == [style("fedsum").label, style("fedavg").label]
    plt.close("all")


def test_fig10_colours_the_p_grid_by_increasing_p():
    grid = [run(p, "fedsum", figure="p_grid") for p in ("p=1", "p=0.05", "p=0.5")]
    viridis = plt.get_cmap("viridis")
    expected = {"p=0.05": viridis(0.0), "p=0.5": viridis(0.5), "p=1": viridis(1.0)}
    assert figures.p_colors(["p=0.05", "p=0.5", "p=1"]) == expected
    fig = figures.fig10(grid)
    # by increasing p, not in the runs' order (bug: p = 1 first, coloured as the smallest p)
    lines = fig.axes[0].lines
    assert [line.get_label() for line in lines] == list(expected)
    assert [to_rgba(line.get_color()) for line in lines] == list(expected.values())
    table = pd.DataFrame(
        {
            "tau_avg": [15.0, 6.0, 0.0],
            "tau_max": [30.0, 10.0, 0.0],
            "train_loss": [1.9, 1.8, 1.2],
            "test_accuracy": [0.4, 0.3, 0.7],
        },
        index=list(expected),
    )
    fig = figures.fig10_tau(table)
    for ax, metric in zip(fig.axes, ("train_loss", "test_accuracy"), strict=True):
        by_avg, by_max = ax.collections
        np.testing.assert_array_equal(by_avg.get_offsets(), table[["tau_avg", metric]])
        np.testing.assert_array_equal(by_max.get_offsets(), table[["tau_max", metric]])
        np.testing.assert_allclose(by_avg.get_facecolors(), list(expected.values()))
        assert ax.get_xscale() == "symlog" and ax.get_ylabel() == f"final {AXIS[metric]}"
    plt.close("all")


def test_participation_delays_draws_each_patterns_bars_and_its_bound():
    table = pd.DataFrame(
        {
            "tau_max": [52.0, 4.0, 0.0],
            "tau_max min": [46.0, 4.0, 0.0],
            "tau_max max": [60.0, 4.0, 0.0],
            "tau_avg": [22.6, 4.0, 0.0],
            "bound on E[tau_max]": [244.1, 10.0, 48.8],
        },
        index=["P1", "cyclic", "all"],
    )
    fig = figures.participation_delays(table, "smoke")
    (ax,) = fig.axes
    bars = [b.get_width() for b in ax.patches]
    assert bars == [52.0, 4.0, 0.0, 22.6, 4.0, 0.0]  # tau_max bars, then tau_avg bars
    (bounds,) = [c for c in ax.collections if c.get_offsets().shape == (3, 2)]
    np.testing.assert_allclose(bounds.get_offsets()[:, 0], table["bound on E[tau_max]"])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["P1", "cyclic", "all"]
    assert ax.yaxis_inverted() and ax.get_xscale() == "symlog"
    assert ax.get_xlabel() == "rounds (N = 100, S = 20, T = 200)"  # the smoke traces
    plt.close("all")


def test_fig4_labels_its_ten_label_legend():
    fig = figures.fig4(np.ones((5, 10), dtype=int))
    legend = fig.axes[0].get_legend()
    assert legend.get_title().get_text() == "label" and legend._ncols == 10
    assert fig.axes[0].get_title().startswith("Fig. 4 · samples per client by label")
    plt.close("all")
