"""Client availability: who can take part in round t (ours, for the selection arena; issue 29).

An availability model decides which of the n clients *can* take part in round t (0-based); a
selection policy then picks among those (an availability-aware sampler's
``sample(available=mask)``, :mod:`aoi_fl.core.selection`). The four papers assume everyone is
always reachable (:class:`Always`); the other models relax that:

=================  ==========================================================================
name               client i is available in round t ...
=================  ==========================================================================
``always``         always (the papers' setting)
``bernoulli``      independently with a fixed rate r_i: one rate for all, explicit rates, or
                   rates drawn once from a Beta of mean ``mean`` and ``concentration``,
                   optionally matched to the clients' data sizes by rank (``correlation``)
``markov_onoff``   following its own two-state on/off Markov chain, started in its
                   stationary law: on-runs and off-runs last ``mean_on`` / ``mean_off`` rounds
                   on average (geometric)
``diurnal``        independently with rate clip(base + amplitude sin(2 pi t / period + phi_i),
                   0, 1), phi_i a per-client phase (time zone)
``trace``          when a recorded trace (CSV ``client,start,end``) says so
=================  ==========================================================================

The FedSUM paper's participation patterns are the special cases with everyone selected who is
available (the arena's ``all_available`` sampler): its P2 (the FedSUM package's ``Bernoulli``
pattern) is ``bernoulli`` with every rate p, and its P3 (``SineBernoulli``: p (A sin(2 pi t /
period) + offset)) is ``diurnal`` with base = p offset, amplitude = p A and every phase 0.

FLGo's simulator (repository WwZzz/easyFL, ``flgo/simulator/default_simulator.py``) draws static
per-client availability rates, among them two data-size-dependent modes: ``MDF`` (more data
first: the rate grows with the client's number of samples, a power of it normalised by the
largest) and ``LDF`` (less data first: it shrinks with it), and ``SLN`` modulates rates by a sine
of period 24 rounds. Here ``correlation="size"`` / ``"inverse_size"`` give the Bernoulli rates
drawn from the Beta to the clients by the rank of their data size (larger clients more, or
less, available), which keeps the distribution of rates while correlating them with size.

Every model is a deterministic function of (configuration, seed, t): ``mask(t)`` returns the same
mask whenever it is asked, in any order, so a resumed run needs nothing checkpointed and all
policies of one seed see the same availability (paired comparisons). Round t's draws come from
their own stream ``generator(seed, "availability", t)`` (random access is cheap); rates or phases
drawn once come from ``generator(seed, "availability_rates")``.

Each model also states its closed forms: ``rates(t)``, P(client i is available in round t), and
``long_run_rates()``, the long-run fraction of rounds each client is available (the tests compare
both with simulated frequencies).
"""

from __future__ import annotations

import codecs
import csv
import functools
import hashlib
import inspect
import io
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from aoi_fl.core.registry import declare_options
from aoi_fl.core.seeding import generator
from aoi_fl.core.validation import (
    require_choice,
    require_int,
    require_probability_vector,
    require_real,
    require_sizes,
)

#: how drawn Bernoulli rates relate to the clients' data sizes (by rank)
CORRELATIONS: tuple[str, ...] = ("none", "size", "inverse_size")
#: the header a trace file must start with
TRACE_HEADER: tuple[str, ...] = ("client", "start", "end")


def _is_list(value: Any) -> bool:
    """Whether an option holds one value per client (a list or 1-d array) rather than one."""
    return isinstance(value, np.ndarray | Sequence) and not isinstance(value, str)


