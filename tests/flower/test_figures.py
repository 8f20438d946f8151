"""Notebook 18's library side (:mod:`aoi_fl.evidence.flower.figures`,
:func:`simulation.mnist_config`, :func:`simulation.run_both`) on made-up runs: the agreement table,
the selections figure, the participation table beside a long trace, and checks that fail where the
notebook's text would be wrong. (The Flower run itself: ``test_simulation.py``.)"""

from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

pytest.importorskip("flwr")

from aoi_fl.evidence.flower import figures
from aoi_fl.flower import simulation  # noqa: E402
from aoi_fl.flower.simulation import FlowerRun  # noqa: E402
from aoi_fl.pipeline import runs  # noqa: E402
from aoi_fl.pipeline.plotting import style  # noqa: E402

DATA = str(Path(__file__).resolve().parents[2] / "data")
POLICIES = ("random", "markov_optimal")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _pair(selected=((0, 1), (2, 3)), param=1.0, accuracy=0.5):
    """A Flower run and an in-process run (a stand-in with the trainer's records) that agree."""
    history = {
        "selected": [list(s) for s in selected],
        "weights": [[0.5, 0.5] for _ in selected],
        "update_norms": [1.0 for _ in selected],
        "eval_round": [0, 1, 2],
        "test_accuracy": [0.1, 0.3, accuracy],
    }
    params = {"w": np.full(3, param, dtype=np.float32)}
    flower = FlowerRun({k: list(v) for k, v in history.items()}, params)
    trainer = SimpleNamespace(history=history, reported_params=lambda: {"w": torch.full((3,), 1.0)})
    return flower, trainer


def test_the_mnist_configuration_is_one_client_at_a_time():
    sampler = {"name": "markov_optimal", "m": 3, "m_prime": 10, "seed": 0}
    config = simulation.mnist_config(sampler, 10, 2)
    assert config["sampler"] is sampler and config["partition"]["n_clients"] == 10
    assert config["training"]["client_chunk"] == 1 and config["training"]["rounds"] == 2
    assert runs.resolve_config(config)["model"]["name"] == "small_cnn"


def test_the_agreement_table_names_the_policies_and_finds_a_difference(capsys):
    pairs = {"random": _pair(), "markov_optimal": _pair(param=2.0)}
    table = figures.print_agreement(pairs, 10, 2, 2)
    assert list(table.index) == [style(p).label for p in pairs]
    assert table.loc[style("random").label].all()
    assert not table.loc[style("markov_optimal").label, "same model"]
    out = capsys.readouterr().out
    assert out.startswith("10 clients, m = 2, 2 rounds: the Flower run against the in-process")
    with pytest.raises(AssertionError):
        figures.check_notebook(table, _participation(), 20000, "cpu")


def test_the_selections_figure_has_a_panel_per_policy():
    fig = figures.plot_selections_side_by_side({p: _pair() for p in POLICIES}, 10, 2)
    assert [a.get_title() for a in fig.axes] == [style(p).label for p in POLICIES]
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["in process", "Flower"]


def test_the_participation_table_continues_the_flower_runs_sampler():
    configs = {
        p: simulation.mnist_config({"name": p, "m": 3, "m_prime": 10, "seed": 0}, 10, 2)
        for p in POLICIES
    }
    seen = []

    def statistics(sampler, selected, weights):
        seen.append([list(s) for s in selected])
        n = len(selected)
        return pd.DataFrame({"trace": [n, 2.0 * n], "theory": [1.0, 2.0], "intervals": [n, n]})

    pairs = {p: _pair() for p in POLICIES}
    table = figures.participation_beside_theory(pairs, configs, DATA, 50, statistics)
    assert list(table.columns) == ["Flower run", "50 rounds", "theory", "intervals (Flower, long)"]
    assert list(table.index.get_level_values(0).unique()) == [style(p).label for p in POLICIES]
    assert (
        table["Flower run"].tolist() == [2, 4] * 2 and table["50 rounds"].tolist() == [50, 100] * 2
    )
    assert (table["intervals (Flower, long)"] == "2, 50").all()
    # the Flower trace is the run's; the long one starts where a fresh sampler of the run starts
    assert seen[0] == pairs["random"][0].history["selected"]
    fresh = runs.build_trainer(configs["random"], DATA, device="cpu").sampler
    assert seen[1][:5] == [fresh.sample().ids.tolist() for _ in range(5)]


