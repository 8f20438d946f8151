"""Runs trained together (aoi_fl.core.batch.RunBatch) have the bits they have alone.

On one machine and device every operation of a batch is per run or per client (module docstring
of aoi_fl.core.batch), so the claims here are exact equalities, not tolerances: a run alone
(FederatedTrainer.run, run_experiment), in a batch with partners, in another order and in
another batch size gives the same history and final model, for every method, every engine, the
availability models, loss probes, update feedback, screening, client losses, the
full-information mode and local epochs of uneven clients. Across machines the numbers differ in
the last bits (README, reproducibility); nothing here compares with numbers computed elsewhere.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from aoi_fl.core.batch import RunBatch, batch_signature
from aoi_fl.core.engines import client_products
from aoi_fl.evidence.arena import experiments as arena
from aoi_fl.evidence.kvib.experiments import synthetic_config
from aoi_fl.pipeline import batching
from aoi_fl.pipeline.cache import CheckpointStore
from aoi_fl.pipeline.runs import (
    build_trainer,
    cached_results,
    resolve_config,
    run_experiment,
    run_grid,
)
from tests.fedsum.test_algorithms import ALGORITHM_SPECS, ls_config

ROOT = pathlib.Path(__file__).resolve().parents[2]


def same_run(a, b) -> None:
    """Two trainers (or their histories and models) are bit for bit the same run."""
    assert json.dumps(a.history, sort_keys=True) == json.dumps(b.history, sort_keys=True)
    pa, pb = a.reported_params(), b.reported_params()
    assert pa.keys() == pb.keys()
    for k in pa:
        assert torch.equal(pa[k], pb[k]), k


def alone(configs, data_root="data"):
    trainers = [build_trainer(c, data_root, "cpu") for c in configs]
    for t in trainers:
        t.run()
    return trainers


def together(configs, data_root="data"):
    trainers = [build_trainer(c, data_root, "cpu") for c in configs]
    RunBatch(trainers).run()
    return trainers


def check_partners(configs, data_root="data") -> None:
    """Each run alone, all together, and the reversed order without the first: the same."""
    ref = alone(configs, data_root)
    for a, b in zip(ref, together(configs, data_root), strict=True):
        same_run(a, b)
    for a, b in zip(ref[:0:-1], together(configs[:0:-1], data_root), strict=True):
        same_run(a, b)


def seeded(config, seed):
    out = json.loads(json.dumps(config))
    out["model"]["seed"] = seed
    out["sampler"]["seed"] = seed
    out["training"]["seed"] = seed
    return out


# ---------------------------------------------------------------------------------------------
# every method x every engine


ENGINES = ("sequential", "stacked", "vmap", "blocked", "grouped", "linear")


@pytest.mark.parametrize("algorithm", sorted(ALGORITHM_SPECS))
@pytest.mark.parametrize("engine", ENGINES)
def test_every_method_and_engine_trains_in_a_batch_as_alone(algorithm, engine):
    base = ls_config(algorithm, rounds=6)
    base["training"]["engine"] = engine
    check_partners([seeded(base, s) for s in (0, 1, 2)])


def test_runs_of_different_horizons_and_schedules_share_a_batch():
    base = ls_config("scaffold", rounds=6)
    long = seeded(base, 1)
    long["training"]["rounds"] = 9
    other_lr = seeded(base, 2)
    other_lr["training"]["lr"] = {"name": "constant", "lr": 0.03}
    check_partners([base, long, other_lr])


# ---------------------------------------------------------------------------------------------
# what the arena, the AoI paper and K-Vib ask of the trainer


def arena_run(policy, availability, seed, tier="screen", **training):
    config = arena.config(policy, availability, seed, tier=tier, profile="smoke")
    config["training"].update(training)
    return config


@pytest.mark.slow
def test_selection_policies_and_availability_models_train_in_a_batch_as_alone(data_root):
    configs = [
        arena_run("uniform", "bernoulli", 0),
        arena_run("oort", "markov_onoff", 1),  # loss probes
        arena_run("power_of_choice", "diurnal", 2),
        arena_run("clustered_similarity", "bernoulli_size", 3),  # update feedback
        arena_run("kvib", "always", 4),
        arena_run("markov_available", "bernoulli", 5),
    ]
    check_partners(configs, data_root)


@pytest.mark.slow
def test_a_cnn_with_screening_client_losses_and_uneven_epochs_trains_in_a_batch_as_alone(
    data_root,
):
    configs = []
    for seed, engine in ((0, "blocked"), (1, "blocked"), (2, "blocked")):
        config = arena_run("random", "always", seed, tier="confirm", rounds=3, engine=engine)
        training = config["training"]
        del training["local_steps"]  # local epochs: clients of uneven sizes take uneven steps
        training.update(
            local_epochs=1,
            screen_samples=100,
            screen_target=0.3,
            client_loss_samples=5,
            eval_every=2,
        )
        configs.append(config)
    check_partners(configs, data_root)


def test_the_full_information_mode_trains_in_a_batch_as_alone():
    configs = [synthetic_config(name, 0, "smoke") for name in ("kvib", "vrb", "optimal")]
    check_partners(configs)


# ---------------------------------------------------------------------------------------------
# more than one torch thread: a lone client's product once took another kernel path


@pytest.mark.parametrize("threads", (2, 4))
@given(
    clients=st.integers(2, 9),
    shape=st.sampled_from([(64, 60, 10), (32, 784, 10), (50, 20, 1), (5, 8, 3)]),
    transposed=st.booleans(),
)
@settings(max_examples=12, deadline=None)
def test_a_clients_product_has_the_same_bits_alone_and_among_others(
    threads, clients, shape, transposed
):
    torch.set_num_threads(threads)  # the autouse fixture restores the count
    rows, inner, cols = shape
    g = torch.Generator().manual_seed(clients)
    a = torch.randn(clients, inner, rows, generator=g).transpose(1, 2)
    if not transposed:
        a = a.contiguous()
    b = torch.randn(clients, inner, cols, generator=g)
    bias = torch.randn(clients, cols, generator=g)
    together, plain = client_products(a, b, bias), client_products(a, b)
    for c in range(clients):
        one = slice(c, c + 1)
        assert torch.equal(client_products(a[one], b[one], bias[one])[0], together[c])
        assert torch.equal(client_products(a[one], b[one])[0], plain[c])


def test_runs_keep_their_bits_in_a_batch_with_two_threads():
    torch.set_num_threads(2)
    configs = [synthetic_config(name, 0, "smoke") for name in ("kvib", "vrb", "optimal")]
    check_partners(configs)
    base = ls_config("scaffold", rounds=4)
    base["training"]["engine"] = "stacked"
    check_partners([seeded(base, s) for s in (0, 1, 2)])


# ---------------------------------------------------------------------------------------------
# what may not share a batch


def test_runs_that_cannot_share_an_engine_call_are_refused_with_what_differs():
    a = build_trainer(ls_config("fedavg"), "data", "cpu")
    b = build_trainer(ls_config("scaffold"), "data", "cpu")
    with pytest.raises(ValueError, match=r"trainer 1 cannot share a batch .* \['algorithm'\]"):
        RunBatch([a, b])
    with pytest.raises(ValueError, match="at least one trainer"):
        RunBatch([])


def test_runs_on_other_samples_of_the_same_shape_are_refused():
    a = ls_config("fedavg")
    b = json.loads(json.dumps(a))
    b["dataset"]["seed"] = 7  # another draw of the synthetic regression
    ta, tb = build_trainer(a, "data", "cpu"), build_trainer(b, "data", "cpu")
    assert batch_signature(ta) == batch_signature(tb)
    with pytest.raises(ValueError, match="other training or test samples"):
        RunBatch([ta, tb])


# ---------------------------------------------------------------------------------------------
# run_grid: grouped by itself, stored run by run, the same cache as one run at a time


def test_run_grid_batches_missing_runs_and_stores_the_bytes_of_runs_alone(tmp_path):
    configs = [seeded(ls_config(alg, rounds=5), s) for alg in ("fedavg", "fedsum") for s in (0, 1)]
    seen = []
    batched = run_grid(
        configs,
        results_dir=str(tmp_path / "batched"),
        progress=False,
        on_result=lambda i, r: seen.append(i),
    )
    one_by_one = run_grid(configs, results_dir=str(tmp_path / "alone"), progress=False, batch=1)
    assert sorted(seen) == [0, 1, 2, 3]
    assert [r.history for r in batched] == [r.history for r in one_by_one]
    for a, b in zip(batched, one_by_one, strict=True):
        assert a.history == run_experiment(a.config, results_dir=str(tmp_path / "single")).history
        assert a.key == b.key
    files = sorted(p.relative_to(tmp_path / "alone") for p in (tmp_path / "alone").rglob("*.*"))
    assert files
    for name in files:
        assert (tmp_path / "batched" / name).read_bytes() == (
            tmp_path / "alone" / name
        ).read_bytes()


def test_the_batch_rule_groups_by_shape_and_caps_by_memory(monkeypatch):
    configs = [resolve_config(ls_config(alg)) for alg in ("fedavg", "fedavg", "scaffold")]
    keys = [batching.batch_key(c, None) for c in configs]
    assert keys[0] == keys[1] != keys[2]
    assert batching.batch_groups(keys, [1, 1, 1]) == [[0], [1], [2]]
    assert batching.batch_groups(keys, [2, 2, 2]) == [[0, 1], [2]]
    # the rule: half the free memory over a run's charge, within [1, MAX_RUNS]
    monkeypatch.setattr(batching, "free_bytes", lambda device: 10 * 2**20)
    assert batching.runs_per_batch(2**20, None, None) == 5
    assert batching.runs_per_batch(2**30, None, None) == 1
    assert batching.runs_per_batch(1, None, None) == batching.MAX_RUNS["cpu"]
    assert batching.runs_per_batch(2**30, None, 3) == 3  # the caller's cap wins
    assert batching.run_bytes(1000, 10) == 4 * 1000 * (4 + 30)


@pytest.mark.parametrize("value", ["0", "-2", "many", "1.5"])
def test_a_bad_batch_setting_is_refused_by_name(monkeypatch, value):
    monkeypatch.setenv(batching.BATCH_VAR, value)
    with pytest.raises(ValueError, match=batching.BATCH_VAR):
        run_grid([ls_config("fedavg")], results_dir="/nonexistent/never-written", progress=False)


def test_a_bad_batch_argument_is_refused_before_any_run_trains(tmp_path, rounds_run):
    with pytest.raises(ValueError, match="batch must be"):
        run_grid([ls_config("fedavg")], results_dir=str(tmp_path), progress=False, batch=0)
    assert rounds_run == [] and not any(tmp_path.iterdir())


# ---------------------------------------------------------------------------------------------
# kill a batch, resume it: every run byte-identical to an uninterrupted one

_CHILD = """
import json, sys, time
import aoi_fl.core.batch as batch
from aoi_fl.pipeline import experiment, runs
original = batch.RunBatch._train_together
def slow(self, works):
    out = original(self, works)
    time.sleep(0.3)
    return out
