"""What the FedSUM notebooks print besides their figures: the delays of every participation
pattern against App. F (the delay notebook), the tables of the runs (final metrics, head-to-head
margins, rounds to a threshold, metrics at a communication budget; Figs 1, 9-11, 14 and the
long-horizon panel) and the claims ledger's verdict lines with the parts they rest on.

Each function prints; the numbers come from :mod:`aoi_fl.evidence.fedsum.results`,
:mod:`aoi_fl.evidence.fedsum.traces` and the ledger (:mod:`aoi_fl.evidence.fedsum.claims`), so that
a notebook shows what the ledger records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from aoi_fl.evidence.fedsum import claims as fc
from aoi_fl.evidence.fedsum import experiments as fx
from aoi_fl.evidence.fedsum import results as fr
from aoi_fl.evidence.fedsum import traces
from aoi_fl.fedsum import delays
from aoi_fl.pipeline.notebook import print_table
from aoi_fl.pipeline.profiles import traits

#: the columns of Fig. 1's final table (the MNIST notebook)
FIG1_COLUMNS = (
    "seeds",
    "train_loss",
    "train_loss min",
    "train_loss max",
    "test_accuracy",
    "test_accuracy min",
    "test_accuracy max",
    "oscillation",
    "rounds to threshold",
    "units to threshold",
    "reached",
    "tau_max",
    "tau_avg",
)
#: the columns of the final table of Figs 9 and 14 (the pattern notebook)
CASE_COLUMNS = (
    "train_loss",
    "objective",
    "test_accuracy",
    "oscillation",
    "rounds to threshold",
    "reached",
    "tau_max",
    "tau_avg",
)
#: the columns of the long-horizon panel's final table: Fig. 1's without those of
#: the threshold accuracy
LONG_COLUMNS = tuple(c for c in FIG1_COLUMNS if "threshold" not in c and c != "reached")


# ---------------------------------------------------------------------------------------------
# The delay notebook: participation delays (eqs 2-4) against App. F


def delay_table(table: pd.DataFrame, profile: str) -> None:
    """:func:`aoi_fl.evidence.fedsum.traces.pattern_table` with its rounds and seeds."""
    _, _, t, seeds = traces.sizes(profile)
    print(f"T = {t} rounds, {len(seeds)} seeds (mean, min and max over seeds):")
    print_table(table, "{:.2f}")


def closed_forms(n: int, s: int, t: int) -> None:
    """The deterministic cyclic order's tau_max and tau_avg over ``t`` rounds from its closed
    form, the reshuffled order's bound 2m - 2 (m = N/S) against Lemma F.3's 4N/S and its
    proof's 2 floor(N/S), and Lemmas F.1 and F.2 at N = ``n``, S = ``s``, T = ``t`` (F.2 for
    the deltas of the table's Bernoulli patterns)."""
    m = n // s
    closed = delays.deterministic_cyclic_delays(n, s, t)
    print(
        f"deterministic cyclic, T = {t}: tau_max = {closed.max()} (= m - 1 = {m - 1}), "
        f"tau_avg = {closed.mean():.4f}"
    )
    print(
        f"reshuffled cyclic: tau_max <= 2m - 2 = {2 * m - 2}; Lemma F.3: E[tau_max] <= 4N/S = "
        f"{delays.reshuffled_cyclic_bound(n, s):g} (its proof: tau_max <= 2 floor(N/S) = "
        f"{delays.reshuffled_cyclic_proof_bound(n, s)})"
    )
    print(f"Lemma F.1 (uniform), T = {t}: (4N/S) ln(NT) = {delays.uniform_bound(n, s, t):.2f}")
    for p in (0.05, 0.08, 0.1, 0.2, 0.5):
        print(f"Lemma F.2, delta = {p:<4}, T = {t}: {delays.bernoulli_bound(p, n, t):8.2f}")


def bound_verdicts(table: pd.DataFrame, verdicts: pd.DataFrame, profile: str) -> None:
    """Whether the simulated cyclic order is its closed form, the ledger's verdict on each
    App. F bound (``verdicts``: :func:`aoi_fl.evidence.fedsum.claims.bound_table`, printed by
    :func:`~aoi_fl.evidence.fedsum.claims.bound_line`), how loose the paper's bounds are
    (:func:`~aoi_fl.evidence.fedsum.traces.looseness`) and P1's tau_max over the cyclic order's."""
    print(
        "simulated deterministic cyclic equals its closed form: "
        f"{traces.cyclic_matches(table, profile)}"
    )
    print(
        f"App. F bounds (one-sided {fc.BOUND_LEVEL:.0%} upper limit of the mean tau_max against a "
        "bound on E[tau_max]; every seed against a bound on tau_max itself):"
    )
    for key, row in verdicts.iterrows():
        print(fc.bound_line(key, row))
    loose = traces.looseness(table)
    print(
        f"the paper's bounds exceed the mean simulated tau_max by a factor {loose.min():.1f} "
        f"({loose.idxmin()}) to {loose.max():.1f} ({loose.idxmax()})"
    )
    print(
        "tau_max of P1 / tau_max of the deterministic cyclic order: "
        f"{traces.p1_over_cyclic(table, profile):.1f}"
    )


