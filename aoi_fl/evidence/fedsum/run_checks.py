"""The checks every FedSUM training notebook shares: its runs complete on shared traces
and its verdicts under the budget's rule, and the line naming what a profile skips."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from aoi_fl.evidence.fedsum import claims as fc
from aoi_fl.evidence.fedsum import experiments as fx
from aoi_fl.evidence.fedsum import results as fr
from aoi_fl.fedsum import delays
from aoi_fl.pipeline import claims


def _skipped(profile: str, smoke: str, paper: str) -> list[str]:
    """The line saying which checks ``profile`` skips, and why (none in ``cpu``)."""
    return {"smoke": [f"skipped in smoke: {smoke}"], "paper": [f"skipped in paper: {paper}"]}.get(
        profile, []
    )


def runs_complete(summaries: Sequence[Any], rounds: int, figure: str) -> None:
    """Every run of panel ``figure`` is evaluated from round 0 to ``rounds`` with finite
    metrics over a trace of ``rounds`` rounds, and the runs of one (pattern, seed) share that
    trace (the same |S_t| and delays: the pairing every comparison relies on). Of the traces,
    uniform S of N draws S clients every round, the deterministic cyclic order has its closed-
    form delays, the reshuffled order tau_max <= 2m - 2 (m = N/S), and p = 1 no delay."""
    shared: dict[tuple[str, int], tuple] = {}
    for r in summaries:
        name = f"{figure} {r.planned.pattern} {r.planned.algorithm} seed {r.planned.seed}"
        assert r.eval_round[0] == 0 and r.eval_round[-1] == rounds and len(r.active) == rounds, (
            f"{name}: evaluations from round {r.eval_round[0]} to {r.eval_round[-1]}, "
            f"{len(r.active)} rounds, not 0 to {rounds}"
        )
        for metric in fr.METRICS:
            assert np.isfinite(getattr(r, metric)).all(), f"{name}: non-finite {metric}"
        trace = shared.setdefault(
            (r.planned.pattern, r.planned.seed), (r.active, r.tau_max, r.tau_avg)
        )
        assert np.array_equal(trace[0], r.active) and trace[1:] == (r.tau_max, r.tau_avg), (
            f"{name}: not the participation trace of its pattern and seed"
        )
        sampler, n = r.planned.config["sampler"], r.planned.config["partition"]["n_clients"]
        if sampler["name"] == "uniform":
            assert (r.active == sampler["s"]).all(), f"{name}: did not draw S clients every round"
        if sampler["name"] == "cyclic":
            closed = delays.deterministic_cyclic_delays(n, sampler["s"], rounds)
            assert r.tau_max == closed.max() and np.isclose(r.tau_avg, closed.mean()), (
                f"{name}: tau_max {r.tau_max}, tau_avg {r.tau_avg:.4f}; closed form "
                f"{closed.max()}, {closed.mean():.4f}"
            )
        if sampler["name"] == "reshuffled_cyclic":
            assert r.tau_max <= 2 * (n // sampler["s"]) - 2, (
                f"{name}: tau_max {r.tau_max} above 2m - 2"
            )
        if sampler["name"] == "bernoulli" and sampler["p"] == 1:
            assert r.tau_max == 0 and (r.active == n).all(), (
                f"{name}: p = 1 with a delay {r.tau_max}"
            )


def budget_rule(table: pd.DataFrame, rounds: int) -> None:
    """The verdicts of a CNN panel (:func:`~aoi_fl.evidence.fedsum.claims.cnn_verdicts`) are taken
    at its ``rounds`` under the paper's :func:`~aoi_fl.evidence.fedsum.claims.horizon`: short of the
    paper's T = 2000, undecided (by the budget, or, with runs missing, by no budget)."""
    horizon = [fc.horizon(rounds)]
    assert (table["rounds"] == rounds).all() and (
        table["verdict"] == [claims.capped(v, horizon) for v in table["by the criterion"]]
    ).all(), f"verdicts {table['verdict'].to_dict()} at {rounds} rounds"
    if rounds < fx.PAPER_ROUNDS:
        assert table["verdict"].isin(["inconclusive at this budget", "inconclusive"]).all(), (
            f"verdicts {table['verdict'].to_dict()} below the paper's {fx.PAPER_ROUNDS} rounds"
        )
