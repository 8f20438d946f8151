"""The participation processes' induced weights p (eq. 2): Lemma 1's check of the estimator
every run uses, Sec. 4's process (the Fig. 1 notebook), Fig. 2's temperature grid and the AoI
paper's policies as processes (the Fig. 2 notebook)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from aoi_fl.agnostic import algorithms as agnostic
from aoi_fl.agnostic import samplers as participation
from aoi_fl.aoi.samplers import make_sampler
from aoi_fl.core.validation import renamed
from aoi_fl.evidence.agnostic.experiments import (
    M_AVAILABLE,
    N_CLIENTS,
    P_SEED_STREAM,
    POLICIES,
    TASKS,
    TAU,
    describe,
    induced_p,
    schedule,
    task_sizes,
    tau_label,
)
from aoi_fl.evidence.agnostic.objectives import converged_value, objective_curves

#: Lemma 1's check (eq. 2): the estimator of p that every run uses, against exact enumeration on
#: a case small enough to enumerate (8 clients, 3 drawn without replacement from the strongly
#: skewed prior exp(-i/2))
EXACT_CASE = {"n": 8, "m": 3, "tau": 2.0}
#: an estimate agrees with the exact p when every client is within this many standard errors
#: (8 clients at 4 se: a false alarm in fewer than 1 in 1,000 checks)
EXACT_Z = 4.0


def exact_p_check(estimate: Any, weights: Any, m: int, draws: int, z: float = EXACT_Z):
    """(largest |estimate_i - p_i| in standard errors, verdict) of an estimate of eq. 2's p for
    M = ``m`` of N drawn without replacement from the prior ``weights``, made from ``draws``
    draws, against p enumerated exactly (:func:`algorithms.exact_prior_weights`).

    With |S| = m every draw, estimate_i = hits_i / (m draws) has the standard error
    sqrt(P(i in S) (1 - P(i in S)) / draws) / m. "held" when every client is within ``z`` of
    them and the exact p sums to one (Lemma 1), else "not held".
    """
    inclusion, exact = agnostic.exact_prior_weights(weights, m)
    se = np.sqrt(inclusion * (1 - inclusion) / draws) / m
    worst = float(np.max(np.abs(np.asarray(estimate, dtype=float) - exact) / se))
    ok = worst <= z and abs(exact.sum() - 1) < 1e-12
    return worst, "held" if ok else "not held"


def lemma1_check(draws: int) -> tuple[float, str]:
    """:func:`exact_p_check` on :data:`EXACT_CASE` of the estimate every run's p is made with
    (:func:`algorithms.induced_weights` of the prior sampler, an independent stream)."""
    from aoi_fl.agnostic.samplers import PriorSampler, exponential_prior

    n, m, tau = EXACT_CASE["n"], EXACT_CASE["m"], EXACT_CASE["tau"]
    prior = exponential_prior(n, tau)
    estimate = agnostic.induced_weights(PriorSampler(prior, m, seed=P_SEED_STREAM), draws)
    return exact_p_check(estimate, prior, m, draws)


# ---------------------------------------------------------------------------------------------
# The Fig. 1 notebook: the participation process of Sec. 4


class Participation(NamedTuple):
    """Sec. 4's participation process at tau = 10: the prior exp(-i/tau) (normalised), the
    inclusion probabilities P(i in S) and the induced weights p_i = E[1(i in S)/|S|] (eq. 2)."""

    prior: np.ndarray
    inclusion: np.ndarray
    p: np.ndarray


def sec4_participation(profile: str) -> Participation:
    """:class:`Participation` of M = 10 of N = 100 drawn from exp(-i/10), estimated from
    ``schedule(profile)["p_draws"]`` draws of the independent stream every run's p comes from."""
    sampler = participation.prior_sampler(N_CLIENTS, m=M_AVAILABLE, tau=TAU, seed=P_SEED_STREAM)
    inclusion, p = agnostic.inclusion_and_induced(sampler, schedule(profile)["p_draws"])
    return Participation(participation.exponential_prior(N_CLIENTS, TAU), inclusion, p)


# ---------------------------------------------------------------------------------------------
# The Fig. 2 notebook: the skew over the temperature grid and the AoI policies as processes


