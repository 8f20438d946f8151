"""The FedSUM paper's CNN experiments (Sec. 5, App. H) as cached configurations, run and summarised.

:func:`plan` lists the runs of one figure group for a profile and dataset:

- ``"main"`` (Figs 1, 5-7): FedSUM, FedSUM-CR and the six baselines under P1-P3, with
  eta_l = 0.01 / sqrt(t/10 + 1) and eta_g = 1;
- ``"cases"`` (Figs 9 and 14): FedSUM under Cases 1-4 and biased sampling, and FedAvg under
  biased sampling (same schedule; Case 2 with p = S/N is P2, so those runs are shared);
- ``"p_grid"`` (Fig. 10): FedSUM under Bernoulli participation with a grid of p, constant
  eta_l = 0.01;
- ``"family"`` (Fig. 11): FedSUM-B, FedSUM and FedSUM-CR under P1-P3, constant eta_l = 0.1;
- ``"long"``: the long-horizon panel, all nine methods (FedSUM-B, FedSUM, FedSUM-CR
  and the six baselines) under P1-P3 to the paper's T = 2000 rounds with the schedule of
  ``"main"``; ``"long_cases"`` adds FedSUM under the cyclic orders and biased sampling and
  FedAvg under biased sampling (claims (iii) and (viii)); ``"long_p_grid"`` is Fig. 10's p
  grid (claim (iv)) at the same horizon. Their model is per profile (:data:`LONG_MODELS`): in
  ``cpu`` multinomial logistic regression on the 784 pixels (convex, 7,850 parameters, a
  round costs a few milliseconds where the CNN's costs ~1.5 s, so 2000 rounds x 54 runs fit
  the CPU), in ``paper`` the paper's CNN. They are evaluated every
  ``long["eval_every"]`` rounds (test set and every client's loss at the same cadence).

Every run of one seed uses the same partition, initial model and participation trace (the
sampler's generator depends on the seed and the pattern only), so algorithms are compared on
identical traces. Setting common to all (Sec. 5, Table 2): N = 100 clients, S = 20 (p = S/N),
Dirichlet alpha = 0.1 label skew (:func:`aoi_fl.data.partition.dirichlet_client_prior`), K = 10
local steps of batch 128, FedAU cutoff 50, FedAWE clip 0.5. The MNIST CNN has no dropout (the
trainer forbids random layers; the paper uses 0.2).

:func:`run_planned` trains what is missing (:func:`aoi_fl.pipeline.runs.run_grid`, full histories in
a work folder) and keeps a compact :class:`RunSummary` per run in the results folder: per
evaluation the training loss (all clients' losses weighted by their data sizes), the
objective f = (1/N) sum_i f_i of the paper (eq. 1), test loss and accuracy; per round the
number of active clients; the trace's tau_max and tau_avg; the method's communication (the
model-size vectors it sends per active client and round, down and up, measured in the
in-process trainer: :func:`aoi_fl.evidence.fedsum.costs.trainer_traffic`), the unit of Fig. 1(b).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aoi_fl.core.delays import trace_metrics
from aoi_fl.core.registry import PALETTE, Style, register_family, register_styles
from aoi_fl.core.validation import require_choice, require_int
from aoi_fl.evidence.fedsum import costs
from aoi_fl.pipeline.cache import ResultStore, config_key
from aoi_fl.pipeline.data_status import dataset_section
from aoi_fl.pipeline.profiles import PROFILES
from aoi_fl.pipeline.runs import client_sizes, resolve_config, run_grid

DATASETS = ("mnist", "cifar10")
MODELS = {"mnist": "small_cnn", "cifar10": "fedsum_cifar_cnn"}
FIGURES = ("main", "cases", "p_grid", "family", "long", "long_cases", "long_p_grid")
#: the long-horizon figures: their own rounds, seeds, evaluation cadence and model
LONG_FIGURES = ("long", "long_cases", "long_p_grid")

MAIN_ALGORITHMS = (
    "fedsum",
    "fedsum_cr",
    "fedavg",
    "fedau",
    "fedawe",
    "fedvarp",
    "mifa",
    "scaffold",
)
BASELINES = MAIN_ALGORITHMS[2:]
FAMILY = ("fedsum_b", "fedsum", "fedsum_cr")
#: every method of the long-horizon panel: the FedSUM family and the six baselines
LONG_ALGORITHMS = ("fedsum_b", *MAIN_ALGORITHMS)
#: per profile, the long-horizon panel's MNIST model: logistic regression where the CPU must
#: afford 2000 rounds (smoke, cpu), the paper's CNN in ``paper``
LONG_MODELS = {
    "smoke": {"name": "logistic_regression", "in_features": 784, "num_classes": 10},
    "cpu": {"name": "logistic_regression", "in_features": 784, "num_classes": 10},
    "paper": {"name": "small_cnn"},
}
#: the local-training engine per long-panel model: the closed-form gradient for the softmax
#: regression (:mod:`aoi_fl.core.engines`, "linear"; no autograd), the default for the CNN
LONG_ENGINES = {"logistic_regression": "linear", "small_cnn": "auto"}
MAIN_PATTERNS = ("P1", "P2", "P3")
CASES = ("P1", "P2", "cyclic", "reshuffled", "biased")
register_styles(
    {
        "P1": Style("P1 / Case 1: uniform S of N", PALETTE[0], "o"),
        "P2": Style("P2 / Case 2: Bernoulli p = S/N", PALETTE[1], "s"),
        "P3": Style("P3: sine-modulated Bernoulli", PALETTE[2], "^"),
        "cyclic": Style("Case 3: deterministic cyclic", PALETTE[3], "D"),
        "reshuffled": Style("Case 4: reshuffled cyclic", PALETTE[4], "v"),
        "biased": Style("biased Bernoulli (App. H.8)", PALETTE[5], "X"),
    }
)
register_family("FedSUM patterns", (*MAIN_PATTERNS, *CASES[2:]))
register_family("FedSUM methods", LONG_ALGORITHMS)

LR0, LR_PERIOD = 0.01, 10.0  # eta_l = 0.01 / sqrt(t/10 + 1) (Sec. 5)
SERVER_LR, FEDAU_CUTOFF, FEDAWE_CLIP, ALPHA = 1.0, 50, 0.5, 0.1
CONSTANT_LR = {"p_grid": 0.01, "family": 0.1, "long_p_grid": 0.01}  # Figs 10 and 11

#: the paper's horizon (Sec. 5, Table 2): a claim about it is not decided by a shorter run
PAPER_ROUNDS = 2000
#: the evaluations averaged into a final value, per profile: the CNN panels of the MNIST and
#: pattern notebooks (``"cnn"``; in ``cpu`` the last evaluation, the curves still rising) and the
#: long-horizon panel (``"long"``); the notebooks and the ledger
#: (:mod:`aoi_fl.evidence.fedsum.claims`)
LAST = {
    "cnn": {"smoke": 1, "cpu": 1, "paper": 10},
    "long": {"smoke": 1, "cpu": 5, "paper": 5},
}
#: the delay notebook's participation traces (nothing trained): the paper's federation, N clients
#: and S active per round, and per profile the rounds and seeds simulated
DELAY_CLIENTS, DELAY_ACTIVE = 100, 20
DELAY_SETTINGS = {
    "smoke": {"rounds": 200, "seeds": (0, 1)},
    "cpu": {"rounds": 2000, "seeds": tuple(range(5))},
    "paper": {"rounds": 2000, "seeds": tuple(range(20))},
}

SVHN_MESSAGE = (
    "SVHN: not implemented in this project (no loader) and not obtainable on the machine this "
    "artifact was built on (no internet). Its panels are left out."
)

#: per profile: federation size, local work, data subset, rounds and seeds per figure group,
#: evaluation interval, samples per client for the training loss, Fig. 10's p grid
_PROFILES: dict[str, dict[str, Any]] = {
    "paper": {
        "n_clients": 100,
        "active": 20,
        "local_steps": 10,
        "batch_size": 128,
        "data": {},
        "rounds": {"main": 2000, "cases": 2000, "p_grid": 2000, "family": 2000},
        "seeds": {"main": 3, "cases": 3, "p_grid": 3, "family": 3},
        "eval_every": 10,
        "client_loss_samples": 10**9,
        "p_grid": (0.05, 0.1, 0.2, 0.5, 1.0),
        "long": {"rounds": 2000, "seeds": 3, "eval_every": 20, "client_loss_samples": 10**9},
    },
    "smoke": {
        "n_clients": 10,
        "active": 2,
        "local_steps": 2,
        "batch_size": 16,
        "data": {"n_train": 2000, "n_test": 300},
        "rounds": {"main": 2, "cases": 2, "p_grid": 2, "family": 2},
        "seeds": {"main": 1, "cases": 1, "p_grid": 1, "family": 1},
        "eval_every": 1,
        "client_loss_samples": 10,
        "p_grid": (0.2, 0.5),
        "long": {"rounds": 4, "seeds": 2, "eval_every": 2, "client_loss_samples": 10},
    },
}

# the cpu profile keeps the paper's federation and local work; only the budget shrinks
_PROFILES["cpu"] = {
    **_PROFILES["paper"],
    "rounds": {"main": 40, "cases": 40, "p_grid": 30, "family": 20},
    "seeds": {"main": 2, "cases": 1, "p_grid": 1, "family": 1},
    "eval_every": 5,
    "client_loss_samples": 100,
    # the long-horizon panel: the paper's horizon, 2 seeds; every client's full loss and the
    # test set every 20 rounds (101 evaluations of a logistic model: cheap)
    "long": {"rounds": 2000, "seeds": 2, "eval_every": 20, "client_loss_samples": 10**9},
}


def profile_settings(profile: str) -> dict[str, Any]:
    """The settings of ``profile`` (a copy; see the module docstring)."""
    return copy.deepcopy(_PROFILES[require_choice("profile", profile, PROFILES)])


def pattern_spec(pattern: str, profile: str, p: float | None = None) -> dict[str, Any]:
    """The sampler section of ``pattern`` (without seed); ``"bernoulli"`` takes ``p``."""
    s = profile_settings(profile)
    n, active = s["n_clients"], s["active"]
    specs = {
        "P1": {"name": "uniform", "s": active},
        "P2": {"name": "bernoulli", "p": active / n},
        "P3": {
            "name": "sine_bernoulli",
            "p": active / n,
            "amplitude": 0.3,
            "offset": 0.7,
            "period": 10.0,
        },
        "cyclic": {"name": "cyclic", "s": active},
        "reshuffled": {"name": "reshuffled_cyclic", "s": active},
        "biased": {"name": "biased"},
        "bernoulli": {"name": "bernoulli", "p": p},
    }
    spec = specs[require_choice("pattern", pattern, specs)]
    if pattern == "bernoulli" and p is None:
        raise ValueError("pattern 'bernoulli' needs p")
    return spec


def algorithm_spec(name: str, profile: str) -> dict[str, Any]:
    """The training-algorithm section of method ``name`` with the paper's settings."""
    name = require_choice("algorithm", name, (*MAIN_ALGORITHMS, "fedsum_b"))
    if name in FAMILY:
        return {
            "name": name,
            "local_steps": profile_settings(profile)["local_steps"],
            "server_lr": SERVER_LR,
        }
    if name == "fedavg":
        return {"name": "fedavg", "aggregation": "weighted_delta", "server_lr": SERVER_LR}
    if name == "fedau":
        return {"name": "fedau", "cutoff": FEDAU_CUTOFF, "server_lr": SERVER_LR}
    if name == "fedawe":
        return {"name": "fedawe", "server_lr": SERVER_LR, "clip": FEDAWE_CLIP}
    return {"name": name, "server_lr": SERVER_LR}


