"""The three run profiles every notebook supports.

- ``smoke``: seconds; used by the tests (nbval), never writes into ``figures/``.
- ``cpu``: the default of ``make figures``: faithful but affordable on a 2-core machine.
- ``paper``: the papers' exact settings (GPU recommended for training).

A notebook's parameter cell sets ``profile``; papermill overrides it (``make figures
PROFILE=paper``). The environment variable ``AOI_FL_PROFILE``, when set, takes precedence over
both: ``make test`` sets it to ``smoke`` so that nbval runs the committed notebooks cheaply.

What a profile does is data, not a branch on its name: ``profiles.toml`` gives every profile the
same named settings (whether it is a quick test run, whether its numbers are the Readings', ...)
and the library asks :func:`traits` for them.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from aoi_fl.core.validation import require_choice

PROFILES: tuple[str, ...] = ("smoke", "cpu", "paper")
ENV_VAR = "AOI_FL_PROFILE"


def resolve_profile(profile: str) -> str:
    """The profile to run: ``$AOI_FL_PROFILE`` if set, else ``profile``; validated."""
    chosen = os.environ.get(ENV_VAR) or profile
    return require_choice("profile", chosen, PROFILES)


def settings(profile: str, table: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Pick a notebook's settings for ``profile`` from ``{profile: {name: value}}``.

    Every profile must define the same names, so that a notebook cannot silently depend on a
    setting that exists in one profile only.
    """
    profile = require_choice("profile", profile, PROFILES)
    missing = [p for p in PROFILES if p not in table]
    if missing:
        raise ValueError(f"settings table lacks profiles {missing}; it must define {PROFILES}")
    keys = {p: set(table[p]) for p in PROFILES}
    if len({frozenset(k) for k in keys.values()}) != 1:
        raise ValueError(f"profiles must define the same settings, got {keys}")
    return dict(table[profile])


TRAITS_FILE = "profiles.toml"


@dataclasses.dataclass(frozen=True)
class Traits:
    """What a profile does: the settings of its table in ``profiles.toml``, whose comments say
    what each one means."""

    quick: bool
    readings: bool
    papers_settings: bool
    progress: bool
    keeps_outputs: bool
    workers: int


@cache
def _all_traits() -> dict[str, Traits]:
    """Every profile's :class:`Traits`, read once from the package's ``profiles.toml``."""
    with resources.files("aoi_fl.pipeline").joinpath(TRAITS_FILE).open("rb") as file:
        return _traits_from(tomllib.load(file))


def _traits_from(table: Mapping[str, Mapping[str, Any]]) -> dict[str, Traits]:
    """``{profile: Traits}`` from ``{profile: {setting: value}}``: one table per profile, each
    defining the same settings (the rule of :func:`settings`), those of :class:`Traits`, each of
    its declared type."""
    unknown = sorted(set(table) - set(PROFILES))
    if unknown:
        raise ValueError(f"{TRAITS_FILE} has tables {unknown}; the profiles are {PROFILES}")
    found = {p: settings(p, table) for p in PROFILES}
    fields = {f.name: f.type for f in dataclasses.fields(Traits)}
    for profile, values in found.items():
        if set(values) != set(fields):
            raise ValueError(
                f"{TRAITS_FILE} [{profile}] defines {sorted(values)}, not {sorted(fields)}"
            )
        wrong = [k for k, v in values.items() if type(v).__name__ != fields[k]]
        if wrong:
            raise ValueError(f"{TRAITS_FILE} [{profile}]: {wrong} not of types {fields}")
    return {p: Traits(**values) for p, values in found.items()}


def traits(profile: str) -> Traits:
    """What ``profile`` does (:class:`Traits`); an unknown profile raises, naming the valid ones."""
    return _all_traits()[require_choice("profile", profile, PROFILES)]
