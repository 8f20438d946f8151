"""Every committed result is still found under its key (issue 14: results must not change).

A cache entry is found again only if today's code derives the same key from the same
configuration: the key is the hash of the resolved configuration, so a changed default, a
renamed option or a different resolution would silently orphan a committed result (and
`make figures` would retrain it). The sampler streams behind those keys are pinned separately
(tests/test_sampler_contract.py).
"""

from pathlib import Path

import pytest

from aoi_fl.pipeline import cache, runs

RESULTS = Path(__file__).resolve().parents[2] / "results" / "runs"
# compressed entries too (the arena's and other large grids': result.json.gz)
ENTRIES = sorted([*RESULTS.glob("*/result.json"), *RESULTS.glob("*/result.json.gz")])
RUN_SECTIONS = {"dataset", "partition", "model", "sampler", "training"}


def _run_configs(config):
    # training runs (with an availability section or not), and the run a FedSUM summary, a
    # traffic count or a Flower record was made from
    if RUN_SECTIONS <= set(config):
        yield config
    elif isinstance(config.get("run"), dict) and RUN_SECTIONS <= set(config["run"]):
        yield config["run"]


def test_there_are_committed_results():
    # guards against a moved folder (or a new compression) making the next test vacuous
    assert len(ENTRIES) > 1600
    assert sum(p.suffix == ".gz" for p in ENTRIES) > 800


@pytest.mark.slow
def test_every_committed_key_is_recomputed_from_its_configuration():
    wrong, unresolved, available = [], [], 0
    for path in ENTRIES:
        body = cache._unseal(path)  # also checks the entry's checksum
        available += "availability" in body["config"]
        key = cache.config_key(body["config"])
        if not key == body["key"] == path.parent.name:
            wrong.append(path.parent.name)
        for config in _run_configs(body["config"]):
            run = runs.RunConfig.parse(config)  # what a grid trains and looks up
            same = run.text == cache.canonical_json(config) and run.canonical() == config
            if not same or run.key != cache.config_key(config):
                unresolved.append(path.parent.name)
    assert available > 600  # the arena's runs under availability models are among them
    assert not wrong, f"entries whose key no longer matches their configuration: {wrong[:5]}"
    assert not unresolved, f"run configurations that resolve differently now: {unresolved[:5]}"


@pytest.mark.parametrize("path", ENTRIES[:3], ids=lambda p: p.parent.name)
def test_an_entry_loads_through_the_store(path):
    body = cache._unseal(path)
    hit = cache.ResultStore(RESULTS.parent).load(body["config"])
    assert hit is not None and hit[0] == body["result"]
