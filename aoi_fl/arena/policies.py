"""The field's policies that the arena adds to the papers' samplers, drawn together in figures."""

from aoi_fl.core.registry import Style, register_family, register_style

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
