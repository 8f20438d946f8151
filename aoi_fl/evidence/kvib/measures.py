"""K-Vib's measures of the cached runs (Figs 2-4 and App. F): what a row of
``claims.toml`` reads, as a :class:`aoi_fl.pipeline.rules.Reading` with its verdict. Nothing is
trained here: missing runs leave a row "inconclusive", saying how many. A run in which FedAvg
diverged is left out of every comparison, and the spread says so; a row on the MNIST substitute
is capped by the conditions of Fig. 4 it does not meet (:func:`scoped`)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from aoi_fl.evidence.kvib import example_measures as em
from aoi_fl.evidence.kvib import experiments as kx
from aoi_fl.evidence.kvib import results as kr
from aoi_fl.evidence.kvib.verdicts import (
    NOT_BETTER_MARGIN,
    TYPICAL_SHARE,
    grid_seeds,
    k_rate_verdict,
    k_trend_verdict,
    lower_verdict,
    not_better_verdict,
    stable_verdict,
    substitute_unmet,
    typical_verdict,
)
from aoi_fl.pipeline import paired, runs
from aoi_fl.pipeline.claims import (
    combine_verdicts,
    interval_verdict,
    log_log_slope,
    rounds_to_level,
    scoped_verdict,
)
from aoi_fl.pipeline.rules import Reading

#: the baselines the paper plots in Fig. 2 (Avare is not implemented: see samplers)
BASELINES = ("uniform_unbiased", "mabs", "vrb")
#: the uniform baseline as the authors' code trains it (self-normalised weights)
NORMALISED = "uniform_normalised"
#: Theorem 5.2: regret O(K^(-4/3)), an upper bound's rate (not a prediction of the slope);
#: Fig. 3(b) is offered as its evidence
PAPER_K_RATE = -4 / 3
#: the synthetic notebook's reading of Fig. 3(c)'s "changes slightly": max / min over the gamma
#: scales
GAMMA_STABLE_RATIO = 1.5
#: the speed measure of each "faster" statement, written down before any of them was computed
#: on the cached runs, never the endpoint: Fig. 2 plots the test loss, so Sec. 6.1's
#: "faster convergence" is the area under the test-loss curve over the horizon
#: (:func:`aoi_fl.pipeline.claims.horizon_mean`, lower is faster); Sec. 6.2 measures Fig. 4's
#: speed-ups in rounds to a fixed test accuracy (:func:`aoi_fl.pipeline.claims.rounds_to_level`,
#: the substitute's level is the profile's target); its early-round and "keeps converging fast"
#: statements have no level, so they take the area under the test-accuracy curve over the first
#: tenth of the rounds and over all of them (higher is faster)
SPEED_MEASURES = {
    "fig2": "test loss averaged over the horizon (area under the curve / T)",
    "fig4": "rounds to the target test accuracy",
    "fig4.early": "test accuracy averaged over the first tenth of the rounds (area / horizon)",
    "fig4.whole": "test accuracy averaged over the horizon (area under the curve / T)",
}

#: why Fig. 4's FEMNIST rows and Fig. 5's (Sec. 6.3) cannot be checked here
FEMNIST = "FEMNIST (Chen et al. 2020's unbalanced versions) cannot be fetched here"
TEXT_TASKS = (
    "AGNews and CC-News, the pretrained DistilBERT and Pythia-70M, cannot be fetched here (no "
    "network beyond package registries), and the three heavy-tailed partitions of 1,000 clients "
    "(Charles et al. 2024) are not specified"
)


class Grid:
    """A grid's cached runs, how many are missing, and in which runs FedAvg diverged."""

    def __init__(self, configs: list, results_dir: str) -> None:
        self.results, self.missing = runs.cached_results(configs, results_dir=results_dir)
        self._values: dict[str, dict] = {}

    @functools.cached_property
    def diverged(self) -> dict[tuple, dict]:
        """{run label: {seed: whether FedAvg diverged in that run}}."""
        return per_seed(self.results, kr.diverged, diverged_too=True)

    def values(self, metric: str) -> dict[tuple, dict]:
        """{run label: {seed: :data:`METRICS`' ``metric``}} of the runs that did not diverge,
        computed once."""
        if metric not in self._values:
            self._values[metric] = per_seed(self.results, METRICS[metric])
        return self._values[metric]


