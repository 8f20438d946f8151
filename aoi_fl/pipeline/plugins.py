"""The paper packages, found by name, and what worker processes need of a user's registrations.

The shared layers never import a paper: :func:`load` imports the packages named in
:data:`aoi_fl.papers.PAPERS` and in the ``aoi_fl.papers`` entry-point group, and each package's
``REGISTERS`` modules, whose imports fill :mod:`aoi_fl.core.registry`. The ledger reads each
package's ``CLAIMS`` module (:func:`claim_modules`).

A sampler or algorithm a user registers outside these packages (a file of their own, a notebook
cell) exists only in the process that registered it. :func:`shipped` packs what a configuration
grid names from such registrations, so that a worker process (spawned, or a Ray task) can
register the same factory before it trains (:func:`install`). To a spawned process a factory
travels by reference (its module and name, as pickle sends functions; the process has this one's
``sys.path``); to Ray, whose workers may be other machines without the user's file, its module
travels by value (cloudpickle). Either way it must live in an importable module: one defined in a
notebook cell or a script run as ``__main__`` is refused in the parent, before anything trains,
with an error that says where to put it.
"""

from __future__ import annotations

import functools
import importlib
import pickle
import sys
from collections.abc import Iterable, Mapping
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

from aoi_fl.core import registry
from aoi_fl.papers import PAPERS

#: third-party paper packages (or policy packages) declare themselves in this entry-point group
ENTRY_POINT_GROUP = "aoi_fl.papers"


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


@functools.cache
def load() -> tuple[ModuleType, ...]:
    """Import every paper package and its ``REGISTERS`` modules (once per process)."""
    packages = tuple(importlib.import_module(name) for name in paper_packages())
    for package in packages:
        for module in getattr(package, "REGISTERS", ()):
            importlib.import_module(f"{package.__name__}.{module}")
    return packages


def claim_modules() -> list[ModuleType]:
    """Each paper's claims module (``CLAIMS`` of its package), in :func:`paper_packages` order."""
    return [
        importlib.import_module(f"{package.__name__}.{package.CLAIMS}")
        for package in load()
        if getattr(package, "CLAIMS", None)
    ]


#: what a configuration names, by registry: (label, configuration section, table)
_NAMED = (("sampler", "sampler", registry.SAMPLERS), ("algorithm", "training", registry.ALGORITHMS))


def _in(module: str, packages: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _registered_by_a_paper(kind: str, name: str) -> bool:
    # who registered the name, not where its factory is defined: a user may register a paper's
    # factory under a name of their own, which a worker's load() does not make
    return _in(registry.REGISTRARS.get((kind, name), ""), paper_packages())


def shipped(
    configs: Iterable[Mapping[str, Any]], *, by_value: bool = False
) -> tuple[tuple[str, str, bytes], ...]:
    """(kind, name, pickled factory) of every name ``configs`` use that no paper package
    registers, for :func:`install` in a worker (``by_value``: with its module's code, for Ray);
    raises ValueError for a factory that a worker could not import (defined in ``__main__``: a
    notebook cell or a script run directly)."""
    load()
    out: dict[tuple[str, str], bytes] = {}
    for config in configs:
        for kind, section, table in _NAMED:
            spec = config.get(section, {})
            name = spec.get("name") if kind == "sampler" else spec.get("algorithm", {}).get("name")
            if name is None or (kind, name) in out or _registered_by_a_paper(kind, name):
                continue
            out[(kind, name)] = _pickled(kind, name, table[name], by_value)
    return tuple((kind, name, data) for (kind, name), data in out.items())


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


def install(factories: Iterable[tuple[str, str, bytes]]) -> None:
    """In a worker: load the papers, then register the factories :func:`shipped` packed."""
    load()
    register = {"sampler": registry.register_sampler, "algorithm": registry.register_algorithm}
    for kind, name, data in factories:
        register[kind](name, pickle.loads(data))
