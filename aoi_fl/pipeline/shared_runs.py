"""Runs computed elsewhere (another machine, a lent GPU) brought into the cache after checks.

A folder, or a ``.tgz`` of one, in the cache's layout (``runs/<key>/result.json[.gz]`` and
``arrays.npz``, see :mod:`aoi_fl.pipeline.cache`) is checked entry by entry before anything is
copied: each result file must unseal (its SHA-256 matches), be of this code's result format,
sit in the folder named by the key of the configuration it holds, have its arrays' checksum,
and, when the caller names the configurations it expects, be one of them; an entry already in
the cache must hold the same result. One failing entry refuses the whole import with a
:class:`SharedRunError` naming the entry and what is wrong, and nothing is written; otherwise
every entry is copied (arrays first, the result file last, each atomically), so that the
cache's own checks serve them like runs trained here.
"""

from __future__ import annotations

import tarfile
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from aoi_fl.core.validation import renamed
from aoi_fl.pipeline.cache import (
    RESULTS_FORMAT_VERSION,
    CorruptEntry,
    ResultStore,
    _unseal,
    atomic_write_bytes,
    config_key,
)
from aoi_fl.pipeline.runs import resolve_config

RESULT_NAMES = ("result.json", "result.json.gz")


class SharedRunError(ValueError):
    """An entry of a shared folder of runs that this cache will not take."""


@renamed("cache_dir", "results_dir")
def adopt_runs(
    source: str | Path,
    results_dir: str | Path = "results",
    expected: Iterable[Mapping[str, Any]] | None = None,
) -> list[str]:
    """Check every run under ``source`` (a cache folder or a ``.tgz`` of one) and copy them into
    ``results_dir``; return the keys copied (entries already there, identical, are skipped).

    ``expected``: the configurations the runs must belong to (resolved here as ``run_grid``
    resolves them); None takes any configuration of this code's result format.
    """
    source = Path(source)
    if not source.exists():
        raise SharedRunError(
            f"source={str(source)!r} does not exist: pass a cache folder or a .tgz"
        )
    if source.is_file():
        if not source.name.endswith((".tgz", ".tar.gz")):
            raise SharedRunError(
                f"source={str(source)!r} is a file but not a .tgz: pass a cache folder or a .tgz"
            )
        with tempfile.TemporaryDirectory(prefix="aoi-fl-shared-") as tmp:
            with tarfile.open(source) as archive:
                archive.extractall(tmp, filter="data")
            return _adopt_folder(_cache_root(Path(tmp)), Path(results_dir), expected)
    return _adopt_folder(_cache_root(source), Path(results_dir), expected)


def _cache_root(folder: Path) -> Path:
    """The folder holding ``runs/``: ``folder`` itself or its one subfolder that has it."""
    if (folder / "runs").is_dir():
        return folder
    inner = [p for p in folder.iterdir() if (p / "runs").is_dir()]
    if len(inner) != 1:
        raise SharedRunError(f"{folder} holds no runs/ folder of the cache's layout")
    return inner[0]


def _adopt_folder(
    root: Path, results_dir: Path, expected: Iterable[Mapping[str, Any]] | None
) -> list[str]:
    keys = None if expected is None else {config_key(resolve_config(c)) for c in expected}
    target = ResultStore(results_dir)
    copies: list[tuple[str, dict[Path, bytes]]] = []
    for folder in sorted(p for p in (root / "runs").iterdir() if p.is_dir()):
        files = _checked_entry(folder, keys)
        there = target.root / "runs" / folder.name
        if (there / files["result"].name).exists():
            if (there / files["result"].name).read_bytes() != files["result_bytes"]:
                raise SharedRunError(
                    f"{folder.name}: the cache ({there}) holds another result under this key; "
                    "remove one of them before importing"
                )
            continue
        copies.append(
            (
                folder.name,
                {
                    there / "arrays.npz": files["arrays_bytes"],
                    there / files["result"].name: files["result_bytes"],
                },
            )
        )
    if copies:
        target.check_writable()
    for _, entry in copies:
        for path, data in entry.items():  # the result file last: an entry exists once complete
            atomic_write_bytes(path, data)
    return [key for key, _ in copies]


def _checked_entry(folder: Path, keys: set[str] | None) -> dict[str, Any]:
    results = [folder / name for name in RESULT_NAMES if (folder / name).exists()]
    if len(results) != 1:
        raise SharedRunError(f"{folder.name}: expected one of {RESULT_NAMES}, found {len(results)}")
    try:
        config = _stored_config(results[0])
        key = config_key(config)
        if key != folder.name:
            raise SharedRunError(
                f"{folder.name}: the configuration it holds has the key {key}; the entry was "
                "renamed or its configuration altered"
            )
        if ResultStore.result_file(folder, config) != results[0]:
            raise SharedRunError(f"{folder.name}: {results[0].name} does not match its compress")
        ResultStore._read(folder, config)  # seal, format, configuration, arrays
    except CorruptEntry as exc:
        raise SharedRunError(f"{folder.name}: corrupt entry ({exc})") from exc
    if keys is not None and key not in keys:
        raise SharedRunError(
            f"{folder.name}: its configuration is not one of the {len(keys)} expected "
            f"(dataset {config.get('dataset')}, sampler {config.get('sampler', {}).get('name')})"
        )
    return {
        "result": results[0],
        "result_bytes": results[0].read_bytes(),
        "arrays_bytes": (folder / "arrays.npz").read_bytes(),
    }


def _stored_config(path: Path) -> dict[str, Any]:
    body = _unseal(path)
    if body.get("format") != RESULTS_FORMAT_VERSION:
        raise CorruptEntry(
            f"{path}: result format {body.get('format')!r}, this code reads "
            f"{RESULTS_FORMAT_VERSION}"
        )
    if not isinstance(body.get("config"), dict):
        raise CorruptEntry(f"{path}: no configuration object")
    return body["config"]
