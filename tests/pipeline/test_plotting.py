"""Figures are stamped with their profile, byte-stable, and never written by smoke runs."""

import matplotlib

matplotlib.use("agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

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
