"""The AoI paper's training experiments (Sec. V, Figs 5-7, Table II) as cached configurations.

:func:`aoi_config` turns (dataset, split, policy, seed) and a panel's settings into a
configuration for :func:`aoi_fl.runs.run_experiment`; :func:`panel_grid` lists a panel's runs and
:func:`aoi_fl.runs.run_grid` runs the missing ones and returns every result from the cache. The
paper's own numbers are kept here only as labelled reference values (``PAPER_*``), never used in a
computation.

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
  screening (:class:`aoi_fl.train.TrainSettings`), full evaluation and per-client losses
  (Table II) every 5 rounds;
- ``power``: the same protocol with the small FedSUM MNIST CNN (51,480 parameters), Markov
  optimal and random only, many paired seeds: the spread of the rounds-to-target difference;
- ``epochs``: the other reading of local work (5 passes over the client's data) with the small
  CNN, Markov optimal and random: the setting of this project's first results;
- ``fashion``: Fashion-MNIST as a labelled substitute for Figs 6-7 while CIFAR is absent (the
  small CNN, target fixed before running);
- ``smoke``: a few rounds, one seed (tests only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ._validation import require_choice, require_int
from .cache import ResultStore
from .profiles import PROFILES
from .samplers import POLICIES

DATASETS = ("mnist", "cifar10", "cifar100")
#: every dataset a panel trains on (Fashion-MNIST: the substitute for CIFAR, ``fashion`` panel)
TRAIN_DATASETS = (*DATASETS, "fashion_mnist")
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
_PAIR = ("random", "markov_optimal")
#: what every panel of the cpu and paper profiles shares (Sec. V and the module docstring)
_PROTOCOL: dict[str, Any] = {
    "local_work": ("steps", 5),
    "eval_every": 5,
    "screen_samples": 2000,
    "client_loss_samples": 0,
    "policies": POLICIES,
    "test_subset": None,
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
    "policies": _PAIR,
    "test_subset": None,
}
_SMALL = {**_PROTOCOL, "model": "small_cnn"}


def _main(dataset: str, seeds: int, scale: float = 1.0) -> dict[str, Any]:
    rounds = {k: int(round(v * scale)) for k, v in _MAIN_ROUNDS[dataset].items()}
    return {**_MAIN, "dataset": dataset, "rounds": rounds, "seeds": seeds}


#: panel settings per profile: dataset, model (None: the paper's), rounds per split, seeds,
#: policies, local work, evaluation schedule (``eval_every``: full test set and, with
#: ``client_loss_samples``, every client's loss; ``screen_samples``: see TrainSettings)
PANELS: dict[str, dict[str, dict[str, Any]]] = {
    "cpu": {
        **{f"main_{d}": _main(d, 3) for d in DATASETS},
        "power": {
            **_SMALL,
            "dataset": "mnist",
            "rounds": {"iid": 120, "noniid": 200},
            "seeds": 10,
            "policies": _PAIR,
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
            "policies": _PAIR,
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
_SMOKE = {
    **_PROTOCOL,
    "model": "small_cnn",
    "local_work": ("steps", 2),
    "eval_every": 1,
    "screen_samples": 200,
    "client_loss_samples": 5,
    "rounds": {"iid": 2, "noniid": 2},
    "seeds": 1,
    # the first 1,000 test images: evaluating all 10,000 after every round dominated the cost
    "test_subset": 1000,
}
PANELS["smoke"] = {
    "main_mnist": {**_SMOKE, "dataset": "mnist"},
    # the full-size CIFAR CNN on synthetic data: two policies exercise its code path
    **{
        f"main_{d}": {**_SMOKE, "model": None, "dataset": d, "policies": _PAIR}
        for d in DATASETS[1:]
    },
    "power": {**_SMOKE, "dataset": "mnist", "policies": _PAIR, "seeds": 2},
    "epochs": {
        **_SMOKE,
        **_EPOCHS,
        "dataset": "mnist",
        "rounds": {"iid": 1, "noniid": 1},
        "seeds": 1,
        "local_work": ("epochs", 1),
        "test_subset": 1000,
    },
    "fashion": {**_SMOKE, "dataset": "fashion_mnist", "policies": _PAIR},
}


def panel(name: str, profile: str) -> dict[str, Any]:
    """The settings of panel ``name`` (``main_<dataset>``, ``power``, ``epochs``, ``fashion``)."""
    profile = require_choice("profile", profile, PROFILES)
    return dict(PANELS[profile][require_choice("panel", name, PANELS[profile])])


def schedule(profile: str, dataset: str) -> dict[str, Any]:
    """Rounds per split, number of seeds and local work of ``dataset``'s Figs 5-7 panel."""
    dataset = require_choice("dataset", dataset, DATASETS)
    p = panel(f"main_{dataset}", profile)
    return {**p["rounds"], "seeds": p["seeds"], "local_work": p["local_work"]}


def dataset_section(
    dataset: str, synthetic: bool, subset: dict[str, int] | None = None
) -> dict[str, Any]:
    """A configuration's ``dataset`` section: the real ``dataset`` (``subset``: its n_train /
    n_test limits), or for a CIFAR dataset in the smoke profile without the data on disk,
    CIFAR-shaped random data (``synthetic``; labelled as such wherever it is used)."""
    if synthetic and dataset not in ("mnist", "fashion_mnist"):
        classes = 10 if dataset == "cifar10" else 100
        return {"name": "synthetic_cifar", "num_classes": classes, "n_train": 2000, "n_test": 200}
    return {"name": dataset, **(subset or {})}


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
    partition: dict[str, Any] = {"name": "iid", "n_clients": N_CLIENTS, "seed": seed}
    if split == "noniid":
        partition.update(name="dirichlet", alpha=ALPHA)
        if synthetic:
            partition["min_size"] = 1  # the tiny synthetic datasets cannot give every client 10
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
        "dataset": dataset_section(
            dataset, synthetic, settings["test_subset"] and {"n_test": settings["test_subset"]}
        ),
        "partition": partition,
        "model": model,
        "sampler": {"name": policy, "m": M_SELECTED, "m_prime": M_PRIME, "seed": seed},
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


