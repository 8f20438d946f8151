"""Runs with an availability model, loss-probing and update-driven samplers, and the new training
options (``client_accuracy``, ``record_norms``, ``compress``), through the pipeline.

The arena's smoke configurations (:mod:`aoi_fl.evidence.arena.experiments`: 20 clients holding 2000
Fashion-MNIST samples, softmax regression, a few rounds) keep every run under a second. Checked:
pairing within a seed (every policy sees the same partition, initial model, mini-batches and
availability trace), the records (``available``, ``probed``, ``client_accuracy``) against a
replay of the model and a direct computation, kill-and-resume and one worker against two, errors
before any work, the cache keys of runs without the new options, and the compressed store.
"""

import gzip
import json
import os
import signal
import subprocess
import sys
import time
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.func import functional_call

from aoi_fl.core import registry
from aoi_fl.core.availability import build_availability
from aoi_fl.core.train import FederatedTrainer
from aoi_fl.evidence.arena import experiments as ex
from aoi_fl.pipeline import experiment, parts, runs
from aoi_fl.pipeline.cache import CheckpointStore, ResultStore, config_key
from aoi_fl.pipeline.runs import resolve_config, run_experiment

ROOT = Path(__file__).resolve().parents[2]
#: the run options of committed results that the new training options must leave unchanged
NEW_DEFAULTS = {"record_norms": True, "compress": False, "client_accuracy": False}
#: the policies of the arena that use each new channel of the trainer
LOSS_PROBING = ("power_of_choice", "power_of_choice_stale", "oort")
#: the policies that select exactly min(m, #available) clients (K-Vib and the Markov policies
#: select a random number; Clustered Sampling's m draws may repeat a client or find a cluster
#: without an available member)
FIXED_SIZE = ("random", *LOSS_PROBING)
PAIRED = ("uniform", "markov_available", *LOSS_PROBING, "clustered_similarity")


def arena(policy, availability="bernoulli", seed=0, **training):
    """The arena's smoke configuration of ``policy`` (screen tier), with training changes."""
    config = ex.config(policy, availability, seed, tier="screen", profile="smoke")
    config["training"].update(training)
    return config


def with_sampler(config, **changes):
    out = json.loads(json.dumps(config))
    out["sampler"].update(changes)
    return out


def run(config, results_dir, data_root, **kw):
    return run_experiment(
        config, results_dir=str(results_dir), data_root=data_root, progress=False, **kw
    )


def trainer(config, data_root) -> FederatedTrainer:
    return runs.build_trainer(resolve_config(config), data_root, "cpu")


def replayed(config, data_root, rounds):
    """The masks of rounds 0..rounds-1 of ``config``'s availability model, built anew."""
    resolved = resolve_config(config)
    sizes = runs.client_sizes(resolved, data_root)
    model = build_availability(resolved["availability"], sizes.size, sizes)
    return np.array([model.mask(t) for t in range(rounds)])


def stored_files(results_dir, key):
    return sorted(p.name for p in (Path(results_dir) / "runs" / key).iterdir())


# ---------------------------------------------------------------------------------------------
# pairing within a seed


def _paired_parts(tr: FederatedTrainer):
    rounds = tr.settings.rounds
    n = len(tr.data.partition)
    return {
        "partition": [np.asarray(p).tolist() for p in tr.data.partition],
        "params": {k: v.detach().cpu().numpy().copy() for k, v in tr.params.items()},
        "batch_seed": tr.settings.seed,
        "batches": [[tr.client_schedule(t, i).tolist() for i in range(n)] for t in range(rounds)],
        "trace": tr.availability.trace(rounds),
    }


def _same(a, b):
    assert a["partition"] == b["partition"]
    assert a["params"].keys() == b["params"].keys()
    for k in a["params"]:
        np.testing.assert_array_equal(a["params"][k], b["params"][k])
    assert a["batch_seed"] == b["batch_seed"] and a["batches"] == b["batches"]
    np.testing.assert_array_equal(a["trace"], b["trace"])


