"""The assertions the Figs 1-4 and Table II notebooks make on what they print (the theory tables of
:mod:`aoi_fl.evidence.aoi.theory_figures`, Table II of :mod:`aoi_fl.evidence.aoi.figures`).

Each ``check_*`` raises ``AssertionError`` with a message naming what failed, prints the checks
it skips in the smoke profile (with the reason), and returns the names of the checks made, which
the notebook prints. The checks that need the ``cpu`` profile's numbers also run as unit tests
(tests/aoi/test_notebook_checks.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from aoi_fl.aoi import markov, sigma
from aoi_fl.evidence.aoi import experiments
from aoi_fl.evidence.aoi.figures import SKEW_BOUNDS, SKEW_ESTIMABILITY
from aoi_fl.evidence.aoi.theory_figures import POLICIES, WINDOWS, SelectionSettings
from aoi_fl.pipeline.profiles import traits

#: the policies that select every client at rate m/n (all but Policy 2)
RATE_M_OVER_N = ("random", "markov_optimal", "markov_nonoptimal")


def check_fig1(p_opt: np.ndarray, p_lin: np.ndarray, n: int, m: int) -> list[str]:
    """The Fig. 1 notebook's chains: Theorem 1's p (``p_opt``) and Policy 4's linear p (``p_lin``)
    have stationary laws (pi P = pi, summing to 1) with pi_0 = m/n (eq. 3) and so, by renewal,
    E[X] = 1/pi_0 = n/m; the linear p rises strictly with the age (Sec. III-B); Var[X] orders
    optimal < linear < random selection's n(n - m)/m^2."""
    for name, p in (("optimal", p_opt), ("linear", p_lin)):
        pi = markov.stationary_distribution(p)
        assert abs(pi.sum() - 1) < 1e-12, f"{name}: stationary law sums to {pi.sum()!r}"
        assert np.allclose(pi @ markov.transition_matrix(p), pi, atol=1e-12), f"{name}: pi P != pi"
        rate = markov.selection_rate(p)
        assert abs(rate - m / n) < 1e-9, f"{name}: pi_0 = {rate}"
        mean = markov.interval_mean(p)
        assert abs(mean - n / m) < 1e-9, f"{name}: E[X] = {mean}"
    assert (np.diff(p_lin) > 0).all(), "Policy 4's linear p must rise strictly with age"
    assert (
        markov.interval_variance(p_opt)
        < markov.interval_variance(p_lin)
        < markov.random_interval_variance(n, m)
    ), "Var[X] must order optimal < linear < random"
    return ["stationary laws", "pi_0 = m/n", "E[X] = n/m", "Var[X] ordering"]


def check_theorem1(theorem1: pd.DataFrame, optimiser: pd.DataFrame, profile: str) -> list[str]:
    """The Fig. 1 notebook's Theorem 1 tables
    (:func:`~aoi_fl.evidence.aoi.theory_figures.print_theorem1`,
    :func:`~aoi_fl.evidence.aoi.theory_figures.print_optimiser`): the closed-form minimum is the
    chain's Var[X] for the theorem's p, which meets pi_0 = m/n and is never more variable than
    random selection; the numerical optimiser reaches the minimum, never goes below it and ends on
    the constraint. Outside smoke (30 starts, not 4) most starts reach it."""
    assert np.allclose(theorem1["closed form"], theorem1["chain Var[X]"], rtol=1e-9, atol=1e-12), (
        "Theorem 1's closed form differs from the chain's Var[X] on the grid"
    )
    assert theorem1["pi_0 = m/n"].all(), "Theorem 1's p misses constraint (3) somewhere on the grid"
    assert (theorem1["chain Var[X]"] <= theorem1["random Var[X]"] + 1e-12).all(), (
        "the optimal chain must never be more variable than random selection"
    )
    assert optimiser["optimiser = closed form"].all(), "the optimiser missed Theorem 1's minimum"
    assert not optimiser["optimiser below it"].any(), "the optimiser went below Theorem 1"
    assert optimiser["pi_0 = m/n"].all(), "the optimiser's p must satisfy pi_0 = m/n"
    if traits(profile).quick:
        print(
            "skipped in smoke: 'most starts reach it' (4 random starts are too few for a majority)"
        )
    else:
        assert optimiser["most starts reach it"].all(), (
            "fewer than half the starts reached the optimum"
        )
    return [f"Theorem 1 on {len(theorem1)} grid points", f"optimiser on {len(optimiser)}"]


