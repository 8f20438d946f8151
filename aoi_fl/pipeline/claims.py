"""The claims ledger: every number a paper prints and every claim it makes, against ours.

A :class:`Claim` holds one row: where the paper says it, what it says, its value, ours with the
spread over seeds, the verdict and the notebook that shows it. Each paper's module builds its rows
from the cached results and the library (``aoi_fl.<paper>.claims``), never from notebook outputs,
so the ledger stays true when a result is recomputed; :func:`ledger` gathers them.

Verdicts (:data:`VERDICTS`):

- a printed number from one run of the paper (rounds to a target, a table entry) is compared with
  the spread of our runs: "held" when it lies inside the 95% prediction interval of one more run,
  mean +/- t * sd * sqrt(1 + 1/n) over our n seeds (:func:`run_verdict`), "not held" outside,
  "inconclusive" with fewer than 2 seeds;
- a number the theory fixes (a closed form) is "held" within a stated relative tolerance
  (:func:`value_verdict`);
- a comparison between methods takes the verdict of its paired interval over seeds
  (:func:`aoi_fl.pipeline.paired.verdict` and the notebooks' own rules);
- "not computable here": the data cannot be had on this machine (CIFAR).

A claim of speed ("faster", "converges in fewer rounds") is judged on a speed measure fixed before
looking, never on the endpoint (:func:`rounds_to_level`, :func:`horizon_mean`). A run that
diverged (:func:`diverged`, one rule for every paper) cannot make a comparison "held".
Statements of a paper that state a result but have no row are listed with the reason
(:class:`Untested`, each paper module's ``UNTESTED``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as scipy_stats

from aoi_fl.core.train import rounds_to_target
from aoi_fl.core.validation import require_choice
from aoi_fl.pipeline import plugins

VERDICTS = (
    "held",
    "held (smaller effect than claimed)",
    "not held",
    "inconclusive",
    "inconclusive at this power",
    "inconclusive at this budget",
    "not computable here",
)
#: a regular expression matching any verdict (longest first: "held" is inside "not held"); a
#: row's ``printed_as`` wraps it in a group to find the verdict a notebook prints
VERDICT_PATTERN = "|".join(re.escape(v) for v in sorted(VERDICTS, key=len, reverse=True))
#: :data:`VERDICT_PATTERN` as a capturing group, for a row's ``printed_as``
VERDICT_GROUP = f"({VERDICT_PATTERN})"
#: the three groups the ledger tallies its rows in, so that a reader of "n held" can tell what
#: was confirmed: a claim about what the paper's experiments (training runs, simulations) show;
#: a theorem, bound, closed form, constant, count or worked example checked by arithmetic; and a
#: comparison or finding of ours that the paper does not make
KINDS = {
    "experiment": "the papers' experimental claims",
    "arithmetic": "arithmetic, bounds and identities",
    "ours": "our own rows (not the papers' claims)",
}
#: the words that open the statement of every row of ours (kind "ours"), and of no other row
OURS_TAG = "(ours, not the paper's)"
COLUMNS = (
    "paper",
    "kind",
    "ref",
    "claim",
    "paper value",
    "ours",
    "spread",
    "difference",
    "verdict",
    "notebook",
)


@dataclass(frozen=True)
class Condition:
    """A condition under which a paper makes a claim (a model, a dataset, a horizon, a number of
    clients): what the paper states and what our runs have, in the same words where they agree.
    Met when the two are equal."""

    name: str
    paper: str
    ours: str

    @property
    def met(self) -> bool:
        return self.paper == self.ours

    def text(self) -> str:
        return f"{self.name}: ours {self.ours}, the paper's {self.paper}"


@dataclass(frozen=True)
class Claim:
    """One row of the ledger.

    ``paper_value`` and ``ours`` are numbers where the paper prints one (else None: a
    qualitative claim); ``spread`` says how ``ours`` varies (over seeds, size draws...);
    ``printed_as`` is a regular expression whose first group finds the same verdict in the
    notebook's committed outputs (tests/test_claims.py checks that both agree).

    ``kind`` is the row's group (:data:`KINDS`). A row of ours has no paper value, and its
    statement opens with :data:`OURS_TAG` and its location ends with "(ours)" (added where the
    builder left them out); no other row may carry the tag. ``conditions`` are the claim's
    stated conditions against our runs: the one out-of-regime rule (:func:`scoped_verdict`)
    is applied here, to every row, so a row whose runs miss a condition cannot be decided
    whatever its builder computed, and its spread says why.
    """

    key: str
    paper: str
    ref: str
    claim: str
    paper_value: float | None
    ours: float | None
    spread: str
    verdict: str
    notebook: str
    printed_as: str | None = None
    kind: str = field(kw_only=True)
    conditions: tuple[Condition, ...] = field(default=(), kw_only=True)

    def __post_init__(self) -> None:
        require_choice("paper", self.paper, plugins.paper_titles())
        require_choice("verdict", self.verdict, VERDICTS)
        require_choice("kind", self.kind, KINDS)
        if self.kind == "ours":
            if self.paper_value is not None:
                raise ValueError(
                    f"{self.key}: a row of ours has no paper value, got {self.paper_value!r} "
                    "(a number we derived goes in the statement or in 'ours')"
                )
            if not self.claim.startswith(OURS_TAG):
                object.__setattr__(self, "claim", f"{OURS_TAG} {self.claim}")
            if not self.ref.endswith("(ours)"):
                object.__setattr__(self, "ref", f"{self.ref} (ours)")
        elif OURS_TAG in self.claim:
            raise ValueError(
                f"{self.key}: the statement of a row of kind {self.kind!r} carries "
                f"{OURS_TAG!r}; such a row is kind 'ours'"
            )
        if self.unmet:  # capped when decided; said either way
            object.__setattr__(self, "verdict", scoped_verdict(self.verdict, self.unmet)[0])
            reason = unmet_reason(self.unmet)
            if reason not in self.spread:
                spread = f"{self.spread}; {reason}" if self.spread else reason
                object.__setattr__(self, "spread", spread)

    @property
    def unmet(self) -> list[str]:
        """The stated conditions our runs miss, in words (:func:`unmet`)."""
        return unmet(self.conditions)

    @property
    def difference(self) -> float | None:
        """ours - paper, where both are numbers."""
        if self.paper_value is None or self.ours is None:
            return None
        return self.ours - self.paper_value


def row_kind(key: str, claim: str, arithmetic: Sequence[str]) -> str:
    """A row's group (:data:`KINDS`) by the rule each paper's module states once: "ours" when
    its statement opens with :data:`OURS_TAG`, "arithmetic" when its key starts with one of the
    paper's ``arithmetic`` prefixes (its theorems, bounds, closed forms and worked examples),
    else "experiment"."""
    if claim.startswith(OURS_TAG):
        return "ours"
    return "arithmetic" if key.startswith(tuple(arithmetic)) else "experiment"


def prediction_verdict(
    paper_value: float, mean: float, sd: float, n: int, level: float = 0.95
) -> tuple[str, str]:
    """(spread, verdict) for a number the paper reports from one run, given our ``n`` runs.

    The paper's run is one draw: it is compared with the ``level`` prediction interval of one
    more of our runs, mean +/- t_{n-1} * sd * sqrt(1 + 1/n).
    """
    if n < 2 or not np.isfinite(sd):
        return f"{n} seed{'s' if n != 1 else ''}", "inconclusive"
    half = scipy_stats.t.ppf(0.5 + level / 2, n - 1) * sd * math.sqrt(1 + 1 / n)
    low, high = mean - half, mean + half
    verdict = "held" if low <= paper_value <= high else "not held"
    return f"sd {sd:.3g} over {n} seeds; {level:.0%} prediction [{low:.3g}, {high:.3g}]", verdict


def run_verdict(
    paper_value: float, values: Sequence[float | None], level: float = 0.95
) -> tuple[float, str, str]:
    """(our mean, its spread, verdict) of :func:`prediction_verdict` from our per-seed values
    (None or NaN: that seed gave none, e.g. the target was never reached)."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if v.size == 0:
        return float("nan"), "no run gave a value", "inconclusive"
    sd = float(v.std(ddof=1)) if v.size > 1 else float("nan")
    spread, verdict = prediction_verdict(paper_value, float(v.mean()), sd, int(v.size), level)
    if v.size < len(values):
        spread += f" ({len(values) - v.size} of {len(values)} seeds gave none)"
    return float(v.mean()), spread, verdict