def local_optima(
    config: dict[str, Any],
    *,
    epochs: int = 20,
    lr: float = 0.05,
    cache_dir: str = "results",
    data_root: str = "data",
) -> np.ndarray:
    """F_k(theta_k*) of every client of ``config``'s partition (cached; see :mod:`skew`).

    Depends on the dataset, partition, model (architecture and initial weights) and training
    batch size only, so all policies of one (dataset, split, seed) share it.
    """
    from .runs import build_trainer, resolve_config
    from .skew import local_optimum_losses

    resolved = resolve_config(config)
    key = {
        "local_optimum": {"epochs": epochs, "lr": lr},
        "dataset": resolved["dataset"],
        "partition": resolved["partition"],
        "model": resolved["model"],
        "batch_size": resolved["training"]["batch_size"],
        "seed": resolved["training"]["seed"],
        "client_loss_samples": resolved["training"]["client_loss_samples"],
    }
    store = ResultStore(cache_dir)
    if (hit := store.load(key)) is not None:
        return hit[1]["losses"]
    losses = local_optimum_losses(build_trainer(resolved, data_root), epochs, lr)
    store.save(key, {"kind": "local_optimum"}, {"losses": losses})
    return losses


#: epochs and constant learning rate of each client's solo training towards theta_k* (Sec. IV)
LOCAL_OPTIMUM = {"smoke": (1, 0.1), "cpu": (10, 0.1), "paper": (20, 0.1)}


def data_status(dataset: str, profile: str, data_root: str = "data") -> tuple[bool, bool, str]:
    """(run?, synthetic?, message) for a notebook that trains on ``dataset``.

    MNIST and Fashion-MNIST must be present (``make data`` fetches both). CIFAR cannot be
    fetched everywhere: when it is absent, the smoke profile runs on synthetic CIFAR-shaped data
    (said so in the message) and the other profiles run nothing and say how to provide the data.
    """
    from .data import cifar_available, verify_fashion_mnist, verify_mnist

    dataset = require_choice("dataset", dataset, TRAIN_DATASETS)
    profile = require_choice("profile", profile, PROFILES)
    if dataset == "mnist":
        verify_mnist(data_root)  # raises with the command to run when missing or altered
        return True, False, f"MNIST verified under {data_root}/MNIST/raw"
    if dataset == "fashion_mnist":
        verify_fashion_mnist(data_root)
        return True, False, f"Fashion-MNIST verified under {data_root}/FashionMNIST/raw"
    label = {"cifar10": "CIFAR-10", "cifar100": "CIFAR-100"}[dataset]
    folder = {"cifar10": "cifar-10-batches-py", "cifar100": "cifar-100-python"}[dataset]
    if cifar_available(dataset, data_root):
        return True, False, f"{label} found under {data_root}/{folder}"
    if profile == "smoke":
        return (
            True,
            True,
            (
                f"{label} is not on this machine: the smoke profile runs on SYNTHETIC "
                f"{label}-shaped data (class prototypes plus noise) to exercise the code path; "
                "its numbers mean nothing."
            ),
        )
    return (
        False,
        False,
        (
            f"{label} was not found under {data_root}/{folder}, so nothing is trained for it.\n"
            "It cannot be downloaded on the machine this artifact was built on (no internet).\n"
            f"To provide it: on a machine with internet run\n"
            f"    .venv/bin/python -m aoi_fl.data fetch-cifar --name {dataset} --root data\n"
            f"or unpack the python version of {label} from "
            f"https://www.cs.toronto.edu/~kriz/cifar.html into data/ (giving data/{folder}/), "
            "then run make figures again."
        ),
    )


def selection_skew(
    results: Sequence[Any], profile: str, *, cache_dir: str = "results", data_root: str = "data"
):
    """Table II: the selection skew rho of every run (eq. 24), averaged over seeds.

    Returns a pandas table indexed by (split, policy) with the mean over seeds of: the average
    over rounds of rho(S_t, theta_t) ("rho (average)", the paper's Table II quantity, with its
    sample sd over seeds), its minimum over rounds (estimate of rho_lower, eq. 25) and the
    maximum over rounds of rho(S_t, theta*) (estimate of rho_upper, eq. 26), plus the number of
    seeds.
    """
    import pandas as pd

    from .runs import client_sizes
    from .skew import skew_of_run
    from .summaries import group_runs, sample_sd

    epochs, lr = LOCAL_OPTIMUM[require_choice("profile", profile, PROFILES)]
    rows = []
    for (split, policy), runs in sorted(group_runs(results).items()):
        values = []
        for run in runs:
            optimum = local_optima(
                run.config, epochs=epochs, lr=lr, cache_dir=cache_dir, data_root=data_root
            )
            s = skew_of_run(run.history, client_sizes(run.config, data_root), optimum)
            values.append((s.mean, s.lower, s.upper))
        v = np.array(values)
        rows.append(
            {
                "split": split,
                "policy": policy,
                "rho (average)": v[:, 0].mean(),
                "rho sd over seeds": sample_sd(v[:, 0]),
                "rho_lower (min_t)": v[:, 1].mean(),
                "rho_upper (max_t, theta*)": v[:, 2].mean(),
                "seeds": len(runs),
            }
        )
    return pd.DataFrame(rows).set_index(["split", "policy"])
