"""The K-Vib paper's claims and printed numbers against ours (the ledger's ``kvib`` rows): the
rows and the statements left untested are data (``claims.toml`` beside this module); this module
builds them with K-Vib's measures (:mod:`~aoi_fl.evidence.kvib.example_measures`,
:mod:`~aoi_fl.evidence.kvib.measures`) and rules (:mod:`~aoi_fl.evidence.kvib.verdicts`).

Sec. 3 and Fig. 1 (Examples 3.1 and 3.2) are recomputed from the library's closed
forms (eqs 2-5): Example 3.1's claims at every LogNormal scale of the vectors' norms in
:data:`~aoi_fl.evidence.kvib.experiments.EXAMPLE_3_1_SCALES` (the paper gives no law), decided only
where the scale does not change the verdict (:func:`scale_verdict`), and Example 3.2's numbers with
its "||.||^2" read one way (:data:`EX32_NORM_POWER`); the synthetic experiments (Figs 2, 3(b), 3(c)
and App. F's Figs 6-7) and the MNIST substitute for Fig. 4 are read
from the cached runs of the profile's grids: nothing is trained here, and missing runs make a row
"inconclusive" and say how many. FEMNIST (Fig. 4 itself), AGNews, CC-News and their language
models (Fig. 5) cannot be fetched here, so their claims are "not computable here".

A comparison between samplers is decided on paired seeds (the same seed starts every sampler from
the same model): :func:`lower_verdict` for a claim without a size, and
:func:`aoi_fl.pipeline.paired.verdict` for Fig. 4's claimed 2x. A run in which FedAvg diverged
is left out of every row and the row says so: its numbers measure the explosion, not the sampler.
A "faster" claim is judged on the speed measure of :data:`SPEED_MEASURES`, fixed before the curves
were looked at; every Fig. 4 claim on the MNIST substitute is capped by the conditions of the
paper's it lacks (:func:`substitute_unmet`: not FEMNIST, not its 462-2,231 clients), in every
profile. :func:`verdict_lines` prints the same verdicts for the notebooks, and :data:`UNTESTED`
lists the statements of the paper that have no row, with the reason.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from aoi_fl.evidence.kvib import KEY, measures
from aoi_fl.evidence.kvib import experiments as kx

# the names the notebooks, figures, checks and tests read here: one module to import for the
# ledger's K-Vib rows, whatever module defines them
from aoi_fl.evidence.kvib.example_measures import (  # noqa: F401
    EX32_G,
    EX32_NORM_POWER,
    PAPER_EX32_K3_D,
    PAPER_EX32_K3_ERROR,
    PAPER_EX32_K3_ISP_ERROR,
    PAPER_EX32_P_ISP,
    PAPER_EX32_Q_RSP,
    PAPER_EX32_SIZE_PROB,
    PAPER_EX32_SQ_NORMS,
    example_3_1_curve,
    example_3_1_mse,
)
from aoi_fl.evidence.kvib.measures import (  # noqa: F401
    BASELINES,
    GAMMA_STABLE_RATIO,
    NORMALISED,
    PAPER_K_RATE,
    SPEED_MEASURES,
)
from aoi_fl.evidence.kvib.verdicts import (  # noqa: F401
    NOT_BETTER_MARGIN,
    PAPER_FEMNIST_CLIENTS,
    PAPER_FEMNIST_RECIPE,
    RULES,
    TYPICAL_SHARE,
    k_rate_verdict,
    k_trend_verdict,
    lower_verdict,
    not_better_verdict,
    printed_verdict,
    scale_ranges,
    scale_verdict,
    stable_verdict,
    substitute_unmet,
    typical_verdict,
)
from aoi_fl.pipeline import claimfiles, runs  # noqa: F401 (tests replace its cached_results)
from aoi_fl.pipeline.claims import Claim, Untested, combine_verdicts  # noqa: F401

#: what a statement of claims.toml may name: the profile's facts and the readings' constants
FACTS = (
    "k",
    "k_grid",
    "if_k_grid",
    "theta",
    "gamma_ratio",
    "typical_share",
    "not_better_margin",
    "substitute",
    "target",
    "claimed",
    "speed_fig2",
    "speed_fig4",
    "speed_fig4_early",
    "speed_fig4_whole",
)
#: the rows of each figure, by key prefix, in the ledger's order
FIGURES = {
    "figure1": ("kvib.fig1a.", "kvib.ex3_2."),
    "figure2": ("kvib.fig2.", "kvib.sec6.", "kvib.fig4.isp_early"),
    "figure3": ("kvib.fig3b.", "kvib.fig6.", "kvib.fig7.", "kvib.fig3c."),
    "figure4": (
        "kvib.fig4.speedup.",
        "kvib.fig4.substitute.",
        *(f"kvib.fig4.{name}" for name in ("vrb_mabs", "avare", "v3", "gap_narrows")),
    ),
    "figure5": ("kvib.fig5.",),
}
#: the private names the tests read
_diverged_text = measures.diverged_text


def _runs(profile: str, results_dir: str) -> measures.Runs:
    """``profile``'s runs, a substitute's row capped by this module's :func:`substitute_unmet`
    (which a test may replace)."""
    return measures.Runs(profile, results_dir, unmet=substitute_unmet)


@functools.cache
def rows() -> tuple[claimfiles.Row, ...]:
    """The rows of ``claims.toml``."""
    return claimfiles.load(__package__, measures=measures.MEASURES, rules=RULES, facts=FACTS)


def row(key: str) -> claimfiles.Row:
    """The row of claims.toml with ``key``."""
    return claimfiles.find(rows(), key)


#: the Fig. 1 notebook's reading of Sec. 3: "comparable" is an MSE ratio RSP / ISP below 1.5, "ISP
#: outperforms" one above 2 (the paper gives no numbers for Fig. 1(a)), as their rows state them
COMPARABLE_RATIO = row("kvib.fig1a.k10.comparable").rule.args["threshold"]
OUTPERFORMS_RATIO = row("kvib.fig1a.k30.isp_better").rule.args["threshold"]
#: statements of the paper that state a result but have no row, and why (claims.toml)
UNTESTED: tuple[Untested, ...] = claimfiles.load_untested(__package__, KEY)


class _IfCached:
    """A fact that states the text of its format spec where ``grid`` has every run, nothing
    where runs are missing: a K grid's row without runs states the paper's claim alone, with no
    reading of runs it does not have. The grid is read when a statement is filled."""

    def __init__(self, grid: Callable[[], measures.Grid]) -> None:
        self.grid = grid

    def __format__(self, text: str) -> str:
        return "" if self.grid().missing else text


def facts(profile: str, runs_: measures.Runs | None = None) -> Mapping[str, Any]:
    """The values :data:`FACTS` names for ``profile``, whose runs are ``runs_`` (by default in
    "results")."""
    runs_ = runs_ or measures.Runs(profile, "results")
    s, m = kx.synthetic_settings(profile), kx.mnist_settings(profile)
    return {
        "k": s["k"],
        "k_grid": ", ".join(map(str, s["k_grid"])),
        "if_k_grid": _IfCached(lambda: runs_.k_grid),
        "theta": kx.SENSITIVITY_THETA,
        "gamma_ratio": GAMMA_STABLE_RATIO,
        "typical_share": TYPICAL_SHARE,
        "not_better_margin": NOT_BETTER_MARGIN,
        "substitute": (
            f"(substitute: MNIST, {m['model']['name']}, K = {kx.MNIST_K} of {kx.MNIST_CLIENTS})"
        ),
        "target": m["target"],
        # Fig. 4's smaller factor (FEMNIST v2): the substitute is tested against it
        "claimed": kx.PAPER_FEMNIST_SPEEDUP["v2"],
        **{f"speed_{name.replace('.', '_')}": text for name, text in SPEED_MEASURES.items()},
    }


def _build(figures: tuple[str, ...], runs_: measures.Runs, profile: str | None) -> list[Claim]:
    """The rows of ``figures`` in the file's order, measured on ``runs_``, their statements
    filled with ``profile``'s facts (none: no statement needs them)."""
    prefixes = tuple(p for name in figures for p in FIGURES[name])
    filled = facts(profile, runs_) if profile else None
    return [
        claimfiles.build(r, KEY, runs_, facts=filled) for r in rows() if r.key.startswith(prefixes)
    ]


