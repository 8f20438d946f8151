"""The selection skew rho of the AoI paper (Definition 1, eq. 24), estimated as in Sec. IV.

rho(S, theta) = sum_{k in S} w_k (F_k(theta) - F_k(theta_k*)) / (F(theta) - sum_k q_k F_k(theta_k*))

with F = sum_k q_k F_k (eq. 10, q_k = d_k / sum_j d_j) and theta_k* the minimiser of client k's own
loss. Sec. IV's procedure: train every client alone for many SGD steps to approximate theta_k*;
take the final global model as theta*; in the rounds t evaluate rho on the realised selection
S_t and weights with the current global model theta_t (-> rho_lower = min_t) and with theta*
(-> rho_upper = max_t). The paper's Table II reports an "average empirical rho"; we report the
mean over rounds of rho(S_t, theta_t) as that average, next to both extremes.

Rounds. rho(S_t, theta_t) needs F_k(theta_t) of every client: it is evaluated at the rounds whose
client losses the run recorded (every round, or every ``eval_every`` rounds of a screened run,
see :func:`skew_of_run`); rho(S_t, theta*) needs only the final losses and is evaluated at every
round. :class:`SkewSummary` keeps which rounds were used.

Local optima. :func:`local_optimum_losses` trains every client alone for a fixed number of epochs
(the first estimate); :func:`local_optimum_to_criterion` trains in chunks of epochs until a stated
convergence criterion holds (:class:`LocalOptimumCriterion`) and returns the last chunk's change
(the residual) with the losses, so that :func:`skew_sensitivity` can show how much the estimate
of rho depends on F_k(theta_k*): with F_k* moved by the residual, and with F_k* = 0 (losses are
non-negative, so 0 bounds every F_k* from below).

Client losses F_k are measured on a seeded subset of each client's samples
(``TrainSettings.client_loss_samples``), the same subset for theta_t, theta* and theta_k*.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from aoi_fl.core.engines import local_batches
from aoi_fl.core.tensors import Params, TensorSplit, stack
from aoi_fl.core.train import FederatedTrainer, per_sample_losses
from aoi_fl.core.validation import (
    require_int,
    require_nonnegative_vector,
    require_real,
    require_sizes,
)

#: solo training's mini-batches come from round indices no training run reaches, counted down
#: from this one (chunk c of :func:`local_optimum_to_criterion` uses ``_LOCAL_OPTIMUM_ROUND - c``)
_LOCAL_OPTIMUM_ROUND = 2**31 - 1


def _require_client_losses(trainer: FederatedTrainer, caller: str) -> None:
    if trainer.settings.client_loss_samples == 0:
        raise ValueError(f"{caller} needs TrainSettings(client_loss_samples > 0)")


def _solo_chunk(
    trainer: FederatedTrainer, start: Params, chunk: int, epochs: int, lr: float
) -> Params:
    """``epochs`` epochs of every client alone from ``start`` (stacked), batched by the engine."""
    s = trainer.settings
    schedules = []
    for i, idx in enumerate(trainer.data.partition):
        idx = np.asarray(idx, dtype=np.int64)
        rows = local_batches(
            s.seed, _LOCAL_OPTIMUM_ROUND - chunk, i, idx.size, epochs, s.batch_size
        )
        schedules.append(np.where(rows >= 0, idx[np.maximum(rows, 0)], -1))
    return trainer.local(start, trainer.data.train, schedules, lr)


def _solo_losses(trainer: FederatedTrainer, stacked: Params, split: TensorSplit) -> np.ndarray:
    """F_k of client k's own parameters (``stacked[k]``) on its loss subset (``split``)."""
    bounds = np.concatenate(([0], np.cumsum(trainer.client_loss_counts())))
    losses = np.empty(len(trainer.data.partition))
    for i in range(losses.size):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        own = TensorSplit(split.x[lo:hi], split.y[lo:hi])
        params = {k: v[i] for k, v in stacked.items()}
        losses[i] = float(
            per_sample_losses(trainer.model, params, own, trainer.settings.loss).double().mean()
        )
    return losses


