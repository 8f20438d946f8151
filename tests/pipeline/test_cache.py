"""Tests of aoi_fl.pipeline.cache and run_experiment: keys, hits, corruption, checkpoints,
kill-resume."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from aoi_fl.pipeline import cache, experiment, resolve, runs
from aoi_fl.pipeline.cache import (
    RESULTS_FORMAT_VERSION,
    CheckpointStore,
    ResultStore,
    atomic_write_bytes,
    config_key,
)
from aoi_fl.pipeline.runs import resolve_config, run_experiment

CONFIG = {
    "dataset": {"name": "synthetic_cifar", "n_train": 240, "n_test": 60, "seed": 0},
    "partition": {"name": "dirichlet", "n_clients": 8, "seed": 0, "alpha": 0.5, "min_size": 5},
    "model": {"name": "logistic_regression", "in_features": 3072, "num_classes": 10, "seed": 0},
    "sampler": {"name": "markov_optimal", "m": 3, "m_prime": 3, "seed": 0},
    "training": {
        "rounds": 6,
        "local_epochs": 1,
        "batch_size": 10,
        "lr": {"name": "exponential", "lr0": 0.002, "decay": 0.99},
    },
}


def with_changes(config, section, **changes):
    out = json.loads(json.dumps(config))
    out[section].update(changes)
    return out


def run(tmp_path, config=CONFIG, **kw):
    return run_experiment(config, results_dir=str(tmp_path), progress=False, **kw)


def assert_same_run(a, b):
    assert a.history == b.history
    assert a.final_params.keys() == b.final_params.keys()
    for k in a.final_params:
        np.testing.assert_array_equal(a.final_params[k], b.final_params[k])


# ---------------------------------------------------------------------------------------------
# keys and storage primitives


def test_config_key_is_canonical_and_sensitive():
    resolved = resolve_config(CONFIG)
    shuffled = {k: resolved[k] for k in reversed(list(resolved))}
    assert config_key(shuffled) == config_key(resolved)
    assert len(config_key(resolved)) == 24
    for section, change in [
        ("sampler", {"seed": 1}),
        ("sampler", {"name": "random"}),
        ("partition", {"alpha": 0.3}),
        ("model", {"seed": 2}),
        ("dataset", {"n_train": 241}),
        ("training", {"batch_size": 11}),
    ]:
        assert config_key(resolve_config(with_changes(CONFIG, section, **change))) != config_key(
            resolved
        ), (section, change)
    # defaults filled in: spelling a default out gives the same key
    explicit = with_changes(CONFIG, "training", eval_every=1, engine="auto")
    assert config_key(resolve_config(explicit)) == config_key(resolved)


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    target = tmp_path / "sub" / "file.bin"
    atomic_write_bytes(target, b"one")
    atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two"
    assert [p.name for p in target.parent.iterdir()] == ["file.bin"]


def test_result_store_roundtrip(tmp_path):
    store = ResultStore(tmp_path)
    config = {"a": 1, "b": [1, 2]}
    assert store.load(config) is None
    arrays = {"w": np.arange(6.0).reshape(2, 3), "i": np.array([1, 2], dtype=np.int64)}
    store.save(config, {"x": [0.5, None], "y": "z"}, arrays)
    result, loaded = store.load(config)
    assert result == {"x": [0.5, None], "y": "z"}
    for k, v in arrays.items():
        np.testing.assert_array_equal(loaded[k], v)
        assert loaded[k].dtype == v.dtype
    assert store.load({"a": 2, "b": [1, 2]}) is None


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _edit_value(path):
    doc = json.loads(path.read_text())
    doc["result"]["y"] = "tampered"
    path.write_text(json.dumps(doc))


def _drop_result_resealed(path):
    # a well-formed, correctly checksummed entry without its result (not written by aoi_fl)
    doc = json.loads(path.read_text())
    body = {k: v for k, v in doc.items() if k not in ("sha256", "result")}
    path.write_bytes(cache._sealed(body))


def _flip_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "file, damage",
    [
        ("result.json", _truncate),
        ("result.json", _edit_value),
        ("result.json", lambda p: p.write_text("not json")),
        ("result.json", lambda p: p.write_text("[1, 2]")),
        ("result.json", _drop_result_resealed),
        ("arrays.npz", _flip_byte),
        ("arrays.npz", _truncate),
        ("arrays.npz", lambda p: p.unlink()),
    ],
)
def test_result_store_detects_corruption(tmp_path, file, damage):
    store = ResultStore(tmp_path)
    config = {"a": 1}
    folder = store.save(config, {"y": "z"}, {"w": np.ones(1000)})
    damage(folder / file)
    with pytest.warns(UserWarning, match="corrupt cached result"):
        assert store.load(config) is None


def test_entries_record_the_format_version_and_other_versions_are_never_served(
    tmp_path, monkeypatch
):
    # catches a format bump that still serves numbers of the older code: a key that ignores
    # the version, or a reader that does not compare the stored version with the current one
    store = ResultStore(tmp_path)
    config = {"a": 1}
    folder = store.save(config, {"y": "z"})
    doc = json.loads((folder / "result.json").read_text())
    assert doc["format"] == RESULTS_FORMAT_VERSION and doc["key"] == folder.name
    # an entry at the right key, intact and correctly sealed, but of another format: refused
    body = {k: v for k, v in doc.items() if k != "sha256"}
    for other in (RESULTS_FORMAT_VERSION - 1, RESULTS_FORMAT_VERSION + 1, None):
        (folder / "result.json").write_bytes(cache._sealed({**body, "format": other}))
        with pytest.warns(UserWarning, match=rf"corrupt cached result.*format {other!r}"):
            assert store.load(config) is None
    # bumping the version moves every key: the old entry is a miss, recomputed and stored anew
    store.save(config, {"y": "old"})
    assert store.load(config)[0] == {"y": "old"}
    monkeypatch.setattr(cache, "RESULTS_FORMAT_VERSION", RESULTS_FORMAT_VERSION + 1)
    assert config_key(config) != folder.name
    assert store.load(config) is None
    new_folder = store.save(config, {"y": "new"})
    assert new_folder != folder and store.load(config)[0] == {"y": "new"}
    assert json.loads((new_folder / "result.json").read_text())["format"] == (
        RESULTS_FORMAT_VERSION + 1
    )
    monkeypatch.setattr(cache, "RESULTS_FORMAT_VERSION", RESULTS_FORMAT_VERSION)
    assert store.load(config)[0] == {"y": "old"}  # the two versions never mix


@pytest.mark.slow
def test_run_experiment_recomputes_after_a_format_bump(tmp_path, monkeypatch, rounds_run):
    # catches run_experiment serving a result cached under an older RESULTS_FORMAT_VERSION
    first = run(tmp_path, with_changes(CONFIG, "training", rounds=2))
    assert rounds_run == [0, 1] and run(tmp_path, with_changes(CONFIG, "training", rounds=2)).cached
    monkeypatch.setattr(cache, "RESULTS_FORMAT_VERSION", RESULTS_FORMAT_VERSION + 1)
    again = run(tmp_path, with_changes(CONFIG, "training", rounds=2))
    assert not again.cached and again.key != first.key
    assert rounds_run == [0, 1, 0, 1]  # trained again from round 0
    assert_same_run(first, again)


def test_checkpoint_store(tmp_path):
    store = CheckpointStore(tmp_path, {"k": 1})
    assert store.load() is None
    store.save(2, {"a": torch.arange(3.0)}, {"round": 2, "h": [1.5]})
    store.save(4, {"a": torch.arange(4.0)}, {"round": 4, "h": [1.5, 2.5]})
    assert sorted(p.name for p in store.folder.iterdir()) == ["latest.json", "round-0000004.pt"]
    rounds, tensors, state = store.load()
    assert rounds == 4 and state == {"round": 4, "h": [1.5, 2.5]}
    assert torch.equal(tensors["a"], torch.arange(4.0))
    _flip_byte(store.folder / "round-0000004.pt")
    with pytest.warns(UserWarning, match="unusable checkpoint"):
        assert store.load() is None
    store.clear()
    assert not store.folder.exists()


# ---------------------------------------------------------------------------------------------
# run_experiment


@pytest.mark.slow
def test_run_experiment_miss_then_hit(tmp_path, monkeypatch):
    first = run(tmp_path)
    assert not first.cached and first.history["eval_round"] == list(range(7))
    assert first.config == resolve_config(CONFIG)
    assert first.sampler["name"] == "markov_optimal" and first.sampler["seed"] == 0
    assert not CheckpointStore(tmp_path, first.config).folder.exists()  # cleared when done

    def no_training(*args, **kwargs):
        raise AssertionError("a cache hit must not train")

    monkeypatch.setattr(experiment, "build_trainer", no_training)
    monkeypatch.setattr(runs, "build_trainer", no_training)
    second = run(tmp_path)
    assert second.cached and second.key == first.key
    assert_same_run(first, second)
    with pytest.raises(AssertionError, match="must not train"):
        run(tmp_path, with_changes(CONFIG, "sampler", seed=1))  # a miss
    with pytest.raises(AssertionError, match="must not train"):
        run(tmp_path, rerun=True)


def test_run_grid_in_this_process_leaves_the_thread_setting_alone(tmp_path):
    # library code never changes torch's threads: `threads` is for worker processes only
    before = torch.get_num_threads()
    target = 2 if before == 1 else 1
    short = with_changes(CONFIG, "training", rounds=1)
    (result,) = runs.run_grid([short], results_dir=str(tmp_path), threads=target, progress=False)
    assert result.history["eval_round"] == [0, 1]
    assert torch.get_num_threads() == before


@pytest.mark.slow
def test_run_grid_two_workers_give_one_workers_results_and_report_each_run(tmp_path):
    # the path every `make figures` takes: spawned processes with their own thread setting
    # results are bit-identical at equal torch thread counts (README: determinism), so this
    # process trains single-threaded like the workers
    grid = [with_changes(CONFIG, "training", rounds=2, seed=s) for s in range(3)]
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        one = runs.run_grid(grid[:1], results_dir=str(tmp_path / "one"), progress=False)
        serial = runs.run_grid(grid, results_dir=str(tmp_path / "serial"), progress=False)
    finally:
        torch.set_num_threads(before)
    seen = []
    two = runs.run_grid(
        grid,
        results_dir=str(tmp_path / "two"),
        workers=2,
        threads=1,
        progress=False,
        on_result=lambda i, r: seen.append((i, r.key)),
    )
    assert sorted(seen) == [(i, r.key) for i, r in enumerate(two)]  # each once, right index
    assert_same_run(one[0], two[0])
    for a, b in zip(serial, two, strict=True):
        assert_same_run(a, b)
    again = []
    runs.run_grid(grid, results_dir=str(tmp_path / "two"), on_result=lambda i, r: again.append(i))
    assert again == [0, 1, 2]  # cache hits are reported too, in order


@pytest.mark.slow
def test_run_experiment_is_deterministic_and_recomputes_corrupt_entries(tmp_path):
    a = run(tmp_path / "a")
    b = run(tmp_path / "b")
    assert_same_run(a, b)
    assert a.history["test_loss"][-1] < a.history["test_loss"][0]
    other = run(tmp_path / "a", with_changes(CONFIG, "sampler", seed=5))
    assert other.key != a.key and other.history["selected"] != a.history["selected"]
    result_json = tmp_path / "a" / "runs" / a.key / "result.json"
    _truncate(result_json)
    with pytest.warns(UserWarning, match="corrupt cached result"):
        again = run(tmp_path / "a")
    assert not again.cached
    assert_same_run(a, again)
    assert run(tmp_path / "a").cached  # repaired


@pytest.mark.slow
def test_run_experiment_rounds_to_target(tmp_path):
    result = run(tmp_path)
    acc = result.history["test_accuracy"]
    assert result.rounds_to_target(max(acc)) == result.history["eval_round"][int(np.argmax(acc))]
    assert result.rounds_to_target(1.01) is None


@pytest.mark.slow
@pytest.mark.parametrize(("seconds", "saved"), [(0, [2, 4]), (3600, [])])
def test_checkpoints_are_written_every_k_rounds_but_not_more_often_than_asked(
    tmp_path, monkeypatch, seconds, saved
):
    # cheap rounds must not pay for a state file every few rounds (checkpoint_seconds), and a
    # zero floor keeps the round cadence exactly
    rounds = []
    real_save = CheckpointStore.save
    monkeypatch.setattr(
        CheckpointStore, "save", lambda self, r, *a: (rounds.append(r), real_save(self, r, *a))
    )
    config = with_changes(CONFIG, "training", rounds=5)
    run_experiment(
        config,
        results_dir=str(tmp_path),
        progress=False,
        checkpoint_every=2,
        checkpoint_seconds=seconds,
    )
    assert rounds == saved  # never after the last round: the result replaces the checkpoint
    with pytest.raises(ValueError, match="checkpoint_seconds must be >= 0, got -1"):
        run_experiment(config, results_dir=str(tmp_path / "x"), checkpoint_seconds=-1)


@pytest.mark.slow
def test_unusable_checkpoint_is_ignored(tmp_path):
    clean = run(tmp_path / "clean")
    store = CheckpointStore(tmp_path / "damaged", resolve_config(CONFIG))
    store.save(2, {"params.1.weight": torch.zeros(3)}, {"round": 2})  # wrong shapes
    with pytest.warns(UserWarning, match="unusable checkpoint"):
        damaged = run(tmp_path / "damaged")
    assert_same_run(clean, damaged)


@pytest.mark.parametrize(
    "config, message",
    [
        ({**CONFIG, "extra": {}}, r"unknown: \['extra'\]"),
        ({k: v for k, v in CONFIG.items() if k != "model"}, r"missing: \['model'\]"),
        (with_changes(CONFIG, "training", epochs=3), r"unknown training options \['epochs'\]"),
        (with_changes(CONFIG, "sampler", name="greedy"), "unknown sampler name 'greedy'"),
        (with_changes(CONFIG, "dataset", name="svhn"), "unknown dataset name 'svhn'"),
        (with_changes(CONFIG, "training", lr={"name": "cosine"}), "unknown training lr 'cosine'"),
        (with_changes(CONFIG, "training", lr={"lr0": 0.1}), "must be a dict with a 'name'"),
        (with_changes(CONFIG, "training", rounds=-1), "rounds must be >= 0"),
        # NumPy numbers are accepted (tests/pipeline/test_config_errors.py); other objects not
        (with_changes(CONFIG, "model", seed={1}), r"model.seed=\{1\} \(set\) is not JSON"),
        (with_changes(CONFIG, "model", seed=0.5), "seed must be an integer"),
    ],
)
def test_bad_configs_fail_before_any_work(tmp_path, config, message):
    with pytest.raises((ValueError, TypeError), match=message):
        run(tmp_path, config)
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------------------------------------
# kill and resume

# Runs CONFIG in a child process, each round slowed down so that the parent can kill it
# between two checkpoints.
_CHILD = """
import json, sys, time
import aoi_fl.pipeline.runs as runs
import aoi_fl.core.train as train
original = train.FederatedTrainer.run_round
def slow_round(self):
    original(self)
    time.sleep(0.2)