def figure1_claims(profile: str = "cpu") -> list[Claim]:
    """Fig. 1(a) (Example 3.1, with ``profile``'s settings: those the Fig. 1 notebook uses), decided
    over the scales of :data:`~aoi_fl.evidence.kvib.experiments.EXAMPLE_3_1_SCALES` (ours: the value
    at the Fig. 1 notebook's scale), and Fig. 1(b) (Example 3.2). Sec. 3's K = 1 remark is an
    identity, listed in :data:`UNTESTED`."""
    runs_ = measures.Runs(profile, "results")
    return [c for c in _build(("figure1",), runs_, None) if c.key.startswith("kvib.fig1a.")] + (
        example_3_2_claims()
    )


def example_3_2_claims(g: np.ndarray = EX32_G) -> list[Claim]:
    """Example 3.2 (Fig. 1(b)) enumerated exactly: every number of Sec. 3's text, against ours
    from the three vectors ``g`` (rows, in R^2; the paper's by default), its "||.||^2" read as
    :data:`EX32_NORM_POWER` says."""
    g = np.asarray(g, dtype=float)
    if g.shape != (3, 2) or not np.isfinite(g).all():
        raise ValueError(
            f"g must be Example 3.2's three vectors in R^2 (a finite 3 x 2 array), got shape "
            f"{g.shape}"
        )
    runs_ = measures.Runs("cpu", "results", g=g)
    return [c for c in _build(("figure1",), runs_, None) if c.key.startswith("kvib.ex3_2.")]