class Availability(ABC):
    """Who can take part in each round, as a deterministic function of (options, seed, t).

    A subclass declares its options as the keyword-only parameters of :meth:`check`, which
    validates them (without any data; checks that need the number of clients only when ``n`` is
    given) and returns them in canonical, JSON-serialisable form: :meth:`config` is
    ``{"name", "seed", **options}`` and :func:`build_availability` rebuilds the same model from it.
    """

    #: the model's name in configurations (a key of :data:`AVAILABILITY`)
    name: ClassVar[str]
    #: bytes the model keeps per client and round asked about (its memory bound)
    bytes_per_client_round: ClassVar[int] = 0

    def __init__(self, n: int, seed: int, options: dict[str, Any]) -> None:
        self.n = require_int("n", n, minimum=1)
        self.seed = require_int("seed", seed, minimum=0)
        self.options = options

    @staticmethod
    @abstractmethod
    def check(n: int | None, **options: Any) -> dict[str, Any]:
        """The options in canonical form, after checking them (n-dependent checks if ``n``)."""

    @abstractmethod
    def mask(self, t: int) -> np.ndarray:
        """Who is available in round ``t`` (bool, shape (n,)); the same whenever asked."""

    @abstractmethod
    def rates(self, t: int) -> np.ndarray:
        """P(client i is available in round ``t``) for every client (the marginal law)."""

    @abstractmethod
    def long_run_rates(self) -> np.ndarray:
        """The long-run fraction of rounds each client is available."""

    def nobody_available(self, rounds: int) -> bool:
        """Whether no client can take part in any of rounds 0..rounds-1, in closed form.

        Here: every long-run rate is 0, which for the models whose rates are constant or
        periodic (all but the trace, which overrides this) means a rate of 0 in every round.
        """
        return not self.long_run_rates().any()

    def config(self) -> dict[str, Any]:
        """``{"name", "seed", **options}``: JSON-serialisable, enough to rebuild the model."""
        return {"name": self.name, "seed": self.seed, **self.options}

    def trace(self, rounds: int) -> np.ndarray:
        """The masks of rounds 0..rounds-1 (bool, shape (rounds, n))."""
        rounds = require_int("rounds", rounds, minimum=0)
        out = np.empty((rounds, self.n), dtype=bool)
        for t in range(rounds):
            out[t] = self.mask(t)
        return out

    def _round(self, t: int) -> int:
        return require_int("t", t, minimum=0)


class Always(Availability):
    """Every client in every round: the setting of the four papers."""

    name = "always"

    def __init__(self, n: int, sizes: Any = None, seed: int = 0, **options: Any) -> None:
        super().__init__(n, seed, self.check(n, **options))

    @staticmethod
    def check(n: int | None) -> dict[str, Any]:
        return {}

    def mask(self, t: int) -> np.ndarray:
        self._round(t)
        return np.ones(self.n, dtype=bool)

    def rates(self, t: int) -> np.ndarray:
        self._round(t)
        return np.ones(self.n)

    def long_run_rates(self) -> np.ndarray:
        return np.ones(self.n)


class IndependentDraws(Availability):
    """Models whose clients are available independently given round t's rates: client i is
    available iff u_{t,i} < rates(t)_i, with u_t uniform from ``generator(seed, "availability",
    t)``."""

    def mask(self, t: int) -> np.ndarray:
        t = self._round(t)
        return generator(self.seed, "availability", t).random(self.n) < self.rates(t)


