"""Rules shared by the papers' ledger rows (docs/layout.md §2.2): a rule takes what a row's
measure returned and the parameters the row gives it, and returns the row's (ours, spread,
verdict). A row of a ``claims.toml`` names its rule; :data:`RULES` holds the shared ones. A rule
that takes ``paper_value`` is given the row's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aoi_fl.core.validation import require_choice
from aoi_fl.pipeline.claims import Condition, run_verdict, sign_verdict, value_verdict

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


@dataclass(frozen=True)
class Reading:
    """What a measure read: the row's number ``ours`` (None: none), how it varies (``spread``),
    the conditions its runs have (matched with the row's ``scope``), and what a rule decides on:
    ``tested``, the number a bound is put to where it is not ``ours``; ``resolution``, the
    smallest value the measure can tell from 0; ``interval``, a confidence interval of a
    difference; ``verdict``, the criterion a table the notebook prints already applied."""

    ours: float | None
    spread: str
    tested: float | None = None
    resolution: float = 0.0
    interval: tuple[float, float] | None = None
    verdict: str | None = None
    conditions: tuple[Condition, ...] = ()

    @property
    def compared(self) -> float | None:
        return self.ours if self.tested is None else self.tested


def criterion(reading: Reading) -> Judged:
    """The verdict of the table a notebook prints, so that the row and the table agree."""
    return reading.ours, reading.spread, reading.verdict or "inconclusive"


def above(reading: Reading, bound: float) -> Judged:
    """ "held" when the tested number exceeds ``bound``; "inconclusive" without one."""
    return _bounded(reading, reading.compared is not None and reading.compared > bound)


def below(reading: Reading, bound: float) -> Judged:
    """ "held" when the tested number is under ``bound``; "inconclusive at this budget" when the
    measure cannot resolve ``bound`` (below its noise floor a bound says nothing)."""
    if reading.compared is not None and reading.resolution >= bound:
        return reading.ours, reading.spread, "inconclusive at this budget"
    return _bounded(reading, reading.compared is not None and reading.compared < bound)


def at_most(reading: Reading, bound: float, decimals: int) -> Judged:
    """ "held" when the tested number, to the ``decimals`` a bound is stated with, is at most
    ``bound``."""
    value = reading.compared
    return _bounded(reading, value is not None and round(value, decimals) <= bound)


def _bounded(reading: Reading, held: bool) -> Judged:
    if reading.compared is None:
        return reading.ours, reading.spread, "inconclusive"
    return reading.ours, reading.spread, "held" if held else "not held"


def covers(reading: Reading, point: float = 0.0) -> Judged:
    """An equality judged by an interval: "held" when it contains ``point``, "not held" when it
    does not, "inconclusive" without an interval."""
    if reading.interval is None:
        return reading.ours, reading.spread, "inconclusive"
    low, high = reading.interval
    return reading.ours, reading.spread, "held" if low <= point <= high else "not held"


def paired_sign(reading: Reading, claimed: str = "positive") -> Judged:
    """A direction judged by the interval of a paired difference
    (:func:`aoi_fl.pipeline.claims.sign_verdict`); "inconclusive" without an interval."""
    require_choice("claimed", claimed, CLAIMED)
    if reading.interval is None:
        return reading.ours, reading.spread, "inconclusive"
    return reading.ours, reading.spread, sign_verdict(*reading.interval, claimed)


def prediction(values: Sequence[float | None], paper_value: float, level: float = 0.95) -> Judged:
    """A number the paper prints from one run against the prediction interval of one more of
    our per-seed ``values`` (:func:`aoi_fl.pipeline.claims.run_verdict`)."""
    return run_verdict(paper_value, values, level)


def value(reading: Reading, paper_value: float, rtol: float) -> Judged:
    """A number the theory fixes, "held" within ``rtol`` of the paper's
    (:func:`aoi_fl.pipeline.claims.value_verdict`)."""
    if reading.ours is None:
        return None, reading.spread, "inconclusive"
    return reading.ours, reading.spread, value_verdict(paper_value, reading.ours, rtol)


#: the shared rules, by the name a row gives in its ``rule`` table
RULES = {
    "direction": direction,
    "criterion": criterion,
    "above": above,
    "below": below,
    "at_most": at_most,
    "covers": covers,
    "paired_sign": paired_sign,
    "prediction": prediction,
    "value": value,
}
