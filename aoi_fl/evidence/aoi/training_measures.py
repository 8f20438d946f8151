"""The AoI paper's training measures (Figs 5-7, Table II): read from the cached runs of the
profile's panels; missing runs leave a reading without a verdict, saying how many."""

from __future__ import annotations

import numpy as np

from aoi_fl.evidence.aoi import experiments
from aoi_fl.evidence.aoi import results as summaries
from aoi_fl.evidence.aoi.measure_inputs import (
    MARKOV,
    OTHERS,
    Runs,
    Seeds,
    diverged_note,
    final_accuracy_pairs,
    missing_note,
    most_verdict,
    not_here,
)
from aoi_fl.pipeline.claims import (
    VERDICT_GROUP,
    combine_verdicts,
    interval_verdict,
    sign_verdict,
)
from aoi_fl.pipeline.rules import Reading


def rounds_to_target(runs: Runs, dataset: str, split: str, policy: str) -> Reading:
    """Rounds to the dataset's target per seed of ``policy`` on ``split`` (Figs 5-7)."""
    given = runs.panel(f"main_{dataset}")
    table = runs.memo(
        ("rounds", dataset),
        lambda: (
            summaries.rounds_to_target_table(given.results, given.target) if given.results else None
        ),
    )
    if table is None or (split, policy) not in table.index:
        return not_here(runs, dataset, given.missing)
    seeds = [c for c in table.columns if c.startswith("seed ")]
    values = tuple(float(v) for v in table.loc[(split, policy), seeds])
    return Seeds(None, missing_note(given.missing), values=values)


def speedup_table(runs: Runs, dataset: str, panel: str):
    """The Fig. 5 notebook's paired table of Markov optimal against random on
    :meth:`Runs.speed`'s runs of ``panel`` (None: no runs)."""
    results = runs.speed(panel).results
    return runs.memo(
        ("speedup", dataset, panel),
        lambda: (
            summaries.paired_table(
                results,
                experiments.TARGETS[dataset],
                experiments.PAPER_ROUNDS_TO_TARGET,
                dataset,
                slow="random",
                substitute=summaries.substitute_model(results, dataset),
            )  # fmt: skip
            if results
            else None
        ),
    )


def _decided(table, split: str) -> bool:
    return table is not None and split in table.index and table.loc[split, "verdict"] is not None


def speedup(runs: Runs, dataset: str, split: str, panel: str) -> Reading:
    """The paper's speed-up of Markov optimal over random in rounds to its target accuracy (a
    speed measure whose level the paper fixed): the paired t interval over seeds against the
    claimed relative speed-up (:func:`aoi_fl.pipeline.paired.verdict`)."""
    given, table = runs.speed(panel), speedup_table(runs, dataset, panel)
    bad = diverged_note(given.results, split, (MARKOV, "random"))
    if not _decided(table, split) or bad:
        reached = table is not None and split in table.index
        why = bad or ("a run did not reach the target: no paired interval" if reached else None)
        return not_here(runs, dataset, 0, why)
    row = table.loc[split]
    spread = (
        f"95% t interval [{row['t 95% low']:.3g}, {row['t 95% high']:.3g}] over {row['n']} "
        f"paired seeds; MDE {row['MDE (80% power)']:.3g}{given.source}"
    )
    verdict = row["verdict"]
    if summaries.substitute_model(given.results, dataset):
        # the Claim caps it by the model condition, the criterion's stays here
        verdict = row["criterion verdict"]
        spread += f"; by the criterion: {verdict}"
    condition = summaries.model_condition(given.results, dataset)
    return Reading(float(row["mean difference"]), spread, verdict=verdict, conditions=(condition,))


def speedup_printed(runs: Runs, dataset: str, split: str, panel: str) -> str | None:
    """Where the Fig. 5 notebook prints a speed-up row's verdict: its line of the paired table,
    which names its seeds (pandas prints the "versus" level once, so a later split's line follows
    the first one); None where the table decides nothing for it."""
    table = speedup_table(runs, dataset, panel)
    if not _decided(table, split):
        return None
    row, first = table.loc[split], table.index[0]
    head = r"^random\s+" if split == first else rf"^random\s+{first}\s.*\n\s+"
    return rf"{head}{split}\s+{row['n']}\s+{row['reached']}\s.*?{VERDICT_GROUP}\s*$"


def faster(runs: Runs, panel: str, fast: str, slow: str, split: str) -> Reading:
    """A claim that ``fast`` reaches the panel's target sooner than ``slow`` with no number to
    scale it (the speed measure: rounds to the target, fixed by the paper or before the runs):
    the sign of the paired 95% t interval of R_fast - R_slow (the one the Figs 5-6 notebooks print).
    Where a condition of the claim is not met the Claim makes a decided verdict "inconclusive
    at this budget", and the criterion's stays in the spread."""
    given = runs.panel(panel)
    table = runs.memo(
        ("faster", panel, fast, slow),
        lambda: (
            summaries.paired_table(given.results, given.target, fast=fast, slow=slow)
            if given.results
            else None
        ),
    )
    bad = diverged_note(given.results, split, (fast, slow))
    row = None if table is None or split not in table.index else table.loc[split]
    if row is None or not np.isfinite(row["sd"]) or bad:
        why = bad or (f"{given.missing} runs not cached" if row is None else "no paired interval")
        return Reading(None, why, verdict="inconclusive", conditions=given.conditions)
    low, high = row["t 95% low"], row["t 95% high"]
    verdict = sign_verdict(low, high, "negative")
    spread = (
        f"R_{fast} - R_{slow}: 95% t interval [{low:.3g}, {high:.3g}] over {row['n']} "
        f"paired seeds; MDE {row['MDE (80% power)']:.3g}"
    )
    if any(not c.met for c in given.conditions):
        spread += f"; by the criterion: {verdict}"
    return Reading(
        float(row["mean difference"]), spread, verdict=verdict, conditions=given.conditions
    )


