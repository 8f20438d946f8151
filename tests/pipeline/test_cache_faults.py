"""Faults of a busy machine (issue 38, part 4): folders that cannot be written refused before a
run trains, checkpoint writes that fail or lose their folder, unusable checkpoints, a full disk
when a result is stored.

CI runs the tests as root, whom permission bits do not stop, and no test may fill a disk: each
fault is injected where the system would raise it (creating a cache file's temporary file,
flushing it), so that the code under test meets the error it would meet on a busy machine,
whoever runs the tests. Where chmod does stop a write, a read-only folder is a real one.
"""

import errno
import io
import os
import pickle
import re
import shutil
import tempfile
import types
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from aoi_fl.pipeline import cache, experiment, parts, runs
from aoi_fl.pipeline.cache import CheckpointStore, ResultStore, config_key
from aoi_fl.pipeline.runs import resolve_config

from .test_config_errors import TINY as CONFIG_TINY

#: the smallest real run (generated data, a linear model, a fraction of a second), for 4 rounds
TINY = {**CONFIG_TINY, "training": {**CONFIG_TINY["training"], "rounds": 4}}
#: the same run with its final model in ``weights/`` instead of the result
TINY_WEIGHTS = {**TINY, "training": {**TINY["training"], "keep_params": False}}


def run(results_dir, config=TINY):
    """``config`` trained with a checkpoint after every round but the last."""
    return runs.run_experiment(
        config,
        results_dir=str(results_dir),
        progress=False,
        checkpoint_every=1,
        checkpoint_seconds=0,
    )


def assert_same_run(a, b):
    assert a.history == b.history
    assert a.final_params.keys() == b.final_params.keys()
    for k in a.final_params:
        np.testing.assert_array_equal(a.final_params[k], b.final_params[k])


def checkpoint_warnings(call):
    """(what ``call()`` returns, the messages of the warnings about checkpoints it gave)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call()
    return out, [str(w.message) for w in caught if "checkpoint" in str(w.message)]


def leftovers(root):
    """Temporary files of interrupted writes under ``root``."""
    return sorted(str(p.relative_to(root)) for p in Path(root).rglob("*.tmp"))


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The undisturbed runs, and their cache."""
    root = tmp_path_factory.mktemp("clean")
    return root, {"params": run(root), "weights": run(root, TINY_WEIGHTS)}


class Faults:
    """Makes writes of cache files fail, as a busy machine would: ``at_create`` when a file's
    temporary file is created (a read-only folder), ``at_flush`` when its data are flushed (a
    full disk, where the data are written). A fault applies to a folder and everything under
    it, or to one file; its action gets the temporary file's path and raises, or does what
    another process would do meanwhile."""

    def __init__(self, monkeypatch):
        self.at_create = {}
        self.at_flush = {}
        self.hits = []
        opened = {}
        real_mkstemp, real_fsync = tempfile.mkstemp, os.fsync

        def mkstemp(suffix=None, prefix=None, dir=None, text=False):
            self._apply(self.at_create, Path(dir) / f"{prefix}{suffix}")
            fd, name = real_mkstemp(suffix, prefix, dir, text)
            opened[fd] = Path(name)
            return fd, name

        def fsync(fd):
            if fd in opened:
                self._apply(self.at_flush, opened.pop(fd))
            real_fsync(fd)

        monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
        monkeypatch.setattr(os, "fsync", fsync)

    def _apply(self, table, temp):
        for target, action in list(table.items()):
            temp_of_target = temp.parent == target.parent and temp.name.startswith(
                f".{target.name}."
            )
            if target in temp.parents or temp_of_target:
                self.hits.append(temp)
                action(temp)


def raises(kind, code):
    """The action of a fault: the error the system gives for the temporary file."""

    def action(temp):
        raise kind(code, os.strerror(code), str(temp))

    return action


READ_ONLY = (PermissionError, errno.EACCES)
DISK_FULL = (OSError, errno.ENOSPC)


@pytest.fixture
def faults(monkeypatch):
    return Faults(monkeypatch)


