"""The arena's numbers from its cached runs: every run's participation and learning metrics,
paired comparisons against the references, the leaderboard per availability model, and the
screen's choices for the confirm tier (ours, not the papers').

Speed is rounds to the tier's target accuracy (fixed before running,
:data:`aoi_fl.evidence.arena.experiments.TASKS`). A run that never reaches it is counted at the
horizon T: its value is then a lower bound, so a paired difference involving it is a bound too; the
tables count such runs (``censored``) and a comparison with any says so. Final accuracy is the mean
test accuracy of the last :data:`FINAL_WINDOW` evaluations (the screen's curves level off with
round-to-round noise of about 0.01).

A comparison of policy A against a reference R is the paired difference A - R over seeds (the
same partition, initial model, batches and availability within a seed) with its 95% t interval,
and a word: "better" or "worse" when the interval excludes 0, else "no difference detectable at
this power" with the minimum detectable effect of those seeds
(:func:`aoi_fl.pipeline.paired.minimum_detectable_effect`); a speed comparison in which some run
never reached the target is "undecided" whatever its interval (the horizon, not the policies,
set that run's value). Each comparison's word is at 95% on its own: the screen makes about a
hundred and thirty of them, so a few "better" or "worse" words are expected by chance alone. The
ledger's rows therefore read each tier as a family (:func:`holm_family`): every comparison the
tier's tables make on one measure, Holm-adjusted; the screen is exploratory, and the confirm tier
(other seeds) is where its findings are repeated.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from scipy import stats

from aoi_fl.core.validation import renamed, require_choice
from aoi_fl.evidence.arena import experiments as ex
from aoi_fl.evidence.arena.participation import run_metrics
from aoi_fl.pipeline.paired import (
    holm,
    minimum_detectable_effect,
    paired_interval,
    paired_p_value,
    seeds_needed,
)
from aoi_fl.pipeline.runs import cached_results

#: evaluations averaged into the final accuracy
FINAL_WINDOW = 10
#: measure -> (column, whether lower is better, label)
MEASURES: dict[str, tuple[str, bool, str]] = {
    "rounds": ("rounds_to_target", True, "rounds to target"),
    "final": ("final_accuracy", False, "final accuracy"),
    "worst": ("worst_clients_accuracy", False, "worst 10% clients' accuracy"),
}
#: the words of a comparison (the ledger's own words for a paired difference with no claimed size);
#: the last when a run of the pair never reached the target: counting it at the horizon T biases
#: the difference towards whichever side was censored, so such a pair decides nothing
WORDS = (
    "better",
    "worse",
    "no difference detectable at this power",
    "undecided: runs censored at the horizon",
)


def run_row(result: Any, tier: str, profile: str) -> dict[str, Any]:
    """One run's metrics as a flat row (availability, policy, seed and
    :meth:`aoi_fl.evidence.arena.participation.RunMetrics.as_dict`), rounds to target censored at
    T."""
    s = ex.tier_settings(tier, profile)
    c = result.config
    metrics = run_metrics(
        result.history, s["n"], s["m"], ex.TASKS[tier]["target"], final_window=FINAL_WINDOW
    )
    row = metrics.as_dict()
    reached = row["rounds_to_target"] is not None
    row["censored"] = not reached
    row["rounds_to_target"] = row["rounds_to_target"] if reached else s["rounds"]
    availability = ex.availability_name(c.get("availability"))
    return {
        "availability": availability,
        "policy": c["sampler"]["name"],
        "seed": c["training"]["seed"],
        **row,
    }


@renamed("cache_dir", "results_dir")
def load(
    tier: str,
    profile: str,
    policies: Sequence[str] | None = None,
    availabilities: Iterable[str] | None = None,
    *,
    results_dir: str = "results",
) -> tuple[pd.DataFrame, int]:
    """(the metrics of every cached run of the tier's grid, how many runs are missing)."""
    tier = require_choice("tier", tier, ex.TIERS)
    policies = ex.POLICIES if policies is None else tuple(policies)
    availabilities = tuple(ex.AVAILABILITY if availabilities is None else availabilities)
    found, missing = cached_results(
        ex.grid(policies, availabilities, tier=tier, profile=profile), results_dir=results_dir
    )
    return frame(found, tier, profile), missing


def frame(results: Iterable[Any], tier: str, profile: str) -> pd.DataFrame:
    """The metrics of finished runs (:func:`run_row` each), e.g. what ``run_grid`` returned."""
    return pd.DataFrame([run_row(r, tier, profile) for r in results])


@renamed("cache_dir", "results_dir")
def load_confirm(
    others: Sequence[str], availability: str, profile: str, *, results_dir: str = "results"
) -> tuple[pd.DataFrame, int]:
    """:func:`load` of the confirm tier chosen by the screen (its three best ``others`` and the
    model ``availability`` where it separated the policies most)."""
    return load(
        "confirm",
        profile,
        ex.confirm_entrants(others),
        ex.confirm_models(availability),
        results_dir=results_dir,
    )


@dataclass(frozen=True)
class Comparison:
    """A paired comparison of ``policy`` against ``reference`` on one measure."""

    policy: str
    reference: str
    measure: str
    n: int
    mean: float
    low: float
    high: float
    mde: float
    word: str
    censored: int
    p_value: float
    sd: float
    level: float = 0.95

    def text(self) -> str:
        """``+1.2 [-0.3, 2.7] no difference ... (MDE 3.1)``, or the word alone."""
        out = f"{self.mean:+.3g} [{self.low:+.3g}, {self.high:+.3g}] {self.word}"
        if self.word == WORDS[2]:
            out += f" (MDE {self.mde:.3g})"
        if self.censored and self.word != WORDS[3]:
            out += f"; {self.censored} run(s) below the target at the end"
        return out


def compare(
    frame: pd.DataFrame,
    policy: str,
    reference: str,
    measure: str = "rounds",
    level: float = 0.95,
) -> Comparison | None:
    """The paired comparison of ``policy`` with ``reference`` on ``measure`` (one availability
    model's rows), over the seeds both have, its interval and word at confidence ``level`` (a
    family's adjusted level, :func:`holm_family`); None with fewer than 2 such seeds."""
    column, lower_better, _ = MEASURES[require_choice("measure", measure, MEASURES)]
    if "availability" in frame and frame["availability"].nunique() > 1:
        raise ValueError(
            "compare pairs seeds of one availability model; got rows of "
            f"{sorted(frame.availability.unique())}"
        )
    a = frame[frame.policy == policy].set_index("seed")
    b = frame[frame.policy == reference].set_index("seed")
    seeds = a.index.intersection(b.index)
    if seeds.size < 2:
        return None
    diff = (a.loc[seeds, column] - b.loc[seeds, column]).to_numpy(dtype=float)
    censored = int(a.loc[seeds, "censored"].sum() + b.loc[seeds, "censored"].sum())
    ci = paired_interval(diff, level)
    if censored and column == "rounds_to_target":
        word = WORDS[3]
    elif ci.low > 0 or ci.high < 0:
        word = WORDS[0] if (ci.high < 0) == lower_better else WORDS[1]
    else:
        word = WORDS[2]
    mde = minimum_detectable_effect(ci.sd, ci.n, level)
    return Comparison(
        policy,
        reference,
        measure,
        ci.n,
        ci.mean,
        ci.low,
        ci.high,
        mde,
        word,
        censored,
        paired_p_value(diff),
        ci.sd,
        level,
    )


def leaderboard(frame: pd.DataFrame, measure: str = "rounds") -> pd.DataFrame:
    """One availability model's policies, best first on ``measure``: the learning and
    participation metrics' means over seeds, and each policy against the two references."""
    column, lower_better, _ = MEASURES[require_choice("measure", measure, MEASURES)]
    numeric = [
        "rounds_to_target",
        "final_accuracy",
        "worst_clients_accuracy",
        "jain",
        "interval_var",
        "sigma",
        "tau_max",
        "tau_avg",
        "rounds_short",
        "mean_participants",
    ]
    table = frame.groupby("policy")[numeric].mean()
    table.insert(1, "censored", frame.groupby("policy")["censored"].sum())
    table.insert(0, "seeds", frame.groupby("policy").size())
    for reference in ex.REFERENCES:
        table[f"vs {reference}"] = [
            _text(compare(frame, policy, reference, measure)) for policy in table.index
        ]
    return table.sort_values(column, ascending=lower_better)


def _text(comparison: Comparison | None) -> str:
    if comparison is None:
        return "fewer than 2 paired seeds"
    if comparison.policy == comparison.reference:
        return "(reference)"
    return comparison.text()


def separation(frame: pd.DataFrame, measure: str = "rounds") -> pd.Series:
    """Per availability model, Friedman's chi-square of ``measure`` over the policies (treatments)
    in the seeds (blocks) where every policy ran: how strongly the policies are told apart,
    whatever the scale of the measure. NaN where fewer than 2 complete seeds."""
    column = MEASURES[require_choice("measure", measure, MEASURES)][0]
    out = {}
    for availability, rows in frame.groupby("availability", sort=False):
        wide = rows.pivot_table(index="seed", columns="policy", values=column).dropna()
        if len(wide) < 2 or wide.shape[1] < 3 or (wide.nunique(axis=1) == 1).all():
            out[availability] = float("nan")  # too few seeds, or every seed a tie
            continue
        out[availability] = float(stats.friedmanchisquare(*wide.to_numpy().T).statistic)
    return pd.Series(out, name="friedman_chi2")


def most_separating(frame: pd.DataFrame, measure: str = "rounds") -> str:
    """The partial-availability model where the screen separated the policies most
    (:func:`separation`), the one the confirm tier runs beside full availability; the first
    partial model of :data:`aoi_fl.evidence.arena.experiments.AVAILABILITY` when none separates them
    (a smoke screen too short to reach the target ties every policy)."""
    partial = separation(frame, measure).drop("always", errors="ignore").dropna()
    if partial.empty:
        return next(name for name in ex.AVAILABILITY if name != "always")
    return str(partial.idxmax())


def mean_ranks(frame: pd.DataFrame, measure: str = "rounds") -> pd.Series:
    """Each policy's rank on ``measure`` (1 = best) within each (availability model, seed),
    averaged over them: the screen's overall order."""
    column, lower_better, _ = MEASURES[require_choice("measure", measure, MEASURES)]
    signed = frame[column] if lower_better else -frame[column]
    ranks = signed.groupby([frame.availability, frame.seed]).rank(method="average")
    return ranks.groupby(frame.policy).mean().sort_values()


def best_others(frame: pd.DataFrame, k: int = 3, measure: str = "rounds") -> tuple[str, ...]:
    """The k best policies of the screen (:func:`mean_ranks`) that are not among the confirm
    tier's fixed entrants (:data:`aoi_fl.evidence.arena.experiments.CONFIRM_FIXED`)."""
    order = [p for p in mean_ranks(frame, measure).index if p not in ex.CONFIRM_FIXED]
    return tuple(order[:k])


def comparisons(frame: pd.DataFrame, measure: str = "rounds") -> pd.DataFrame:
    """Every policy against each reference under every availability model, one row each."""
    rows = []
    for availability, part in frame.groupby("availability", sort=False):
        for reference in ex.REFERENCES:
            for policy in sorted(set(part.policy) - {reference}):
                c = compare(part, policy, reference, measure)
                if c is not None:
                    rows.append({"availability": availability, **c.__dict__})
    return pd.DataFrame(rows)


def family_comparisons(
    frame: pd.DataFrame, hypotheses: tuple | None = None, measure: str = "rounds"
) -> pd.DataFrame:
    """A tier's family of comparisons on ``measure`` (the ledger's reading, before Holm's
    adjustment): every comparison of :func:`comparisons`, one reference against the other
    counted once, or those of ``hypotheses`` (a reference name: every policy against it; a
    (policy, reference) pair: that one)."""
    table = comparisons(frame, measure) if len(frame) else pd.DataFrame()
    if not table.empty:  # one reference against the other is one test, not two
        pairs = [frozenset(p) for p in zip(table.policy, table.reference, strict=True)]
        table = table[~pd.DataFrame({"a": table.availability, "p": pairs}).duplicated().to_numpy()]
    if hypotheses is not None and not table.empty:
        keep = pd.Series(False, index=table.index)
        for h in hypotheses:
            if isinstance(h, str):
                keep |= table.reference == h
            else:
                keep |= (table.policy == h[0]) & (table.reference == h[1])
        table = table[keep]
    return table


#: the family-wise error rate of a tier's family of comparisons (:func:`holm_family`)
FAMILY_ALPHA = 0.05


def holm_family(table: pd.DataFrame, alpha: float = FAMILY_ALPHA) -> pd.DataFrame:
    """A family of comparisons (rows of :func:`comparisons`) with Holm's adjustment: ``p_holm``,
    the adjusted p-value (:func:`aoi_fl.pipeline.paired.holm`), and ``holm_level``, the
    confidence of the interval that Holm's step for that comparison uses: the j-th smallest of
    m p-values (j from 0) is tested at alpha / (m - j), so its interval is at 1 - alpha / (m - j),
    and it excludes 0 exactly when the unadjusted test at that step rejects. A comparison is
    decided when ``p_holm`` <= ``alpha``; censored pairs are kept in the family (they count as
    tests made) with their p-value, and stay undecided."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha}")
    out = table.copy()
    if out.empty:
        return out.assign(p_holm=pd.Series(dtype=float), holm_level=pd.Series(dtype=float))
    out["p_holm"] = holm(out["p_value"].to_numpy(dtype=float))
    rank = out["p_value"].rank(method="first").to_numpy(dtype=int) - 1
    out["holm_level"] = 1 - alpha / (len(out) - rank)
    return out


def power_plan(
    frame: pd.DataFrame,
    effect: float,
    hypotheses: tuple | None = None,
    measure: str = "rounds",
    alpha: float = FAMILY_ALPHA,
) -> pd.DataFrame:
    """How many paired seeds each comparison of a tier's family (:func:`family_comparisons`,
    the family the ledger adjusts) needs for a minimum detectable effect of ``effect`` on
    ``measure`` (80% power), taking its paired standard deviation as measured on the seeds there
    are: ``seeds`` at 95% on its own, ``seeds_holm`` at Holm's first step over the family
    (alpha / m, the strictest level a comparison of the family is tested at). One row per
    comparison, with its seeds, sd and minimum detectable effect now."""
    table = family_comparisons(frame, hypotheses, measure)
    if table.empty:
        return table
    out = table[["availability", "policy", "reference", "n", "sd", "mde"]].copy()
    strict = 1 - alpha / len(table)
    out["seeds"] = [seeds_needed(sd, effect) for sd in out["sd"]]
    out["seeds_holm"] = [seeds_needed(sd, effect, level=strict) for sd in out["sd"]]
    return out
