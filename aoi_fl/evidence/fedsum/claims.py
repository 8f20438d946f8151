"""The FedSUM paper's claims and the bounds it prints, against ours (the ledger's ``fedsum`` rows):
the rows and the statements left untested are data (``claims.toml`` beside this module); this
module judges the rows on the cached runs (:mod:`aoi_fl.evidence.fedsum.measures`).

The paper (You & Pu) prints no result numbers: its figures are curves. Its numbers are the
bounds of App. F on tau_max (Lemmas F.1-F.4), recomputed with the library's samplers and
delay tracker as the delay notebook does (cases the paper does not state, to which we extend a
lemma's proof, are rows of ours), and the vectors each method sends per round (Sec. 1.1,
Sec. 3, Algs 1-3), measured in what our implementations send in the in-process trainer and in
Flower's messages (:mod:`aoi_fl.evidence.fedsum.costs`); what each keeps besides the model the paper
states in words, and we count it in our implementations' state. Its results are the
qualitative claims (i)-(viii) of Sec. 5 and App. H (Figs 1, 9-14), with (cr) and the delay
claims (Sec. 1.1, Remarks 2.1 and 4.1, Sec. 4), read from the cached runs of the training
notebooks and judged by the criteria of :data:`aoi_fl.evidence.fedsum.results.ALL_CRITERIA`
(:func:`~aoi_fl.evidence.fedsum.results.all_claims`). Nothing is trained: a row whose runs are not
cached is "inconclusive" and says how many are missing.

Each claim has a row per notebook that shows it: ``.cnn`` (the MNIST and pattern notebooks, the
paper's CNN at the profile's horizon) and ``.long`` (the long-horizon notebook, T = 2000). Each row
states the conditions under which the paper makes its claim (its ``scope``), and the ledger's one
rule makes it "inconclusive at this budget" whatever the criterion gives where its runs miss one: a
``.cnn`` row the paper's horizon T = 2000 (:func:`horizon`), a ``.long`` row also the paper's CNN
and for (v) App. H.5's constant step size 0.1 (:func:`long_conditions`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

from aoi_fl.evidence.fedsum import KEY, measures
from aoi_fl.evidence.fedsum import experiments as fx
from aoi_fl.evidence.fedsum import results as fr
from aoi_fl.evidence.fedsum.bound_table import (
    BOUND_LEVEL,
    bound_cases,
    bound_line,
    bound_table,
    bound_verdict,
)
from aoi_fl.evidence.fedsum.cost_tables import (
    PAPER_COMMUNICATION,
    PAPER_MEMORY,
    communication_line,
    communication_table,
    communication_verdict,
    memory_count,
)
from aoi_fl.evidence.fedsum.measures import (
    CLAIMS,
    cnn_line,
    cnn_verdicts,
    horizon,
    long_conditions,
    long_line,
    long_verdicts,
    p_grid_speed,
)
from aoi_fl.pipeline import claimfiles, rules
from aoi_fl.pipeline.claims import Claim, Untested, capped

# the ledger's rows, and the tables and constants of measures that the FedSUM notebooks, the
# checks and the report read under this module's name
__all__ = [
    "BOUND_LEVEL",
    "CLAIMS",
    "FACTS",
    "PAPER_COMMUNICATION",
    "PAPER_MEMORY",
    "UNTESTED",
    "bound_cases",
    "bound_line",
    "bound_table",
    "bound_verdict",
    "capped",
    "claims",
    "cnn_claims",
    "cnn_line",
    "cnn_verdicts",
    "communication_claims",
    "communication_line",
    "communication_table",
    "communication_verdict",
    "delay_claims",
    "facts",
    "horizon",
    "long_claims",
    "long_conditions",
    "long_line",
    "long_verdicts",
    "memory_claims",
    "memory_count",
    "p_grid_speed",
    "row",
    "rows",
    "tau_claim",
]

#: the fact that names each claim's criterion in a statement of claims.toml
CRITERION_FACTS = {
    claim: "criterion_" + claim.strip("()").replace(".", "_") for claim in fr.ALL_CRITERIA
}
#: what a statement of claims.toml may name: the profile's facts and the claims' criteria
FACTS = (
    "delay_n",
    "delay_s",
    "delay_t",
    "policy2_bound",
    "p_grid",
    *(f"rounds_{figure}" for figure in dict.fromkeys(CLAIMS.values())),
    "long_model",
    "long_rounds",
    *CRITERION_FACTS.values(),
)


@functools.cache
def rows() -> tuple[claimfiles.Row, ...]:
    """The rows of ``claims.toml``."""
    return claimfiles.load(__package__, measures=measures.MEASURES, rules=rules.RULES, facts=FACTS)


def row(key: str) -> claimfiles.Row:
    """The row of claims.toml with ``key``."""
    return claimfiles.find(rows(), key)


def facts(profile: str) -> Mapping[str, Any]:
    """The numbers and texts :data:`FACTS` names for ``profile``."""
    settings = fx.profile_settings(profile)
    n, s, t = fx.DELAY_CLIENTS, fx.DELAY_ACTIVE, fx.DELAY_SETTINGS[profile]["rounds"]
    return {
        "delay_n": n,
        "delay_s": s,
        "delay_t": t,
        "policy2_bound": bound_cases(n, s, t)["lemf2.aoi_probabilistic"].bound,
        "p_grid": "/".join(f"{p:g}" for p in settings["p_grid"]),
        **{f"rounds_{figure}": rounds for figure, rounds in settings["rounds"].items()},
        "long_model": fx.LONG_MODELS[profile]["name"].replace("_", " "),
        "long_rounds": settings["long"]["rounds"],
        **{CRITERION_FACTS[claim]: text for claim, text in fr.ALL_CRITERIA.items()},
    }


#: statements of the paper that state a result but have no row, and why (claims.toml)
UNTESTED: tuple[Untested, ...] = claimfiles.load_untested(__package__, KEY)


def _with_bound(found: claimfiles.Row, runs: measures.Runs) -> claimfiles.Row:
    """``found`` with the App. F bound it tests as its paper value, where it tests one as the
    paper states it: the lemma gives a formula of T, so claims.toml cannot give the number
    (a case of ours has none)."""
    if found.measure.name != "app_f_bound" or found.kind == "ours":
        return found
    bound = float(runs.bounds.loc[found.measure.args["case"], "bound"])
    return dataclasses.replace(found, paper_value=bound)


def _built(
    profile: str,
    results_dir: str = "results",
    data_root: str = "data",
    *,
    measured_by: tuple[str, ...] | None = None,
) -> list[Claim]:
    """The ledger's rows (those whose measure is one of ``measured_by``; None: all) on
    ``profile``'s runs, in the order of claims.toml."""
    runs = measures.Runs(profile, results_dir, data_root)
    filled = facts(profile)
    return [
        claimfiles.build(_with_bound(r, runs), KEY, runs, facts=filled)
        for r in rows()
        if measured_by is None or r.measure.name in measured_by
    ]


