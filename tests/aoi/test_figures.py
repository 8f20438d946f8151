"""aoi_fl.evidence.aoi.figures: how notebooks 05-07 set up, show and check their training panels
(PanelNotebook, and check_panel, the assertions they run on a panel), and Table II as notebook 08
prints and draws it."""

import copy
from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd
import pytest

from aoi_fl.core.train import rounds_to_target
from aoi_fl.evidence.aoi import experiments
from aoi_fl.evidence.aoi import figures as aoi_figures
from aoi_fl.evidence.aoi.figures import (
    PanelNotebook,
    check_panel,
    panel_notebook,
    plot_table2,
    print_local_work_table,
    print_screening_and_final_accuracy,
    print_skew_tables,
    print_table2,
)
from aoi_fl.pipeline.cache import config_key
from aoi_fl.pipeline.notebook import NotebookSetup
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


def curve_run(dataset, split, policy, seed, crossing, rounds=8):
    """A fake screened run that jumps past ``dataset``'s target at round ``crossing``: evaluated
    on the full test set every round, on the screening subset 0.005 lower."""
    target = experiments.TARGETS[dataset]
    accuracy = [target - 0.2 if t < crossing else target + 0.01 for t in range(rounds + 1)]
    evaluated = list(range(rounds + 1))
    return SimpleNamespace(
        config={
            "partition": {"name": "iid" if split == "iid" else "dirichlet"},
            "model": {"name": experiments.PAPER_MODELS[dataset]},
            "sampler": {"name": policy},
            "training": {"seed": seed, "screen_target": target},
        },
        history={
            "eval_round": evaluated,
            "test_accuracy": accuracy,
            "screen_accuracy": [a - 0.005 for a in accuracy[1:]],
        },
        rounds_to_target=lambda t: rounds_to_target(accuracy, t, evaluated),
    )


def curve_runs(dataset):
    """Markov optimal reaching the target at round 3 in each of 3 seeds, random at 4, 5, 4."""
    return [
        curve_run(dataset, split, policy, seed, 3 if policy == "markov_optimal" else 4 + seed % 2)
        for split in experiments.SPLITS
        for policy in ("random", "markov_optimal")
        for seed in range(3)
    ]


def cpu_notebook(tmp_path, data, has_data=True, synthetic=False, **options):
    """The notebook of ``data`` in the cpu profile, its figures going to ``tmp_path``."""
    return PanelNotebook(
        NotebookSetup("cpu", FIGURES=str(tmp_path)), data, has_data, synthetic, **options
    )


@pytest.fixture
def served(monkeypatch):
    """Serve ``served[panel]`` as the panel's results; the calls made, in ``served["calls"]``."""
    served = {"calls": []}

    def panel_results(plan, **options):
        served["calls"].append((plan, options))
        return served[plan.name]

    monkeypatch.setattr(aoi_figures, "panel_results", panel_results)
    return served


def test_setup_prints_the_profile_device_and_the_data_of_the_papers_figure(
    tmp_path, monkeypatch, capsys
):
    (tmp_path / "notebooks").mkdir()
    monkeypatch.chdir(tmp_path / "notebooks")  # where notebooks run: no ../data/cifar-10 here
    monkeypatch.delenv("AOI_FL_PROFILE", raising=False)
    with pd.option_context("display.width", 80), matplotlib.rc_context():
        panels = panel_notebook("cpu", "cifar10", rerun=True)
        assert (panels.profile, panels.has_data, panels.synthetic) == ("cpu", False, False)
        assert (panels.rerun, panels.only_cached, panels.env.RESULTS) == (True, False, "../results")
        lines = capsys.readouterr().out.splitlines()
        assert lines[0] == "profile: cpu" and lines[1].startswith("device: ")
        assert lines[2].startswith("CIFAR-10 was not found under ../data/cifar-10-batches-py")
        monkeypatch.setenv("AOI_FL_PROFILE", "smoke")  # the tests' override of the parameters
        panels = panel_notebook("cpu", "cifar100", only_cached=True)
        assert (panels.profile, panels.has_data, panels.synthetic) == ("smoke", True, True)
        assert "SYNTHETIC CIFAR-100-shaped data" in capsys.readouterr().out


