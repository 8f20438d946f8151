"""Tables of the FedSUM experiments' results: final metrics, rounds and communication to a
threshold, metrics at a communication budget, and head-to-head comparisons for the paper's
qualitative claims.

Every function takes :class:`aoi_fl.fedsum.experiments.RunSummary` objects and returns NumPy
arrays or pandas tables; runs are grouped by (pattern, algorithm) and summarised over seeds
(mean, and min-max as the spread).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from aoi_fl.core.validation import require_choice, require_int
from aoi_fl.pipeline.claims import combine_verdicts

METRICS = ("train_loss", "objective", "test_loss", "test_accuracy")
#: whether a larger value of a metric is better
HIGHER_IS_BETTER = {
    "train_loss": False,
    "objective": False,
    "test_loss": False,
    "test_accuracy": True,
}


def group(summaries: Iterable[Any]) -> dict[tuple[str, str], list[Any]]:
    """Summaries grouped by (pattern, algorithm), each group ordered by seed."""
    out: dict[tuple[str, str], list[Any]] = {}
    for s in summaries:
        out.setdefault((s.planned.pattern, s.planned.algorithm), []).append(s)
    return {k: sorted(v, key=lambda s: s.planned.seed) for k, v in out.items()}


def curve(runs: Sequence[Any], metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(evaluation rounds, values of shape (seeds, evaluations)) of one group."""
    metric = require_choice("metric", metric, METRICS)
    rounds = runs[0].eval_round
    if any(not np.array_equal(r.eval_round, rounds) for r in runs[1:]):
        raise ValueError("the runs of one group must be evaluated at the same rounds")
    return rounds, np.array([getattr(r, metric) for r in runs], dtype=float)


def final_value(run: Any, metric: str, last: int) -> float:
    """Mean of ``metric`` over the run's last ``last`` evaluations."""
    return float(np.mean(getattr(run, metric)[-require_int("last", last, minimum=1) :]))