@dataclass(frozen=True)
class Planned:
    """One run of a figure: its labels and its configuration."""

    figure: str
    dataset: str
    pattern: str
    algorithm: str
    seed: int
    config: dict[str, Any]


def fedsum_config(
    dataset: str,
    algorithm: str,
    sampler: dict[str, Any],
    seed: int,
    profile: str,
    rounds: int,
    lr: dict[str, Any],
    *,
    synthetic: bool = False,
    model: dict[str, Any] | None = None,
    evaluation: dict[str, int] | None = None,
) -> dict[str, Any]:
    """One run's configuration (one ``seed`` drives partition, model, trace and batches).

    ``model`` replaces the dataset's CNN (a model section without seed) and ``evaluation``
    the profile's ``eval_every`` / ``client_loss_samples`` and sets the ``engine`` (both for
    the long-horizon panel).
    """
    dataset = require_choice("dataset", dataset, DATASETS)
    seed = require_int("seed", seed, minimum=0)
    if synthetic and dataset == "mnist":
        raise ValueError("synthetic=True is for CIFAR-10 only (MNIST is available)")
    s = profile_settings(profile)
    config = {
        "dataset": dataset_section(dataset, synthetic, s["data"]),
        "partition": {
            "name": "dirichlet_prior",
            "n_clients": s["n_clients"],
            "seed": seed,
            "alpha": ALPHA,
        },
        "model": {**(model or {"name": MODELS[dataset]}), "seed": seed},
        "sampler": {**sampler, "seed": seed},
        "training": {
            "rounds": rounds,
            "local_steps": s["local_steps"],
            "batch_size": s["batch_size"],
            "seed": seed,
            "eval_every": (evaluation or s)["eval_every"],
            "client_loss_samples": (evaluation or s)["client_loss_samples"],
            "lr": lr,
            "algorithm": algorithm_spec(algorithm, profile),
        },
    }
    if evaluation and "engine" in evaluation:
        config["training"]["engine"] = evaluation["engine"]
    return config