@pytest.mark.parametrize("availability", ["bernoulli_size", "markov_onoff", "diurnal"])
def test_policies_of_one_seed_see_the_same_clients_model_batches_and_availability(
    data_root, availability
):
    by_seed = {
        seed: [_paired_parts(trainer(arena(p, availability, seed), data_root)) for p in PAIRED]
        for seed in (0, 1)
    }
    for paired in by_seed.values():
        for other in paired[1:]:
            _same(paired[0], other)
    a, b = by_seed[0][0], by_seed[1][0]
    assert a["partition"] != b["partition"]
    assert any(not np.array_equal(a["params"][k], b["params"][k]) for k in a["params"])
    assert a["batch_seed"] != b["batch_seed"] and a["batches"] != b["batches"]
    assert not np.array_equal(a["trace"], b["trace"])
    # the trace is not trivial: some clients are away in some round, someone is there
    assert 0 < a["trace"].mean() < 1


def test_the_arena_grid_pairs_its_runs_by_seed(data_root):
    # grid(): every (availability, policy, seed); the sampler's own seed is the only other part
    grid = ex.grid(["uniform", "oort"], ["markov_onoff"], tier="screen", profile="smoke")
    assert len(grid) == 4
    by_seed: dict[int, list] = {}
    for config in grid:
        by_seed.setdefault(config["training"]["seed"], []).append(config)
    assert sorted(by_seed) == [0, 1]
    for seed, pair in by_seed.items():
        strip = [{k: v for k, v in c.items() if k != "sampler"} for c in pair]
        assert strip[0] == strip[1]
        assert {c["availability"]["seed"] for c in pair} == {seed}
        _same(*(_paired_parts(trainer(c, data_root)) for c in pair))


# ---------------------------------------------------------------------------------------------
# what the history records


@pytest.mark.parametrize(
    "availability", ["bernoulli", "markov_onoff", pytest.param("diurnal", marks=pytest.mark.slow)]
)
def test_available_is_the_models_count_and_every_selected_client_was_available(
    tmp_path, data_root, availability
):
    policies = ("random", "kvib", *LOSS_PROBING, "clustered_similarity", "markov_available")
    configs = [arena(p, availability, seed=1, rounds=4) for p in policies]
    results = runs.run_grid(configs, results_dir=str(tmp_path), data_root=data_root, progress=False)
    masks = replayed(configs[0], data_root, 4)
    assert (masks.sum(axis=1) > 0).all()
    for policy, result in zip(policies, results, strict=True):
        h = result.history
        assert h["available"] == masks.sum(axis=1).tolist(), policy
        assert len(h["selected"]) == 4
        for t, ids in enumerate(h["selected"]):
            assert ids and masks[t][ids].all(), (policy, t, ids)
            assert len(set(ids)) == len(ids)
            if policy in FIXED_SIZE:  # m of the available (all of them when fewer)
                assert len(ids) == min(result.config["sampler"]["m"], masks[t].sum()), policy
        assert ("probed" in h) == (policy in LOSS_PROBING)
        if policy in ("oort", "power_of_choice_stale"):
            assert h["probed"] == [0] * 4  # participants' losses only: free
        assert h["update_norms"] == []  # the arena records none
        (accuracy,) = h["client_accuracy"]
        assert len(accuracy) == 20 and all(0.0 <= a <= 1.0 for a in accuracy)


