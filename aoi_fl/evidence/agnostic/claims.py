"""The agnostic-FedAvg paper's claims against ours (the ledger's ``agnostic`` rows): the rows
and the statements left untested are data (``claims.toml`` beside this module); this module
judges the rows on the cached runs (:mod:`aoi_fl.evidence.agnostic.measures`).

The paper prints no number for its Figs 1-2, only claims: under M = 10 of N = 100 clients drawn
from the prior exp(-i/10) (Sec. 4) agnostic FedAvg ends below weighted FedAvg (eq. 10) on both
tasks, most clearly on the convex linear regression (Fig. 1), and the gap grows with the
participation skew ||p - 1/N||_1 (Fig. 2); Sec. 2 names problem (3) as the one agnostic FedAvg
solves, and Theorem 4's O(1/sqrt(T)) rate is checked on the linear regression over a grid of
horizons T. Every training row is read from the cached runs of the Figs 1-2 notebooks through the
tables of :mod:`aoi_fl.evidence.agnostic.results`, whose verdicts the notebooks print: nothing is
trained here, and missing runs make a row "inconclusive" and say how many. A claim about MNIST runs
states the paper's MNIST model in its scope, Theorem 4's row the theorem's conditions: the
shared out-of-regime rule of :class:`aoi_fl.pipeline.claims.Claim` caps a row whose runs miss
one.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from aoi_fl.core.validation import require_choice
from aoi_fl.evidence.agnostic import KEY, measures
from aoi_fl.evidence.agnostic import experiments as ax
from aoi_fl.evidence.agnostic import results as ar
from aoi_fl.pipeline import claimfiles, rules
from aoi_fl.pipeline.claims import Claim, Untested
from aoi_fl.pipeline.profiles import PROFILES

FIG1_RULES = ax.FIG1_RULES
#: the weighted rules of the paper's own comparison: eq. 10 as printed, and eq. 10's weights
#: (N/|S|) p_i on the updates. The second is our reading of the paper's weighted FedAvg: its Figs
#: 1-2 show weighted FedAvg's loss converging (Fig. 2 plots a converged difference), which eq. 10
#: on the parameters cannot give (it diverges in every seed here), and on the updates the same
#: weights leave the model's scale alone. The rows on the other rules are ours (claims.toml)
PAPER_RULES = ("weighted", "weighted_updates")
#: what a statement of claims.toml may name: the profile's facts and the exact case's
FACTS = (
    "draws",
    "first_horizon",
    "last_horizon",
    "exact_n",
    "exact_m",
    "exact_tau",
    "exact_z",
    "rate_tolerance",
)
#: the noise floor that leaves the AoI rows' skew bound unresolved, for the tests
skew_noise_floor = measures.skew_noise_floor


@functools.cache
def rows() -> tuple[claimfiles.Row, ...]:
    """The rows of ``claims.toml``."""
    return claimfiles.load(__package__, measures=measures.MEASURES, rules=rules.RULES, facts=FACTS)


def row(key: str) -> claimfiles.Row:
    """The row of claims.toml with ``key``."""
    return claimfiles.find(rows(), key)


def facts(profile: str) -> Mapping[str, Any]:
    """The numbers :data:`FACTS` names for ``profile``."""
    schedule = ax.schedule(profile)
    horizons = schedule["rate_horizons"]
    case = ar.EXACT_CASE
    return {
        "draws": schedule["p_draws"],
        "first_horizon": horizons[0],
        "last_horizon": horizons[-1],
        "exact_n": case["n"],
        "exact_m": case["m"],
        "exact_tau": case["tau"],
        "exact_z": ar.EXACT_Z,
        "rate_tolerance": ar.RATE_TOLERANCE,
    }


#: README's bounds for the AoI policies as participation processes (the Fig. 2 notebook), as their
#: rows state them
AOI_NEAR_UNIFORM = row("agnostic.aoi.skew.near_uniform").rule.args["bound"]
AOI_SIZE_CORR = row("agnostic.aoi.skew.mnist.probabilistic").rule.args["bound"]
#: statements of the paper that state a result but have no row, and why (claims.toml)
UNTESTED: tuple[Untested, ...] = claimfiles.load_untested(__package__, KEY)


def _claim1_printed(measure: str, task: str, protocol: str, rule: str) -> str:
    """The expression with which row ``agnostic.fig1.lower.<task>.<protocol>.<rule>`` finds
    its verdict in the Fig. 1 notebook's claims table of ``measure`` (the converged loss: the only
    measure with rows)."""
    require_choice("measure", measure, ("converged",))
    return row(f"agnostic.fig1.lower.{task}.{protocol}.{rule}").printed


def claims(
    profile: str = "cpu", *, results_dir: str = "results", data_root: str = "data"
) -> list[Claim]:
    """Every agnostic-FedAvg row of the ledger, from ``profile``'s cached runs.

    Nothing is written into ``results_dir``: an induced p that is not cached there (an empty
    cache) is estimated in memory (:func:`experiments.p_cache_read_only`), which takes a few
    seconds per estimate with the cpu profile's 100,000 draws."""
    profile = require_choice("profile", profile, PROFILES)
    runs = measures.Runs(profile, results_dir, data_root)
    filled = facts(profile)
    with ax.p_cache_read_only():
        return [claimfiles.build(r, KEY, runs, facts=filled) for r in rows()]