@pytest.fixture
def read_only(faults):
    """``read_only(folder)``: really read-only where chmod stops writes, else (root) every file
    creation in it fails as it would."""
    made = []

    def make(folder):
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o555)
        made.append(folder)
        try:
            (folder / "probe").touch()
        except PermissionError:
            return
        (folder / "probe").unlink()
        faults.at_create[folder] = raises(*READ_ONLY)

    yield make
    for folder in made:
        folder.chmod(0o755)


# ---------------------------------------------------------------------------------------------
# (a) a folder that cannot be written is refused before any data is loaded or round trained


@pytest.mark.parametrize("sub", ["", "runs", "checkpoints", "weights"])
def test_an_unwritable_folder_is_refused_before_any_work(tmp_path, monkeypatch, read_only, sub):
    def forbidden(*args, **kwargs):
        raise AssertionError("work started although the cache cannot take its result")

    monkeypatch.setattr(parts, "load_bundle", forbidden)
    monkeypatch.setattr(runs, "load_bundle", forbidden)
    monkeypatch.setattr(experiment, "build_trainer", forbidden)
    monkeypatch.setattr(runs, "build_trainer", forbidden)
    results_dir = tmp_path / "cache"
    folder = results_dir / sub if sub else results_dir
    read_only(folder)
    message = (
        rf"results_dir='{re.escape(str(results_dir))}' must be writable to store new runs: "
        rf"\[Errno 13\] {re.escape(str(folder))} is not writable \(Permission denied\); "
        "make it writable or pass another results_dir"
    )
    with pytest.raises(ValueError, match=message):
        run(results_dir)
    with pytest.raises(ValueError, match=message):
        runs.run_grid([TINY_WEIGHTS], results_dir=str(results_dir), workers=2, progress=False)
    assert leftovers(results_dir) == []


# ---------------------------------------------------------------------------------------------
# (b), (c) a checkpoint is an optimisation: a failed write warns and the run goes on


@pytest.mark.parametrize(
    "fault, error",
    [("at_create", READ_ONLY), ("at_flush", DISK_FULL)],
    ids=["read-only", "disk-full"],
)
def test_a_checkpoint_that_cannot_be_written_warns_and_the_run_finishes(
    tmp_path, faults, clean, fault, error
):
    checkpoints = tmp_path / "checkpoints"
    getattr(faults, fault)[checkpoints] = raises(*error)
    folder = checkpoints / config_key(resolve_config(TINY))
    result, skipped = checkpoint_warnings(lambda: run(tmp_path))
    code = error[1]
    assert len(skipped) == 3  # rounds 1 to 3, none after the last
    for r, message in enumerate(skipped, start=1):
        assert re.fullmatch(
            rf"checkpoint of round {r} not written to {re.escape(str(folder))} "
            rf"\(\[Errno {code}\] {os.strerror(code)}: '.*\.tmp'\); training goes on without it",
            message,
        )
    assert_same_run(result, clean[1]["params"])
    assert run(tmp_path).cached
    assert leftovers(tmp_path) == []


def test_a_failed_checkpoint_write_keeps_the_previous_checkpoint(tmp_path, faults):
    store = CheckpointStore(tmp_path, {"k": 1})
    store.save(1, {"a": torch.zeros(2)}, {"round": 1})
    faults.at_flush[store.folder / "latest.json"] = raises(*DISK_FULL)
    with pytest.warns(UserWarning, match="checkpoint of round 2 not written"):
        store.save(2, {"a": torch.ones(2)}, {"round": 2})
    rounds, tensors, state = store.load()
    assert rounds == 1 and state == {"round": 1} and torch.equal(tensors["a"], torch.zeros(2))
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("removals", [1, float("inf")], ids=["once", "every-time"])
def test_a_checkpoint_folder_removed_while_writing_is_tolerated(tmp_path, faults, clean, removals):
    # another process running the same configuration finishes and clears the folder between
    # the creation of a temporary file and its move into place (os.replace then fails)
    folder = CheckpointStore(tmp_path, resolve_config(TINY)).folder
    removed = []

    def other_process_finishes(temp):
        if len(removed) < removals:
            removed.append(temp)
            shutil.rmtree(folder)

    faults.at_flush[folder] = other_process_finishes
    result, skipped = checkpoint_warnings(lambda: run(tmp_path))
    if removals == 1:
        assert len(removed) == 1 and skipped == []  # written again at once
    else:
        assert [m.split(" (")[0] for m in skipped] == [
            f"checkpoint of round {r} not written to {folder}" for r in (1, 2, 3)
        ]
        assert all("[Errno 2] No such file or directory" in m for m in skipped)
    assert_same_run(result, clean[1]["params"])
    assert leftovers(tmp_path) == []