def claims(
    profile: str = "cpu", *, results_dir: str = "results", data_root: str = "data"
) -> list[Claim]:
    """Every FedSUM row of the ledger (App. F's bounds, tau against p, the communication and
    memory per method, claims (i)-(viii))."""
    return _built(profile, results_dir, data_root)


def delay_claims(profile: str = "cpu") -> list[Claim]:
    """App. F's bounds on tau_max against the delay notebook's traces (rows ``fedsum.lemf*``)."""
    return _built(profile, measured_by=("app_f_bound",))


def tau_claim(profile: str = "cpu") -> Claim:
    """App. H.4's reading of Fig. 10 on the delay notebook's traces (row
    ``fedsum.claim_iv.tau``)."""
    (found,) = _built(profile, measured_by=("tau_falls",))
    return found


# the rows of what a method sends and keeps read no profile's runs: any profile gives them


def communication_claims(results_dir: str = "results") -> list[Claim]:
    """The vectors each method sends, in its own protocol and in our Flower strategy's messages
    (Flower's read from ``results_dir``'s cache; rows ``fedsum.comm.*``)."""
    return _built("cpu", results_dir, measured_by=("sent_in_process", "sent_by_flower"))


def memory_claims() -> list[Claim]:
    """What each method keeps besides the model (rows ``fedsum.memory.*``)."""
    return _built("cpu", measured_by=("kept",))


def cnn_claims(profile: str = "cpu", results_dir: str = "results") -> list[Claim]:
    """The claims on the paper's CNN, in the MNIST and pattern notebooks (rows
    ``fedsum.claim_*.cnn``)."""
    return _built(profile, results_dir, measured_by=("cnn_claim",))


def long_claims(profile: str = "cpu", results_dir: str = "results") -> list[Claim]:
    """The claims at the paper's horizon, the long-horizon notebook (rows
    ``fedsum.claim_*.long``)."""
    return _built(profile, results_dir, measured_by=("long_claim",))