class Bernoulli(IndependentDraws):
    """Client i is available in each round independently with its own fixed rate r_i.

    Either ``rates`` (one per client) or ``mean``: every r_i = mean, or, with ``concentration``
    c, r_i drawn once from Beta(mean c, (1 - mean) c) (mean ``mean``, variance mean (1 - mean) /
    (c + 1)). ``correlation`` then hands the drawn rates to the clients by the rank of their
    data size: ``"size"`` the largest rate to the largest client, ``"inverse_size"`` to the
    smallest, ``"none"`` in the order drawn. Closed form: rates(t) = long_run_rates() = r.
    """

    name = "bernoulli"

    def __init__(self, n: int, sizes: Any = None, seed: int = 0, **options: Any) -> None:
        super().__init__(n, seed, self.check(n, **options))
        o = self.options
        if o["rates"] is not None:
            self._rates = np.asarray(o["rates"], dtype=float)
        elif o["concentration"] is None:
            self._rates = np.full(self.n, o["mean"])
        else:
            a, b = o["mean"] * o["concentration"], (1.0 - o["mean"]) * o["concentration"]
            drawn = generator(self.seed, "availability_rates").beta(a, b, size=self.n)
            self._rates = _by_size_rank(drawn, sizes, o["correlation"], self.n)

    @staticmethod
    def check(
        n: int | None,
        *,
        mean: float | None = None,
        concentration: float | None = None,
        rates: list | None = None,
        correlation: str = "none",
    ) -> dict[str, Any]:
        correlation = require_choice("correlation", correlation, CORRELATIONS)
        if (mean is None) == (rates is None):
            raise ValueError(
                f"bernoulli availability needs exactly one of mean or rates, got mean={mean!r}, "
                f"rates={'None' if rates is None else 'a list'}"
            )
        if rates is not None:
            if concentration is not None or correlation != "none":
                raise ValueError(
                    "explicit rates are given in client order: concentration must be None and "
                    f"correlation 'none', got concentration={concentration!r}, "
                    f"correlation={correlation!r}"
                )
            if not _is_list(rates):
                raise TypeError(f"rates must be a list of probabilities, got {rates!r}")
            rates = require_probability_vector("rates", rates, length=n).tolist()
            return {"mean": None, "concentration": None, "rates": rates, "correlation": "none"}
        mean = require_real("mean", mean, minimum=0.0, strict_minimum=True, maximum=1.0)
        if concentration is not None:
            concentration = require_real(
                "concentration", concentration, minimum=0.0, strict_minimum=True
            )
            if mean == 1.0:
                raise ValueError(
                    "mean must be < 1 with a concentration (the Beta(mean c, (1 - mean) c) "
                    f"needs both parameters > 0), got mean={mean}"
                )
        return {
            "mean": mean,
            "concentration": concentration,
            "rates": None,
            "correlation": correlation,
        }

    def rates(self, t: int) -> np.ndarray:
        self._round(t)
        return self._rates.copy()

    def long_run_rates(self) -> np.ndarray:
        return self._rates.copy()


def _by_size_rank(drawn: np.ndarray, sizes: Any, correlation: str, n: int) -> np.ndarray:
    """``drawn`` rates handed to the clients by the rank of their data size (ties: lower id
    first), or as drawn for ``correlation="none"``."""
    if correlation == "none":
        return drawn
    if sizes is None:
        raise ValueError(f"correlation={correlation!r} needs the clients' data sizes, got None")
    sizes = require_sizes("sizes", sizes)
    if sizes.size != n:
        raise ValueError(f"sizes must have one entry per client (n={n}), got {sizes.size}")
    ascending = np.sort(drawn)
    rates = np.empty(n)
    rates[np.argsort(sizes, kind="stable")] = (
        ascending if correlation == "size" else ascending[::-1]
    )
    return rates


