"""The availability model that replays a recorded trace (``trace``), and the trace file parser.

A trace is a CSV file ``client,start,end``: client ``client`` is available in rounds
[start, end). Plain integer files are parsed by NumPy in one call, any other by the csv module
row by row; both give the same rows and the same errors, naming file, line and field.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aoi_fl.core.availability_base import Availability, register_availability

#: the header a trace file must start with
TRACE_HEADER: tuple[str, ...] = ("client", "start", "end")


@register_availability
class Trace(Availability):
    """A recorded availability trace replayed: a CSV file with the header ``client,start,end``
    and one row per interval: client ``client`` (0..n-1) is available in rounds [start, end).

    A client may have several (even overlapping) rows; outside all of them it is unavailable.
    The trace spans rounds [0, T), T the largest ``end``; past it nobody is available, or, with
    ``repeat``, round t replays round t mod T. Closed forms: rates(t) = mask(t) (0 or 1) and
    long_run_rates() the fraction of the span [0, T) each client is available. The file's
    sha256 is part of :meth:`config` (a changed file changes the cache key); given as an
    option, the file must still have it. A file is parsed once per process (:func:`_read_trace`).
    """

    name = "trace"

    def __init__(self, n: int, sizes: Any = None, seed: int = 0, **options: Any) -> None:
        super().__init__(n, seed, self.check(n, **options))
        o = self.options
        self._clients, self._starts, self._ends, _ = _read_trace(o["path"], self.n, o["sha256"])
        self.span = int(self._ends.max())

    @staticmethod
    def check(
        n: int | None, *, path: str, repeat: bool = False, sha256: str | None = None
    ) -> dict[str, Any]:
        if not isinstance(repeat, bool):
            raise TypeError(f"repeat must be True or False, got {repeat!r}")
        path = os.fspath(path) if isinstance(path, os.PathLike) else path
        if not isinstance(path, str):
            raise TypeError(f"path must be a string (a CSV file), got {path!r}")
        if sha256 is not None and not (isinstance(sha256, str) and _SHA256.fullmatch(sha256)):
            raise ValueError(
                f"sha256 must be None or the file's SHA-256 (64 lowercase hexadecimal digits), "
                f"got {sha256!r}"
            )
        *_, digest = _read_trace(path, n, sha256)
        return {"path": path, "repeat": repeat, "sha256": digest}

    def mask(self, t: int) -> np.ndarray:
        t = self._round(t)
        if self.options["repeat"]:
            t %= self.span
        out = np.zeros(self.n, dtype=bool)
        out[self._clients[(self._starts <= t) & (t < self._ends)]] = True
        return out

    def rates(self, t: int) -> np.ndarray:
        return self.mask(t).astype(float)

    def long_run_rates(self) -> np.ndarray:
        # a sweep over every client's interval ends: +1 at a start, -1 at an end; sorted by
        # client, the running sum is the number of the client's rows covering the gap to the
        # next event (it returns to 0 after each client's last event), so the covered rounds
        # are the gaps where it is positive: the union of the intervals, overlaps counted once
        where = np.concatenate((self._starts, self._ends))
        step = np.concatenate((np.ones_like(self._starts), -np.ones_like(self._ends)))
        who = np.concatenate((self._clients, self._clients))
        width = self.span + 1  # more than any round of the trace
        if self.n <= _INT64_MAX // width:  # client and round in one int64 key: one sort
            order = np.argsort(who * width + where, kind="stable")
        else:
            order = np.lexsort((where, who))
        covering = np.cumsum(step[order])[:-1] > 0
        gaps = np.diff(where[order])
        covered = np.bincount(who[order][:-1], weights=gaps * covering, minlength=self.n)
        return covered / self.span

    def nobody_available(self, rounds: int) -> bool:
        # no row starts before round `rounds` (with repeat, the earliest start is below the
        # span, so a run past the span always meets it)
        return int(self._starts.min()) >= rounds


_INTEGER = re.compile(r"[+-]?[0-9]+")
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: rounds and clients are int64 in every computation on a trace
_INT64_MAX = int(np.iinfo(np.int64).max)
#: the bytes of a plain trace's rows (ASCII integers, separators, spaces): such a file is read
#: by NumPy in one call; any other goes through the csv module, row by row
_PLAIN_BYTES = b"0123456789+-, \t\r\n"
_HEADER_BYTES = tuple(key.encode() for key in TRACE_HEADER)
#: how many parsed traces a process keeps (a run checks and builds its trace several times)
_KEPT_TRACES = 4


@dataclass(frozen=True)
class _Rows:
    """A trace file's rows (int64 arrays) and the line of the file each row is on."""

    clients: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    lines: Sequence[int]

    def __post_init__(self) -> None:
        for rows in (self.clients, self.starts, self.ends):
            rows.flags.writeable = False  # shared by every model built from the file


#: parsed traces by their content's sha256 (a file read again is hashed, not parsed again)
_PARSED: dict[str, _Rows] = {}


