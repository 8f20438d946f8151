"""The arena's measures: what a row of ``claims.toml`` reads from a tier's cached runs, one
comparison of its Holm-adjusted family on rounds to target
(:func:`aoi_fl.evidence.arena.claims.family`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from aoi_fl.core.validation import require_choice
from aoi_fl.evidence.arena import experiments as ex
from aoi_fl.evidence.arena import results as ar
from aoi_fl.pipeline.rules import Decision

#: how a row's spread names each tier
LABELS = {"screen": "screen", "confirm": "confirm tier"}


@dataclass(frozen=True)
class Tier:
    """A tier's cached runs and its Holm-adjusted family of comparisons."""

    frame: pd.DataFrame
    table: pd.DataFrame


@dataclass(frozen=True)
class Runs:
    """Each tier's runs by name, and the confirm tier's comparisons (availability, policy,
    reference), in the order it runs them: what the screen chose (empty before it is
    complete)."""

    tiers: Mapping[str, Tier]
    plan: tuple[tuple[str, str, str], ...] = field(default=())


def side(member) -> int:
    """-1 when a family member is decided below 0 (fewer rounds), +1 above, 0 when undecided:
    missing, censored, or not rejected after Holm's adjustment."""
    if member is None or member["censored"] or member["p_holm"] > ar.FAMILY_ALPHA:
        return 0
    return -1 if member["mean"] < 0 else 1


def decide(label: str, tier: Tier, availability: str, policy: str, reference: str) -> Decision:
    """The tier's test of ``policy`` against ``reference`` under ``availability``."""
    member = _member(tier.table, availability, policy, reference)
    if member is None:
        return Decision(None, 0, "fewer than 2 paired seeds cached")
    text = _describe(label, member, tier.frame, len(tier.table))
    return Decision(float(member["mean"]), side(member), text, bool(member["censored"]))


def comparison(
    runs: Runs, *, tier: str, availability: str, policy: str, reference: str
) -> Decision:
    """``tier``'s test of ``policy`` against ``reference`` on rounds to target."""
    tier = require_choice("tier", tier, ex.TIERS)
    return decide(LABELS[tier], runs.tiers[tier], availability, policy, reference)


def repeated_comparison(
    runs: Runs, *, tier: str, repeat: str, availability: str, policy: str, reference: str
) -> tuple[Decision, Decision]:
    """:func:`comparison` in ``tier`` and in ``repeat``, whose fresh seeds test it again; the
    second says which models ``repeat`` runs where it does not test this one."""
    args = {"availability": availability, "policy": policy, "reference": reference}
    found = comparison(runs, tier=tier, **args)
    again = comparison(runs, tier=repeat, **args)
    if again.estimate is None:
        ran = runs.tiers[repeat].frame.get("availability", ())  # no column before any run
        models = ", ".join(sorted(set(ran))) or "nothing yet"
        again = Decision(
            None, 0, f"the {LABELS[repeat]} does not run this comparison (it runs {models})"
        )
    return found, again


#: the measures, by the name a row gives in its ``measure`` table
MEASURES = {"comparison": comparison, "repeated_comparison": repeated_comparison}


def _member(table: pd.DataFrame, availability: str, policy: str, reference: str):
    """The family's row of one comparison, or None where the tier does not make it."""
    if table.empty:
        return None
    hit = table[
        (table.availability == availability)
        & (table.policy == policy)
        & (table.reference == reference)
    ]
    return None if hit.empty else hit.iloc[0]


def _describe(label: str, member, frame: pd.DataFrame, size: int) -> str:
    """The member's interval at its Holm level, its adjusted p-value and the family's size."""
    c = ar.compare(
        frame[frame.availability == member["availability"]],
        member["policy"],
        member["reference"],
        "rounds",
        float(member["holm_level"]),
    )
    text = (
        f"{label}: {c.mean:+.3g} rounds, {c.level:.4%} interval (Holm's level in a family of "
        f"{size}) [{c.low:+.3g}, {c.high:+.3g}] over {c.n} seeds, Holm-adjusted p "
        f"{member['p_holm']:.2g}"
    )
    if side(member) == 0 and not member["censored"]:
        text += f", MDE {c.mde:.3g}"
    if member["censored"]:
        text += f"; {member['censored']} run(s) of the pairs never reached the target within T"
    return text
