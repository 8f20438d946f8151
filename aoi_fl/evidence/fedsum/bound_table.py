"""App. F's bounds on tau_max against simulated traces: the cases, the table the delay notebook
prints and the verdict of each (the ``fedsum.bound.*`` rows of claims.toml read them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from aoi_fl.aoi.samplers import make_sampler
from aoi_fl.core.delays import sampler_metrics
from aoi_fl.evidence.fedsum import experiments as fx
from aoi_fl.fedsum import delays, patterns

#: the one-sided level of the confidence limit of mean tau_max against a bound on E[tau_max]
BOUND_LEVEL = 0.95


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
    """A participation pattern of the delay notebook and the App. F bound on its tau_max."""

    row: str  #: the delay notebook's name of the pattern
    label: str  #: the ledger's description of it
    build: Callable[[int], Any]  #: seed -> the pattern's sampler
    bound: float
    lemma: str
    source: str  #: the lemma, briefly (the delay notebook's "source" column; "(ours)": extended)
    formula: str
    sure: bool  #: a bound on tau_max itself, not on E[tau_max]
    #: a case the paper does not state, to which we extend the lemma's proof (a row of ours)
    ours: bool = False
    #: (formula, value) of a sure bound on tau_max that the lemma's proof gives, tighter than
    #: what the lemma states (the ledger tests the statement and reports this one)
    proof: tuple[str, float] | None = None


def bound_cases(n: int, s: int, t: int) -> dict[str, BoundCase]:
    """Every App. F bound the delay notebook checks, in its order: key (``lemf<k>.<pattern>``, the
    ledger's ``fedsum.<key>``) -> :class:`BoundCase`. Lemma F.2's cases are
    :func:`_lemma_f2_cases`. AoI Policy 1 with equal sizes draws what P1 draws, so it has no
    case of its own (the delay notebook shows it beside P1)."""
    f2 = _lemma_f2_cases(n, s, t)
    # the delay notebook's order: Cases 1-2 and P3, the cyclic orders, then the rest of Case 2
    return {
        "lemf1.p1": BoundCase(
            f"P1 / Case 1: uniform S={s}",
            "P1 / Case 1 (uniform S of N)",
            lambda seed: patterns.UniformSubset(n, s, seed),
            delays.uniform_bound(n, s, t),
            "Lemma F.1",
            "F.1",
            "(4N/S) ln(NT)",
            False,
        ),
        **{key: f2.pop(key) for key in ("lemf2.p2", "lemf2.p3", "lemf2.p3_period20")},
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
        **f2,
    }


def _lemma_f2_cases(n: int, s: int, t: int) -> dict[str, BoundCase]:
    """The cases of Lemma F.2 (Case 2 of Sec. 2.1: each client active independently with
    p_i^t >= delta, p_i^t free to vary in time): P2, P3 with the paper's period 10 and with the
    FedAWE code's period 20 alike, App. H.8's biased sampling and the p grid; the AoI paper's
    Policy 2 draws its S clients with replacement, so clients are not independent and the
    lemma's hypothesis fails, but its proof needs only P(i active) >= delta each round: an
    extension of ours (a row of ours). The AoI policies are the AoI paper's own
    (:func:`aoi_fl.aoi.samplers.make_sampler`)."""
    p = s / n
    p3_low = p * (0.7 - 0.3)  # min_t p^t of P3
    biased_low = float(patterns.biased_probabilities(n).min())
    policy2_delta = 1 - (1 - 1 / n) ** s

    def case(row, label, build, delta, formula, short="", ours=False):
        bound = delays.bernoulli_bound(delta, n, t)
        source = "F.2" + short + (" (ours)" if ours else "")
        formula = "(4/delta) max{ln NT, ln 1/delta}, delta = " + formula
        return BoundCase(row, label, build, bound, "Lemma F.2", source, formula, False, ours)

    def bernoulli(q, pattern=""):
        return case(
            f"{pattern}Case 2: Bernoulli p={q:g}",
            f"{pattern}Case 2 (Bernoulli p = {q:g})",
            lambda seed: patterns.Bernoulli(n, q, seed),
            q,
            f"p = {q:g}",
        )

    sine = f"the sine's floor {p3_low:g} <= min_t p_i^t", f", delta={p3_low:g}"
    return {
        "lemf2.p2": bernoulli(p, "P2 / "),
        "lemf2.p3": case(
            "P3: sine, period 10 (paper)",
            "P3 (sine, period 10, as the paper)",
            lambda seed: patterns.SineBernoulli(n, p, seed=seed),
            p3_low,
            *sine,
        ),
        "lemf2.p3_period20": case(
            "P3: sine, period 20 (FedAWE code)",
            "P3 (sine, period 20, as the FedAWE code)",
            lambda seed: patterns.SineBernoulli(n, p, period=20.0, seed=seed),
            p3_low,
            *sine,
        ),
        "lemf2.biased": case(
            "biased (App. H.8)",
            "biased Bernoulli (App. H.8)",
            lambda seed: patterns.BiasedBernoulli(n, seed),
            biased_low,
            f"min p_i = {biased_low:g}",
            f", delta={biased_low:g}",
        ),
        **{"lemf2.p" + f"{q:g}".replace(".", "_"): bernoulli(q) for q in (0.05, 0.1, 0.5, 1.0)},
        "lemf2.aoi_probabilistic": case(
            "AoI Policy 2: probabilistic",
            "AoI Policy 2 (probabilistic)",
            lambda seed: make_sampler("probabilistic", n=n, m=s, seed=seed),
            policy2_delta,
            f"1 - (1 - 1/N)^S = {policy2_delta:.3g}",
            ours=True,
        ),
    }


def bound_table(profile: str = "cpu") -> pd.DataFrame:
    """App. F's bounds against the simulated traces of the delay notebook (N = ``DELAY_CLIENTS``,
    S = ``DELAY_ACTIVE``, the rounds and seeds of :data:`~aoi_fl.evidence.fedsum.experiments.
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
    """How the delay notebook prints the verdict on a bound (a row of :func:`bound_table`); the
    ledger's ``printed_as`` finds it."""
    return (
        f"{key}: {row['verdict']} ({row['lemma']}, {row['bounds']} <= {row['bound']:.2f}; "
        f"tau_max {row['tau_max']:.2f}, {row['tau_max min']:g}-{row['tau_max max']:g} over "
        f"{row['seeds']} seeds)"
    )
