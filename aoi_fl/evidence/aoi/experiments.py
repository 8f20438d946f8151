"""The AoI paper's training experiments (Sec. V, Figs 5-7, Table II) as cached configurations.

:func:`aoi_config` turns (dataset, split, policy, seed) and a panel's settings into a
configuration for :func:`aoi_fl.pipeline.runs.run_experiment`; :func:`panel_grid` lists a panel's
runs and :func:`aoi_fl.pipeline.runs.run_grid` runs the missing ones and returns every result from
the cache. The paper's own numbers are kept here only as labelled reference values (``PAPER_*``),
never used in a computation. Table II's selection skew of the runs is in
:mod:`~aoi_fl.evidence.aoi.skew_table`, whose names are importable from here too.

**Local work.** The paper's Table I defines K as the "number of local SGD" steps, and eqs 16-18
index the k-th local "epoch" by one random mini-batch B_{i,k}^t: its "5 local epochs per round"
are 5 mini-batch SGD steps of batch 50 (``local_work=("steps", 5)``, the default), not 5 passes
over the client's data (``("epochs", 5)``: 12 times more local work for a 600-sample client).
Both readings are supported; the ``epochs`` panel keeps the second as a sensitivity check.

**Pairing.** One ``seed`` drives every stream of a run (partition, model initialisation,
sampler, mini-batches drawn from (seed, round, client)), so within a seed the policies of a panel
see the same partition, initial model and mini-batch streams and differ only in the selection.

Panels (:data:`PANELS`, per profile; for the main panels ``paper`` differs from ``cpu`` only in
seeds and horizons, and its ``epochs`` and ``fashion`` panels use the paper's CNN):

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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aoi_fl.aoi.samplers import POLICIES
from aoi_fl.core.registry import register_family
from aoi_fl.core.validation import require_choice, require_int
from aoi_fl.evidence.aoi.skew_table import (
    LOCAL_OPTIMUM,
    LOCAL_OPTIMUM_CRITERION,
    SKEW_COLUMNS,
    group_runs,
    local_optima,
    local_optima_to_criterion,
    selection_skew,
    split_of,
)
from aoi_fl.pipeline.data_status import TRAIN_DATASETS, dataset_section
from aoi_fl.pipeline.profiles import PROFILES

__all__ = [
    "ALPHA",
    "DATASETS",
    "LOCAL_OPTIMUM",
    "LOCAL_OPTIMUM_CRITERION",
    "LOCAL_WORK_UNITS",
    "M_PRIME",
    "M_SELECTED",
    "N_CLIENTS",
    "PAIR",
    "PANELS",
    "PAPER_MODELS",
    "PAPER_ROUNDS_TO_TARGET",
    "PAPER_SKEW",
    "POLICIES",
    "REGIME_SEEDS",
    "SCREEN_MARGIN",
    "SKEW_COLUMNS",
    "SPLITS",
    "TARGETS",
    "aoi_config",
    "aoi_grid",
    "group_runs",
    "local_optima",
    "local_optima_to_criterion",
    "local_steps_per_round",
    "panel",
    "panel_grid",
    "plan",
    "PanelPlan",
    "regime_grid",
    "schedule",
    "selection_skew",
    "split_of",
]

# the four policies share every figure of the paper
register_family("AoI policies", POLICIES)

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
#: how many seeds of the paper profile's Fig. 5 pair the Fig. 5 notebook looks for in the cache:
#: runs computed where the paper's CNN at its horizons is affordable (a GPU), beyond the
#: profile's 5
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
    require_choice("local_work unit", unit, LOCAL_WORK_UNITS)
    require_int("local_work count", count, minimum=1)
    return _work(local_work)


def _work(local_work: Sequence[Any]) -> dict[str, int]:
    unit, count = local_work
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
    _check_synthetic(dataset, synthetic)
    _local_work(settings["local_work"])
    return _config(dataset, split, policy, seed, settings, synthetic)


def _config(
    dataset: str, split: str, policy: str, seed: int, settings: Mapping[str, Any], synthetic: bool
) -> dict[str, Any]:
    # names and numbers already checked: by aoi_config and panel_grid, or a panel's own (the
    # tests check the tables)
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
        **_work(settings["local_work"]),
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
    splits = [require_choice("split", split, SPLITS) for split in splits]
    if seeds is not None:
        seeds = [require_int("seed", seed, minimum=0) for seed in seeds]
    return _grid(panel(name, profile), splits, seeds, synthetic)


def _check_synthetic(dataset: str, synthetic: bool) -> None:
    if synthetic and dataset in ("mnist", "fashion_mnist"):
        raise ValueError(
            f"synthetic=True is for the CIFAR datasets only ({dataset} can be fetched)"
        )


def _grid(
    p: Mapping[str, Any], splits: Sequence[str], seeds: Sequence[int] | None, synthetic: bool
) -> list[dict[str, Any]]:
    _check_synthetic(p["dataset"], synthetic)
    seeds = range(p["seeds"]) if seeds is None else seeds
    return [
        _config(p["dataset"], split, policy, seed, p, synthetic)
        for seed in seeds
        for split in splits
        for policy in p["policies"]
    ]


@dataclass(frozen=True)
class PanelPlan:
    """A panel of one profile, read once (:func:`plan`): its settings (:func:`panel`), whether
    it trains on synthetic data, and its configurations (:func:`panel_grid`)."""

    name: str
    profile: str
    settings: Mapping[str, Any]
    synthetic: bool
    configs: tuple[dict[str, Any], ...]

    @property
    def dataset(self) -> str:
        return self.settings["dataset"]

    @property
    def description(self) -> str:
        """One line naming the panel's model, local work, horizons, seeds and policies."""
        p = self.settings
        unit, count = p["local_work"]
        model = p["model"] or PAPER_MODELS[p["dataset"]]
        return (
            f"{self.name}: {p['dataset']}, model {model}, {count} local {unit}, rounds IID "
            f"{p['rounds']['iid']} / non-IID {p['rounds']['noniid']}, seeds {p['seeds']}, "
            f"policies {', '.join(p['policies'])}"
        )


def plan(name: str, profile: str, *, synthetic_data: str | None = None) -> PanelPlan:
    """Panel ``name`` of ``profile`` with its configurations, built in one pass; it trains on
    synthetic data if its dataset is ``synthetic_data`` (a CIFAR dataset that is not here)."""
    p = panel(name, profile)
    synthetic = p["dataset"] == synthetic_data
    return PanelPlan(name, profile, p, synthetic, tuple(_grid(p, SPLITS, None, synthetic)))


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
