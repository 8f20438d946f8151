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

Theorem 4's rate (:func:`rate_grid`): agnostic FedAvg under Algorithm 1 on the linear regression
at tau = 10, run to each horizon T of a grid with the step eta = c / sqrt(TH) that the theorem
prescribes (Theta(1/sqrt(TH))), one constant c for every T. The constant is tuned once, before
the grid runs, on runs of their own (:func:`rate_tuning_grid`: seeds of another stream, the
middle horizon of the grid), so the slope is not measured on the runs it was selected on.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from aoi_fl.agnostic import algorithms as agnostic
from aoi_fl.core.registry import PALETTE, Style, register_family, register_styles
from aoi_fl.core.validation import renamed, require_choice, require_int, require_real
from aoi_fl.pipeline import plugins
from aoi_fl.pipeline.cache import ResultStore, canonical_json
from aoi_fl.pipeline.profiles import PROFILES
from aoi_fl.pipeline.runs import client_sizes

N_CLIENTS, M_AVAILABLE, TAU = 100, 10, 10.0
#: seed offset of the independent copy of the process that p is estimated from
P_SEED_STREAM = 10_000
#: seed offset of the runs that tune Theorem 4's step constant c (:func:`rate_tuning_grid`):
#: other data, traces and batches than the rate grid's seeds 0, 1, ...
TUNE_SEED_STREAM = 20_000

#: the AoI paper's four policies, named as their plugin registers them: this paper's regime is run
#: under each as a participation process (its names only; the samplers come from the registry)
POLICIES = ("random", "probabilistic", "markov_optimal", "markov_nonoptimal")

#: how figures and ledger rows name the two tasks
TASK_TITLES = {"mnist": "MNIST (logistic regression)", "linear_regression": "linear regression"}