def final_accuracy(runs: Runs) -> Reading:
    """Sec. I's "lower variability in X improves overall model accuracy" on the MNIST panel
    (:data:`FINAL_EVALS`): Markov optimal against Policies 1 and 2, per split."""
    given = runs.panel("main_mnist")
    parts, notes, diffs_all = [], [], []
    for split in experiments.SPLITS:
        for other in OTHERS:
            bad = diverged_note(given.results, split, (MARKOV, other))
            diffs = (
                final_accuracy_pairs(given.results, split, MARKOV, other) if given.results else []
            )
            verdict, ci = interval_verdict(diffs, "positive")
            if bad or ci is None:
                notes.append(f"{split} vs {other}: " + (bad or f"{len(diffs)} paired seeds"))
                continue
            parts.append(verdict)
            diffs_all += diffs
            notes.append(f"{split} vs {other} {ci.mean:+.4f} [{ci.low:+.4f}, {ci.high:+.4f}]")
    if len(parts) < 2 * len(OTHERS):
        parts.append("inconclusive")
    spread = (
        "Markov optimal minus the other, 95% t intervals over paired seeds: "
        + "; ".join(notes)
        + missing_note(given.missing)
    )
    ours = float(np.mean(diffs_all)) if diffs_all else None
    return Reading(ours, spread, verdict=combine_verdicts(parts))


def skew_table(runs: Runs, dataset: str):
    """The Table II notebook's table of rho per split and policy on a complete panel; else None."""
    given = runs.panel(f"main_{dataset}")
    return runs.memo(
        ("skew", dataset),
        lambda: (
            experiments.selection_skew(
                given.results, runs.profile, results_dir=runs.results_dir, data_root=runs.data_root
            )
            if given.results and not given.missing
            else None
        ),
    )


def rho(runs: Runs, dataset: str, policy: str, split: str = "") -> Reading:
    """Table II: the average empirical rho of ``policy`` on ``split`` over seeds; a row with no
    ``split`` stands for the dataset's panel while it is incomplete."""
    table = skew_table(runs, dataset)
    if table is None or not split:
        return not_here(runs, dataset, runs.panel(f"main_{dataset}").missing)
    row = table.loc[(split, policy)]
    return Seeds(
        float(row["rho (average)"]), "", sd=row["rho sd over seeds"], count=int(row["seeds"])
    )


def rho_order(runs: Runs, dataset: str) -> Reading:
    """Whether Markov optimal has a larger rho than Policies 1 and 2 on one dataset: per split
    and other policy, the paired 95% t interval over seeds of the difference of the runs'
    average rho (:func:`experiments.selection_skew` of each run alone)."""
    return runs.memo(("rho order", dataset), lambda: _rho_order(runs, dataset))


def _rho_order(runs: Runs, dataset: str) -> Reading:
    if skew_table(runs, dataset) is None:
        return not_here(runs, dataset, runs.panel(f"main_{dataset}").missing)
    rhos = {}
    for (split, policy), group in summaries.group_runs(
        runs.panel(f"main_{dataset}").results
    ).items():
        for r in group:
            table = experiments.selection_skew(
                [r], runs.profile, results_dir=runs.results_dir, data_root=runs.data_root
            )
            rhos[(split, policy, r.config["training"]["seed"])] = float(
                table["rho (average)"].iloc[0]
            )
    parts, notes = [], []
    for split in experiments.SPLITS:
        for other in OTHERS:
            seeds = sorted(s for sp, pol, s in rhos if (sp, pol) == (split, MARKOV))
            diffs = [rhos[(split, MARKOV, s)] - rhos[(split, other, s)] for s in seeds]
            verdict, ci = interval_verdict(diffs, "positive")
            parts.append(verdict)
            where = f"{split} vs {other}"
            notes.append(
                f"{where} [{ci.low:+.3f}, {ci.high:+.3f}]" if ci else f"{where}: no interval"
            )
    spread = "Markov optimal minus the other, 95% t intervals over paired seeds: " + "; ".join(
        notes
    )
    paper = {p: experiments.PAPER_SKEW[p][dataset] for p in (MARKOV, *OTHERS)}
    if paper[MARKOV] <= max(paper[p] for p in OTHERS):
        spread += (
            f"; the paper's own Table II has no lead here (Markov optimal "
            f"{paper[MARKOV]:g}, random {paper['random']:g}, probabilistic "
            f"{paper['probabilistic']:g}): hence its 'most scenarios'"
        )
    return Reading(None, spread, verdict=combine_verdicts(parts))


def rho_most(runs: Runs) -> Reading:
    """Sec. IV's "in most scenarios": the per-dataset orderings (:func:`most_verdict`)."""
    parts = [rho_order(runs, d).verdict for d in experiments.DATASETS]
    spread = "per dataset: " + ", ".join(
        f"{d} {v}" for d, v in zip(experiments.DATASETS, parts, strict=True)
    )
    return Reading(None, spread, verdict=most_verdict(parts))
