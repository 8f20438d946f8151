"""The FedSUM paper's claims and the bounds it prints, against ours (the ledger's ``fedsum`` rows).

The paper (You & Pu) prints no result numbers: its figures are curves. Its numbers are the
bounds of App. F on tau_max (Lemmas F.1-F.4), recomputed here with the library's samplers and
delay tracker as notebook 14 does (cases the paper does not state, to which we extend a
lemma's proof, are rows of ours), and the vectors each method sends per round (Sec. 1.1,
Sec. 3, Algs 1-3), measured in what our implementations send in the in-process trainer and in
Flower's messages (:mod:`aoi_fl.fedsum.costs`); what each keeps besides the model the paper
states in words, and we count it in our implementations' state. Its results are
the qualitative claims (i)-(viii) of Sec. 5 and App. H (Figs 1, 9-14), with (cr) (Sec. 5:
FedSUM-CR keeps FedSUM's performance) and the delay claims (Sec. 1.1, Remarks 2.1 and 4.1,
Sec. 4: performance orders with tau_avg, over the patterns and over the p grid), read from
the cached runs of notebooks 15-17 and judged by the criteria fixed in
:data:`aoi_fl.fedsum.results.CLAIM_CRITERIA` and ``ADDED_CRITERIA``
(:func:`~aoi_fl.fedsum.results.all_claims`): each part of a claim (a comparison on one
measure) by the paired 95% t interval over seeds, a claim "held" when every part is, "not
held" when some part is not, else "inconclusive at this budget". A claim of speed is judged
on a speed measure (the area under the curve against rounds, or against communication for
Fig. 1(b)), a claim of being "comparable" on a non-inferiority margin, and a comparison with
a diverged run is "inconclusive". Nothing is trained: a row whose runs are not cached is
"inconclusive" and says how many are missing. See :mod:`aoi_fl.pipeline.claims`.

Each claim has a row per notebook that shows it: ``.cnn`` (notebooks 15-16, the paper's CNN at
the profile's horizon) and ``.long`` (notebook 17, T = 2000). Each row states the conditions
under which the paper makes its claim (:class:`~aoi_fl.pipeline.claims.Condition`), and the
ledger's one rule makes it "inconclusive at this budget" whatever the criterion gives where
its runs miss one: a ``.cnn`` row the paper's horizon T = 2000 (:func:`horizon`; a claim
about 2000 rounds is not decided by the first 20-40), a ``.long`` row also the paper's CNN
(:func:`long_conditions`; in ``cpu`` its model is logistic regression: every claim's
experiments are the paper's CNN figures, the delay claims read Thm 4.1's dependence on tau off
those figures) and for (v) App. H.5's constant step size 0.1. Statements of the paper that
state a result but have no row are in :data:`UNTESTED`, with the reason.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from aoi_fl.core.delays import sampler_metrics
from aoi_fl.core.registry import SAMPLERS
from aoi_fl.fedsum import costs, delays, patterns
from aoi_fl.fedsum import experiments as fx
from aoi_fl.fedsum import results as fr
from aoi_fl.fedsum.experiments import LAST, PAPER_ROUNDS
from aoi_fl.pipeline import plugins
from aoi_fl.pipeline.claims import (
    VERDICT_GROUP,
    VERDICT_PATTERN,
    Claim,
    Condition,
    Untested,
    capped,
    row_kind,
    unmet,
)

#: the one-sided level of the confidence limit of mean tau_max against a bound on E[tau_max]
BOUND_LEVEL = 0.95
#: the claims of Sec. 5 / App. H (and Secs 1.1 and 4 on the delay metrics) that the cached
#: panels test: id -> (the panel of notebooks 15-16 that tests it, where the paper says it, the
#: claim in brief); keys ``fedsum.claim_<id>.*``
CLAIMS = {
    "(i)": (
        "main",
        "Sec. 5, paragraph on Fig. 1(a)",
        "FedSUM and FedSUM-CR converge faster and more stably than the six baselines",
    ),
    "(ii)": (
        "main",
        "Sec. 5, paragraph on Fig. 1(b)",
        "against communication FedSUM and FedSUM-CR converge faster than the six baselines and "
        "FedSUM-CR is the most effective of Fig. 1's eight methods",
    ),
    "(iii)": ("cases", "App. H.4, Fig. 9", "FedSUM is robust across participation Cases 1-4"),
    "(iv)": (
        "p_grid",
        "App. H.4, Fig. 10",
        "a larger Bernoulli p (smaller tau) gives better FedSUM",
    ),
    "(v)": (
        "family",
        "App. H.5, Fig. 11",
        "FedSUM-B and FedSUM-CR are comparable to or better than FedSUM (the paper: constant "
        "eta_l = 0.1, batch 128)",
    ),
    "(viii)": ("cases", "App. H.8, Fig. 14", "biased sampling does not hurt FedSUM"),
    "(cr)": (
        "main",
        "Sec. 5, paragraph on Fig. 1(b)",
        "FedSUM-CR maintains the strong performance of FedSUM (with less communication)",
    ),
    "(delays.patterns)": (
        "cases",
        "Sec. 1.1, first contribution; Remark 2.1 (intuition behind the delay metrics); Sec. 4 "
        "after Thm 4.1, Remark 4.1 and after Remark 4.2",
        "tau_max and tau_avg precisely quantify participation's impact on convergence and "
        "accurately capture participation heterogeneity; smaller delays give faster convergence "
        "(read: over Cases 1-4 and biased sampling FedSUM converges faster where tau_avg is "
        "smaller)",
    ),
    "(delays.p)": (
        "p_grid",
        "Remark 2.1 (intuition behind the delay metrics); Remark 4.1; App. H.4, Fig. 10",
        "smaller delays (more frequent participation) give faster convergence (read: over "
        "Fig. 10's Bernoulli p grid FedSUM converges faster where tau_avg is smaller)",
    ),
}
_NOTEBOOK = {"main": "15_fedsum_mnist"}
_CNN_NOTEBOOK, _LONG_NOTEBOOK = "16_fedsum_patterns", "17_fedsum_long_horizon"
_DELAY_NOTEBOOK = "14_participation_delays"


#: the keys of rows checked by arithmetic (theorems, bounds, closed forms, counts): the
#: ledger tallies them apart from the paper's experimental claims (:func:`row_kind`)
ARITHMETIC = ("fedsum.lemf", "fedsum.comm.", "fedsum.memory.", "fedsum.claim_iv.tau")


def _row(key: str, *fields: Any, kind: str | None = None, conditions=()) -> Claim:
    """A Claim of this paper; ``kind`` by :func:`row_kind` unless given."""
    kind = kind or row_kind(key, fields[1], ARITHMETIC)
    return Claim(key, "fedsum", *fields, kind=kind, conditions=tuple(conditions))


def _key(claim: str) -> str:
    return f"fedsum.claim_{claim.strip('()')}"


# ---------------------------------------------------------------------------------------------
# App. F: bounds on tau_max (notebook 14)


def bound_verdict(bound: float, values: Sequence[float], *, sure: bool = False) -> str:
    """The verdict on an upper bound of tau_max from our per-seed tau_max ``values``.

    A bound on E[tau_max] (Lemmas F.1-F.2) is "held" when the one-sided :data:`BOUND_LEVEL`
    upper confidence limit of the mean lies at or below it, "not held" when the lower limit
    lies above it, else "inconclusive" (one seed only, or the interval straddles the bound).
    A sure bound (Lemma F.3's proof, Lemma F.4) must hold in every seed.
    """
    v = np.asarray(values, dtype=float)
    if sure:
        return "held" if (v <= bound).all() else "not held"
    if v.size < 2:
        return "inconclusive"
    half = scipy_stats.t.ppf(BOUND_LEVEL, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size)
    if v.mean() + half <= bound:
        return "held"
    return "not held" if v.mean() - half > bound else "inconclusive"


class BoundCase(NamedTuple):
    """A participation pattern of notebook 14 and the App. F bound on its tau_max."""

    row: str  #: notebook 14's name of the pattern
    label: str  #: the ledger's description of it
    build: Callable[[int], Any]  #: seed -> the pattern's sampler
    bound: float
    lemma: str
    source: str  #: the lemma, briefly (notebook 14's "source" column; "(ours)": extended)
    formula: str
    sure: bool  #: a bound on tau_max itself, not on E[tau_max]
    #: a case the paper does not state, to which we extend the lemma's proof (a row of ours)
    ours: bool = False
    #: (formula, value) of a sure bound on tau_max that the lemma's proof gives, tighter than
    #: what the lemma states (the ledger tests the statement and reports this one)
    proof: tuple[str, float] | None = None


def bound_cases(n: int, s: int, t: int) -> dict[str, BoundCase]:
    """Every App. F bound notebook 14 checks, in its order: key (``lemf<k>.<pattern>``, the
    ledger's ``fedsum.<key>``) -> :class:`BoundCase`. Lemma F.2 (Case 2 of Sec. 2.1: each
    client active independently with p_i^t >= delta, p_i^t free to vary in time) covers P2, P3
    with the paper's period 10 and with the FedAWE code's period 20 alike, App. H.8's biased
    sampling and the p grid; the AoI paper's Policy 2 draws its S clients with replacement, so
    clients are not independent and the lemma's hypothesis fails, but its proof needs only
    P(i active) >= delta each round: an extension of ours (a row of ours). AoI Policy 1 with
    equal sizes draws what P1 draws, so it has no case
    of its own (notebook 14 shows it beside P1). The AoI policies come from the registry (the
    AoI paper registers them; :func:`plugins.load`)."""
    plugins.load()
    p = s / n
    p3_low = p * (0.7 - 0.3)  # min_t p^t of P3
    biased_low = float(patterns.biased_probabilities(n).min())
    policy2_delta = 1 - (1 - 1 / n) ** s
    f2 = "(4/delta) max{ln NT, ln 1/delta}, delta = "

    def bernoulli(row, label, build, delta, formula, short="", ours=False):
        bound = delays.bernoulli_bound(delta, n, t)
        source = "F.2" + short + (" (ours)" if ours else "")
        return BoundCase(row, label, build, bound, "Lemma F.2", source, f2 + formula, False, ours)

    f1 = ("Lemma F.1", "F.1", "(4N/S) ln(NT)", False)
    out = {
        "lemf1.p1": BoundCase(
            f"P1 / Case 1: uniform S={s}",
            "P1 / Case 1 (uniform S of N)",
            lambda seed: patterns.UniformSubset(n, s, seed),
            delays.uniform_bound(n, s, t),
            *f1,
        ),
        "lemf2.p2": bernoulli(
            f"P2 / Case 2: Bernoulli p={p:g}",
            f"P2 / Case 2 (Bernoulli p = {p:g})",
            lambda seed: patterns.Bernoulli(n, p, seed),
            p,
            f"p = {p:g}",
        ),
        "lemf2.p3": bernoulli(
            "P3: sine, period 10 (paper)",
            "P3 (sine, period 10, as the paper)",
            lambda seed: patterns.SineBernoulli(n, p, seed=seed),
            p3_low,
            f"the sine's floor {p3_low:g} <= min_t p_i^t",
            f", delta={p3_low:g}",
        ),
        "lemf2.p3_period20": bernoulli(
            "P3: sine, period 20 (FedAWE code)",
            "P3 (sine, period 20, as the FedAWE code)",
            lambda seed: patterns.SineBernoulli(n, p, period=20.0, seed=seed),
            p3_low,
            f"the sine's floor {p3_low:g} <= min_t p_i^t",
            f", delta={p3_low:g}",
        ),
        "lemf4.cyclic": BoundCase(
            "deterministic cyclic",
            "deterministic cyclic order",
            lambda seed: patterns.DeterministicCyclic(n, s, seed),
            delays.deterministic_cyclic_bound(n, s),
            "Lemma F.4",
            "F.4",
            f"2N/S (exactly N/S - 1 = {n // s - 1} here)",
            True,
        ),
        "lemf3.reshuffled": BoundCase(
            "reshuffled cyclic",
            "reshuffled cyclic order",
            lambda seed: patterns.ReshuffledCyclic(n, s, seed),
            delays.reshuffled_cyclic_bound(n, s),
            "Lemma F.3",
            "F.3",
            "4N/S",
            False,
            proof=("2 floor(N/S)", delays.reshuffled_cyclic_proof_bound(n, s)),
        ),
        "lemf2.biased": bernoulli(
            "biased (App. H.8)",
            "biased Bernoulli (App. H.8)",
            lambda seed: patterns.BiasedBernoulli(n, seed),
            biased_low,
            f"min p_i = {biased_low:g}",
            f", delta={biased_low:g}",
        ),
    }
    for q in (0.05, 0.1, 0.5, 1.0):
        out["lemf2.p" + f"{q:g}".replace(".", "_")] = bernoulli(
            f"Case 2: Bernoulli p={q:g}",
            f"Case 2 (Bernoulli p = {q:g})",
            lambda seed, q=q: patterns.Bernoulli(n, q, seed),
            q,
            f"p = {q:g}",
        )
    out["lemf2.aoi_probabilistic"] = bernoulli(
        "AoI Policy 2: probabilistic",
        "AoI Policy 2 (probabilistic)",
        lambda seed: SAMPLERS["probabilistic"](n, None, m=s, seed=seed),
        policy2_delta,
        f"1 - (1 - 1/N)^S = {policy2_delta:.3g}",
        ours=True,
    )
    return out


def bound_table(profile: str = "cpu") -> pd.DataFrame:
    """App. F's bounds against the simulated traces of notebook 14 (N = ``DELAY_CLIENTS``,
    S = ``DELAY_ACTIVE``, the rounds and seeds of :data:`~aoi_fl.fedsum.experiments.
    DELAY_SETTINGS`), one row per :func:`bound_cases` key: the pattern, the lemma, the bound,
    tau_max (mean, min, max over seeds) and the verdict (:func:`bound_verdict`)."""
    cfg = fx.DELAY_SETTINGS[profile]
    t, seeds = cfg["rounds"], cfg["seeds"]
    rows = {}
    for key, c in bound_cases(fx.DELAY_CLIENTS, fx.DELAY_ACTIVE, t).items():
        tau = np.array([sampler_metrics(c.build(seed), t).tau_max for seed in seeds])
        rows[key] = {
            "pattern": c.row,
            "lemma": c.lemma,
            "bounds": "tau_max" if c.sure else "E[tau_max]",
            "bound": float(c.bound),
            "tau_max": float(tau.mean()),
            "tau_max min": float(tau.min()),
            "tau_max max": float(tau.max()),
            "seeds": len(seeds),
            "verdict": bound_verdict(c.bound, tau, sure=c.sure),
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def bound_line(key: str, row: Any) -> str:
    """How notebook 14 prints the verdict on a bound (a row of :func:`bound_table`); the
    ledger's ``printed_as`` finds it."""
    return (
        f"{key}: {row['verdict']} ({row['lemma']}, {row['bounds']} <= {row['bound']:.2f}; "
        f"tau_max {row['tau_max']:.2f}, {row['tau_max min']:g}-{row['tau_max max']:g} over "
        f"{row['seeds']} seeds)"
    )


