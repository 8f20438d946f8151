"""Figures are stamped with their profile, byte-stable, and never written by smoke runs."""

import matplotlib

matplotlib.use("agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from aoi_fl import markov, plotting  # noqa: E402


def make_figure():
    plotting.apply_style()
    fig, ax = plt.subplots()
    for name in ("random", "markov_optimal"):
        ax.plot([0, 1], [0, 1], **plotting.style(name).kwargs())
    return fig


def test_names_that_share_a_figure_have_distinct_styles():
    members = [name for family in plotting.FAMILIES.values() for name in family]
    assert sorted(members) == sorted(plotting.STYLES)  # every style in exactly one family
    for family in plotting.FAMILIES.values():
        styles = [plotting.style(name) for name in family]
        assert len({s.color for s in styles}) == len(styles)
        assert len({s.marker for s in styles}) == len(styles)
    assert len({s.label for s in plotting.STYLES.values()}) == len(plotting.STYLES)
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


def test_style_families_are_the_names_the_experiments_plot_together():
    from aoi_fl import agnostic_experiments as ax
    from aoi_fl import experiments
    from aoi_fl import fedsum_experiments as fx
    from aoi_fl import kvib_experiments as kx

    families = {k: set(v) for k, v in plotting.FAMILIES.items()}
    assert families["AoI policies"] == set(experiments.POLICIES)
    assert families["agnostic-FedAvg aggregation rules"] == {*ax.AGGREGATIONS, "aoi"}
    assert families["K-Vib samplers"] == set(kx.FIG2_SAMPLERS) >= set(kx.GRID_SAMPLERS)
    assert families["FedSUM methods"] == {*fx.MAIN_ALGORITHMS, *fx.FAMILY}
    assert families["FedSUM patterns"] == {*fx.MAIN_PATTERNS, *fx.CASES}