def test_show_describes_loads_plots_saves_and_answers_the_papers_claim(tmp_path, served, capsys):
    import matplotlib.pyplot as plt

    served["main_mnist"] = runs = curve_runs("mnist")
    panels = cpu_notebook(tmp_path, "mnist", rerun=True)
    assert panels.show("main_mnist", "fig5", "Fig. 5 title") is runs
    assert served["calls"] == [
        (
            experiments.plan("main_mnist", "cpu"),
            {
                "results_dir": "../results",
                "data_root": "../data",
                "rerun": True,
                "only_cached": False,
                "workers": 2,
                "threads": 1,
            },
        )
    ]
    assert served["calls"][0][0].configs == tuple(experiments.panel_grid("main_mnist", "cpu"))
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == (
        "main_mnist: mnist, model mcmahan_cnn, 5 local steps, rounds IID 70 / non-IID 150, "
        "seeds 3, policies random, probabilistic, markov_optimal, markov_nonoptimal"
    )
    assert lines[1].startswith("example configuration: {'dataset': {'name': 'mnist'}")
    assert lines[2] == "rounds to 97% test accuracy per seed"
    assert "\nmarkov_optimal minus the other policy, paired over seeds\n" in out
    assert plt.gcf().get_suptitle() == "Fig. 5 title"
    plt.close("all")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig5.pdf", "fig5.png"]
    assert panels.shown == {"main_mnist": runs} and not panels.skipped


def test_synthetic_data_are_marked_and_other_panels_train_on_real_data(tmp_path, served, capsys):
    import matplotlib.pyplot as plt

    served["main_cifar10"], served["fashion"] = curve_runs("cifar10"), curve_runs("fashion_mnist")
    panels = cpu_notebook(tmp_path, "cifar10", synthetic=True)
    panels.show("main_cifar10", "fig6", "Fig. 6 title")
    assert "'name': 'synthetic_cifar'" in capsys.readouterr().out
    assert plt.gcf().get_suptitle() == "Fig. 6 title · SYNTHETIC DATA"
    plt.close("all")
    panels.load("fashion")  # described only: no example configuration, no plot
    assert capsys.readouterr().out == experiments.plan("fashion", "cpu").description + "\n"
    assert [plan.synthetic for plan, _ in served["calls"]] == [True, False]
    assert list(panels.shown) == ["main_cifar10", "fashion"]


def test_a_panel_without_its_data_is_skipped_and_check_says_so(tmp_path, served, capsys):
    served["fashion"] = fake_results("fashion", "cpu")
    panels = cpu_notebook(tmp_path, "cifar10", has_data=False)
    assert panels.show("main_cifar10", "fig6", "title") == []
    assert capsys.readouterr().out == "" and not served["calls"]
    panels.load("fashion")
    capsys.readouterr()
    panels.check()
    assert capsys.readouterr().out == (
        "skipped: the CIFAR-10 panel (no CIFAR-10 data here, see above)\n"
        "checks passed:\n"
        "  fashion: results are their configurations\n"
        "  fashion: all 16 runs present\n"
        "  fashion: pairing within seeds\n"
        "  fashion: verdicts agree with their intervals\n"
        "  fashion: every run reaches 85%\n"
    )
    alone = cpu_notebook(tmp_path, "cifar100", has_data=False)
    alone.show("main_cifar100", "fig7", "title")
    alone.check()
    assert capsys.readouterr().out == "skipped: every check (no CIFAR-100 data here, see above)\n"


def test_check_asserts_every_panel_shown_and_only_cached_ones_need_not_be_complete(
    tmp_path, served
):
    served["main_mnist"] = fake_results("main_mnist", "cpu")[1:]  # one run not cached yet
    panels = cpu_notebook(tmp_path, "mnist", only_cached=True)
    panels.load("main_mnist")
    panels.check()
    panels.only_cached = False
    with pytest.raises(AssertionError, match="main_mnist: runs missing"):
        panels.check()


def test_the_screening_check_and_final_accuracy_under_fig5(capsys):
    print_screening_and_final_accuracy([], "mnist")  # only cached runs shown, none cached
    assert capsys.readouterr().out == ""
    print_screening_and_final_accuracy(curve_runs("mnist"), "mnist")
    out = capsys.readouterr().out
    assert out.startswith("screening check: full-test minus subset accuracy where both were")
    assert "\nfinal accuracy (mean of the last 5 common evaluations):\n" in out
    assert "0.0050" in out and "0.9800" in out  # every gap; the accuracy after the jump


def test_local_work_table_prints_rounds_and_selections_per_panel(capsys):
    runs = curve_runs("mnist")
    print_local_work_table({"epochs": runs, "power": runs}, "cpu", "mnist")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == "seeds reached mean rounds to target selections per client".split()
    # Markov optimal at round 3 in every seed: 3 x 15 / 100 selections per client
    assert lines[2].split() == "5 epochs (epochs) iid markov_optimal 3 3/3 3.0 0.5".split()
    assert any(line.startswith("5 steps (power)") for line in lines)


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
