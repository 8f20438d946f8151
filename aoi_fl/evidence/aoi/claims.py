"""The AoI paper's claims and printed numbers against ours (the ledger's ``aoi`` rows): the rows
and the statements left untested are data (``claims.toml`` beside this module); this module
judges the rows on what :mod:`aoi_fl.evidence.aoi.measures` reads.

Theory (Theorems 1 and 3-5, Sec. III-C, Figs 2-4) is recomputed from the library with the
paper's n = 100, m = 15, m' = 10 and the seed-0 Zipf(2) sizes of the Figs 2-4 notebooks; training
(Figs 5-7, Table II) is read from the cached runs of the profile's panels (nothing is trained
here: missing runs make the rows "inconclusive" and say so). See :mod:`aoi_fl.pipeline.claims`
for the verdict rules.

The paper's dataset sizes are one unknown Zipf(2) draw: a claim about the policies whose Sigma
or Var[X] depends on the sizes (Policies 1-2) is judged by the share of our draws in which it
holds (:func:`draws_verdict`), as its printed Sigma values are by the spread of ours.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence

import numpy as np

from aoi_fl.aoi import sigma as sigma  # the tests replace its closed forms
from aoi_fl.evidence.aoi import KEY, measures
from aoi_fl.evidence.aoi.experiments import SPLITS
from aoi_fl.evidence.aoi.paper import PAPER_SIGMA as PAPER_SIGMA
from aoi_fl.evidence.aoi.paper import WINDOWS as WINDOWS
from aoi_fl.pipeline import claimfiles, rules
from aoi_fl.pipeline.claims import Claim, Condition, Untested, prediction_verdict
from aoi_fl.pipeline.profiles import traits

#: the constants and verdicts the tests and notebooks read here (:mod:`measures` says why each)
N, M, M_PRIME, ZIPF_A = measures.N, measures.M, measures.M_PRIME, measures.ZIPF_A
SIGMA_RTOL, SIGNIFICANT_RATIO, ZIPF_SEEDS = (
    measures.SIGMA_RTOL, measures.SIGNIFICANT_RATIO, measures.ZIPF_SEEDS,
)  # fmt: skip
TRACE_SEEDS, TRACE_ROUNDS, TRACE_RTOL = (
    measures.TRACE_SEEDS, measures.TRACE_ROUNDS, measures.TRACE_RTOL,
)  # fmt: skip
INTERVAL_RTOL, FIG3_ABOUT, FIG3_TOL = measures.INTERVAL_RTOL, measures.FIG3_ABOUT, measures.FIG3_TOL
FEW_ROUNDS, SETTLE_BLOCK, SETTLE_TRACES = (
    measures.FEW_ROUNDS, measures.SETTLE_BLOCK, measures.SETTLE_TRACES,
)  # fmt: skip
FINAL_EVALS, OPTIMISER_STARTS = measures.FINAL_EVALS, measures.OPTIMISER_STARTS
MARKOV, OTHERS = measures.MARKOV, measures.OTHERS
below, peak_verdict, window_order = measures.below, measures.peak_verdict, measures.window_order
settle_round, most_verdict = measures.settle_round, measures.most_verdict
final_accuracy_pairs = measures.final_accuracy_pairs
#: the Zipf(2) sizes of a seed (seed 0: the notebooks'), as the tests draw them
_sizes = measures.sizes
#: the rows of each part of the paper, by their measures (the tests build a part alone)
SIGMA = (
    "sigma_draws", "sigma_exact", "markov_below", "optimal_lowest", "random_highest",
    "fig3_peak", "fig3_order",
)  # fmt: skip
STABILISATION = ("stabilisation",)
TRACES = ("windows", "window_decrease", "theorem_sigma", "random_interval")


def share_verdict(fraction: float) -> str:
    """The verdict on a claim about the paper's one, unknown, Zipf size draw from the ``fraction``
    of our draws in which it holds: "held" in at least 95% of them, "not held" in at most 5%
    (the 5-95% range by which the Fig. 2 values are judged), otherwise the paper's draw decides
    it and we cannot tell ("inconclusive")."""
    return "held" if fraction >= 0.95 else "not held" if fraction <= 0.05 else "inconclusive"


def draws_verdict(holds: Sequence[bool]) -> tuple[float, str]:
    """(share, verdict) of a claim from whether it holds in each of our size draws
    (:func:`share_verdict`)."""
    held = float(np.mean(holds))
    return held, share_verdict(held)


def share(reading: rules.Reading) -> rules.Judged:
    """A claim about the paper's size draw, on the share of ours where it holds
    (:func:`share_verdict`)."""
    return reading.ours, reading.spread, share_verdict(reading.ours)


def within_draws(reading: rules.Reading, paper_value: float) -> rules.Judged:
    """A printed value that depends on the paper's size draw: "held" inside the 5-95% range
    of ours."""
    return rules.covers(reading, paper_value)


def near_one(reading: rules.Reading, rtol: float) -> rules.Judged:
    """A ratio of an estimate to the closed form it estimates: "held" within ``rtol`` of 1."""
    held = abs(reading.ours - 1) <= rtol
    return reading.ours, reading.spread, "held" if held else "not held"


def per_seed(reading: measures.Seeds, paper_value: float) -> rules.Judged:
    """The paper's one run among our per-seed values (:func:`rules.prediction`), the reading's
    note kept; without values the reading's own verdict."""
    if reading.verdict is not None:
        return rules.criterion(reading)
    ours, spread, verdict = rules.prediction(reading.values, paper_value)
    return ours, spread + reading.spread, verdict