def plan(
    figure: str, profile: str, dataset: str = "mnist", *, synthetic: bool = False
) -> list[Planned]:
    """Every run of ``figure`` (see the module docstring) for ``profile`` and ``dataset``."""
    figure = require_choice("figure", figure, FIGURES)
    s = profile_settings(profile)
    long = figure in LONG_FIGURES
    if long and dataset != "mnist":
        raise ValueError("the long-horizon panel is MNIST only")
    rounds = s["long"]["rounds"] if long else s["rounds"][figure]
    n_seeds = s["long"]["seeds"] if long else s["seeds"][figure]
    extra: dict[str, Any] = {}
    if long:
        evaluation = {k: s["long"][k] for k in ("eval_every", "client_loss_samples")}
        evaluation["engine"] = LONG_ENGINES[LONG_MODELS[profile]["name"]]
        extra = {"model": LONG_MODELS[profile], "evaluation": evaluation}
    if figure in CONSTANT_LR:
        lr = {"name": "constant", "lr": CONSTANT_LR[figure]}
    else:
        lr = {"name": "inverse_sqrt", "lr0": LR0, "period": LR_PERIOD}
    # (label, algorithm, sampler section); the p grid's samplers come from p itself
    if figure in ("p_grid", "long_p_grid"):
        cells = [(f"p={p:g}", "fedsum", pattern_spec("bernoulli", profile, p)) for p in s["p_grid"]]
    else:
        pairs = {
            "main": [(pat, alg) for pat in MAIN_PATTERNS for alg in MAIN_ALGORITHMS],
            "cases": [(pat, "fedsum") for pat in CASES] + [("biased", "fedavg")],
            "family": [(pat, alg) for pat in MAIN_PATTERNS for alg in FAMILY],
            "long": [(pat, alg) for pat in MAIN_PATTERNS for alg in LONG_ALGORITHMS],
            # P1 and P2 (Cases 1-2) of FedSUM are in "long"
            "long_cases": [(pat, "fedsum") for pat in CASES[2:]] + [("biased", "fedavg")],
        }[figure]
        cells = [(pat, alg, pattern_spec(pat, profile)) for pat, alg in pairs]
    out = []
    for seed in range(n_seeds):
        for pattern, algorithm, sampler in cells:
            config = fedsum_config(
                dataset, algorithm, sampler, seed, profile, rounds, lr, synthetic=synthetic, **extra
            )
            out.append(Planned(figure, dataset, pattern, algorithm, seed, config))
    return out


