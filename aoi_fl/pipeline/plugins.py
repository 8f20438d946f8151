"""The papers' and a user's installed plugins (entry points), the paper packages, and what
worker processes need of a user's registrations.

Samplers, algorithms, availability models and recorders are found through entry points: an
installed package declares each in a group of :data:`GROUPS`, named as configurations name it::

    [project.entry-points."aoi_fl.samplers"]
    every_other = "my_policies:every_other"        # factory(n, sizes, **options) -> Sampler
    [project.entry-points."aoi_fl.algorithms"]
    my_fedavg = "my_policies:MyFedAvg"             # factory(**options) -> Algorithm
    [project.entry-points."aoi_fl.availability"]
    weekly = "my_policies:Weekly"                  # an Availability subclass, name "weekly"

aoi_fl declares its papers' own the same way, in ``aoi_fl/entry_points.txt``, from which its
``pyproject.toml`` builds its installed metadata. :func:`load` reads that file from the package
itself, so that a tree run by ``PYTHONPATH`` (as on a lent GPU machine) or shipped to a Ray
cluster, which have no metadata, find the papers too; it registers them in the file's order,
then other distributions' entry points (sorted by name). A sampler factory may carry what
:func:`~aoi_fl.core.registry.register_sampler` takes as attributes (``style``, a
:class:`~aoi_fl.core.registry.Style`; ``availability_aware``, bool; ``horizon``, str:
:func:`~aoi_fl.core.registry.declared`). The pipeline calls :func:`load` before it resolves a
configuration, so a package installed (or put on ``sys.path``) after ``aoi_fl`` was imported is
found too.

The ledger and the figures read the paper packages: :func:`load` imports the evidence packages
named in :data:`aoi_fl.papers.PAPERS` and in the ``aoi_fl.papers`` entry-point group, and each
package's ``REGISTERS`` modules, whose imports register plot styles and families. The ledger
reads each package's ``CLAIMS`` module (:func:`claim_modules`).

A sampler, algorithm or availability model a user registers by a call (a file of their own, a
notebook cell) exists only in the process that registered it, and one another package declares
may be missing where a worker runs (a Ray node). :func:`shipped` packs what a configuration grid
names from either, so that a worker process (spawned, or a Ray task) can register the same
factory before it trains (:func:`install`). To a spawned process a factory travels by
reference (its module and name, as pickle sends functions; the process has this one's
``sys.path``); to Ray, whose workers may be other machines without the user's file, its module
travels by value (cloudpickle). Either way it must live in an importable module: one defined in
a notebook cell or a script run as ``__main__`` is refused in the parent, before anything
trains, with an error that says where to put it.
"""

from __future__ import annotations

import configparser
import functools
import importlib
import pickle
import re
import sys
from collections.abc import Iterable, Mapping
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from aoi_fl.core import registry
from aoi_fl.core.availability import MODELS, register_availability
from aoi_fl.papers import PAPERS

#: third-party paper packages (or policy packages) declare themselves in this entry-point group
ENTRY_POINT_GROUP = "aoi_fl.papers"
#: entry-point group -> what its entries are (kind, as in :data:`aoi_fl.core.registry.REGISTRARS`)
GROUPS: dict[str, str] = {
    "aoi_fl.samplers": "sampler",
    "aoi_fl.algorithms": "algorithm",
    "aoi_fl.availability": "availability",
    "aoi_fl.recorders": "recorder",
}
#: aoi_fl's own entry points, the file its installed metadata is built from
OWN_ENTRY_POINTS = Path(__file__).resolve().parents[1] / "entry_points.txt"
#: aoi_fl's distribution name (normalised): its installed entry points are the file's
_OWN_DISTRIBUTION = "aoi-fl"
#: (kind, name) of every registration an entry point made -> the folder its distribution was
#: found in (None: aoi_fl's own file). Another process finds it the same way, by :func:`load`,
#: if that folder is on its import path
FROM_ENTRY_POINTS: dict[tuple[str, str], str | None] = {}


def paper_packages() -> tuple[str, ...]:
    """The package names: :data:`aoi_fl.papers.PAPERS`, then the entry points' (sorted)."""
    extra = sorted(ep.value for ep in entry_points(group=ENTRY_POINT_GROUP))
    return PAPERS + tuple(name for name in extra if name not in PAPERS)


@functools.cache
def paper_titles() -> dict[str, str]:
    """The papers' keys (a ledger row's ``paper``) and titles, from their packages' ``KEY`` and
    ``TITLE`` (only the packages themselves are imported)."""
    packages = [importlib.import_module(name) for name in paper_packages()]
    return {package.KEY: package.TITLE for package in packages}


