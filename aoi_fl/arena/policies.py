"""The field's policies that the arena adds to the papers' samplers, drawn together in figures."""

import functools
from typing import Any

from aoi_fl.core.registry import Style, declare_options, declared

#: the policies the arena adds: the field's, each from its own paper in a module of this package,
#: and the AoI method's Policy 3 calibrated to availability (``markov_available``)
FIELD_POLICIES: tuple[str, ...] = (
    "all_available",
    "markov_available",
    "power_of_choice",
    "power_of_choice_stale",
    "clustered_size",
    "clustered_similarity",
    "oort",
)
#: the arena's own figure family: the field's policies and the uniform reference (FedSUM's P1
#: pattern: m of n uniformly, weights 1/m)
ARENA_FAMILY: tuple[str, ...] = ("uniform", *FIELD_POLICIES)


def built(cls: type, n: int, sizes: Any, **options: Any) -> Any:
    """A policy whose constructor takes the clients' data sizes, built for a configuration's n
    clients (the sizes must give one per client)."""
    sampler = cls(sizes, **options)
    if sampler.n != n:
        raise ValueError(f"sizes must give one size per client (n={n}), got {sampler.n}")
    return sampler


def policy_factory(cls: type, style: Style) -> Any:
    """The factory of ``cls`` (built by :func:`built`, its options its constructor's), declared
    with its ``style`` for its entry point (``aoi_fl/entry_points.txt``)."""
    factory = declare_options(functools.partial(built, cls), cls)
    return declared(factory, style, availability=cls.availability_aware)
