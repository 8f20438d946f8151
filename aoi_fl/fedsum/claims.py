"""The FedSUM paper's claims and the bounds it prints, against ours (the ledger's ``fedsum`` rows).

The paper (You & Pu) prints no result numbers: its figures are curves. Its numbers are the
bounds of App. F on tau_max (Lemmas F.1-F.4), recomputed here with the library's samplers and
delay tracker as notebook 14 does; its results are the qualitative claims (i)-(viii) of Sec. 5
and App. H (Figs 1, 9-14), read from the cached runs of notebooks 15-17 and judged by the
criteria fixed in :data:`aoi_fl.fedsum.results.CLAIM_CRITERIA` (:func:`~aoi_fl.fedsum.results.
long_claims`, the function notebook 17 prints): each part of a claim (a comparison on one
metric) by the paired 95% t interval over seeds and :func:`~aoi_fl.pipeline.claims.
sign_verdict`, a claim "held" when every part is, "not held" when some part is not, else
"inconclusive at this budget". Nothing is trained: a row whose runs are not cached is
"inconclusive" and says how many are missing. See :mod:`aoi_fl.pipeline.claims`.

Each claim has a row per notebook that shows it: ``.cnn`` (notebooks 15-16, the paper's CNN at
the profile's horizon; short of the paper's T = 2000 the verdict is "inconclusive at this
budget" whatever the criterion gives, since a claim about 2000 rounds is not decided by the
first 20-40) and ``.long`` (notebook 17, T = 2000; in ``cpu`` on logistic regression, a
substitute model, with the notebook's own verdict).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from aoi_fl.aoi import samplers
from aoi_fl.fedsum import delays, patterns
from aoi_fl.fedsum import experiments as fx
from aoi_fl.fedsum import results as fr
from aoi_fl.fedsum.experiments import LAST, PAPER_ROUNDS
from aoi_fl.pipeline.claims import VERDICT_GROUP, Claim, Untested

#: the one-sided level of the confidence limit of mean tau_max against a bound on E[tau_max]
BOUND_LEVEL = 0.95
#: the claims of Sec. 5 / App. H that the cached panels test: id -> (the panel of notebooks
#: 15-16 that tests it, its figure, the claim in brief); keys ``fedsum.claim_<id>.*``
CLAIMS = {
    "(i)": ("main", "Fig. 1(a)", "FedSUM and FedSUM-CR converge faster than the six baselines"),
    "(ii)": ("main", "Fig. 1(b)", "per unit of communication FedSUM-CR is the most effective"),
    "(iii)": ("cases", "Fig. 9", "FedSUM is robust across participation Cases 1-4"),
    "(iv)": ("p_grid", "Fig. 10", "a larger Bernoulli p (smaller tau) gives better FedSUM"),
    "(v)": (
        "family",
        "Fig. 11",
        "FedSUM-B and FedSUM-CR are at least as good as FedSUM (the paper: constant "
        "eta_l = 0.1, batch 128)",
    ),
    "(viii)": ("cases", "Fig. 14", "biased sampling does not hurt FedSUM"),
}
_NOTEBOOK = {"main": "15_fedsum_mnist"}
_CNN_NOTEBOOK, _LONG_NOTEBOOK = "16_fedsum_patterns", "17_fedsum_long_horizon"
_DELAY_NOTEBOOK = "14_participation_delays"


def _row(key: str, *fields) -> Claim:
    return Claim(key, "fedsum", *fields)


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
    source: str  #: the lemma, briefly (notebook 14's "source" column)
    formula: str
    sure: bool  #: a bound on tau_max itself, not on E[tau_max]


def bound_cases(n: int, s: int, t: int) -> dict[str, BoundCase]:
    """Every App. F bound notebook 14 checks, in its order: key (``lemf<k>.<pattern>``, the
    ledger's ``fedsum.<key>``) -> :class:`BoundCase`. Lemma F.2's proof needs only
    independent rounds with p_i^t >= delta, so P3, biased sampling and AoI Policy 2 are
    covered with delta their least probability."""
    p = s / n
    p3_low = p * (0.7 - 0.3)  # min_t p^t of P3
    biased_low = float(patterns.biased_probabilities(n).min())
    policy2_delta = 1 - (1 - 1 / n) ** s
    f2 = "(4/delta) max{ln NT, ln 1/delta}, delta = "

    def bernoulli(row, label, build, delta, formula, short=""):
        bound = delays.bernoulli_bound(delta, n, t)
        return BoundCase(row, label, build, bound, "Lemma F.2", "F.2" + short, f2 + formula, False)

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
            f"min p_i^t = {p3_low:g}",
            f", delta={p3_low:g}",
        ),
        "lemf2.p3_period20": bernoulli(
            "P3: sine, period 20 (FedAWE code)",
            "P3 (sine, period 20, as the FedAWE code)",
            lambda seed: patterns.SineBernoulli(n, p, period=20.0, seed=seed),
            p3_low,
            f"min p_i^t = {p3_low:g}",
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
            "2 floor(N/S) (its proof; the lemma states E[tau_max] <= 4N/S)",
            True,
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
    out["lemf1.aoi_random"] = BoundCase(
        "AoI Policy 1: random",
        "AoI Policy 1 (random, equal sizes)",
        lambda seed: samplers.make_sampler("random", n=n, m=s, seed=seed),
        delays.uniform_bound(n, s, t),
        *f1,
    )
    out["lemf2.aoi_probabilistic"] = bernoulli(
        "AoI Policy 2: probabilistic",
        "AoI Policy 2 (probabilistic)",
        lambda seed: samplers.make_sampler("probabilistic", n=n, m=s, seed=seed),
        policy2_delta,
        f"1 - (1 - 1/N)^S = {policy2_delta:.3g}",
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
        tau = np.array([delays.sampler_metrics(c.build(seed), t).tau_max for seed in seeds])
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
    seeds, verdict :func:`bound_verdict`, as notebook 14 prints it (:func:`bound_line`)."""
    n, s, t = fx.DELAY_CLIENTS, fx.DELAY_ACTIVE, fx.DELAY_SETTINGS[profile]["rounds"]
    cases = bound_cases(n, s, t)
    out = []
    for key, row in bound_table(profile).iterrows():
        c = cases[key]
        out.append(
            _row(
                f"fedsum.{key}",
                f"App. F, {c.lemma}",
                f"{row['bounds']} <= {c.formula} for the {c.label}; N = {n}, S = {s}, T = {t}",
                float(row["bound"]),
                float(row["tau_max"]),
                f"tau_max over {row['seeds']} seeds: {row['tau_max min']:g}-"
                f"{row['tau_max max']:g}"
                + (
                    f"; bound / mean {row['bound'] / row['tau_max']:.3g}"
                    if row["tau_max"] > 0
                    else ""
                ),
                row["verdict"],
                _DELAY_NOTEBOOK,
                rf"^{re.escape(key)}: {VERDICT_GROUP} \(",
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
    :func:`~aoi_fl.fedsum.results.long_claims` table."""
    held, parts = map(int, row["parts held"].split("/"))
    share = held / parts if parts else None
    return share, f"{row['parts held']} parts held: {_compact(row['numbers'])}"


def _missing(missing: int, planned: int) -> str:
    return f"{missing} of {planned} runs not cached"


def budget_verdict(criterion: str, rounds: int) -> str:
    """The verdict on a claim about the paper's T = :data:`~aoi_fl.fedsum.experiments.
    PAPER_ROUNDS` from a run of ``rounds``: its criterion's verdict at that horizon, else
    "inconclusive at this budget" (the first 20-40 rounds do not decide a claim about 2000)."""
    return criterion if rounds >= PAPER_ROUNDS else "inconclusive at this budget"


def cnn_verdicts(summaries: Sequence[fx.RunSummary], figure: str, profile: str) -> pd.DataFrame:
    """The claims of :data:`CLAIMS` that the CNN panel ``figure`` of notebooks 15-16 tests,
    from its ``summaries``: :func:`~aoi_fl.fedsum.results.long_claims` (criterion, numbers,
    parts held, its verdict as "by the criterion") over the last ``LAST["cnn"]`` evaluations,
    the panel's rounds and the verdict, :func:`budget_verdict`."""
    rounds = fx.profile_settings(profile)["rounds"][figure]
    table = fr.long_claims(summaries, last=LAST["cnn"][profile])
    table = table.loc[[c for c, (panel, _, _) in CLAIMS.items() if panel == figure]]
    table = table.rename(columns={"verdict": "by the criterion"})
    table["rounds"] = rounds
    table["verdict"] = [budget_verdict(v, rounds) for v in table["by the criterion"]]
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
    of :data:`~aoi_fl.fedsum.results.CLAIM_CRITERIA`, one panel per claim as the notebooks
    run them (:func:`cnn_verdicts`); short of the paper's T = 2000 "inconclusive at this
    budget"."""
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
            verdict = row["verdict"]
        out.append(
            _row(
                f"{_key(claim)}.cnn",
                f"{ref}, claim {claim}",
                f"{text} (paper's MNIST CNN, T = {PAPER_ROUNDS}; ours {rounds} rounds; "
                f"criterion: {fr.CLAIM_CRITERIA[claim]})",
                None,
                ours,
                spread,
                verdict,
                _NOTEBOOK.get(figure, _CNN_NOTEBOOK),
                rf"^{re.escape(claim)} {VERDICT_GROUP} \(\d+ of the paper's \d+ rounds; ",
            )
        )
    return out


def long_claims(profile: str = "cpu", results_dir: str = "results") -> list[Claim]:
    """Claims (i)-(v) and (viii) at the paper's horizon T = 2000 (notebook 17's panel:
    ``long``, ``long_cases``, ``long_p_grid``), with the verdict notebook 17 prints
    (:func:`aoi_fl.fedsum.results.long_claims`)."""
    found, missing, planned = _panel(fx.LONG_FIGURES, profile, results_dir)
    table = None
    if found and not missing:
        table = fr.long_claims(found, last=LAST["long"][profile])
    model = fx.LONG_MODELS[profile]["name"].replace("_", " ")
    s = fx.profile_settings(profile)["long"]
    out = []
    for claim, (_, ref, text) in CLAIMS.items():
        ours, spread, verdict = None, _missing(missing, planned), "inconclusive"
        if table is not None:
            row = table.loc[claim]
            ours, numbers = _judged(row)
            spread, verdict = f"{s['seeds']} paired seeds; " + numbers, row["verdict"]
        out.append(
            _row(
                f"{_key(claim)}.long",
                f"{ref}, claim {claim}",
                f"{text} (ours: MNIST, {model}, T = {s['rounds']}; criterion: "
                f"{fr.CLAIM_CRITERIA[claim]})",
                None,
                ours,
                spread,
                verdict,
                _LONG_NOTEBOOK,
                rf"^{re.escape(claim)} {VERDICT_GROUP} \(\d+/\d+ parts held\)\s*$",
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# What cannot be run here


def unrun_claims(data_root: str = "data") -> list[Claim]:
    """Fig. 1's SVHN and CIFAR-10 columns, claims (vi) (ResNet-18, Fig. 12) and (vii) (BERT
    on SST-2, Fig. 13), and App. H.5's small-batch remark: data this machine cannot get, or
    experiments this project does not have (the small-batch remark is computable in principle,
    on MNIST, but not run: "inconclusive at this budget")."""
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
            "Fig. 1, claims (i)-(ii)",
            "claims (i) and (ii) on the SVHN and CIFAR-10 CNNs (Fig. 1's other two columns)",
            None,
            None,
            fig1_spread,
            fig1_verdict,
            _NOTEBOOK["main"],
        ),
        _row(
            "fedsum.claim_vi.resnet18",
            "Fig. 12, claim (vi)",
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
            "Fig. 13, claim (vii)",
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
            "App. H.5, claim (v)",
            "with batch 8 or 16 FedSUM-B degrades and FedSUM leads (text only, no figure)",
            None,
            None,
            "not run",
            "inconclusive at this budget",
            _CNN_NOTEBOOK,
        ),
    ]


def claims(
    profile: str = "cpu", *, results_dir: str = "results", data_root: str = "data"
) -> list[Claim]:
    """Every FedSUM row of the ledger (App. F's bounds, claims (i)-(viii))."""
    return (
        delay_claims(profile)
        + cnn_claims(profile, results_dir)
        + long_claims(profile, results_dir)
        + unrun_claims(data_root)
    )


#: statements of the paper that state a result but have no row, and why (issue 27)
UNTESTED: tuple[Untested, ...] = ()