@renamed("cache_dir", "results_dir")
def temperature_ps(profile: str, results_dir: str | None = None) -> dict[float, list[np.ndarray]]:
    """tau -> every seed's induced p (eq. 2) of the prior exp(-i/tau), over Fig. 2's
    temperature grid (:func:`experiments.schedule`)."""
    sched = schedule(profile)
    return {
        tau: [
            induced_p("exp_prior", s, profile, tau, results_dir=results_dir)
            for s in range(sched["seeds"])
        ]
        for tau in sched["taus"]
    }


def temperature_table(ps: dict[float, list[np.ndarray]]) -> pd.DataFrame:
    """Per temperature of :func:`temperature_ps`, means over seeds: the skew ||p - 1/N||_1,
    N sum p^2 (the mean total weight of eq. 10's weights (N/|S|) p_i per round) and the
    effective number of clients 1/sum p^2."""
    rows = [
        {
            "tau": tau_label(tau),
            "skew ||p - 1/N||_1": np.mean([agnostic.l1_skew(p) for p in seeds]),
            "N sum p^2": np.mean([N_CLIENTS * (p**2).sum() for p in seeds]),
            "effective clients 1/sum p^2": np.mean([1 / (p**2).sum() for p in seeds]),
        }
        for tau, seeds in ps.items()
    ]
    return pd.DataFrame(rows).set_index("tau")


@renamed("cache_dir", "results_dir")
def aoi_policy_ps(
    profile: str, data_root: str = "data", results_dir: str | None = None
) -> dict[tuple[str, int, str], np.ndarray]:
    """(task, seed, policy) -> the induced p (eq. 2) of the AoI paper's policy (m = 15,
    m' = 10) under the data sizes of the task's partition for the seed."""
    ps = {}
    for task in TASKS:
        for seed in range(schedule(profile)["aoi_seeds"]):
            sizes = task_sizes(task, seed, data_root)
            for policy in POLICIES:
                ps[(task, seed, policy)] = induced_p(
                    policy, seed, profile, sizes=sizes, results_dir=results_dir
                )
    return ps


def aoi_policy_p_table(ps: dict[tuple[str, int, str], np.ndarray]) -> pd.DataFrame:
    """Per (task, policy) of :func:`aoi_policy_ps`, means over seeds: the skew ||p - 1/N||_1
    and N sum p^2."""
    rows = [
        {
            "task": task,
            "policy": policy,
            "seed": seed,
            "skew": agnostic.l1_skew(p),
            "N sum p^2": N_CLIENTS * (p**2).sum(),
        }
        for (task, seed, policy), p in ps.items()
    ]
    return pd.DataFrame(rows).groupby(["task", "policy"], sort=False)[["skew", "N sum p^2"]].mean()


def markov_cycle_p(profile: str) -> np.ndarray:
    """The induced p of the optimal Markov policy with m = m' = 10 of N = 100: n/m = 10 is an
    integer, so the chain is a deterministic cycle whose phase groups keep the unequal sizes of
    the initial draw (one realisation's p is not uniform)."""
    sampler = make_sampler("markov_optimal", n=N_CLIENTS, m=10, m_prime=10, seed=P_SEED_STREAM)
    return agnostic.induced_weights(sampler, schedule(profile)["p_draws"])


def aoi_policy_table(
    configs: Any, results: Any, ps: dict[tuple[str, int, str], np.ndarray]
) -> pd.DataFrame:
    """Per (task, policy, rule) of :func:`experiments.aoi_policy_grid`'s runs: mean and sd over
    seeds of the converged loss on problem (3), with the policy's p of :func:`aoi_policy_ps`,
    and on the uniform objective."""
    rows = []
    for cfg, res in zip(configs, results, strict=True):
        d = describe(cfg)
        _, obj_p, obj_u = objective_curves(res, ps[(d["task"], d["seed"], d["process"])])
        rows.append(
            {
                "task": d["task"],
                "policy": d["process"],
                "rule": d["aggregation"],
                "problem (3)": converged_value(obj_p),
                "uniform": converged_value(obj_u),
            }
        )
    return pd.DataFrame(rows).groupby(["task", "policy", "rule"], sort=False).agg(["mean", "std"])