class Runs:
    """``profile``'s settings and cached runs in ``results_dir``, each read once, when a row
    first needs it; ``g``: Example 3.2's vectors; ``unmet``: the conditions of Fig. 4 that the
    MNIST substitute does not meet (:func:`substitute_unmet`; another for a substitute that
    meets them, to see its criteria decide)."""

    def __init__(
        self,
        profile: str,
        results_dir: str,
        g: np.ndarray = em.EX32_G,
        unmet: Callable[..., list[str]] = substitute_unmet,
    ) -> None:
        self.profile, self.results_dir, self.g, self.unmet = profile, results_dir, g, unmet

    @functools.cached_property
    def example_3_1(self) -> dict:
        return kx.example_3_1_settings(self.profile)

    @functools.cached_property
    def synthetic(self) -> dict:
        return kx.synthetic_settings(self.profile)

    @functools.cached_property
    def mnist_settings(self) -> dict:
        return kx.mnist_settings(self.profile)

    @functools.cached_property
    def fig2(self) -> Grid:
        return Grid(kx.fig2_grid(self.profile), self.results_dir)

    @functools.cached_property
    def k_grid(self) -> Grid:
        return Grid(kx.k_grid(self.profile), self.results_dir)

    @functools.cached_property
    def gamma(self) -> Grid:
        return Grid(kx.gamma_grid(self.profile), self.results_dir)

    @functools.cached_property
    def mnist(self) -> Grid:
        return Grid(kx.mnist_grid(self.profile), self.results_dir)


# ---------------------------------------------------------------------------------------------
# Per-seed values of the runs


def _seed(result: Any) -> int:
    return int(result.config["training"]["seed"])


def per_seed(
    results: Sequence[Any], metric: Callable[[dict], float], *, diverged_too: bool = False
) -> dict[tuple, dict]:
    """{run label: {seed: metric of that run's curves}}, without the runs in which FedAvg
    diverged (:func:`.results.diverged`) unless ``diverged_too``: every comparison is then
    decided by the runs that did not explode, and a label all of whose runs diverged is
    absent."""
    out: dict[tuple, dict] = {}
    for result in results:
        arrays = kr.run_arrays(result)
        if diverged_too or not kr.diverged(arrays):
            out.setdefault(kr.run_label(result), {})[_seed(result)] = metric(arrays)
    return out


def paired_differences(values: dict[tuple, dict], ours: tuple, theirs: tuple) -> list[float]:
    """Paired differences ours - theirs over the seeds both have."""
    a, b = values.get(ours, {}), values.get(theirs, {})
    seeds = sorted(set(a) & set(b))
    return [a[s] - b[s] for s in seeds]