def swept_papers() -> set[str]:
    """The keys of the packages that reproduce a paper, whose statements without a ledger row
    are listed with a reason (``UNTESTED``); a package of our own findings (the arena) declares
    ``SWEPT = False``."""
    packages = [importlib.import_module(name) for name in paper_packages()]
    return {package.KEY for package in packages if getattr(package, "SWEPT", True)}


def load() -> tuple[ModuleType, ...]:
    """Register aoi_fl's own entry points (once per process), import every paper package and its
    ``REGISTERS`` modules (once), and register other distributions' entry points of
    :data:`GROUPS` (again whenever ``sys.path`` has changed)."""
    _own()
    packages = _papers()
    _entry_points(tuple(sys.path))
    return packages


def own_entry_points() -> list[EntryPoint]:
    """aoi_fl's entry points, read from :data:`OWN_ENTRY_POINTS` in the file's order."""
    return entry_points_in(OWN_ENTRY_POINTS.read_text(), str(OWN_ENTRY_POINTS))


def entry_points_in(text: str, source: str = "<text>") -> list[EntryPoint]:
    """The entry points of ``text`` in the ``entry_points.txt`` format (INI: a section a group,
    ``name = module:attr`` a point), in their order."""
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # names are case sensitive
    parser.read_string(text, source)
    return [
        EntryPoint(name, value, group)
        for group in parser.sections()
        for name, value in parser.items(group)
    ]


@functools.cache
def _own() -> None:
    for point in own_entry_points():
        _register_point(point, None)


@functools.cache
def _papers() -> tuple[ModuleType, ...]:
    packages = tuple(importlib.import_module(name) for name in paper_packages())
    for package in packages:
        for module in getattr(package, "REGISTERS", ()):
            importlib.import_module(f"{package.__name__}.{module}")
    return packages


def samplers() -> dict[str, Any]:
    """Every registered sampler factory by name, the papers' and entry points' loaded first
    (:func:`load`): what a lookup by name uses at run time."""
    load()
    return registry.SAMPLERS


def algorithms() -> dict[str, Any]:
    """Every registered algorithm by name, loaded first as :func:`samplers` is."""
    load()
    return registry.ALGORITHMS


@functools.cache
def _entry_points(path: tuple[str, ...]) -> None:
    # keyed by sys.path: the installed distributions are read from it; aoi_fl's own were
    # registered from its file
    for group in GROUPS:
        for point in sorted(entry_points(group=group), key=lambda p: p.name):
            if _distribution(point) != _OWN_DISTRIBUTION:
                _register_point(point, str(Path(point.dist.locate_file("")).resolve()))


def _distribution(point: EntryPoint) -> str:
    return re.sub(r"[-_.]+", "-", getattr(point.dist, "name", "") or "").lower()


def _register_point(point: EntryPoint, folder: str | None) -> None:
    """Register what ``point`` names; ``folder``: where its distribution was found (None: in
    aoi_fl's own file)."""
    try:
        _register(GROUPS[point.group], point.name, point.load())
    except Exception as error:  # noqa: BLE001  (import errors, refusals: all named)
        where = OWN_ENTRY_POINTS if folder is None else f"distribution {point.dist.name}"
        raise ValueError(
            f"entry point {point.name} = {point.value!r} in group {point.group!r} ({where}): "
            f"{type(error).__name__}: {error}"
        ) from error
    # a worker sees the declaring module, not this one, as the registrar: shipped to it unless
    # it is aoi_fl's
    registry.REGISTRARS[(GROUPS[point.group], point.name)] = point.module
    FROM_ENTRY_POINTS[(GROUPS[point.group], point.name)] = folder


def _register(kind: str, name: str, obj: Any, flags: Mapping[str, Any] | None = None) -> None:
    """Register ``obj``; a sampler's ``flags`` (availability, horizon) default to its attributes."""
    if kind == "sampler":
        flags = flags or {}
        registry.register_sampler(
            name,
            obj,
            _style(obj),
            availability=flags.get("availability", getattr(obj, "availability_aware", False)),
            horizon=flags.get("horizon", getattr(obj, "horizon", None)),
        )
    elif kind == "algorithm":
        registry.register_algorithm(name, obj, _style(obj))
    elif kind == "recorder":
        registry.register_recorder(name, obj)
    else:
        if getattr(obj, "name", None) != name:
            raise ValueError(
                f"the availability model's name is {getattr(obj, 'name', None)!r}, but its "
                f"entry point is named {name!r}: they must be the same"
            )
        register_availability(obj)