train.FederatedTrainer.run_round = slow_round
runs.run_experiment(json.loads(sys.argv[1]), results_dir=sys.argv[2], progress=False,
                    checkpoint_every=2, checkpoint_seconds=0)
"""


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_numbers(tmp_path, request):
    config = with_changes(CONFIG, "training", rounds=12)
    cache = tmp_path / "killed"
    latest = CheckpointStore(cache, resolve_config(config)).folder / "latest.json"
    child = subprocess.Popen([sys.executable, "-c", _CHILD, json.dumps(config), str(cache)])
    try:
        deadline = time.monotonic() + 120
        while not latest.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert latest.exists(), "the child never wrote a checkpoint"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL
    assert not (cache / "runs").exists()  # killed before finishing
    checkpoint_round = json.loads(latest.read_text())["round"]
    assert checkpoint_round in (2, 4, 6, 8, 10)

    calls = request.getfixturevalue("rounds_run")
    resumed = run(cache, config)
    assert calls == list(range(checkpoint_round, 12))  # continued, did not start over
    uninterrupted = run(tmp_path / "clean", config)
    assert_same_run(resumed, uninterrupted)


def test_a_run_config_is_the_resolved_configuration_and_its_key():
    config = {**CONFIG, "training": {**CONFIG.get("training", {}), "device": "cpu"}}
    run = runs.RunConfig.parse(config)
    assert run.canonical() == runs.resolve_config(config)
    assert run.key == config_key(runs.resolve_config(config)) == config_key(run.canonical())
    assert run.device == "cpu" and "device" not in run.canonical()["training"]  # not in the key
    assert runs.RunConfig.parse(run) is run
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.key = "0" * 24
    run.canonical()["model"]["seed"] = 7  # a copy: the run itself cannot change
    assert run.canonical() == runs.resolve_config(config)


def test_a_grid_resolves_each_configuration_once(tmp_path, monkeypatch):
    calls = []
    real = resolve.resolve_config
    monkeypatch.setattr(resolve, "resolve_config", lambda c: calls.append(1) or real(c))
    (result,) = runs.run_grid([CONFIG], results_dir=str(tmp_path), progress=False)
    assert not result.cached and len(calls) == 1  # grid, batch, trainer: resolved once


def test_the_old_name_of_the_results_folder_still_works_with_a_warning(tmp_path):
    trained = run(tmp_path)
    with pytest.warns(DeprecationWarning, match=r"run_grid\(cache_dir=\.\.\.\) is now run_grid"):
        (hit,) = runs.run_grid([CONFIG], cache_dir=str(tmp_path), progress=False)
    assert hit.cached and hit.history == trained.history
    with pytest.raises(TypeError, match=r"cached_results\(\) got cache_dir= and results_dir="):
        runs.cached_results([CONFIG], cache_dir=str(tmp_path), results_dir=str(tmp_path))
