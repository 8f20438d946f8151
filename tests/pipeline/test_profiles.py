"""What each run profile does (:func:`aoi_fl.pipeline.profiles.traits`): the tables of
``profiles.toml``, read here on their own, and the branches on a profile's name they replace."""

from __future__ import annotations

import dataclasses
import pathlib
import re
import tomllib

import pytest

from aoi_fl.pipeline import notebook, profiles
from aoi_fl.pipeline.profiles import PROFILES, Traits, traits

FILE = pathlib.Path(profiles.__file__).with_name("profiles.toml")
TABLE = tomllib.loads(FILE.read_text())
FIELDS = [f.name for f in dataclasses.fields(Traits)]


@pytest.mark.parametrize("profile", PROFILES)
def test_the_traits_are_the_table_of_the_profile(profile):
    assert dataclasses.asdict(traits(profile)) == TABLE[profile]
    with pytest.raises(dataclasses.FrozenInstanceError):
        traits(profile).quick = not traits(profile).quick


def test_every_profile_has_a_table_of_the_same_keys_each_commented():
    assert sorted(TABLE) == sorted(PROFILES)
    for profile in PROFILES:
        assert sorted(TABLE[profile]) == sorted(FIELDS), profile
    # the first table says what each key means, in the comment right above it
    first = FILE.read_text().split(f"\n[{PROFILES[0]}]\n", 1)[1].split("\n[", 1)[0]
    for key in FIELDS:
        assert re.search(rf"#[^\n]*\n{key} = ", first), f"{key} has no comment above it"


def test_an_unknown_profile_says_which_are_valid():
    with pytest.raises(ValueError, match="unknown profile 'gpu'; valid: cpu, paper, smoke"):
        traits("gpu")


def test_tables_that_differ_are_refused():
    same = {p: dict(TABLE[p]) for p in PROFILES}
    uneven = {**same, "paper": {k: v for k, v in same["paper"].items() if k != "quick"}}
    with pytest.raises(ValueError, match="same settings"):
        profiles._traits_from(uneven)
    extra = {p: {**values, "colour": True} for p, values in same.items()}
    with pytest.raises(ValueError, match="defines"):
        profiles._traits_from(extra)
    with pytest.raises(ValueError, match="tables"):
        profiles._traits_from({**same, "gpu": same["cpu"]})
    with pytest.raises(ValueError, match="lacks profiles"):
        profiles._traits_from({p: same[p] for p in PROFILES[:-1]})
    with pytest.raises(ValueError, match="not of types"):
        profiles._traits_from({**same, "cpu": {**same["cpu"], "workers": "2"}})


@pytest.mark.parametrize("profile", PROFILES)
def test_each_trait_is_the_branch_on_the_name_it_replaced(profile):
    t = traits(profile)
    assert t.quick == (profile == "smoke")
    assert t.readings == (profile == "cpu")
    assert t.papers_settings == (profile == "paper")
    assert t.progress == (profile != "smoke")
    assert t.keeps_outputs == (profile != "smoke")
    assert t.workers == (1 if profile == "smoke" else 2)
    setup = notebook.NotebookSetup(profile)
    assert (setup.WORKERS, setup.THREADS) == ((1, None) if profile == "smoke" else (2, 1))
    assert setup.PROGRESS is (profile != "smoke")
