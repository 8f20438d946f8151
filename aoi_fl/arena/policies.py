"""The field's policies that the arena adds to the papers' samplers, drawn together in figures."""

from aoi_fl.core.registry import register_family

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
register_family("the field's policies", FIELD_POLICIES)
