"""The agnostic paper's measures: what a row of ``claims.toml`` reads from the cached runs of
the Figs 1-2 notebooks and from the library, as a :class:`aoi_fl.pipeline.rules.Reading`. Nothing is
trained here: missing runs leave a reading without a verdict, saying how many are missing."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from aoi_fl.agnostic import algorithms as agnostic
from aoi_fl.evidence.agnostic import experiments as ax
from aoi_fl.evidence.agnostic import results as ar
from aoi_fl.pipeline import paired, runs
from aoi_fl.pipeline.claims import interval_verdict
from aoi_fl.pipeline.rules import Reading


def skew_noise_floor(draws: int, m: float, n: int = ax.N_CLIENTS) -> float:
    """The skew ||p_hat - 1/N||_1 that estimating a uniform p from ``draws`` rounds of ``m``
    of ``n`` clients leaves on average: each count is about Binomial(draws, m/n), so
    p_hat_i = count / (m draws) has sd sqrt(draws (m/n)(1 - m/n)) / (m draws), and
    E|p_hat_i - 1/n| = sqrt(2/pi) sd. A skew threshold below it cannot be resolved."""
    q = m / n
    return float(n * np.sqrt(2 / np.pi) * np.sqrt(draws * q * (1 - q)) / (m * draws))


class Runs:
    """``profile``'s cached runs and the tables read from them, each read once, when a row
    first needs it."""

    def __init__(self, profile: str, results_dir: str, data_root: str) -> None:
        self.profile, self.results_dir, self.data_root = profile, results_dir, data_root
        self.schedule = ax.schedule(profile)

    def grid(self, configs: list) -> tuple[list, list, int]:
        """(configs found, their results, how many missing); each result with its config."""
        found, res = [], []
        for cfg in configs:
            hit, _ = runs.cached_results([cfg], results_dir=self.results_dir)
            if hit:
                found.append(cfg)
                res.append(hit[0])
        return found, res, len(configs) - len(found)

    def table(self, grid: tuple) -> pd.DataFrame | None:
        configs, results, _ = grid
        if not results:
            return None
        return ar.run_table(configs, results, self.profile, self.data_root, self.results_dir)

    @functools.cached_property
    def figure1(self) -> tuple[list, list, int]:
        return self.grid(ax.figure1_grid(self.profile, self.results_dir))

    @functools.cached_property
    def figure1_table(self) -> pd.DataFrame | None:
        return self.table(self.figure1)

    @functools.cached_property
    def figure2(self) -> tuple[list, list, int]:
        return self.grid(ax.figure2_grid(self.profile, self.results_dir))

    @functools.cached_property
    def figure2_table(self) -> pd.DataFrame | None:
        return self.table(self.figure2)

    @functools.cached_property
    def prior_p(self) -> list:
        """Each seed's induced p under Figs 1-2's prior exp(-i/10)."""
        seeds = range(self.schedule["seeds"])
        return [
            ax.induced_p("exp_prior", s, self.profile, ax.TAU, results_dir=self.results_dir)
            for s in seeds
        ]

    @functools.cached_property
    def aoi_p(self) -> tuple[dict, list]:
        """The AoI policies' skews per (task, policy) over seeds, and the correlations of
        Policy 2's p with MNIST's data sizes."""
        skews, corr = {}, []
        for task in ax.TASKS:
            for seed in range(self.schedule["aoi_seeds"]):
                sizes = ax.task_sizes(task, seed, self.data_root)
                for policy in ax.POLICIES:
                    p = ax.induced_p(
                        policy, seed, self.profile, sizes=sizes, results_dir=self.results_dir
                    )
                    skews.setdefault((task, policy), []).append(agnostic.l1_skew(p))
                    if (task, policy) == ("mnist", "probabilistic"):
                        corr.append(float(np.corrcoef(p, sizes)[0, 1]))
        return {k: float(np.mean(v)) for k, v in skews.items()}, corr

    @functools.cached_property
    def aoi_rules(self) -> tuple[dict, int, int]:
        """The rules' converged losses per (task, policy, rule) over the AoI policies' runs,
        how many runs are missing and how many there are in all."""
        grid = ax.aoi_policy_grid(self.profile, self.data_root, self.results_dir)
        configs, results, missing = self.grid(grid)
        losses: dict[tuple, list] = {}
        for cfg, res in zip(configs, results, strict=True):
            d = ax.describe(cfg)
            p = ax.process_p(cfg, self.profile, self.data_root, self.results_dir)
            _, obj_p, _ = ar.objective_curves(res, p)
            losses.setdefault((d["task"], d["process"], d["aggregation"]), []).append(
                ar.converged_value(obj_p)
            )
        return losses, missing, len(configs) + missing


def missing_text(missing: int, total: int) -> str:
    return f"{missing} of {total} runs not cached" if missing else "fewer than 2 seeds"


def task_conditions(table: pd.DataFrame | None, task: str) -> tuple:
    """:func:`results.task_conditions` of the models of ``task``'s runs in ``table``; of the
    configured model where there are none (no run cached: the row is inconclusive anyway)."""
    models = None if table is None else table.loc[table["task"] == task, "model"]
    return ar.task_conditions(task, None if models is None or models.empty else models)


def tabled(read: tuple | None, grid: tuple, conditions: tuple) -> Reading:
    """A row of a table a notebook prints, ``read`` as (ours, spread, criterion verdict), None
    where the table has no such row; the spread says how many runs are missing."""
    configs, _, missing = grid
    total = len(configs) + missing
    if read is None:
        return Reading(None, missing_text(missing, total), conditions=conditions)
    ours, spread, verdict = read
    if missing:
        spread += f"; {missing_text(missing, total)}"
    return Reading(ours, spread, verdict=verdict, conditions=conditions)


def prior_skew(runs: Runs) -> Reading:
    """Sec. 4: the total variation distance ||p - 1/N||_1 / 2 of the prior's induced p from
    uniform, mean over seeds."""
    at10 = runs.prior_p
    skew = float(np.mean([agnostic.l1_skew(p) for p in at10]))
    spread = (
        f"mean over {len(at10)} seeds' estimates of p; ||p - 1/N||_1 = {skew:.3f} (what "
        f"the paper calls the total variation metric); effective clients "
        f"1/sum p^2 = {np.mean([1 / (p**2).sum() for p in at10]):.1f}"
    )
    return Reading(skew / 2, spread)


def lemma1(runs: Runs) -> Reading:
    """Lemma 1 and eq. 2 on a case small enough to enumerate: the estimator every run's p comes
    from against the exact p (:func:`results.lemma1_check`). (An estimate sums to one by
    construction: the sum alone could not fail.)"""
    worst, verdict = ar.lemma1_check(runs.schedule["p_draws"])
    spread = (
        f"largest |estimate - exact| over the {ar.EXACT_CASE['n']} clients, in standard errors "
        f"sqrt(P(i in S)(1 - P(i in S)) / draws) / M; tolerance {ar.EXACT_Z:g}"
    )
    return Reading(worst, spread, verdict=verdict)


def step_total(runs: Runs) -> Reading:
    """eq. 10's weights (N/|S|) p_i have the mean total N sum p^2 per round (eq. 2 gives
    E[1(i in S)/|S|] = p_i): the interval of the cached traces' totals minus it."""
    at10 = runs.prior_p
    step = float(np.mean([ax.N_CLIENTS * (p**2).sum() for p in at10]))
    configs, results, missing = runs.figure1
    totals = []
    for cfg, res in zip(configs, results, strict=True):
        d = ax.describe(cfg)
        # one trace per seed: every rule and protocol of a seed shares it
        if d["aggregation"] == "agnostic" and d["protocol"] == "algorithm1":
            p = at10[d["seed"]]
            totals += [ax.N_CLIENTS * p[list(s)].mean() for s in res.history["selected"]]
    if len(totals) < 2:
        spread = f"{missing} of {len(configs) + missing} runs not cached" if missing else "no trace"
        return Reading(step, spread)
    interval = paired.paired_interval(np.asarray(totals) - step)
    spread = (
        f"mean over seeds' p; the cached traces' total weight minus it: 95% interval "
        f"[{interval.low:+.3f}, {interval.high:+.3f}] over {len(totals)} rounds"
    )
    return Reading(step, spread, interval=(interval.low, interval.high))


