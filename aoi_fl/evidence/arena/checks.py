"""What the arena's notebook asserts about its own runs and tables (ours, not the papers')."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from aoi_fl.core.availability import build_availability
from aoi_fl.evidence.arena import experiments as ex
from aoi_fl.pipeline.profiles import traits
from aoi_fl.pipeline.runs import resolve_config

#: standard errors allowed between a run's mean number of available clients and its model's
#: closed form (the count of a round is a sum of n Bernoulli draws; rounds of the Markov model
#: are correlated, which the bound below accounts for by counting effective rounds)
_SE = 5.0


def check_pairing(configs: Sequence[dict[str, Any]]) -> int:
    """Within a seed every policy's run has the same dataset, partition, model, training and
    availability sections (only the sampler differs): the runs pair up. Returns the number of
    seeds checked."""
    by_seed: dict[int, dict[str, Any]] = {}
    for config in configs:
        resolved = resolve_config(config)
        rest = {k: v for k, v in resolved.items() if k != "sampler"}
        key = (resolved["training"]["seed"], ex.availability_name(resolved.get("availability")))
        first = by_seed.setdefault(key, rest)
        if first != rest:
            raise AssertionError(f"runs of seed/availability {key} differ beyond the sampler")
        if resolved["sampler"]["seed"] != resolved["training"]["seed"]:
            raise AssertionError(f"the sampler's seed is not the run's: {resolved['sampler']}")
    return len({seed for seed, _ in by_seed})


def check_available_counts(frame: pd.DataFrame, tier: str, profile: str) -> int:
    """Each run's mean number of available clients per round against its model's closed form,
    the mean over the T rounds of sum_i P(i available in t), within :data:`_SE` standard errors
    of a mean of independent Bernoulli sums (a Markov on/off model's rounds are correlated: its
    variance is inflated by (1 + rho) / (1 - rho), rho its lag-1 autocorrelation). Returns the
    number of runs checked."""
    s = ex.tier_settings(tier, profile)
    checked = 0
    for row in frame[frame.availability != "always"].itertuples():
        spec = {**ex.AVAILABILITY[row.availability], "seed": int(row.seed)}
        sizes = None
        if spec.get("correlation", "none") != "none":
            continue  # its rates depend on the partition's sizes: checked in the unit tests
        model = build_availability(spec, s["n"], sizes)
        rates = np.array([model.rates(t) for t in range(s["rounds"])])
        expected = rates.sum(axis=1).mean()
        se = np.sqrt((rates * (1 - rates)).sum()) / s["rounds"]
        if spec["name"] == "markov_onoff":
            rho = 1 - 1 / spec["mean_on"] - 1 / spec["mean_off"]
            se *= np.sqrt((1 + rho) / (1 - rho))
        if abs(row.mean_available - expected) > _SE * se + 1e-9:
            raise AssertionError(
                f"{row.availability} seed {row.seed} {row.policy}: {row.mean_available:.2f} "
                f"clients available per round, closed form {expected:.2f} (se {se:.2f})"
            )
        checked += 1
    return checked


def check_markov_optimal_always(frame: pd.DataFrame, tier: str, profile: str) -> bool:
    """Theorem 1 with an integer n/m: under full availability every client of the Markov
    optimal policy is selected exactly every n/m rounds (X = n/m, Var X = 0). Returns whether it
    applied (False: n/m not an integer, or T too short for an interval)."""
    s = ex.tier_settings(tier, profile)
    if s["n"] % s["m"] or s["rounds"] <= s["n"] // s["m"]:
        return False  # X not an integer, or no complete interval within the horizon
    rows = frame[(frame.availability == "always") & (frame.policy == "markov_optimal")]
    if rows.empty:
        return False  # nothing to check
    ratio = s["n"] // s["m"]
    if not (np.allclose(rows.interval_mean, ratio) and np.allclose(rows.interval_var, 0.0)):
        raise AssertionError(
            f"markov_optimal under full availability: interval means {rows.interval_mean.tolist()}"
            f", variances {rows.interval_var.tolist()}; Theorem 1 gives X = {ratio} exactly"
        )
    return True


def notebook_20(configs: Sequence[dict], frame: pd.DataFrame, missing: int, profile: str) -> None:
    """The screen's checks: pairing, completeness (cpu and paper), availability counts against
    their closed forms, Theorem 1's deterministic interval."""
    seeds = check_pairing(configs)
    print(
        f"pairing: every policy's runs share partition, model, batches and availability "
        f"within each of {seeds} seeds"
    )
    if not traits(profile).quick and missing:
        raise AssertionError(f"the screen has {missing} runs missing from the cache")
    checked = check_available_counts(frame, "screen", profile)
    print(f"available clients per round within {_SE:g} se of the closed form in {checked} runs")
    if check_markov_optimal_always(frame, "screen", profile):
        print("markov_optimal, full availability: X = n/m in every run (Theorem 1)")
