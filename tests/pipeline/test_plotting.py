"""Figures are stamped with their profile, byte-stable, and never written by smoke runs."""

import matplotlib

matplotlib.use("agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from aoi_fl.aoi import markov
from aoi_fl.pipeline import plotting


def make_figure():
    plotting.apply_style()
    fig, ax = plt.subplots()
    for name in ("random", "markov_optimal"):
        ax.plot([0, 1], [0, 1], **plotting.style(name).kwargs())
    return fig


def test_style_lookup_finds_every_paper_and_names_the_valid_ones():
    assert plotting.style("fedsum").label == "FedSUM"  # loads the registering modules on demand
    with pytest.raises(ValueError, match="unknown style name .fedprox.; valid: .*markov_optimal"):
        plotting.style("fedprox")


def test_smoke_profile_writes_nothing(tmp_path):
    assert plotting.save_figure(make_figure(), "x", "smoke", tmp_path) == []
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_saved_files_are_byte_identical_across_runs(tmp_path):
    first = [p.read_bytes() for p in plotting.save_figure(make_figure(), "x", "cpu", tmp_path)]
    second = [p.read_bytes() for p in plotting.save_figure(make_figure(), "x", "cpu", tmp_path)]
    assert first == second
    assert first[0].startswith(b"%PDF") and first[1].startswith(b"\x89PNG")
    assert b"CreationDate" not in first[0]
    plt.close("all")


def test_chain_diagram_has_one_node_per_age():
    ax = plotting.draw_chain(markov.optimal_p(100, 15, 10))
    labels = [t.get_text() for t in ax.texts]
    assert all(str(a) in labels for a in range(11))
    plt.close("all")


def test_unknown_profile_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown profile"):
        plotting.save_figure(make_figure(), "x", "gpu", tmp_path)
    plt.close("all")


# ---------------------------------------------------------------------------------------------
# What the curve helpers draw


def band_bounds(collection, xs):
    """{x: (lowest y, highest y)} of a fill_between polygon's vertices at each x of ``xs``."""
    vertices = np.concatenate([path.vertices for path in collection.get_paths()])
    out = {}
    for x in xs:
        ys = vertices[np.isclose(vertices[:, 0], x), 1]
        out[float(x)] = (float(ys.min()), float(ys.max()))
    return out


def test_plot_band_draws_the_mean_and_a_min_max_band():
    fig, ax = plt.subplots()
    x = np.array([0.0, 10.0, 20.0, 30.0])
    values = np.array([[1.0, 2.0, 3.0, 9.0], [3.0, 2.0, 0.0, 1.0], [2.0, 5.0, 6.0, 2.0]])
    assert plotting.plot_band(ax, x, values, "#123456", "three seeds", ls="--") is ax
    (line,) = ax.lines
    np.testing.assert_array_equal(line.get_xdata(), x)
    # mean over seeds, by hand (bug: the mean over rounds, or the first seed only)
    np.testing.assert_allclose(line.get_ydata(), [2.0, 3.0, 3.0, 4.0])
    assert line.get_label() == "three seeds" and line.get_linestyle() == "--"
    assert to_rgba(line.get_color()) == to_rgba("#123456")
    (band,) = ax.collections
    # the band spans min to max over seeds at every x (bug: mean +- std, or min/max swapped
    # for max/min over rounds)
    assert band_bounds(band, x) == {
        0.0: (1.0, 3.0),
        10.0: (2.0, 5.0),
        20.0: (0.0, 6.0),
        30.0: (1.0, 9.0),
    }
    assert band.get_facecolor()[0][:3] == pytest.approx(to_rgba("#123456")[:3])
    assert band.get_facecolor()[0][3] == pytest.approx(0.15)  # translucent
    # only the line enters the legend (bug: a second, duplicate entry for the band)
    assert ax.get_legend_handles_labels()[1] == ["three seeds"]
    plt.close(fig)


def test_plot_band_of_one_seed_is_a_line_without_band():
    fig, ax = plt.subplots()
    plotting.plot_band(ax, np.arange(3), np.array([4.0, 5.0, 7.0]), "red", "one")
    np.testing.assert_array_equal(ax.lines[0].get_ydata(), [4.0, 5.0, 7.0])
    assert not ax.collections  # a zero-width band would still hide nothing, but is noise
    plt.close(fig)


def test_plot_accuracy_draws_one_styled_band_per_policy_and_the_target():
    fig, ax = plt.subplots()
    rounds = np.array([1, 2, 3])
    curves = {
        "random": (rounds, np.array([[0.1, 0.5, 0.7], [0.3, 0.5, 0.9]])),
        "markov_optimal": (rounds, np.array([[0.2, 0.6, 0.8], [0.2, 0.8, 0.8]])),
    }
    plotting.plot_accuracy(ax, curves, target=0.75)
    policy_lines = [ln for ln in ax.lines if ln.get_label() and not ln.get_label().startswith("_")]
    assert [ln.get_label() for ln in policy_lines] == [
        plotting.style("random").label,
        plotting.style("markov_optimal").label,
    ]
    # each policy in its own registered colour (bug: colours by position in the dict)
    for ln, name in zip(policy_lines, curves, strict=True):
        assert to_rgba(ln.get_color()) == to_rgba(plotting.style(name).color)
    np.testing.assert_allclose(policy_lines[0].get_ydata(), [0.2, 0.5, 0.8])
    np.testing.assert_allclose(policy_lines[1].get_ydata(), [0.2, 0.7, 0.8])
    assert band_bounds(ax.collections[0], rounds) == {
        1.0: (0.1, 0.3),
        2.0: (0.5, 0.5),
        3.0: (0.7, 0.9),
    }
    assert band_bounds(ax.collections[1], rounds) == {
        1.0: (0.2, 0.2),
        2.0: (0.6, 0.8),
        3.0: (0.8, 0.8),
    }
    # the target: a horizontal line at 0.75 and its label, not in the legend
    (target,) = [ln for ln in ax.lines if ln not in policy_lines]
    assert set(target.get_ydata()) == {0.75}
    assert [t.get_text() for t in ax.texts] == ["target 75% "]
    assert ax.texts[0].get_position()[1] == 0.75
    assert len(ax.get_legend_handles_labels()[1]) == 2
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("round", "test accuracy")
    plt.close(fig)


def test_plot_accuracy_without_target_draws_only_the_policies():
    fig, ax = plt.subplots()
    plotting.plot_accuracy(ax, {"probabilistic": (np.arange(2), np.array([[0.1, 0.2]]))})
    (line,) = ax.lines
    assert line.get_label() == plotting.style("probabilistic").label
    assert not ax.texts and not ax.collections
    with pytest.raises(ValueError, match="unknown style name 'fifo'"):
        plotting.plot_accuracy(ax, {"fifo": (np.arange(2), np.array([[0.1, 0.2]]))})
    plt.close(fig)


def test_plot_selections_marks_every_selection_of_each_trace_at_its_round():
    fig, ax = plt.subplots()
    traces = {"Flower": [[0, 2], [1]], "in process": [[0, 2], [3]]}
    plotting.plot_selections(ax, traces, n=4, color="red")
    rings, crosses = ax.collections
    assert rings.get_offsets().tolist() == [[1, 0], [1, 2], [2, 1]]
    assert crosses.get_offsets().tolist() == [[1, 0], [1, 2], [2, 3]]
    assert ax.get_legend_handles_labels()[1] == ["Flower", "in process"]
    assert ax.get_ylim() == (-0.5, 3.5)
    with pytest.raises(ValueError, match="traces must hold one or two runs, got 3"):
        plotting.plot_selections(ax, {**traces, "third": [[0]]}, n=4, color="red")
    plt.close(fig)