def test_power_of_choice_probes_d_candidates_on_its_probe_samples(tmp_path, data_root):
    b = 5
    config = with_sampler(arena("power_of_choice", "bernoulli", seed=0, rounds=5), probe_samples=b)
    sizes = runs.client_sizes(config, data_root)
    assert sizes.min() >= b  # every candidate has b samples to probe
    result = run(config, tmp_path, data_root)
    d = config["sampler"]["d"]
    available = result.history["available"]
    assert result.history["probed"] == [min(d, a) * b for a in available]
    assert any(a >= d for a in available)  # some round probes all d = 2m candidates
    # without probe_samples (the screen's pow-d): every candidate's whole local data
    full = run(arena("power_of_choice", "bernoulli", seed=0, rounds=5), tmp_path, data_root)
    masks = replayed(config, data_root, 5)
    for t, probed in enumerate(full.history["probed"]):
        assert min(d, available[t]) * sizes.min() <= probed <= sizes[masks[t]].sum()
        assert probed >= sizes[full.history["selected"][t]].sum()  # the chosen were probed


def test_the_loss_probe_is_the_global_models_loss_on_the_seeded_subset(data_root):
    tr = trainer(arena("power_of_choice", "bernoulli", rounds=2), data_root)
    ids = np.array([3, 0, 7])
    mean, rms = tr.probe_losses(ids, 4)
    assert tr._probed == 12
    tr.probe_losses(ids, 4, free=True)
    assert tr._probed == 12  # free probes are not counted
    for k, i in enumerate(ids):
        rows = tr._probe_rows(int(i), 4)
        assert rows.size == 4 and set(rows.tolist()) <= set(
            np.asarray(tr.data.partition[i]).tolist()
        )
        rows = torch.from_numpy(rows)
        with torch.no_grad():
            out = functional_call(tr.model, tr.params, (tr.data.train.x[rows],))
            losses = torch.nn.functional.cross_entropy(
                out, tr.data.train.y[rows], reduction="none"
            ).double()
        assert mean[k] == pytest.approx(float(losses.mean()), rel=1e-6)
        assert rms[k] == pytest.approx(float(losses.square().mean().sqrt()), rel=1e-6)
    np.testing.assert_array_equal(tr._probe_rows(3, 4), tr._probe_rows(3, 4))  # fixed subset


# ---------------------------------------------------------------------------------------------
# kill and resume; one worker against two


class Interrupted(Exception):
    """Stands for the process being killed mid-round."""


@pytest.mark.parametrize(
    "policy, availability",
    [
        ("power_of_choice", "markov_onoff"),
        ("power_of_choice_stale", "bernoulli"),
        ("oort", "markov_onoff"),
        ("clustered_similarity", "diurnal"),
    ],
)
def test_an_interrupted_run_resumes_to_the_uninterrupted_numbers(
    tmp_path, data_root, monkeypatch, request, policy, availability
):
    config = arena(policy, availability, seed=1, rounds=5)
    resolved = resolve_config(config)
    original = FederatedTrainer.train_locally

    def dies_in_round_3(self, work):
        if work.t == 3:  # after round 3's selection (and probes), before its training ends
            raise Interrupted
        return original(self, work)

    monkeypatch.setattr(FederatedTrainer, "train_locally", dies_in_round_3)
    with pytest.raises(Interrupted):
        run(config, tmp_path / "killed", data_root, checkpoint_every=2, checkpoint_seconds=0)
    monkeypatch.setattr(FederatedTrainer, "train_locally", original)
    latest = CheckpointStore(tmp_path / "killed", resolved).folder / "latest.json"
    assert json.loads(latest.read_text())["round"] == 2
    assert not (tmp_path / "killed" / "runs").exists()

    calls = request.getfixturevalue("rounds_run")
    resumed = run(config, tmp_path / "killed", data_root)
    assert calls == [2, 3, 4]  # continued from the checkpoint
    clean = run(config, tmp_path / "clean", data_root)
    assert resumed.history == clean.history
    assert resumed.key == clean.key and not resumed.cached
    for name in ("result.json.gz", f"../../weights/{clean.key}.npz"):
        a = tmp_path / "killed" / "runs" / clean.key / name
        b = tmp_path / "clean" / "runs" / clean.key / name
        assert a.read_bytes() == b.read_bytes(), name
    assert not latest.parent.exists()  # the checkpoint is cleared once the result is stored


