"""What a configuration can name and a figure can draw.

A sampler is a factory ``(n, sizes, **options) -> Sampler`` (``sizes`` the clients' data sizes)
with a name in configurations and a plot :class:`Style`; an algorithm a factory
``(**options) -> Algorithm``. Installed packages, aoi_fl's own papers among them, declare theirs
as entry points (``aoi_fl/entry_points.txt`` lists the papers'; a factory carries its style and
flags as attributes, :func:`declared`), and :func:`aoi_fl.pipeline.plugins.load` registers them.
A module of a user's own (a file next to the notebook, a cell) registers by a call,
:func:`register_sampler` or :func:`register_algorithm`, and is usable as soon as it is imported:
nothing else needs an edit. Names that a figure shows but a configuration does not name
(aggregation rules, participation patterns) register a style only (:func:`register_style`), and
names shown side by side form a family (:func:`register_family`), in which every colour and
marker differ (tested). A factory that passes its ``**options`` on declares them
(:func:`declare_options`), so that a configuration naming an unknown option, or missing a
required one, is told the valid ones before anything runs.

Loading is explicit: importing a paper's method registers nothing. The pipeline loads before it
resolves a name (``RunConfig.parse``, the plots, the ledger); a lookup from outside reads
:func:`aoi_fl.pipeline.plugins.samplers` / ``algorithms``, which load first. Core's own
algorithm (``fedavg``) and availability models are registered with core itself.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aoi_fl.core.validation import require_choice

#: seaborn's "colorblind" palette (10 colours), the colours of the registered styles
PALETTE: tuple[str, ...] = (
    "#0173b2",
    "#de8f05",
    "#029e73",
    "#d55e00",
    "#cc78bc",
    "#ca9161",
    "#fbafe4",
    "#949494",
    "#ece133",
    "#56b4e9",
)


@dataclass(frozen=True)
class Style:
    """Display name, colour and marker of one policy, algorithm, rule or pattern."""

    label: str
    color: str
    marker: str

    def kwargs(self) -> dict[str, str]:
        """Keyword arguments for ``ax.plot`` / ``ax.scatter``."""
        return {"label": self.label, "color": self.color, "marker": self.marker}


#: sampler name -> factory(n, sizes, **options) -> Sampler
SAMPLERS: dict[str, Callable[..., Any]] = {}
#: algorithm name -> factory(**options) -> Algorithm
ALGORITHMS: dict[str, Callable[..., Any]] = {}
#: name -> plot style (samplers, algorithms, and names only figures use)
STYLES: dict[str, Style] = {}
#: family title -> the names that share a figure
FAMILIES: dict[str, tuple[str, ...]] = {}
#: training mode -> the per-round recorder a paper supplies for it (``"full_information"``)
RECORDERS: dict[str, Any] = {}
#: sampler names whose samplers pick among the available clients of a round (availability aware)
AVAILABILITY_AWARE: set[str] = set()
#: (kind, name) -> the module whose code made the registration (a paper's, a user's, __main__)
REGISTRARS: dict[tuple[str, str], str] = {}
#: sampler name -> its option that names the number of rounds it is tuned for (K-Vib's
#: ``rounds``): a configuration whose training has another number of rounds is warned about
HORIZONS: dict[str, str] = {}


def origin(obj: Any) -> tuple[str, str]:
    """(module, qualified name) where a factory is defined (through any ``functools.partial``)."""
    while isinstance(obj, functools.partial):
        obj = obj.func
    return getattr(obj, "__module__", ""), getattr(obj, "__qualname__", repr(obj))


def _require_factory(kind: str, name: str, factory: Any, shape: str) -> None:
    if not callable(factory):
        raise TypeError(
            f"the factory of {kind} {name!r} must be callable ({shape}), got {factory!r} "
            f"({type(factory).__name__})"
        )


def _caller() -> str:
    """The module whose code called the ``register_*`` function that calls this."""
    return sys._getframe(2).f_globals.get("__name__", "")


def add_entry(kind: str, table: dict[str, Any], name: str, value: Any, registrar: str = "") -> None:
    """Put ``value`` in ``table`` under ``name`` and note who registered it (:data:`REGISTRARS`);
    a name taken by something defined elsewhere is refused."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"{kind} name must be a non-empty string, got {name!r}")
    # the papers reuse words ("uniform"): a silent overwrite would train or draw the wrong
    # thing; re-importing the defining module (same origin) is harmless
    if name in table and origin(table[name]) != origin(value):
        raise ValueError(f"{kind} {name!r} is registered twice: {table[name]!r} and {value!r}")
    table[name] = value
    REGISTRARS[(kind, name)] = registrar