class MarkovOnOff(Availability):
    """Each client follows its own two-state on/off Markov chain.

    P(on -> off) = 1 / mean_on and P(off -> on) = 1 / mean_off, so on-runs and off-runs are
    geometric with means ``mean_on`` and ``mean_off`` rounds (each >= 1; one number for every
    client or one per client). Round 0 is drawn from the stationary law, so every round's
    marginal is the stationary rate pi_i = mean_on_i / (mean_on_i + mean_off_i) (closed form of
    rates(t) and long_run_rates()); the lag-1 autocorrelation of a client's availability is
    1 - 1/mean_on_i - 1/mean_off_i.

    Round t uses its own uniforms u_t (``generator(seed, "availability", t)``): a client is on in
    round t iff u_{t,i} < P(on in t | state in t - 1). The chain is kept as a trace extended
    forward as far as asked (one byte per client and round), so ``mask(t)`` is the same in any
    order of calls.
    """

    name = "markov_onoff"
    bytes_per_client_round = 1  # the chain's states, one bool per client and round

    def __init__(self, n: int, sizes: Any = None, seed: int = 0, **options: Any) -> None:
        super().__init__(n, seed, self.check(n, **options))
        mean_on = np.broadcast_to(np.asarray(self.options["mean_on"], dtype=float), (self.n,))
        mean_off = np.broadcast_to(np.asarray(self.options["mean_off"], dtype=float), (self.n,))
        self._stationary = mean_on / (mean_on + mean_off)
        self._stay_on = 1.0 - 1.0 / mean_on
        self._turn_on = 1.0 / mean_off
        self._states = np.empty((0, self.n), dtype=bool)
        self._filled = 0

    @staticmethod
    def check(n: int | None, *, mean_on: float | list, mean_off: float | list) -> dict[str, Any]:
        return {
            "mean_on": _durations("mean_on", mean_on, n),
            "mean_off": _durations("mean_off", mean_off, n),
        }

    def _extend(self, rounds: int) -> None:
        if rounds <= self._filled:
            return
        if rounds > self._states.shape[0]:
            grown = np.empty((max(rounds, 2 * self._states.shape[0]), self.n), dtype=bool)
            grown[: self._filled] = self._states[: self._filled]
            self._states = grown
        for t in range(self._filled, rounds):
            u = generator(self.seed, "availability", t).random(self.n)
            if t == 0:
                self._states[0] = u < self._stationary
            else:
                self._states[t] = u < np.where(self._states[t - 1], self._stay_on, self._turn_on)
        self._filled = rounds

    def mask(self, t: int) -> np.ndarray:
        t = self._round(t)
        self._extend(t + 1)
        return self._states[t].copy()

    def trace(self, rounds: int) -> np.ndarray:
        rounds = require_int("rounds", rounds, minimum=0)
        self._extend(rounds)
        return self._states[:rounds].copy()

    def rates(self, t: int) -> np.ndarray:
        self._round(t)
        return self._stationary.copy()

    def long_run_rates(self) -> np.ndarray:
        return self._stationary.copy()


def _durations(name: str, value: Any, n: int | None) -> float | list[float]:
    """A mean duration in rounds (>= 1): one number, or one per client (length n if given)."""
    if not _is_list(value):
        return require_real(name, value, minimum=1.0)
    if n is not None and len(value) != n:
        raise ValueError(f"{name} must have one entry per client (n={n}), got {len(value)}")
    if len(value) == 0:
        raise ValueError(f"{name} must be a number >= 1 or a non-empty list of them, got []")
    return [require_real(f"{name}[{i}]", v, minimum=1.0) for i, v in enumerate(value)]


class Diurnal(IndependentDraws):
    """A daily cycle: client i is available in round t independently with rate

        r_i(t) = clip(base + amplitude sin(2 pi t / period + phi_i), 0, 1),

    phi_i its phase (time zone): one for all clients or one per client (``phases``), or, by
    default, drawn once uniformly on [0, 2 pi). ``period`` is a whole number of rounds, so the
    rates repeat every period and the long-run rate is their mean over one period (closed form;
    ``base`` itself when the sine is never clipped and period >= 2).
    """

    name = "diurnal"

    def __init__(self, n: int, sizes: Any = None, seed: int = 0, **options: Any) -> None:
        super().__init__(n, seed, self.check(n, **options))
        phases = self.options["phases"]
        if phases is None:
            phases = generator(self.seed, "availability_rates").uniform(0.0, 2.0 * np.pi, self.n)
        self._phases = np.broadcast_to(np.asarray(phases, dtype=float), (self.n,))

    @staticmethod
    def check(
        n: int | None,
        *,
        base: float,
        amplitude: float,
        period: int,
        phases: float | list | None = None,
    ) -> dict[str, Any]:
        options: dict[str, Any] = {
            "base": require_real("base", base, minimum=0.0, maximum=1.0),
            "amplitude": require_real("amplitude", amplitude, minimum=0.0),
            "period": require_int("period", period, minimum=1),
            "phases": None,
        }
        if phases is None:
            return options
        if not _is_list(phases):
            options["phases"] = require_real("phases", phases)
            return options
        if n is not None and len(phases) != n:
            raise ValueError(f"phases must have one entry per client (n={n}), got {len(phases)}")
        if len(phases) == 0:
            raise ValueError("phases must be a number, a non-empty list or None, got []")
        options["phases"] = [require_real(f"phases[{i}]", p) for i, p in enumerate(phases)]
        return options

    def rates(self, t: int) -> np.ndarray:
        t = self._round(t)
        o = self.options
        # the angle computed as FedSUM's SineBernoulli computes it (its P3 is a special case)
        angle = 2.0 * np.pi * t / o["period"] + self._phases
        return np.clip(o["base"] + o["amplitude"] * np.sin(angle), 0.0, 1.0)

    def long_run_rates(self) -> np.ndarray:
        period = self.options["period"]
        return sum(self.rates(t) for t in range(period)) / period


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


