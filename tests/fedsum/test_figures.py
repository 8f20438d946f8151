"""The FedSUM plots draw what they are given: mean over seeds with a min-max band, against rounds
or communication, and the per-client label histogram stacked label by label."""

import matplotlib

matplotlib.use("agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from aoi_fl.data.partition import label_histogram  # noqa: E402
from aoi_fl.fedsum import figures  # noqa: E402
from aoi_fl.fedsum.experiments import RunSummary  # noqa: E402
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
