"""The arena's rows of the claims ledger, findings of ours (kind "ours"): the rows are data
(``claims.toml`` beside this module); this module judges them on the cached runs.

A tier is read as one family of comparisons on rounds to target, Holm-adjusted at a family-wise
error of 5% (:func:`family`): the screen, exploratory, makes every comparison its tables make
(125); the confirm tier, run to test fixed hypotheses, makes those (:data:`CONFIRM_FAMILY`: 18).
A confirm row is judged on its comparison (:func:`aoi_fl.pipeline.rules.direction`), a screen
row only where the confirm tier repeats it (:func:`replicated`). The screen chooses the confirm
tier's policies and model, so only the rows of what it runs enter the ledger, in its order.
"""

from __future__ import annotations

import functools
import re

import pandas as pd

from aoi_fl.core.validation import require_choice
from aoi_fl.evidence.arena import KEY, measures
from aoi_fl.evidence.arena import experiments as ex
from aoi_fl.evidence.arena import results as ar
from aoi_fl.pipeline import claimfiles, rules
from aoi_fl.pipeline.claims import VERDICT_GROUP, Claim
from aoi_fl.pipeline.profiles import PROFILES

NOTEBOOK = "20_selection_arena"
#: statements of a paper that this package tests: none (every row is ours)
UNTESTED: tuple = ()
#: the confirm tier's hypotheses: each entrant against uniform, and the calibrated Policy 3
#: against the paper's
CONFIRM_FAMILY = ("uniform", ("markov_available", "markov_optimal"))


def family(frame: pd.DataFrame, hypotheses: tuple | None = None) -> pd.DataFrame:
    """A tier's family of comparisons on rounds to target, Holm-adjusted (module docstring;
    :func:`aoi_fl.evidence.arena.results.family_comparisons`)."""
    return ar.holm_family(ar.family_comparisons(frame, hypotheses))


def replicated(
    decisions: tuple[rules.Decision, rules.Decision], claimed: str = "negative"
) -> rules.Judged:
    """A screen finding judged on its repeat by the confirm tier's fresh seeds: "held" or "not
    held" only when both decide it the same way; otherwise "inconclusive at this budget", the
    spread saying why it is "screen, not confirmed" (censored runs say it themselves)."""
    found, again = decisions
    if found.estimate is None or found.censored:
        return rules.direction(found, claimed)
    if found.side == 0:
        return _unconfirmed(found, found.text, "no difference after Holm's correction")
    if again.estimate is None:
        return _unconfirmed(found, found.text, again.text)
    spread = f"{found.text}; {again.text}"
    if again.side != found.side:
        return _unconfirmed(found, spread, "the confirm tier's fresh seeds do not repeat it")
    return found.estimate, spread, rules.side_verdict(found.side, claimed)


def _unconfirmed(found: rules.Decision, spread: str, why: str) -> rules.Judged:
    return found.estimate, f"{spread}; screen, not confirmed: {why}", "inconclusive at this budget"


#: the rules a row of claims.toml may name: the shared ones and the screen's own
RULES = {**rules.RULES, "replicated": replicated}


@functools.cache
def rows() -> tuple[claimfiles.Row, ...]:
    """The rows of ``claims.toml``."""
    return claimfiles.load(__package__, measures=measures.MEASURES, rules=RULES)


def load_runs(profile: str, results_dir: str) -> measures.Runs:
    """Both tiers' cached runs; the confirm tier's as the complete screen chose it."""
    screen, missing = ar.load("screen", profile, results_dir=results_dir)  # read once, used twice
    confirm, plan = pd.DataFrame(), ()
    if not missing and len(screen):
        others, where = ar.best_others(screen), ar.most_separating(screen)
        confirm, _ = ar.load_confirm(others, where, profile, results_dir=results_dir)
        entrants = [p for p in ex.confirm_entrants(others) if p != "uniform"]
        plan = tuple((a, p, "uniform") for a in ex.confirm_models(where) for p in entrants)
    tiers = {
        "screen": measures.Tier(screen, family(screen)),
        "confirm": measures.Tier(confirm, family(confirm, CONFIRM_FAMILY)),
    }
    return measures.Runs(tiers, plan)


def claims(profile: str = "cpu", *, results_dir: str = "results", data_root: str = "data"):
    """Every row of the arena, from ``profile``'s cached runs."""
    del data_root
    runs = load_runs(require_choice("profile", profile, PROFILES), results_dir)
    return [_build(row, runs) for row in _chosen(rows(), runs.plan)]


def _chosen(written: tuple[claimfiles.Row, ...], plan: tuple) -> list[claimfiles.Row]:
    """The screen's rows in the file's order, then the rows of the confirm tier's ``plan``."""
    confirm = {_compared(row): row for row in written if row.measure.args["tier"] == "confirm"}
    unwritten = [c for c in plan if c not in confirm]
    if unwritten:
        raise ValueError(f"claims.toml has no confirm row for the comparisons {unwritten}")
    screen = [row for row in written if row.measure.args["tier"] == "screen"]
    return screen + [confirm[c] for c in plan]


def _compared(row: claimfiles.Row) -> tuple[str, str, str]:
    args = row.measure.args
    return args["availability"], args["policy"], args["reference"]


def _build(row: claimfiles.Row, runs: measures.Runs) -> Claim:
    # the notebook prints every row as one "key: ... -> verdict" line (verdict_lines)
    printed_as = rf"^{re.escape(row.key)}: .* -> {VERDICT_GROUP}$"
    return claimfiles.build(row, KEY, runs, printed_as=printed_as)


def _confirm_row(key, claim, tier, availability, policy, reference) -> Claim:
    """A confirm row on a hand-built (frame, :func:`family`) ``tier``, outside claims.toml: the
    tests judge made-up runs with it."""
    args = {"tier": "confirm", "availability": availability}
    args |= {"policy": policy, "reference": reference}
    measure = claimfiles.Call("comparison", args, measures.comparison)
    rule = claimfiles.Call("direction", {}, rules.direction)
    row = claimfiles.Row(key, "confirm", "ours", claim, NOTEBOOK, measure, rule)
    return _build(row, measures.Runs({"confirm": measures.Tier(*tier)}))


def verdict_lines(notebook: str, profile: str = "cpu", *, results_dir: str = "results"):
    """The lines the arena's notebook prints for its rows: "key: claim (ours; spread) ->
    verdict"."""
    built = claims(profile, results_dir=results_dir) if notebook == NOTEBOOK else []
    return [
        f"{c.key}: {c.claim} (ours {'-' if c.ours is None else f'{c.ours:+.3g}'} rounds; "
        f"{c.spread}) -> {c.verdict}"
        for c in built
    ]