def _read_trace(
    path: str, n: int | None, sha256: str | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """The rows (client, start, end arrays) of a trace file and its sha256, all checked."""
    try:
        with open(path, "rb") as f:
            content = f.read()
    except OSError as exc:
        raise ValueError(f"trace path {path!r} cannot be read: {exc.strerror or exc}") from exc
    digest = hashlib.sha256(content).hexdigest()
    if sha256 is not None and sha256 != digest:
        raise ValueError(
            f"trace file {path!r} has changed: its sha256 is {digest}, the configuration "
            f"names {sha256!r}"
        )
    rows = _PARSED.get(digest) or _plain_rows(content) or _csv_rows(path, content, n)
    # every row valid for n (or for some n: clients >= 0) before the rows are kept
    _check_rows(path, rows, n)
    if digest not in _PARSED:
        while len(_PARSED) >= _KEPT_TRACES:
            del _PARSED[next(iter(_PARSED))]  # the oldest
        _PARSED[digest] = rows
    return rows.clients, rows.starts, rows.ends, digest


def _plain_rows(content: bytes) -> _Rows | None:
    """The rows of a plain trace (the header on line 1, then one row per line, ASCII integers
    only), parsed by NumPy; None for any other file."""
    header, _, body = content.removeprefix(codecs.BOM_UTF8).partition(b"\n")
    if tuple(field.strip() for field in header.split(b",")) != _HEADER_BYTES:
        return None
    body = body.rstrip()
    if not body or body.translate(None, delete=_PLAIN_BYTES):  # some other byte left
        return None
    try:
        table = np.loadtxt(
            io.StringIO(body.decode("ascii")),
            delimiter=",",
            dtype=np.int64,
            comments=None,
            quotechar=None,
            ndmin=2,
        )
    except ValueError:  # a malformed row: the csv reader names it
        return None
    rows = body.count(b"\n") + 1
    if table.shape != (rows, len(TRACE_HEADER)):  # blank lines skipped: lines unknown
        return None
    return _Rows(table[:, 0], table[:, 1], table[:, 2], range(2, rows + 2))


def _csv_rows(path: str, content: bytes, n: int | None) -> _Rows:
    """The rows of any trace file, read by the csv module row by row; the first malformed or
    invalid row (for ``n`` clients) is named."""
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"trace file {path!r} is not UTF-8 text: {exc}") from exc
    rows = [
        (line, [field.strip() for field in fields])
        for line, fields in enumerate(csv.reader(io.StringIO(text)), start=1)
        if any(field.strip() for field in fields)
    ]
    if not rows or tuple(rows[0][1]) != TRACE_HEADER:
        got = ",".join(rows[0][1]) if rows else "an empty file"
        raise ValueError(
            f"trace file {path!r}, line {rows[0][0] if rows else 1}: the header must be "
            f"{','.join(TRACE_HEADER)!r}, got {got!r}"
        )
    if len(rows) == 1:
        raise ValueError(f"trace file {path!r} has a header but no rows")
    table = np.array([_trace_row(path, line, fields, n) for line, fields in rows[1:]], np.int64)
    return _Rows(table[:, 0], table[:, 1], table[:, 2], [line for line, _ in rows[1:]])


def _trace_row(path: str, line: int, fields: list[str], n: int | None) -> tuple[int, int, int]:
    where = f"trace file {path!r}, line {line}"
    if len(fields) != len(TRACE_HEADER):
        raise ValueError(f"{where}: expected 3 fields client,start,end, got {','.join(fields)!r}")
    for key, text in zip(TRACE_HEADER, fields, strict=True):
        if not _INTEGER.fullmatch(text):
            raise ValueError(f"{where}: {key} must be an integer, got {text!r}")
    client, start, end = (int(text) for text in fields)
    _check_row(where, client, start, end, n)
    return client, start, end


def _check_rows(path: str, rows: _Rows, n: int | None) -> None:
    """Raise for the first row of ``rows`` that :func:`_check_row` refuses."""
    top = _INT64_MAX if n is None else n - 1
    c, s, e = rows.clients, rows.starts, rows.ends
    bad = (c < 0) | (c > top) | (s < 0) | (s >= e)
    if bad.any():
        k = int(np.argmax(bad))
        where = f"trace file {path!r}, line {rows.lines[k]}"
        _check_row(where, int(c[k]), int(s[k]), int(e[k]), n)


def _check_row(where: str, client: int, start: int, end: int, n: int | None) -> None:
    if client < 0 or client > (_INT64_MAX if n is None else n - 1):
        allowed = "0..n-1" if n is None else f"0..{n - 1} (n={n})"
        raise ValueError(f"{where}: client {client} is out of range; allowed: {allowed}")
    if start < 0:
        raise ValueError(f"{where}: start must be >= 0, got {start}")
    if start >= end:
        raise ValueError(f"{where}: start must be < end (rounds [start, end)), got {start}, {end}")
    if end > _INT64_MAX:
        raise ValueError(f"{where}: end must be <= {_INT64_MAX} (rounds are int64), got {end}")