def _participation(var=(30.05, 30.0), sigma=(0.167, 0.167), largest=(65.0, np.inf), label=None):
    """A participation_beside_theory-shaped table of one policy (long trace, theory)."""
    label = label or style("random").label
    rows = {"Var[X]": var, "Sigma": sigma, "largest interval": largest}
    table = pd.DataFrame(rows, index=["20000 rounds", "theory"]).T
    table.insert(0, "Flower run", 1.0)
    table.index = pd.MultiIndex.from_product([[label], table.index])
    return table


def test_the_checks_read_the_long_trace_against_the_theory(capsys):
    agreed = figures.agreement_table({"random": _pair()})
    assert figures.check_notebook(agreed, _participation(), 20000, "cpu") == "checks passed"
    for wrong in (
        _participation(var=(34.0, 30.0)),  # Var[X] off by 13%
        _participation(sigma=(0.2, 0.167)),  # Sigma off by 20%
        _participation(largest=(7.0, 6.0)),  # an interval longer than possible
    ):
        with pytest.raises(AssertionError):
            figures.check_notebook(agreed, wrong, 20000, "cpu")
    # a deterministic chain (Var[X] = 0 in theory) keeps its initial phases: Sigma not compared
    chain = _participation(var=(0.0, 0.0), sigma=(0.226, 0.15), largest=(6.0, 6.0))
    assert figures.check_notebook(agreed, chain, 20000, "cpu") == "checks passed"
    # smoke: only the largest interval is read, and it says so
    figures.check_notebook(agreed, _participation(var=(34.0, 30.0)), 20000, "smoke")
    assert capsys.readouterr().out.startswith("skipped in smoke: the long-trace tolerances")


def test_run_both_trains_both_sides_with_one_thread_and_restores_it(monkeypatch):
    seen = []

    def fake_flower(config, *, data_root, num_cpus, threads):
        seen.append(("flower", torch.get_num_threads(), threads))
        return "flower run"

    class Trainer:
        def run(self):
            seen.append(("trainer", torch.get_num_threads()))

    monkeypatch.setattr(simulation, "run_flower", fake_flower)
    monkeypatch.setattr(simulation, "build_trainer", lambda config, data_root, device: Trainer())
    torch.set_num_threads(2)  # the conftest restores the session's count
    flower, trainer = simulation.run_both({"any": "config"}, DATA)
    assert flower == "flower run" and isinstance(trainer, Trainer)
    assert seen == [("flower", 1, 1), ("trainer", 1)]
    assert torch.get_num_threads() == 2


def test_the_cpu_profiles_long_trace_checks_hold_without_flower():
    # notebook 18's cpu settings (30 clients, m = 5, 20,000 rounds): the long traces and the
    # theory need no Flower run, so its first rounds stand in for the Flower run's records
    from aoi_fl.aoi.samplers import POLICIES as ALL
    from aoi_fl.evidence.aoi import results

    pairs, configs = {}, {}
    for policy in ALL:
        configs[policy] = simulation.mnist_config(
            {"name": policy, "m": 5, "m_prime": 10, "seed": 0}, 30, 6
        )
        sampler = runs.build_trainer(configs[policy], DATA, device="cpu").sampler
        draws = [sampler.sample() for _ in range(6)]
        history = {
            "selected": [s.ids.tolist() for s in draws],
            "weights": [s.weights.tolist() for s in draws],
        }
        pairs[policy] = (FlowerRun(history, {}), None)
    table = figures.participation_beside_theory(
        pairs, configs, DATA, 20000, results.participation_table
    )
    agreed = pd.DataFrame(True, index=table.index.unique(level=0), columns=["same selections"])
    assert figures.check_notebook(agreed, table, 20000, "cpu") == "checks passed"
    # the long traces are the ones notebook 18 prints (Policy 1's Var[X], Policy 3's Sigma)
    long = table["20000 rounds"]
    assert long[(style("random").label, "Var[X]")] == pytest.approx(30.091, abs=5e-4)
    assert long[(style("markov_optimal").label, "Sigma")] == pytest.approx(0.226, abs=5e-4)