# a child process that runs a configuration, each round slowed down so that the parent can kill
# it between two checkpoints (as tests/pipeline/test_cache.py does)
_CHILD = """
import json, sys, time
import aoi_fl.pipeline.runs as runs
import aoi_fl.core.train as train
original = train.FederatedTrainer.run_round
def slow_round(self):
    original(self)
    time.sleep(0.3)
train.FederatedTrainer.run_round = slow_round
runs.run_experiment(json.loads(sys.argv[1]), results_dir=sys.argv[2], data_root=sys.argv[3],
                    progress=False, checkpoint_every=2, checkpoint_seconds=0)
"""


@pytest.mark.slow
def test_a_killed_run_with_availability_and_oort_resumes_to_the_same_numbers(
    tmp_path, data_root, request
):
    config = arena("oort", "markov_onoff", seed=1, rounds=10)
    results_dir = tmp_path / "killed"
    latest = CheckpointStore(results_dir, resolve_config(config)).folder / "latest.json"
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, json.dumps(config), str(results_dir), data_root]
    )
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
    assert not (results_dir / "runs").exists()
    checkpoint_round = json.loads(latest.read_text())["round"]
    calls = request.getfixturevalue("rounds_run")
    resumed = run(config, results_dir, data_root)
    assert calls == list(range(checkpoint_round, 10))
    assert resumed.history == run(config, tmp_path / "clean", data_root).history


@pytest.mark.slow
def test_two_workers_store_what_one_worker_stores(tmp_path, data_root):
    # equal torch thread counts give bit-identical numbers (README: determinism)
    grid = [
        arena(p, a, seed=0, rounds=3)
        for p in ("power_of_choice", "clustered_similarity")
        for a in ("markov_onoff", "always")
    ]
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        one = runs.run_grid(grid, results_dir=str(tmp_path / "one"), data_root=data_root)
    finally:
        torch.set_num_threads(before)
    two = runs.run_grid(
        grid,
        results_dir=str(tmp_path / "two"),
        data_root=data_root,
        workers=2,
        threads=1,
        progress=False,
    )
    for a, b in zip(one, two, strict=True):
        assert a.key == b.key and a.history == b.history
        assert stored_files(tmp_path / "one", a.key) == ["arrays.npz", "result.json.gz"]
        for name in ("arrays.npz", "result.json.gz"):
            assert (tmp_path / "one" / "runs" / a.key / name).read_bytes() == (
                tmp_path / "two" / "runs" / b.key / name
            ).read_bytes()
    assert "available" in one[0].history and "available" not in one[1].history


# ---------------------------------------------------------------------------------------------
# errors before any work


@pytest.fixture
def nothing_runs(monkeypatch, tmp_path):
    """A cache folder in which nothing may happen: loading data or building a trainer fails."""

    def forbidden(what):
        def fail(*args, **kwargs):
            raise AssertionError(f"{what} before the configuration was checked")

        return fail

    monkeypatch.setattr(parts, "load_bundle", forbidden("a dataset was loaded"))
    monkeypatch.setattr(runs, "load_bundle", forbidden("a dataset was loaded"))
    monkeypatch.setattr(experiment, "build_trainer", forbidden("a trainer was built"))
    monkeypatch.setattr(runs, "build_trainer", forbidden("a trainer was built"))
    results_dir = tmp_path / "cache"
    yield str(results_dir), str(tmp_path / "no-data")
    assert not results_dir.exists(), "something was written"


def with_availability(spec, policy="oort"):
    config = arena(policy)
    config["availability"] = spec
    return config


