"""Runs computed elsewhere are checked entry by entry before any is copied into the cache."""

from __future__ import annotations

import json
import shutil
import tarfile

import pytest

from aoi_fl.pipeline.cache import config_key
from aoi_fl.pipeline.runs import cached_results, resolve_config, run_experiment
from aoi_fl.pipeline.shared_runs import SharedRunError, adopt_runs
from tests.fedsum.test_algorithms import ls_config


def configs():
    first = ls_config("fedavg", rounds=2)
    second = json.loads(json.dumps(first))
    second["sampler"]["seed"] = 3
    return [first, second]


@pytest.fixture
def shared(tmp_path):
    """A folder of two finished runs in the cache's layout, as another machine would send it."""
    source = tmp_path / "shared"
    for config in configs():
        run_experiment(config, results_dir=str(source), progress=False)
    shutil.rmtree(source / "checkpoints", ignore_errors=True)
    return source


def entry(source, config):
    return source / "runs" / config_key(resolve_config(config))


def runs_in(cache):
    folder = cache / "runs"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_checked_runs_are_copied_and_served_from_the_cache(shared, tmp_path):
    cache = tmp_path / "cache"
    keys = adopt_runs(shared, cache, expected=configs())
    assert sorted(keys) == runs_in(cache) == runs_in(shared)
    found, missing = cached_results(configs(), results_dir=str(cache))
    assert (len(found), missing) == (2, 0)
    assert adopt_runs(shared, cache) == []  # the same entries again: nothing to copy


def test_a_tgz_of_the_folder_is_taken_as_the_folder(shared, tmp_path):
    archive = tmp_path / "runs.tgz"
    with tarfile.open(archive, "w:gz") as tgz:
        tgz.add(shared, arcname="gpu-runs")
    cache = tmp_path / "cache"
    assert len(adopt_runs(archive, cache)) == 2
    assert runs_in(cache) == runs_in(shared)


def damage_result(source, config):
    path = entry(source, config) / "result.json"
    doc = json.loads(path.read_text())
    doc["result"]["history"]["test_loss"][0] += 0.5
    path.write_text(json.dumps(doc))


def damage_arrays(source, config):
    (entry(source, config) / "arrays.npz").write_bytes(b"not the arrays")


def rename(source, config):
    folder = entry(source, config)
    folder.rename(folder.with_name("0" * 24))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (damage_result, "corrupt entry .* checksum mismatch"),
        (damage_arrays, "corrupt entry .* arrays.npz checksum mismatch"),
        (rename, "the configuration it holds has the key .* renamed or its configuration altered"),
    ],
)
def test_a_corrupted_or_mismatched_entry_refuses_the_import_and_nothing_is_written(
    shared, tmp_path, damage, message
):
    damage(shared, configs()[1])  # the other entry is intact, and not copied either
    cache = tmp_path / "cache"
    with pytest.raises(SharedRunError, match=message):
        adopt_runs(shared, cache)
    assert runs_in(cache) == []


def test_a_run_of_another_configuration_than_expected_is_refused(shared, tmp_path):
    with pytest.raises(SharedRunError, match="not one of the 1 expected"):
        adopt_runs(shared, tmp_path / "cache", expected=configs()[:1])
    assert runs_in(tmp_path / "cache") == []


def test_another_result_under_the_same_key_in_the_cache_is_refused(shared, tmp_path):
    cache = tmp_path / "cache"
    adopt_runs(shared, cache)
    result = entry(cache, configs()[0]) / "result.json"
    result.write_bytes(result.read_bytes() + b" ")
    with pytest.raises(SharedRunError, match="holds another result under this key"):
        adopt_runs(shared, cache)


@pytest.mark.parametrize(
    ("name", "message"),
    [("missing", "does not exist"), ("notes.txt", "is a file but not a .tgz")],
)
def test_a_bad_source_is_named(tmp_path, name, message):
    (tmp_path / "notes.txt").write_text("runs?")
    with pytest.raises(SharedRunError, match=f"source=.*{name}.*{message}"):
        adopt_runs(tmp_path / name, tmp_path / "cache")
