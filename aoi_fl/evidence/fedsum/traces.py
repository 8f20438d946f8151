"""The delay notebook's participation delays (eqs 2-4) of every pattern, simulated, against App. F.

Every participation pattern of the FedSUM experiments and the AoI paper's four selection
policies run for T rounds with N = ``DELAY_CLIENTS`` clients and S = ``DELAY_ACTIVE`` active per
round (the rounds and seeds of :data:`~aoi_fl.evidence.fedsum.experiments.DELAY_SETTINGS`).
:func:`pattern_table` sets each pattern's tau_max and tau_avg against its bound on E[tau_max]:
Lemmas F.1-F.4 for the patterns of :func:`~aoi_fl.evidence.fedsum.claims.bound_cases` (the ledger's
list), Lemma F.1 for the AoI paper's Policy 1 (which draws what P1 draws, so the ledger has no
row of its own for it), and ours (:func:`~aoi_fl.fedsum.delays.markov_bound`) for the AoI
paper's age-chain policies, which App. F does not treat. The AoI policies are built through
the sampler registry, so that this paper does not import the other.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from aoi_fl.aoi.samplers import make_sampler
from aoi_fl.evidence.fedsum import claims
from aoi_fl.evidence.fedsum import experiments as fx
from aoi_fl.fedsum import delays

#: the delay notebook's rows of the AoI paper's policies that have no App. F case of their own: row
#: -> (registered sampler, source of the bound). Policy 1 with equal sizes draws what P1
#: draws, so its bound is P1's (Lemma F.1) and the ledger counts it once, as P1; the Markov
#: policies (3 and 4) have bounds of ours (:func:`~aoi_fl.fedsum.delays.markov_bound`), sure
#: for the optimal one, which selects a client surely at age N/S - 1. (Policy 2 has a case:
#: ``lemf2.aoi_probabilistic``.)
AOI_ROWS = {
    "AoI Policy 1: random": ("random", "F.1 (as P1)"),
    "AoI Policy 3: Markov optimal": ("markov_optimal", "ours (sure)"),
    "AoI Policy 4: Markov linear": ("markov_nonoptimal", "ours"),
}
#: the columns of :func:`pattern_table`, in the order the delay notebook prints them
COLUMNS = (
    "mean |S_t|",
    "tau_max",
    "tau_max min",
    "tau_max max",
    "tau_avg",
    "tau_avg min",
    "tau_avg max",
    "bound on E[tau_max]",
    "source",
    "bound / tau_max",
    "sqrt(1 + tau_avg)",
)


def sizes(profile: str) -> tuple[int, int, int, tuple[int, ...]]:
    """(N, S, T, seeds) of the delay notebook's traces in ``profile``."""
    cfg = fx.DELAY_SETTINGS[profile]
    return fx.DELAY_CLIENTS, fx.DELAY_ACTIVE, cfg["rounds"], tuple(cfg["seeds"])


def describe(profile: str) -> str:
    """The sizes of ``profile``'s traces, as the delay notebook's setup prints them."""
    n, s, t, seeds = sizes(profile)
    return f"N = {n}, S = {s}, T = {t}, seeds: {len(seeds)}"


def rows(profile: str) -> dict[str, str]:
    """The rows of :func:`pattern_table`, by key: the ledger's for the App. F cases
    (:func:`~aoi_fl.evidence.fedsum.claims.bound_cases`: ``lemf1.p1``, ...), the registered sampler
    for the other AoI policies (``random``, ``markov_optimal``, ``markov_nonoptimal``)."""
    n, s, t, _ = sizes(profile)
    cases = {key: case.row for key, case in claims.bound_cases(n, s, t).items()}
    return {**cases, **{name: row for row, (name, _) in AOI_ROWS.items()}}


def _aoi_bound(name: str, sampler: Any, n: int, s: int, t: int) -> float:
    """The bound on E[tau_max] of the policy ``name`` of :data:`AOI_ROWS`: Lemma F.1's for
    Policy 1 (``random``: it is P1), ours for an age-chain policy (from its selection
    probabilities by age, ``p``)."""
    if name == "random":
        return delays.uniform_bound(n, s, t)
    return delays.markov_bound(sampler.p, n, t)


def pattern_table(profile: str) -> pd.DataFrame:
    """Every pattern's delays over ``profile``'s seeds (:data:`COLUMNS`): mean |S_t|, tau_max
    and tau_avg (mean, min and max over the seeds; :func:`~aoi_fl.fedsum.delays.delay_table`),
    its bound on E[tau_max] and the bound's source, the bound over the mean tau_max (NaN where
    tau_max is 0) and sqrt(1 + tau_avg), through which tau_avg enters Theorem 4.1's noise term.
    Rows: the App. F cases in the ledger's order, then the AoI paper's four policies in its
    numbering (Policy 2 is a case, the others :data:`AOI_ROWS`)."""
    n, s, t, seeds = sizes(profile)
    cases = claims.bound_cases(n, s, t)
    builders = {c.row: c.build for c in cases.values()}
    bounds = {c.row: (c.bound, c.source) for c in cases.values()}
    for row, (name, source) in AOI_ROWS.items():
        builders[row] = lambda seed, name=name: make_sampler(name, n=n, m=s, seed=seed)
        bounds[row] = (_aoi_bound(name, builders[row](0), n, s, t), source)
    # a stable sort: the other rows keep their order, the AoI policies go last by number
    order = sorted(builders, key=lambda row: row if row.startswith("AoI Policy") else "")
    table = delays.delay_table({row: builders[row] for row in order}, t, seeds)
    table["bound on E[tau_max]"] = [bounds[k][0] for k in table.index]
    table["source"] = [bounds[k][1] for k in table.index]
    table["bound / tau_max"] = table["bound on E[tau_max]"] / table["tau_max"].where(
        table["tau_max"] > 0
    )
    table["sqrt(1 + tau_avg)"] = np.sqrt(1 + table["tau_avg"])
    return table[list(COLUMNS)]


def cyclic_matches(table: pd.DataFrame, profile: str) -> bool:
    """Whether the simulated deterministic cyclic order of ``table`` has the closed form's
    tau_max and tau_avg (:func:`~aoi_fl.fedsum.delays.deterministic_cyclic_delays`)."""
    n, s, t, _ = sizes(profile)
    closed = delays.deterministic_cyclic_delays(n, s, t)
    row = table.loc[rows(profile)["lemf4.cyclic"]]
    return bool(row["tau_max"] == closed.max() and np.isclose(row["tau_avg"], closed.mean()))


def looseness(table: pd.DataFrame) -> pd.Series:
    """How far the paper's bounds (not ours, nor a lemma's proof extended by us) lie above the
    mean simulated tau_max: the bound over the mean, per pattern with a delay."""
    paper = table[~table["source"].str.contains("ours")]
    return paper["bound / tau_max"].dropna()


def p1_over_cyclic(table: pd.DataFrame, profile: str) -> float:
    """tau_max of P1 over that of the deterministic cyclic order at the same S/N: what
    independent random participation pays against a cyclic order."""
    name = rows(profile)
    return float(
        table.loc[name["lemf1.p1"], "tau_max"] / table.loc[name["lemf4.cyclic"], "tau_max"]
    )