def sign_verdict(low: float, high: float, claimed: str = "positive") -> str:
    """The verdict on a claim that names a direction but no size ("A ends lower than B"), from
    a confidence interval [low, high] of the paired difference: "held" when the interval lies
    on the ``claimed`` side of 0 ("positive" or "negative"), "not held" when it lies on the
    other side, else "inconclusive at this budget" (more seeds or rounds could decide it)."""
    require_choice("claimed", claimed, ("positive", "negative"))
    above, below = low > 0, high < 0
    if not (above or below):
        return "inconclusive at this budget"
    return "held" if above == (claimed == "positive") else "not held"


def interval_verdict(differences: Sequence[float], claimed: str, level: float = 0.95):
    """(verdict, interval) of a claim that names a direction but no size, from paired
    differences over seeds: :func:`sign_verdict` of their t interval
    (:func:`aoi_fl.pipeline.paired.paired_interval`); "inconclusive" with fewer than 2 finite
    differences (interval None)."""
    from aoi_fl.pipeline.paired import paired_interval

    d = np.asarray(differences, dtype=float)
    if d.size < 2 or not np.isfinite(d).all():
        return "inconclusive", None
    ci = paired_interval(d, level)
    return sign_verdict(ci.low, ci.high, claimed), ci


#: verdicts that say the runs could not be had or judged at all: a claim's scope changes nothing
UNDECIDED = ("inconclusive", "not computable here")