def oscillation(run: Any, metric: str = "test_accuracy") -> float:
    """Standard deviation of the evaluation-to-evaluation changes of ``metric`` over the second
    half of the run: how unsteady the late curve is (0 for a monotone straight line)."""
    values = getattr(run, metric)
    half = values[len(values) // 2 :]
    return float(np.std(np.diff(half))) if half.size > 2 else float("nan")


def first_reach(run: Any, threshold: float, metric: str = "test_accuracy") -> tuple[float, float]:
    """(round, communication units) of the first evaluation reaching ``threshold`` (NaN if
    never); "reaching" is >= for accuracy and <= for losses."""
    values = getattr(run, metric)
    hit = values >= threshold if HIGHER_IS_BETTER[metric] else values <= threshold
    if not hit.any():
        return float("nan"), float("nan")
    i = int(np.argmax(hit))
    return float(run.eval_round[i]), float(run.units()[i])


def _spread(values: Sequence[float]) -> dict[str, float]:
    v = np.asarray(values, dtype=float)
    return {
        "mean": float(np.nanmean(v)) if np.isfinite(v).any() else float("nan"),
        "min": float(np.min(v)),
        "max": float(np.max(v)),
    }


def final_table(summaries: Iterable[Any], last: int = 3, threshold: float | None = None):
    """Per (pattern, algorithm): final training loss, objective and test accuracy (mean of the
    last ``last`` evaluations; mean over seeds with min-max), the late oscillation of the test
    accuracy, the trace's tau_max / tau_avg, and, with ``threshold``, the rounds and
    communication units to that test accuracy (mean over the seeds that reach it)."""
    rows = []
    for (pattern, algorithm), runs in group(summaries).items():
        row: dict[str, Any] = {"pattern": pattern, "algorithm": algorithm, "seeds": len(runs)}
        for metric in ("train_loss", "objective", "test_accuracy"):
            s = _spread([final_value(r, metric, last) for r in runs])
            row[metric] = s["mean"]
            row[f"{metric} min"], row[f"{metric} max"] = s["min"], s["max"]
        row["oscillation"] = float(np.mean([oscillation(r) for r in runs]))
        row["tau_max"] = float(np.mean([r.tau_max for r in runs]))
        row["tau_avg"] = float(np.mean([r.tau_avg for r in runs]))
        if threshold is not None:
            reach = np.array([first_reach(r, threshold) for r in runs])
            row["rounds to threshold"] = _spread(reach[:, 0])["mean"]
            row["units to threshold"] = _spread(reach[:, 1])["mean"]
            row["reached"] = f"{int(np.isfinite(reach[:, 0]).sum())}/{len(runs)}"
        rows.append(row)
    return pd.DataFrame(rows).set_index(["pattern", "algorithm"])


def at_budget(run: Any, metric: str, units: float) -> float:
    """``metric`` of the last evaluation at or before ``units`` of communication (NaN if the
    run evaluated nothing within the budget but its initial model)."""
    spent = run.units()
    i = int(np.searchsorted(spent, units, side="right")) - 1
    return float(getattr(run, metric)[i]) if i >= 1 else float("nan")


def budget_table(summaries: Iterable[Any], metric: str, units: float | None = None) -> pd.DataFrame:
    """``metric`` at a communication budget, per pattern (rows) and algorithm (columns), mean
    over seeds; the column ``budget`` holds each pattern's budget: ``units``, or by default the
    largest budget that every run of the pattern spent."""
    groups = group(summaries)
    budgets: dict[str, float] = {}
    for (pattern, _), runs in groups.items():
        spent = min(float(r.units()[-1]) for r in runs)
        budgets[pattern] = min(budgets.get(pattern, spent), spent)
    data: dict[str, dict[str, float]] = {}
    for (pattern, algorithm), runs in groups.items():
        budget = budgets[pattern] if units is None else units
        data.setdefault(algorithm, {})[pattern] = float(
            np.mean([at_budget(r, metric, budget) for r in runs])
        )
    table = pd.DataFrame(data)
    table.insert(0, "budget", [float(budgets[p] if units is None else units) for p in table.index])
    return table


def head_to_head(
    table: pd.DataFrame, metric: str, candidates: Sequence[str], rivals: Sequence[str]
) -> pd.DataFrame:
    """For each pattern of ``table`` (from :func:`final_table`) and each candidate: its
    ``metric``, the best rival and its value, the margin (positive: the candidate is better)
    and whether the candidate beats every rival."""
    higher = HIGHER_IS_BETTER[require_choice("metric", metric, METRICS)]
    rows = []
    for pattern in table.index.get_level_values("pattern").unique():
        sub = table.loc[pattern]
        present = [r for r in rivals if r in sub.index]
        if not present:
            continue
        values = sub.loc[present, metric]
        best = values.idxmax() if higher else values.idxmin()
        for cand in candidates:
            if cand not in sub.index:
                continue
            value = float(sub.loc[cand, metric])
            margin = value - values[best] if higher else values[best] - value
            rows.append(
                {
                    "pattern": pattern,
                    "candidate": cand,
                    metric: value,
                    "best rival": best,
                    "rival value": float(values[best]),
                    "margin": float(margin),
                    "beats all": bool(margin > 0),
                }
            )
    return pd.DataFrame(rows).set_index(["pattern", "candidate"])


# ---------------------------------------------------------------------------------------------
# Claims of the long-horizon panel (issue 13), each with its criterion fixed before any run

#: the pass mark of claim (iii): FedSUM's final test accuracy over Cases 1-4 spans at most this
CASES_SPREAD = 0.05
#: claim (v)'s tolerance: FedSUM-B / FedSUM-CR at most this far below FedSUM in test accuracy
FAMILY_TOLERANCE = 0.01
#: claim (iv)'s pass mark: |Spearman rho| between p and the final metrics, right sign
P_GRID_RHO = 0.8

#: the criterion of each claim (as notebooks 15-16 state the claims), fixed in code. Each claim
#: is made of parts (one comparison on one metric, e.g. FedSUM against the best baseline in
#: final training loss); each part is judged by :func:`part_verdict`, the paired 95% t
#: interval over seeds, and a claim by :func:`combine_verdicts`
CLAIM_CRITERIA = {
    "(i)": "FedSUM and FedSUM-CR converge faster than all six baselines: per pattern, each of "
    "them beats the best baseline (best by its mean over seeds) in final training loss and in "
    "final test accuracy (paired seeds: same partition, model and trace)",
    "(ii)": "per unit of communication FedSUM-CR is the most effective: per pattern, at the "
    "largest budget every run of the pattern spent, FedSUM-CR beats the best other method in "
    "training loss and in test accuracy",
    "(iii)": "FedSUM is robust across Cases 1-4 (P1, P2, cyclic, reshuffled): its training loss "
    f"falls under every case and its final test accuracies span less than {CASES_SPREAD:.0%} "
    "(needs all four cases)",
    "(iv)": "a larger p is better: over the Bernoulli p grid, FedSUM's final training loss "
    f"falls and its final test accuracy rises with p, signed Spearman rho above {P_GRID_RHO} "
    "(not held: below 0, the wrong sign)",
    "(v)": "FedSUM-B and FedSUM-CR are at least as good as FedSUM: per pattern, final training "
    f"loss lower and final test accuracy less than {FAMILY_TOLERANCE:.0%} below (on the "
    "panel's step-size schedule, not the paper's constant eta_l = 0.1)",
    "(viii)": "biased sampling does not hurt FedSUM: FedSUM under biased sampling has a lower "
    "final training loss and a higher final test accuracy than its worst of Cases 1-4, and it "
    "beats FedAvg under biased sampling on both metrics",
}
#: the confidence level of the paired t interval that judges each part of a claim
LEVEL = 0.95
VERDICTS = ("held", "not held", "inconclusive at this budget", "inconclusive")


def part_verdict(
    values: Sequence[float], bound: float = 0.0, claimed: str = "positive"
) -> tuple[str, str]:
    """(verdict, observed direction) of one part of a claim from its per-seed ``values`` (paired
    differences, or a per-seed statistic), the claim being that they lie on the ``claimed``
    side ("positive": above, "negative": below) of ``bound``.

    The verdict is :func:`aoi_fl.pipeline.claims.sign_verdict` of the :data:`LEVEL` t interval
    of the mean (:func:`aoi_fl.pipeline.paired.paired_interval`) shifted by ``bound``: "held"
    when it lies on the claimed side, "not held" when on the other, "inconclusive at this
    budget" across it or with fewer than 2 seeds (no interval; more seeds could decide it).
    The text says in how many seeds the value lay on the claimed side, its mean and interval.
    Values are rounded to 1e-12 first (float noise in a difference of equal values).
    """
    from aoi_fl.pipeline.claims import sign_verdict
    from aoi_fl.pipeline.paired import paired_interval

    # rounded to 1e-12: float noise in a difference of equal values is no direction
    v = np.round(np.asarray(values, dtype=float), 12)
    above = claimed == "positive"
    side = int(((v > bound) if above else (v < bound)).sum())
    text = f"claim's side in {side}/{v.size} seed{'s' if v.size != 1 else ''}"
    if v.size and np.isfinite(v).all():
        text += f", mean {round(float(v.mean()), 12) + 0.0:+.3g}"
    if v.size < 2 or not np.isfinite(v).all():
        return "inconclusive at this budget", text + " (no interval: fewer than 2 finite values)"
    ci = paired_interval(v, level=LEVEL)
    text += f", {LEVEL:.0%} t interval [{ci.low:+.3g}, {ci.high:+.3g}]"
    return sign_verdict(ci.low - bound, ci.high - bound, claimed), text


def paired_margins(cand: Sequence[Any], rival: Sequence[Any], value) -> np.ndarray:
    """``value(run)`` of a candidate minus its rival's, seed by seed (both groups must hold
    the same seeds)."""
    if [r.planned.seed for r in cand] != [r.planned.seed for r in rival]:
        raise ValueError("paired comparisons need the same seeds in both groups")
    return np.array([value(a) - value(b) for a, b in zip(cand, rival, strict=True)], dtype=float)


def _signed(metric: str) -> float:
    return 1.0 if HIGHER_IS_BETTER[metric] else -1.0


def _beats_best(
    groups: dict, pattern: str, cand: str, rivals: Sequence[str], metric: str, value
) -> tuple[str, str]:
    """(verdict, numbers) of ``cand`` against the best of ``rivals`` on ``value(run, metric)``
    (best: mean over seeds), paired margins positive when the candidate is better."""
    present = [r for r in rivals if (pattern, r) in groups]
    sign = _signed(metric)
    means = {
        r: np.mean([sign * value(run, metric) for run in groups[(pattern, r)]]) for r in present
    }
    best = max(means, key=means.get)
    margins = sign * paired_margins(
        groups[(pattern, cand)], groups[(pattern, best)], lambda run: value(run, metric)
    )
    verdict, text = part_verdict(margins)
    return verdict, f"{pattern} {cand} vs {best}, {metric} margin: {text} ({verdict})"


def long_claims(
    summaries: Iterable[Any], last: int = 1, baselines: Sequence[str] | None = None
) -> pd.DataFrame:
    """The claims (i)-(v) and (viii) checked on the long-horizon panel: per claim its
    criterion (:data:`CLAIM_CRITERIA`), our numbers (per part: paired margins over seeds,
    positive when the claim's side is better, or for (iii) the accuracy spread, for (iv)
    Spearman rho; in how many seeds they lie on the claim's side, their mean and 95% t
    interval, :func:`part_verdict`), the parts held and the verdict
    (:func:`combine_verdicts`). Final values are means over the last ``last`` evaluations;
    ``baselines`` defaults to the six baselines of the paper."""
    from scipy import stats

    from aoi_fl.fedsum.experiments import BASELINES, LONG_ALGORITHMS, MAIN_PATTERNS

    baselines = list(BASELINES if baselines is None else baselines)
    summaries = list(summaries)
    groups = group(summaries)
    patterns = [p for p in MAIN_PATTERNS if any(k[0] == p for k in groups)]

    def final(run: Any, metric: str) -> float:
        return final_value(run, metric, last)

    rows: dict[str, tuple[list[str], list[str]]] = {c: ([], []) for c in CLAIM_CRITERIA}

    def add(claim: str, verdict: str, numbers: str) -> None:
        rows[claim][0].append(verdict)
        rows[claim][1].append(numbers)

    metrics = ("train_loss", "test_accuracy")
    for pattern in patterns:
        for cand in ("fedsum", "fedsum_cr"):
            if (pattern, cand) in groups and any((pattern, b) in groups for b in baselines):
                for metric in metrics:
                    add("(i)", *_beats_best(groups, pattern, cand, baselines, metric, final))
        # (ii): at the largest budget every run of the pattern spent
        runs_p = [s for s in summaries if s.planned.pattern == pattern]
        if any(s.planned.algorithm == "fedsum_cr" for s in runs_p):
            budget = float(budget_table(runs_p, "train_loss")["budget"].iloc[0])
            others = [a for a in LONG_ALGORITHMS if a != "fedsum_cr"]
            for metric in metrics:
                verdict, numbers = _beats_best(
                    groups,
                    pattern,
                    "fedsum_cr",
                    others,
                    metric,
                    lambda run, m, budget=budget: at_budget(run, m, budget),
                )
                add("(ii)", verdict, f"{numbers} (budget {budget:.0f})")
        # (v): FedSUM-B and FedSUM-CR against FedSUM
        for cand in ("fedsum_b", "fedsum_cr"):
            if (pattern, cand) in groups and (pattern, "fedsum") in groups:
                rival = groups[(pattern, "fedsum")]
                loss = -paired_margins(
                    groups[(pattern, cand)], rival, lambda r: final(r, "train_loss")
                )
                acc = paired_margins(
                    groups[(pattern, cand)], rival, lambda r: final(r, "test_accuracy")
                )
                verdict, text = part_verdict(loss)
                add(
                    "(v)",
                    verdict,
                    f"{pattern} {cand} vs fedsum, train_loss margin: {text} ({verdict})",
                )
                verdict, text = part_verdict(acc, -FAMILY_TOLERANCE)
                add(
                    "(v)",
                    verdict,
                    f"{pattern} {cand} vs fedsum, test_accuracy margin (claim: above "
                    f"-{FAMILY_TOLERANCE:g}): {text} ({verdict})",
                )

    # (iii) and (viii): FedSUM over the cases, seed by seed
    four = ("P1", "P2", "cyclic", "reshuffled")
    cases = [c for c in four if ("fedsum" in {a for p, a in groups if p == c})]
    if cases:
        seeds = [r.planned.seed for r in groups[(cases[0], "fedsum")]]
        by_case = {c: {r.planned.seed: r for r in groups[(c, "fedsum")]} for c in cases}
        spread, drop = [], []
        for seed in seeds:
            acc = [final(by_case[c][seed], "test_accuracy") for c in cases]
            spread.append(max(acc) - min(acc))
            # the smallest fall of the training loss over the cases (positive: it falls in all)
            drop.append(
                min(by_case[c][seed].train_loss[0] - by_case[c][seed].train_loss[-1] for c in cases)
            )
        missing = [c for c in four if c not in cases]
        if missing:
            add(
                "(iii)",
                "inconclusive",
                f"accuracy spread over {', '.join(cases)} only (missing: {', '.join(missing)})",
            )
        else:
            verdict, text = part_verdict(spread, CASES_SPREAD, "negative")
            add(
                "(iii)",
                verdict,
                f"accuracy spread over {', '.join(cases)} (claim: below {CASES_SPREAD:g}): "
                f"{text} ({verdict})",
            )
            verdict, text = part_verdict(drop)
            add(
                "(iii)",
                verdict,
                f"smallest fall of the training loss over the cases: {text} ({verdict})",
            )
        if ("biased", "fedsum") in groups and len(cases) == 4:
            runs8 = groups[("biased", "fedsum")]
            worse_acc = [
                final(run, "test_accuracy")
                - min(final(by_case[c][run.planned.seed], "test_accuracy") for c in cases)
                for run in runs8
            ]
            worse_loss = [
                max(final(by_case[c][run.planned.seed], "train_loss") for c in cases)
                - final(run, "train_loss")
                for run in runs8
            ]
            for metric, margins in (("train_loss", worse_loss), ("test_accuracy", worse_acc)):
                verdict, text = part_verdict(margins)
                add(
                    "(viii)",
                    verdict,
                    f"biased fedsum vs its worst of Cases 1-4, {metric} margin: {text} ({verdict})",
                )
            if ("biased", "fedavg") in groups:
                for metric in metrics:
                    add(
                        "(viii)",
                        *_beats_best(groups, "biased", "fedsum", ["fedavg"], metric, final),
                    )

    # (iv): the p grid ("p=..." patterns of FedSUM)
    grid = sorted(
        (float(p[2:]), runs)
        for (p, a), runs in groups.items()
        if p.startswith("p=") and a == "fedsum"
    )
    if len(grid) >= 3:
        ps = [p for p, _ in grid]
        for metric in metrics:
            sign = _signed(metric)
            rho = [
                sign * stats.spearmanr(ps, [final(runs[i], metric) for _, runs in grid]).statistic
                for i in range(len(grid[0][1]))
            ]
            # held: the interval above P_GRID_RHO; not held: below 0 (the wrong sign)
            above, text = part_verdict(rho, P_GRID_RHO)
            sign_of, _ = part_verdict(rho)
            verdict = (
                "held"
                if above == "held"
                else "not held"
                if sign_of == "not held"
                else "inconclusive at this budget"
            )
            add(
                "(iv)",
                verdict,
                f"{metric}: signed Spearman rho (claim: above {P_GRID_RHO:g}): {text} ({verdict})",
            )

    out = []
    for claim, criterion in CLAIM_CRITERIA.items():
        verdicts, numbers = rows[claim]
        out.append(
            {
                "claim": claim,
                "criterion": criterion,
                "numbers": "; ".join(numbers) if numbers else "no runs for it in this panel",
                "parts held": f"{verdicts.count('held')}/{len(verdicts)}",
                "verdict": combine_verdicts(verdicts),
            }
        )
    return pd.DataFrame(out).set_index("claim")