BAD = [
    ({"name": "weibull"}, ValueError, r"'availability'.*unknown availability 'weibull'"),
    (
        {"name": "bernoulli", "mean": 0.3, "spread": 2},
        ValueError,
        r"'availability'.*'bernoulli': unknown options \['spread'\]",
    ),
    (
        {"name": "markov_onoff", "mean_on": 5.0},
        ValueError,
        r"'availability'.*missing options \['mean_off'\]",
    ),
    ({"name": "bernoulli", "mean": 1.5}, ValueError, r"'availability'.*mean must be <= 1.*1\.5"),
    ({"name": "bernoulli", "mean": 0.0}, ValueError, r"'availability'.*mean must be > 0.*got 0"),
    (
        {"name": "markov_onoff", "mean_on": 0.5, "mean_off": 2.0},
        ValueError,
        r"'availability'.*mean_on must be >= 1.*0\.5",
    ),
    (
        {"name": "diurnal", "base": 0.3, "amplitude": 0.2, "period": 0},
        ValueError,
        r"'availability'.*period must be >= 1.*got 0",
    ),
    (
        {"name": "bernoulli", "rates": [0.5] * 3},
        ValueError,
        r"'availability'.*rates must have length 20, got 3",
    ),
    (
        {"name": "bernoulli", "mean": 0.5, "seed": -1},
        ValueError,
        r"'availability'.*seed must be >= 0, got -1",
    ),
    (
        {"name": "bernoulli", "mean": 0.5, "correlation": "age"},
        ValueError,
        r"'availability'.*correlation 'age'",
    ),
    ({"mean": 0.5}, ValueError, r"'availability'.*needs a 'name'"),
    ("bernoulli", TypeError, r"'availability' must be a dict.*'bernoulli'"),
    ({"name": "bernoulli", "mean": "0.5"}, TypeError, r"availability.mean='0.5' must be a number"),
    # "always" is dropped from the key, but checked like any other model first
    ({"name": "always", "seed": -1}, ValueError, r"'availability'.*seed must be >= 0, got -1"),
    ({"name": "always", "mean": 0.5}, ValueError, r"'availability'.*unknown options \['mean'\]"),
]


@pytest.mark.parametrize("spec, error, message", BAD, ids=lambda x: str(x)[:40])
def test_a_bad_availability_section_fails_before_any_work(nothing_runs, spec, error, message):
    results_dir, data_root = nothing_runs
    config = with_availability(spec)
    with pytest.raises(error, match=message):
        resolve_config(config)
    with pytest.raises(error, match=message):
        run(config, results_dir, data_root)
    with pytest.raises(error, match=message):
        runs.run_grid([arena("oort"), config], results_dir=results_dir, data_root=data_root)


@pytest.mark.parametrize(
    "sampler",
    [
        {"name": "bernoulli", "p": 0.2, "seed": 0},  # a FedSUM participation pattern
        {"name": "optimal", "k": 4, "seed": 0},  # the full-information optimum
    ],
)
def test_a_sampler_that_ignores_availability_is_refused_with_a_model(nothing_runs, sampler):
    results_dir, data_root = nothing_runs
    assert sampler["name"] not in registry.AVAILABILITY_AWARE
    config = {**arena("uniform", "markov_onoff"), "sampler": sampler}
    message = (
        rf"sampler '{sampler['name']}' cannot select under availability model 'markov_onoff'.*"
        r"availability-aware samplers: \[.*'oort'"
    )
    with pytest.raises(ValueError, match=message):
        run(config, results_dir, data_root)
    # everyone available is what it was written for
    assert "availability" not in resolve_config({**config, "availability": {"name": "always"}})


@pytest.mark.parametrize("option", sorted(NEW_DEFAULTS))
@pytest.mark.parametrize("value", [1, 0, "yes", None, 1.0])
def test_the_new_training_options_take_true_or_false_only(nothing_runs, option, value):
    results_dir, data_root = nothing_runs
    config = arena("uniform", **{option: value})
    with pytest.raises(TypeError, match=rf"training.{option} must be True or False, got {value!r}"):
        run(config, results_dir, data_root)


# ---------------------------------------------------------------------------------------------
# cache keys


