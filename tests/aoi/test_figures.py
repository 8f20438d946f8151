"""aoi_fl.aoi.figures: check_panel, the assertions notebooks 05-07 run on a training panel, and
Table II as notebook 08 prints and draws it."""

import copy
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from aoi_fl.aoi import experiments
from aoi_fl.aoi.figures import check_panel, plot_table2, print_skew_tables, print_table2
from aoi_fl.pipeline.cache import config_key
from aoi_fl.pipeline.runs import resolve_config


def fake_results(panel, profile, reached=5):
    out = []
    for config in experiments.panel_grid(panel, profile):
        c = resolve_config(config)
        out.append(
            SimpleNamespace(
                key=config_key(c),
                config=c,
                history={"lr": [0.1] * c["training"]["rounds"]},
                rounds_to_target=lambda target, r=reached: r,
            )
        )
    return out


def test_a_complete_panel_passes_every_check():
    done = check_panel(fake_results("main_mnist", "cpu"), "main_mnist", "cpu", "mnist")
    assert done == [
        "results are their configurations",
        "all 24 runs present",
        "pairing within seeds",
        "verdicts agree with their intervals",
        "every run reaches 97%",
    ]


def test_a_result_served_for_another_configuration_fails():
    results = fake_results("main_mnist", "smoke")
    results[0].config = copy.deepcopy(results[0].config)
    results[0].config["training"]["lr"]["lr0"] = 0.2  # a stale cache entry under the same key
    with pytest.raises(AssertionError, match="another configuration"):
        check_panel(results, "main_mnist", "smoke", "mnist")


def test_a_missing_or_truncated_run_fails():
    results = fake_results("main_mnist", "smoke")
    with pytest.raises(AssertionError, match="runs missing"):
        check_panel(results[1:], "main_mnist", "smoke", "mnist")
    assert "all" not in " ".join(
        check_panel(results[1:], "main_mnist", "smoke", "mnist", complete=False)
    )
    results[0].history["lr"] = results[0].history["lr"][:-1]  # interrupted, not resumed
    with pytest.raises(AssertionError, match="stopped before"):
        check_panel(results, "main_mnist", "smoke", "mnist")


def test_unpaired_seeds_fail(monkeypatch):
    grid = experiments.panel_grid("main_mnist", "smoke")
    unpaired = copy.deepcopy(grid)
    unpaired[1]["model"]["seed"] = 7  # one policy would start from another initial model
    monkeypatch.setattr(experiments, "panel_grid", lambda *a, **k: copy.deepcopy(unpaired))
    with pytest.raises(AssertionError, match="differ beyond the sampler"):
        check_panel(fake_results("main_mnist", "smoke"), "main_mnist", "smoke", "mnist")


def test_a_verdict_that_contradicts_its_interval_fails():
    results = fake_results("main_mnist", "smoke")
    paired = pd.DataFrame(
        {"t 95% low": [-4.0, -3.0], "t 95% high": [-1.0, 2.0], "verdict": ["held", "held"]},
        index=["iid", "noniid"],
    )
    with pytest.raises(AssertionError, match="noniid: verdict 'held'"):
        check_panel(results, "main_mnist", "smoke", "mnist", paired=paired)
    paired.loc["noniid", "verdict"] = "inconclusive at this power"
    assert "verdicts agree with their intervals" in check_panel(
        results, "main_mnist", "smoke", "mnist", paired=paired
    )


def test_outside_smoke_every_run_must_reach_the_target(capsys):
    with pytest.raises(AssertionError, match="never reached 97%"):
        check_panel(fake_results("main_mnist", "cpu", reached=None), "main_mnist", "cpu", "mnist")
    check_panel(fake_results("main_mnist", "smoke", reached=None), "main_mnist", "smoke", "mnist")
    assert "skipped in smoke: every run reaches 97%" in capsys.readouterr().out


def skew_tables():
    """One dataset's selection_skew table with a distinct average rho per (split, policy)."""
    index = pd.MultiIndex.from_product([experiments.SPLITS, experiments.POLICIES])
    table = pd.DataFrame(1.0, index=index, columns=experiments.SKEW_COLUMNS)
    table["rho (average)"] = np.arange(len(index)) / 10 + 0.5
    table["F* device"] = "cpu"
    return {"mnist": table.drop([("iid", "random"), ("noniid", "random")])}


def test_table2_has_ours_per_split_then_the_papers_per_dataset(capsys):
    tables = skew_tables()
    table = print_table2(tables)
    assert list(table.columns) == ["mnist iid", "mnist noniid"] + [
        f"paper {d}" for d in experiments.DATASETS
    ]
    assert table.loc["probabilistic", "mnist noniid"] == pytest.approx(1.0)  # row 5 of 8
    assert table.loc["random", ["mnist iid", "mnist noniid"]].isna().all()  # not run
    assert (
        table.loc["probabilistic", "paper mnist"]
        == experiments.PAPER_SKEW["probabilistic"]["mnist"]
    )
    assert capsys.readouterr().out.startswith("Table II · average empirical rho")
    print_skew_tables(tables)
    out = capsys.readouterr().out
    assert "mnist: average rho and its dependence" in out and "F* device" in out


def test_plot_table2_draws_a_panel_per_dataset():
    import matplotlib.pyplot as plt

    tables = skew_tables()
    fig = plot_table2({**tables, "cifar10": tables["mnist"]}, {"cifar10"})
    assert [ax.get_title() for ax in fig.axes] == ["mnist", "cifar10 (SYNTHETIC)"]
    plt.close(fig)
