"""The agnostic-FedAvg paper's experiments (Sec. 4, Figs 1-2) as cached configurations.

Setting (Sec. 4): N = 100 clients, M = 10 available per round, drawn without replacement from the
prior exp(-i/tau) (tau = 10 in Fig. 1; Fig. 2 varies the skew, the paper does not say how: we
vary tau), two tasks, five seeds. The paper states neither the
models, the partitions, the local steps, the learning rates nor the number of rounds; our
choices (the same in every profile, see :data:`TASKS`):

- ``mnist``: multinomial logistic regression (convex, as the analysis assumes) on real MNIST,
  Dirichlet(0.3) label skew (algorithm (A), as in the AoI experiments), H = 5 local steps of
  batch 50, constant lr 0.05;
- ``linear_regression``: :func:`synthetic.linear_regression` (100 samples per client, 20
  features, client optima spread by 0.5), H = 5 local steps of batch 10, constant lr 0.005.

The aggregation rules compared (:data:`AGGREGATIONS`): ``agnostic`` (Algorithm 1), ``weighted``
(eq. 10 as printed, on the parameters), ``weighted_updates`` (eq. 10's weights on the updates),
``weighted_rescaled`` (the same divided by their mean total weight N sum_i p_i^2, so that the
model moves by a total weight of 1 on average) and ``weighted_normalised`` (self-normalised,
p_i / sum_{j in S} p_j: a total weight of 1 in every round, the rule that isolates the
weighting from the step size), each with the induced weights p of the participation process
estimated from draws of an independent copy of it (the paper: "empirically estimated via
repeated draws"; 100,000 draws outside the smoke profile, a standard error of a client's p below
0.002 / M). Losses are recorded per client at every evaluation, so that both the objective of
problem (3), sum_i p_i f_i, and the uniform one can be read off.

Two protocols (:data:`PROTOCOLS`): ``last_iterate`` (the model's seeded random initialisation,
no projection, the last global model is evaluated) and, for the linear regression,
``algorithm1``: Algorithm 1 as written, theta_0 = 0, every local iterate projected onto the ball
C = {||theta||_2 <= :data:`BALL_RADIUS`}, the averaged iterate (1/t) sum_{s <= t} theta_hat^s
evaluated.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

import numpy as np
import pandas as pd

from . import agnostic
from ._validation import require_choice, require_int, require_real
from .cache import ResultStore, canonical_json
from .profiles import PROFILES
from .samplers import POLICIES

N_CLIENTS, M_AVAILABLE, TAU = 100, 10, 10.0
#: seed offset of the independent copy of the process that p is estimated from
P_SEED_STREAM = 10_000

AGGREGATIONS = (
    "agnostic",
    "weighted",
    "weighted_updates",
    "weighted_rescaled",
    "weighted_normalised",
)
#: the weighted rules of Fig. 2 (eq. 10 as printed diverges under any skew, see Fig. 1)
FIG2_RULES = ("weighted_updates", "weighted_rescaled", "weighted_normalised")
#: (aggregation form, normalisation) of each weighted rule (:class:`agnostic.WeightedFedAvg`)
_WEIGHTED_FORMS = {
    "weighted": ("weighted_sum", "none"),
    "weighted_updates": ("weighted_delta", "none"),
    "weighted_rescaled": ("weighted_delta", "mean"),
    "weighted_normalised": ("weighted_sum", "round"),  # weights sum to 1: both forms agree
}
PROTOCOLS = ("last_iterate", "algorithm1")
#: the protocol each task is read under by default (notebook 09); the other is a variant
DEFAULT_PROTOCOL = {"mnist": "last_iterate", "linear_regression": "algorithm1"}

#: the AoI paper's parameters for its policies used as participation processes
AOI_M, AOI_M_PRIME = 15, 10

TASKS: dict[str, dict[str, Any]] = {
    "mnist": {
        "dataset": {"name": "mnist"},
        "partition": {"name": "dirichlet", "n_clients": N_CLIENTS, "alpha": 0.3},
        "model": {"name": "logistic_regression", "in_features": 784, "num_classes": 10},
        "training": {
            "local_steps": 5,
            "batch_size": 50,
            "loss": "cross_entropy",
            "lr": {"name": "constant", "lr": 0.05},
        },
    },
    "linear_regression": {
        "dataset": {
            "name": "linear_regression",
            "n_clients": N_CLIENTS,
            "samples": 100,
            "features": 20,
            "heterogeneity": 0.5,
            "noise": 0.1,
        },
        "partition": {"name": "natural", "n_clients": N_CLIENTS},
        "model": {"name": "linear_regression", "in_features": 20},
        "training": {
            "local_steps": 5,
            "batch_size": 10,
            "loss": "mse",
            "lr": {"name": "constant", "lr": 0.005},
        },
    },
}


def _ball_radius(dataset: dict[str, Any]) -> float:
    """Radius of Algorithm 1's ball C for :func:`synthetic.linear_regression`: twice the
    expected norm sqrt(d (1 + heterogeneity^2)) of a client's model w_i = w* + h u_i (w*, u_i ~
    N(0, I_d)). The optima of sum_i p_i f_i lie near the clients' models (no intercept in the
    data), so C holds them with a wide margin; notebook 09 checks it on every seed and p."""
    return 2.0 * float(np.sqrt(dataset["features"] * (1.0 + dataset["heterogeneity"] ** 2)))


#: the ball C = {||theta||_2 <= BALL_RADIUS} of the ``algorithm1`` protocol (linear regression)
BALL_RADIUS = _ball_radius(TASKS["linear_regression"]["dataset"])
#: the tasks the ``algorithm1`` protocol is defined for (a ball around their optima is known)
ALGORITHM1_TASKS = ("linear_regression",)

_SCHEDULE = {
    "smoke": {
        "rounds": {"mnist": 2, "linear_regression": 3},
        "seeds": 1,
        "eval_every": 1,
        "taus": (10.0,),
        "aoi_seeds": 1,
        "p_draws": 2_000,
    },
    "cpu": {
        "rounds": {"mnist": 200, "linear_regression": 300},
        "seeds": 5,
        "eval_every": 10,
        "taus": (5.0, 10.0, 20.0, 50.0, 100.0, float("inf")),
        "aoi_seeds": 3,
        "p_draws": 100_000,
    },
    "paper": {
        "rounds": {"mnist": 500, "linear_regression": 1000},
        "seeds": 5,
        "eval_every": 10,
        "taus": (2.0, 5.0, 10.0, 20.0, 50.0, 100.0, float("inf")),
        "aoi_seeds": 5,
        "p_draws": 100_000,
    },
}


def schedule(profile: str) -> dict[str, Any]:
    """Rounds per task, seeds, evaluation interval, temperatures and draws behind p."""
    return copy.deepcopy(_SCHEDULE[require_choice("profile", profile, PROFILES)])


def tau_label(tau: float) -> str:
    return "inf" if tau == float("inf") else f"{tau:g}"


def _sampler_spec(process: str, seed: int, tau: float | None) -> dict[str, Any]:
    if process == "exp_prior":
        # JSON has no infinity: the uniform prior is spelled with a huge temperature
        t = 1e300 if tau == float("inf") else require_real("tau", tau, minimum=0.0)
        return {"name": "exp_prior", "m": M_AVAILABLE, "tau": t, "seed": seed}
    policy = require_choice("process", process, POLICIES)
    return {"name": policy, "m": AOI_M, "m_prime": AOI_M_PRIME, "seed": seed}


def induced_p(
    process: str,
    seed: int,
    profile: str,
    tau: float | None = None,
    sizes: Any = None,
    cache_dir: str | None = None,
) -> np.ndarray:
    """p of eq. 2 for ``process`` (``"exp_prior"`` with ``tau``, or an AoI policy), estimated
    from ``schedule(profile)["p_draws"]`` draws of an independent copy of the process (seed
    ``P_SEED_STREAM + seed``). ``sizes``: the clients' data sizes (Policies 1-2 depend on them;
    default all equal). With ``cache_dir`` the estimate is kept in the result cache there.
    """
    spec = _sampler_spec(process, P_SEED_STREAM + require_int("seed", seed, minimum=0), tau)
    sizes = np.ones(N_CLIENTS) if sizes is None else np.asarray(sizes, dtype=float)
    key = {
        "induced_p": spec,
        "draws": schedule(profile)["p_draws"],
        "sizes": [float(x) for x in sizes],
    }
    return _induced_p(canonical_json(key), cache_dir)


@functools.lru_cache(maxsize=512)
def _induced_p(key_json: str, cache_dir: str | None) -> np.ndarray:
    from .runs import SAMPLERS

    key = json.loads(key_json)
    store = None if cache_dir is None else ResultStore(cache_dir)
    if store is not None and (hit := store.load(key)) is not None:
        return hit[1]["p"]
    spec = dict(key["induced_p"])
    sampler = SAMPLERS[spec.pop("name")](N_CLIENTS, np.asarray(key["sizes"]), **spec)
    p = agnostic.induced_weights(sampler, key["draws"])
    if store is not None:
        store.save(key, {"kind": "induced_p"}, {"p": p})
    return p


def _algorithm(aggregation: str, p: np.ndarray, protocol: str = "last_iterate") -> dict[str, Any]:
    aggregation = require_choice("aggregation", aggregation, (*AGGREGATIONS, "aoi"))
    extra = {"radius": BALL_RADIUS, "average": True} if protocol == "algorithm1" else {}
    if aggregation == "agnostic":
        return {"name": "agnostic", **extra}
    if aggregation == "aoi":  # the policy's own weights w_i (AoI paper, eq. 15)
        return {"name": "fedavg", **extra}
    form, normalise = _WEIGHTED_FORMS[aggregation]
    return {
        "name": "weighted",
        "p": [float(x) for x in p],
        "aggregation": form,
        **({"normalise": normalise} if normalise != "none" else {}),
        **extra,
    }


def config(
    task: str,
    aggregation: str,
    seed: int,
    profile: str,
    *,
    process: str = "exp_prior",
    tau: float | None = TAU,
    p: Any = None,
    cache_dir: str | None = None,
    protocol: str = "last_iterate",
) -> dict[str, Any]:
    """One training run: ``task`` under ``process`` with one aggregation rule.

    ``aggregation``: one of :data:`AGGREGATIONS`, or ``"aoi"`` (FedAvg with the AoI policy's own
    weights). ``p`` (the induced weights, needed by the weighted rules) defaults to
    :func:`induced_p` of the process (kept in ``cache_dir``); for the AoI Policies 1-2 pass
    it, as it depends on the partition's sizes. One ``seed`` drives the partition, the model,
    the sampler and the batches. ``protocol``: one of :data:`PROTOCOLS` (``"algorithm1"`` only
    for the tasks in :data:`ALGORITHM1_TASKS`).
    """
    task = require_choice("task", task, TASKS)
    seed = require_int("seed", seed, minimum=0)
    protocol = require_choice("protocol", protocol, PROTOCOLS)
    if protocol == "algorithm1" and task not in ALGORITHM1_TASKS:
        raise ValueError(
            f"protocol='algorithm1' is defined for task in {list(ALGORITHM1_TASKS)} (a ball C "
            f"around the optimum is known there), got task={task!r}"
        )
    sched = schedule(profile)
    spec = copy.deepcopy(TASKS[task])
    if aggregation not in ("agnostic", "aoi") and p is None:
        p = induced_p(process, seed, profile, tau, cache_dir=cache_dir)
    spec["dataset"] = {**spec["dataset"], **({"seed": seed} if task != "mnist" else {})}
    spec["partition"] = {**spec["partition"], **({"seed": seed} if task == "mnist" else {})}
    spec["model"] = {
        **spec["model"],
        "seed": seed,
        **({"init": "zeros"} if protocol == "algorithm1" else {}),
    }
    spec["sampler"] = _sampler_spec(process, seed, tau)
    spec["training"] = {
        **spec["training"],
        "rounds": sched["rounds"][task],
        "seed": seed,
        "eval_every": sched["eval_every"],
        "client_loss_samples": 10**9,  # every sample: f_i exactly
        "algorithm": _algorithm(aggregation, p, protocol),
    }
    return spec


def figure1_grid(profile: str, cache_dir: str | None = None) -> list[dict[str, Any]]:
    """Fig. 1: every rule x seeds at tau = 10; MNIST with the last iterate, the linear
    regression under both protocols (Algorithm 1 as written, and the last iterate)."""
    seeds = schedule(profile)["seeds"]
    return [
        config(task, agg, seed, profile, cache_dir=cache_dir, protocol=protocol)
        for task in TASKS
        for protocol in (
            ("algorithm1", "last_iterate") if task in ALGORITHM1_TASKS else PROTOCOLS[:1]
        )
        for agg in AGGREGATIONS
        for seed in range(seeds)
    ]


def figure2_grid(profile: str, cache_dir: str | None = None) -> list[dict[str, Any]]:
    """Fig. 2: both tasks x agnostic and the weighted rules of :data:`FIG2_RULES` x
    temperatures x seeds (last iterate).

    (Eq. 10 on the parameters diverges under any skew, see Fig. 1, so it has no converged loss
    to compare.)
    """
    sched = schedule(profile)
    return [
        config(task, agg, seed, profile, tau=tau, cache_dir=cache_dir)
        for task in TASKS
        for tau in sched["taus"]
        for agg in ("agnostic", *FIG2_RULES)
        for seed in range(sched["seeds"])
    ]


def task_sizes(task: str, seed: int, data_root: str = "data") -> np.ndarray:
    """The clients' data sizes of ``task``'s partition for ``seed`` (Policies 1-2 use them)."""
    from .runs import client_sizes

    return client_sizes(config(task, "agnostic", seed, "smoke"), data_root)


def aoi_grid(
    profile: str, data_root: str = "data", cache_dir: str | None = None
) -> list[dict[str, Any]]:
    """The AoI paper's four policies (m = 15, m' = 10) as participation processes: both tasks x
    policies x {agnostic, weighted on the updates, the policy's own weights (eq. 15)} x seeds."""
    configs = []
    for task in TASKS:
        for seed in range(schedule(profile)["aoi_seeds"]):
            sizes = task_sizes(task, seed, data_root)
            for policy in POLICIES:
                p = induced_p(policy, seed, profile, sizes=sizes, cache_dir=cache_dir)
                for agg in ("agnostic", "weighted_updates", "aoi"):
                    configs.append(config(task, agg, seed, profile, process=policy, tau=None, p=p))
    return configs


# ---------------------------------------------------------------------------------------------
# Reading the results


def describe(config_: dict[str, Any]) -> dict[str, Any]:
    """(task, process, tau, aggregation, seed, protocol) of a configuration made by
    :func:`config`."""
    task = "mnist" if config_["dataset"]["name"] == "mnist" else "linear_regression"
    sampler = config_["sampler"]
    algorithm = config_["training"]["algorithm"]
    if algorithm["name"] == "weighted":
        form = (algorithm["aggregation"], algorithm.get("normalise", "none"))
        agg = next(k for k, v in _WEIGHTED_FORMS.items() if v == form)
    else:
        agg = "aoi" if algorithm["name"] == "fedavg" else algorithm["name"]
    tau = None
    if sampler["name"] == "exp_prior":
        tau = float("inf") if sampler["tau"] >= 1e300 else float(sampler["tau"])
    return {
        "task": task,
        "process": sampler["name"],
        "tau": tau,
        "aggregation": agg,
        "seed": config_["training"]["seed"],
        "protocol": "algorithm1" if algorithm.get("average") else "last_iterate",
    }


def process_p(
    config_: dict[str, Any], profile: str, data_root: str = "data", cache_dir: str | None = None
) -> np.ndarray:
    """The induced weights p of the participation process a run was trained under."""
    d = describe(config_)
    if d["process"] == "exp_prior":
        return induced_p("exp_prior", d["seed"], profile, d["tau"], cache_dir=cache_dir)
    sizes = task_sizes(d["task"], d["seed"], data_root)
    return induced_p(d["process"], d["seed"], profile, sizes=sizes, cache_dir=cache_dir)


def objective_curves(result: Any, p: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(evaluation rounds, sum_i p_i f_i, (1/N) sum_i f_i) of a run's global models."""
    losses = np.asarray(result.history["client_losses"], dtype=float)
    return (
        np.asarray(result.history["eval_round"]),
        agnostic.objective(losses, p),
        agnostic.objective(losses),
    )


def final_value(curve: np.ndarray, last: int = 5) -> float:
    """The converged value of a loss curve: the mean of its last ``last`` evaluations."""
    return float(np.mean(curve[-last:]))


def trend_over_seeds(
    skew: Any,
    gap: Any,
    seeds: Any,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    rng_seed: int = 0,
) -> dict[str, float]:
    """Does ``gap`` grow with ``skew``? Statistics over all points, with intervals over seeds.

    ``rho``: Spearman's rank correlation of all (skew, gap) points; ``slope``: the least-squares
    slope of gap on skew. Their ``level`` intervals (``rho_low`` .. ``rho_high``, ``slope_low``
    .. ``slope_high``) are percentile bootstrap intervals over seeds: ``n_boot`` times, as many
    seeds as there are are drawn with replacement and all points of each drawn seed (every
    temperature) enter the statistic, so the interval reflects how much the answer depends on
    the seeds (the data, model initialisation, participation trace and batches they drive).
    A resample whose points all share one skew has no rank correlation and is left out.
    """
    from scipy import stats as sps

    x, y = np.asarray(skew, dtype=float), np.asarray(gap, dtype=float)
    s = np.asarray(seeds)
    if not (x.shape == y.shape == s.shape) or x.ndim != 1:
        raise ValueError(
            f"skew, gap and seeds must be 1-d of one length, got shapes {x.shape}, {y.shape}, "
            f"{s.shape}"
        )
    n_boot = require_int("n_boot", n_boot, minimum=1)
    level = require_real("level", level, minimum=0.0, maximum=1.0, strict_minimum=True)
    unique = np.unique(s)
    if unique.size < 2 or np.unique(x).size < 2:
        raise ValueError(
            f"a trend over seeds needs >= 2 seeds and >= 2 distinct skews, got {unique.size} "
            f"seeds and {np.unique(x).size} skews"
        )
    rows = {u: np.flatnonzero(s == u) for u in unique}

    def statistics(idx: np.ndarray) -> tuple[float, float]:
        if np.unique(x[idx]).size < 2:
            return float("nan"), float("nan")
        rho = sps.spearmanr(x[idx], y[idx]).statistic
        return float(rho), float(np.polyfit(x[idx], y[idx], 1)[0])

    rng = np.random.default_rng(rng_seed)
    boot = np.array(
        [
            statistics(np.concatenate([rows[u] for u in rng.choice(unique, unique.size)]))
            for _ in range(n_boot)
        ]
    )
    tail = 100 * (1 - level) / 2
    (rho_low, slope_low), (rho_high, slope_high) = np.nanpercentile(
        boot, [tail, 100 - tail], axis=0
    )
    rho, slope = statistics(np.arange(x.size))
    return {
        "rho": rho,
        "rho_low": float(rho_low),
        "rho_high": float(rho_high),
        "slope": slope,
        "slope_low": float(slope_low),
        "slope_high": float(slope_high),
        "seeds": int(unique.size),
        "points": int(x.size),
    }


def trend_verdict(low: float, high: float) -> str:
    """The verdict on "the gap grows with the skew" from an interval of its trend statistic:
    ``"held"`` when the interval lies above 0, ``"NOT held"`` when below, else
    ``"inconclusive at this budget"``."""
    if low > 0:
        return "held"
    if high < 0:
        return "NOT held"
    return "inconclusive at this budget"


#: a problem-(3) loss above this (or not a number) counts as diverged
DIVERGED_LOSS = 1e6


def run_table(
    configs: Any,
    results: Any,
    profile: str,
    data_root: str = "data",
    cache_dir: str | None = None,
    last: int = 5,
) -> pd.DataFrame:
    """One row per run of :func:`config`: its :func:`describe` fields, the skew of its p, the
    converged loss (:func:`final_value` over the last ``last`` evaluations) on problem (3)
    (``loss_p``) and on the uniform objective (``loss_uniform``), and ``diverged_at``: the first
    evaluation round whose problem-(3) loss is not finite or above :data:`DIVERGED_LOSS`
    (None if none)."""
    rows = []
    for cfg, res in zip(configs, results, strict=True):
        d = describe(cfg)
        p = process_p(cfg, profile, data_root, cache_dir)
        rounds, obj_p, obj_u = objective_curves(res, p)
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(obj_p) | (obj_p > DIVERGED_LOSS)
        rows.append(
            {
                **d,
                "skew": agnostic.skew(p),
                "loss_p": final_value(obj_p, last),
                "loss_uniform": final_value(obj_u, last),
                "diverged_at": int(rounds[np.argmax(bad)]) if bad.any() else None,
            }
        )
    return pd.DataFrame(rows)


def gaps(table: pd.DataFrame, rules: Any = FIG2_RULES) -> pd.DataFrame:
    """Converged loss of each weighted rule minus agnostic FedAvg's, run by run.

    Pairs the rows of ``table`` (:func:`run_table`) that share (task, protocol, process, tau,
    seed): one row per pair and rule in ``rules``, with ``gap_p`` and ``gap_uniform`` (weighted
    minus agnostic, on problem (3) and on the uniform objective), the agnostic run's
    ``agnostic_p`` and the ``skew``; ordered by task, then rule.
    """
    keys = ["task", "protocol", "process", "tau", "seed"]
    base = table[table["aggregation"] == "agnostic"].set_index(keys)
    out = []
    for rule in rules:
        rule = require_choice("rule", rule, AGGREGATIONS[1:])
        other = table[table["aggregation"] == rule].set_index(keys)
        both = base.merge(other, left_index=True, right_index=True, suffixes=("_agnostic", ""))
        out.append(
            pd.DataFrame(
                {
                    "rule": rule,
                    "skew": both["skew"],
                    "gap_p": both["loss_p"] - both["loss_p_agnostic"],
                    "gap_uniform": both["loss_uniform"] - both["loss_uniform_agnostic"],
                    "agnostic_p": both["loss_p_agnostic"],
                }
            ).reset_index()
        )
    table = pd.concat(out, ignore_index=True)
    order = {name: i for i, name in enumerate([*TASKS, *AGGREGATIONS])}
    return table.sort_values(  # task by task (in TASKS order), then rule by rule; stable
        ["task", "rule"], key=lambda col: col.map(order), kind="stable", ignore_index=True
    )