def test_always_available_is_the_run_without_an_availability_section():
    without = {k: v for k, v in arena("uniform", "always").items() if k != "availability"}
    for spec in ({"name": "always"}, {"name": "always", "seed": 7}):
        resolved = resolve_config({**without, "availability": spec})
        assert resolved == resolve_config(without) and "availability" not in resolved
        assert config_key(resolved) == config_key(resolve_config(without))
    partial = resolve_config(arena("uniform", "bernoulli"))
    assert config_key(partial) != config_key(resolve_config(without))
    other_seed = arena("uniform", "bernoulli")
    other_seed["availability"]["seed"] = 1
    assert config_key(resolve_config(other_seed)) != config_key(partial)


def _committed_configs(count=3):
    """The first ``count`` committed training runs (their stored, resolved configurations)."""
    listed = subprocess.run(
        ["git", "ls-files", "results/runs/*/result.json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    found = []
    for name in listed:
        body = json.loads((ROOT / name).read_text())
        if set(body["config"]) == {"dataset", "partition", "model", "sampler", "training"}:
            found.append((Path(name).parent.name, body["config"]))
        if len(found) == count:
            break
    return found


def test_the_new_options_at_their_defaults_leave_committed_keys_unchanged():
    committed = _committed_configs()
    if not committed:
        pytest.skip("no committed results in this checkout")
    for key, config in committed:
        assert config_key(resolve_config(config)) == key
        spelled = json.loads(json.dumps(config))
        spelled["training"].update(NEW_DEFAULTS)
        spelled["availability"] = {"name": "always"}
        assert resolve_config(spelled) == config
        assert config_key(resolve_config(spelled)) == key
        for option, default in NEW_DEFAULTS.items():  # any other value is another run
            flipped = json.loads(json.dumps(config))
            flipped["training"][option] = not default
            assert config_key(resolve_config(flipped)) != key, option


# ---------------------------------------------------------------------------------------------
# compress


def test_a_compressed_run_stores_deterministic_gzip_and_reads_back_equal(tmp_path, data_root):
    config = arena("oort", "markov_onoff", rounds=3)
    assert config["training"]["compress"] is True
    first = run(config, tmp_path / "a", data_root)
    assert stored_files(tmp_path / "a", first.key) == ["arrays.npz", "result.json.gz"]
    path = tmp_path / "a" / "runs" / first.key / "result.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    assert doc["key"] == first.key and doc["result"]["history"] == first.history
    hit = run(config, tmp_path / "a", data_root)
    assert hit.cached and hit.history == first.history and hit.sampler == first.sampler
    # stored twice (another folder; a rerun over the first): the same bytes
    again = run(config, tmp_path / "b", data_root)
    assert (tmp_path / "b" / "runs" / again.key / "result.json.gz").read_bytes() == (
        path.read_bytes()
    )
    before = path.read_bytes()
    run(config, tmp_path / "a", data_root, rerun=True)
    assert path.read_bytes() == before
    # the uncompressed run is another key, stored as plain JSON
    plain = arena("oort", "markov_onoff", rounds=3, compress=False)
    flat = run(plain, tmp_path / "a", data_root)
    assert flat.key != first.key and flat.history == first.history
    assert stored_files(tmp_path / "a", flat.key) == ["arrays.npz", "result.json"]


def _damaged(data: bytes, how: str) -> bytes:
    if how == "truncated":
        return data[: len(data) // 2]
    if how == "empty":
        return b""
    if how == "altered deflate stream":  # the first altered byte zlib itself refuses
        for i in range(10, len(data) - 8):  # after the 10-byte header, before the trailer
            bad = data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :]
            try:
                gzip.decompress(bad)
            except zlib.error:
                return bad
            except (OSError, EOFError):
                pass
        raise AssertionError("no single altered byte breaks the deflate stream")
    if how == "altered checksum":  # the gzip CRC-32 in the trailer
        return data[:-8] + bytes([data[-8] ^ 0x01]) + data[-7:]
    if how == "not gzip":
        return b"{" + data[1:]
    assert how == "valid gzip, altered JSON"
    body = json.loads(gzip.decompress(data))
    body["result"]["history"]["test_accuracy"][-1] = 1.0
    return gzip.compress(json.dumps(body).encode(), mtime=0)


@pytest.mark.parametrize(
    "how",
    [
        "truncated",
        "empty",
        "altered deflate stream",
        "altered checksum",
        "not gzip",
        "valid gzip, altered JSON",
    ],
)
def test_damaged_gzip_results_are_recomputed(tmp_path, data_root, how):
    config = arena("power_of_choice_stale", "bernoulli", rounds=2)
    first = run(config, tmp_path, data_root)
    path = tmp_path / "runs" / first.key / "result.json.gz"
    path.write_bytes(_damaged(path.read_bytes(), how))
    with pytest.warns(UserWarning, match="corrupt cached result"):
        assert ResultStore(tmp_path).load(resolve_config(config)) is None
    with pytest.warns(UserWarning, match="corrupt cached result"):
        again = run(config, tmp_path, data_root)
    assert not again.cached and again.history == first.history
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert run(config, tmp_path, data_root).cached  # repaired


# ---------------------------------------------------------------------------------------------
# record_norms and client_accuracy


@pytest.mark.parametrize("policy", ["kvib", "power_of_choice_stale"])
def test_not_recording_norms_changes_no_selection(data_root, policy):
    # K-Vib learns from the norms it is fed back: they still reach it unrecorded
    quiet = trainer(arena(policy, "bernoulli", rounds=4, record_norms=False), data_root).run()
    loud = trainer(arena(policy, "bernoulli", rounds=4, record_norms=True), data_root).run()
    assert quiet["update_norms"] == [] and len(loud["update_norms"]) == 4
    assert [len(x) for x in loud["update_norms"]] == [len(x) for x in loud["selected"]]
    for key in ("selected", "weights", "test_accuracy", "test_loss", "available", "lr"):
        assert quiet[key] == loud[key], key


TINY = {
    "dataset": {"name": "fashion_mnist", "n_train": 200, "n_test": 50},
    # 100 of the 200 samples go to clients: the others belong to nobody
    "partition": {
        "name": "lognormal_dirichlet",
        "n_clients": 5,
        "seed": 0,
        "sigma": 0.5,
        "alpha": 0.5,
        "total": 100,
    },
    "model": {"name": "logistic_regression", "in_features": 784, "num_classes": 10, "seed": 0},
    "sampler": {"name": "random", "m": 2, "seed": 0},
    "availability": {"name": "bernoulli", "mean": 0.6, "seed": 3},
    "training": {
        "rounds": 3,
        "local_steps": 2,
        "batch_size": 10,
        "lr": {"name": "constant", "lr": 0.05},
        "client_accuracy": True,
    },
}


def test_client_accuracy_is_each_clients_accuracy_on_its_own_samples(tmp_path, data_root):
    tr = trainer(TINY, data_root)
    history = tr.run()
    assert sum(tr.data.sizes) < len(tr.data.train)  # samples of no client: counted nowhere
    (recorded,) = history["client_accuracy"]
    direct = []
    with torch.no_grad():
        for idx in tr.data.partition:
            rows = torch.from_numpy(np.asarray(idx, dtype=np.int64))
            out = functional_call(tr.model, tr.reported_params(), (tr.data.train.x[rows],))
            direct.append(int((out.argmax(1) == tr.data.train.y[rows]).sum()) / rows.numel())
    assert recorded == direct
    assert len(recorded) == 5 and all(0.0 <= a <= 1.0 for a in recorded)
    # through the pipeline: the same record, once, after the last round only
    result = run(TINY, tmp_path, data_root)
    assert result.history["client_accuracy"] == [direct]
    off = {**TINY, "training": {**TINY["training"], "client_accuracy": False}}
    plain = trainer(off, data_root).run()
    assert "client_accuracy" not in plain
    assert plain["selected"] == history["selected"]
    assert plain["test_accuracy"] == history["test_accuracy"]
