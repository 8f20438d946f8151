"""The selection skew rho of the AoI paper (Definition 1, eq. 24), estimated as in Sec. IV.

rho(S, theta) = sum_{k in S} w_k (F_k(theta) - F_k(theta_k*)) / (F(theta) - sum_k q_k F_k(theta_k*))

with F = sum_k q_k F_k (eq. 10, q_k = d_k / sum_j d_j) and theta_k* the minimiser of client k's own
loss. Sec. IV's procedure: train every client alone for many SGD steps to approximate theta_k*;
take the final global model as theta*; in every round t evaluate rho on the realised selection
S_t and weights with the current global model theta_t (-> rho_lower = min_t) and with theta*
(-> rho_upper = max_t). The paper's Table II reports an "average empirical rho"; we report the
mean over rounds of rho(S_t, theta_t) as that average, next to both extremes.

Client losses F_k are measured on a seeded subset of each client's samples
(``TrainSettings.client_loss_samples``), the same subset for theta_t, theta* and theta_k*.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ._validation import require_int, require_real, require_sizes
from .data import TensorSplit
from .engines import local_batches, stack
from .train import FederatedTrainer, per_sample_losses

_LOCAL_OPTIMUM_ROUND = 2**31 - 1


def local_optimum_losses(trainer: FederatedTrainer, epochs: int, lr: float) -> np.ndarray:
    """F_k(theta_k*) for every client k: each client trained alone, loss on its loss subset.

    Every client starts from the trainer's current global model and runs ``epochs`` epochs of
    mini-batch SGD (the trainer's batch size) at the constant learning rate ``lr``, all clients
    batched through the trainer's local-training engine.
    """
    epochs = require_int("epochs", epochs, minimum=1)
    lr = require_real("lr", lr, minimum=0.0, strict_minimum=True)
    s = trainer.settings
    if s.client_loss_samples == 0:
        raise ValueError("local_optimum_losses needs TrainSettings(client_loss_samples > 0)")
    partition = trainer.data.partition
    ids = np.arange(len(partition))
    schedules = []
    for i, idx in enumerate(partition):
        idx = np.asarray(idx, dtype=np.int64)
        # a round index no training run reaches: these batches form a stream of their own
        rows = local_batches(s.seed, _LOCAL_OPTIMUM_ROUND, i, idx.size, epochs, s.batch_size)
        schedules.append(np.where(rows >= 0, idx[np.maximum(rows, 0)], -1))
    stacked = trainer.local(stack(trainer.params, ids.size), trainer.data.train, schedules, lr)
    split = trainer.client_loss_split()
    bounds = np.concatenate(([0], np.cumsum(trainer.client_loss_counts())))
    losses = np.empty(len(partition))
    for i in ids:
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        own = TensorSplit(split.x[lo:hi], split.y[lo:hi])
        params = {k: v[i] for k, v in stacked.items()}
        losses[i] = float(per_sample_losses(trainer.model, params, own, s.loss).double().mean())
    return losses


def skew(
    client_losses: np.ndarray,
    selected: Sequence[int],
    weights: Sequence[float],
    sizes: np.ndarray,
    optimum_losses: np.ndarray,
) -> float:
    """rho(S, theta) of eq. 24 for one realised selection, from F_k(theta) of every client."""
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
    return float(np.dot(np.asarray(weights, dtype=float), gap[ids]) / np.dot(q, gap))


@dataclass(frozen=True)
class SkewSummary:
    """Per-round skews and their summaries for one training run."""

    rho_current: np.ndarray  # rho(S_t, theta_t), t = 0, 1, ...
    rho_final: np.ndarray  # rho(S_t, theta*), theta* = final global model

    @property
    def mean(self) -> float:
        """Average empirical rho (Table II): mean over rounds of rho(S_t, theta_t)."""
        return float(np.mean(self.rho_current))

    @property
    def lower(self) -> float:
        """min_t rho(S_t, theta_t), the estimate of rho_lower (eq. 25)."""
        return float(np.min(self.rho_current))

    @property
    def upper(self) -> float:
        """max_t rho(S_t, theta*), the estimate of rho_upper (eq. 26)."""
        return float(np.max(self.rho_final))


def skew_of_run(
    history: Mapping[str, list], sizes: np.ndarray, optimum_losses: np.ndarray
) -> SkewSummary:
    """Skews of every round of a run whose history has ``client_losses`` at every round."""
    rounds = len(history["selected"])
    evals = dict(zip(history["eval_round"], history["client_losses"], strict=False))
    missing = [t for t in range(rounds + 1) if t not in evals]
    if not history.get("client_losses") or missing:
        raise ValueError(
            "the run must record client_losses at every round (eval_every=1 and "
            f"client_loss_samples > 0); missing evaluations at rounds {missing[:5]}..."
        )
    final = np.asarray(evals[rounds])
    current, at_final = [], []
    for t in range(rounds):
        sel, w = history["selected"][t], history["weights"][t]
        current.append(skew(np.asarray(evals[t]), sel, w, sizes, optimum_losses))
        at_final.append(skew(final, sel, w, sizes, optimum_losses))
    return SkewSummary(np.array(current), np.array(at_final))


__all__ = ["SkewSummary", "local_optimum_losses", "skew", "skew_of_run"]