# ---------------------------------------------------------------------------------------------
# The claims ledger's verdict lines


def verdicts(table: pd.DataFrame, *, spaced: bool = False) -> None:
    """Each claim of ``table`` (:func:`aoi_fl.evidence.fedsum.claims.cnn_verdicts`) as the ledger
    finds it (:func:`~aoi_fl.evidence.fedsum.claims.cnn_line`), then its parts, indented;
    ``spaced``: a blank line before each claim."""
    for claim, row in table.iterrows():
        if spaced:
            print()
        print(fc.cnn_line(claim, row))
        for part in row["numbers"].split("; "):
            print(f"    {part}")


def long_verdicts(table: pd.DataFrame, profile: str) -> None:
    """The long-horizon notebook's verdicts (``table``:
    :func:`aoi_fl.evidence.fedsum.claims.long_verdicts`): on which model, then per claim its line
    (:func:`~aoi_fl.evidence.fedsum.claims.long_line`), criterion and parts."""
    s = fx.profile_settings(profile)["long"]
    papers = traits(profile).papers_settings
    model = "the paper's CNN" if papers else "multinomial logistic regression"
    print(
        f"Verdicts on this panel's model ({model}), T = {s['rounds']}, {s['seeds']} paired seeds."
        + (
            ""
            if papers
            else " The paper's own model at T = 2000 is not run in this profile: for it every "
            "claim stays inconclusive at this budget."
        )
    )
    for claim, row in table.iterrows():
        print(fc.long_line(claim, row))
        print(f"    criterion: {row['criterion']}")
        for part in row["numbers"].split("; "):
            print(f"    {part}")


# ---------------------------------------------------------------------------------------------
# The MNIST notebook: Figs 1 and 4


def partition(histogram: np.ndarray, seed: int) -> None:
    """Fig. 4's clients (``histogram``: :func:`aoi_fl.evidence.fedsum.results.label_histogram`):
    their sizes, the median share of a client's most frequent label and how many labels hold at
    least 5% of a client's data."""
    sizes = histogram.sum(axis=1)
    top_share = histogram.max(axis=1) / sizes
    print(
        f"{len(histogram)} clients (seed {seed}): sizes min {sizes.min()}, median "
        f"{int(np.median(sizes))}, max {sizes.max()}; share of a client's most frequent label: "
        f"median {np.median(top_share):.2f}; labels with >= 5% of a client's data: mean "
        f"{(histogram / sizes[:, None] >= 0.05).sum(axis=1).mean():.1f}"
    )


def costs(summaries: Sequence[Any], communication: pd.DataFrame) -> None:
    """Fig. 1(b)'s unit: the model-size vectors each method receives and sends per active
    client and round, as its runs under P1 among ``summaries`` record them; the ledger's verdict
    on what the paper says the FedSUM family, SCAFFOLD and FedAvg send, against what they send
    in the in-process trainer and in Flower's messages (``communication``:
    :func:`aoi_fl.evidence.fedsum.claims.communication_table`, printed by
    :func:`~aoi_fl.evidence.fedsum.claims.communication_line`); and what each of the FedSUM family
    and SCAFFOLD keeps besides x, counted in its implementation's state (the ledger's
    ``fedsum.memory`` rows)."""
    groups = fr.group(summaries)
    print(
        "Fig. 1(b)'s unit, model-size vectors (down, up) per active client and round:",
        {a: tuple(groups[("P1", a)][0].communication) for a in fx.MAIN_ALGORITHMS},
    )
    print("sent, against the paper (the ledger's fedsum.comm rows):")
    for name, row in communication.iterrows():
        print(fc.communication_line(name, row))
    memory = {a: fc.memory_count(a) for a in fc.PAPER_MEMORY}
    print("kept besides x (vectors per client, vectors on the server, scalars per client):", memory)


def fig1_final(table: pd.DataFrame, threshold: float) -> None:
    """Fig. 1's final metrics (``table``: :func:`aoi_fl.evidence.fedsum.results.final_table` with
    the ``threshold`` test accuracy)."""
    print(f"threshold: test accuracy {threshold:.0%}")
    print_table(table[list(FIG1_COLUMNS)])


def claim_i(table: pd.DataFrame, summaries: Sequence[Any]) -> None:
    """Claim (i)'s tables: FedSUM and FedSUM-CR against the best baseline in final training loss
    and test accuracy (:func:`~aoi_fl.evidence.fedsum.results.head_to_head`), every method's rounds
    to the threshold and how fast its training loss still falls
    (:func:`~aoi_fl.evidence.fedsum.results.late_loss_ratio`)."""
    for metric in fr.CLAIM_METRICS:
        print(f"\n{metric}:")
        print_table(fr.head_to_head(table, metric, ["fedsum", "fedsum_cr"], fx.BASELINES))
    rounds = table["rounds to threshold"].unstack("algorithm")
    print("\nrounds to the threshold, mean over the seeds that reach it (NaN: none does):")
    print_table(rounds[list(fx.MAIN_ALGORITHMS)], "{:.1f}")
    print("\ntraining loss ratio over the last two evaluations (smaller: still falling faster):")
    ratio = fr.late_loss_ratio(fr.group(summaries), fx.MAIN_PATTERNS, fx.MAIN_ALGORITHMS)
    print_table(ratio, "{:.3f}")