def rho_prediction(reading: measures.Seeds, paper_value: float) -> rules.Judged:
    """The paper's one run against the prediction interval of our mean over seeds, from the
    mean, sd and count a table prints (:func:`aoi_fl.pipeline.claims.prediction_verdict`)."""
    if reading.verdict is not None:
        return rules.criterion(reading)
    spread, verdict = prediction_verdict(paper_value, reading.ours, reading.sd, reading.count)
    return reading.ours, spread, verdict


#: the rules a row of claims.toml may name: the shared ones and this paper's
RULES = {
    **rules.RULES,
    **{f.__name__: f for f in (share, within_draws, near_one, per_seed, rho_prediction)},
}


@functools.cache
def rows() -> tuple[claimfiles.Row, ...]:
    """The rows of ``claims.toml``."""
    return claimfiles.load(__package__, measures=measures.MEASURES, rules=RULES)


def row(key: str) -> claimfiles.Row:
    """The row of claims.toml with ``key``."""
    return claimfiles.find(rows(), key)


#: statements of the paper that state a result but have no row, and why (claims.toml)
UNTESTED: tuple[Untested, ...] = claimfiles.load_untested(__package__, KEY)


def _build(row: claimfiles.Row, runs: measures.Runs) -> Claim:
    claim = claimfiles.build(row, KEY, runs)
    if row.measure.name != "speedup":
        return claim
    # the Fig. 5 notebook's line for a speed-up row names its seeds: found once the table is read
    return dataclasses.replace(claim, printed_as=measures.speedup_printed(runs, **row.measure.args))


def _entered(row: claimfiles.Row, runs: measures.Runs) -> bool:
    """Whether a row enters the ledger: Table II's per split where the dataset's panel is
    complete, else its one row per policy; every other row always."""
    if row.measure.name != "rho":
        return True
    complete = measures.skew_table(runs, row.measure.args["dataset"]) is not None
    return bool(row.measure.args.get("split")) == complete


def built(names: Iterable[str] | None, runs: measures.Runs) -> list[Claim]:
    """The rows whose measure is one of ``names`` (None: every row) that enter the ledger, in
    the file's order."""
    chosen = [r for r in rows() if names is None or r.measure.name in names]
    return [_build(r, runs) for r in chosen if _entered(r, runs)]


def sigma_claims(zipf_seeds: int = ZIPF_SEEDS) -> list[Claim]:
    """Fig. 2's values and its ordering of the policies, and Fig. 3's peak and ordering of the
    interval laws (each in its figure's notebook), over ``zipf_seeds`` size draws."""
    return built(SIGMA, measures.Runs(zipf_seeds=zipf_seeds))


