"""The FedSUM paper's measures: what a row of ``claims.toml`` reads, as a
:class:`aoi_fl.pipeline.rules.Reading` whose verdict is the one the FedSUM notebooks print, and
the tables they print it from: App. F's bounds on tau_max against simulated traces (the delay
notebook), the vectors each method sends and keeps (the MNIST notebook), and the verdicts on the
claims of the cached panels (the training notebooks). Nothing is trained: a row whose runs are not
cached reads no number and says how many are missing."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from aoi_fl.core.delays import sampler_metrics
from aoi_fl.evidence.fedsum import costs
from aoi_fl.evidence.fedsum import experiments as fx
from aoi_fl.evidence.fedsum import results as fr
from aoi_fl.evidence.fedsum.bound_table import BoundCase, bound_cases, bound_table
from aoi_fl.evidence.fedsum.cost_tables import (
    FLOWER_REPLY,
    MEMORY_CLIENTS,
    METHOD_LABELS,
    PAPER_MEMORY,
    communication_table,
    memory_count,
    traffic_text,
)
from aoi_fl.evidence.fedsum.experiments import LAST, PAPER_ROUNDS
from aoi_fl.fedsum import patterns
from aoi_fl.pipeline.claims import Condition, capped, unmet
from aoi_fl.pipeline.rules import Reading

#: the claims of Sec. 5 / App. H (and Secs 1.1 and 4 on the delay metrics) that the cached
#: panels test, each with the panel of the MNIST or pattern notebook that tests it; their rows
#: ``fedsum.claim_<id>.*`` are in claims.toml
CLAIMS = {
    "(i)": "main",
    "(ii)": "main",
    "(iii)": "cases",
    "(iv)": "p_grid",
    "(v)": "family",
    "(viii)": "cases",
    "(cr)": "main",
    "(delays.patterns)": "cases",
    "(delays.p)": "p_grid",
}


def _panel(figures: Sequence[str], profile: str, results_dir: str) -> tuple[list, int, int]:
    """(cached summaries, missing, planned) of ``figures`` together."""
    planned = [p for f in figures for p in fx.plan(f, profile)]
    found, missing = fx.cached_summaries(planned, results_dir)
    return found, missing, len(planned)


def _compact(numbers: str) -> str:
    return numbers.replace("train_loss", "loss").replace("test_accuracy", "accuracy")


def _judged(row) -> tuple[float | None, str]:
    """(share of parts held, "k/n parts held: numbers") of a claim's row of a
    :func:`~aoi_fl.evidence.fedsum.results.all_claims` table."""
    held, parts = map(int, row["parts held"].split("/"))
    share = held / parts if parts else None
    return share, f"{row['parts held']} parts held: {_compact(row['numbers'])}"


def _missing(missing: int, planned: int) -> str:
    return f"{missing} of {planned} runs not cached"


def horizon(rounds: int) -> Condition:
    """The horizon under which the paper makes every claim of Sec. 5 and App. H, T =
    :data:`~aoi_fl.evidence.fedsum.experiments.PAPER_ROUNDS`, against a panel's ``rounds`` (the
    first 20-40 rounds do not decide a claim about 2000)."""
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
    """The claims of :data:`CLAIMS` that the CNN panel ``figure`` (MNIST or pattern notebook) tests,
    from its ``summaries``: :func:`~aoi_fl.evidence.fedsum.results.all_claims` (criterion, numbers,
    parts held, its verdict as "by the criterion") over the last ``LAST["cnn"]`` evaluations,
    the panel's rounds and the verdict, :func:`capped` by the paper's :func:`horizon`."""
    rounds = fx.profile_settings(profile)["rounds"][figure]
    table = fr.all_claims(summaries, last=LAST["cnn"][profile])
    table = table.loc[[c for c, panel in CLAIMS.items() if panel == figure]]
    table = table.rename(columns={"verdict": "by the criterion"})
    table["rounds"] = rounds
    table["verdict"] = [capped(v, [horizon(rounds)]) for v in table["by the criterion"]]
    return table


def cnn_line(claim: str, row: Any) -> str:
    """How the MNIST and pattern notebooks print the verdict on a claim (a row of
    :func:`cnn_verdicts`); the ledger's ``printed_as`` finds it."""
    return (
        f"{claim} {row['verdict']} ({row['rounds']} of the paper's {PAPER_ROUNDS} rounds; by "
        f"the criterion {row['by the criterion']}, {row['parts held']} parts held)"
    )


def long_verdicts(summaries: Sequence[fx.RunSummary], profile: str) -> pd.DataFrame:
    """The claims of :data:`CLAIMS` on the long-horizon panel's ``summaries``:
    :func:`~aoi_fl.evidence.fedsum.results.all_claims` (criterion, numbers, parts held, its verdict
    as "by the criterion") over the last ``LAST["long"]`` evaluations, the conditions of the claim
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
    """How the long-horizon notebook prints the verdict on a claim (a row of :func:`long_verdicts`);
    the ledger's ``printed_as`` finds it."""
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