def check_fig2(
    closed: Mapping[str, float],
    sim: pd.DataFrame,
    spread: pd.DataFrame,
    gamma: Mapping[str, float],
    cfg: SelectionSettings,
    profile: str,
) -> list[str]:
    """The Fig. 2 notebook's Sigma: Theorem 5 gives Policies 3 and 4 the same value (it depends on
    the chain through pi_0 = m/n only); Theorem 4's (1 - sum q_i^2)/m stays below 1/m for every size
    draw (``spread``); the |S| = 0 term of Theorem 5 is negligible; sum_i E[w_i^2] (``gamma``)
    bounds Sigma from above. Outside smoke: the Monte Carlo runs within 1% of the closed forms,
    the 1000-round means within 2%, and eq. 4's zero start raises Policy 3's 1000-round Sigma by
    more than 3 sd of the stationary traces (the cohort starts in lockstep)."""
    n, m = cfg.n, cfg.m
    assert np.isclose(closed["markov_optimal"], closed["markov_nonoptimal"], rtol=1e-9, atol=0), (
        "Theorem 5 depends on the chain only through pi_0 = m/n: Policies 3 and 4 must agree"
    )
    assert (spread["probabilistic"] < 1 / m).all() and closed["probabilistic"] < 1 / m, (
        "Theorem 4's Sigma = (1 - sum q_i^2) / m can never reach 1/m"
    )
    empty_term = sigma.sigma_markov(n, m / n, empty="forced") - sigma.sigma_markov(
        n, m / n, empty="paper"
    )
    assert abs(empty_term) < 1e-6, "the |S| = 0 term (probability (1 - m/n)^n) must be negligible"
    for k in POLICIES:  # E[w_i^2] = Var[w_i] + E[w_i]^2 >= Var[w_i]
        assert gamma[k] >= closed[k], f"{k}: sum E[w^2] = {gamma[k]} below Sigma = {closed[k]}"
    if traits(profile).quick:
        print(
            f"skipped in smoke: Monte Carlo within 1% of the closed forms and the 1000-round means "
            f"within 2% ({cfg.mc_rounds:,} Monte Carlo rounds and {cfg.trace_seeds} traces are "
            "too few for these tolerances)"
        )
    else:
        # 400,000 rounds: the relative sampling error of the Monte Carlo Sigma is a few 1e-4
        assert (abs(sim["MC / closed"] - 1) < 0.01).all(), f"Monte Carlo off:\n{sim['MC / closed']}"
        rel = abs(sim["1000 rounds (mean)"] / sim["closed form"] - 1)
        assert (rel < 0.02).all(), f"1000-round means off the closed forms:\n{rel}"
        policy3 = sim.loc["markov_optimal"]
        assert policy3["1000 rounds, zero start"] > (
            policy3["1000 rounds (mean)"] + 3 * policy3["1000 rounds (sd)"]
        ), "the zero start (eq. 4) should raise Policy 3's 1000-round Sigma (lockstep cohort)"
    return [
        "Theorems 3-5 against Monte Carlo and traces",
        "Theorem 4 below 1/m",
        "Policies 3 and 4 equal",
        "second moments above Sigma",
    ]


def check_fig3(
    moments: pd.DataFrame, theory: Mapping[str, np.ndarray], n: int, m: int
) -> list[str]:
    """The Fig. 3 notebook's intervals
    (:func:`~aoi_fl.evidence.aoi.theory_figures.interval_moments`): Theorem 1's chain (case 2) puts
    X on floor(r) and floor(r) + 1 with mean r = n/m; every pmf but Policy 2's heavy tail holds all
    but 0.1% of its mass up to its x_max; the simulated mode is the theory's; the policies of rate
    m/n have E[X] = n/m, their traces within 2% (mean) and 5% (variance); Policy 2 repeats clients
    within a round, so its mean interval is longer than n/m, and a 1000-round trace censors its long
    intervals (simulated moments below theory)."""
    r = n / m
    k = int(r)
    law = theory["markov_optimal"]
    assert (
        np.isclose(law[k - 1], k + 1 - r) and np.isclose(law[k], r - k) and np.isclose(law.sum(), 1)
    ), f"Theorem 1 at r = {r:g} puts {k + 1 - r:g} on X = {k} and {r - k:g} on X = {k + 1}: {law}"
    for policy in POLICIES:
        mass = theory[policy].sum()
        assert 0.999 < mass <= 1 + 1e-12 or policy == "probabilistic", (
            f"{policy}: the interval pmf up to {len(theory[policy])} holds {mass}"
        )
        row = moments.loc[policy]
        assert row["mode (sim)"] == row["mode (theory)"], (
            f"{policy}: simulated mode {row['mode (sim)']}"
        )
    for policy in RATE_M_OVER_N:
        row = moments.loc[policy]
        assert np.isclose(row["mean (theory)"], n / m), f"{policy}: E[X] = {row['mean (theory)']}"
        assert abs(row["mean (sim)"] / row["mean (theory)"] - 1) < 0.02, (
            f"{policy}: mean {row['mean (sim)']}"
        )
        assert abs(row["Var (sim)"] / row["Var (theory)"] - 1) < 0.05, (
            f"{policy}: Var {row['Var (sim)']}"
        )
    row = moments.loc["probabilistic"]
    assert row["mean (theory)"] > n / m and row["mean (sim)"] < row["mean (theory)"], row
    assert row["Var (sim)"] < row["Var (theory)"], row
    return [
        "Theorem 1's two-point law",
        "modes",
        "E[X] = n/m for rate-m/n policies",
        "simulated moments within 2% (mean) and 5% (variance)",
        "Policy 2's censoring",
    ]


