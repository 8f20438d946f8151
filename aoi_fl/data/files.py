"""Files the loaders trust only after a check: the error they raise, digests, external commands
and the check that a root can hold the data before anything is fetched."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path


class DataError(RuntimeError):
    """A dataset is missing, incomplete or does not match its pinned checksums."""


class PackageNotListed(DataError):
    """``apt-get`` does not know a dataset's Debian package: the package lists are empty or
    stale (a fresh machine), or the system is not Debian's."""

    #: the fetch commands' exit status for it, so that ``make data`` updates the lists only then
    EXIT_STATUS = 3


def _digest(path: Path, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _run(cmd: Sequence[str], cwd: Path, hint: str = "", env: dict[str, str] | None = None) -> None:
    """Run ``cmd`` in ``cwd`` (``env``: variables set beside the current ones); raise
    :class:`DataError` with its error output and ``hint`` if it fails."""
    done = subprocess.run(
        list(cmd),
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env=None if env is None else {**os.environ, **env},
    )
    if done.returncode != 0:
        raise DataError(
            f"`{' '.join(cmd)}` failed with exit code {done.returncode}:\n{done.stderr[-2000:]}"
            + hint
        )


def _writable_folder(folder: Path, root: str | os.PathLike) -> None:
    """Raise, naming the root, unless ``folder`` (under ``root``) can be created and written:
    checked before anything is fetched, and nothing is created (a failed fetch leaves none)."""
    existing = folder
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        problem = "is a file, not a folder"
    elif not os.access(existing, os.W_OK | os.X_OK):
        problem = "is not writable"
    else:
        return
    raise DataError(
        f"root (--root) {str(root)!r} cannot hold the data: {existing} {problem}; allowed: a "
        "folder that exists or can be created, and is writable"
    )
