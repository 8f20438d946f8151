"""K-Vib's verdict rules: how a row decides a claim from its numbers (a trend over K, a rate,
a claim decided over a scale the paper leaves open, non-superiority, "typically"), and the rules
its ``claims.toml`` names beside the shared ones (:data:`RULES`)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from aoi_fl.core.validation import require_choice
from aoi_fl.evidence.kvib import experiments as kx
from aoi_fl.pipeline import paired, rules
from aoi_fl.pipeline.claims import (
    combine_verdicts,
    interval_verdict,
    log_log_slope,
    sign_verdict,
)
from aoi_fl.pipeline.rules import Judged, Reading

#: Sec. 6.2 explains VRB's and MABS's showing on FEMNIST by its large number of clients: the
#: three FEMNIST versions have 2,231, 1,231 and 462 clients, so "large" is at least 462
PAPER_FEMNIST_CLIENTS = (2231, 1231, 462)
#: Sec. 6.2's FEMNIST recipe for Fig. 4 beyond the data: McMahan's CNN, T = 500 (Sec. 6: "for
#: all tasks") and 3 local epochs; conditions of every Fig. 4 claim (:func:`substitute_unmet`)
PAPER_FEMNIST_RECIPE = {"model": "mcmahan_cnn", "rounds": 500, "local_epochs": 3}
#: Sec. 6.2's "VRB and MABS do not outperform the uniform sampling", read as non-superiority:
#: held when the 95% t interval of how much higher a baseline's test accuracy ends than unbiased
#: uniform's lies below this margin (1 accuracy point, the ledger's accuracy tolerance: FedSUM's
#: non-inferiority margin), not held when it lies above it (:func:`not_better_verdict`)
NOT_BETTER_MARGIN = 0.01
#: Sec. 6's "the first-round feedback is typically the largest during FL training", fixed before
#: the cached runs were read for it: in each Fig. 2 run that did not diverge, whether the first
#: round's feedback sum_i pi_1(i)^2 (the recorded uniform cost times K / N: every client's
#: feedback, aggregated) is the largest of the run; "typically" is more than this share of the
#: runs, decided by the one-sided 95% Clopper-Pearson bounds of the share
#: (:func:`typical_verdict`)
TYPICAL_SHARE = 0.5


def printed_verdict(paper: float, ours: float, decimals: int) -> str:
    """ "held" when ``ours`` rounds to the paper's number as printed with ``decimals`` decimals
    (the text of Sec. 3 prints one: the tolerance is half a unit of its last digit)."""
    return "held" if abs(ours - paper) <= 0.5 * 10.0**-decimals + 1e-12 else "not held"


def scale_ranges(scales: Sequence[float], labels: Sequence[str]) -> dict[str, str]:
    """{label: the ``scales`` at which it holds, as ranges of consecutive scales ("0.5-1.3",
    "0.5-0.7 and 1.1-2.0")}, labels in the order they first appear."""
    runs_: dict[str, list[str]] = {}
    for label, run in itertools.groupby(zip(scales, labels, strict=True), key=lambda x: x[1]):
        at = [scale for scale, _ in run]
        runs_.setdefault(label, []).append(
            f"{at[0]:g}" if len(at) == 1 else f"{at[0]:g}-{at[-1]:g}"
        )
    return {label: " and ".join(parts) for label, parts in runs_.items()}


def scale_verdict(
    scales: Sequence[float], values: Sequence[float], threshold: float, claimed: str
) -> tuple[str, str]:
    """(verdict, where) of a claim read as "the value is ``claimed`` ("below" or "above")
    ``threshold``", given its value at each of ``scales``, the values of a parameter the paper
    does not give (Example 3.1's LogNormal scale of the norms).

    One verdict at every scale is the row's. Verdicts that differ with the scale make the claim
    "inconclusive": it holds or fails by a value the paper leaves open, which neither our runs
    nor a larger budget can settle. ``where`` names the scales at which each verdict holds.
    """
    require_choice("claimed", claimed, ("below", "above"))
    s, v = np.asarray(scales, dtype=float), np.asarray(values, dtype=float)
    if s.ndim != 1 or s.size < 2 or not np.isfinite(s).all() or not (np.diff(s) > 0).all():
        raise ValueError(
            f"scales must be at least 2 finite, strictly increasing numbers, got {list(scales)!r}"
        )
    if v.shape != s.shape or not np.isfinite(v).all():
        raise ValueError(
            f"values must be {s.size} finite numbers, one per scale, got {list(values)!r}"
        )
    if not np.isfinite(threshold):
        raise ValueError(f"threshold must be a finite number, got {threshold!r}")
    met = v < threshold if claimed == "below" else v > threshold
    ranges = scale_ranges(s, ["held" if m else "not held" for m in met])
    if len(ranges) == 1:
        (verdict,) = ranges
        return verdict, f"{verdict} at every scale {s[0]:g}-{s[-1]:g}"
    where = ", ".join(f"{verdict} for scale {at}" for verdict, at in ranges.items())
    return "inconclusive", (
        f"{where}: the verdict turns on the scale, which the paper does not give and no budget "
        "decides"
    )


def lower_verdict(differences: Sequence[float], level: float = 0.95):
    """(verdict, interval) of the claim "ours is lower" from paired differences ours - theirs.

    No size is claimed, so the sign of the interval over seeds decides
    (:func:`aoi_fl.pipeline.claims.interval_verdict`); "inconclusive" with fewer than 2 finite
    pairs (interval None).
    """
    return interval_verdict(differences, "negative", level)


def grid_seeds(per_seed: Mapping[Any, Mapping[int, float]]) -> list[int]:
    """The seeds every grid point has."""
    sets = [set(v) for v in per_seed.values()]
    return sorted(set.intersection(*sets)) if sets else []


def k_trend_verdict(per_seed: Mapping[int, Mapping[int, float]], claim: str) -> tuple[str, str]:
    """(verdict, spread) of ``claim`` "falls" or "rises" with K, from {K: {seed: value}} (K in
    increasing order).

    With at least 2 seeds at every K, each step between consecutive K is decided on the paired
    per-seed differences value(K_next) - value(K) by :func:`sign_verdict`, and the steps are
    combined by :func:`combine_verdicts` (held when every step moves the claimed way, not held
    when one moves the other way). With one seed per K there is no interval: "inconclusive at
    this budget", and the spread says what the one seed shows; "inconclusive" with fewer than
    2 K or no seed common to all.
    """
    direction = {"falls": "negative", "rises": "positive"}
    require_choice("claim", claim, tuple(direction))
    ks = list(per_seed)
    seeds = grid_seeds(per_seed)
    if len(ks) < 2 or not seeds:
        return "inconclusive", f"{len(ks)} K, {len(seeds)} common seed(s)"
    means = [float(np.mean([per_seed[k][s] for s in seeds])) for k in ks]
    values = ", ".join(f"{v:.3g}" for v in means)
    if len(seeds) < 2:
        first, last = means[0], means[-1]
        moves = "falls" if last < first else "rises"
        factor = max(first, last) / min(first, last) if min(first, last) > 0 else float("nan")
        slope = log_log_slope(ks, means)
        return "inconclusive at this budget", (
            f"one seed per K: {moves} {factor:.3g}x over K = {ks[0]}-{ks[-1]} ({values}), "
            f"log-log slope {slope:.3g}; no interval from one seed"
        )
    verdicts, texts = [], []
    for a, b in zip(ks[:-1], ks[1:], strict=True):
        d = [per_seed[b][s] - per_seed[a][s] for s in seeds]
        ci = paired.paired_interval(np.asarray(d, dtype=float))
        verdicts.append(sign_verdict(ci.low, ci.high, direction[claim]))
        texts.append(f"K {a}->{b} [{ci.low:.3g}, {ci.high:.3g}] {verdicts[-1]}")
    return combine_verdicts(verdicts), (
        f"{len(seeds)} paired seeds per K ({values}); 95% t intervals of the step: "
        + "; ".join(texts)
    )


def k_rate_verdict(
    per_seed: Mapping[int, Mapping[int, float]], rate: float
) -> tuple[str, float, str]:
    """(verdict, mean slope, spread) of "falls at least as fast as K^rate": the least-squares
    slope of log value on log K per seed; with at least 2 seeds, :func:`sign_verdict` on the t
    interval of slope - rate (held below 0); with one seed "inconclusive at this budget"."""
    ks = list(per_seed)
    seeds = grid_seeds(per_seed)
    if len(ks) < 2 or not seeds:
        return "inconclusive", float("nan"), f"{len(ks)} K, {len(seeds)} common seed(s)"
    slopes = np.array([log_log_slope(ks, [per_seed[k][s] for k in ks]) for s in seeds])
    if not np.isfinite(slopes).all():
        return "inconclusive", float("nan"), "a value is not positive: no log-log slope"
    mean = float(slopes.mean())
    if len(seeds) < 2:
        return (
            "inconclusive at this budget",
            mean,
            (
                f"one seed per K (K = {', '.join(map(str, ks))}): log-log slope {mean:.3g} against "
                f"{rate:.3g}; no interval from one seed"
            ),
        )
    verdict, ci = lower_verdict(slopes - rate)
    return (
        verdict,
        mean,
        (
            f"per-seed log-log slope, mean {mean:.3g}; slope - ({rate:.3g}): 95% t interval "
            f"[{ci.low:.3g}, {ci.high:.3g}] over {len(seeds)} seeds"
        ),
    )


def stable_verdict(
    per_seed: Mapping[float, Mapping[int, float]], ratio: float
) -> tuple[str, float, str]:
    """(verdict, max / min of the means, spread) of "changes only slightly" over a grid (the
    gamma scales): per seed the max / min over the grid; with at least 2 seeds,
    :func:`sign_verdict` on the t interval of that ratio - ``ratio`` (held below 0); with one
    seed "inconclusive at this budget"."""
    points = sorted(per_seed)
    seeds = grid_seeds(per_seed)
    if len(points) < 2 or not seeds:
        return "inconclusive", float("nan"), f"{len(points)} point(s), {len(seeds)} common seed(s)"
    means = {p: float(np.mean([per_seed[p][s] for s in seeds])) for p in points}
    overall = max(means.values()) / min(means.values())
    values = ", ".join(f"x{p:g}: {v:.3g}" for p, v in means.items())
    if len(seeds) < 2:
        return (
            "inconclusive at this budget",
            overall,
            (f"one seed per scale: max / min {overall:.3g} ({values}); no interval from one seed"),
        )
    per = np.array(
        [max(per_seed[p][s] for p in points) / min(per_seed[p][s] for p in points) for s in seeds]
    )
    verdict, ci = lower_verdict(per - ratio)
    return (
        verdict,
        overall,
        (
            f"{len(seeds)} seeds per scale ({values}); per-seed max / min - {ratio:g}: 95% t "
            f"interval [{ci.low:.3g}, {ci.high:.3g}]"
        ),
    )


def substitute_unmet(profile: str, version: str | None = None) -> list[str]:
    """The conditions of Fig. 4's claims (Sec. 6.2: FEMNIST, McMahan's CNN, 462 to 2,231
    clients, T = 500 with 3 local epochs) that ``profile``'s MNIST substitute does not meet;
    ``version`` ("v1", "v2"): a claim tied to that FEMNIST version's clients (its speed-up).
    Never empty: the data are MNIST and the clients 100 in every profile (``paper`` runs the
    CNN with the paper's T and local epochs, still on MNIST's 100 clients)."""
    m = kx.mnist_settings(profile)
    recipe = PAPER_FEMNIST_RECIPE
    unmet = ["MNIST with our lognormal / Dirichlet partition, not FEMNIST"]
    if m["model"]["name"] != recipe["model"]:
        unmet.append(f"{m['model']['name'].replace('_', ' ')}, not McMahan's CNN")
    fewest, most = min(PAPER_FEMNIST_CLIENTS), max(PAPER_FEMNIST_CLIENTS)
    if version is not None:
        clients = PAPER_FEMNIST_CLIENTS[int(version[1:]) - 1]
        factor = kx.PAPER_FEMNIST_SPEEDUP[version]
        if kx.MNIST_CLIENTS < clients:
            unmet.append(
                f"{kx.MNIST_CLIENTS} clients, not FEMNIST {version}'s {clients:,} (the claimed "
                f"{factor:g}x is {version}'s; the paper's gap narrows with fewer clients and "
                "less data variance)"
            )
    elif kx.MNIST_CLIENTS < fewest:
        unmet.append(f"{kx.MNIST_CLIENTS} clients, not FEMNIST's {fewest:,} to {most:,}")
    if (m["rounds"], m["local_epochs"]) != (recipe["rounds"], recipe["local_epochs"]):
        unmet.append(
            f"T = {m['rounds']} with {m['local_epochs']} local epoch"
            f"{'s' if m['local_epochs'] != 1 else ''}, not {recipe['rounds']} with "
            f"{recipe['local_epochs']}"
        )
    return unmet


def not_better_verdict(advantages: Sequence[float], margin: float, level: float = 0.95):
    """(verdict, interval) of "it does not outperform the reference" (non-superiority) from
    paired ``advantages`` (it - reference, higher is better): "held" when their t interval lies
    below ``margin``, "not held" when it lies above it, else "inconclusive at this budget";
    "inconclusive" with fewer than 2 finite pairs (interval None)."""
    d = np.asarray(advantages, dtype=float)
    if d.size < 2 or not np.isfinite(d).all():
        return "inconclusive", None
    ci = paired.paired_interval(d, level)
    return sign_verdict(ci.low - margin, ci.high - margin, "negative"), ci


def typical_verdict(
    hits: Sequence[bool], share: float = TYPICAL_SHARE, level: float = 0.95
) -> tuple[str, tuple[float, float] | None]:
    """(verdict, (low, high)) of "typically so" from one yes / no per run: "held" when the
    one-sided ``level`` Clopper-Pearson lower bound of the share of yes is above ``share``, "not
    held" when the upper bound is below it, else "inconclusive at this budget"; "inconclusive"
    with no run (bounds None)."""
    n, x = len(hits), int(sum(bool(h) for h in hits))
    if n == 0:
        return "inconclusive", None
    ci = scipy_stats.binomtest(x, n).proportion_ci(confidence_level=1 - 2 * (1 - level))
    low, high = float(ci.low), float(ci.high)
    return sign_verdict(low - share, high - share, "positive"), (low, high)


@dataclasses.dataclass(frozen=True)
class ScaleReading:
    """A number measured at each of ``scales``, values of a parameter the paper leaves open
    (:func:`scale_verdict`): ``ours`` at the notebook's scale, ``described`` the measure in
    words, ``note`` what the spread adds after the verdict's scales."""

    ours: float
    scales: Sequence[float]
    values: Sequence[float]
    described: str
    note: str = ""


def over_scales(reading: ScaleReading, threshold: float, claimed: str) -> Judged:
    """The claim "the value is ``claimed`` ``threshold``" decided over the scales
    (:func:`scale_verdict`)."""
    verdict, where = scale_verdict(reading.scales, reading.values, threshold, claimed)
    return reading.ours, f"{reading.described}; {where}{reading.note}", verdict


def printed(reading: Reading, paper_value: float, decimals: int) -> Judged:
    """A number the paper prints with ``decimals`` decimals (:func:`printed_verdict`)."""
    return reading.ours, reading.spread, printed_verdict(paper_value, reading.ours, decimals)


def within(reading: Reading, paper_value: float, tolerance: float) -> Judged:
    """ "held" when ours is within ``tolerance`` (absolute) of the paper's number: a relative
    tolerance says nothing about a printed 0."""
    held = abs(reading.ours - paper_value) <= tolerance
    return reading.ours, reading.spread, "held" if held else "not held"


#: the rules a row of K-Vib's claims.toml may name: the shared ones and K-Vib's
RULES = {**rules.RULES, "over_scales": over_scales, "printed": printed, "within": within}