def scoped_verdict(verdict: str | None, unmet: Sequence[str]) -> tuple[str | None, str]:
    """(verdict, reason) on a claim made under conditions (a dataset, a model, a number of
    clients, a horizon) from runs that do not meet those in ``unmet``: the runs decide only when
    they meet them all (``unmet`` empty). Otherwise they can make the claim neither held nor not
    held, whatever their power, so every verdict becomes "inconclusive at this budget" (runs that
    meet the conditions would decide), and the reason says what is missing; an undecided one
    (:data:`UNDECIDED`, or None: no claim) stays. The one rule of every paper's substitute and
    out-of-regime rows."""
    if not unmet or verdict is None or verdict in UNDECIDED:
        return verdict, ""
    return "inconclusive at this budget", unmet_reason(unmet)


def unmet_reason(unmet: Sequence[str]) -> str:
    """The words of :func:`scoped_verdict`'s reason for the conditions ``unmet``."""
    return (
        f"the claim's conditions are not met ({'; '.join(unmet)}), so these runs cannot decide it"
    )


def unmet(conditions: Iterable[Condition]) -> list[str]:
    """The ``conditions`` our runs miss, in words."""
    return [c.text() for c in conditions if not c.met]


def capped(verdict: str | None, conditions: Iterable[Condition]) -> str | None:
    """The verdict a row with these ``conditions`` shows for a criterion's ``verdict``: the one
    rule (:func:`scoped_verdict`), which :class:`Claim` applies itself; for the tables a
    notebook prints beside its rows, so that the two agree."""
    return scoped_verdict(verdict, unmet(conditions))[0]