def check_fig4(
    curves: Mapping[str, np.ndarray],
    closed: Mapping[str, np.ndarray],
    cfg: SelectionSettings,
    profile: str,
    windows: Sequence[int] = WINDOWS,
) -> list[str]:
    """The Fig. 4 notebook's window variance (means over traces of
    :func:`~aoi_fl.evidence.aoi.theory_figures.window_curves`): at T = 1, Y is Bernoulli(m/n) for
    the policies of rate m/n, so sqrt(Var(Y)) = sqrt(r(1 - r)); Policy 2 is the highest at every T;
    from T = 2 on (at T = 1 the 0/1 policies tie) optimal < non-optimal < random < probabilistic.
    Outside smoke the memoryless curves are within 3% of their closed forms up to T = 100."""
    mean = {policy: curves[policy].mean(axis=0) for policy in POLICIES}
    at = {t: i for i, t in enumerate(windows)}
    r = cfg.m / cfg.n
    for policy in RATE_M_OVER_N:
        assert abs(mean[policy][at[1]] - np.sqrt(r * (1 - r))) < 0.005, f"{policy} at T = 1"
    for i, t in enumerate(windows):
        others = [mean[p][i] for p in RATE_M_OVER_N]
        assert mean["probabilistic"][i] > max(others), f"Policy 2 not the highest at T = {t}"
        if t >= 2:
            assert (
                mean["markov_optimal"][i]
                < mean["markov_nonoptimal"][i]
                < mean["random"][i]
                < mean["probabilistic"][i]
            ), f"ordering of the policies broken at T = {t}"
    if traits(profile).quick:
        print(
            f"skipped in smoke: memoryless curves within 3% of their closed forms up to T = 100 "
            f"({cfg.trace_seeds} traces are too few for that tolerance)"
        )
    else:
        for policy, values in closed.items():
            for i, t in enumerate(windows):
                if t <= 100:
                    assert abs(mean[policy][i] / values[i] - 1) < 0.03, (
                        f"{policy}, T = {t}: {mean[policy][i]} vs {values[i]}"
                    )
    return [
        "sqrt(r(1 - r)) at T = 1",
        "Policy 2 the highest at every T",
        "the ordering optimal < non-optimal < random < probabilistic for T >= 2",
        "memoryless closed forms",
    ]


def check_table2(
    tables: Mapping[str, pd.DataFrame], table2: pd.DataFrame, profile: str
) -> list[str]:
    """The Table II notebook's selection skew (:func:`experiments.selection_skew` per dataset,
    Table II from :func:`~aoi_fl.evidence.aoi.figures.table2`): every (split, policy) averages all
    the panel's seeds, its values are finite, rho_lower = min_t rho(S_t, theta_t) (eq. 25) does not
    exceed the average over the same rounds, some round was used and some epoch trained for F*, and
    Table II repeats the per-dataset averages. Outside smoke (one epoch) the local optima met
    the convergence criterion before its epoch cap."""
    for dataset, table in tables.items():
        seeds = experiments.panel(f"main_{dataset}", profile)["seeds"]
        assert (table["seeds"] == seeds).all(), (
            f"{dataset}: rho not over all {seeds} seeds:\n{table['seeds']}"
        )
        columns = [
            c for c in SKEW_ESTIMABILITY + SKEW_BOUNDS[:-1] if seeds > 1 or c != "rho sd over seeds"
        ]
        assert np.isfinite(table[columns].to_numpy(dtype=float)).all(), f"{dataset}: non-finite rho"
        assert (table["rho_lower (min_t)"] <= table["rho (average)"] + 1e-12).all(), (
            f"{dataset}: rho_lower above the average rho"
        )
        assert (table["rounds used"] >= 1).all() and (table["F* epochs"] >= 1).all(), dataset
        for split, policy in table.index:
            assert np.isclose(
                table2.loc[policy, f"{dataset} {split}"],
                table.loc[(split, policy), "rho (average)"],
            ), (dataset, split, policy)
    if traits(profile).quick:
        print(
            "skipped in smoke: local optima within the convergence criterion (smoke trains them "
            "one epoch)"
        )
    else:
        cap = experiments.LOCAL_OPTIMUM_CRITERION[profile].max_epochs
        for dataset, table in tables.items():
            # the criterion stops at tol x mean loss unless it ran out of epochs
            stopped = table["F* epochs"] < cap
            assert stopped.all(), (
                f"{dataset}: local optima hit the epoch cap:\n{table['F* epochs']}"
            )
    return [
        "seeds",
        "finite values",
        "rho_lower <= average",
        "Table II equals the per-dataset tables",
    ]


__all__ = ["check_fig1", "check_fig2", "check_fig3", "check_fig4", "check_table2", "check_theorem1"]