def local_optimum_losses(trainer: FederatedTrainer, epochs: int, lr: float) -> np.ndarray:
    """F_k(theta_k*) for every client k: each client trained alone, loss on its loss subset.

    Every client starts from the trainer's current global model and runs ``epochs`` epochs of
    mini-batch SGD (the trainer's batch size) at the constant learning rate ``lr``, all clients
    batched through the trainer's local-training engine. A fixed budget, no convergence check
    (see :func:`local_optimum_to_criterion`).
    """
    epochs = require_int("epochs", epochs, minimum=1)
    lr = require_real("lr", lr, minimum=0.0, strict_minimum=True)
    _require_client_losses(trainer, "local_optimum_losses")
    n = len(trainer.data.partition)
    stacked = _solo_chunk(trainer, stack(trainer.params, n), 0, epochs, lr)
    return _solo_losses(trainer, stacked, trainer.client_loss_split())


@dataclass(frozen=True)
class LocalOptimumCriterion:
    """When solo training towards theta_k* stops (:func:`local_optimum_to_criterion`).

    Every client trains alone at the constant learning rate ``lr`` in chunks of ``chunk_epochs``
    epochs. After each chunk the change of every client's loss over the chunk is measured; the
    training stops when the *mean change*

        sum_k q_k |F_k(after) - F_k(before)|

    (the size-weighted mean of the clients' absolute loss changes over the last chunk, in the
    loss's units: nats for cross-entropy) is at most ``tol``, or after ``max_epochs`` epochs (a
    multiple of ``chunk_epochs``). The first chunk's change is measured from the starting model.
    Absolute, not relative to the loss: solo training drives many clients' losses towards 0,
    where a relative change never becomes small, while rho (eq. 24) compares F_k* with loss gaps
    measured in nats.
    """

    chunk_epochs: int = 5
    tol: float = 1e-3
    max_epochs: int = 60
    lr: float = 0.1

    def __post_init__(self) -> None:
        require_int("chunk_epochs", self.chunk_epochs, minimum=1)
        require_real("tol", self.tol, minimum=0.0, strict_minimum=True)
        require_int("max_epochs", self.max_epochs, minimum=self.chunk_epochs)
        if self.max_epochs % self.chunk_epochs:
            raise ValueError(
                f"max_epochs ({self.max_epochs}) must be a multiple of chunk_epochs "
                f"({self.chunk_epochs})"
            )
        require_real("lr", self.lr, minimum=0.0, strict_minimum=True)

    def config(self) -> dict:
        return {
            "chunk_epochs": self.chunk_epochs,
            "tol": self.tol,
            "max_epochs": self.max_epochs,
            "lr": self.lr,
        }


@dataclass(frozen=True)
class LocalOptimum:
    """F_k(theta_k*) estimated to a :class:`LocalOptimumCriterion`, with what is left.

    The residual is the last chunk's change only: where the losses were still falling, the true
    F_k(theta_k*) may lie further below; 0 bounds it (:func:`skew_sensitivity`).
    """

    losses: np.ndarray  # F_k(theta_k*) per client, on its loss subset
    residual: np.ndarray  # |change of F_k| over the last chunk, per client
    change: float  # the criterion's mean change over the last chunk (loss units)
    changes: np.ndarray  # the mean change after every chunk (the last one is ``change``)
    epochs: int  # epochs trained
    converged: bool  # change <= tol (else max_epochs were reached)
    device: str = "cpu"  # where the solo training ran (CPU and GPU agree only to rounding)


def _mean_change(before: np.ndarray, after: np.ndarray, q: np.ndarray) -> float:
    return float(np.dot(q, np.abs(after - before)))