# ---------------------------------------------------------------------------------------------
# Compact per-run summaries

#: version of the summary format (part of the summary's cache key)
SUMMARY_VERSION = 1
_SERIES = ("eval_round", "train_loss", "objective", "test_loss", "test_accuracy", "active")


@dataclass(frozen=True)
class RunSummary:
    """What the figures need of one run (see the module docstring); ``planned`` labels it."""

    planned: Planned
    eval_round: np.ndarray
    train_loss: np.ndarray
    objective: np.ndarray
    test_loss: np.ndarray
    test_accuracy: np.ndarray
    active: np.ndarray
    tau_max: int
    tau_avg: float
    communication: tuple[float, float]

    def units(self) -> np.ndarray:
        """Cumulative communication (model-size vectors, both ways) at each evaluation."""
        per_round = np.concatenate(([0], np.cumsum(self.active))) * sum(self.communication)
        return per_round[self.eval_round]


def _summary_key(config: dict[str, Any]) -> dict[str, Any]:

    return {"fedsum_summary": SUMMARY_VERSION, "run": resolve_config(config)}


def summarise(history: dict, sizes: np.ndarray, communication: tuple[float, float]) -> dict:
    """The summary fields of a run's ``history`` (client data ``sizes`` weight the losses)."""
    losses = np.asarray(history["client_losses"], dtype=float)  # (evaluations, clients)
    if losses.ndim != 2 or losses.shape[1] != sizes.size:
        raise ValueError(
            "the run must record every client's loss (training.client_loss_samples > 0)"
        )
    metrics = trace_metrics(history["selected"], sizes.size)
    return {
        "eval_round": np.asarray(history["eval_round"], dtype=np.int64),
        "train_loss": losses @ (sizes / sizes.sum()),
        "objective": losses.mean(axis=1),
        "test_loss": np.asarray(history["test_loss"], dtype=float),
        "test_accuracy": np.asarray(history["test_accuracy"], dtype=float),
        "active": np.array([len(s) for s in history["selected"]], dtype=np.int64),
        "tau_max": metrics.tau_max,
        "tau_avg": metrics.tau_avg,
        "communication": tuple(communication),
    }


