"""The AoI training configurations follow the paper's Sec. V, and tables summarise runs."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from aoi_fl.core.train import rounds_to_target
from aoi_fl.evidence.aoi import experiments as ex
from aoi_fl.evidence.aoi import results as summaries
from aoi_fl.pipeline.runs import build_trainer, resolve_config

DATA = str(Path(__file__).resolve().parents[2] / "data")


def test_paper_profile_is_the_papers_setting():
    c = ex.aoi_config("mnist", "noniid", "probabilistic", 0, ex.panel("main_mnist", "paper"))
    assert c["model"] == {"name": "mcmahan_cnn", "seed": 0}
    assert c["partition"] == {"name": "dirichlet", "n_clients": 100, "seed": 0, "alpha": 0.3}
    assert c["sampler"] == {"name": "probabilistic", "m": 15, "m_prime": 10, "seed": 0}
    t = c["training"]
    # K = 5 local SGD steps of batch 50 (Table I, eqs 16-18), not 5 passes over the data
    assert (t["local_steps"], t["batch_size"]) == (5, 50) and "local_epochs" not in t
    assert t["lr"] == {"name": "exponential", "lr0": 0.1, "decay": 0.998}
    assert ex.aoi_grid("cifar100", "paper")[0]["model"] == {
        "name": "mcmahan_cifar_cnn",
        "num_classes": 100,
        "seed": 0,
    }


@pytest.mark.parametrize("dataset", ex.DATASETS)
def test_cpu_profile_differs_from_paper_only_in_seeds_and_horizons(dataset):
    paper, cpu = ex.aoi_grid(dataset, "paper"), ex.aoi_grid(dataset, "cpu")
    assert len(paper) > len(cpu)
    for p, c in zip(paper, cpu, strict=False):  # seed by seed; paper has more seeds
        assert {k for k in p if p[k] != c[k]} == {"training"}
        t_paper, t_cpu = p["training"], c["training"]
        assert {k for k in t_paper if t_paper[k] != t_cpu[k]} == {"rounds"}
        assert t_cpu["rounds"] <= t_paper["rounds"]


def test_cpu_horizons_are_one_and_a_half_times_the_papers_rounds():
    for split in ex.SPLITS:
        paper_rounds = max(ex.PAPER_ROUNDS_TO_TARGET[("mnist", split)].values())
        assert ex.schedule("cpu", "mnist")[split] >= 1.5 * paper_rounds


@pytest.mark.parametrize(
    ("local_work", "size", "steps"),
    [
        (("steps", 5), 600, 5),  # the paper's reading: K local SGD steps
        (("steps", 5), 30, 5),  # K steps whatever the client's size
        (("epochs", 5), 600, 60),  # 5 passes of 12 batches of 50
        (("epochs", 1), 620, 13),  # the last batch is the remainder of 20
        (("epochs", 2), 10, 2),  # a client smaller than a batch takes one step per epoch
    ],
)
def test_both_readings_of_local_work_give_the_documented_steps(local_work, size, steps):
    assert ex.local_steps_per_round(local_work, size, 50) == steps


@pytest.mark.slow
@pytest.mark.parametrize(("unit", "count"), [("steps", 5), ("epochs", 2)])
def test_trainer_takes_the_documented_number_of_steps(unit, count):
    """The trainer's schedule of a client has as many mini-batches as the reading says."""
    settings = {**ex.panel("power", "cpu"), "local_work": (unit, count)}
    config = ex.aoi_config("mnist", "noniid", "random", 0, settings)
    trainer = build_trainer(config, DATA)
    for client in (0, 7, 42):
        size = len(trainer.data.partition[client])
        assert len(trainer.client_schedule(3, client)) == ex.local_steps_per_round(
            (unit, count), size, 50
        )


