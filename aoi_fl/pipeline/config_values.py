"""A configuration's shape: dicts where sections go, JSON values, no number written as text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from aoi_fl.core import registry
from aoi_fl.core.availability import AVAILABILITY
from aoi_fl.core.models import MODELS
from aoi_fl.core.train import LR_SCHEDULES, TrainSettings
from aoi_fl.pipeline.config_options import _kinds, _parameters


def require_mapping(path: str, value: Any) -> Mapping[str, Any]:
    """``value`` must be a dict; a bare name gets the hint of the dict it should be."""
    if isinstance(value, Mapping):
        return value
    hint = f" (e.g. {{'name': {value!r}}})" if isinstance(value, str) else ""
    raise TypeError(
        f"{path} must be a dict of options{hint}, got {value!r} ({type(value).__name__})"
    )


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _text(path: str, text: str, texts: frozenset[str]) -> str:
    if path.rsplit(".", 1)[-1] in texts:
        return text
    try:
        float(text)
    except ValueError:
        return text
    raise TypeError(f"{path}={text!r} must be a number, not a string")


def _text_options() -> frozenset[str]:
    """The option names that are declared strings (a trace's path and sha256, a name): their
    values are text even when they read like numbers (a path "2024", a digest of digits)."""
    tables = (registry.SAMPLERS, registry.ALGORITHMS, LR_SCHEDULES, MODELS, AVAILABILITY)
    params = [p for table in tables for f in table.values() for p in _parameters(f, 0) or ()]
    params += _parameters(TrainSettings, 0) or ()
    declared = {
        p.name
        for p in params
        if (kinds := _kinds(p.annotation)) and "str" in kinds and not {"int", "float"} & {*kinds}
    }
    return frozenset(declared | {"name"})  # every section's name


def plain(value: Any, path: str = "", texts: frozenset[str] | None = None) -> Any:
    """``value`` as JSON types: NumPy scalars and arrays as Python numbers and lists, tuples as
    lists; anything else that JSON cannot hold, and a number written as a string (but for an
    option declared a string, :func:`_text_options`), raises."""
    texts = _text_options() if texts is None else texts
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                where = path or "config"
                raise TypeError(f"{where} has the option name {key!r}; names must be strings")
        return {k: plain(v, _join(path, k), texts) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return plain(value.tolist(), path, texts)
    if isinstance(value, list | tuple):
        return [plain(v, f"{path}[{i}]", texts) for i, v in enumerate(value)]
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return int(value) if isinstance(value, int) else float(value)
    if isinstance(value, str):
        return _text(path, value, texts)
    raise TypeError(
        f"{path}={value!r} ({type(value).__name__}) is not JSON serializable: use numbers, "
        "strings, True/False, None, lists or dicts"
    )