def claim_ii(summaries: Sequence[Any]) -> None:
    """Claim (ii)'s tables: every method's training loss and test accuracy at each pattern's
    common communication budget (:func:`~aoi_fl.evidence.fedsum.results.budget_table`), the best
    one, and on how many patterns FedSUM-CR is ahead of FedSUM there."""
    for metric in fr.CLAIM_METRICS:
        at = fr.budget_table(summaries, metric)
        methods = at[list(fx.MAIN_ALGORITHMS)].dropna()
        if methods.empty:
            print(f"{metric}: some run evaluated nothing within the budget (tiny smoke runs)")
            continue
        best = fr.best_of(methods, metric)
        print(f"\n{metric} at the budget (model-size vectors):")
        print_table(at.assign(best=best))
        better = fr.ahead(methods["fedsum_cr"], methods["fedsum"], metric)
        print(
            f"FedSUM-CR better than FedSUM at the budget on {int(better.sum())} of {len(best)} "
            "patterns"
        )


# ---------------------------------------------------------------------------------------------
# The pattern notebook: Figs 9-11 and 14


def cases_final(table: pd.DataFrame, last: int, threshold: float) -> None:
    """The final metrics of Figs 9 and 14 (``table``: :func:`aoi_fl.evidence.fedsum.results.
    final_table` over the last ``last`` evaluations, with the ``threshold`` test accuracy)."""
    print(
        f"final values (mean of the last {last} evaluation(s)); threshold {threshold:.0%} test "
        "accuracy; tau of each run's own trace:"
    )
    print_table(table[list(CASE_COLUMNS)])


def cases_claims(table: pd.DataFrame, summaries: Sequence[Any]) -> None:
    """What claims (iii) and (viii) rest on in the first seed: FedSUM's final test accuracy over
    Cases 1-4, their spread, whether its training loss falls under each, FedSUM under biased
    sampling against its worst case; and against FedAvg, as Fig. 14(b) shows it (margins > 0:
    FedSUM better; App. H.8 claims nothing of it, so no part of claim (viii))."""
    four, falls = fr.four_cases(table, fr.group(summaries))
    gap = four["test_accuracy"].max() - four["test_accuracy"].min()
    print(f"final test accuracy over Cases 1-4: {four['test_accuracy'].round(4).to_dict()}")
    print(f"    spread {gap:.4f}; training loss falls under every case: {all(falls.values())}")
    biased = table.loc[("biased", "fedsum")]
    print(
        f"FedSUM biased: accuracy {biased['test_accuracy']:.4f} (worst of Cases 1-4: "
        f"{four['test_accuracy'].min():.4f}), training loss {biased['train_loss']:.4f} (worst: "
        f"{four['train_loss'].max():.4f})"
    )
    for metric in fr.CLAIM_METRICS:
        h2h = fr.head_to_head(table.loc[["biased"]], metric, ["fedsum"], ["fedavg"])
        print(
            f"biased sampling, {metric}: FedSUM {h2h[metric].iloc[0]:.4f}, FedAvg "
            f"{h2h['rival value'].iloc[0]:.4f} (margin {float(h2h['margin'].iloc[0]):+.4f}, > 0: "
            "FedSUM better)"
        )


def p_grid(table: pd.DataFrame) -> None:
    """Fig. 10's final metrics per p with the trace's delays and the loss's rises
    (``table``: :func:`aoi_fl.evidence.fedsum.results.p_grid_table`)."""
    columns = ["p", "tau_max", "tau_avg", "train_loss", "objective", "test_accuracy", "loss rises"]
    print_table(table[columns])


def family(table: pd.DataFrame) -> None:
    """Fig. 11's final metrics (``table``: :func:`aoi_fl.evidence.fedsum.results.final_table`) and
    the margins of FedSUM-B and FedSUM-CR over FedSUM
    (:func:`~aoi_fl.evidence.fedsum.results.family_margins`)."""
    print_table(table[["train_loss", "objective", "test_accuracy", "oscillation"]])
    print_table(fr.family_margins(table), "{:+.4f}")


# ---------------------------------------------------------------------------------------------
# The long-horizon notebook


def long_final(runs: Mapping[str, Sequence[Any]], last: int) -> None:
    """The long-horizon panel's final metrics (:func:`aoi_fl.evidence.fedsum.results.final_table`
    over the last ``last`` evaluations of the ``long`` and ``long_cases`` runs of ``runs``,
    figure -> runs) and every method's metrics at each pattern's common communication budget
    (:func:`~aoi_fl.evidence.fedsum.results.budget_table` of the ``long`` runs)."""
    print_table(fr.final_table([*runs["long"], *runs["long_cases"]], last=last)[list(LONG_COLUMNS)])
    for metric in fr.CLAIM_METRICS:
        print(f"\n{metric} at each pattern's common communication budget (model-size vectors):")
        print_table(fr.budget_table(runs["long"], metric))