def _from_store(p: Planned, hit: tuple[dict, dict]) -> RunSummary:
    body, arrays = hit
    return RunSummary(
        planned=p,
        **{k: arrays[k] for k in _SERIES},
        tau_max=int(body["tau_max"]),
        tau_avg=float(body["tau_avg"]),
        communication=tuple(body["communication"]),
    )


def cached_summaries(
    planned: Sequence[Planned], results_dir: str = "results"
) -> tuple[list[RunSummary], int]:
    """(the :class:`RunSummary` of the planned runs already in ``results_dir``, in order; how
    many are missing): :func:`run_planned`'s cache hits, nothing trained."""
    store = ResultStore(results_dir)
    hits = [store.load(_summary_key(p.config)) for p in planned]
    found = [_from_store(p, hit) for p, hit in zip(planned, hits, strict=True) if hit is not None]
    return found, len(planned) - len(found)


def run_planned(
    planned: Sequence[Planned],
    *,
    results_dir: str = "results",
    work_dir: str = "results/full",
    rerun: bool = False,
    data_root: str = "data",
    workers: int = 1,
    threads: int | None = None,
    progress: bool = True,
) -> list[RunSummary]:
    """The :class:`RunSummary` of every planned run (in order), training the missing ones.

    Summaries are cached in ``results_dir`` (small; committed); the full runs, with their
    checkpoints, go to ``work_dir`` (large; not committed), so an interrupted grid resumes.
    ``rerun`` recomputes everything; ``progress`` shows a bar over the runs being trained.
    """

    store = ResultStore(results_dir)
    keys = [_summary_key(p.config) for p in planned]
    hashes = [config_key(k) for k in keys]
    entries = {h: (k, p.config) for h, k, p in zip(hashes, keys, planned, strict=True)}
    loaded = {h: None if rerun else store.load(key) for h, (key, _) in entries.items()}
    todo = [h for h, hit in loaded.items() if hit is None]

    def keep(i: int, result: Any) -> None:
        # each summary is stored as its run finishes: an interrupted grid keeps them
        key, config = entries[todo[i]]
        # Fig. 1(b)'s unit: what the method sends, measured on a tiny task (a second)
        spec = config["training"]["algorithm"]
        communication = costs.trainer_traffic(costs.traffic_config(spec), data_root)
        fields = summarise(result.history, client_sizes(config, data_root), communication)
        arrays = {k: fields.pop(k) for k in _SERIES}
        fields["communication"] = list(fields["communication"])
        store.save(key, fields, arrays)
        loaded[todo[i]] = store.load(key)  # the stored form, exactly as a later cache hit gives it

    if todo:
        run_grid(
            [entries[h][1] for h in todo],
            results_dir=work_dir,
            rerun=rerun,
            data_root=data_root,
            workers=workers,
            threads=threads,
            progress=progress,
            on_result=keep,
        )
    return [_from_store(p, loaded[h]) for p, h in zip(planned, hashes, strict=True)]