# ---------------------------------------------------------------------------------------------
# The measures of claims.toml's rows


class Runs:
    """``profile``'s traces, counts and cached panels, each read once, when a row first needs
    it."""

    def __init__(self, profile: str, results_dir: str, data_root: str) -> None:
        self.profile, self.results_dir, self.data_root = profile, results_dir, data_root
        self.settings = fx.profile_settings(profile)
        #: N, S and T of the delay notebook's traces
        self.delay_sizes = fx.DELAY_CLIENTS, fx.DELAY_ACTIVE, fx.DELAY_SETTINGS[profile]["rounds"]

    @functools.cached_property
    def bounds(self) -> pd.DataFrame:
        return bound_table(self.profile)

    @functools.cached_property
    def cases(self) -> dict[str, BoundCase]:
        return bound_cases(*self.delay_sizes)

    @functools.cached_property
    def communication(self) -> pd.DataFrame:
        return communication_table(self.results_dir)

    @functools.cached_property
    def cnn(self) -> dict[str, tuple[pd.DataFrame | None, int, int]]:
        """Per CNN panel of the MNIST and pattern notebooks: its verdicts (None until every run is
        cached), how many runs are missing and how many it has."""
        out = {}
        for figure in set(CLAIMS.values()):
            found, missing, planned = _panel([figure], self.profile, self.results_dir)
            table = cnn_verdicts(found, figure, self.profile) if found and not missing else None
            out[figure] = table, missing, planned
        return out

    @functools.cached_property
    def long(self) -> tuple[pd.DataFrame | None, list, int, int]:
        """The long-horizon notebook's verdicts (None until every run is cached), its runs, how many
        are missing and how many it has."""
        found, missing, planned = _panel(fx.LONG_FIGURES, self.profile, self.results_dir)
        table = long_verdicts(found, self.profile) if found and not missing else None
        return table, found, missing, planned


def app_f_bound(runs: Runs, *, case: str) -> Reading:
    """App. F's bound of ``case`` (a key of :func:`bound_cases`) on the delay notebook's
    traces (:func:`bound_table`): the mean tau_max over seeds and :func:`bound_verdict`. Where the
    lemma's proof gives a tighter sure bound than it states (:attr:`BoundCase.proof`), the
    spread says whether every seed is within it."""
    row, proof = runs.bounds.loc[case], runs.cases[case].proof
    spread = f"tau_max over {row['seeds']} seeds: {row['tau_max min']:g}-{row['tau_max max']:g}"
    if row["tau_max"] > 0:
        spread += f"; bound / mean {row['bound'] / row['tau_max']:.3g}"
    if proof is not None:
        formula, value = proof
        within = row["tau_max max"] <= value
        spread += f"; its proof's sure bound tau_max <= {formula} = {value:g}: " + (
            "within it in every seed" if within else "above it in a seed"
        )
    return Reading(float(row["tau_max"]), spread, verdict=row["verdict"])


def tau_falls(runs: Runs) -> Reading:
    """App. H.4's reading of Fig. 10, that a larger p means smaller tau_avg and tau_max, on
    the delay notebook's Bernoulli traces over the profile's p grid: "held" when both fall strictly
    from each p of the grid to the next in every seed, "not held" when one of them does not in
    some seed."""
    n, _, t = runs.delay_sizes
    grid, seeds = runs.settings["p_grid"], fx.DELAY_SETTINGS[runs.profile]["seeds"]
    # metrics[seed][field]: that field of each p's trace, in the order of the grid
    metrics = [
        {
            field: np.array([getattr(m, field) for m in traces], dtype=float)
            for field in ("tau_max", "tau_avg")
        }
        for traces in (
            [sampler_metrics(patterns.Bernoulli(n, p, seed), t) for p in grid] for seed in seeds
        )
    ]
    falls = sum(all((np.diff(v) < 0).all() for v in m.values()) for m in metrics)
    means = {f: np.mean([m[f] for m in metrics], axis=0) for f in ("tau_max", "tau_avg")}
    spread = (
        f"both fall in {falls}/{len(seeds)} seeds; mean over seeds tau_max "
        + " / ".join(f"{v:.1f}" for v in means["tau_max"])
        + ", tau_avg "
        + " / ".join(f"{v:.1f}" for v in means["tau_avg"])
    )
    return Reading(None, spread, verdict="held" if falls == len(seeds) else "not held")


def _traffic_setting(method: str) -> str:
    return (
        f"counted over {costs.TRAFFIC_ROUNDS} rounds of {METHOD_LABELS[method]} with the "
        f"paper's settings on a {costs.TRAFFIC_CLIENTS}-client least-squares task"
    )


def sent_in_process(runs: Runs, *, method: str) -> Reading:
    """The vectors ``method`` sends per active client and round in its own protocol, the
    in-process trainer (:func:`communication_table`): their sum and the paper's claim's
    verdict."""
    row = runs.communication.loc[method]
    spread = f"ours (down, up) {row['in process'].text()}, {_traffic_setting(method)}"
    return Reading(float(sum(row["in process"])), spread, verdict=row["verdict"])


