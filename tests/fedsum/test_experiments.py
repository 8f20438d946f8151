"""The FedSUM experiment plans (the paper's settings), the compact run summaries and the result
tables used to check the paper's claims."""

from pathlib import Path

import numpy as np
import pytest
import torch

from aoi_fl.core import delays as trace_delays
from aoi_fl.data.datasets import load_dataset, load_mnist, normalize_mnist
from aoi_fl.evidence.fedsum import experiments as fx
from aoi_fl.evidence.fedsum import results as fr
from aoi_fl.fedsum import delays
from aoi_fl.fedsum.patterns import Bernoulli, DeterministicCyclic, UniformSubset
from aoi_fl.pipeline import experiment, runs
from aoi_fl.pipeline.cache import config_key

#: the repository's data folder, whatever the working directory
DATA = str(Path(__file__).resolve().parents[2] / "data")

# ---------------------------------------------------------------------------------------------
# Plans


def test_main_plan_has_the_papers_setting_and_one_trace_per_seed():
    planned = fx.plan("main", "paper")
    assert len(planned) == 8 * 3 * 3
    for p in planned:
        c = runs.resolve_config(p.config)
        t = c["training"]
        assert c["partition"] == {
            "name": "dirichlet_prior",
            "n_clients": 100,
            "seed": p.seed,
            "alpha": 0.1,
        }
        assert c["model"]["name"] == "small_cnn"
        assert (t["local_steps"], t["batch_size"], t["rounds"]) == (10, 128, 2000)
        assert t["lr"] == {"name": "inverse_sqrt", "lr0": 0.01, "period": 10.0}
        assert t["algorithm"].get("server_lr") == 1.0
    samplers = {(p.pattern, p.seed): [] for p in planned}
    for p in planned:
        samplers[(p.pattern, p.seed)].append(p.config["sampler"])
    # every method of one (pattern, seed) sees the same participation trace
    assert all(all(s == v[0] for s in v) for v in samplers.values())
    specs = {p.algorithm: p.config["training"]["algorithm"] for p in planned}
    assert specs["fedau"]["cutoff"] == 50 and specs["fedawe"]["clip"] == 0.5
    assert specs["fedsum"]["local_steps"] == 10
    assert specs["fedavg"] == {"name": "fedavg", "aggregation": "weighted_delta", "server_lr": 1.0}
    p3 = next(p for p in planned if p.pattern == "P3").config["sampler"]
    assert (p3["p"], p3["amplitude"], p3["offset"], p3["period"]) == (0.2, 0.3, 0.7, 10.0)


def test_figure_plans_share_runs_and_use_their_step_sizes():
    main = {config_key(runs.resolve_config(p.config)) for p in fx.plan("main", "cpu")}
    cases = fx.plan("cases", "cpu")
    shared = [p for p in cases if config_key(runs.resolve_config(p.config)) in main]
    assert {(p.pattern, p.algorithm) for p in shared} == {("P1", "fedsum"), ("P2", "fedsum")}
    assert {(p.pattern, p.algorithm) for p in cases} == {
        *((c, "fedsum") for c in fx.CASES),
        ("biased", "fedavg"),
    }
    grid = fx.plan("p_grid", "paper")
    assert [p.config["sampler"]["p"] for p in grid[:5]] == [0.05, 0.1, 0.2, 0.5, 1.0]
    assert grid[0].config["training"]["lr"] == {"name": "constant", "lr": 0.01}
    family = fx.plan("family", "cpu")
    assert {p.algorithm for p in family} == {"fedsum_b", "fedsum", "fedsum_cr"}
    assert family[0].config["training"]["lr"] == {"name": "constant", "lr": 0.1}


