"""The arena's rows of the claims ledger: findings of ours, not the papers' (kind "ours").

Each row states a comparison fixed before the runs were looked at: a policy "reaches the tier's
target in fewer rounds" than a reference. A tier is read as one family of comparisons: every
comparison it was run to make on rounds to target, Holm-adjusted at a family-wise error of 5%
(:func:`aoi_fl.arena.results.holm_family`). The screen, exploratory, looked at everything: its
family is every comparison its tables make (each policy against each reference,
:data:`aoi_fl.arena.experiments.REFERENCES`, under each availability model, the two references
against each other once: 125). The confirm
tier was run to test fixed hypotheses: its family is those, every entrant against uniform under
both of its models, and the calibrated Policy 3 against the paper's (:data:`CONFIRM_FAMILY`:
18). A row quotes its interval at the level Holm's step used for it. The verdict of a
direction-only claim follows the ledger's legend:

- a confirm-tier row (``arena.confirm.<model>.<policy>``: an entrant against uniform) is "held"
  when its Holm-adjusted comparison is decided below 0, "not held" when above, else
  "inconclusive at this budget" with the minimum detectable effect;
- a screen row (``arena.screen.<model>.markov_optimal``: the AoI paper's Markov optimal policy
  against uniform; ``arena.screen.<model>.markov_available``: Policy 3 calibrated to
  availability against the paper's Policy 3) is exploratory: it can be "held" or "not held" only
  when the screen decides it after Holm's correction AND the confirm tier, on fresh seeds and
  another model, decides the same comparison the same way; otherwise "inconclusive at this
  budget", its spread saying "screen, not confirmed" and why;
- "inconclusive at this budget" also when a run of a pair never reached the target within the
  horizon (its value would be the horizon's, not the policy's); "inconclusive" while runs are
  missing.
"""

from __future__ import annotations

import re

import pandas as pd

from aoi_fl.arena import experiments as ex
from aoi_fl.arena import results as ar
from aoi_fl.core.validation import require_choice
from aoi_fl.pipeline.claims import VERDICT_GROUP, Claim
from aoi_fl.pipeline.profiles import PROFILES

NOTEBOOK = "20_selection_arena"
#: statements of a paper that this package tests: none (every row is ours)
UNTESTED: tuple = ()


#: the confirm tier's hypotheses (module docstring): each entrant against uniform, and the
#: calibrated Policy 3 against the paper's
CONFIRM_FAMILY = ("uniform", ("markov_available", "markov_optimal"))


def family(frame: pd.DataFrame, hypotheses: tuple | None = None) -> pd.DataFrame:
    """A tier's family of comparisons on rounds to target, Holm-adjusted (module docstring;
    :func:`aoi_fl.arena.results.family_comparisons`)."""
    return ar.holm_family(ar.family_comparisons(frame, hypotheses))


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


def side(member) -> int:
    """-1 when a family member is decided below 0 (fewer rounds), +1 above, 0 when undecided:
    missing, censored, or not rejected after Holm's adjustment."""
    if member is None or member["censored"] or member["p_holm"] > ar.FAMILY_ALPHA:
        return 0
    return -1 if member["mean"] < 0 else 1


def _describe(tier: str, member, frame: pd.DataFrame, size: int) -> str:
    """The member's interval at its Holm level, its adjusted p-value and the family's size."""
    availability = member["availability"]
    c = ar.compare(
        frame[frame.availability == availability],
        member["policy"],
        member["reference"],
        "rounds",
        float(member["holm_level"]),
    )
    text = (
        f"{tier}: {c.mean:+.3g} rounds, {c.level:.4%} interval (Holm's level in a family of "
        f"{size}) [{c.low:+.3g}, {c.high:+.3g}] over {c.n} seeds, Holm-adjusted p "
        f"{member['p_holm']:.2g}"
    )
    if side(member) == 0 and not member["censored"]:
        text += f", MDE {c.mde:.3g}"
    if member["censored"]:
        text += f"; {member['censored']} run(s) of the pairs never reached the target within T"
    return text


def _row(key: str, claim: str, ref: str, ours, spread: str, verdict: str) -> Claim:
    return Claim(
        key,
        "arena",
        ref,
        claim,
        None,
        ours,
        spread,
        verdict,
        NOTEBOOK,
        printed_as=rf"^{re.escape(key)}: .* -> {VERDICT_GROUP}$",
        kind="ours",
    )


def _confirm_row(key, claim, tier, availability, policy, reference) -> Claim:
    frame, table = tier
    member = _member(table, availability, policy, reference)
    if member is None:
        return _row(key, claim, "confirm", None, "fewer than 2 paired seeds cached", "inconclusive")
    decided = side(member)
    verdict = {-1: "held", 1: "not held", 0: "inconclusive at this budget"}[decided]
    spread = _describe("confirm tier", member, frame, len(table))
    return _row(key, claim, "confirm", float(member["mean"]), spread, verdict)


