"""Table II: the selection skew rho of a panel's training runs (:func:`selection_skew`), with
the cached local optima F_k(theta_k*) it needs and the grouping of runs by (split, policy)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from aoi_fl.aoi.skew import (
    LocalOptimum,
    LocalOptimumCriterion,
    local_optimum_losses,
    local_optimum_to_criterion,
    skew_sensitivity,
)
from aoi_fl.core.validation import renamed, require_choice
from aoi_fl.pipeline.cache import ResultStore
from aoi_fl.pipeline.paired import sample_sd
from aoi_fl.pipeline.profiles import PROFILES
from aoi_fl.pipeline.runs import build_trainer, client_sizes, config_device, resolve_config


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


@renamed("cache_dir", "results_dir")
def local_optima(
    config: dict[str, Any],
    *,
    epochs: int = 20,
    lr: float = 0.05,
    results_dir: str = "results",
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

    resolved = resolve_config(config)
    key = _local_optimum_key(resolved, {"epochs": epochs, "lr": lr})
    store = ResultStore(results_dir)
    if (hit := store.load(key)) is not None:
        return hit[1]["losses"]
    trainer = build_trainer(resolved, data_root, device or config_device(config))
    losses = local_optimum_losses(trainer, epochs, lr)
    store.save(key, _local_optimum_meta(trainer), {"losses": losses})
    return losses


@renamed("cache_dir", "results_dir")
def local_optima_to_criterion(
    config: dict[str, Any],
    criterion: LocalOptimumCriterion,
    *,
    results_dir: str = "results",
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

    if not isinstance(criterion, LocalOptimumCriterion):
        raise TypeError(
            f"criterion must be a LocalOptimumCriterion, got {type(criterion).__name__}"
        )
    resolved = resolve_config(config)
    key = _local_optimum_key(resolved, {"criterion": criterion.config()})
    store = ResultStore(results_dir)
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


@renamed("cache_dir", "results_dir")
def selection_skew(
    results: Sequence[Any],
    profile: str,
    *,
    criterion: LocalOptimumCriterion | None = None,
    results_dir: str = "results",
    data_root: str = "data",
):
    """Table II: the selection skew rho of every run (eq. 24), averaged over seeds.

    ``results`` are the runs of one panel (:func:`~aoi_fl.evidence.aoi.experiments.panel_grid`);
    every run gets F_k(theta_k*) from the local optima of its own configuration
    (:func:`local_optima_to_criterion`, criterion :data:`LOCAL_OPTIMUM_CRITERION` of ``profile``
    unless ``criterion`` is given). Returns a pandas table indexed by (split, policy) with the
    columns :data:`SKEW_COLUMNS`, each the mean over seeds of a per-run value unless said
    otherwise:

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

    profile = require_choice("profile", profile, PROFILES)
    criterion = LOCAL_OPTIMUM_CRITERION[profile] if criterion is None else criterion
    if not isinstance(criterion, LocalOptimumCriterion):
        raise TypeError(
            f"criterion must be a LocalOptimumCriterion or None, got {type(criterion).__name__}"
        )
    rows = []
    for (split, policy), runs in sorted(group_runs(results).items()):
        _require_one_configuration(split, policy, runs)
        values, devices = _skew_values(runs, criterion, results_dir, data_root)
        rows.append(_skew_row(split, policy, values, devices))
    return pd.DataFrame(rows, columns=["split", "policy", *SKEW_COLUMNS]).set_index(
        ["split", "policy"]
    )


def _require_one_configuration(split: str, policy: str, runs: Sequence[Any]) -> None:
    """Refuse runs of one (split, policy) that differ in more than their seeds."""

    shared = {repr(_without_seeds(resolve_config(r.config))) for r in runs}
    if len(shared) > 1:
        raise ValueError(
            f"results: the runs of ({split}, {policy}) differ in more than their seeds; "
            "pass one panel's results at a time"
        )


def _skew_values(
    runs: Sequence[Any], criterion: LocalOptimumCriterion, results_dir: str, data_root: str
) -> tuple[np.ndarray, set[str]]:
    """Per run (rows): the per-run values behind :data:`SKEW_COLUMNS`, and the devices the
    local optima were trained on."""

    values, devices = [], set()
    for run in runs:
        optimum = local_optima_to_criterion(
            run.config, criterion, results_dir=results_dir, data_root=data_root
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
    return np.array(values, dtype=float), devices


def _skew_row(split: str, policy: str, v: np.ndarray, devices: set[str]) -> dict[str, Any]:
    """One row of :func:`selection_skew`: the means over seeds of :func:`_skew_values`."""

    mean = v.mean(axis=0)
    return {
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
        "seeds": len(v),
        "F* device": ", ".join(sorted(devices)),
    }