@pytest.mark.slow
@pytest.mark.parametrize("name", ["main_mnist", "power", "fashion"])
def test_a_seed_pairs_every_policy_on_the_same_partition_init_and_batches(name):
    """Within a seed only the selection differs between policies (the paired design)."""
    grid = ex.panel_grid(name, "cpu", splits=["noniid"], seeds=[1])
    assert len({c["sampler"]["name"] for c in grid}) == len(grid) >= 2
    trainers = [build_trainer(c, DATA) for c in grid]
    first = trainers[0]
    for other in trainers[1:]:
        assert all(
            np.array_equal(a, b)
            for a, b in zip(first.data.partition, other.data.partition, strict=True)
        )
        assert all(torch.equal(first.params[k], other.params[k]) for k in first.params)
        for t, client in ((0, 3), (17, 99)):
            ours, theirs = first.client_schedule(t, client), other.client_schedule(t, client)
            assert np.array_equal(ours, theirs)
        assert torch.equal(first.screen_split().x, other.screen_split().x)
    assert {t.sampler.name for t in trainers} == set(ex.panel(name, "cpu")["policies"])


@pytest.mark.parametrize("profile", ["smoke", "cpu", "paper"])
def test_every_panel_configuration_resolves(profile):
    for name, settings in ex.PANELS[profile].items():
        synthetic = profile == "smoke" and settings["dataset"].startswith("cifar")
        grid = ex.panel_grid(name, profile, synthetic=synthetic)
        assert len(grid) == 2 * len(settings["policies"]) * settings["seeds"]
        for c in grid:
            resolve_config(c)
        # the panel's own names and numbers, which a plan uses unchecked, pass aoi_config's checks
        checked = [
            ex.aoi_config(settings["dataset"], split, policy, seed, settings, synthetic=synthetic)
            for seed in range(settings["seeds"])
            for split in ex.SPLITS
            for policy in settings["policies"]
        ]
        assert grid == checked
        plan = ex.plan(name, profile, synthetic_data=settings["dataset"] if synthetic else None)
        assert (plan.configs, plan.synthetic, plan.dataset) == (
            tuple(grid),
            synthetic,
            settings["dataset"],
        )


def test_epochs_panel_is_the_first_results_configuration():
    """The sensitivity panel keeps the configuration cached before the steps reading."""
    c = ex.panel_grid("epochs", "cpu")[0]
    assert c["model"] == {"name": "small_cnn", "seed": 0}
    assert c["training"] == {
        "rounds": 20,
        "local_epochs": 5,
        "batch_size": 50,
        "seed": 0,
        "eval_every": 1,
        "lr": {"name": "exponential", "lr0": 0.1, "decay": 0.998},
        "client_loss_samples": 50,
    }


def test_bad_arguments():
    settings = ex.panel("main_mnist", "cpu")
    with pytest.raises(ValueError, match="unknown split 'mixed'; valid: iid, noniid"):
        ex.aoi_config("mnist", "mixed", "random", 0, settings)
    with pytest.raises(ValueError, match="synthetic=True is for the CIFAR datasets only"):
        ex.aoi_config("mnist", "iid", "random", 0, settings, synthetic=True)
    with pytest.raises(ValueError, match="synthetic=True is for the CIFAR datasets only"):
        ex.plan("main_mnist", "cpu", synthetic_data="mnist")
    with pytest.raises(ValueError, match="unknown split 'mixed'"):
        ex.panel_grid("main_mnist", "cpu", splits=["mixed"])
    with pytest.raises(ValueError, match="seed"):
        ex.panel_grid("main_mnist", "cpu", seeds=[-1])
    with pytest.raises(ValueError, match="unknown dataset"):
        ex.schedule("cpu", "emnist")
    with pytest.raises(ValueError, match="unknown panel 'fig9'"):
        ex.panel("fig9", "cpu")
    with pytest.raises(ValueError, match="unknown local_work unit 'passes'"):
        ex.local_steps_per_round(("passes", 5), 600, 50)
    with pytest.raises(ValueError, match="local_work count"):
        ex.local_steps_per_round(("steps", 0), 600, 50)