def test_cifar_plan_uses_the_papers_cifar_cnn_or_labelled_synthetic_data():
    real = fx.plan("family", "paper", "cifar10")[0].config
    assert real["dataset"] == {"name": "cifar10"}
    assert real["model"]["name"] == "fedsum_cifar_cnn"
    fake = fx.plan("family", "smoke", "cifar10", synthetic=True)[0].config
    assert fake["dataset"]["name"] == "synthetic_cifar"
    with pytest.raises(ValueError, match="synthetic=True is for CIFAR-10 only"):
        fx.plan("main", "smoke", "mnist", synthetic=True)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: fx.plan("fig99", "cpu"), "unknown figure 'fig99'"),
        (lambda: fx.plan("main", "gpu"), "unknown profile 'gpu'"),
        (lambda: fx.pattern_spec("P4", "cpu"), "unknown pattern 'P4'"),
        (lambda: fx.pattern_spec("bernoulli", "cpu"), "needs p"),
        (lambda: fx.algorithm_spec("fedprox", "cpu"), "unknown algorithm 'fedprox'"),
        (lambda: fx.plan("main", "cpu", "svhn"), "unknown dataset 'svhn'"),
    ],
)
def test_bad_plan_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---------------------------------------------------------------------------------------------
# Summaries


def test_summarise_weights_client_losses_by_data_size():
    history = {
        "eval_round": [0, 2],
        "client_losses": [[1.0, 3.0], [0.5, 1.0]],
        "test_loss": [2.0, 1.0],
        "test_accuracy": [0.1, 0.5],
        "selected": [[0], [], [0, 1]],
    }
    s = fx.summarise(history, np.array([30, 10]), (2, 1))
    assert np.allclose(s["train_loss"], [1.5, 0.625])  # (30 * 1 + 10 * 3) / 40, ...
    assert np.allclose(s["objective"], [2.0, 0.75])  # the paper's (1/N) sum_i f_i
    assert s["active"].tolist() == [1, 0, 2]
    assert (s["tau_max"], s["tau_avg"]) == (2, 1.0)  # tau_t = 1, 2, 0 (client 1 first in t=2)
    run = fx.RunSummary(
        None,
        **{
            k: s[k]
            for k in (
                "eval_round",
                "train_loss",
                "objective",
                "test_loss",
                "test_accuracy",
                "active",
            )
        },
        tau_max=2,
        tau_avg=1.0,
        communication=(2, 1),
    )
    assert run.units().tolist() == [0, 3]  # one client-round x (2 + 1) vectors by round 2
    with pytest.raises(ValueError, match="client_loss_samples > 0"):
        fx.summarise({**history, "client_losses": []}, np.array([30, 10]), (1, 1))