def _tenth(curve: np.ndarray) -> int:
    return max(1, curve.size // 10)


#: the per-run numbers a row's measure names
METRICS: dict[str, Callable[[dict], float]] = {
    "regret": lambda r: float(r["regret"][-1]),
    "variance": lambda r: float(r["variance"].mean()),
    "loss": kr.horizon("test_loss"),
    "early_variance": lambda r: float(r["variance"][: _tenth(r["variance"])].mean()),
    "late_accuracy": lambda r: float(r["test_accuracy"][-_tenth(r["test_accuracy"]) :].mean()),
    "fig4.early": kr.horizon("test_accuracy", first_tenth=True),
    "fig4.whole": kr.horizon("test_accuracy"),
}


# ---------------------------------------------------------------------------------------------
# What a reading's spread adds: runs not cached, runs left out, conditions not met


def not_cached(missing: int) -> Reading:
    return Reading(None, f"{missing} runs not cached", verdict="inconclusive")


def diverged_text(div: Mapping[tuple, Mapping[int, bool]], labels: Sequence[tuple]) -> str:
    """Which of ``labels``' runs diverged (:func:`.results.diverged`) and were left out, or "" if
    none did."""
    found: dict[str, list] = {}
    for lab in labels:
        runs_ = div.get(lab, {})
        n = sum(bool(v) for v in runs_.values())
        if n:
            found.setdefault(lab[0], []).append((lab[1], n, len(runs_)))
    if not found:
        return ""
    parts = [
        f"{name} at K = {', '.join(str(k) for k, _, _ in hits)} "
        f"({sum(n for _, n, _ in hits)} of {sum(m for _, _, m in hits)} runs)"
        for name, hits in found.items()
    ]
    return (
        f"left out, FedAvg diverged (test loss above {kr.DIVERGENCE_FACTOR:g}x the initial "
        f"model's): {', '.join(parts)}; a diverged run measures the explosion, not the sampler, "
        "and cannot decide a comparison"
    )


def noted(reading: Reading, grid: Grid, labels: Sequence[tuple]) -> Reading:
    """``reading`` with :func:`diverged_text` of ``labels`` before its spread."""
    why = diverged_text(grid.diverged, labels)
    return dataclasses.replace(reading, spread=f"{why}; {reading.spread}") if why else reading


def scoped(reading: Reading, unmet: Sequence[str]) -> Reading:
    """``reading`` under :func:`aoi_fl.pipeline.claims.scoped_verdict`: where capped, the spread
    says why and keeps what the runs show (the criterion's verdict and its numbers)."""
    verdict, why = scoped_verdict(reading.verdict, unmet)
    if not why:
        return reading
    spread = f"{why}; what the substitute shows: by the criterion {reading.verdict}, "
    return dataclasses.replace(reading, verdict=verdict, spread=spread + reading.spread)


def interval_text(ci) -> str:
    if ci is None:
        return "fewer than 2 paired seeds"
    return f"95% t interval [{ci.low:.3g}, {ci.high:.3g}] over {ci.n} paired seeds"


def lower(d: Sequence[float]) -> Reading:
    """The claim "the first is lower" from paired differences ``d`` (:func:`lower_verdict`)."""
    verdict, ci = lower_verdict(d)
    return Reading(float(np.mean(d)) if len(d) else None, interval_text(ci), verdict=verdict)


def _mean(values: Mapping[int, float]) -> float:
    return float(np.mean(list(values.values())))


# ---------------------------------------------------------------------------------------------
# Fig. 2 and Sec. 6's remarks on its runs


def versus_baselines(runs: Runs, metric: str) -> Reading:
    """K-Vib against each of :data:`BASELINES` on ``metric`` (lower is better), paired by seed:
    held when lower than every one; ours and the interval are against the best baseline by its
    mean (as the synthetic notebook), among those with runs."""
    grid, k = runs.fig2, runs.synthetic["k"]
    if grid.missing:
        return not_cached(grid.missing)
    values = grid.values(metric)
    verdicts, texts = [], []
    for b in BASELINES:
        d = paired_differences(values, ("kvib", k, None), (b, k, None))
        verdicts.append(lower_verdict(d)[0])
        texts.append(f"{b} {verdicts[-1]} ({len(d)} paired seeds)")
    means = {b: _mean(values[(b, k, None)]) for b in BASELINES if (b, k, None) in values}
    labels = [(name, k, None) for name in ("kvib", *BASELINES)]
    if not means:
        return noted(
            Reading(None, ", ".join(texts), verdict=combine_verdicts(verdicts)), grid, labels
        )
    best = min(means, key=means.get)
    d = paired_differences(values, ("kvib", k, None), (best, k, None))
    _, ci = lower_verdict(d)
    spread = f"against {best} (best baseline): {interval_text(ci)}; " + ", ".join(texts)
    ours = float(np.mean(d)) if d else None
    return noted(Reading(ours, spread, verdict=combine_verdicts(verdicts)), grid, labels)


def normalised_lead(runs: Runs) -> Reading:
    """A reading of ours: the uniform baseline of the authors' code (self-normalised, biased
    weights) converges faster than K-Vib, and than the full-information optimum (the control:
    no unbiased sampler can beat the optimum, so a lead over it is the aggregation rule's, not a
    sampler's). Each part: :func:`aoi_fl.pipeline.claims.interval_verdict` of the paired
    differences sampler - self-normalised uniform (held above 0); both held: held."""
    grid, k = runs.fig2, runs.synthetic["k"]
    if grid.missing:
        return not_cached(grid.missing)
    values = grid.values("loss")
    verdicts, texts, ours = [], [], None
    for name in ("kvib", "optimal"):
        d = paired_differences(values, (name, k, None), (NORMALISED, k, None))
        verdict, ci = interval_verdict(d, "positive")
        verdicts.append(verdict)
        texts.append(f"{name} - it: {interval_text(ci)} ({verdict})")
        if name == "kvib" and d:
            ours = float(np.mean(d))
    reading = Reading(ours, "; ".join(texts), verdict=combine_verdicts(verdicts))
    return noted(reading, grid, [(name, k, None) for name in ("kvib", "optimal", NORMALISED)])


def first_feedback(runs: Runs) -> Reading:
    """The share of the Fig. 2 runs whose first round's aggregate feedback is the largest of the
    run (:data:`TYPICAL_SHARE`, :func:`typical_verdict`); the runs in which FedAvg diverged are
    left out (their feedback grows with the explosion)."""
    grid, k = runs.fig2, runs.synthetic["k"]
    if grid.missing:
        return not_cached(grid.missing)
    hits, shares, medians = [], [], []
    for result in grid.results:
        arrays = kr.run_arrays(result)
        if kr.diverged(arrays):
            continue
        feedback = arrays["uniform_cost"]
        hits.append(bool(feedback[0] >= feedback.max()))
        shares.append(feedback[0] / feedback.max())
        medians.append(feedback[0] / np.median(feedback))
    verdict, bounds = typical_verdict(hits, TYPICAL_SHARE)
    if bounds is None:
        spread, ours = "no run left", None
    else:
        ours = sum(hits) / len(hits)
        later = (
            f"; in the others a later round's is larger, the first round's at least "
            f"{min(shares):.1%} of it"
            if not all(hits)
            else ""
        )
        spread = (
            f"the first round's is the largest in {sum(hits)} of {len(hits)} runs (one-sided 95% "
            f"bounds of the share [{bounds[0]:.2f}, {bounds[1]:.2f}]){later}; the first round's "
            f"is {min(medians):.3g}-{max(medians):.3g}x the run's median (the samplers of one "
            "seed share their first round)"
        )
    labels = [(name, k, None) for name in kx.FIG2_SAMPLERS]
    return noted(Reading(ours, spread, verdict=verdict), grid, labels)


def isp_early(runs: Runs) -> Reading:
    """Uniform ISP's variance over the first tenth of the rounds minus uniform sampling without
    replacement's (the same p = K/N), paired by seed (lower: ISP's estimates are better)."""
    grid, k = runs.fig2, runs.synthetic["k"]
    if grid.missing:
        return not_cached(grid.missing)
    pair = (("uniform_isp", k, None), ("uniform_unbiased", k, None))
    early = grid.values("early_variance")
    return noted(lower(paired_differences(early, *pair)), grid, pair)


# ---------------------------------------------------------------------------------------------
# Figs 3(b), 3(c), 6 and 7: trends over the K grid and the gamma scales


def _end_ratio(per_k: Mapping[int, Mapping[int, float]], rising: bool) -> float | None:
    """The mean at the last grid point over that at the first (``rising``) or the inverse;
    None when a grid point has no run left."""
    if not all(per_k.values()):
        return None
    first, *_, last = (_mean(v) for v in per_k.values())
    return last / first if rising else first / last


def _by_k(runs: Runs, metric: str, name: str) -> dict[int, dict[int, float]]:
    """{K: {seed: ``metric``}} of sampler ``name`` over the K grid."""
    values = runs.k_grid.values(metric)
    return {k: values.get((name, k, None), {}) for k in runs.synthetic["k_grid"]}


def _k_labels(runs: Runs, name: str) -> list[tuple]:
    return [(name, k, None) for k in runs.synthetic["k_grid"]]


def k_trend(runs: Runs, sampler: str, metric: str, claim: str) -> Reading:
    """Whether ``sampler``'s ``metric`` "falls" or "rises" with K (:func:`k_trend_verdict`);
    ours: the ratio of its ends, the larger over the smaller as the claim has it."""
    if runs.k_grid.missing:
        return not_cached(runs.k_grid.missing)
    values = _by_k(runs, metric, sampler)
    verdict, spread = k_trend_verdict(values, claim)
    reading = Reading(_end_ratio(values, rising=claim == "rises"), spread, verdict=verdict)
    return noted(reading, runs.k_grid, _k_labels(runs, sampler))


def k_rate(runs: Runs) -> Reading:
    """K-Vib's regret against Theorem 5.2's rate :data:`PAPER_K_RATE` (:func:`k_rate_verdict`);
    the spread gives the baselines' slopes."""
    if runs.k_grid.missing:
        return not_cached(runs.k_grid.missing)
    verdict, slope, spread = k_rate_verdict(_by_k(runs, "regret", "kvib"), PAPER_K_RATE)
    others = {n: _by_k(runs, "regret", n) for n in (*BASELINES, NORMALISED)}
    reading = Reading(
        slope if np.isfinite(slope) else None,
        spread + _baseline_slopes(others, slope),
        verdict=verdict,
    )
    return noted(reading, runs.k_grid, _k_labels(runs, "kvib"))


def _baseline_slopes(per_name: Mapping[str, Mapping[int, Mapping[int, float]]], ours) -> str:
    """What the baselines' regret does on the same K grid: the log-log slope of each (as
    :func:`k_rate_verdict`'s: the mean of the per-seed slopes over the seeds every K has),
    steeper or shallower than K-Vib's ``ours``; "" if none has one. Every sampler's cost
    sum_i pi_i^2 / p_i with sum_i p_i = K carries a 1/K, so a slope alone does not single out
    K-Vib's improvement."""
    parts, none = [], []
    for name, per_k in per_name.items():
        seeds = grid_seeds(per_k)
        slopes = [log_log_slope(list(per_k), [per_k[k][s] for k in per_k]) for s in seeds]
        slope = float(np.mean(slopes)) if slopes else float("nan")
        if not np.isfinite(slope):
            none.append(name)
        elif np.isfinite(ours):
            parts.append(f"{name} {slope:.3g} ({'steeper' if slope < ours else 'shallower'})")
        else:
            parts.append(f"{name} {slope:.3g}")
    if not parts:
        return ""
    text = f"; the baselines' regret on the same grid: log-log slope {', '.join(parts)}"
    if none:
        text += f"; {', '.join(none)}: no slope (a K has no run left)"
    return text + (
        "; every sampler's cost sum pi^2 / p with sum p = K carries a 1/K, so a slope alone "
        "does not single out K-Vib's improvement"
    )


def k_variance(runs: Runs) -> Reading:
    """K-Vib's variance falls as K grows (:func:`k_trend_verdict`); the spread gives every
    sampler's mean variance by K."""
    reading = k_trend(runs, "kvib", "variance", "falls")
    if runs.k_grid.missing:
        return reading
    others = [
        f"{name} "
        + ", ".join(f"{_mean(v):.3g}" if v else "-" for v in _by_k(runs, "variance", name).values())
        for name in kx.GRID_SAMPLERS
        if name != "kvib"
    ]
    spread = (
        "; the others' mean variance by K ('-': no run left, diverged runs left out): "
        + "; ".join(others)
    )
    return dataclasses.replace(reading, spread=reading.spread + spread)


def gamma_stable(runs: Runs, metric: str) -> Reading:
    """K-Vib's ``metric`` over the gamma scales, max / min below :data:`GAMMA_STABLE_RATIO`
    (:func:`stable_verdict`)."""
    grid = runs.gamma
    if grid.missing:
        return not_cached(grid.missing)
    scales = [("kvib", runs.synthetic["k"], scale) for scale in runs.synthetic["gamma_scales"]]
    values = grid.values(metric)
    verdict, ratio, spread = stable_verdict(
        {lab[2]: values.get(lab, {}) for lab in scales}, GAMMA_STABLE_RATIO
    )
    reading = Reading(ratio if np.isfinite(ratio) else None, spread, verdict=verdict)
    return noted(reading, grid, scales)


# ---------------------------------------------------------------------------------------------
# Fig. 4 on the MNIST substitute, and what cannot be computed here


def femnist_unavailable(runs: Runs) -> Reading:
    """Fig. 4's FEMNIST numbers and claims: not computable here."""
    return Reading(None, FEMNIST, verdict="not computable here")


def text_tasks_unavailable(runs: Runs) -> Reading:
    """Fig. 5's text tasks (Sec. 6.3): not computable here."""
    return Reading(None, TEXT_TASKS, verdict="not computable here")


def substitute_speedup(runs: Runs, baseline: str) -> Reading:
    """K-Vib's rounds to the profile's target accuracy minus ``baseline``'s, paired by seed,
    against the claimed speed-up (:func:`aoi_fl.pipeline.paired.verdict`): FEMNIST v2's 2x, the
    smaller of the paper's factors, a gap the paper ties to the number of clients and the data
    variance, so more seeds on these 100 clients cannot decide it (:func:`scoped`)."""
    grid, m, k = runs.mnist, runs.mnist_settings, kx.MNIST_K
    if grid.missing:
        return not_cached(grid.missing)
    rounds = per_seed(
        grid.results,
        lambda r: rounds_to_level(
            r["test_accuracy"], r["eval_round"], m["target"], lower_is_better=False
        ),
    )
    pair = (("kvib", k, None), (baseline, k, None))
    d = paired_differences(rounds, *pair)
    if len(d) < 2 or not np.isfinite(d).all():
        why = (
            f"{baseline} is not in this profile's samplers"
            if baseline not in m["samplers"]
            else "fewer than 2 paired seeds"
            if len(d) < 2
            else "a seed never reached the target"
        )
        return noted(Reading(None, why, verdict="inconclusive"), grid, pair)
    claimed = kx.PAPER_FEMNIST_SPEEDUP["v2"]
    seeds = sorted(set(rounds[pair[0]]) & set(rounds[pair[1]]))
    slow = float(np.mean([rounds[pair[1]][s] for s in seeds]))
    ci = paired.paired_interval(d)
    mde = paired.minimum_detectable_effect(ci.sd, ci.n)
    reading = Reading(
        ci.mean,
        f"{interval_text(ci)}; claimed {-(1 - 1 / claimed) * slow:.3g} rounds; MDE {mde:.3g}",
        verdict=paired.verdict(ci, 1 - 1 / claimed, relative_to=slow).label,
    )
    return noted(scoped(reading, runs.unmet(runs.profile, "v2")), grid, pair)


def substitute_no_better(runs: Runs, baseline: str) -> Reading:
    """``baseline``'s test accuracy over the last tenth of the rounds minus unbiased uniform's,
    paired by seed, non-superiority within :data:`NOT_BETTER_MARGIN`
    (:func:`not_better_verdict`)."""
    grid, k = runs.mnist, kx.MNIST_K
    if grid.missing:
        return not_cached(grid.missing)
    pair = ((baseline, k, None), ("uniform_unbiased", k, None))
    d = paired_differences(grid.values("late_accuracy"), *pair)
    verdict, ci = not_better_verdict(d, NOT_BETTER_MARGIN)
    reading = Reading(float(np.mean(d)) if d else None, interval_text(ci), verdict=verdict)
    return noted(scoped(reading, runs.unmet(runs.profile)), grid, pair)


def substitute_faster(runs: Runs, metric: str, first: str, second: str) -> Reading:
    """Sec. 6.2's steps on the substitute: ``metric`` of sampler ``first`` minus ``second``'s,
    paired by seed (:func:`lower`)."""
    grid, k = runs.mnist, kx.MNIST_K
    if grid.missing:
        return not_cached(grid.missing)
    pair = ((first, k, None), (second, k, None))
    reading = lower(paired_differences(grid.values(metric), *pair))
    return noted(scoped(reading, runs.unmet(runs.profile)), grid, pair)


#: the measures a row of claims.toml may name: Sec. 3's and the runs'
MEASURES = {
    **em.MEASURES,
    **{
        f.__name__: f
        for f in (
            versus_baselines,
            normalised_lead,
            first_feedback,
            isp_early,
            k_trend,
            k_rate,
            k_variance,
            gamma_stable,
            femnist_unavailable,
            text_tasks_unavailable,
            substitute_speedup,
            substitute_no_better,
            substitute_faster,
        )
    },
}