def trace_claims(trace_seeds: int = TRACE_SEEDS) -> list[Claim]:
    """Simulated traces of the four policies (seed-0 sizes, ``trace_seeds`` traces of
    :data:`TRACE_ROUNDS` rounds each): Fig. 4, Theorems 3-5 against the traces' Sigma (the Fig. 2
    notebook) and Sec. III-C's geometric intervals of random selection (the Fig. 3 notebook)."""
    return built(TRACES, measures.Runs(trace_seeds=trace_seeds))


def stabilisation_claims(settle_traces: int = SETTLE_TRACES) -> list[Claim]:
    """Fig. 2 paragraph: the Markov policies' variance stabilises after a few rounds (from
    eq. 4's all-zero start, ``settle_traces`` traces per policy; :func:`settle_round`)."""
    return built(STABILISATION, measures.Runs(settle_traces=settle_traces))


def claims(profile: str = "cpu", *, results_dir: str = "results", data_root: str = "data"):
    """Every AoI row of the ledger (smoke: fewer size draws and traces, for the tests)."""
    small = (
        {"zipf_seeds": 10, "trace_seeds": 2, "starts": 2, "settle_traces": 10}
        if traits(profile).quick
        else {}
    )
    return built(None, measures.Runs(profile, results_dir, data_root, **small))


def _windows_row(
    key: str,
    text: str,
    pairs: list[tuple[np.ndarray, np.ndarray]],
    windows: Sequence[int] = WINDOWS,
) -> Claim:
    """A Fig. 4 row on given (lower, higher) pairs of trace curves (columns: :data:`WINDOWS`),
    at every window of ``windows``: the tests order made-up curves with it."""
    measure = claimfiles.Call("windows", {}, lambda _: measures.windows_reading(pairs, windows))
    given = dataclasses.replace(row("aoi.fig4.lowest"), key=key, statement=text, measure=measure)
    return _build(given, measures.Runs())


def _speedup_claims(
    dataset: str,
    results: list,
    panel: str,
    notebook: str,
    figure: str,
    data_root: str,
    source: str = "",
) -> list[Claim]:
    """The speed-up rows of ``dataset``'s ``panel`` on given ``results`` (``source`` says where
    they come from when not from the profile's own panel): the tests judge made-up runs."""
    runs = measures.Runs(
        data_root=data_root, speeds={panel: measures.Panel(results, source=source)}
    )
    chosen = [
        dataclasses.replace(r, ref=figure, notebook=notebook)
        for r in rows()
        if r.measure.name == "speedup"
        and (r.measure.args["dataset"], r.measure.args["panel"]) == (dataset, panel)
    ]
    return [_build(r, runs) for r in chosen]


def _faster_claims(
    results: list,
    missing: int,
    target: float,
    fast: str,
    slow: str,
    key: str,
    ref: str,
    text: str,
    notebook: str,
    splits: tuple[str, ...] = SPLITS,
    conditions: Sequence[Condition] = (),
) -> list[Claim]:
    """Rows ``<key>.<split>`` on given ``results``: ``fast`` reaches ``target`` sooner than
    ``slow`` (:func:`measures.faster`), under the claim's ``conditions``; the tests judge
    made-up runs."""
    given = measures.Panel(results, missing, target, tuple(conditions))
    runs = measures.Runs(panels={"given": given})
    scope = tuple(claimfiles.Scope(c.name, c.paper) for c in conditions)
    out = []
    for split in splits:
        args = {"panel": "given", "fast": fast, "slow": slow, "split": split}
        measure = claimfiles.Call("faster", args, measures.faster)
        statement = f"{text}, {split.replace('noniid', 'non-IID')}"
        written = claimfiles.Row(
            f"{key}.{split}", ref, "experiment", statement, notebook, measure,
            claimfiles.Call("criterion", {}, rules.criterion), scope=scope,
        )  # fmt: skip
        out.append(_build(written, runs))
    return out


def accuracy_claims(results: list, missing: int) -> list[Claim]:
    """Sec. I's row (:func:`measures.final_accuracy`) on given MNIST ``results``, ``missing``
    of them not cached."""
    runs = measures.Runs(panels={"main_mnist": measures.Panel(results, missing)})
    return [_build(row("aoi.sec1.accuracy"), runs)]