AGGREGATIONS = (
    "agnostic",
    "weighted",
    "weighted_updates",
    "weighted_rescaled",
    "weighted_normalised",
)
# the paper's figures draw agnostic blue and weighted green; "aoi" is a policy's own weights
register_styles(
    {
        "agnostic": Style("agnostic FedAvg (1/|S|)", PALETTE[0], "o"),
        "weighted_updates": Style("weighted FedAvg, eq. 10 on the updates", PALETTE[2], "s"),
        "weighted": Style("weighted FedAvg, eq. 10 as printed (parameters)", PALETTE[8], "x"),
        "weighted_rescaled": Style(
            "weighted FedAvg, updates / N sum p^2 (mean step 1)", PALETTE[5], "v"
        ),
        "weighted_normalised": Style(
            "weighted FedAvg, self-normalised p_i / sum_S p_j", PALETTE[3], "D"
        ),
        "aoi": Style("the policy's own weights (AoI eq. 15)", PALETTE[4], "^"),
    }
)
register_family("agnostic-FedAvg aggregation rules", (*AGGREGATIONS, "aoi"))
#: the rules compared with agnostic FedAvg in Fig. 1 (eq. 10 as printed included)
FIG1_RULES = AGGREGATIONS[1:]
#: the weighted rules of Fig. 2 (eq. 10 as printed diverges under any skew, see Fig. 1)
FIG2_RULES = ("weighted_updates", "weighted_rescaled", "weighted_normalised")
#: a run's converged loss is the mean of its last LAST_EVALUATIONS evaluations (Figs 1-2)
LAST_EVALUATIONS = 5
#: (aggregation form, normalisation) of each weighted rule (:class:`agnostic.WeightedFedAvg`)
_WEIGHTED_FORMS = {
    "weighted": ("weighted_sum", "none"),
    "weighted_updates": ("weighted_delta", "none"),
    "weighted_rescaled": ("weighted_delta", "mean"),
    "weighted_normalised": ("weighted_sum", "round"),  # weights sum to 1: both forms agree
}
PROTOCOLS = ("last_iterate", "algorithm1")
#: the protocol each task is read under by default (the Fig. 1 notebook); the other is a variant
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
    data), so C holds them with a wide margin; the Fig. 1 notebook checks it on every seed and p."""
    return 2.0 * float(np.sqrt(dataset["features"] * (1.0 + dataset["heterogeneity"] ** 2)))


#: the ball C = {||theta||_2 <= BALL_RADIUS} of the ``algorithm1`` protocol (linear regression)
BALL_RADIUS = _ball_radius(TASKS["linear_regression"]["dataset"])
#: the tasks the ``algorithm1`` protocol is defined for (a ball around their optima is known)
ALGORITHM1_TASKS = ("linear_regression",)
#: Fig. 1's (task, protocol) panels: every task with the last iterate, and Algorithm 1 as
#: written where the paper runs it
FIG1_PANELS: tuple[tuple[str, str], ...] = tuple(
    (task, protocol)
    for task in TASKS
    for protocol in (("algorithm1", "last_iterate") if task in ALGORITHM1_TASKS else PROTOCOLS[:1])
)

_SCHEDULE = {
    "smoke": {
        "rounds": {"mnist": 2, "linear_regression": 3},
        "seeds": 1,
        "eval_every": 1,
        "taus": (10.0,),
        "aoi_seeds": 1,
        "p_draws": 2_000,
        "rate_horizons": (2, 4),
        "rate_steps": (0.1, 0.2),
        "rate_tune_seeds": 1,
    },
    "cpu": {
        "rounds": {"mnist": 200, "linear_regression": 300},
        "seeds": 5,
        "eval_every": 10,
        "taus": (5.0, 10.0, 20.0, 50.0, 100.0, float("inf")),
        "aoi_seeds": 3,
        "p_draws": 100_000,
        # Theorem 4: T over a 64x span; c over a factor-2 grid around the constant the Fig. 1
        # runs use (0.005 sqrt(300 * 5) = 0.19)
        "rate_horizons": (20, 40, 80, 160, 320, 640, 1280),
        "rate_steps": (0.05, 0.1, 0.2, 0.4, 0.8),
        "rate_tune_seeds": 3,
    },
    "paper": {
        "rounds": {"mnist": 500, "linear_regression": 1000},
        "seeds": 5,
        "eval_every": 10,
        "taus": (2.0, 5.0, 10.0, 20.0, 50.0, 100.0, float("inf")),
        "aoi_seeds": 5,
        "p_draws": 100_000,
        "rate_horizons": (20, 40, 80, 160, 320, 640, 1280, 2560),
        "rate_steps": (0.05, 0.1, 0.2, 0.4, 0.8),
        "rate_tune_seeds": 5,
    },
}


def schedule(profile: str) -> dict[str, Any]:
    """Rounds per task, seeds, evaluation interval, temperatures, draws behind p, and Theorem
    4's horizons T, step constants c and tuning seeds."""
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


@renamed("cache_dir", "results_dir")
def induced_p(
    process: str,
    seed: int,
    profile: str,
    tau: float | None = None,
    sizes: Any = None,
    results_dir: str | None = None,
) -> np.ndarray:
    """p of eq. 2 for ``process`` (``"exp_prior"`` with ``tau``, or an AoI policy), estimated
    from ``schedule(profile)["p_draws"]`` draws of an independent copy of the process (seed
    ``P_SEED_STREAM + seed``). ``sizes``: the clients' data sizes (Policies 1-2 depend on them;
    default all equal). With ``results_dir`` the estimate is read from the result cache there,
    and a missing one is saved there (except within :func:`p_cache_read_only`). Each call
    returns its own copy: the estimate is memoised per process, and a caller that changed it in
    place would otherwise change every later run's p.
    """
    spec = _sampler_spec(process, P_SEED_STREAM + require_int("seed", seed, minimum=0), tau)
    sizes = np.ones(N_CLIENTS) if sizes is None else np.asarray(sizes, dtype=float)
    key = {
        "induced_p": spec,
        "draws": schedule(profile)["p_draws"],
        "sizes": [float(x) for x in sizes],
    }
    return _induced_p(canonical_json(key), results_dir, _P_CACHE_WRITES).copy()