def sent_by_flower(runs: Runs, *, method: str) -> Reading:
    """The vectors our Flower strategy's messages carry for ``method`` (the MNIST notebook
    caches them; :func:`communication_table`): their sum and whether they are only what the method
    sends."""
    row = runs.communication.loc[method]
    flower = row["Flower"]
    spread = (
        f"ours (down, up) {traffic_text(row, 'Flower')} in the arrays of every training message "
        f"and reply on Flower's in-process grid, {_traffic_setting(method)}"
    )
    if flower is None:
        spread += "; not cached: notebook 15 measures it"
    elif flower.up > row["paper"].up:
        spread += FLOWER_REPLY
    ours = None if flower is None else float(sum(flower))
    return Reading(ours, spread, verdict=row["Flower verdict"])


def kept(runs: Runs, *, method: str) -> Reading:
    """What ``method`` keeps besides the global model (:func:`memory_count`) against
    :data:`PAPER_MEMORY`: "held" when the vectors per client, the vectors on the server and the
    scalars per client all agree; the value the vectors kept for :data:`MEMORY_CLIENTS`
    clients. (The same in every profile: ``runs`` is not read.)"""
    ours = memory_count(method)
    per, server, scalars = ours
    spread = (
        f"ours (per client, on the server, scalars per client) = ({per:g}, {server:g}, "
        f"{scalars:g}), counted in the state that {method}'s implementation (every run's) "
        "checkpoints (per-client tables and single vectors; the simulation keeps both in one "
        "process)"
    )
    verdict = "held" if ours == tuple(float(v) for v in PAPER_MEMORY[method]) else "not held"
    return Reading(float(per * MEMORY_CLIENTS + server), spread, verdict=verdict)


def cnn_claim(runs: Runs, *, claim: str) -> Reading:
    """Claim ``claim`` on the paper's CNN by its criterion (:data:`~aoi_fl.evidence.fedsum.results.
    ALL_CRITERIA`) on the panel of the MNIST or pattern notebook that runs it
    (:func:`cnn_verdicts`): the share of parts held, with the panel's horizon (:func:`horizon`)."""
    figure = CLAIMS[claim]
    table, missing, planned = runs.cnn[figure]
    rounds, seeds = runs.settings["rounds"][figure], runs.settings["seeds"][figure]
    conditions = (horizon(rounds),)
    if table is None:
        return Reading(None, _missing(missing, planned), conditions=conditions)
    lead = f"{rounds} rounds, {seeds} seed{'s' if seeds > 1 else ''}"
    return _by_criterion(table.loc[claim], lead, conditions)


def long_claim(runs: Runs, *, claim: str) -> Reading:
    """Claim ``claim`` at the paper's horizon T = 2000 by its criterion on the long-horizon panel
    (:func:`long_verdicts`): the share of parts held, with the panel's conditions
    (:func:`long_conditions`); claim (iv)'s spread adds what its endpoint misses
    (:func:`p_grid_speed`)."""
    table, found, missing, planned = runs.long
    conditions = long_conditions(claim, runs.profile)
    if table is None:
        return Reading(None, _missing(missing, planned), conditions=conditions)
    tail = p_grid_speed(found, LAST["long"][runs.profile]) if claim == "(iv)" else ""
    lead = f"{runs.settings['long']['seeds']} paired seeds"
    return _by_criterion(table.loc[claim], lead, conditions, tail)


def _by_criterion(row: Any, lead: str, conditions: tuple, tail: str = "") -> Reading:
    """A claim's row of a panel's verdict table as a reading: the share of parts held, the
    criterion's verdict and its numbers after ``lead``."""
    ours, numbers = _judged(row)
    spread = f"{lead}; by the criterion {row['by the criterion']}, {numbers}{tail}"
    return Reading(ours, spread, verdict=row["by the criterion"], conditions=conditions)


def absent_data(runs: Runs, *, datasets: Sequence[str], why: str, present: str) -> Reading:
    """A panel on ``datasets`` that this project does not run: "not computable here" while one
    of them is not on this machine, else ``present``; ``why`` adds what else is missing."""
    from aoi_fl.data.datasets import cifar_available

    absent = [name for name in datasets if not cifar_available(name, runs.data_root)]
    if absent:
        spread = f"{', '.join(absent)} not on this machine{why}"
        return Reading(None, spread, verdict="not computable here")
    return Reading(None, f"not run in the cpu profile{why}", verdict=present)


def not_run(runs: Runs, *, why: str, verdict: str) -> Reading:
    """A claim this project has no experiment for: no number, ``why`` and the ``verdict``
    that leaves it open. (The same in every profile: ``runs`` is not read.)"""
    return Reading(None, why, verdict=verdict)


#: the measures, by the name a row gives in its ``measure`` table
MEASURES = {
    f.__name__: f
    for f in (
        app_f_bound,
        tau_falls,
        sent_in_process,
        sent_by_flower,
        kept,
        cnn_claim,
        long_claim,
        absent_data,
        not_run,
    )
}
