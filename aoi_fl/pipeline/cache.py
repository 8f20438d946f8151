"""On-disk results and checkpoints, keyed by a hash of the full experiment configuration.

Layout under a cache root (``results/`` by default)::

    runs/<key>/result.json          the result: config, records, checksums
    runs/<key>/result.json.gz       the same, gzip-compressed (configurations whose training
                                    section asks for ``compress``: large grids meant to be
                                    committed)
    runs/<key>/arrays.npz           NumPy arrays of the result (e.g. the final model), no pickle
    weights/<key>.npz               the final model of a run that keeps it out of its result
                                    (``keep_params`` false: a folder that is not committed)
    checkpoints/<key>/latest.json   round, JSON state (sampler, records) and the tensors' SHA-256
    checkpoints/<key>/round-<t>.pt  tensors of round t (torch.save, read with weights_only=True)

``<key>`` is the SHA-256 of the canonical JSON of ``{"format": RESULTS_FORMAT_VERSION,
"config": config}``; bump :data:`RESULTS_FORMAT_VERSION` whenever a code change alters the
numbers a configuration produces, so that stale results are never served.

Every file is written to a temporary name in its folder and moved into place with
``os.replace``, so a reader sees either the old file or the complete new one. A result is
written arrays first, JSON last; a checkpoint tensors first, ``latest.json`` last. An entry
that fails to parse, lacks a field, or whose checksum does not match is reported with a
warning and treated as missing, so that the caller recomputes it.

Faults on a busy machine: :meth:`ResultStore.check_writable` refuses a folder that could not
take a result before anything is trained. A checkpoint only saves time: one whose folder
another process running the same configuration removed is written again, one that cannot be
written (a full disk, a read-only folder) is skipped with a warning, and one that cannot be
read back (truncated, altered, crafted) restarts the run with a warning. A result that does not
fit on the disk fails with the bytes it needs and the bytes free, and leaves no part of its
entry behind.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import tempfile
import warnings
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

#: Version of the result format and of the numbers behind it (part of every key).
RESULTS_FORMAT_VERSION = 2

_KEY_CHARS = 24  # 96 bits of the SHA-256: collisions are not a concern, paths stay short


class CorruptEntry(ValueError):
    """A cache file exists but is unreadable or fails its checksum."""


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: equal objects give equal strings."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def config_key(config: Mapping[str, Any]) -> str:
    """The cache key of a (JSON-serialisable) configuration."""
    payload = canonical_json({"format": RESULTS_FORMAT_VERSION, "config": config})
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:_KEY_CHARS]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _sealed(body: Mapping[str, Any]) -> bytes:
    """``body`` plus the SHA-256 of its canonical JSON, as JSON bytes."""
    return json.dumps({**body, "sha256": _sha256(canonical_json(body).encode())}).encode()


def _gzip(data: bytes) -> bytes:
    # mtime 0 and no file name: the same result gives the same bytes (a clean git status)
    return gzip.compress(data, compresslevel=9, mtime=0)


def _unseal(path: Path) -> dict[str, Any]:
    """Read a file written by :func:`_sealed` (gzip-compressed if its name ends in ``.gz``);
    raise :class:`CorruptEntry` if it does not check."""
    try:
        raw = path.read_bytes()
        doc = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptEntry(f"{path}: unreadable JSON ({exc})") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("sha256"), str):
        raise CorruptEntry(f"{path}: no checksum field")
    body = {k: v for k, v in doc.items() if k != "sha256"}
    if _sha256(canonical_json(body).encode()) != doc["sha256"]:
        raise CorruptEntry(f"{path}: checksum mismatch (altered or truncated)")
    return body


def arrays_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """``arrays`` as the bytes of an ``.npz`` file (no pickle)."""
    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    return buf.getvalue()


def free_bytes(path: str | os.PathLike) -> int:
    """Free bytes on the file system of ``path`` (of its nearest existing folder)."""
    path = Path(path).absolute()
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free


class ResultStore:
    """Finished results: ``save(config, result, arrays)`` and ``load(config)``."""

    def __init__(self, root: str | os.PathLike = "results") -> None:
        self.root = Path(root)

    def folder(self, config: Mapping[str, Any]) -> Path:
        return self.root / "runs" / config_key(config)

    def weights_file(self, config: Mapping[str, Any]) -> Path:
        return self.root / "weights" / f"{config_key(config)}.npz"

    @staticmethod
    def result_file(folder: Path, config: Mapping[str, Any]) -> Path:
        """``result.json``, or ``result.json.gz`` when the configuration's training section has
        ``compress`` (the key differs from the uncompressed configuration's, so both never
        meet in one folder)."""
        compress = bool(config.get("training", {}).get("compress", False))
        return folder / ("result.json.gz" if compress else "result.json")

    def save(
        self,
        config: Mapping[str, Any],
        result: Mapping[str, Any],
        arrays: Mapping[str, np.ndarray] | None = None,
        weights: Mapping[str, np.ndarray] | None = None,
    ) -> Path:
        """Store ``result`` (JSON-serialisable) and ``arrays`` for ``config``, and ``weights``
        (a final model kept out of the entry) in :meth:`weights_file`; return the folder.

        A write that fails leaves none of the entry's files unless the result file was there
        before; a full disk raises OSError (ENOSPC) naming the folder, the bytes the entry
        needs and the bytes free.
        """
        folder = self.folder(config)
        data = arrays_bytes(arrays or {})
        body = {
            "format": RESULTS_FORMAT_VERSION,
            "key": config_key(config),
            "config": config,
            "result": result,
            "arrays_sha256": _sha256(data),
        }
        sealed = _sealed(body)
        path = self.result_file(folder, config)
        # the result file last: an entry exists once all of it is on disk
        files = {
            folder / "arrays.npz": data,
            path: _gzip(sealed) if path.suffix == ".gz" else sealed,
        }
        if weights is not None:
            files = {self.weights_file(config): arrays_bytes(weights), **files}
        try:
            for target, content in files.items():
                atomic_write_bytes(target, content)
        except OSError as exc:
            if not path.exists():  # the files written so far are of no use without it
                for target in files:
                    with contextlib.suppress(OSError):
                        target.unlink(missing_ok=True)
                with contextlib.suppress(OSError):  # another writer's files may be in it
                    folder.rmdir()
            if exc.errno != errno.ENOSPC:
                raise
            needed = sum(len(content) for content in files.values())
            raise OSError(
                errno.ENOSPC,
                f"no space left to store a result in {folder}: it needs {needed} bytes, its "
                f"file system has {free_bytes(folder)} bytes free; free some space there or "
                "pass another results_dir",
            ) from exc
        return folder

    def check_writable(self) -> None:
        """Raise OSError naming the first folder that results, checkpoints or weights could not
        be written to (the root is created if missing; ``runs/``, ``checkpoints/`` and
        ``weights/`` are not, so that a folder without one has no result yet).

        A folder that only has to be read (every result present) is never written to.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        for folder in (self.root, *(self.root / sub for sub in ("runs", "checkpoints", "weights"))):
            if folder.is_dir():
                try:
                    fd, probe = tempfile.mkstemp(dir=folder, prefix=".writable.", suffix=".tmp")
                except OSError as exc:
                    raise OSError(exc.errno, f"{folder} is not writable ({exc.strerror})") from exc
                os.close(fd)
                os.unlink(probe)

    def load(self, config: Mapping[str, Any]) -> tuple[dict, dict[str, np.ndarray]] | None:
        """``(result, arrays)`` for ``config``, or None when absent or corrupt (with a warning)."""
        folder = self.folder(config)
        if not self.result_file(folder, config).exists():
            return None
        try:
            return self._read(folder, config)
        except CorruptEntry as exc:
            warnings.warn(
                f"ignoring corrupt cached result, it will be recomputed: {exc}", stacklevel=2
            )
            return None

    @staticmethod
    def _read(folder: Path, config: Mapping[str, Any]) -> tuple[dict, dict[str, np.ndarray]]:
        body = _unseal(ResultStore.result_file(folder, config))
        if body.get("format") != RESULTS_FORMAT_VERSION:
            raise CorruptEntry(f"{folder}: format {body.get('format')!r}")
        if canonical_json(body.get("config")) != canonical_json(config):
            raise CorruptEntry(f"{folder}: stored config differs from the requested one")
        if not isinstance(body.get("result"), dict):
            raise CorruptEntry(f"{folder}: no result object")
        try:
            data = (folder / "arrays.npz").read_bytes()
        except OSError as exc:
            raise CorruptEntry(f"{folder}: arrays.npz unreadable ({exc})") from exc
        if _sha256(data) != body.get("arrays_sha256"):
            raise CorruptEntry(f"{folder}: arrays.npz checksum mismatch")
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
        except (ValueError, OSError, zipfile.BadZipFile) as exc:
            raise CorruptEntry(f"{folder}: arrays.npz unreadable ({exc})") from exc
        return body["result"], arrays


