"""Rules shared by the papers' ledger rows (docs/layout.md §2.2): a rule takes what a row's
measure returned and the parameters the row gives it, and returns the row's (ours, spread,
verdict). A row of a ``claims.toml`` names its rule; :data:`RULES` holds the shared ones."""

from __future__ import annotations

from dataclasses import dataclass

from aoi_fl.core.validation import require_choice

#: a rule's answer: our number (None: no runs to compute it), how it varies, the verdict
Judged = tuple[float | None, str, str]
#: the side of 0 a direction claim names: "negative" for "A takes fewer rounds than B"
CLAIMED = ("negative", "positive")


@dataclass(frozen=True)
class Decision:
    """A test of a difference, as a measure returns it: the ``estimate`` (None: the runs to test
    it are missing), the ``side`` of 0 the test decided (-1, +1; 0 undecided), the test in
    words (or why there is none), and whether runs that never reached their target leave it
    undecidable at this budget (``censored``), whatever the test says."""

    estimate: float | None
    side: int
    text: str
    censored: bool = False


def side_verdict(side: int, claimed: str = "negative") -> str:
    """The verdict on a claim that names a direction but no size, from the side of 0 a test
    decided: "held" on the ``claimed`` side, "not held" on the other, "inconclusive at this
    budget" when undecided (more seeds or rounds could decide it)."""
    require_choice("claimed", claimed, CLAIMED)
    if side == 0:
        return "inconclusive at this budget"
    return "held" if (side < 0) == (claimed == "negative") else "not held"


def direction(decision: Decision, claimed: str = "negative") -> Judged:
    """A direction claim judged on one test (:func:`side_verdict`); "inconclusive" without it."""
    if decision.estimate is None:
        return None, decision.text, "inconclusive"
    return decision.estimate, decision.text, side_verdict(decision.side, claimed)


#: the shared rules, by the name a row gives in its ``rule`` table
RULES = {"direction": direction}
