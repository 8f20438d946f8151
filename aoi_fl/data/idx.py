"""IDX datasets (MNIST, Fashion-MNIST): torchvision's layout, pinned digests, atomic installs.

A dataset lives in ``<root>/<torchvision class name>/raw/`` as its four uncompressed IDX files,
so the same folder comes from torchvision's own download or from a package that ships the
files. The files are checked against pinned SHA-256 digests before every load; a missing,
truncated or altered file is refused.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from aoi_fl.core.validation import require_choice
from aoi_fl.data.files import DataError, _digest, _writable_folder


@dataclass(frozen=True)
class _IdxSpec:
    title: str
    tv_class: type  # torchvision's reader; its class name is the folder under the root
    files: dict[str, tuple[int, str]]  # file name: (bytes, SHA-256) of the uncompressed file
    command: str  # the `python -m aoi_fl.data` command that fetches it
    sources: tuple[str, ...]  # valid values of `source`


def _idx_problems(folder: Path, files: dict[str, tuple[int, str]]) -> list[str]:
    """One line per file of ``files`` that is missing in ``folder`` or differs from its pin."""
    problems = []
    for name, (size, sha256) in files.items():
        path = folder / name
        if not path.is_file():
            problems.append(f"{name}: missing")
        elif (actual := path.stat().st_size) != size:
            problems.append(f"{name}: {actual} bytes, expected {size} (truncated or wrong file)")
        elif (digest := _digest(path, "sha256")) != sha256:
            problems.append(
                f"{name}: SHA-256 {digest} differs from the pinned {sha256} (altered or corrupt)"
            )
    return problems


def _idx_raw_dir(spec: _IdxSpec, root: str | os.PathLike) -> Path:
    return Path(root) / spec.tv_class.__name__ / "raw"


def _verify_idx(spec: _IdxSpec, root: str | os.PathLike) -> Path:
    raw = _idx_raw_dir(spec, root)
    problems = _idx_problems(raw, spec.files)
    if problems:
        raise DataError(
            f"{spec.title} in {raw} is not usable:\n  - "
            + "\n  - ".join(problems)
            + "\nFetch it with `make data` or "
            + f"`python -m aoi_fl.data {spec.command} --root {root}`."
        )
    return raw


def _install_idx(spec: _IdxSpec, unpacked: Path, raw: Path, origin: str) -> None:
    """Check the files in ``unpacked`` against the pins, then copy them into ``raw``.

    Each file is copied next to its target and renamed: a reader never sees a half-written
    file, and nothing is written unless every file verified.
    """
    if problems := _idx_problems(unpacked, spec.files):
        raise DataError(f"{origin} does not hold the expected files: {problems}")
    raw.mkdir(parents=True, exist_ok=True)
    for name in spec.files:
        partial = raw / f".{name}.partial"
        try:
            shutil.copyfile(unpacked / name, partial)
            os.replace(partial, raw / name)
        finally:
            partial.unlink(missing_ok=True)


def _fetch_idx(
    spec: _IdxSpec, root: str | os.PathLike, source: str, fetch_own: Callable[[Path], None]
) -> Path:
    """Nothing to do if the files verify; else ``fetch_own(raw)`` or torchvision's download."""
    source = require_choice("source", source, spec.sources)
    raw = _idx_raw_dir(spec, root)
    if not _idx_problems(raw, spec.files):
        return raw
    _writable_folder(raw, root)
    if source == "torchvision":
        # torchvision skips its download when the four files merely exist
        for name in spec.files:
            (raw / name).unlink(missing_ok=True)
        try:
            spec.tv_class(str(root), train=True, download=True)
        except (RuntimeError, OSError) as exc:
            raise DataError(f"torchvision could not download {spec.title}: {exc}") from exc
    else:
        fetch_own(raw)
    return _verify_idx(spec, root)


def _load_idx(
    spec: _IdxSpec, root: str | os.PathLike, train: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    _verify_idx(spec, root)
    legacy = Path(root) / spec.tv_class.__name__ / "processed"
    if (legacy / "training.pt").exists() and (legacy / "test.pt").exists():
        # torchvision would load these old caches instead of the verified raw files
        raise DataError(
            f"{legacy} holds torchvision's legacy {spec.title} cache, which would be loaded "
            f"instead of the verified raw files; delete {legacy} and retry"
        )
    ds = spec.tv_class(str(root), train=train, download=False)
    return ds.data, ds.targets.to(torch.int64)