def declare_options(
    factory: Callable[..., Any], target: Callable[..., Any], *, passed: Iterable[str] = ()
) -> Callable[..., Any]:
    """``factory``, which passes its ``**options`` on to ``target``, with a signature listing them.

    The options are ``target``'s parameters other than the factory's own and those it
    ``passed`` itself, each keyword-only; :func:`inspect.signature` (hence ``help`` and the
    checks of configurations) then shows the real options.
    """
    signature = inspect.signature(factory)
    kept = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    taken = {p.name for p in kept} | set(passed)
    options = [
        p.replace(kind=p.KEYWORD_ONLY)
        for p in inspect.signature(target).parameters.values()
        if p.name not in taken and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    factory.__signature__ = signature.replace(parameters=[*kept, *options])
    return factory


def register_style(name: str, style: Style) -> None:
    """Give ``name`` a fixed colour, marker and label in every figure."""
    if not isinstance(style, Style):
        raise TypeError(f"style of {name!r} must be a Style, got {type(style).__name__}")
    if name in STYLES and STYLES[name] != style:
        raise ValueError(f"style {name!r} is registered twice: {STYLES[name]} and {style}")
    STYLES[name] = style


def register_styles(styles: Mapping[str, Style]) -> None:
    """:func:`register_style` for each name of ``styles``."""
    for name, value in styles.items():
        register_style(name, value)


def register_sampler(
    name: str,
    factory: Callable[..., Any],
    style: Style | None = None,
    *,
    availability: bool = False,
    horizon: str | None = None,
) -> None:
    """Make sampler ``name`` available to configurations (and figures, with a ``style``).

    ``factory(n, sizes, **options)`` returns a :class:`~aoi_fl.core.selection.Sampler`.
    ``availability=True`` declares that its samplers are availability aware (they select among
    the clients an availability model lets take part, :mod:`aoi_fl.core.selection`), so that a
    configuration pairing another sampler with an availability model is refused before it runs.
    ``horizon`` names the option that says for how many rounds the sampler is tuned
    (:data:`HORIZONS`).
    """
    _require_factory("sampler", name, factory, "(n, sizes, **options) -> Sampler")
    add_entry("sampler", SAMPLERS, name, factory, _caller())
    if availability:
        AVAILABILITY_AWARE.add(name)
    if horizon is not None:
        HORIZONS[name] = horizon
    if style is not None:
        register_style(name, style)


def declared(
    factory: Callable[..., Any],
    style: Style | None = None,
    *,
    availability: bool = False,
    horizon: str | None = None,
) -> Callable[..., Any]:
    """``factory`` carrying, as attributes, what :func:`register_sampler` takes beside it
    (``style``, ``availability_aware``, ``horizon``), for an entry point to register it with.

    aoi_fl's own samplers are declared this way and named in ``aoi_fl/entry_points.txt``;
    :func:`aoi_fl.pipeline.plugins.load` registers them, as it does a user's installed package.
    """
    factory.style = style
    factory.availability_aware = availability
    factory.horizon = horizon
    return factory


def register_algorithm(name: str, factory: Callable[..., Any], style: Style | None = None) -> None:
    """Make algorithm ``name`` available to configurations (and figures, with a ``style``)."""
    _require_factory("algorithm", name, factory, "(**options) -> Algorithm")
    add_entry("algorithm", ALGORITHMS, name, factory, _caller())
    if style is not None:
        register_style(name, style)


def register_recorder(mode: str, recorder: Any) -> None:
    """The per-round recorder the trainer uses in training mode ``mode`` (a paper's metrics)."""
    add_entry("recorder", RECORDERS, mode, recorder)


def register_family(title: str, names: Iterable[str]) -> None:
    """Declare that ``names`` appear in one figure (so their styles must tell them apart)."""
    names = tuple(names)
    if title in FAMILIES and FAMILIES[title] != names:
        raise ValueError(f"family {title!r} is registered twice: {FAMILIES[title]} and {names}")
    FAMILIES[title] = names


#: the papers' names for the number of clients a round selects: m (the AoI paper and most
#: policies), k (K-Vib's K), s (FedSUM's S)
CLIENT_COUNT_NAMES: tuple[str, ...] = ("m", "k", "s")


def clients_option(name: str) -> str | None:
    """The option of sampler ``name`` that says how many clients a round selects (one of
    :data:`CLIENT_COUNT_NAMES`, from its factory's signature), None for a sampler without one."""
    parameters = inspect.signature(SAMPLERS[require_choice("sampler", name, SAMPLERS)]).parameters
    return next((option for option in CLIENT_COUNT_NAMES if option in parameters), None)


def with_clients(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` of sampler ``name`` with ``m`` renamed to the sampler's own spelling, so that
    ``m`` names the clients per round of every sampler; the paper's spelling (``k``, ``s``) is
    what a configuration keeps, so cache keys do not change."""
    options = dict(options)
    own = clients_option(name)
    if "m" in options and own not in (None, "m"):
        if own in options:
            raise ValueError(
                f"sampler {name!r}: m={options['m']!r} and {own}={options[own]!r} both give the "
                f"clients per round; pass one"
            )
        options[own] = options.pop("m")
    return options


def style(name: str) -> Style:
    """The registered style of ``name``; unknown names list the valid ones."""
    return STYLES[require_choice("style name", name, STYLES)]