def fig1_gap(runs: Runs, *, task: str, protocol: str, aggregation: str) -> Reading:
    """Fig. 1: the converged gap ``aggregation`` - agnostic of the Fig. 1 notebook's claims
    table."""
    table = runs.figure1_table
    lower = ar.fig1_claims_table(table) if table is not None else pd.DataFrame()
    index = ("converged", task, protocol, aggregation)
    read = _fig1_read(lower.loc[index]) if index in lower.index else None
    return tabled(read, runs.figure1, task_conditions(table, task))


def _fig1_read(r: pd.Series) -> tuple:
    if r["diverged"]:
        spread = (
            f"{r['diverged']}/{r['seeds']} paired seeds have a diverged run (loss not finite or "
            "above 5x the initial model's): a diverged run cannot decide the comparison"
        )
        return None, spread, r["criterion verdict"]
    spread = (
        f"weighted - agnostic; lower in {r['agnostic lower']} seeds; 95% t "
        f"interval [{r['95% low']:+.4f}, {r['95% high']:+.4f}] ({r['relative gap']:+.1%})"
    )
    return float(r["gap mean"]), spread, r["criterion verdict"]


def fig1_contrast(runs: Runs, *, aggregation: str) -> Reading:
    """Fig. 1, claim 2: the difference of ``aggregation``'s relative gaps, linear regression
    minus MNIST, of the Fig. 1 notebook's contrast table, with the MNIST runs' instability."""
    table = runs.figure1_table
    contrast = ar.fig1_contrast_table(table) if table is not None else pd.DataFrame()
    conditions = sum((task_conditions(table, task) for task in ax.TASKS), ())
    if aggregation not in contrast.index or np.isnan(contrast.loc[aggregation, "95% low"]):
        return tabled(None, runs.figure1, conditions)
    r = contrast.loc[aggregation]
    spread = (
        f"linear regression {r['relative gap linear regression']:+.1%}, MNIST "
        f"{r['relative gap MNIST']:+.1%}; Welch 95% interval of the difference "
        f"[{r['95% low']:+.3f}, {r['95% high']:+.3f}]"
    )
    if r["criterion verdict"] == "inconclusive":  # an interval, but a diverged pair
        spread += "; a pair has a diverged run: it cannot decide the comparison"
    stable = (table.task == "mnist") & (table.aggregation == aggregation)
    peaks = table[stable & table.diverged_at.isna()]["peak_p"]
    if len(peaks) and peaks.max() > 1.2:  # the loss rose 20% above its start
        spread += (
            f"; MNIST runs unstable: the loss peaks at {peaks.min():.1f}-"
            f"{peaks.max():.1f}x the initial model's before settling"
        )
    read = (float(r["difference"]), spread, r["criterion verdict"])
    return tabled(read, runs.figure1, conditions)