class CheckpointStore:
    """The latest checkpoint of one run: tensors (torch.save) plus a JSON state.

    A checkpoint only saves time: one that cannot be written is skipped and one that cannot be
    used is ignored, each with a warning, and the run goes on (from round 0 in the second case).
    """

    def __init__(self, root: str | os.PathLike, config: Mapping[str, Any]) -> None:
        self.folder = Path(root) / "checkpoints" / config_key(config)

    def save(self, rounds_done: int, tensors: Mapping[str, torch.Tensor], state: Mapping) -> None:
        """Store the state after ``rounds_done`` rounds; the previous checkpoint goes after.

        A write that fails (OSError) is reported with a warning; the previous checkpoint, if
        any, stays the latest.
        """
        buf = io.BytesIO()
        torch.save({k: v.detach().cpu() for k, v in tensors.items()}, buf)
        data = buf.getvalue()
        try:
            try:
                self._write(rounds_done, data, state)
            except FileNotFoundError:
                # another process running the same configuration finished and removed the
                # folder: written again, it is recreated
                self._write(rounds_done, data, state)
        except OSError as exc:
            warnings.warn(
                f"checkpoint of round {rounds_done} not written to {self.folder} ({exc}); "
                "training goes on without it",
                stacklevel=2,
            )

    def _write(self, rounds_done: int, data: bytes, state: Mapping) -> None:
        name = f"round-{rounds_done:07d}.pt"
        atomic_write_bytes(self.folder / name, data)
        body = {
            "round": rounds_done,
            "tensors": name,
            "tensors_sha256": _sha256(data),
            "state": state,
        }
        atomic_write_bytes(self.folder / "latest.json", _sealed(body))
        for old in self.folder.glob("round-*.pt"):
            if old.name != name:
                old.unlink(missing_ok=True)

    def load(self) -> tuple[int, dict[str, torch.Tensor], dict] | None:
        """``(round, tensors, state)`` of the latest checkpoint, or None (warning if corrupt)."""
        path = self.folder / "latest.json"
        if not path.exists():
            return None
        try:
            body = _unseal(path)
            rounds, state, checksum = int(body["round"]), body["state"], body["tensors_sha256"]
            path = self.folder / str(body["tensors"])
            data = path.read_bytes()
            if _sha256(data) != checksum:
                raise CorruptEntry("checksum mismatch (altered or truncated)")
            tensors = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
            if not isinstance(tensors, dict) or not all(
                isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in tensors.items()
            ):
                raise CorruptEntry(f"holds a {type(tensors).__name__}, not a dict of named tensors")
            return rounds, tensors, state
        # whatever makes a checkpoint unusable (a crafted pickle raises UnpicklingError, a cut
        # one EOFError, torch.load anything) costs the rounds it saved, never the run
        except Exception as exc:
            self.ignore(path, exc)
            return None

    @staticmethod
    def ignore(path: Path, exc: Exception) -> None:
        """Warn that the checkpoint file ``path`` cannot be used (``exc``): the run restarts."""
        # the first sentence only: torch's errors go on with advice on loading files one trusts
        reason = re.split(r"(?<=\.)\s", str(exc), maxsplit=1)[0]
        cause = f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__
        warnings.warn(
            f"ignoring unusable checkpoint {path} ({cause}); the run restarts from round 0",
            stacklevel=3,
        )

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