def delay_claims(profile: str = "cpu") -> list[Claim]:
    """App. F's bounds on tau_max (Lemmas F.1-F.4) against notebook 14's simulated traces
    (:func:`bound_table`): paper value the bound at these sizes, ours the mean tau_max over
    seeds, verdict :func:`bound_verdict`, as notebook 14 prints it (:func:`bound_line`). A
    case the paper does not state (:attr:`BoundCase.ours`) is a row of ours, the bound we
    computed in its statement; where the lemma's proof gives a tighter sure bound than it
    states (:attr:`BoundCase.proof`), the spread says whether every seed is within it."""
    n, s, t = fx.DELAY_CLIENTS, fx.DELAY_ACTIVE, fx.DELAY_SETTINGS[profile]["rounds"]
    cases = bound_cases(n, s, t)
    out = []
    for key, row in bound_table(profile).iterrows():
        c = cases[key]
        bound = f"{row['bounds']} <= {c.formula}"
        statement = f"{bound} for the {c.label}; N = {n}, S = {s}, T = {t}"
        if c.ours:
            statement = (
                f"{c.lemma}'s proof extended to a case the paper does not state: {bound}, "
                f"{row['bound']:.2f} here, for the {c.label}; N = {n}, S = {s}, T = {t}"
            )
        spread = f"tau_max over {row['seeds']} seeds: {row['tau_max min']:g}-{row['tau_max max']:g}"
        if row["tau_max"] > 0:
            spread += f"; bound / mean {row['bound'] / row['tau_max']:.3g}"
        if c.proof is not None:
            formula, value = c.proof
            within = row["tau_max max"] <= value
            spread += f"; its proof's sure bound tau_max <= {formula} = {value:g}: " + (
                "within it in every seed" if within else "above it in a seed"
            )
        out.append(
            _row(
                f"fedsum.{key}",
                f"App. F, {c.lemma}",
                statement,
                None if c.ours else float(row["bound"]),
                float(row["tau_max"]),
                spread,
                row["verdict"],
                _DELAY_NOTEBOOK,
                rf"^{re.escape(key)}: {VERDICT_GROUP} \(",
                kind="ours" if c.ours else None,
            )
        )
    return out


