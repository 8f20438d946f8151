"""Federated optimisation methods on the common trainer: what a client does, what the server does.

An :class:`Algorithm` is one method, written as its two sides so that a federation can run
them apart (:mod:`aoi_fl.flower`: the client side on the nodes, the server side in the
strategy) and the in-process trainer can run both, the same code either way. Per round t

1. the server sends each selected client the global model and :meth:`Algorithm.server_message`
   (FedAvg: nothing more; FedSUM: its aggregate y; SCAFFOLD: its control variate c);
2. each client starts from :meth:`Algorithm.client_begin` (FedAvg: the global model, no
   per-round state), given what it was sent and its own persistent state (FedSUM: h_i,
   SCAFFOLD: c_i; :meth:`Algorithm.client_state` before its first round), and runs its local
   steps through a local-training engine (:mod:`aoi_fl.core.engines`), moving the parameters
   with :meth:`Algorithm.local_step` (FedAvg: plain SGD; control-variate methods add their
   correction, and may accumulate e.g. the sum of the gradients in the per-round state);
3. :meth:`Algorithm.client_end` gives what the client uploads besides its model and its new
   persistent state, and :meth:`Algorithm.server_update` forms the new global model from the
   uploads and updates the server's state.

Every operation of the client side is elementwise per client, so a client alone (a Flower
node) computes bit for bit what the trainer computes for it among several; sums over clients
happen on the server side only, in the order of the selected ids.

What is evaluated and returned after a round is :meth:`Algorithm.reported_params` of the global
model: the global model itself, or e.g. the average of the global models of all rounds so far
(FedAvg with ``average=True``: the output of the agnostic-FedAvg paper's Algorithm 1, line 12).

In process the clients' persistent states are the rows of one table (:class:`ClientTable`) in
the algorithm object, beside the server's state; both are checkpointed through
``state_dict``/``load_state_dict`` (tensors only). What a method sends each way is what its
two sides pass each other (``server_message``, ``client_end``, and the models each side reads),
so it is counted by watching them run (the FedSUM package does, for its claims), not declared.

This module holds the interface and FedAvg with the aggregation rules of the AoI paper (eq. 15)
and of the unbiased estimators (a weighted sum of updates), optionally with the agnostic-FedAvg
paper's projected local steps and averaged iterate (its Algorithm 1); the other methods live with
their papers' modules. Configurations name them through :data:`aoi_fl.pipeline.runs.ALGORITHMS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from aoi_fl.core.engines import sgd_step
from aoi_fl.core.registry import PALETTE, Style, register_algorithm
from aoi_fl.core.tensors import Params, device_of, stack, weighted_sum
from aoi_fl.core.validation import require_choice, require_real


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


def project_onto_ball(params: Params, radius: float) -> None:
    """Euclidean projection of each client's parameters onto {theta : ||theta||_2 <= radius}.

    ``params`` is client-stacked (leading client axis); the norm of a client is taken over all
    its parameters together (one vector theta), and a client outside the ball is scaled onto its
    surface (up to float rounding), in place. Clients inside the ball are left untouched.
    """
    sq = sum(v.flatten(1).to(torch.float64).square().sum(dim=1) for v in params.values())
    norm = sq.sqrt()
    outside = norm > radius
    if not bool(outside.any()):
        return
    scale = torch.where(outside, radius / norm, torch.ones_like(norm))  # 1 inside: no change
    for v in params.values():
        v.mul_(scale.to(v.dtype).view(-1, *([1] * (v.dim() - 1))))


def merged_sides(algorithm: Algorithm) -> list[str]:
    """The in-process drivers (``client_start``, ``aggregate``) that ``algorithm`` overrides:
    such a method runs its client and server in one step, so neither Flower (which runs the two
    sides apart) nor a count of what one side sends the other can use it."""
    return [
        m
        for m in ("client_start", "aggregate")
        if getattr(type(algorithm), m) is not getattr(Algorithm, m)
    ]


def update_norms(global_params: Params, updates: ClientUpdates) -> np.ndarray:
    """||theta_i - theta||_2 over all parameters, per selected client (the default feedback)."""
    if updates.ids.size == 0:
        return np.zeros(0)
    sq = sum(
        (updates.params[k] - g).flatten(1).to(torch.float64).square().sum(dim=1)
        for k, g in global_params.items()
    )
    return sq.sqrt().cpu().numpy()


class ClientTable:
    """The clients' persistent states in one process: a row per client of each tensor of
    :meth:`Algorithm.client_state` (every row starts as that state)."""

    def __init__(self, n_clients: int, initial: Params) -> None:
        self.rows = {
            k: v.unsqueeze(0).repeat(n_clients, *([1] * v.dim())).contiguous()
            for k, v in initial.items()
        }

    def get(self, ids: np.ndarray) -> Params:
        """Copies of the rows of ``ids`` (client axis first, in the order of ``ids``)."""
        idx = torch.as_tensor(np.asarray(ids, dtype=np.int64))
        return {k: v.index_select(0, idx.to(v.device)) for k, v in self.rows.items()}

    def put(self, ids: np.ndarray, rows: Params) -> None:
        """Set the rows of ``ids`` to ``rows`` (stacked in the order of ``ids``)."""
        idx = torch.as_tensor(np.asarray(ids, dtype=np.int64))
        for k, v in self.rows.items():
            v.index_copy_(0, idx.to(v.device), rows[k].to(v.dtype))


class Algorithm:
    """Base class: FedAvg's client side (plain SGD from the global model), no client state.

    Subclasses override :meth:`server_update` and, where the method needs them, the other
    methods of the two sides (module docstring) and :meth:`server_state`. :meth:`setup`,
    :meth:`client_start` and :meth:`aggregate` run both sides in one process (the trainer's).
    """

    name = "algorithm"
    clients: ClientTable | None = None

    def setup(self, n_clients: int, global_params: Params) -> None:
        """Allocate the clients' table and the server's state; called once, before round 0
        (subclasses with server state extend it)."""
        initial = self.client_state(global_params)
        self.clients = ClientTable(n_clients, initial) if initial else None

    # -- the client's side -------------------------------------------------------------------

    def client_state(self, global_params: Params) -> Params:
        """A client's persistent state before its first round (tensors without a client axis;
        ``global_params`` is the initial model x^(0)); default none."""
        return {}

    def start_models(self, count: int, global_params: Params, sent: Params) -> Params:
        """The models ``count`` clients start their local steps from (stacked), as the server
        knows them from what it sent; default the global model."""
        return stack(global_params, count)

    def client_begin(
        self, t: int, lr: float, count: int, global_params: Params, sent: Params, own: Params
    ) -> tuple[Params, dict[str, torch.Tensor]]:
        """``count`` clients' starting parameters and per-round state (both stacked), from the
        global model, what the server sent them (:meth:`server_message`) and their persistent
        states ``own`` (stacked); default :meth:`start_models`, no state."""
        return self.start_models(count, global_params, sent), {}

    def local_step(
        self, params: Params, grads: Params, lr: float, state: dict[str, torch.Tensor]
    ) -> None:
        """One local step on client-stacked ``params`` (in place); default plain SGD."""
        sgd_step(params, grads, lr, state)

    def client_end(self, updates: ClientUpdates, own: Params) -> tuple[Params, Params]:
        """(what each client uploads besides its model, its new persistent state), stacked in
        the order of ``updates.ids``; default nothing, the state unchanged."""
        return {}, own

    # -- the server's side -------------------------------------------------------------------

    def server_message(self, t: int, ids: np.ndarray, global_params: Params, lr: float) -> Params:
        """What the server sends the clients ``ids`` besides the global model (stacked in the
        order of ``ids``); default nothing."""
        return {}

    def server_update(
        self, global_params: Params, updates: ClientUpdates, upload: Params
    ) -> Params:
        """The new global parameters from the clients' models (``updates``, whose ``start`` is
        :meth:`start_models`) and uploads; updates the server's state (must not modify
        ``global_params`` in place)."""
        raise NotImplementedError

    def reported_params(self, global_params: Params) -> Params:
        """The model the method returns after the rounds so far (evaluated by the trainer and
        kept as a run's final model); default the global model itself."""
        return global_params

    def server_state(self) -> dict[str, torch.Tensor]:
        """The server's state (live tensors), for checkpoints; default none."""
        return {}

    # -- both sides in one process -----------------------------------------------------------

    def _own(self, ids: np.ndarray) -> Params:
        return {} if self.clients is None else self.clients.get(ids)

    def client_start(
        self, t: int, ids: np.ndarray, global_params: Params, lr: float
    ) -> tuple[Params, dict[str, torch.Tensor]]:
        """Starting parameters of the selected clients (stacked) and their per-round state."""
        sent = self.server_message(t, ids, global_params, lr)
        return self.client_begin(t, lr, len(ids), global_params, sent, self._own(ids))

    def aggregate(self, global_params: Params, updates: ClientUpdates) -> Params:
        """The clients' ends of the round, then the server's (:meth:`server_update`)."""
        upload, own = self.client_end(updates, self._own(updates.ids))
        if self.clients is not None and updates.ids.size:
            self.clients.put(updates.ids, own)
        return self.server_update(global_params, updates, upload)

    def state_dict(self) -> dict[str, torch.Tensor]:
        rows = {} if self.clients is None else self.clients.rows
        return {**{f"clients.{k}": v for k, v in rows.items()}, **self.server_state()}

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

    Two options of the agnostic-FedAvg paper's Algorithm 1 (off by default):

    - ``radius``: every local SGD iterate is projected onto the ball C = {||theta||_2 <= radius}
      centred at 0 (line 9, :func:`project_onto_ball`; the norm is over all parameters);
    - ``average``: the reported model (:meth:`reported_params`) is the mean of the global
      models after rounds 1..t (line 12, 1/T sum_t theta_hat^{tH}), kept as a running sum in
      float64; before the first round it is the initial model. Training itself continues from
      the last global model.
    """

    name = "fedavg"

    def __init__(
        self,
        aggregation: str = "weighted_sum",
        server_lr: float = 1.0,
        radius: float | None = None,
        average: bool = False,
    ) -> None:
        self.aggregation = require_choice("aggregation", aggregation, AGGREGATIONS)
        self.server_lr = require_real("server_lr", server_lr, minimum=0.0, strict_minimum=True)
        if aggregation == "weighted_sum" and self.server_lr != 1.0:
            raise ValueError(
                f"server_lr={server_lr} needs aggregation='weighted_delta' (eq. 15 has none)"
            )
        if radius is not None:
            radius = require_real("radius", radius, minimum=0.0, strict_minimum=True)
        self.radius = radius
        if not isinstance(average, bool):
            raise TypeError(f"average must be True or False, got {average!r}")
        self.average = average
        self._sum: Params = {}
        self._count = torch.zeros((), dtype=torch.float64)

    def setup(self, n_clients: int, global_params: Params) -> None:
        super().setup(n_clients, global_params)
        if self.average:
            device = device_of(global_params)
            self._sum = {
                k: torch.zeros(v.shape, dtype=torch.float64, device=device)
                for k, v in global_params.items()
            }
            self._count = torch.zeros((), dtype=torch.float64, device=device)

    def local_step(
        self, params: Params, grads: Params, lr: float, state: dict[str, torch.Tensor]
    ) -> None:
        """An SGD step, then the projection onto the ball of ``radius`` where one is set (the
        agnostic FedAvg paper's Alg. 1 line 9)."""
        sgd_step(params, grads, lr, state)
        if self.radius is not None:
            project_onto_ball(params, self.radius)

    def aggregation_weights(self, updates: ClientUpdates) -> np.ndarray:
        """The w_i of the selected clients: the sampler's (subclasses may replace them)."""
        return updates.weights

    def server_update(
        self, global_params: Params, updates: ClientUpdates, upload: Params
    ) -> Params:
        new = self._aggregate(global_params, updates)
        if self.average:
            for k, v in new.items():
                self._sum[k] += v.to(torch.float64)
            self._count += 1
        return new

    def _aggregate(self, global_params: Params, updates: ClientUpdates) -> Params:
        if updates.ids.size == 0:
            return global_params
        w = self.aggregation_weights(updates)
        if self.aggregation == "weighted_sum":
            return {k: weighted_sum(w, v) for k, v in updates.params.items()}
        return {
            k: g + self.server_lr * weighted_sum(w, updates.params[k] - g)
            for k, g in global_params.items()
        }

    def reported_params(self, global_params: Params) -> Params:
        """With ``average``, the mean of the global models so far (the agnostic FedAvg paper's
        Alg. 1 line 12); else the global model."""
        if not self.average or float(self._count) == 0:
            return global_params
        return {k: (s / self._count).to(global_params[k].dtype) for k, s in self._sum.items()}

    def server_state(self) -> dict[str, torch.Tensor]:
        if not self.average:
            return {}
        return {
            **{f"average_sum.{k}": v for k, v in self._sum.items()},
            "average_count": self._count,
        }

    def options(self) -> dict:
        """The Algorithm-1 options that differ from the defaults (for :meth:`config`)."""
        return {
            **({"radius": self.radius} if self.radius is not None else {}),
            **({"average": True} if self.average else {}),
        }

    def config(self) -> dict:
        return {
            "name": self.name,
            "aggregation": self.aggregation,
            "server_lr": self.server_lr,
            **self.options(),
        }


register_algorithm("fedavg", FedAvg, Style("FedAvg", PALETTE[7], "^"))
