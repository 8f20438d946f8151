"""The AoI paper's training experiments (Sec. V, Figs 5-7, Table II) as cached configurations.

:func:`aoi_config` turns (dataset, split, policy, seed, profile) into a configuration for
:func:`aoi_fl.runs.run_experiment`; :func:`aoi_fl.runs.run_grid` runs the missing ones
(optionally in parallel processes) and returns every result from the cache. The paper's own
numbers are kept here only as labelled reference values (``PAPER_*``), never used in a
computation.

Profiles (see :mod:`aoi_fl.profiles`):

- ``paper``: the paper's setting: 100 clients, 15 per round, m' = 10, "CNN as in McMahan et
  al.", 5 local epochs of batch 50, lr 0.1 * 0.998^t, Dirichlet alpha = 0.3 for non-IID;
- ``cpu``: the same protocol on MNIST with the FedSUM MNIST CNN (51,480 parameters instead of
  1,663,370: the paper CNN needs ~30 s per round, evaluation included, on a 2-core CPU) and
  fewer rounds and seeds;
- ``smoke``: one round of one local epoch, one seed (tests only).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._validation import require_choice, require_int
from .cache import ResultStore
from .profiles import PROFILES
from .samplers import POLICIES

DATASETS = ("mnist", "cifar10", "cifar100")
SPLITS = ("iid", "noniid")

#: target test accuracy per dataset (Sec. V)
TARGETS = {"mnist": 0.97, "cifar10": 0.75, "cifar100": 0.30}

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

_MODELS = {
    "paper": {"mnist": {"name": "mcmahan_cnn"}, "cifar": {"name": "mcmahan_cifar_cnn"}},
    "cpu": {"mnist": {"name": "small_cnn"}, "cifar": {"name": "mcmahan_cifar_cnn"}},
    "smoke": {"mnist": {"name": "small_cnn"}, "cifar": {"name": "mcmahan_cifar_cnn"}},
}

#: per profile and dataset: rounds per split, seeds, local epochs (paper: 5)
_SCHEDULE = {
    "paper": {
        "mnist": {"iid": 150, "noniid": 200, "seeds": 3, "local_epochs": 5},
        "cifar10": {"iid": 300, "noniid": 500, "seeds": 3, "local_epochs": 5},
        "cifar100": {"iid": 300, "noniid": 300, "seeds": 3, "local_epochs": 5},
    },
    "cpu": {
        "mnist": {"iid": 20, "noniid": 30, "seeds": 2, "local_epochs": 5},
        "cifar10": {"iid": 150, "noniid": 300, "seeds": 1, "local_epochs": 5},
        "cifar100": {"iid": 200, "noniid": 200, "seeds": 1, "local_epochs": 5},
    },
    "smoke": {
        "mnist": {"iid": 1, "noniid": 1, "seeds": 1, "local_epochs": 1},
        "cifar10": {"iid": 1, "noniid": 1, "seeds": 1, "local_epochs": 1},
        "cifar100": {"iid": 1, "noniid": 1, "seeds": 1, "local_epochs": 1},
    },
}

#: clients, selected per round, maximum age, Dirichlet alpha (Sec. V)
N_CLIENTS, M_SELECTED, M_PRIME, ALPHA = 100, 15, 10, 0.3
#: samples per client on which the per-client losses F_k (for rho) are measured (smoke: fewer,
#: the smoke CIFAR runs use the full-size CIFAR CNN)
CLIENT_LOSS_SAMPLES = {"paper": 100, "cpu": 50, "smoke": 5}


def schedule(profile: str, dataset: str) -> dict[str, int]:
    """Rounds per split, number of seeds and local epochs of ``dataset`` in ``profile``."""
    profile = require_choice("profile", profile, PROFILES)
    dataset = require_choice("dataset", dataset, DATASETS)
    return dict(_SCHEDULE[profile][dataset])


def dataset_section(
    dataset: str, synthetic: bool, subset: dict[str, int] | None = None
) -> dict[str, Any]:
    """A configuration's ``dataset`` section: the real ``dataset`` (``subset``: its n_train /
    n_test limits), or for a CIFAR dataset in the smoke profile without the data on disk,
    CIFAR-shaped random data (``synthetic``; labelled as such wherever it is used)."""
    if synthetic and dataset != "mnist":
        classes = 10 if dataset == "cifar10" else 100
        return {"name": "synthetic_cifar", "num_classes": classes, "n_train": 2000, "n_test": 200}
    return {"name": dataset, **(subset or {})}


def aoi_config(
    dataset: str,
    split: str,
    policy: str,
    seed: int,
    profile: str,
    *,
    synthetic: bool = False,
) -> dict[str, Any]:
    """The training configuration of one curve of Figs 5-7 (see the module docstring).

    One ``seed`` drives every stream of the run (partition, model initialisation, sampler,
    mini-batches), so seeds are independent replicates of the whole experiment.
    ``synthetic=True`` (CIFAR only) swaps in CIFAR-shaped synthetic data.
    """
    dataset = require_choice("dataset", dataset, DATASETS)
    split = require_choice("split", split, SPLITS)
    policy = require_choice("policy", policy, POLICIES)
    seed = require_int("seed", seed, minimum=0)
    sched = schedule(profile, dataset)
    if synthetic and dataset == "mnist":
        raise ValueError("synthetic=True is for the CIFAR datasets only (MNIST is available)")
    model = copy.deepcopy(_MODELS[profile]["mnist" if dataset == "mnist" else "cifar"])
    if dataset != "mnist":
        model["num_classes"] = 10 if dataset == "cifar10" else 100
    model["seed"] = seed
    partition: dict[str, Any] = {"name": "iid", "n_clients": N_CLIENTS, "seed": seed}
    if split == "noniid":
        partition.update(name="dirichlet", alpha=ALPHA)
        if profile == "smoke":
            partition["min_size"] = 1  # the tiny smoke datasets cannot give every client 10
    return {
        "dataset": dataset_section(dataset, synthetic),
        "partition": partition,
        "model": model,
        "sampler": {"name": policy, "m": M_SELECTED, "m_prime": M_PRIME, "seed": seed},
        "training": {
            "rounds": sched[split],
            "local_epochs": sched["local_epochs"],
            "batch_size": 50,
            "seed": seed,
            "eval_every": 1,
            "lr": {"name": "exponential", "lr0": 0.1, "decay": 0.998},
            "client_loss_samples": CLIENT_LOSS_SAMPLES[profile],
        },
    }


def aoi_grid(
    dataset: str,
    profile: str,
    *,
    splits: Sequence[str] = SPLITS,
    policies: Sequence[str] | None = None,
    synthetic: bool = False,
) -> list[dict[str, Any]]:
    """Every configuration of one dataset's figure: splits x policies x seeds.

    ``policies`` defaults to all four, except in the smoke profile on CIFAR, where two suffice
    to exercise the code path of the full-size CIFAR CNN (the MNIST smoke runs cover all four).
    """
    if policies is None:
        cifar_smoke = profile == "smoke" and dataset != "mnist"
        policies = ("random", "markov_optimal") if cifar_smoke else POLICIES
    seeds = schedule(profile, dataset)["seeds"]
    return [
        aoi_config(dataset, split, policy, seed, profile, synthetic=synthetic)
        for split in splits
        for policy in policies
        for seed in range(seeds)
    ]


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

    MNIST must be present (``make data`` fetches it). CIFAR cannot be fetched everywhere: when it
    is absent, the smoke profile runs on synthetic CIFAR-shaped data (said so in the message) and
    the other profiles run nothing and say how to provide the data.
    """
    from .data import cifar_available, verify_mnist

    dataset = require_choice("dataset", dataset, DATASETS)
    profile = require_choice("profile", profile, PROFILES)
    if dataset == "mnist":
        verify_mnist(data_root)  # raises with the command to run when missing or altered
        return True, False, f"MNIST verified under {data_root}/MNIST/raw"
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