def tau_claim(profile: str = "cpu") -> Claim:
    """App. H.4's reading of Fig. 10, that a larger p means smaller tau_avg and tau_max, on
    notebook 14's Bernoulli traces (N = ``DELAY_CLIENTS``, the rounds and seeds of
    :data:`~aoi_fl.fedsum.experiments.DELAY_SETTINGS`) over the profile's p grid: "held" when
    both fall strictly from each p of the grid to the next in every seed, "not held" when one
    of them does not in some seed."""
    cfg, grid = fx.DELAY_SETTINGS[profile], fx.profile_settings(profile)["p_grid"]
    n, t, seeds = fx.DELAY_CLIENTS, cfg["rounds"], cfg["seeds"]
    # metrics[seed][field]: that field of each p's trace, in the order of the grid
    metrics = [
        {
            field: np.array([getattr(m, field) for m in runs], dtype=float)
            for field in ("tau_max", "tau_avg")
        }
        for runs in (
            [sampler_metrics(patterns.Bernoulli(n, p, seed), t) for p in grid] for seed in seeds
        )
    ]
    falls = sum(all((np.diff(v) < 0).all() for v in m.values()) for m in metrics)
    means = {f: np.mean([m[f] for m in metrics], axis=0) for f in ("tau_max", "tau_avg")}
    return _row(
        "fedsum.claim_iv.tau",
        "App. H.4, paragraph on Fig. 10",
        f"a larger p gives a smaller tau_avg and tau_max (Case 2, Bernoulli p in "
        f"{'/'.join(f'{p:g}' for p in grid)}; ours: N = {n}, T = {t}; held when both fall from "
        "each p to the next in every seed)",
        None,
        None,
        f"both fall in {falls}/{len(seeds)} seeds; mean over seeds tau_max "
        + " / ".join(f"{v:.1f}" for v in means["tau_max"])
        + ", tau_avg "
        + " / ".join(f"{v:.1f}" for v in means["tau_avg"]),
        "held" if falls == len(seeds) else "not held",
        _DELAY_NOTEBOOK,
    )


