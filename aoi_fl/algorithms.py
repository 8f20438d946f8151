"""Federated optimisation methods on the common trainer: what a client does, what the server does.

An :class:`Algorithm` is one method with its whole state. Per round t the trainer

1. asks it for the selected clients' starting parameters and per-round client state
   (:meth:`Algorithm.client_start`; FedAvg: the global model, no state);
2. runs their local steps through a local-training engine (:mod:`aoi_fl.engines`), moving the
   parameters with :meth:`Algorithm.local_step` (FedAvg: plain SGD; control-variate methods add
   their correction, and may accumulate e.g. the sum of the gradients in the client state);
3. hands the outcome (:class:`ClientUpdates`) to :meth:`Algorithm.aggregate`, which returns the
   new global model and updates the server's and the clients' persistent state.

State that persists across rounds (per-client tables, server aggregates) lives in the algorithm
object and is checkpointed through ``state_dict``/``load_state_dict`` (tensors only).
:attr:`Algorithm.communication` counts the model-size vectors each active client receives and
sends per round, for plots against communication.

This module holds the interface and FedAvg with the aggregation rules of the AoI paper (eq. 15)
and of the unbiased estimators (a weighted sum of updates); the other methods live with their
papers' modules. Configurations name them through :data:`aoi_fl.runs.ALGORITHMS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from ._validation import require_choice, require_int, require_real
from .engines import Params, sgd_step, stack


@dataclass
class ClientUpdates:
    """What the selected clients return in round ``t``, in the order of ``ids``.

    ``weights``: the sampler's aggregation weights; ``start``: the parameters each client
    started from; ``params``: its final local parameters (leading client axis); ``state``: the
    per-round client state after training; ``steps``: local steps taken; ``lr``: the round's
    local learning rate.
    """

    t: int
    lr: float
    ids: np.ndarray
    weights: np.ndarray
    start: Params
    params: Params
    state: dict[str, torch.Tensor]
    steps: np.ndarray

    def deltas(self) -> Params:
        """theta_i - theta_start per client (the model update of each client)."""
        return {k: v - self.start[k] for k, v in self.params.items()}


def weighted_sum(weights: np.ndarray, stacked: torch.Tensor) -> torch.Tensor:
    """sum_i w_i x_i over the leading axis, accumulated in float64."""
    w = torch.as_tensor(weights, dtype=torch.float64).view(-1, *([1] * (stacked.dim() - 1)))
    return (w * stacked.to(torch.float64)).sum(dim=0).to(stacked.dtype)


def update_norms(global_params: Params, updates: ClientUpdates) -> np.ndarray:
    """||theta_i - theta||_2 over all parameters, per selected client (the default feedback)."""
    if updates.ids.size == 0:
        return np.zeros(0)
    sq = sum(
        (updates.params[k] - g).flatten(1).to(torch.float64).square().sum(dim=1)
        for k, g in global_params.items()
    )
    return sq.sqrt().numpy()


class Algorithm:
    """Base class: FedAvg's client side (plain SGD from the global model) and no state.

    Subclasses override :meth:`aggregate` and, where the method needs them, :meth:`setup`,
    :meth:`client_start`, :meth:`local_step` and the state methods.
    """

    name = "algorithm"
    #: model-size vectors (received, sent) per active client and round
    communication: tuple[int, int] = (1, 1)

    def setup(self, n_clients: int, global_params: Params) -> None:  # noqa: B027
        """Allocate per-client and server state; called once, before round 0."""

    def client_start(
        self, t: int, ids: np.ndarray, global_params: Params, lr: float
    ) -> tuple[Params, dict[str, torch.Tensor]]:
        """Starting parameters of the selected clients (stacked) and their per-round state."""
        return stack(global_params, len(ids)), {}

    def local_step(
        self, params: Params, grads: Params, lr: float, state: dict[str, torch.Tensor]
    ) -> None:
        """One local step on client-stacked ``params`` (in place); default plain SGD."""
        sgd_step(params, grads, lr, state)

    def aggregate(self, global_params: Params, updates: ClientUpdates) -> Params:
        """The new global parameters (must not modify ``global_params`` in place)."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        expected = set(self.state_dict())
        if set(state) != expected:
            raise ValueError(
                f"{type(self).__name__} state must have the keys {sorted(expected)}, "
                f"got {sorted(state)}"
            )
        for k, v in self.state_dict().items():
            if state[k].shape != v.shape:
                raise ValueError(
                    f"state {k!r} has shape {tuple(state[k].shape)}, expected {v.shape}"
                )
            v.copy_(state[k])

    def config(self) -> dict:
        return {"name": self.name}


AGGREGATIONS = ("weighted_sum", "weighted_delta")


class FedAvg(Algorithm):
    """FedAvg with the sampler's weights w_i, in one of two forms.

    - ``"weighted_sum"`` (AoI paper, eq. 15): theta^{t+1} = sum_{i in S} w_i theta_i^{t+1};
    - ``"weighted_delta"``: theta^{t+1} = theta^t + server_lr * sum_{i in S} w_i (theta_i^{t+1}
      - theta^t), the unbiased-estimator form (K-Vib, Alg. 1 lines 12-13, with w_i =
      lambda_i / p_i). Equal to eq. 15 when the weights sum to one and server_lr = 1; with
      weights that do not sum to one it moves along the weighted sum of the updates instead of
      rescaling the model.

    With no client selected the global model is kept.
    """

    name = "fedavg"

    def __init__(self, aggregation: str = "weighted_sum", server_lr: float = 1.0) -> None:
        self.aggregation = require_choice("aggregation", aggregation, AGGREGATIONS)
        self.server_lr = require_real("server_lr", server_lr, minimum=0.0, strict_minimum=True)
        if aggregation == "weighted_sum" and self.server_lr != 1.0:
            raise ValueError(
                f"server_lr={server_lr} needs aggregation='weighted_delta' (eq. 15 has none)"
            )

    def aggregation_weights(self, updates: ClientUpdates) -> np.ndarray:
        """The w_i of the selected clients: the sampler's (subclasses may replace them)."""
        return updates.weights

    def aggregate(self, global_params: Params, updates: ClientUpdates) -> Params:
        if updates.ids.size == 0:
            return global_params
        w = self.aggregation_weights(updates)
        if self.aggregation == "weighted_sum":
            return {k: weighted_sum(w, v) for k, v in updates.params.items()}
        return {
            k: g + self.server_lr * weighted_sum(w, updates.params[k] - g)
            for k, g in global_params.items()
        }

    def config(self) -> dict:
        return {"name": self.name, "aggregation": self.aggregation, "server_lr": self.server_lr}


def per_client_table(n_clients: int, global_params: Params, dtype=None) -> Params:
    """A zero tensor (n_clients, *shape) per parameter: per-client state of a method."""
    n_clients = require_int("n_clients", n_clients, minimum=1)
    return {
        k: torch.zeros((n_clients, *v.shape), dtype=dtype or v.dtype)
        for k, v in global_params.items()
    }