def _screen_row(key, claim, ref, screen, confirm, availability, policy, reference) -> Claim:
    (frame, table), (confirm_frame, confirm_table) = screen, confirm
    member = _member(table, availability, policy, reference)
    if member is None:
        return _row(key, claim, ref, None, "fewer than 2 paired seeds cached", "inconclusive")
    spread = _describe("screen", member, frame, len(table))
    found, again = side(member), _member(confirm_table, availability, policy, reference)
    if member["censored"]:
        verdict = "inconclusive at this budget"
    elif found == 0:
        verdict = "inconclusive at this budget"
        spread += "; screen, not confirmed: no difference after Holm's correction"
    elif again is None:
        verdict = "inconclusive at this budget"
        spread += (
            "; screen, not confirmed: the confirm tier does not run this comparison "
            f"(it runs {', '.join(sorted(set(confirm_frame.availability))) or 'nothing yet'})"
        )
    else:
        spread += "; " + _describe("confirm tier", again, confirm_frame, len(confirm_table))
        if side(again) == found:
            verdict = "held" if found < 0 else "not held"
        else:
            verdict = "inconclusive at this budget"
            spread += "; screen, not confirmed: the confirm tier's fresh seeds do not repeat it"
    return _row(key, claim, ref, float(member["mean"]), spread, verdict)


def screen_claims(screen: tuple, confirm: tuple) -> list[Claim]:
    """The screen's rows (module docstring); ``screen`` and ``confirm``: each tier's (frame,
    :func:`family`)."""
    target = ex.TASKS["screen"]["target"]
    rows = []
    for availability in ex.AVAILABILITY:
        rows.append(
            _screen_row(
                f"arena.screen.{availability}.markov_optimal",
                f"under {availability} availability, the AoI paper's Markov optimal policy "
                f"reaches {target:.0%} (screen task) in fewer rounds than uniform selection",
                "screen",
                screen,
                confirm,
                availability,
                "markov_optimal",
                "uniform",
            )
        )
    for availability in ex.AVAILABILITY:
        if availability == "always":
            continue
        rows.append(
            _screen_row(
                f"arena.screen.{availability}.markov_available",
                f"under {availability} availability, Policy 3 calibrated to each client's "
                f"availability reaches {target:.0%} (screen task) in fewer rounds than the "
                "paper's Policy 3",
                "screen (beyond the paper)",
                screen,
                confirm,
                availability,
                "markov_available",
                "markov_optimal",
            )
        )
    return rows


def confirm_claims(confirm: tuple, others: tuple, where: str) -> list[Claim]:
    """The confirm tier's rows: every entrant against uniform on its two availability models."""
    target = ex.TASKS["confirm"]["target"]
    return [
        _confirm_row(
            f"arena.confirm.{availability}.{policy}",
            f"under {availability} availability, {policy} reaches {target:.0%} with the small "
            "CNN in fewer rounds than uniform selection",
            confirm,
            availability,
            policy,
            "uniform",
        )
        for availability in ("always", where)
        for policy in ex.confirm_entrants(others)
        if policy != "uniform"
    ]


def claims(profile: str = "cpu", *, results_dir: str = "results", data_root: str = "data"):
    """Every row of the arena, from ``profile``'s cached runs."""
    del data_root
    profile = require_choice("profile", profile, PROFILES)
    screen, missing = ar.load("screen", profile, cache_dir=results_dir)  # read once, used twice
    confirm, confirm_rows = pd.DataFrame(), []
    if not missing and len(screen):  # the complete screen's choices define the confirm tier
        others, where = ar.best_others(screen), ar.most_separating(screen)
        confirm, _ = ar.load_confirm(others, where, profile, cache_dir=results_dir)
        confirm_rows = confirm_claims((confirm, family(confirm, CONFIRM_FAMILY)), others, where)
    return (
        screen_claims((screen, family(screen)), (confirm, family(confirm, CONFIRM_FAMILY)))
        + confirm_rows
    )


def verdict_lines(notebook: str, profile: str = "cpu", *, results_dir: str = "results"):
    """The lines the arena's notebook prints for its rows: "key: claim (ours; spread) ->
    verdict"."""
    rows = claims(profile, results_dir=results_dir) if notebook == NOTEBOOK else []
    return [
        f"{c.key}: {c.claim} (ours {'-' if c.ours is None else f'{c.ours:+.3g}'} rounds; "
        f"{c.spread}) -> {c.verdict}"
        for c in rows
    ]
