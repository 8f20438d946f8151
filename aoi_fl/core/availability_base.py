"""The base class of availability models and their registry, by name in configurations.

A model is one :class:`Availability` subclass passed to :func:`register_availability`; the
built-in ones are in :mod:`aoi_fl.core.availability` (which re-exports everything here), a
user's may live in a file of their own or a package's ``aoi_fl.availability`` entry point.
"""

from __future__ import annotations

import functools
import inspect
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np

from aoi_fl.core.registry import add_entry, declare_options
from aoi_fl.core.validation import require_choice, require_int


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


#: model name -> its class (filled by :func:`register_availability`)
MODELS: dict[str, type[Availability]] = {}
#: model name -> factory(n, sizes, seed=0, **options) -> Availability (its signature lists the
#: options, as the samplers' factories do)
AVAILABILITY: dict[str, Callable[..., Availability]] = {}


def _build(cls: type[Availability], n: int, sizes: Any, seed: int = 0, **options: Any) -> Any:
    return cls(n, sizes, seed, **options)


def register_availability(cls: type[Availability]) -> type[Availability]:
    """Make the model ``cls`` available to configurations under ``cls.name`` (usable as a class
    decorator).

    ``cls`` subclasses :class:`Availability`; its constructor takes ``(n, sizes, seed,
    **options)`` and its options are the keyword-only parameters of its ``check``.
    """
    if not (isinstance(cls, type) and issubclass(cls, Availability)):
        raise TypeError(
            f"an availability model must be a subclass of Availability, got {cls!r} "
            f"({type(cls).__name__})"
        )
    name = getattr(cls, "name", None)
    add_entry("availability", MODELS, name, cls, sys._getframe(1).f_globals.get("__name__", ""))
    AVAILABILITY[name] = declare_options(functools.partial(_build, cls), cls.check, passed=("n",))
    return cls


def _parse_spec(spec: Any) -> tuple[type[Availability], int, dict[str, Any]]:
    """The class, seed and options of ``spec``; names and options checked, not their values."""
    if not isinstance(spec, Mapping):
        raise TypeError(f"an availability spec must be a dict with a 'name', got {spec!r}")
    if "name" not in spec:
        raise ValueError(
            f"an availability spec needs a 'name' (one of {', '.join(sorted(AVAILABILITY))}), "
            f"got {dict(spec)!r}"
        )
    cls = MODELS[require_choice("availability", spec["name"], AVAILABILITY)]
    seed = require_int("seed", spec.get("seed", 0), minimum=0)
    options = {k: v for k, v in spec.items() if k not in ("name", "seed")}
    params = [p for name, p in _signature(cls).items() if name not in ("n", "sizes", "seed")]
    unknown = sorted(set(options) - {p.name for p in params})
    missing = [p.name for p in params if p.default is p.empty and p.name not in options]
    if unknown or missing:
        problems = [f"unknown options {unknown}"] * bool(unknown)
        problems += [f"missing options {missing}"] * bool(missing)
        valid = ", ".join(p.name for p in params) or "none"
        raise ValueError(f"availability {cls.name!r}: {', '.join(problems)}; valid: {valid}")
    return cls, seed, options


@functools.cache
def _signature(cls: type[Availability]) -> Mapping[str, inspect.Parameter]:
    return inspect.signature(AVAILABILITY[cls.name]).parameters


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