def figure2_claims(profile: str, results_dir: str) -> list[Claim]:
    """Fig. 2 (K-Vib's regret, variance and test loss below the baselines'), Sec. 6's
    first-round feedback and Sec. 6.2's remark that independent sampling alone gives better
    early estimates (Lemma 2.1)."""
    return _build(("figure2",), _runs(profile, results_dir), profile)


def figure3_claims(profile: str, results_dir: str) -> list[Claim]:
    """Fig. 3(b) (K-Vib's regret falls with K, at least as fast as Theorem 5.2's K^(-4/3)), App.
    F's Figs 6 (the baselines' regret rises) and 7 (K-Vib's variance falls) and Fig. 3(c) (gamma
    barely matters), decided on per-seed intervals: one seed per grid point gives "inconclusive
    at this budget"."""
    return _build(("figure3",), _runs(profile, results_dir), profile)


def figure4_claims(profile: str, results_dir: str) -> list[Claim]:
    """Fig. 4's FEMNIST numbers and claims, and their test on the MNIST substitute, each capped
    by :func:`substitute_unmet`."""
    return _build(("figure4",), _runs(profile, results_dir), profile)


def figure5_claims() -> list[Claim]:
    """Fig. 5 (Sec. 6.3, AGNews with DistilBERT and CC-News with Pythia-70M): not computable
    here, one row per claim."""
    return _build(("figure5",), measures.Runs("cpu", "results"), None)


def _builders(profile: str, results_dir: str) -> dict[str, Callable[[], list[Claim]]]:
    """Each notebook's rows, by notebook (nothing is built until called)."""
    runs_ = _runs(profile, results_dir)
    figures = {
        "11_isp_vs_rsp": ("figure1",),
        "12_kvib_synthetic": ("figure2", "figure3"),
        "13_kvib_mnist": ("figure4", "figure5"),
    }
    return {nb: functools.partial(_build, f, runs_, profile) for nb, f in figures.items()}


def claims(
    profile: str = "cpu", *, results_dir: str = "results", data_root: str = "data"
) -> list[Claim]:
    """Every K-Vib row of the ledger (``data_root`` is unused: nothing is loaded or trained)."""
    del data_root
    return [c for build in _builders(profile, results_dir).values() for c in build()]


def verdict_lines(
    notebook: str, profile: str = "cpu", *, results_dir: str = "results", data_root: str = "data"
) -> list[str]:
    """The lines ``notebook`` prints for its rows whose verdict is a comparison: "key: claim
    (ours, spread) -> verdict", which the rows' ``printed_as`` find. Only that notebook's rows
    are built (from ``profile``'s cached runs in ``results_dir``)."""
    del data_root
    return [
        f"{c.key}: {c.claim} (ours {c.ours if c.ours is None else f'{c.ours:.4g}'}; {c.spread}) "
        f"-> {c.verdict}"
        for c in _builders(profile, results_dir)[notebook]()
        if c.printed_as
    ]
