"""The AoI paper's training experiments (Sec. V, Figs 5-7, Table II) as cached configurations.

:func:`aoi_config` turns (dataset, split, policy, seed) and a panel's settings into a
configuration for :func:`aoi_fl.pipeline.runs.run_experiment`; :func:`panel_grid` lists a panel's
runs and :func:`aoi_fl.pipeline.runs.run_grid` runs the missing ones and returns every result from
the cache. The paper's own numbers are kept here only as labelled reference values (``PAPER_*``),
never used in a computation.

**Local work.** The paper's Table I defines K as the "number of local SGD" steps, and eqs 16-18
index the k-th local "epoch" by one random mini-batch B_{i,k}^t: its "5 local epochs per round"
are 5 mini-batch SGD steps of batch 50 (``local_work=("steps", 5)``, the default), not 5 passes
over the client's data (``("epochs", 5)``: 12 times more local work for a 600-sample client).
Both readings are supported; the ``epochs`` panel keeps the second as a sensitivity check.

**Pairing.** One ``seed`` drives every stream of a run (partition, model initialisation,
sampler, mini-batches drawn from (seed, round, client)), so within a seed the policies of a panel
see the same partition, initial model and mini-batch streams and differ only in the selection.

Panels (:data:`PANELS`, per profile; ``paper`` differs from ``cpu`` only in seeds and horizons):

- ``main``: Figs 5-7 at the paper's settings: 100 clients, 15 per round, m' = 10, "CNN as in
  McMahan et al." (1,663,370 parameters on MNIST), K = 5 local steps of batch 50, lr 0.1 *
  0.998^t, IID and Dirichlet(0.3), all four policies; rounds to the target found exactly by
  screening (:class:`aoi_fl.core.train.TrainSettings`), full evaluation and per-client losses
  (Table II) every 5 rounds;
- ``power``: the same protocol with the small FedSUM MNIST CNN (51,480 parameters), Markov
  optimal and random only, many paired seeds: the spread of the rounds-to-target difference;
- ``epochs``: the other reading of local work (5 passes over the client's data) with the small
  CNN, Markov optimal and random: the setting of this project's first results;
- ``fashion``: Fashion-MNIST as a labelled substitute for Figs 6-7 while CIFAR is absent (the
  small CNN, target fixed before running);
- ``smoke``: a few rounds, one seed, small models on a subset of the data (tests only).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from aoi_fl.aoi.samplers import POLICIES
from aoi_fl.aoi.skew import (
    LocalOptimum,
    LocalOptimumCriterion,
    local_optimum_losses,
    local_optimum_to_criterion,
    skew_sensitivity,
)
from aoi_fl.core.validation import require_choice, require_int
from aoi_fl.pipeline.cache import ResultStore
from aoi_fl.pipeline.data_status import TRAIN_DATASETS, dataset_section
from aoi_fl.pipeline.profiles import PROFILES

DATASETS = ("mnist", "cifar10", "cifar100")
SPLITS = ("iid", "noniid")
LOCAL_WORK_UNITS = ("steps", "epochs")

#: target test accuracy per dataset (Sec. V; Fashion-MNIST's was fixed by us before any run)
TARGETS = {"mnist": 0.97, "cifar10": 0.75, "cifar100": 0.30, "fashion_mnist": 0.85}
#: screening margin per dataset: about 4 standard deviations of the difference between the
#: accuracy on a 2,000-image subset and on the whole 10,000-image test set at the target
#: (sqrt(a (1 - a) / 2000 * (1 - 2000 / 10000)): 0.0034 at a = 0.97, 0.0071 at 0.85, 0.0087 at
#: 0.75, 0.0092 at 0.30)
SCREEN_MARGIN = {"mnist": 0.015, "fashion_mnist": 0.03, "cifar10": 0.035, "cifar100": 0.035}

#: rounds to the target accuracy printed in the paper (Sec. V text), for reference columns only
PAPER_ROUNDS_TO_TARGET: dict[tuple[str, str], dict[str, int]] = {
    ("mnist", "iid"): {"markov_optimal": 39, "random": 45},
    ("mnist", "noniid"): {"markov_optimal": 91, "random": 99},
    ("cifar10", "iid"): {"markov_optimal": 95, "markov_nonoptimal": 105, "random": 108},
    ("cifar10", "noniid"): {"markov_optimal": 239, "markov_nonoptimal": 247, "random": 261},
    ("cifar100", "iid"): {
        "markov_optimal": 139,
        "markov_nonoptimal": 158,
        "random": 154,
        "probabilistic": 188,
    },
    ("cifar100", "noniid"): {"markov_optimal": 87, "random": 93, "probabilistic": 111},
}

#: Table II of the paper: average empirical rho per policy and dataset (reference only)
PAPER_SKEW: dict[str, dict[str, float]] = {
    "random": {"mnist": 0.98, "cifar10": 0.96, "cifar100": 1.33},
    "probabilistic": {"mnist": 0.83, "cifar10": 0.85, "cifar100": 0.93},
    "markov_optimal": {"mnist": 0.98, "cifar10": 1.5, "cifar100": 1.52},
    "markov_nonoptimal": {"mnist": 0.99, "cifar10": 1.27, "cifar100": 1.41},
}

#: clients, selected per round, maximum age, Dirichlet alpha (Sec. V)
N_CLIENTS, M_SELECTED, M_PRIME, ALPHA = 100, 15, 10, 0.3
#: the paper's model per dataset ("CNN as in McMahan et al.")
PAPER_MODELS = {
    "mnist": "mcmahan_cnn",
    "fashion_mnist": "mcmahan_cnn",
    "cifar10": "mcmahan_cifar_cnn",
    "cifar100": "mcmahan_cifar_cnn",
}
#: the two policies of the paper's speed-up claim (Figs 5-7: Markov optimal against random)
PAIR = ("random", "markov_optimal")
#: how many seeds of the paper profile's Fig. 5 pair notebook 05 looks for in the cache: runs
#: computed where the paper's CNN at its horizons is affordable (a GPU), beyond the profile's 5
REGIME_SEEDS = 100
#: what every panel of the cpu and paper profiles shares (Sec. V and the module docstring)
_PROTOCOL: dict[str, Any] = {
    "local_work": ("steps", 5),
    "eval_every": 5,
    "screen_samples": 2000,
    "client_loss_samples": 0,
    "policies": POLICIES,
}
#: Figs 5-7: horizons at least 1.5 times the paper's slowest rounds to target
_MAIN = {**_PROTOCOL, "model": None, "client_loss_samples": 100}
_MAIN_ROUNDS = {
    "mnist": {"iid": 70, "noniid": 150},
    "cifar10": {"iid": 165, "noniid": 400},
    "cifar100": {"iid": 285, "noniid": 170},
}
#: the first results of this project: 5 passes over the client's data, scheduled as then
_EPOCHS = {
    "model": "small_cnn",
    "local_work": ("epochs", 5),
    "eval_every": 1,
    "screen_samples": 0,
    "client_loss_samples": 50,
    "policies": PAIR,
}
_SMALL = {**_PROTOCOL, "model": "small_cnn"}


def _main(dataset: str, seeds: int, scale: float = 1.0) -> dict[str, Any]:
    rounds = {k: int(round(v * scale)) for k, v in _MAIN_ROUNDS[dataset].items()}
    return {**_MAIN, "dataset": dataset, "rounds": rounds, "seeds": seeds}


#: panel settings per profile: dataset, model (None: the paper's), rounds per split, seeds,
#: policies, local work, evaluation schedule (``eval_every``: full test set and, with
#: ``client_loss_samples``, every client's loss; ``screen_samples``: see TrainSettings) and,
#: optionally (smoke only), ``subset`` (n_train / n_test limits of the dataset) and
#: ``n_clients`` / ``m_selected`` (instead of the paper's 100 clients, 15 per round)
PANELS: dict[str, dict[str, dict[str, Any]]] = {
    "cpu": {
        **{f"main_{d}": _main(d, 3) for d in DATASETS},
        "power": {
            **_SMALL,
            "dataset": "mnist",
            "rounds": {"iid": 120, "noniid": 200},
            "seeds": 10,
            "policies": PAIR,
        },
        "epochs": {**_EPOCHS, "dataset": "mnist", "rounds": {"iid": 20, "noniid": 30}, "seeds": 2},
        "fashion": {
            **_SMALL,
            "dataset": "fashion_mnist",
            "rounds": {"iid": 150, "noniid": 300},
            "seeds": 2,
        },
    },
    "paper": {
        **{f"main_{d}": _main(d, 5, scale=1.4) for d in DATASETS},
        "power": {
            **_SMALL,
            "dataset": "mnist",
            "rounds": {"iid": 150, "noniid": 250},
            "seeds": 30,
            "policies": PAIR,
        },
        "epochs": {
            **_EPOCHS,
            "model": "mcmahan_cnn",
            "dataset": "mnist",
            "rounds": {"iid": 30, "noniid": 50},
            "seeds": 3,
        },
        "fashion": {
            **_SMALL,
            "model": None,
            "dataset": "fashion_mnist",
            "rounds": {"iid": 200, "noniid": 400},
            "seeds": 5,
        },
    },
}
#: smoke runs exist for the tests and must take seconds: 20 clients, 3 per round, small models
#: (the FedSUM CNNs: MNIST's on MNIST-shaped data, CIFAR-10's on CIFAR-shaped data, there with
#: two policies only) on the first 2,000 training and 200 test images of a real dataset
#: (``subset``; CIFAR-shaped synthetic data when CIFAR is absent, see :func:`dataset_section`)
_SMOKE = {
    **_SMALL,
    "local_work": ("steps", 2),
    "eval_every": 1,
    "screen_samples": 200,
    "client_loss_samples": 5,
    "rounds": {"iid": 2, "noniid": 2},
    "seeds": 1,
    "subset": {"n_train": 2000, "n_test": 200},
    "n_clients": 20,
    "m_selected": 3,
}
PANELS["smoke"] = {
    "main_mnist": {**_SMOKE, "dataset": "mnist"},
    **{
        f"main_{d}": {**_SMOKE, "dataset": d, "model": "fedsum_cifar_cnn", "policies": PAIR}
        for d in ("cifar10", "cifar100")
    },
    "power": {**_SMOKE, "dataset": "mnist", "policies": PAIR, "seeds": 2},
    "epochs": {
        **_SMOKE,
        **_EPOCHS,
        "dataset": "mnist",
        "rounds": {"iid": 1, "noniid": 1},
        "seeds": 1,
        "local_work": ("epochs", 1),
    },
    "fashion": {**_SMOKE, "dataset": "fashion_mnist", "policies": PAIR},
}


def panel(name: str, profile: str) -> dict[str, Any]:
    """The settings of panel ``name`` (``main_<dataset>``, ``power``, ``epochs``, ``fashion``)."""
    profile = require_choice("profile", profile, PROFILES)
    return dict(PANELS[profile][require_choice("panel", name, PANELS[profile])])


def regime_grid(panel: str = "main_mnist", seeds: int = REGIME_SEEDS) -> list[dict[str, Any]]:
    """Fig. 5's pair (:data:`PAIR`) in the ``paper`` profile's ``panel`` at seeds 0 ..
    ``seeds`` - 1: for ``main_mnist`` the paper's regime (its CNN, K = 5 local steps, its
    horizons); for ``power`` the small-CNN power panel at its paper-profile horizons."""
    panel = require_choice("panel", panel, ("main_mnist", "power"))
    configs = panel_grid(panel, "paper", seeds=range(seeds))
    return [c for c in configs if c["sampler"]["name"] in PAIR]


def schedule(profile: str, dataset: str) -> dict[str, Any]:
    """Rounds per split, number of seeds and local work of ``dataset``'s Figs 5-7 panel."""
    dataset = require_choice("dataset", dataset, DATASETS)
    p = panel(f"main_{dataset}", profile)
    return {**p["rounds"], "seeds": p["seeds"], "local_work": p["local_work"]}