def test_run_planned_caches_small_summaries_and_reuses_them(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    planned = [p for p in fx.plan("cases", "smoke") if p.pattern in ("P2", "biased")]
    out = fx.run_planned(
        planned,
        results_dir=str(tmp_path),
        work_dir=str(tmp_path / "full"),
        data_root=DATA,
        progress=False,
    )
    assert [(s.planned.pattern, s.planned.algorithm) for s in out] == [
        ("P2", "fedsum"),
        ("biased", "fedsum"),
        ("biased", "fedavg"),
    ]
    full = runs.run_experiment(
        planned[0].config, results_dir=str(tmp_path / "full"), data_root=DATA
    )
    assert full.cached  # the full history went to the work folder
    s = out[0]
    assert s.eval_round.tolist() == full.history["eval_round"]
    assert s.test_accuracy.tolist() == full.history["test_accuracy"]
    assert s.active.tolist() == [len(ids) for ids in full.history["selected"]]
    assert s.tau_max == trace_delays.trace_metrics(full.history["selected"], 10).tau_max
    assert s.communication == (2, 1) and out[2].communication == (1, 1)
    sizes = runs.build_trainer(planned[0].config, DATA).data.sizes
    losses = np.asarray(full.history["client_losses"])
    assert np.allclose(s.train_loss, losses @ sizes / sizes.sum())

    def no_training(*args, **kwargs):
        raise AssertionError("cached summaries must not be recomputed")

    monkeypatch.setattr(fx, "run_grid", no_training)  # where run_planned looks it up
    again = fx.run_planned(
        planned, results_dir=str(tmp_path), work_dir=str(tmp_path / "x"), data_root=DATA
    )
    assert np.array_equal(again[1].train_loss, out[1].train_loss)
    summary_files = [p for p in (tmp_path / "runs").rglob("*") if p.is_file()]
    assert summary_files and all(p.stat().st_size < 20_000 for p in summary_files)


def test_run_planned_keeps_the_summaries_of_runs_finished_before_a_failure(tmp_path, monkeypatch):
    # a long grid interrupted mid-way must not lose the summaries of its finished runs
    torch.set_num_threads(1)
    planned = [p for p in fx.plan("cases", "smoke") if p.pattern in ("P2", "biased")][:2]
    real_store = experiment._stored
    second = runs.resolve_config(planned[1].config)

    def second_run_fails(run, *args):
        # the two runs train in one batch: the second is interrupted as it is stored
        if run.canonical() == second:
            raise KeyboardInterrupt("interrupted")
        return real_store(run, *args)

    monkeypatch.setattr(experiment, "_stored", second_run_fails)
    with pytest.raises(KeyboardInterrupt):
        fx.run_planned(
            planned,
            results_dir=str(tmp_path),
            work_dir=str(tmp_path / "full"),
            data_root=DATA,
            progress=False,
        )
    monkeypatch.setattr(experiment, "_stored", real_store)

    def no_training(*args, **kwargs):
        raise AssertionError("a stored summary must not be recomputed")

    monkeypatch.setattr(fx, "run_grid", no_training)  # where run_planned looks it up
    (first,) = fx.run_planned(
        planned[:1], results_dir=str(tmp_path), work_dir=str(tmp_path / "x"), data_root=DATA
    )
    assert first.planned == planned[0] and len(first.eval_round) > 0


@pytest.mark.slow
def test_mnist_subset_is_the_first_samples(tmp_path):
    small = load_dataset("mnist", DATA, n_train=50, n_test=7)
    assert (len(small.train), len(small.test)) == (50, 7)
    x, _ = load_mnist(DATA, train=True)
    assert torch.equal(small.train.x, normalize_mnist(x[:50]))
    assert torch.equal(small.test.y, load_mnist(DATA, train=False)[1][:7])
    with pytest.raises(ValueError, match="n_train must be >= 1"):
        load_dataset("mnist", DATA, n_train=0)


# ---------------------------------------------------------------------------------------------
# Result tables


def fake_run(pattern, algorithm, seed, acc, loss, active=None):
    acc, loss = np.asarray(acc, dtype=float), np.asarray(loss, dtype=float)
    rounds = np.arange(acc.size) * 2
    planned = fx.Planned("main", "mnist", pattern, algorithm, seed, {})
    active = np.full(rounds[-1], 4) if active is None else np.asarray(active)
    return fx.RunSummary(planned, rounds, loss, loss, loss, acc, active, 5, 2.5, (1, 1))


def test_final_table_first_reach_and_oscillation():
    runs_ = [
        fake_run("P1", "fedsum", 0, [0.1, 0.5, 0.8, 0.9], [2.0, 1.0, 0.5, 0.4]),
        fake_run("P1", "fedsum", 1, [0.1, 0.4, 0.6, 0.7], [2.0, 1.2, 0.8, 0.6]),
        fake_run("P1", "fedavg", 0, [0.1, 0.6, 0.5, 0.6], [2.0, 0.9, 0.9, 0.8]),
    ]
    assert fr.first_reach(runs_[0], 0.8) == (4.0, 32.0)  # 4 rounds x 4 clients x (1 + 1)
    assert all(np.isnan(fr.first_reach(runs_[2], 0.8)))
    assert fr.first_reach(runs_[0], 0.5, "train_loss") == (4.0, 32.0)  # losses: <= threshold
    assert np.isnan(fr.oscillation(runs_[0]))  # second half: one difference, no spread
    wobbly = fake_run("P1", "fedsum", 0, [0, 0, 0, 0.1, 0.3, 0.4], [1] * 6)
    assert fr.oscillation(wobbly) == pytest.approx(0.05)  # std of the changes 0.2, 0.1
    table = fr.final_table(runs_, last=2, threshold=0.8)
    assert table.loc[("P1", "fedsum"), "test_accuracy"] == pytest.approx((0.85 + 0.65) / 2)
    assert table.loc[("P1", "fedsum"), "test_accuracy min"] == pytest.approx(0.65)
    assert table.loc[("P1", "fedsum"), "reached"] == "1/2"
    assert table.loc[("P1", "fedsum"), "rounds to threshold"] == 4.0
    assert np.isnan(table.loc[("P1", "fedavg"), "rounds to threshold"])
    h2h = fr.head_to_head(table, "train_loss", ["fedsum"], ["fedavg"])
    assert h2h.loc[("P1", "fedsum"), "margin"] == pytest.approx(0.85 - 0.575)
    assert bool(h2h.loc[("P1", "fedsum"), "beats all"])
    h2h = fr.head_to_head(table, "test_accuracy", ["fedavg"], ["fedsum"])
    assert h2h.loc[("P1", "fedavg"), "margin"] == pytest.approx(0.55 - 0.75)
    with pytest.raises(ValueError, match="unknown metric"):
        fr.head_to_head(table, "speed", ["fedsum"], ["fedavg"])


def test_metrics_at_a_communication_budget():
    cheap = fake_run("P1", "fedsum_cr", 0, [0.1, 0.5, 0.9], [2, 1, 0.5], active=[4] * 4)
    dear = fake_run("P1", "fedsum", 0, [0.1, 0.6, 0.95], [2, 1, 0.4], active=[8] * 4)
    # evaluations every 2 rounds; 4 or 8 active clients a round, 1 + 1 vectors each
    assert cheap.units().tolist() == [0, 16, 32] and dear.units().tolist() == [0, 32, 64]
    assert fr.at_budget(cheap, "test_accuracy", 32) == 0.9
    assert fr.at_budget(dear, "test_accuracy", 32) == 0.6
    assert np.isnan(fr.at_budget(dear, "test_accuracy", 20))  # only the initial model
    table = fr.budget_table([cheap, dear], "test_accuracy", 32)
    assert table.loc["P1"].to_dict() == {"budget": 32, "fedsum_cr": 0.9, "fedsum": 0.6}
    # default: the largest budget every run of the pattern spent (the cheap run's 32)
    assert fr.budget_table([cheap, dear], "test_accuracy").equals(table)


def _delays_by_definition(trace, n):
    """tau_t = max_i (t - last round <= t with i active, -1 before any), straight from eq. 4."""
    last = np.full(n, -1)
    taus = []
    for t, ids in enumerate(trace):
        last[list(ids)] = t
        taus.append(t - last.min())
    return np.array(taus)


def test_delay_table_over_seeds():
    # catches aggregation slips in the table: min and max swapped, tau_max and tau_avg
    # mixed up, a mean over the wrong axis, the seeds ignored, a mislabelled row
    seeds, rounds = [0, 1, 2], 50
    builders = {
        "uniform": lambda s: UniformSubset(10, 5, s),
        "bernoulli": lambda s: Bernoulli(10, 0.3, s),
        "cyclic": lambda s: DeterministicCyclic(10, 5),
    }
    table = delays.delay_table(builders, rounds, seeds)
    assert list(table.index) == list(builders)
    for name, build in builders.items():
        traces = []
        for seed in seeds:
            sampler = build(seed)
            traces.append([sampler.sample().ids.tolist() for _ in range(rounds)])
        taus = [_delays_by_definition(trace, 10) for trace in traces]
        tau_max = np.array([t.max() for t in taus], dtype=float)
        tau_avg = np.array([t.mean() for t in taus])
        row = table.loc[name]
        assert (row["tau_max"], row["tau_max min"], row["tau_max max"]) == pytest.approx(
            (tau_max.mean(), tau_max.min(), tau_max.max())
        )
        assert (row["tau_avg"], row["tau_avg min"], row["tau_avg max"]) == pytest.approx(
            (tau_avg.mean(), tau_avg.min(), tau_avg.max())
        )
        sizes = [len(ids) for trace in traces for ids in trace]
        assert row["mean |S_t|"] == pytest.approx(np.mean(sizes))
    # closed forms: 5 of 10 every round; the cyclic pattern alternates halves, tau_t = 1
    assert table.loc["uniform", "mean |S_t|"] == 5.0
    assert table.loc["cyclic"].tolist() == [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 5.0]
    # the Bernoulli seeds differ, so the spread over seeds is not empty
    assert table.loc["bernoulli", "tau_max min"] < table.loc["bernoulli", "tau_max max"]


# ---------------------------------------------------------------------------------------------
# The long-horizon panel (issue 13)


def test_long_panel_cpu_plan_is_the_papers_setting_at_2000_rounds_with_a_logistic_model():
    planned = fx.plan("long", "cpu")
    assert len(planned) == 9 * 3 * 2 == 54
    assert {p.algorithm for p in planned} == set(fx.LONG_ALGORITHMS) and len(
        fx.LONG_ALGORITHMS
    ) == 9
    assert {p.pattern for p in planned} == set(fx.MAIN_PATTERNS)
    assert {p.seed for p in planned} == {0, 1}
    main = {(p.pattern, p.algorithm, p.seed): p.config for p in fx.plan("main", "paper")}
    for p in planned:
        c = runs.resolve_config(p.config)
        t = c["training"]
        assert c["model"] == {
            "name": "logistic_regression",
            "in_features": 784,
            "num_classes": 10,
            "seed": p.seed,
        }
        assert c["partition"]["n_clients"] == 100 and c["partition"]["alpha"] == 0.1
        assert (t["local_steps"], t["batch_size"], t["rounds"]) == (10, 128, 2000)
        assert t["lr"] == {"name": "inverse_sqrt", "lr0": 0.01, "period": 10.0}
        assert (t["eval_every"], t["engine"]) == (20, "linear")
        assert t["client_loss_samples"] >= 60000  # every client's full loss
        same = main.get((p.pattern, p.algorithm, 0))
        if same is not None:  # the paper's sampler and method settings, unchanged
            assert p.config["sampler"] == {**same["sampler"], "seed": p.seed}
            assert p.config["training"]["algorithm"] == same["training"]["algorithm"]
    assert len({config_key(runs.resolve_config(p.config)) for p in planned}) == 54


def test_long_panel_paper_profile_uses_the_cnn_at_the_same_horizon():
    planned = fx.plan("long", "paper")
    assert len(planned) == 9 * 3 * 3
    for p in planned:
        c = runs.resolve_config(p.config)
        assert c["model"]["name"] == "small_cnn"
        assert c["training"]["rounds"] == 2000 and c["training"]["engine"] == "auto"
    with pytest.raises(ValueError, match="MNIST only"):
        fx.plan("long", "paper", "cifar10")


def test_long_panel_paired_seeds_share_partition_model_and_trace():
    planned = fx.plan("long", "cpu") + fx.plan("long_cases", "cpu")
    by_seed = {}
    for p in planned:
        c = runs.resolve_config(p.config)
        by_seed.setdefault(p.seed, []).append((p, c))
    for items in by_seed.values():
        assert len({config_key(c["partition"]) for _, c in items}) == 1
        assert len({config_key(c["model"]) for _, c in items}) == 1
        traces = {}
        for p, c in items:
            traces.setdefault(p.pattern, set()).add(config_key(c["sampler"]))
        assert all(len(v) == 1 for v in traces.values())
    assert by_seed[0][0][1]["partition"] != by_seed[1][0][1]["partition"]
    cases = fx.plan("long_cases", "cpu")
    assert {(p.pattern, p.algorithm) for p in cases} == {
        ("cyclic", "fedsum"),
        ("reshuffled", "fedsum"),
        ("biased", "fedsum"),
        ("biased", "fedavg"),
    }
    grid = fx.plan("long_p_grid", "cpu")
    assert grid[0].config["training"]["lr"] == {"name": "constant", "lr": 0.01}
    assert all(p.config["training"]["rounds"] == 2000 for p in grid)


def test_long_panel_smoke_plan_is_small():
    planned = fx.plan("long", "smoke")
    c = runs.resolve_config(planned[0].config)
    assert c["partition"]["n_clients"] == 10 and c["training"]["rounds"] <= 10
    assert c["dataset"]["n_train"] <= 2000
    assert {p.seed for p in planned} == {0, 1}


def _curve(final, start, wobble=0.0):
    """7 evaluations: ``start``, then ``final``, wavering by ``wobble`` in the second half."""
    return [start, final, final, final + wobble, final - wobble, final + wobble, final]


def _claim_runs(
    fedsum_acc, fedsum_cr_acc, *, seeds=(0, 1), biased_acc=None, cases_acc=None, fedavg_acc=0.5
):
    """Fake long-panel runs: per seed, every method rising from 0.1 to a final accuracy ``acc``
    (0.8 unless given) and falling from 2 to a training loss 1 - acc under P1, the baselines
    wavering late by 0.01 (FedSUM's family steady); FedSUM's seed-dependent accuracies from the
    arguments, and under biased sampling FedAvg's ``fedavg_acc``."""
    out = []
    for i, seed in enumerate(seeds):
        accs = {a: 0.8 for a in fx.LONG_ALGORITHMS}
        accs["fedsum"], accs["fedsum_cr"] = fedsum_acc[i], fedsum_cr_acc[i]
        for a, acc in accs.items():
            w = 0.0 if a in fx.FAMILY else 0.01
            out.append(fake_run("P1", a, seed, _curve(acc, 0.1, w), _curve(1 - acc, 2.0, -w)))
        for case, acc in (cases_acc or {}).items():
            out.append(fake_run(case, "fedsum", seed, _curve(acc[i], 0.1), _curve(1 - acc[i], 2.0)))
        if biased_acc is not None:
            for a, acc in (("fedsum", biased_acc[i]), ("fedavg", fedavg_acc)):
                out.append(fake_run("biased", a, seed, _curve(acc, 0.1), _curve(1 - acc, 2.0)))
    return out


def test_claims_table_verdict_branches():
    # every part is judged by the paired 95% t interval over seeds (3 seeds here: 2 df)
    three = (0, 1, 2)
    # (i): FedSUM and FedSUM-CR end above the best baseline (0.8) by 0.10, 0.05, 0.08, so
    # their horizon means lie above it by 11/12 of that (the first 2 of 12 rounds are shared
    # half-way) less the baselines' late wavering, and they are steadier -> held
    held = fr.long_claims(_claim_runs([0.9, 0.85, 0.88], [0.9, 0.85, 0.88], seeds=three))
    assert held.loc["(i)", "verdict"] == "held" and held.loc["(i)", "parts held"] == "6/6"
    assert "claim's side in 3/3 seeds, mean +0.0686" in held.loc["(i)", "numbers"]
    # below the best baseline in every seed -> not held
    worse = fr.long_claims(_claim_runs([0.7, 0.75, 0.72], [0.9, 0.85, 0.88], seeds=three))
    assert worse.loc["(i)", "verdict"] == "not held"
    # the seeds disagree: the interval straddles 0 -> inconclusive at this budget
    mixed = fr.long_claims(_claim_runs([0.9, 0.7, 0.85], [0.9, 0.7, 0.85], seeds=three))
    assert mixed.loc["(i)", "verdict"] == "inconclusive at this budget"
    # 2 seeds on the same side, but far apart: the 1-df interval straddles 0
    two = fr.long_claims(_claim_runs([0.9, 0.81], [0.9, 0.81]))
    assert two.loc["(i)", "verdict"] == "inconclusive at this budget"
    assert "claim's side in 2/2 seeds" in two.loc["(i)", "numbers"]
    # (ii): FedSUM-CR ties with FedSUM: a margin of 0 decides nothing
    assert held.loc["(ii)", "verdict"] == "inconclusive at this budget"
    assert held.loc["(ii)", "parts held"] == "2/4"  # FedSUM does beat the baselines
    lead = _claim_runs([0.85, 0.85, 0.84], [0.9, 0.91, 0.9], seeds=three)
    assert fr.long_claims(lead).loc["(ii)", "verdict"] == "held"
    # (v): FedSUM-CR above FedSUM, FedSUM-B (0.8) more than the margins (1 point, 1% of the
    # loss) below FedSUM -> not held
    v = fr.long_claims(_claim_runs([0.9, 0.9, 0.9], [0.95, 0.96, 0.95], seeds=three)).loc["(v)"]
    assert v["verdict"] == "not held" and v["parts held"] == "2/4"
    # (iii), (iv), (viii) need runs the main panel lacks
    for claim in ("(iv)", "(viii)"):
        assert held.loc[claim, "verdict"] == "inconclusive"
        assert held.loc[claim, "numbers"] == "no runs for it in this panel"
    assert held.loc["(iii)", "verdict"] == "inconclusive"  # only Case 1 (P1) present
    assert "missing" in held.loc["(iii)", "numbers"]
    cases = {
        "P2": [0.88, 0.84, 0.86],
        "cyclic": [0.9, 0.86, 0.89],
        "reshuffled": [0.87, 0.83, 0.86],
    }

    def panel(cases_acc, biased_acc, fedavg_acc=0.5):
        base = [0.9, 0.85, 0.88]
        runs = _claim_runs(
            base, base, seeds=three, cases_acc=cases_acc, biased_acc=biased_acc,
            fedavg_acc=fedavg_acc,
        )  # fmt: skip
        return fr.long_claims(runs)

    full = panel(cases, [0.95, 0.95, 0.95])
    assert full.loc["(iii)", "verdict"] == "held" and full.loc["(iii)", "parts held"] == "2/2"
    assert full.loc["(viii)", "verdict"] == "held" and full.loc["(viii)", "parts held"] == "2/2"
    # (viii) is App. H.8's "does not affect FedSUM": FedAvg doing better under biased sampling
    # is no part of it
    beaten = panel(cases, [0.95, 0.95, 0.95], fedavg_acc=0.99)
    assert beaten.loc["(viii)", "verdict"] == "held"
    assert "fedavg" not in beaten.loc["(viii)", "numbers"]
    spread = {**cases, "cyclic": [0.99, 0.99, 0.99]}
    bad = panel(spread, [0.1, 0.1, 0.1])
    assert bad.loc["(iii)", "verdict"] == "not held"
    assert bad.loc["(viii)", "verdict"] == "not held"
    assert set(full["verdict"]) <= set(fr.VERDICTS)
    assert list(full.index) == ["(i)", "(ii)", "(iii)", "(iv)", "(v)", "(viii)"]


def test_a_part_is_judged_by_its_paired_t_interval():
    # 0.1 and 0.05: mean 0.075, half-width t_{0.975, 1} * sd / sqrt(2) = 0.3177 -> straddles 0
    verdict, text = fr.part_verdict([0.1, 0.05])
    assert verdict == "inconclusive at this budget"
    assert "claim's side in 2/2 seeds, mean +0.075, 95% t interval [-0.243, +0.393]" in text
    assert fr.part_verdict([0.1, 0.11, 0.09])[0] == "held"
    assert fr.part_verdict([-0.1, -0.11, -0.09])[0] == "not held"
    # a bound and a side: a spread below 0.05, an accuracy margin above -0.01
    assert fr.part_verdict([0.02, 0.03, 0.025], 0.05, "negative")[0] == "held"
    assert fr.part_verdict([-0.005, -0.004, -0.006], -0.01)[0] == "held"
    # one seed gives no interval; float noise is no direction
    assert fr.part_verdict([0.5])[0] == "inconclusive at this budget"
    assert fr.part_verdict([1e-16, 2e-16])[0] == "inconclusive at this budget"
    assert fr.combine_verdicts(["held", "held"]) == "held"
    assert fr.combine_verdicts(["held", "inconclusive at this budget"]) == (
        "inconclusive at this budget"
    )
    assert fr.combine_verdicts(["held", "not held", "inconclusive at this budget"]) == "not held"
    assert fr.combine_verdicts(["held", "inconclusive"]) == "inconclusive"  # runs missing
    assert fr.combine_verdicts([]) == "inconclusive"


def test_claims_table_p_grid_and_helpers():
    grid = []
    for seed in (0, 1):
        for p, acc in ((0.05, 0.5), (0.1, 0.6), (0.2, 0.7), (0.5, 0.8)):
            grid.append(fake_run(f"p={p:g}", "fedsum", seed, [0.1, acc], [2.0, 1 - acc]))
    assert fr.long_claims(grid).loc["(iv)", "verdict"] == "held"
    # the same accuracies in reverse order of p: a smaller p does better
    reverse = [
        fake_run(f"p={p:g}", "fedsum", seed, [0.1, acc], [2.0, 1 - acc])
        for seed in (0, 1)
        for p, acc in ((0.05, 0.8), (0.1, 0.7), (0.2, 0.6), (0.5, 0.5))
    ]
    assert fr.long_claims(reverse).loc["(iv)", "verdict"] == "not held"
    # one seed each way: the interval of rho straddles both 0.8 and 0
    mixed = grid[:4] + reverse[4:]
    assert fr.long_claims(mixed).loc["(iv)", "verdict"] == "inconclusive at this budget"
    a = [fake_run("P1", "fedsum", s, [0, 0.9], [1, 1]) for s in (0, 1)]
    b = [fake_run("P1", "fedavg", s, [0, 0.8], [1, 1]) for s in (1, 2)]
    with pytest.raises(ValueError, match="same seeds"):
        fr.paired_margins(a, b, lambda r: r.test_accuracy[-1])