#: whether :func:`induced_p` saves the estimates it computes (see :func:`p_cache_read_only`)
_P_CACHE_WRITES = True


@contextlib.contextmanager
def p_cache_read_only() -> Iterator[None]:
    """Within it :func:`induced_p` reads cached estimates of p but keeps the ones it has to
    compute in memory only: the claims ledger leaves the result cache as it found it."""
    global _P_CACHE_WRITES
    before, _P_CACHE_WRITES = _P_CACHE_WRITES, False
    try:
        yield
    finally:
        _P_CACHE_WRITES = before


@functools.lru_cache(maxsize=512)
def _induced_p(key_json: str, results_dir: str | None, write: bool = True) -> np.ndarray:
    key = json.loads(key_json)
    store = None if results_dir is None else ResultStore(results_dir)
    if store is not None and (hit := store.load(key)) is not None:
        return hit[1]["p"]
    spec = dict(key["induced_p"])
    sampler = plugins.samplers()[spec.pop("name")](N_CLIENTS, np.asarray(key["sizes"]), **spec)
    p = agnostic.induced_weights(sampler, key["draws"])
    if store is not None and write:
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


@renamed("cache_dir", "results_dir")
def config(
    task: str,
    aggregation: str,
    seed: int,
    profile: str,
    *,
    process: str = "exp_prior",
    tau: float | None = TAU,
    p: Any = None,
    results_dir: str | None = None,
    protocol: str = "last_iterate",
) -> dict[str, Any]:
    """One training run: ``task`` under ``process`` with one aggregation rule.

    ``aggregation``: one of :data:`AGGREGATIONS`, or ``"aoi"`` (FedAvg with the AoI policy's own
    weights). ``p`` (the induced weights, needed by the weighted rules) defaults to
    :func:`induced_p` of the process (kept in ``results_dir``); for the AoI Policies 1-2 pass
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
        p = induced_p(process, seed, profile, tau, results_dir=results_dir)
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


@renamed("cache_dir", "results_dir")
def figure1_grid(profile: str, results_dir: str | None = None) -> list[dict[str, Any]]:
    """Fig. 1: every rule x seeds at tau = 10; MNIST with the last iterate, the linear
    regression under both protocols (Algorithm 1 as written, and the last iterate)."""
    seeds = schedule(profile)["seeds"]
    return [
        config(task, agg, seed, profile, results_dir=results_dir, protocol=protocol)
        for task, protocol in FIG1_PANELS
        for agg in AGGREGATIONS
        for seed in range(seeds)
    ]


@renamed("cache_dir", "results_dir")
def figure2_grid(profile: str, results_dir: str | None = None) -> list[dict[str, Any]]:
    """Fig. 2: both tasks x agnostic and the weighted rules of :data:`FIG2_RULES` x
    temperatures x seeds (last iterate).

    (Eq. 10 on the parameters diverges under any skew, see Fig. 1, so it has no converged loss
    to compare.)
    """
    sched = schedule(profile)
    return [
        config(task, agg, seed, profile, tau=tau, results_dir=results_dir)
        for task in TASKS
        for tau in sched["taus"]
        for agg in ("agnostic", *FIG2_RULES)
        for seed in range(sched["seeds"])
    ]


#: Theorem 4's task: the convex linear regression, the one its analysis covers exactly (Sec. 4)
RATE_TASK = "linear_regression"


def rate_step(c: float, rounds: int, local_steps: int) -> float:
    """Theorem 4's step size eta = c / sqrt(T H) for a horizon of T = ``rounds`` rounds of
    H = ``local_steps`` local steps (the theorem: eta = Theta(1/sqrt(TH)))."""
    c = require_real("c", c, minimum=0.0, strict_minimum=True)
    rounds = require_int("rounds", rounds, minimum=1)
    return c / math.sqrt(rounds * require_int("local_steps", local_steps, minimum=1))


def rate_config(seed: int, profile: str, rounds: int, c: float) -> dict[str, Any]:
    """One run of Theorem 4's check: agnostic FedAvg on :data:`RATE_TASK` under Algorithm 1 as
    analysed (theta_0 = 0, local iterates projected onto C, the averaged iterate reported) at
    tau = 10, for T = ``rounds`` rounds with the step :func:`rate_step` of constant ``c``. It is
    evaluated at the start and at T only: the theorem bounds the averaged iterate at T. Its
    result is stored compressed (its participation trace is most of it, and the grid is
    committed)."""
    spec = config(RATE_TASK, "agnostic", seed, profile, protocol="algorithm1")
    training = spec["training"]
    training["rounds"] = require_int("rounds", rounds, minimum=1)
    training["eval_every"] = rounds
    training["lr"] = {"name": "constant", "lr": rate_step(c, rounds, training["local_steps"])}
    training["compress"] = True
    return spec


def rate_tuning_horizon(profile: str) -> int:
    """The horizon c is tuned at: the middle of the grid (an end would favour that end)."""
    horizons = schedule(profile)["rate_horizons"]
    return horizons[len(horizons) // 2]


def rate_tuning_grid(profile: str) -> list[dict[str, Any]]:
    """The runs that fix Theorem 4's step constant: every c of ``schedule(profile)
    ["rate_steps"]`` x the tuning seeds (:data:`TUNE_SEED_STREAM` + 0, 1, ...) at
    :func:`rate_tuning_horizon`. (The best constant of eq. 9's bound, c* = ||theta_0 -
    theta*|| / sqrt(2 (sigma^2 + 1.5 G^2 + 4 l G H)), does not depend on T: one horizon is
    enough.)"""
    sched = schedule(profile)
    horizon = rate_tuning_horizon(profile)
    return [
        rate_config(TUNE_SEED_STREAM + seed, profile, horizon, c)
        for c in sched["rate_steps"]
        for seed in range(sched["rate_tune_seeds"])
    ]


def rate_grid(profile: str, c: float) -> list[dict[str, Any]]:
    """Theorem 4's grid: every horizon T of ``schedule(profile)["rate_horizons"]`` x seeds,
    eta = ``c`` / sqrt(TH) (``c`` from the tuning runs, :func:`results.tuned_step_constant`)."""
    sched = schedule(profile)
    return [
        rate_config(seed, profile, horizon, c)
        for horizon in sched["rate_horizons"]
        for seed in range(sched["seeds"])
    ]


def task_sizes(task: str, seed: int, data_root: str = "data") -> np.ndarray:
    """The clients' data sizes of ``task``'s partition for ``seed`` (Policies 1-2 use them)."""

    return client_sizes(config(task, "agnostic", seed, "smoke"), data_root)


@renamed("cache_dir", "results_dir")
def aoi_policy_grid(
    profile: str, data_root: str = "data", results_dir: str | None = None
) -> list[dict[str, Any]]:
    """The AoI paper's four policies (m = 15, m' = 10) as participation processes: both tasks x
    policies x {agnostic, weighted on the updates, the policy's own weights (eq. 15)} x seeds."""
    configs = []
    for task in TASKS:
        for seed in range(schedule(profile)["aoi_seeds"]):
            sizes = task_sizes(task, seed, data_root)
            for policy in POLICIES:
                p = induced_p(policy, seed, profile, sizes=sizes, results_dir=results_dir)
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


@renamed("cache_dir", "results_dir")
def process_p(
    config_: dict[str, Any], profile: str, data_root: str = "data", results_dir: str | None = None
) -> np.ndarray:
    """The induced weights p of the participation process a run was trained under."""
    d = describe(config_)
    if d["process"] == "exp_prior":
        return induced_p("exp_prior", d["seed"], profile, d["tau"], results_dir=results_dir)
    sizes = task_sizes(d["task"], d["seed"], data_root)
    return induced_p(d["process"], d["seed"], profile, sizes=sizes, results_dir=results_dir)


#: a problem-(3) loss above this (or not a number) counts as diverged
DIVERGED_LOSS = 1e6