def problem3_excess(runs: Runs) -> Reading:
    """Sec. 2: agnostic FedAvg's converged excess loss over the minimum of the uniform objective
    minus its excess over the minimum of problem (3), paired over seeds, on the linear
    regression under Algorithm 1, where both minima are known in closed form
    (:func:`algorithms.least_squares_optimum`; MNIST has none)."""
    table = runs.figure1_table
    configs, _, missing = runs.figure1
    suffix = f"; {missing_text(missing, len(configs) + missing)}" if missing else ""
    ran = pd.DataFrame() if table is None else table
    if not ran.empty:
        ran = ran[
            (ran.task == "linear_regression")
            & (ran.protocol == "algorithm1")
            & (ran.aggregation == "agnostic")
        ]
    optima = ar.least_squares_optima(runs.profile, results_dir=runs.results_dir) if len(ran) else {}
    # (over the minimum of (3), over the uniform minimum) per seed
    excess = [
        (r.loss_p - optima[r.seed][0][1], r.loss_uniform - optima[r.seed][1][1])
        for r in ran.itertuples()
    ]
    bad = int(ran["diverged_at"].notna().sum()) if len(ran) else 0
    e = np.asarray(excess).reshape(-1, 2)
    _, ci = interval_verdict(e[:, 1] - e[:, 0], "positive")
    if bad or ci is None:
        spread = f"{bad} of {len(e)} runs diverged" if bad else f"{len(e)} seeds"
        return Reading(None, spread + suffix)
    spread = (
        f"excess over the minimum of (3) {e[:, 0].mean():.3f}, over the uniform minimum "
        f"{e[:, 1].mean():.3f}; their difference: 95% t interval [{ci.low:+.3f}, "
        f"{ci.high:+.3f}] over {len(e)} paired seeds"
    )
    return Reading(ci.mean, spread + suffix, interval=(ci.low, ci.high))