def fake_run(split, policy, seed, accuracy):
    config = {
        "partition": {"name": "iid" if split == "iid" else "dirichlet"},
        "model": {"name": "mcmahan_cnn"},  # the paper's MNIST model
        "sampler": {"name": policy},
        "training": {"seed": seed},
    }
    history = {"eval_round": list(range(len(accuracy))), "test_accuracy": accuracy}
    return SimpleNamespace(
        config=config,
        history=history,
        rounds_to_target=lambda t: rounds_to_target(accuracy, t, list(range(len(accuracy)))),
    )


def test_rounds_to_target_table_and_speedup():
    runs = [
        fake_run("iid", "random", 0, [0.1, 0.5, 0.96, 0.98]),
        fake_run("iid", "random", 1, [0.1, 0.97, 0.98, 0.99]),
        fake_run("iid", "markov_optimal", 0, [0.1, 0.97, 0.98, 0.99]),
        fake_run("iid", "markov_optimal", 1, [0.1, 0.5, 0.6, 0.7]),
    ]
    table = summaries.rounds_to_target_table(runs, 0.97, ex.PAPER_ROUNDS_TO_TARGET, "mnist")
    assert table.loc[("iid", "random"), "mean"] == pytest.approx(2.0)
    assert table.loc[("iid", "random"), "reached"] == "2/2"
    assert np.isnan(table.loc[("iid", "markov_optimal"), "seed 1"])  # never reached
    assert table.loc[("iid", "markov_optimal"), "reached"] == "1/2"
    assert table.loc[("iid", "markov_optimal"), "paper"] == 39
    # sample sd over the seeds that reached it (3 and 1 rounds); one value has no sd
    assert table.loc[("iid", "random"), "sd"] == pytest.approx(np.sqrt(2.0))
    assert np.isnan(table.loc[("iid", "markov_optimal"), "sd"])
    speed = summaries.speedup_table(table)
    # Markov optimal missed the target in one seed: a mean over its lucky seed alone
    # would claim a 50% speed-up (1 round vs 2), so ours is left undefined
    assert np.isnan(speed.loc["iid", "speed-up (ours)"])
    assert speed.loc["iid", "speed-up (paper)"] == pytest.approx((45 - 39) / 45)
    runs[3] = fake_run("iid", "markov_optimal", 1, [0.1, 0.5, 0.6, 0.97])
    table = summaries.rounds_to_target_table(runs, 0.97)
    assert "paper" not in table
    speed = summaries.speedup_table(table)  # means 2.0 (random) and 2.0 (Markov: 1 and 3)
    assert speed.loc["iid", "speed-up (ours)"] == pytest.approx(0.0)
    assert list(speed.columns) == ["speed-up (ours)"]
    rounds, acc = summaries.accuracy_curves(summaries.group_runs(runs)[("iid", "random")])
    np.testing.assert_array_equal(rounds, [0, 1, 2, 3])
    assert acc.shape == (2, 4)


@pytest.mark.slow
def test_smoke_run_on_real_mnist_learns(tmp_path):
    # two rounds, 3 of 20 clients x 2 steps of batch 50 on the first 2,000 real MNIST images:
    # above chance (0.1)
    from aoi_fl.pipeline.runs import run_experiment

    config = ex.aoi_config("mnist", "iid", "markov_optimal", 0, ex.panel("main_mnist", "smoke"))
    assert config["dataset"] == {"name": "mnist", "n_train": 2000, "n_test": 200}
    result = run_experiment(config, results_dir=str(tmp_path), progress=False, data_root=DATA)
    accuracy = result.history["test_accuracy"]
    assert accuracy[0] < 0.2 < 0.25 < accuracy[-1]
    again = run_experiment(config, results_dir=str(tmp_path), progress=False, data_root=DATA)
    assert again.cached and again.history == result.history
    # the final weights of a screened run stay out of the cache, in its uncommitted weights/
    assert result.final_params == again.final_params == {}
    assert (tmp_path / "weights" / f"{result.key}.npz").is_file()