# ---------------------------------------------------------------------------------------------
# (d) an unusable checkpoint restarts the run from round 0 with a warning naming its file


#: the files of the checkpoint of :func:`_checkpoint`
TENSORS, LATEST = "round-0000002.pt", "latest.json"


class Crafted:
    """Not a tensor: torch.load(weights_only=True) refuses to unpickle it."""


def _checkpoint(results_dir):
    """A true checkpoint of TINY after two of its four rounds."""
    resolved = resolve_config(TINY)
    trainer = runs.build_trainer(resolved)
    trainer.run_round()
    trainer.run_round()
    store = CheckpointStore(results_dir, resolved)
    store.save(2, *trainer.state_dict())
    return store


def _reseal(store, tensors=None, **changes):
    """Replace the tensor file's bytes (if given) and fields of latest.json, sealed again as
    aoi_fl would: a crafted checkpoint that passes every checksum."""
    body = cache._unseal(store.folder / LATEST)
    path = store.folder / body["tensors"]
    if tensors is not None:
        path.write_bytes(tensors)
    body = {**body, **changes, "tensors_sha256": cache._sha256(path.read_bytes())}
    (store.folder / LATEST).write_bytes(cache._sealed(body))


def _saved(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _tensor_bytes(store):
    return (store.folder / TENSORS).read_bytes()


def _state(store, **changes):
    state = cache._unseal(store.folder / LATEST)["state"]
    return {**state, **changes}


def _drop_round(store):
    body = cache._unseal(store.folder / LATEST)
    del body["round"]
    (store.folder / LATEST).write_bytes(cache._sealed(body))


CRAFTED = {
    "garbage bytes": (TENSORS, "UnpicklingError", lambda s: _reseal(s, b"\x00garbage" * 64)),
    "empty file": (TENSORS, "EOFError", lambda s: _reseal(s, b"")),
    "truncated tensors": (TENSORS, "RuntimeError", lambda s: _reseal(s, _tensor_bytes(s)[:99])),
    "unpickling error": (TENSORS, "UnpicklingError", lambda s: _reseal(s, _saved(Crafted()))),
    "plain pickle": (
        TENSORS,
        "UnpicklingError",
        lambda s: _reseal(s, pickle.dumps(Crafted(), protocol=2)),
    ),
    "a list": (TENSORS, "CorruptEntry", lambda s: _reseal(s, _saved([torch.zeros(2)]))),
    "unnamed tensors": (TENSORS, "CorruptEntry", lambda s: _reseal(s, _saved({1: torch.ones(1)}))),
    "bit flip": (
        TENSORS,
        "CorruptEntry",
        lambda s: (s.folder / TENSORS).write_bytes(bytes(b ^ 1 for b in _tensor_bytes(s))),
    ),
    "tensors deleted": (TENSORS, "FileNotFoundError", lambda s: (s.folder / TENSORS).unlink()),
    "truncated latest": (
        LATEST,
        "CorruptEntry",
        lambda s: (s.folder / LATEST).write_bytes((s.folder / LATEST).read_bytes()[:50]),
    ),
    "latest not an object": (
        LATEST,
        "CorruptEntry",
        lambda s: (s.folder / LATEST).write_text("[]"),
    ),
    "no round": (LATEST, "KeyError", _drop_round),
    # states that do not fit the run: caught by the trainer, named by run_experiment
    "round beyond the run": (LATEST, "ValueError", lambda s: _reseal(s, state=_state(s, round=9))),
    "records of another round": (
        LATEST,
        "ValueError",
        lambda s: _reseal(s, state=_state(s, round=1)),
    ),
    "sampler state of another sampler": (
        LATEST,
        "ValueError",
        lambda s: _reseal(s, state=_state(s, sampler={"name": "markov_optimal", "x": [1]})),
    ),
    "tensors of another model": (
        LATEST,
        "ValueError",
        lambda s: _reseal(s, _saved({"params.weight": torch.zeros(7)})),
    ),
}


def test_an_intact_crafted_checkpoint_resumes(tmp_path, clean, rounds_run):
    # the baseline of the cases below: without damage the checkpoint is used
    _reseal(_checkpoint(tmp_path))
    rounds_run.clear()  # those of the checkpoint
    result, skipped = checkpoint_warnings(lambda: run(tmp_path))
    assert skipped == [] and rounds_run == [2, 3]
    assert_same_run(result, clean[1]["params"])


@pytest.mark.parametrize("case", list(CRAFTED))
def test_an_unusable_checkpoint_restarts_the_run_with_a_warning(tmp_path, clean, rounds_run, case):
    file, error, damage = CRAFTED[case]
    store = _checkpoint(tmp_path)
    damage(store)
    rounds_run.clear()  # those of the checkpoint
    message = (
        rf"ignoring unusable checkpoint {re.escape(str(store.folder / file))} \({error}(: .+)?\); "
        "the run restarts from round 0"
    )
    with pytest.warns(UserWarning, match=message):
        result = run(tmp_path)
    assert rounds_run == [0, 1, 2, 3]
    assert_same_run(result, clean[1]["params"])
    assert not store.folder.exists()  # the finished run cleared it


# ---------------------------------------------------------------------------------------------
# (e) a full disk when the result is stored: a clear error, no part of the entry left


@pytest.mark.parametrize(
    "kind, failing",
    [
        ("params", "arrays.npz"),
        ("params", "result.json"),
        ("weights", "weights"),  # the final model, written first
        ("weights", "arrays.npz"),
        ("weights", "result.json"),
    ],
)
def test_a_full_disk_when_storing_the_result_names_folder_and_bytes(
    tmp_path, monkeypatch, faults, clean, rounds_run, kind, failing
):
    config = TINY if kind == "params" else TINY_WEIGHTS
    key = config_key(resolve_config(config))
    clean_root, clean_runs = clean
    written = [*(clean_root / "runs" / key).iterdir(), *(clean_root / "weights").glob(f"{key}*")]
    needed = sum(p.stat().st_size for p in written)
    entry = tmp_path / "runs" / key
    target = tmp_path / "weights" / f"{key}.npz" if failing == "weights" else entry / failing
    faults.at_flush[target] = raises(*DISK_FULL)
    free = types.SimpleNamespace(total=10**9, used=10**9 - 1234, free=1234)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: free)
    message = (
        rf"\[Errno 28\] no space left to store a result in {re.escape(str(entry))}: it needs "
        rf"{needed} bytes, its file system has 1234 bytes free; free some space there or pass "
        "another results_dir"
    )
    with pytest.raises(OSError, match=message) as raised:
        run(tmp_path, config)
    assert raised.value.errno == errno.ENOSPC
    assert faults.hits  # the fault was met
    assert not entry.exists() and list((tmp_path / "weights").glob("*")) == []
    assert leftovers(tmp_path) == []
    assert ResultStore(tmp_path).load(resolve_config(config)) is None

    # space freed: the run goes on from its last checkpoint to the same result
    faults.at_flush.clear()
    rounds_run.clear()
    again = run(tmp_path, config)
    assert rounds_run == [3]
    assert_same_run(again, clean_runs[kind])


def test_another_error_when_storing_the_result_is_raised_as_it_is(tmp_path, faults):
    store = ResultStore(tmp_path)
    faults.at_create[store.folder({"a": 1}) / "result.json"] = raises(*READ_ONLY)
    with pytest.raises(PermissionError, match="Permission denied"):
        store.save({"a": 1}, {"y": 1}, {"w": np.ones(3)})
    assert not store.folder({"a": 1}).exists() and leftovers(tmp_path) == []


def test_a_failed_write_keeps_an_earlier_result_file(tmp_path, faults):
    # the entry was there before (e.g. corrupt, being recomputed): it is left for load to judge
    store = ResultStore(tmp_path)
    folder = store.save({"a": 1}, {"y": 1})
    faults.at_flush[folder / "result.json"] = raises(*DISK_FULL)
    with pytest.raises(OSError, match="no space left to store a result"):
        store.save({"a": 1}, {"y": 2})
    assert store.load({"a": 1})[0] == {"y": 1}
    assert leftovers(tmp_path) == []