def log_log_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The least-squares slope of log y on log x: the exponent of a power law y = a x^slope (a
    rate claim's measure); NaN when a y is not positive and finite or there are fewer than 2
    distinct x."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"xs and ys must be 1-d of one length, got {x.shape}, {y.shape}")
    if np.unique(x).size < 2 or not (np.isfinite(y).all() and (y > 0).all()):
        return float("nan")
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def combine_verdicts(verdicts: Iterable[str]) -> str:
    """A claim made of parts: "held" if every part is held, "not held" if some part is not
    held, "inconclusive" if the runs of a part are missing (or there are no parts), otherwise
    "inconclusive at this budget"."""
    verdicts = list(verdicts)
    if verdicts and all(v == "held" for v in verdicts):
        return "held"
    if "not held" in verdicts:
        return "not held"
    if not verdicts or "inconclusive" in verdicts:
        return "inconclusive"
    return "inconclusive at this budget"


#: a run diverged when its loss is not finite or exceeds this multiple of the initial model's
#: at some evaluation (K-Vib's synthetic task: stable runs stay below 1.7x, diverging ones pass
#: 10x; the agnostic paper's eq. 10 runs pass 1e6)
DIVERGENCE_FACTOR = 5.0


def diverged(losses: Sequence[float] | np.ndarray, factor: float = DIVERGENCE_FACTOR) -> bool:
    """Whether a run diverged, from its loss at each evaluation (the first: the initial model):
    a value that is not finite, or one above ``factor`` times the first. The one rule of every
    paper's ledger; such a run's comparisons say "inconclusive", never "held"."""
    loss = np.asarray(losses, dtype=float)
    if loss.ndim != 1 or loss.size == 0:
        raise ValueError(f"losses must be a non-empty 1-d sequence, got shape {loss.shape}")
    return bool(not np.isfinite(loss).all() or loss.max() > factor * loss[0])


def rounds_to_level(
    values: Sequence[float], rounds: Sequence[int], level: float, *, lower_is_better: bool = True
) -> float:
    """The first evaluated round at which a curve reaches ``level`` (at or below it for a loss,
    ``lower_is_better``; at or above it for an accuracy), or inf if it never does: the speed
    measure of a "faster" claim, with the level fixed before the curves are looked at."""
    v, r = np.asarray(values, dtype=float), np.asarray(rounds)
    if v.shape != r.shape or v.ndim != 1:
        raise ValueError(f"values and rounds must be 1-d of one length, got {v.shape}, {r.shape}")
    sign = -1.0 if lower_is_better else 1.0  # rounds_to_target looks for values at or above
    first = rounds_to_target(list(sign * v), sign * level, list(r))
    return math.inf if first is None else float(first)


def horizon_mean(values: Sequence[float], rounds: Sequence[int]) -> float:
    """The area under a curve divided by its horizon (trapezoid rule over the evaluated rounds):
    a speed measure over the whole run, so that two curves that end at the same value but got
    there at different speeds differ."""
    v, r = np.asarray(values, dtype=float), np.asarray(rounds, dtype=float)
    if v.shape != r.shape or v.ndim != 1 or v.size < 2:
        raise ValueError(f"values and rounds must be 1-d of one length >= 2, got {v.shape}")
    if not (np.diff(r) > 0).all():
        raise ValueError("rounds must increase")
    return float(np.trapezoid(v, r) / (r[-1] - r[0]))


@dataclass(frozen=True)
class Untested:
    """A statement of a paper that states a result but has no ledger row, and why (for
    example "a restatement of row X", "a bound with no measurable quantity")."""

    paper: str
    ref: str
    statement: str
    reason: str

    def __post_init__(self) -> None:
        require_choice("paper", self.paper, plugins.paper_titles())
        for name in ("ref", "statement", "reason"):
            if not getattr(self, name).strip():
                raise ValueError(f"Untested.{name} must be a non-empty text")


def value_verdict(paper_value: float, ours: float, rtol: float) -> str:
    """ "held" when a deterministic value is within ``rtol`` (relative) of the paper's."""
    return "held" if abs(ours - paper_value) <= rtol * abs(paper_value) else "not held"


def ledger(builders: Iterable[Callable[[], list[Claim]]] | None = None):
    """Every paper's claims as one table (columns :data:`COLUMNS`, indexed by key).

    ``builders``: functions returning a paper's claims; by default the four papers' modules
    with the ``cpu`` profile's cached results (see :func:`default_builders`).
    """
    import pandas as pd

    rows = []
    for build in builders if builders is not None else default_builders():
        for c in build():
            rows.append(
                {
                    "key": c.key,
                    "paper": c.paper,
                    "kind": c.kind,
                    "ref": c.ref,
                    "claim": c.claim,
                    "paper value": c.paper_value,
                    "ours": c.ours,
                    "spread": c.spread,
                    "difference": c.difference,
                    "verdict": c.verdict,
                    "notebook": c.notebook,
                }
            )
    table = pd.DataFrame(rows, columns=["key", *COLUMNS])
    if table["key"].duplicated().any():
        raise ValueError(f"duplicate claim keys: {sorted(table['key'][table['key'].duplicated()])}")
    return table.set_index("key")


def tally(table, by: str = "kind"):
    """How many rows of a :func:`ledger` table have each verdict, per group (``by="kind"``: the
    three groups of :data:`KINDS`, in that order, so that the papers' experimental claims are
    counted apart from arithmetic and from our own rows) or per ``"paper"``; an "all" row and
    column with the totals."""
    import pandas as pd

    require_choice("by", by, ("kind", "paper"))
    rows = table[by].map(KINDS) if by == "kind" else table[by]
    counts = pd.crosstab(rows, table["verdict"], margins=True, margins_name="all")
    if by == "kind":  # every group in the order of KINDS, an empty one too
        counts = counts.reindex([*KINDS.values(), "all"], fill_value=0)
    return counts.rename_axis(index=by)


def tally_markdown(table) -> str:
    """:func:`tally` per group as a Markdown table (the README's "The ledger in numbers"): one
    row a group, one column a verdict (those that occur, in the order of :data:`VERDICTS`)."""
    counts = tally(table)
    verdicts = [v for v in VERDICTS if v in counts.columns]
    lines = [
        "| group | " + " | ".join(verdicts) + " | all |",
        "|---" * (len(verdicts) + 2) + "|",
    ]
    for group, row in counts.iterrows():
        cells = [str(int(row[v])) for v in verdicts]
        lines.append(f"| {group} | " + " | ".join(cells) + f" | {int(row['all'])} |")
    return "\n".join(lines)


def untested_table(statements: Iterable[Untested] | None = None):
    """The statements deliberately not tested, one table (paper, ref, statement, reason); by
    default every paper's ``UNTESTED``."""
    import pandas as pd

    if statements is None:
        statements = [u for module in plugins.claim_modules() for u in module.UNTESTED]
    return pd.DataFrame(
        [(u.paper, u.ref, u.statement, u.reason) for u in statements],
        columns=["paper", "ref", "statement", "reason"],
    )


def default_builders(
    profile: str = "cpu", results_dir: str = "results", data_root: str = "data"
) -> list[Callable[[], list[Claim]]]:
    """The papers whose claims are in the ledger, reading ``profile``'s cached results."""
    return [
        (lambda module=module: module.claims(profile, results_dir=results_dir, data_root=data_root))
        for module in plugins.claim_modules()
    ]