def _style(obj: Any) -> Any:
    # a class's own style: a subclass of a paper's algorithm does not take the paper's label
    return vars(obj).get("style") if isinstance(obj, type) else getattr(obj, "style", None)


def claim_modules() -> list[ModuleType]:
    """Each paper's claims module (``CLAIMS`` of its package), in :func:`paper_packages` order."""
    return [
        importlib.import_module(f"{package.__name__}.{package.CLAIMS}")
        for package in load()
        if getattr(package, "CLAIMS", None)
    ]


#: what a configuration names, by registry: (kind, configuration section, table)
_NAMED = (
    ("sampler", "sampler", registry.SAMPLERS),
    ("algorithm", "training", registry.ALGORITHMS),
    ("availability", "availability", MODELS),
)


def _named(kind: str, section: Mapping[str, Any]) -> str | None:
    return (
        (section.get("algorithm") or {}).get("name") if kind == "algorithm" else section.get("name")
    )


def _in(module: str, packages: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def registered_by_aoi_fl(kind: str, name: str) -> bool:
    """Whether aoi_fl or a paper package made the registration of ``name``, which every process
    that loads the papers makes too."""
    # who registered the name, not where its factory is defined: a user may register a paper's
    # factory under a name of their own, which a worker's load() does not make
    return _in(registry.REGISTRARS.get((kind, name), ""), ("aoi_fl", *paper_packages()))


def shipped(
    configs: Iterable[Mapping[str, Any]], *, by_value: bool = False
) -> tuple[tuple[str, str, bytes, dict[str, Any]], ...]:
    """(kind, name, pickled factory, flags) of every name ``configs`` use that aoi_fl and its
    paper packages do not register, for :func:`install` in a worker (``by_value``: with its
    module's code, for Ray); a sampler's flags are its availability awareness and horizon.
    Raises ValueError for a factory that a worker could not import (defined in ``__main__``: a
    notebook cell or a script run directly)."""
    load()
    out: dict[tuple[str, str], tuple[bytes, dict[str, Any]]] = {}
    for config in configs:
        for kind, section, table in _NAMED:
            name = _named(kind, config.get(section, {}))
            if name is None or (kind, name) in out or registered_by_aoi_fl(kind, name):
                continue
            flags = {}
            if kind == "sampler":
                aware = name in registry.AVAILABILITY_AWARE
                flags = {"availability": aware, "horizon": registry.HORIZONS.get(name)}
            out[(kind, name)] = (_pickled(kind, name, table[name], by_value), flags)
    return tuple((kind, name, data, flags) for (kind, name), (data, flags) in out.items())


def _pickled(kind: str, name: str, factory: Any, by_value: bool) -> bytes:
    module, qualname = registry.origin(factory)
    where = f"{module}.{qualname}"
    if module == "__main__" or "<locals>" in qualname or "<lambda>" in qualname:
        raise ValueError(
            f"{kind} {name!r} is registered with {where}, which a worker process cannot import "
            "(it was defined in a notebook cell, a script run directly, or inside a function). "
            "Put the factory and its register_"
            f"{kind}(...) call in an importable module (a .py file on the Python path, e.g. "
            "my_policies.py next to the notebook) and import that module; or run with workers=1 "
            "and the local executor, which train in this process"
        )
    # a worker has aoi_fl and the standard library: their functions travel by reference
    by_value = by_value and not _in(module, ("aoi_fl", *sys.stdlib_module_names))
    if by_value:
        from ray import cloudpickle  # Ray's serialiser (its own copy of cloudpickle)
    try:
        if not by_value:
            return pickle.dumps(factory)
        cloudpickle.register_pickle_by_value(sys.modules[module])
        try:
            return cloudpickle.dumps(factory)
        finally:
            cloudpickle.unregister_pickle_by_value(sys.modules[module])
    except Exception as error:  # noqa: BLE001  (pickle raises several kinds)
        raise ValueError(
            f"{kind} {name!r} is registered with {where}, which cannot be sent to a worker "
            f"process ({type(error).__name__}: {error}); register a module-level function or "
            "class of an importable module, or run with workers=1"
        ) from error


def install(factories: Iterable[tuple[str, str, bytes, Mapping[str, Any]]]) -> None:
    """In a worker: load the papers, then register the factories :func:`shipped` packed."""
    load()
    for kind, name, data, flags in factories:
        _register(kind, name, pickle.loads(data), flags)