def local_optimum_to_criterion(
    trainer: FederatedTrainer, criterion: LocalOptimumCriterion
) -> LocalOptimum:
    """F_k(theta_k*) for every client k, solo training run until ``criterion`` holds.

    Every client starts from the trainer's current global model and runs chunks of
    ``criterion.chunk_epochs`` epochs of mini-batch SGD (the trainer's batch size) at the
    constant learning rate ``criterion.lr``, all clients batched through the trainer's
    local-training engine; chunk c draws its mini-batches from its own stream (seed, an
    otherwise unused round index, client), so the result is deterministic for a seed and its
    first chunk is :func:`local_optimum_losses` with ``chunk_epochs`` epochs. The losses are
    measured on the clients' loss subsets after every chunk; the residual is the last chunk's
    absolute change per client.
    """
    if not isinstance(criterion, LocalOptimumCriterion):
        raise TypeError(
            f"criterion must be a LocalOptimumCriterion, got {type(criterion).__name__}"
        )
    _require_client_losses(trainer, "local_optimum_to_criterion")
    n = len(trainer.data.partition)
    sizes = trainer.data.sizes.astype(float)
    q = sizes / sizes.sum()
    split = trainer.client_loss_split()
    stacked = stack(trainer.params, n)
    before = _solo_losses(trainer, stacked, split)
    changes: list[float] = []
    for chunk in range(criterion.max_epochs // criterion.chunk_epochs):
        stacked = _solo_chunk(trainer, stacked, chunk, criterion.chunk_epochs, criterion.lr)
        after = _solo_losses(trainer, stacked, split)
        changes.append(_mean_change(before, after, q))
        residual, before = np.abs(after - before), after
        if changes[-1] <= criterion.tol:
            break
    return LocalOptimum(
        losses=before,
        residual=residual,
        change=changes[-1],
        changes=np.array(changes),
        epochs=len(changes) * criterion.chunk_epochs,
        converged=changes[-1] <= criterion.tol,
        device=str(trainer.device),
    )


def skew(
    client_losses: np.ndarray,
    selected: Sequence[int],
    weights: Sequence[float],
    sizes: np.ndarray,
    optimum_losses: np.ndarray,
) -> float:
    """rho(S, theta) of eq. 24 for one realised selection, from F_k(theta) of every client.

    NaN (0/0) or infinite when the denominator F(theta) - sum_k q_k F_k(theta_k*) is 0, as
    when theta is where the local optima started from and each F_k* is moved to F_k(theta).
    """
    sizes = require_sizes("sizes", sizes)
    f = np.asarray(client_losses, dtype=float)
    f_star = np.asarray(optimum_losses, dtype=float)
    if f.shape != sizes.shape or f_star.shape != sizes.shape:
        raise ValueError(
            f"client_losses {f.shape}, optimum_losses {f_star.shape} and sizes {sizes.shape} "
            "must all have one entry per client"
        )
    q = sizes / sizes.sum()
    gap = f - f_star
    ids = np.asarray(selected, dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.dot(np.asarray(weights, dtype=float), gap[ids]) / np.dot(q, gap))


@dataclass(frozen=True)
class SkewSummary:
    """Skews of one training run and their summaries.

    ``rho_current[j]`` = rho(S_t, theta_t) at round t = ``rounds[j]`` (the rounds whose client
    losses were recorded, before the last); ``rho_final[t]`` = rho(S_t, theta*) for every round
    t = 0, 1, ... (theta* = the final global model).
    """

    rho_current: np.ndarray
    rho_final: np.ndarray
    rounds: np.ndarray

    @property
    def mean(self) -> float:
        """Average empirical rho (Table II): mean of rho(S_t, theta_t) over the rounds used."""
        return float(np.mean(self.rho_current))

    @property
    def sd(self) -> float:
        """Sample sd of rho(S_t, theta_t) over the rounds used (NaN for a single round)."""
        r = self.rho_current
        return float(np.std(r, ddof=1)) if r.size > 1 else float("nan")

    @property
    def n_rounds(self) -> int:
        """How many rounds rho(S_t, theta_t) was evaluated at."""
        return int(self.rounds.size)

    @property
    def lower(self) -> float:
        """min_t rho(S_t, theta_t) over the rounds used, the estimate of rho_lower (eq. 25)."""
        return float(np.min(self.rho_current))

    @property
    def upper(self) -> float:
        """max_t rho(S_t, theta*) over every round, the estimate of rho_upper (eq. 26)."""
        return float(np.max(self.rho_final))


def _recorded_client_losses(history: Mapping[str, list]) -> dict[int, list[float]]:
    """Round -> F_k of the global model after that many rounds, as the run recorded them."""
    losses = history.get("client_losses") or []
    key = "client_loss_round" if "client_loss_round" in history else "eval_round"
    at = history.get(key, [])
    if len(at) != len(losses):
        raise ValueError(
            f"history has {len(losses)} client_losses but {len(at)} {key} entries; "
            f"client_losses must be recorded at the rounds {key} lists"
        )
    return {int(t): v for t, v in zip(at, losses, strict=True)}


def skew_of_run(
    history: Mapping[str, list], sizes: np.ndarray, optimum_losses: np.ndarray
) -> SkewSummary:
    """Skews of a run from its history (:class:`aoi_fl.core.train.FederatedTrainer`).

    Round t's selection is ``history["selected"][t]`` with weights ``history["weights"][t]``;
    theta_t, the model that round starts from, is the global model recorded at round t.
    rho(S_t, theta_t) is evaluated at every round t < R (R rounds in all) at which client losses
    were recorded: the rounds ``history["client_loss_round"]`` lists where present (screened
    runs), else ``history["eval_round"]``; rho(S_t, theta*) at every round, with the losses
    recorded at round R. A run with client losses at every round uses every round.
    """
    rounds = len(history.get("selected", []))
    if rounds == 0 or len(history.get("weights", [])) != rounds:
        raise ValueError(
            "history must hold every round's selected ids and weights (record_clients=True); "
            f"got {rounds} selections and {len(history.get('weights', []))} weight lists"
        )
    evals = _recorded_client_losses(history)
    if rounds not in evals:
        raise ValueError(
            f"history has no client_losses of the final model (round {rounds}): the run must "
            "record client losses (client_loss_samples > 0) at its last round"
        )
    used = sorted(t for t in evals if 0 <= t < rounds)
    if not used:
        raise ValueError(
            f"history has client_losses at no round before the last (round {rounds}); "
            "rho(S_t, theta_t) needs the losses of theta_t at some round t < R"
        )

    def rho(losses: Sequence[float], t: int) -> float:
        w = history["weights"][t]
        return skew(np.asarray(losses), history["selected"][t], w, sizes, optimum_losses)

    current = [rho(evals[t], t) for t in used]
    at_final = [rho(evals[rounds], t) for t in range(rounds)]
    return SkewSummary(np.array(current), np.array(at_final), np.array(used, dtype=np.int64))


@dataclass(frozen=True)
class SkewSensitivity:
    """A run's skews with F_k(theta_k*) as estimated and moved (:func:`skew_sensitivity`)."""

    estimate: SkewSummary  # F_k* as estimated
    lowered: SkewSummary  # F_k* - residual_k (at least 0)
    raised: SkewSummary  # F_k* + residual_k
    zero: SkewSummary  # F_k* = 0: the lowest value any (non-negative) loss can take


def skew_sensitivity(
    history: Mapping[str, list],
    sizes: np.ndarray,
    optimum_losses: np.ndarray,
    residual: np.ndarray,
) -> SkewSensitivity:
    """How much a run's rho depends on the estimate of F_k(theta_k*) (:func:`skew_of_run` x 4).

    ``residual`` (per client, >= 0; :attr:`LocalOptimum.residual`) moves every F_k* down (not
    below 0: losses are non-negative) and up; F_k* = 0 is the bound below every estimate. When
    the means of the four differ by more than the differences between policies, Table II is not
    estimable from these runs. A zero residual gives the estimate three times.
    """
    sizes = require_sizes("sizes", sizes)
    f_star = np.asarray(optimum_losses, dtype=float)
    r = require_nonnegative_vector("residual", residual)
    if f_star.shape != sizes.shape or r.shape != sizes.shape:
        raise ValueError(
            f"optimum_losses {f_star.shape}, residual {r.shape} and sizes {sizes.shape} must "
            "all have one entry per client"
        )
    return SkewSensitivity(
        estimate=skew_of_run(history, sizes, f_star),
        lowered=skew_of_run(history, sizes, np.maximum(f_star - r, 0.0)),
        raised=skew_of_run(history, sizes, f_star + r),
        zero=skew_of_run(history, sizes, np.zeros_like(f_star)),
    )


__all__ = [
    "LocalOptimum",
    "LocalOptimumCriterion",
    "SkewSensitivity",
    "SkewSummary",
    "local_optimum_losses",
    "local_optimum_to_criterion",
    "skew",
    "skew_of_run",
    "skew_sensitivity",
]