# ---------------------------------------------------------------------------------------------
# Communication per round (Sec. 1.1, Sec. 3)

#: model-size vectors (received, sent) per active client and round, as the paper states them,
#: and where: FedSUM-B and FedSUM-CR one each way, FedSUM x and y^{(t-1)} down and delta_i up
#: (Secs 3.1-3.3, lines 3 and 10-11 of Algs 1-3); SCAFFOLD the same as FedSUM and FedAvg the
#: same as FedSUM-B and FedSUM-CR (Sec. 1.1, second contribution)
PAPER_COMMUNICATION = {
    "fedsum_b": ((1, 1), "Sec. 3.1, Alg. 1 lines 3 and 10", "FedSUM-B: x down, delta_i up"),
    "fedsum": ((2, 1), "Sec. 3.2, Alg. 2 lines 3 and 11", "FedSUM: x and y down, delta_i up"),
    "fedsum_cr": ((1, 1), "Sec. 3.3, Alg. 3 lines 3 and 11", "FedSUM-CR: x down, delta_i up"),
    "scaffold": (
        (2, 1),
        "Sec. 1.1, second contribution",
        "SCAFFOLD (single-upload form of Huang et al.) costs what FedSUM costs",
    ),
    "fedavg": (
        (1, 1),
        "Sec. 1.1, second contribution",
        "FedAvg costs what FedSUM-B and FedSUM-CR cost",
    ),
}


#: the protocols in which what a method sends is measured (:mod:`aoi_fl.fedsum.costs`): the
#: method's own, in the in-process trainer (its two sides watched: what each reads of the
#: other's), which decides the paper's claim; and our Flower strategy's (the arrays of the
#: training messages and replies on Flower's in-process grid, cached by notebook 15), a
#: transport of ours, whose rows say whether it carries only what the method sends
PROTOCOLS = ("in process", "Flower")


#: the methods' names as the paper writes them
METHOD_LABELS = {
    "fedsum_b": "FedSUM-B",
    "fedsum": "FedSUM",
    "fedsum_cr": "FedSUM-CR",
    "scaffold": "SCAFFOLD",
    "fedavg": "FedAvg",
}
#: why our Flower replies carry one vector more than a method that uploads delta_i sends
FLOWER_REPLY = (
    "; every reply carries the client's model besides the method's upload: the strategy reads "
    "it for the update norms it records and feeds back to the sampler, a cost of our "
    "transport, not of the method"
)


def communication_verdict(paper: costs.Traffic, measured: costs.Traffic | None) -> str:
    """The verdict on the vectors a method sends per active client and round, from one
    protocol's count (None: not measured): "held" when it is the paper's (down, up), "not held"
    when it differs, "inconclusive" when not measured."""
    if measured is None:
        return "inconclusive"
    return "held" if tuple(measured) == tuple(paper) else "not held"


def communication_table(
    results_dir: str = "results",
    measure: Callable[[Mapping[str, Any]], Sequence[costs.MessageArrays]] | None = None,
    *,
    rerun: bool = False,
) -> pd.DataFrame:
    """Per method of :data:`PAPER_COMMUNICATION`, with the paper's settings on the tiny task of
    :func:`~aoi_fl.fedsum.costs.traffic_config`: the paper's (down, up), ours in each of the
    :data:`PROTOCOLS` (:class:`~aoi_fl.fedsum.costs.Traffic`; in process measured here, in
    Flower read from ``results_dir``'s cache or, given ``measure`` (``aoi_fl.flower.inprocess.
    train_messages``), measured where missing or with ``rerun``; None: not measured) and each
    protocol's :func:`communication_verdict` (``verdict``: the method's, in process;
    ``Flower verdict``: our transport's)."""
    rows = {}
    for name, (paper, _, _) in PAPER_COMMUNICATION.items():
        config = costs.traffic_config(fx.algorithm_spec(name, "paper"))
        measured = {
            "in process": costs.trainer_traffic(config),
            "Flower": costs.flower_traffic(config, results_dir, measure, rerun=rerun),
        }
        stated = costs.Traffic(*paper)
        rows[name] = {
            "paper": stated,
            **measured,
            "verdict": communication_verdict(stated, measured["in process"]),
            "Flower verdict": communication_verdict(stated, measured["Flower"]),
        }
    return pd.DataFrame.from_dict(rows, orient="index", dtype=object)


def _count(row: Any, protocol: str) -> str:
    return "not measured" if row[protocol] is None else row[protocol].text()


def communication_line(name: str, row: Any) -> str:
    """How notebook 15 prints the verdicts on what method ``name`` sends (a row of
    :func:`communication_table`); the ledger's ``printed_as`` finds them."""
    return (
        f"comm.{name}: {row['verdict']} (down, up: paper {row['paper'].text()}; in process "
        f"{_count(row, 'in process')}) | our Flower messages: {row['Flower verdict']} "
        f"({_count(row, 'Flower')})"
    )