def theorem4_slope(runs: Runs) -> Reading:
    """Theorem 4 from the Fig. 1 notebook's rate grid: the step constant c the tuning runs fix
    (:func:`results.tuned_step_constant`), then the per-seed log-log slope of the gap on T and
    its criterion (:func:`results.theorem4_rate`), with the runs' conditions."""
    planned = ax.rate_tuning_grid(runs.profile)
    tuning, tuning_results, missing = runs.grid(planned)
    if missing:
        return Reading(None, f"{missing} of {len(planned)} tuning runs not cached")
    tuned = ar.rate_table(tuning, tuning_results, runs.profile, results_dir=runs.results_dir)
    c = ar.tuned_step_constant(tuned)
    if not np.isfinite(c):
        spread = "every step constant has a diverged tuning run: no c to run the grid with"
        return Reading(None, spread)
    planned = ax.rate_grid(runs.profile, c)
    configs, results, missing = runs.grid(planned)
    if missing:
        return Reading(None, f"{missing} of {len(planned)} runs not cached")
    optima = ar.least_squares_optima(runs.profile, results_dir=runs.results_dir)
    table = ar.rate_table(configs, results, runs.profile, optima, runs.results_dir)
    rate = ar.theorem4_rate(configs, table)
    summary = ar.rate_summary(table)
    spread = (
        f"{ar.rate_text(rate)}; c = {c:g}, the lowest mean loss of {tuned['c'].nunique()} "
        f"constants at T = {ax.rate_tuning_horizon(runs.profile)}, tuning seeds: "
        f"{tuned['seed'].nunique()}; mean gap {summary['gap'].iloc[0]:.3g} at "
        f"T = {summary.index[0]}, {summary['gap'].iloc[-1]:.3g} at T = {summary.index[-1]}"
    )
    ours = float(rate.slopes.mean()) if np.isfinite(rate.slopes).all() else None
    return Reading(ours, spread, verdict=rate.criterion, conditions=rate.conditions)


def fig2_trend(runs: Runs, *, task: str, aggregation: str) -> Reading:
    """Fig. 2: Spearman's rho of the (skew, gap) points of ``task`` and ``aggregation`` with
    its bootstrap interval over seeds (the Fig. 2 notebook's trend table)."""
    table = runs.figure2_table
    trends = ar.trend_table(ar.gaps(table, ax.FIG2_RULES)) if table is not None else None
    read = None
    if trends is not None and (task, aggregation) in trends.index:
        t = trends.loc[(task, aggregation)]
        spread = (
            f"95% bootstrap interval over {t['seeds']} seeds [{t['rho_low']:+.2f}, "
            f"{t['rho_high']:+.2f}]; slope {t['slope']:+.3g} [{t['slope_low']:+.3g}, "
            f"{t['slope_high']:+.3g}]; {t['points']} points"
        )
        if t["diverged"]:
            spread += (
                f"; {t['diverged']} points from a diverged run (loss above 5x the "
                "initial model's): a diverged run cannot decide the trend"
            )
        read = (float(t["rho"]), spread, t["criterion verdict"])
    return tabled(read, runs.figure2, task_conditions(table, task))


def aoi_skew(runs: Runs) -> Reading:
    """The largest mean skew of the AoI policies' p, Policy 2 on MNIST aside, resolved down to
    the noise floor of the draws that estimate p (:func:`skew_noise_floor`)."""
    skews, _ = runs.aoi_p
    near = {k: v for k, v in skews.items() if k != ("mnist", "probabilistic")}
    widest = max(near, key=near.get)
    draws = runs.schedule["p_draws"]
    floor = skew_noise_floor(draws, ax.AOI_M)
    spread = (
        f"largest mean skew over {runs.schedule['aoi_seeds']} seeds: {widest[1]} on "
        f"{widest[0]}; noise floor of {draws} draws {floor:.3f}"
    )
    return Reading(near[widest], spread, resolution=floor)


def aoi_size_correlation(runs: Runs) -> Reading:
    """Policy 2's p on MNIST: its mean skew, tested by its smallest correlation with the data
    sizes over seeds."""
    skews, corr = runs.aoi_p
    spread = (
        f"mean skew over {len(corr)} seeds; correlation with the sizes "
        f"{min(corr):.3f}-{max(corr):.3f}"
    )
    return Reading(skews[("mnist", "probabilistic")], spread, tested=min(corr))


def aoi_rules_range(runs: Runs, *, task: str) -> Reading:
    """Under the AoI policies, the largest range over policies of the rules' mean converged
    loss on problem (3), ``task``; none until every rule of every policy has its runs."""
    losses, missing, total = runs.aoi_rules
    per_policy = {
        policy: [np.mean(v) for (t, pol, _), v in losses.items() if (t, pol) == (task, policy)]
        for policy in ax.POLICIES
    }
    if missing or any(len(v) < 3 for v in per_policy.values()):
        return Reading(None, missing_text(missing, total))
    ranges = {pol: float(np.ptp(v)) for pol, v in per_policy.items()}
    worst = max(ranges, key=ranges.get)
    spread = (
        f"largest range of the rules' mean converged loss over {runs.schedule['aoi_seeds']} "
        f"seeds: {worst}"
    )
    return Reading(ranges[worst], spread)


#: the measures, by the name a row gives in its ``measure`` table
MEASURES = {
    f.__name__: f
    for f in (
        prior_skew,
        lemma1,
        step_total,
        fig1_gap,
        fig1_contrast,
        problem3_excess,
        theorem4_slope,
        fig2_trend,
        aoi_skew,
        aoi_size_correlation,
        aoi_rules_range,
    )
}
