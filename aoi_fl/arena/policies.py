"""The field's policies that the arena adds to the papers' samplers, drawn together in figures."""

import functools
from typing import Any

from aoi_fl.core.registry import (
    Style,
    declare_options,
    register_family,
    register_sampler,
    register_style,
)

#: registered by this package's modules (:data:`aoi_fl.arena.REGISTERS`), each from its own paper
FIELD_POLICIES: tuple[str, ...] = (
    "all_available",
    "markov_available",
    "power_of_choice",
    "power_of_choice_stale",
    "clustered_size",
    "clustered_similarity",
    "oort",
)
# the arena's reference: FedSUM's P1 pattern (m of n uniformly, weights 1/m), which no paper's
# figure draws on its own
register_style("uniform", Style("uniform", "#000000", "*"))
#: the arena's own figure family: the field's policies and the uniform reference
ARENA_FAMILY: tuple[str, ...] = ("uniform", *FIELD_POLICIES)
register_family("the arena's policies", ARENA_FAMILY)


def built(cls: type, n: int, sizes: Any, **options: Any) -> Any:
    """A policy whose constructor takes the clients' data sizes, built for a configuration's n
    clients (the sizes must give one per client)."""
    sampler = cls(sizes, **options)
    if sampler.n != n:
        raise ValueError(f"sizes must give one size per client (n={n}), got {sampler.n}")
    return sampler


def register_policy(cls: type, style: Style) -> None:
    """Register ``cls`` (built by :func:`built`, its options its constructor's) under its name."""
    factory = declare_options(functools.partial(built, cls), cls)
    register_sampler(cls.name, factory, style, availability=cls.availability_aware)