def communication_claims(results_dir: str = "results") -> list[Claim]:
    """The vectors each method sends per active client and round (:data:`PAPER_COMMUNICATION`)
    against ours (:func:`communication_table`, Flower's count from ``results_dir``'s cache): the
    paper's claim on the method's own protocol (``fedsum.comm.<method>``), and ours on whether
    our Flower strategy's messages carry only those vectors (``fedsum.comm.flower.<method>``)."""
    out = []
    for name, row in communication_table(results_dir).iterrows():
        setting = (
            f"counted over {costs.TRAFFIC_ROUNDS} rounds of {METHOD_LABELS[name]} with the "
            f"paper's settings on a {costs.TRAFFIC_CLIENTS}-client least-squares task"
        )
        paper, ref, text = PAPER_COMMUNICATION[name]
        head = rf"^comm\.{re.escape(name)}: "
        out.append(
            _row(
                f"fedsum.comm.{name}",
                ref,
                f"{text}: model-size vectors (down, up) per active client and round "
                f"{paper}; the value is their sum (ours: measured in the method's protocol, "
                "what each side of the in-process trainer reads of the other's)",
                float(sum(paper)),
                float(sum(row["in process"])),
                f"ours (down, up) {row['in process'].text()}, {setting}",
                row["verdict"],
                _NOTEBOOK["main"],
                rf"{head}{VERDICT_GROUP} \(",
            )
        )
        flower = row["Flower"]
        uncached = "" if flower is not None else "; not cached: notebook 15 measures it"
        out.append(
            _row(
                f"fedsum.comm.flower.{name}",
                f"{ref}",
                f"our Flower strategy's messages for {METHOD_LABELS[name]} carry per active "
                f"client and round only the model-size vectors the method sends, {paper} "
                "(down, up); the value is their sum",
                None,
                None if flower is None else float(sum(flower)),
                f"ours (down, up) {_count(row, 'Flower')} in the arrays of every training "
                f"message and reply on Flower's in-process grid, {setting}{uncached}"
                + (FLOWER_REPLY if flower is not None and flower.up > paper[1] else ""),
                row["Flower verdict"],
                _NOTEBOOK["main"],
                rf"{head}.* \| our Flower messages: {VERDICT_GROUP} \(",
                kind="ours",
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# Memory (Sec. 1.1, Secs 3.1-3.3)

#: what each method keeps besides the global model x, as the paper states it: (model-size
#: vectors per client, model-size vectors on the server, scalars per client), and where.
#: FedSUM-B keeps h_i on the clients and y on the server (Sec. 3.1), FedSUM the same control
#: variables (Sec. 3.2), FedSUM-CR also z_i (a model) and a_i (a round) on each client, the
#: "extra memory" that saves the downlink of y (Sec. 3.3, eq. 10, Alg. 3 line 1); SCAFFOLD the
#: same as FedSUM (Sec. 1.1, second contribution: "the same communication and memory cost")
PAPER_MEMORY = {
    "fedsum_b": (
        (1, 1, 0),
        "Sec. 3.1, Alg. 1 line 1",
        "FedSUM-B keeps h_i on each client and y on the server",
    ),
    "fedsum": (
        (1, 1, 0),
        "Sec. 3.2, Alg. 2 line 1",
        "FedSUM keeps FedSUM-B's control variables, h_i on each client and y on the server",
    ),
    "fedsum_cr": (
        (2, 1, 1),
        "Sec. 3.3, eq. 10, Alg. 3 line 1 and the comparison of the family",
        "FedSUM-CR keeps h_i and, as the extra memory that saves the downlink of y, z_i (the "
        "model last received) and a_i (the round) on each client; y on the server",
    ),
    "scaffold": (
        (1, 1, 0),
        "Sec. 1.1, second contribution",
        "FedSUM has SCAFFOLD's memory cost: SCAFFOLD keeps what FedSUM keeps (c_i for each "
        "client, c on the server; ours keeps the c_i table on the server, which moves the "
        "vectors, not their number)",
    ),
}
#: the paper's federation (Sec. 5), at which a row's value counts the vectors kept
MEMORY_CLIENTS = 100


def memory_count(name: str) -> tuple[float, float, float]:
    """What method ``name`` with the paper's settings keeps besides the global model (model-
    size vectors per client, on the server, scalars per client;
    :func:`aoi_fl.fedsum.costs.memory_count`)."""
    return costs.memory_count(fx.algorithm_spec(name, "paper"))


def memory_claims() -> list[Claim]:
    """What each method keeps (:data:`PAPER_MEMORY`) against our implementations'
    (:func:`memory_count`): "held" when the vectors per client, the vectors on the server and
    the scalars per client all agree. The paper states what is kept, not how many vectors
    that makes, so there is no paper value: the statement gives the count its words imply for
    :data:`MEMORY_CLIENTS` clients, the value ours."""
    out = []
    n = MEMORY_CLIENTS
    for name, (paper, ref, text) in PAPER_MEMORY.items():
        ours = memory_count(name)
        per, server, scalars = ours
        out.append(
            _row(
                f"fedsum.memory.{name}",
                ref,
                f"{text}: besides x, (model-size vectors per client, on the server, scalars per "
                f"client) {paper}, so {paper[0] * n + paper[1]} vectors for the paper's N = {n} "
                f"clients (our count from its words; the paper prints no number); the value is "
                f"ours for N = {n}",
                None,
                float(per * n + server),
                f"ours (per client, on the server, scalars per client) = ({per:g}, {server:g}, "
                f"{scalars:g}), counted in the state that {name}'s implementation (every run's) "
                "checkpoints (per-client tables and single vectors; the simulation keeps both "
                "in one process)",
                "held" if ours == tuple(float(v) for v in paper) else "not held",
                _NOTEBOOK["main"],
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# Claims (i)-(v) and (viii): the cached panels of notebooks 15-17


def _panel(figures: Sequence[str], profile: str, results_dir: str) -> tuple[list, int, int]:
    """(cached summaries, missing, planned) of ``figures`` together."""
    planned = [p for f in figures for p in fx.plan(f, profile)]
    found, missing = fx.cached_summaries(planned, results_dir)
    return found, missing, len(planned)


def _compact(numbers: str) -> str:
    return numbers.replace("train_loss", "loss").replace("test_accuracy", "accuracy")


def _judged(row) -> tuple[float | None, str]:
    """(share of parts held, "k/n parts held: numbers") of a claim's row of a
    :func:`~aoi_fl.fedsum.results.all_claims` table."""
    held, parts = map(int, row["parts held"].split("/"))
    share = held / parts if parts else None
    return share, f"{row['parts held']} parts held: {_compact(row['numbers'])}"


def _missing(missing: int, planned: int) -> str:
    return f"{missing} of {planned} runs not cached"


def horizon(rounds: int) -> Condition:
    """The horizon under which the paper makes every claim of Sec. 5 and App. H, T =
    :data:`~aoi_fl.fedsum.experiments.PAPER_ROUNDS`, against a panel's ``rounds`` (the first
    20-40 rounds do not decide a claim about 2000)."""
    return Condition("horizon", f"T = {PAPER_ROUNDS}", f"T = {rounds}")


def _model(name: str) -> str:
    """A panel's model as a condition names it (the paper's MNIST model: its CNN)."""
    return "CNN" if name == fx.MODELS["mnist"] else name.replace("_", " ")


def long_conditions(claim: str, profile: str) -> tuple[Condition, ...]:
    """The conditions under which the paper makes ``claim``, against the long-horizon panel of
    ``profile``: the paper's horizon (:func:`horizon`), its MNIST CNN (every claim is read off
    figures of CNNs, Sec. 5 and App. H; the delay claims' only experiments are Figs 9, 10 and
    14, of the CNN too) and, for (v), App. H.5's constant eta_l = 0.1 (the panel keeps Sec. 5's
    decaying schedule)."""
    out = [
        horizon(fx.profile_settings(profile)["long"]["rounds"]),
        Condition("model", _model(fx.MODELS["mnist"]), _model(fx.LONG_MODELS[profile]["name"])),
    ]
    if claim == "(v)":
        out.append(Condition("eta_l", "constant 0.1 (App. H.5)", "decaying (Sec. 5)"))
    return tuple(out)


def cnn_verdicts(summaries: Sequence[fx.RunSummary], figure: str, profile: str) -> pd.DataFrame:
    """The claims of :data:`CLAIMS` that the CNN panel ``figure`` of notebooks 15-16 tests,
    from its ``summaries``: :func:`~aoi_fl.fedsum.results.all_claims` (criterion, numbers,
    parts held, its verdict as "by the criterion") over the last ``LAST["cnn"]`` evaluations,
    the panel's rounds and the verdict, :func:`capped` by the paper's :func:`horizon`."""
    rounds = fx.profile_settings(profile)["rounds"][figure]
    table = fr.all_claims(summaries, last=LAST["cnn"][profile])
    table = table.loc[[c for c, (panel, _, _) in CLAIMS.items() if panel == figure]]
    table = table.rename(columns={"verdict": "by the criterion"})
    table["rounds"] = rounds
    table["verdict"] = [capped(v, [horizon(rounds)]) for v in table["by the criterion"]]
    return table


def cnn_line(claim: str, row: Any) -> str:
    """How notebooks 15-16 print the verdict on a claim (a row of :func:`cnn_verdicts`); the
    ledger's ``printed_as`` finds it."""
    return (
        f"{claim} {row['verdict']} ({row['rounds']} of the paper's {PAPER_ROUNDS} rounds; by "
        f"the criterion {row['by the criterion']}, {row['parts held']} parts held)"
    )


def cnn_claims(profile: str = "cpu", results_dir: str = "results") -> list[Claim]:
    """Claims (i)-(v) and (viii) on the paper's CNN (notebooks 15-16, MNIST) by the criteria
    of :data:`~aoi_fl.fedsum.results.ALL_CRITERIA`, one panel per claim as the notebooks
    run them (:func:`cnn_verdicts`), the criterion's verdict scoped by the row to the paper's
    :func:`horizon`: short of T = 2000 "inconclusive at this budget"."""
    settings = fx.profile_settings(profile)
    tables: dict[str, tuple] = {}
    for figure in {panel for panel, _, _ in CLAIMS.values()}:
        found, missing, planned = _panel([figure], profile, results_dir)
        table = cnn_verdicts(found, figure, profile) if found and not missing else None
        tables[figure] = (table, missing, planned)
    out = []
    for claim, (figure, ref, text) in CLAIMS.items():
        table, missing, planned = tables[figure]
        rounds, seeds = settings["rounds"][figure], settings["seeds"][figure]
        ours, spread, verdict = None, _missing(missing, planned), "inconclusive"
        if table is not None:
            row = table.loc[claim]
            ours, numbers = _judged(row)
            spread = (
                f"{rounds} rounds, {seeds} seed{'s' if seeds > 1 else ''}; by the criterion "
                f"{row['by the criterion']}, " + numbers
            )
            verdict = row["by the criterion"]
        out.append(
            _row(
                f"{_key(claim)}.cnn",
                f"{ref}, claim {claim}",
                f"{text} (paper's MNIST CNN, T = {PAPER_ROUNDS}; ours {rounds} rounds; "
                f"criterion: {fr.ALL_CRITERIA[claim]})",
                None,
                ours,
                spread,
                verdict,
                _NOTEBOOK.get(figure, _CNN_NOTEBOOK),
                rf"^{re.escape(claim)} {VERDICT_GROUP} \(\d+ of the paper's \d+ rounds; ",
                conditions=[horizon(rounds)],
            )
        )
    return out


def long_verdicts(summaries: Sequence[fx.RunSummary], profile: str) -> pd.DataFrame:
    """The claims of :data:`CLAIMS` on the long-horizon panel's ``summaries`` (notebook 17):
    :func:`~aoi_fl.fedsum.results.all_claims` (criterion, numbers, parts held, its verdict as
    "by the criterion") over the last ``LAST["long"]`` evaluations, the conditions of the claim
    the panel does not meet (:func:`long_conditions`, "; "-joined) and the verdict: the
    criterion's where it meets them all, else :func:`capped`."""
    table = fr.all_claims(summaries, last=LAST["long"][profile]).loc[list(CLAIMS)]
    table = table.rename(columns={"verdict": "by the criterion"})
    conditions = {claim: long_conditions(claim, profile) for claim in table.index}
    table["unmet"] = ["; ".join(unmet(conditions[claim])) for claim in table.index]
    table["verdict"] = [
        capped(by, conditions[claim]) for claim, by in table["by the criterion"].items()
    ]
    return table


def long_line(claim: str, row: Any) -> str:
    """How notebook 17 prints the verdict on a claim (a row of :func:`long_verdicts`); the
    ledger's ``printed_as`` finds it."""
    unmet = f"{row['unmet']}; " if row["unmet"] else ""
    return (
        f"{claim} {row['verdict']} ({unmet}by the criterion {row['by the criterion']}, "
        f"{row['parts held']} parts held)"
    )


def p_grid_speed(summaries: Sequence[fx.RunSummary], last: int) -> str:
    """What the endpoint of claim (iv) misses on a p grid's ``summaries``: within a seed, the
    span over the grid of FedSUM's final training loss (the criterion's measure, the mean of
    the last ``last`` evaluations) and of its horizon mean (the speed measure; row
    ``fedsum.claim_delays.p`` judges it), the horizon mean per p and seed, and whether that of
    the smallest p lies above that of every larger p in every seed; "" without a grid."""
    groups = fr.group(summaries)
    grid = sorted(
        (float(p[2:]), runs)
        for (p, a), runs in groups.items()
        if p.startswith("p=") and a == "fedsum"
    )
    if len(grid) < 2:
        return ""
    # [p][seed]
    final = np.array([[fr.final_value(r, "train_loss", last) for r in runs] for _, runs in grid])
    means = np.array([[fr.horizon(r, "train_loss") for r in runs] for _, runs in grid])
    rest = means[1:]
    by_p = ", ".join(
        f"p = {p:g} " + "/".join(f"{v:.4f}" for v in m)
        for (p, _), m in zip(grid, means, strict=True)
    )
    return (
        f"; within a seed the final training loss spans at most {np.ptp(final, axis=0).max():.1g} "
        f"over the grid, its horizon mean (the speed measure) up to "
        f"{np.ptp(means, axis=0).max():.1g}: {by_p} per seed, so the horizon mean "
        + ("separates" if means[0].min() > rest.max() else "does not separate")
        + f" p = {grid[0][0]:g} ({means[0].min():.4f}-{means[0].max():.4f}) from p >= "
        f"{grid[1][0]:g} ({rest.min():.4f}-{rest.max():.4f})"
    )


def long_claims(profile: str = "cpu", results_dir: str = "results") -> list[Claim]:
    """Claims (i)-(v) and (viii), (cr) and the delay claims at the paper's horizon T = 2000
    (notebook 17's panel: ``long``, ``long_cases``, ``long_p_grid``): the criterion's verdict,
    scoped by the row to the claim's :func:`long_conditions`, which is what notebook 17 prints
    (:func:`long_verdicts`, :func:`long_line`); claim (iv)'s spread adds what its endpoint
    misses (:func:`p_grid_speed`)."""
    found, missing, planned = _panel(fx.LONG_FIGURES, profile, results_dir)
    table = long_verdicts(found, profile) if found and not missing else None
    model = fx.LONG_MODELS[profile]["name"].replace("_", " ")
    s = fx.profile_settings(profile)["long"]
    out = []
    for claim, (_, ref, text) in CLAIMS.items():
        ours, spread, verdict = None, _missing(missing, planned), "inconclusive"
        if table is not None:
            row = table.loc[claim]
            ours, numbers = _judged(row)
            spread = (
                f"{s['seeds']} paired seeds; by the criterion {row['by the criterion']}, "
                + numbers
                + (p_grid_speed(found, LAST["long"][profile]) if claim == "(iv)" else "")
            )
            verdict = row["by the criterion"]
        out.append(
            _row(
                f"{_key(claim)}.long",
                f"{ref}, claim {claim}",
                f"{text} (ours: MNIST, {model}, T = {s['rounds']}; criterion: "
                f"{fr.ALL_CRITERIA[claim]})",
                None,
                ours,
                spread,
                verdict,
                _LONG_NOTEBOOK,
                rf"^{re.escape(claim)} {VERDICT_GROUP} \(.*by the criterion "
                rf"(?:{VERDICT_PATTERN}), \d+/\d+ parts held\)\s*$",
                conditions=long_conditions(claim, profile),
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# What cannot be run here


def unrun_claims(data_root: str = "data") -> list[Claim]:
    """Fig. 1's SVHN and CIFAR-10 columns, claims (vi) (ResNet-18, Fig. 12) and (vii) (BERT
    on SST-2, Fig. 13), and App. H.5's small-batch remark: data this machine cannot get, or
    experiments this project does not have. The small-batch remark could be run on MNIST but
    is not: "inconclusive", with "not run" as its reason (no budget was spent on it, so it is
    not "at this budget")."""
    from aoi_fl.data.datasets import cifar_available

    def cifar(names: Sequence[str], extra: str) -> tuple[str, str]:
        absent = [n for n in names if not cifar_available(n, data_root)]
        if absent:
            return f"{', '.join(absent)} not on this machine{extra}", "not computable here"
        return f"not run in the cpu profile{extra}", "inconclusive at this budget"

    fig1_spread, fig1_verdict = cifar(["cifar10"], "; SVHN has no loader and cannot be fetched")
    resnet_spread, resnet_verdict = cifar(
        ["cifar10", "cifar100"], "; no ResNet-18 panel in this project"
    )
    if resnet_verdict != "not computable here":
        resnet_verdict = "inconclusive"
    return [
        _row(
            "fedsum.claim_i.svhn_cifar10",
            "Sec. 5, Fig. 1 (SVHN and CIFAR-10 columns), claims (i)-(ii)",
            "claims (i) and (ii) on the SVHN and CIFAR-10 CNNs (Fig. 1's other two columns)",
            None,
            None,
            fig1_spread,
            fig1_verdict,
            _NOTEBOOK["main"],
        ),
        _row(
            "fedsum.claim_vi.resnet18",
            "App. H.6, Fig. 12, claim (vi)",
            "FedSUM beats FedAvg and SCAFFOLD with ResNet-18 on CIFAR-10 and CIFAR-100 "
            "(N = 50, S = 10)",
            None,
            None,
            resnet_spread,
            resnet_verdict,
            "-",
        ),
        _row(
            "fedsum.claim_vii.sst2",
            "App. H.7, Fig. 13, claim (vii)",
            "FedSUM is competitive with FedAvg fine-tuning BERT on SST-2 (SCAFFOLD and "
            "FedSUM-CR said not to converge)",
            None,
            None,
            "SST-2 and the pretrained bert-base-uncased weights cannot be had offline; no "
            "such experiment in this project",
            "not computable here",
            "-",
        ),
        _row(
            "fedsum.claim_v.small_batch",
            "App. H.5, paragraph on Fig. 11, claim (v)",
            "with batch 8 or 16 FedSUM-B degrades and FedSUM leads (text only, no figure)",
            None,
            None,
            "not run: no batch-8 or batch-16 panel in this project (it could run on MNIST; "
            "nothing was trained for it)",
            "inconclusive",
            "-",
        ),
    ]


def claims(
    profile: str = "cpu", *, results_dir: str = "results", data_root: str = "data"
) -> list[Claim]:
    """Every FedSUM row of the ledger (App. F's bounds, tau against p, the communication per
    round, claims (i)-(viii))."""
    return (
        delay_claims(profile)
        + [tau_claim(profile)]
        + communication_claims(results_dir)
        + memory_claims()
        + cnn_claims(profile, results_dir)
        + long_claims(profile, results_dir)
        + unrun_claims(data_root)
    )


#: Untested(ref, statement, reason) of this paper
_untested = functools.partial(Untested, "fedsum")


_BOUND = (
    "a bound on the average squared gradient norm whose constants (L, sigma^2, Delta_f, F_0) "
    "are unknown for the paper's CNN and whose step sizes (eta_g = 1/sqrt(tau_max)) no "
    "experiment uses (App. H.2: eta_g = 1); no measurable quantity"
)
_SYMBOLIC = "rates compared symbolically with other papers' rates; no measurable quantity"

#: statements of the paper that state a result but have no row, and why (a sweep of the
#: abstract, contributions, Secs 2-6, App. A-H, in the paper's order)
UNTESTED: tuple[Untested, ...] = (
    _untested(
        "Abstract; Sec. 1.1, third contribution; Sec. 6",
        "the FedSUM family supports any participation pattern with no assumption on data "
        "heterogeneity (smoothness and bounded variance only)",
        "a property of the analysis's assumptions (Assumptions 1.1-1.2), not of a run; its "
        "experimental face is claims (i)-(iii) and (viii) (rows fedsum.claim_*)",
    ),
    _untested(
        "Abstract; Sec. 1.1, third contribution; Sec. 4 after Table 1; Sec. 6",
        "the unified guarantees recover the rates of methods built for particular patterns and "
        "show state-of-the-art efficiency across participation regimes",
        _SYMBOLIC + " (Table 1's bounds on tau, App. F, have rows fedsum.lemf*)",
    ),
    _untested(
        "Sec. 1.1, first contribution; Sec. 6",
        "the first analysis of FL under such diverse (arbitrary) participation patterns",
        "a claim of priority over the literature, not a result a run can test",
    ),
    _untested(
        "Sec. 1, third paragraph; Sec. 1.2",
        "other methods' results, assumptions and costs (FedAvg's effectiveness limited under "
        "heterogeneous data and partial participation, bounded inactive periods of MIFA and "
        "FedLaAvg, server tables of MIFA and FedVARP growing with N, SCAFFOLD costing more "
        "than FedAvg)",
        "results of the cited papers, not of this one (SCAFFOLD's and FedAvg's vectors per "
        "round are rows fedsum.comm.scaffold and fedsum.comm.fedavg, SCAFFOLD's memory row "
        "fedsum.memory.scaffold)",
    ),
    _untested(
        "Sec. 2.2, eq. 4; App. F, first paragraph; Lemma B.2",
        "tau_avg <= tau_max, and every client takes part in every window of tau_max + 1 rounds",
        "consequences of the definitions (a mean is at most the maximum; eq. 4), true of every "
        "trace; nothing to measure",
    ),
    _untested(
        "Sec. 3.1, after eq. 7",
        "more frequent participation keeps y^{(t)} closer to the current aggregate gradient",
        "a motivation with no measure defined in the paper; our runs do not record y",
    ),
    _untested(
        "Sec. 3.1, eqs 5-7; Sec. 3.2, eqs 8-9",
        "y^{(t)} is the sum of each seen client's latest mean gradient, and FedSUM's correction "
        "y_i the other clients' latest ones",
        "algebraic identities of Algs 1-2, not results of the experiments; tests/fedsum/"
        "test_algorithms.py checks them on our implementation (eqs 7, 8 and 9)",
    ),
    _untested(
        "Sec. 3.1, last paragraph before Alg. 1",
        "FedSUM-B, with no local updates, is competitive under large batches (Fig. 11)",
        "a restatement of claim (v) for FedSUM-B: rows fedsum.claim_v.cnn and fedsum.claim_v.long",
    ),
    _untested(
        "Sec. 3.3, eqs 10-11",
        "FedSUM-CR's locally rebuilt correction is the mean of the server aggregates since the "
        "client's last round, less its own gradient",
        "an identity of Alg. 3 (exact for a constant eta_l; App. E, eqs 79-80), not a result "
        "of the experiments; tests/fedsum/test_algorithms.py checks it",
    ),
    _untested(
        "Sec. 3.3, after eq. 11",
        "FedSUM's and FedSUM-CR's corrections make no significant theoretical difference, as "
        "their rates show",
        "a statement about the bounds (one rate for both, Thm 4.1); no measurable quantity",
    ),
    _untested("Thm 4.1 (eq. 12); Cor. 4.1 (eq. 13); Thm G.1 (eq. 113)", "the unified rate", _BOUND),
    _untested(
        "App. B-E (Lemmas B.1, C.1-C.6, D.1-D.6, E.1-E.6; Thms C.1, D.1, E.1)",
        "the steps of the proof of Thm 4.1 for each variant",
        _BOUND,
    ),
    _untested(
        "Remark 4.2",
        "the family converges even when inactive periods grow with T (e.g. log T)",
        "an asymptotic statement about the bound; no finite run tests it",
    ),
    _untested(
        "Table 1; Cor. G.1",
        "the rates under Cases 1-4, matching SCALLION (Case 1) and FedAWE (Case 2), not "
        "comparable with CyCP (Case 3), none known for Case 4",
        _SYMBOLIC + " (the tau bounds of Lemmas F.1-F.4 they use have rows fedsum.lemf*)",
    ),
    _untested(
        "Sec. 5, paragraph on Fig. 1(a)",
        "FedSUM's lead comes from the uplink merge together with the correction direction",
        "a causal attribution: neither the paper nor this project runs an ablation that "
        "removes one of the two",
    ),
    _untested(
        "App. H.2, hyper-parameters",
        "eta_g = 1 with eta_0 = 0.01 gave FedAvg's best performance after 500 rounds of the "
        "grid eta_0 in {0.01, 0.005, 0.001, 0.0005}, eta_0 eta_g = 0.01",
        "a tuning outcome adopted as given; the grid (4 settings of 500 CNN rounds per "
        "pattern) is not rerun in this project",
    ),
    _untested(
        "App. H.2, Fig. 4",
        "a smaller Dirichlet alpha gives less i.i.d. client data",
        "a property of the Dirichlet distribution, not a finding; notebook 15 draws the "
        "alpha = 0.1 histogram",
    ),
    _untested(
        "App. H.3, Figs 5-8",
        "per-pattern views of Fig. 1 and its last 160 rounds",
        "views of Fig. 1's runs with no result of their own: rows fedsum.claim_i.* and "
        "fedsum.claim_ii.*",
    ),
    _untested(
        "App. H.5, after Fig. 11's reading",
        "FedSUM-B and FedSUM-CR do well mainly because batch 128 is large for the ~600 "
        "samples of a client",
        "a causal explanation; its testable consequence (batch 8 or 16 reverses the order) is "
        "row fedsum.claim_v.small_batch, not run; the ~600 is 60,000 training images over 100 "
        "clients (notebook 15 prints our sizes)",
    ),
    _untested(
        "App. A, Figs 2-3; Sec. 3.1, benefits of the uplink merge; App. H.8, last sentence",
        "the uplink merge removes the bias of often-active clients, and the correction "
        "steers local steps towards the global minimum",
        "schematic illustrations of the mechanism; their experimental counterparts are claims "
        "(viii) and (i) (rows fedsum.claim_viii.*, fedsum.claim_i.*)",
    ),
    _untested(
        "Sec. 6",
        "the family is efficient and robust across participation scenarios",
        "a summary of claims (i)-(iii) and (viii): rows fedsum.claim_i.*, fedsum.claim_ii.*, "
        "fedsum.claim_iii.*, fedsum.claim_viii.*",
    ),
)