def _local_work(local_work: Sequence[Any]) -> dict[str, int]:
    unit, count = local_work
    unit = require_choice("local_work unit", unit, LOCAL_WORK_UNITS)
    count = require_int("local_work count", count, minimum=1)
    return {"local_steps": count} if unit == "steps" else {"local_epochs": count}


def local_steps_per_round(local_work: Sequence[Any], client_size: int, batch_size: int) -> int:
    """SGD steps one client takes in a round under either reading of local work.

    ``("steps", K)``: K (eqs 16-18, K of Table I); ``("epochs", E)``: E passes of
    ceil(size / batch) mini-batches (the last one the remainder).
    """
    settings = _local_work(local_work)
    size = require_int("client_size", client_size, minimum=1)
    batch = require_int("batch_size", batch_size, minimum=1)
    if "local_steps" in settings:
        return settings["local_steps"]
    return settings["local_epochs"] * -(-size // batch)


def aoi_config(
    dataset: str,
    split: str,
    policy: str,
    seed: int,
    settings: Mapping[str, Any],
    *,
    synthetic: bool = False,
) -> dict[str, Any]:
    """The training configuration of one curve of a panel (``settings``: :func:`panel`)."""
    dataset = require_choice("dataset", dataset, TRAIN_DATASETS)
    split = require_choice("split", split, SPLITS)
    policy = require_choice("policy", policy, POLICIES)
    seed = require_int("seed", seed, minimum=0)
    if synthetic and dataset in ("mnist", "fashion_mnist"):
        raise ValueError(
            f"synthetic=True is for the CIFAR datasets only ({dataset} can be fetched)"
        )
    model: dict[str, Any] = {"name": settings["model"] or PAPER_MODELS[dataset]}
    if dataset.startswith("cifar"):
        model["num_classes"] = 10 if dataset == "cifar10" else 100
    model["seed"] = seed
    n_clients = settings.get("n_clients", N_CLIENTS)
    partition: dict[str, Any] = {"name": "iid", "n_clients": n_clients, "seed": seed}
    if split == "noniid":
        partition.update(name="dirichlet", alpha=ALPHA)
        if synthetic or settings.get("subset"):
            partition["min_size"] = 1  # tiny (synthetic, subset) data cannot give every client 10
    training: dict[str, Any] = {
        "rounds": settings["rounds"][split],
        **_local_work(settings["local_work"]),
        "batch_size": 50,
        "seed": seed,
        "eval_every": settings["eval_every"],
        "lr": {"name": "exponential", "lr0": 0.1, "decay": 0.998},
        "client_loss_samples": settings["client_loss_samples"],
    }
    if settings["screen_samples"]:
        training.update(
            screen_samples=settings["screen_samples"],
            screen_target=TARGETS[dataset],
            screen_margin=SCREEN_MARGIN[dataset],
            keep_params=False,
        )
    return {
        "dataset": dataset_section(dataset, synthetic, settings.get("subset")),
        "partition": partition,
        "model": model,
        "sampler": {
            "name": policy,
            "m": settings.get("m_selected", M_SELECTED),
            "m_prime": M_PRIME,
            "seed": seed,
        },
        "training": training,
    }


def panel_grid(
    name: str,
    profile: str,
    *,
    splits: Sequence[str] = SPLITS,
    seeds: Sequence[int] | None = None,
    synthetic: bool = False,
) -> list[dict[str, Any]]:
    """Every configuration of a panel, seed by seed (a finished seed is a complete pair)."""
    p = panel(name, profile)
    seeds = range(p["seeds"]) if seeds is None else seeds
    return [
        aoi_config(p["dataset"], split, policy, seed, p, synthetic=synthetic)
        for seed in seeds
        for split in splits
        for policy in p["policies"]
    ]


def aoi_grid(
    dataset: str,
    profile: str,
    *,
    splits: Sequence[str] = SPLITS,
    synthetic: bool = False,
) -> list[dict[str, Any]]:
    """Every configuration of one dataset's Figs 5-7 panel: seeds x splits x policies."""
    dataset = require_choice("dataset", dataset, DATASETS)
    return panel_grid(f"main_{dataset}", profile, splits=splits, synthetic=synthetic)


def _local_optimum_key(resolved: Mapping[str, Any], method: dict[str, Any]) -> dict[str, Any]:
    # what F_k(theta_k*) depends on: dataset, partition, model (architecture and initial
    # weights), batch size, seed (mini-batches) and the loss subsets; not the policy
    t = resolved["training"]
    key = {
        "local_optimum": method,
        "dataset": resolved["dataset"],
        "partition": resolved["partition"],
        "model": resolved["model"],
        "batch_size": t["batch_size"],
        "seed": t["seed"],
        "client_loss_samples": t["client_loss_samples"],
    }
    if t["loss"] != "cross_entropy":  # absent for cross-entropy: keeps the older keys valid
        key["loss"] = t["loss"]
    return key


def _local_optimum_meta(trainer: Any) -> dict[str, Any]:
    # the device is not part of the key (as for runs): recorded so a reader can tell where the
    # cached F_k* came from (CPU and GPU agree only to rounding)
    import torch

    return {
        "kind": "local_optimum",
        "device": str(trainer.device),
        "torch_version": torch.__version__,
    }


def local_optima(
    config: dict[str, Any],
    *,
    epochs: int = 20,
    lr: float = 0.05,
    cache_dir: str = "results",
    data_root: str = "data",
    device: str | None = None,
) -> np.ndarray:
    """F_k(theta_k*) of every client of ``config``'s partition after a fixed ``epochs`` epochs of
    solo SGD at ``lr`` (cached; :func:`aoi_fl.aoi.skew.local_optimum_losses`, no convergence check:
    see :func:`local_optima_to_criterion`).

    Depends on the dataset, partition, model (architecture and initial weights) and training
    batch size only, so all policies of one (dataset, split, seed) share it. Computed on
    ``device`` (else the configuration's, :func:`aoi_fl.pipeline.runs.build_trainer`).
    """
    from aoi_fl.pipeline.runs import build_trainer, config_device, resolve_config

    resolved = resolve_config(config)
    key = _local_optimum_key(resolved, {"epochs": epochs, "lr": lr})
    store = ResultStore(cache_dir)
    if (hit := store.load(key)) is not None:
        return hit[1]["losses"]
    trainer = build_trainer(resolved, data_root, device or config_device(config))
    losses = local_optimum_losses(trainer, epochs, lr)
    store.save(key, _local_optimum_meta(trainer), {"losses": losses})
    return losses


def local_optima_to_criterion(
    config: dict[str, Any],
    criterion: LocalOptimumCriterion,
    *,
    cache_dir: str = "results",
    data_root: str = "data",
    device: str | None = None,
) -> LocalOptimum:
    """F_k(theta_k*) of every client of ``config``'s partition, solo SGD run to ``criterion``
    (a :class:`aoi_fl.aoi.skew.LocalOptimumCriterion`), with its residual: a cached
    :class:`aoi_fl.aoi.skew.LocalOptimum` (:func:`aoi_fl.aoi.skew.local_optimum_to_criterion`).

    Shared by all policies of one (dataset, split, seed), like :func:`local_optima`; the key
    holds the criterion. Cost: up to ``criterion.max_epochs`` passes of every client over its
    data, i.e. as many epochs of centralised training on the whole training set. Computed on
    ``device`` like :func:`local_optima`.
    """
    from aoi_fl.pipeline.runs import build_trainer, config_device, resolve_config

    if not isinstance(criterion, LocalOptimumCriterion):
        raise TypeError(
            f"criterion must be a LocalOptimumCriterion, got {type(criterion).__name__}"
        )
    resolved = resolve_config(config)
    key = _local_optimum_key(resolved, {"criterion": criterion.config()})
    store = ResultStore(cache_dir)
    if (hit := store.load(key)) is not None:
        meta, arrays = hit
        return LocalOptimum(
            losses=arrays["losses"],
            residual=arrays["residual"],
            change=float(meta["change"]),
            changes=arrays["changes"],
            epochs=int(meta["epochs"]),
            converged=bool(meta["converged"]),
            device=meta.get("device", "cpu"),  # entries older than the field: all CPU
        )
    trainer = build_trainer(resolved, data_root, device or config_device(config))
    found = local_optimum_to_criterion(trainer, criterion)
    meta = {
        **_local_optimum_meta(trainer),
        "change": found.change,
        "epochs": found.epochs,
        "converged": found.converged,
    }
    arrays = {"losses": found.losses, "residual": found.residual, "changes": found.changes}
    store.save(key, meta, arrays)
    return found


#: the first estimate of theta_k* (:func:`local_optima`): a fixed (epochs, constant learning
#: rate) of solo SGD per client from the initial global model, no convergence check
LOCAL_OPTIMUM = {"smoke": (1, 0.1), "cpu": (10, 0.1), "paper": (20, 0.1)}


#: the estimate of theta_k* Table II uses (:func:`selection_skew`), per profile: solo SGD at the
#: constant learning rate 0.1 from the initial global model in chunks of 5 epochs, until the
#: size-weighted mean absolute loss change over a chunk is at most 0.002 nats (2% of a 0.1-nat
#: loss gap F(theta) - sum_k q_k F_k*), or after 60 epochs; smoke: one epoch (exercises the
#: code path; its residual is large and says so). See
#: :class:`aoi_fl.aoi.skew.LocalOptimumCriterion`.
LOCAL_OPTIMUM_CRITERION = {
    "smoke": LocalOptimumCriterion(chunk_epochs=1, tol=1e-3, max_epochs=1, lr=0.1),
    "cpu": LocalOptimumCriterion(chunk_epochs=5, tol=2e-3, max_epochs=60, lr=0.1),
    "paper": LocalOptimumCriterion(chunk_epochs=5, tol=2e-3, max_epochs=60, lr=0.1),
}


def split_of(config: Mapping[str, Any]) -> str:
    """The split a run's partition belongs to: ``iid``, or ``noniid`` for any other."""
    return "iid" if config["partition"]["name"] == "iid" else "noniid"


def group_runs(results: Iterable[Any]) -> dict[tuple[str, str], list[Any]]:
    """Results grouped by (split, policy), each group ordered by seed."""
    groups: dict[tuple[str, str], list[Any]] = {}
    for r in results:
        groups.setdefault((split_of(r.config), r.config["sampler"]["name"]), []).append(r)
    return {k: sorted(v, key=lambda r: r.config["training"]["seed"]) for k, v in groups.items()}


def _without_seeds(config: Mapping[str, Any]) -> dict[str, Any]:
    """A resolved configuration with every seed removed (what the seeds of a panel share)."""
    return {
        section: {k: v for k, v in options.items() if k != "seed"}
        for section, options in config.items()
    }


#: the columns of :func:`selection_skew`, in order
SKEW_COLUMNS = (
    "rho (average)",
    "rho sd over seeds",
    "rho sd over rounds",
    "rounds used",
    "rho (F* - residual)",
    "rho (F* + residual)",
    "rho (F* = 0)",
    "F* residual (nats)",
    "F* epochs",
    "rho_lower (min_t)",
    "rho_upper (max_t, theta*)",
    "seeds",
    "F* device",
)


def selection_skew(
    results: Sequence[Any],
    profile: str,
    *,
    criterion: LocalOptimumCriterion | None = None,
    cache_dir: str = "results",
    data_root: str = "data",
):
    """Table II: the selection skew rho of every run (eq. 24), averaged over seeds.

    ``results`` are the runs of one panel (:func:`panel_grid`); every run gets F_k(theta_k*)
    from the local optima of its own configuration (:func:`local_optima_to_criterion`, criterion
    :data:`LOCAL_OPTIMUM_CRITERION` of ``profile`` unless ``criterion`` is given). Returns a
    pandas table indexed by (split, policy) with the columns :data:`SKEW_COLUMNS`, each the mean
    over seeds of a per-run value unless said otherwise:

    - ``rho (average)``: the mean over the rounds used of rho(S_t, theta_t) (the paper's Table
      II quantity; :func:`aoi_fl.aoi.skew.skew_of_run`), and its sample sd over seeds;
    - ``rho sd over rounds`` and ``rounds used``: the spread of rho(S_t, theta_t) over the
      rounds it was evaluated at (those with recorded client losses), and how many;
    - ``rho (F* - residual)``, ``rho (F* + residual)``, ``rho (F* = 0)``: the average with
      every F_k* moved by its local optimum's residual, and with F_k* = 0
      (:func:`aoi_fl.aoi.skew.skew_sensitivity`);
    - ``F* residual (nats)`` and ``F* epochs``: the criterion's mean change over the
      last chunk of solo training and the epochs trained (see
      :class:`aoi_fl.aoi.skew.LocalOptimumCriterion`);
    - ``rho_lower (min_t)``: the minimum over the rounds used of rho(S_t, theta_t) (eq. 25);
      ``rho_upper (max_t, theta*)``: the maximum over every round of rho(S_t, theta*) (eq. 26);
    - ``seeds``: the number of runs; ``F* device``: where the local optima were trained
      (:attr:`aoi_fl.aoi.skew.LocalOptimum.device`, the distinct devices joined by ", ").

    Runs of one (split, policy) must differ only in their seeds (one panel at a time).
    """
    import pandas as pd

    from aoi_fl.pipeline.paired import sample_sd
    from aoi_fl.pipeline.runs import client_sizes, resolve_config

    profile = require_choice("profile", profile, PROFILES)
    criterion = LOCAL_OPTIMUM_CRITERION[profile] if criterion is None else criterion
    if not isinstance(criterion, LocalOptimumCriterion):
        raise TypeError(
            f"criterion must be a LocalOptimumCriterion or None, got {type(criterion).__name__}"
        )
    rows = []
    for (split, policy), runs in sorted(group_runs(results).items()):
        shared = {repr(_without_seeds(resolve_config(r.config))) for r in runs}
        if len(shared) > 1:
            raise ValueError(
                f"results: the runs of ({split}, {policy}) differ in more than their seeds; "
                "pass one panel's results at a time"
            )
        values, devices = [], set()
        for run in runs:
            optimum = local_optima_to_criterion(
                run.config, criterion, cache_dir=cache_dir, data_root=data_root
            )
            devices.add(optimum.device)
            sizes = client_sizes(run.config, data_root)
            s = skew_sensitivity(run.history, sizes, optimum.losses, optimum.residual)
            e = s.estimate
            values.append(
                (
                    e.mean,
                    e.sd,
                    e.n_rounds,
                    s.lowered.mean,
                    s.raised.mean,
                    s.zero.mean,
                    optimum.change,
                    optimum.epochs,
                    e.lower,
                    e.upper,
                )
            )
        v = np.array(values, dtype=float)
        mean = v.mean(axis=0)
        rows.append(
            {
                "split": split,
                "policy": policy,
                "rho (average)": mean[0],
                "rho sd over seeds": sample_sd(v[:, 0]),
                "rho sd over rounds": mean[1],
                "rounds used": mean[2],
                "rho (F* - residual)": mean[3],
                "rho (F* + residual)": mean[4],
                "rho (F* = 0)": mean[5],
                "F* residual (nats)": mean[6],
                "F* epochs": mean[7],
                "rho_lower (min_t)": mean[8],
                "rho_upper (max_t, theta*)": mean[9],
                "seeds": len(runs),
                "F* device": ", ".join(sorted(devices)),
            }
        )
    return pd.DataFrame(rows, columns=["split", "policy", *SKEW_COLUMNS]).set_index(
        ["split", "policy"]
    )