batch.RunBatch._train_together = slow
original_checkpointer = experiment._checkpointer
experiment._checkpointer = lambda store, every, seconds: original_checkpointer(store, 2, 0)
runs.run_grid(json.loads(sys.argv[1]), results_dir=sys.argv[2], progress=False)
"""


@pytest.mark.slow
def test_a_killed_batch_resumes_to_the_bytes_of_an_uninterrupted_one(tmp_path):
    configs = [seeded(ls_config(alg, rounds=12), s) for alg in ("fedsum",) for s in (0, 1, 2)]
    killed = tmp_path / "killed"
    latest = [CheckpointStore(killed, resolve_config(c)).folder / "latest.json" for c in configs]
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, json.dumps(configs), str(killed)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        deadline = time.monotonic() + 120
        while not all(p.exists() for p in latest) and time.monotonic() < deadline:
            assert child.poll() is None, "the batch ended before it could be killed"
            time.sleep(0.05)
        time.sleep(0.4)  # between two checkpoints
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert all(p.exists() for p in latest), "no checkpoint of every run before the kill"
    resumed = run_grid(configs, results_dir=str(killed), progress=False)
    clean = run_grid(configs, results_dir=str(tmp_path / "clean"), progress=False)
    assert [r.history for r in resumed] == [r.history for r in clean]
    for name in sorted(
        p.relative_to(tmp_path / "clean") for p in (tmp_path / "clean").rglob("*.*")
    ):
        assert (killed / name).read_bytes() == (tmp_path / "clean" / name).read_bytes(), name


# ---------------------------------------------------------------------------------------------
# a committed run replayed in a batch of one: what the new evaluation of single-linear models
# changed (README, "Many runs as one computation")

#: measured on 24 committed arena screen runs over their 200 rounds: accuracy one test image
#: (1e-4) apart at one evaluation in 2 runs, test losses within 4.7e-7 (relative); another CPU
#: moves a linear model's losses by about 1e-8 after 20 rounds (README, "What reproducible
#: promises"). The bounds are about 3 and 20 times the largest of these.
ACCURACY_TOLERANCE, LOSS_TOLERANCE = 3e-4, 1e-5


@pytest.mark.cpu_sensitive
def test_a_committed_arena_run_replayed_in_a_batch_of_one_keeps_its_numbers(data_root):
    config = arena.config("uniform", "bernoulli", 0, tier="screen", profile="cpu")
    committed, missing = cached_results([config], results_dir=str(ROOT / "results"))
    if missing:
        pytest.skip("the committed arena screen run is not in results/")
    config["training"]["rounds"] = 20
    alone_run = build_trainer(config, data_root, "cpu")
    alone_run.run()
    batched = build_trainer(config, data_root, "cpu")
    RunBatch([batched]).run()
    same_run(alone_run, batched)
    h, ref = batched.history, committed[0].history
    n = len(h["test_accuracy"])
    assert h["eval_round"] == ref["eval_round"][:n]
    assert h["test_accuracy"] == pytest.approx(ref["test_accuracy"][:n], abs=ACCURACY_TOLERANCE)
    assert h["test_loss"] == pytest.approx(ref["test_loss"][:n], rel=LOSS_TOLERANCE)
