"""The three run profiles every notebook supports.

- ``smoke``: seconds; used by the tests (nbval), never writes into ``figures/``.
- ``cpu``: the default of ``make figures``: faithful but affordable on a 2-core machine.
- ``paper``: the papers' exact settings (GPU recommended for training).

A notebook's parameter cell sets ``profile``; papermill overrides it (``make figures
PROFILE=paper``). The environment variable ``AOI_FL_PROFILE``, when set, takes precedence over
both: ``make test`` sets it to ``smoke`` so that nbval runs the committed notebooks cheaply.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
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