MODELS: tuple[type[Availability], ...] = (Always, Bernoulli, MarkovOnOff, Diurnal, Trace)


def _build(cls: type[Availability], n: int, sizes: Any, seed: int = 0, **options: Any) -> Any:
    return cls(n, sizes, seed, **options)


#: model name -> factory(n, sizes, seed=0, **options) -> Availability (its signature lists the
#: options, as the samplers' factories do)
AVAILABILITY: dict[str, Callable[..., Availability]] = {
    cls.name: declare_options(functools.partial(_build, cls), cls.check, passed=("n",))
    for cls in MODELS
}
_CLASSES = {cls.name: cls for cls in MODELS}


def _parse_spec(spec: Any) -> tuple[type[Availability], int, dict[str, Any]]:
    """The class, seed and options of ``spec``; names and options checked, not their values."""
    if not isinstance(spec, Mapping):
        raise TypeError(f"an availability spec must be a dict with a 'name', got {spec!r}")
    if "name" not in spec:
        raise ValueError(
            f"an availability spec needs a 'name' (one of {', '.join(sorted(AVAILABILITY))}), "
            f"got {dict(spec)!r}"
        )
    cls = _CLASSES[require_choice("availability", spec["name"], AVAILABILITY)]
    seed = require_int("seed", spec.get("seed", 0), minimum=0)
    options = {k: v for k, v in spec.items() if k not in ("name", "seed")}
    params = [p for name, p in _signature(cls.name).items() if name not in ("n", "sizes", "seed")]
    unknown = sorted(set(options) - {p.name for p in params})
    missing = [p.name for p in params if p.default is p.empty and p.name not in options]
    if unknown or missing:
        problems = [f"unknown options {unknown}"] * bool(unknown)
        problems += [f"missing options {missing}"] * bool(missing)
        valid = ", ".join(p.name for p in params) or "none"
        raise ValueError(f"availability {cls.name!r}: {', '.join(problems)}; valid: {valid}")
    return cls, seed, options


@functools.cache
def _signature(name: str) -> Mapping[str, inspect.Parameter]:
    return inspect.signature(AVAILABILITY[name]).parameters


def check_availability_spec(spec: Mapping[str, Any], n: int | None = None) -> dict[str, Any]:
    """Check ``spec`` = {"name", "seed" (optional, default 0), **options} without any data.

    Names, option names, types and ranges; with ``n`` also what depends on it (lengths of
    per-client lists, trace clients < n). A trace file must exist and parse. Returns the
    canonical configuration (what :meth:`Availability.config` of the built model returns,
    including a trace file's sha256).
    """
    cls, seed, options = _parse_spec(spec)
    if n is not None:
        n = require_int("n", n, minimum=1)
    return {"name": cls.name, "seed": seed, **cls.check(n, **options)}


def build_availability(spec: Mapping[str, Any], n: int, sizes: Any) -> Availability:
    """The availability model ``spec`` names (see :func:`check_availability_spec`) for n clients
    with data sizes ``sizes`` (used by the size-correlated Bernoulli only)."""
    cls, seed, options = _parse_spec(spec)
    return AVAILABILITY[cls.name](n, sizes, seed=seed, **options)