def _screened_run(split, policy, seed, extra_round, accuracy_at):
    """A fake screened run: scheduled evaluations every 2 rounds plus one round of its own."""
    rounds = sorted({0, 2, 4, 6, extra_round})
    run = fake_run(split, policy, seed, [accuracy_at(t) for t in rounds])
    run.history["eval_round"] = rounds
    run.rounds_to_target = lambda t: rounds_to_target(run.history["test_accuracy"], t, rounds)
    return run


def test_curves_of_screened_runs_keep_the_rounds_every_seed_evaluated():
    runs = [_screened_run("iid", "random", s, 3 + s, lambda t: t / 10) for s in range(2)]
    with pytest.raises(ValueError, match="same rounds"):
        summaries.accuracy_curves(runs)
    rounds, acc = summaries.accuracy_curves(runs, common=True)
    np.testing.assert_array_equal(rounds, [0, 2, 4, 6])
    np.testing.assert_allclose(acc, [[0.0, 0.2, 0.4, 0.6]] * 2)


def test_paired_answer_compares_markov_optimal_with_every_other_policy():
    from aoi_fl.evidence.aoi import figures as aoi_figures

    # Markov optimal crosses 0.97 at round 3 in every seed, random at 5, 5 and 6 (rounds of
    # their own): the paired difference is -2, -2, -3 rounds
    runs = []
    for seed, slow in enumerate((5, 5, 6)):
        runs.append(
            _screened_run("iid", "markov_optimal", seed, 3, lambda t: 0.5 + 0.48 * (t >= 3))
        )
        runs.append(
            _screened_run("iid", "random", seed, slow, lambda t, s=slow: 0.5 + 0.48 * (t >= s))
        )
    table, paired = aoi_figures.print_paired_answer(runs, "mnist")
    assert list(table.loc[("iid", "random"), ["seed 0", "seed 1", "seed 2"]]) == [5, 5, 6]
    row = paired.loc[("random", "iid")]
    assert row["n"] == 3 and row["mean difference"] == pytest.approx(-7 / 3)
    assert row["t 95% high"] < 0 and row["paper difference"] == 39 - 45
    assert row["verdict"].startswith("held")
    assert not [c for c in paired if c.startswith("paper ") and c != "paper difference"]


def test_plot_panel_draws_both_splits_and_the_papers_markers():
    from aoi_fl.evidence.aoi import figures as aoi_figures

    runs = [
        _screened_run(split, policy, seed, 3, lambda t: t / 7)
        for split in ex.SPLITS
        for policy in ("random", "markov_optimal")
        for seed in range(2)
    ]
    fig = aoi_figures.plot_panel(runs, "mnist", "title")
    top = fig.axes[0]
    # one mean line per policy, one marker per policy the paper reports, the target line
    markers = [line for line in top.lines if line.get_marker() != "None" and len(line.get_xdata())]
    marker_x = sorted(line.get_xdata()[0] for line in markers)
    assert marker_x == [39, 45]
    assert [a.get_title() for a in fig.axes[:2]] == [
        "(a) mnist IID",
        "(b) mnist non-IID (Dirichlet 0.3)",
    ]


def test_the_regime_grid_is_the_paper_profiles_fig5_pair_at_every_seed():
    configs = ex.regime_grid(seeds=4)
    assert len(configs) == 4 * 2 * 2  # seeds x splits x the pair
    assert {c["sampler"]["name"] for c in configs} == set(ex.PAIR)
    paper = ex.panel_grid("main_mnist", "paper", seeds=range(4))
    assert all(c in paper for c in configs)
    assert {c["training"]["seed"] for c in configs} == {0, 1, 2, 3}
    power = ex.regime_grid("power", seeds=3)
    assert power == ex.panel_grid("power", "paper", seeds=range(3))
    with pytest.raises(ValueError, match="panel.*'epochs'"):
        ex.regime_grid("epochs")
