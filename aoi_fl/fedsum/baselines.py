"""The baselines of the FedSUM experiments (Sec. 5): SCAFFOLD, MIFA, FedVARP, FedAU and FedAWE.

FedAvg over the active clients is :class:`aoi_fl.core.algorithms.FedAvg` with
``aggregation="weighted_delta"`` and the participation patterns' weights 1/|S_t|. The paper
gives no pseudo-code for the baselines; these follow the original methods and the reference
code the FedSUM experiments build on. Every client trains K plain SGD
steps from the global model (FedAWE: from its own stale model), Delta_i = x_i^{(t,K)} - x^{(t)};
all use eta_g = ``server_lr`` on top of the common local schedule. With no active client the
global model is kept, except by MIFA, whose server steps with its table every round.

Communication (model-size vectors down, up per active client): SCAFFOLD 2/1 in the
single-upload form of Huang et al. that the FedSUM paper compares with (the original sends
Delta x_i and Delta c_i: 2/2); all others 1/1.
"""

from __future__ import annotations

import numpy as np
import torch

from aoi_fl.core.algorithms import Algorithm, ClientUpdates
from aoi_fl.core.registry import PALETTE, Style
from aoi_fl.core.tensors import (
    Params,
    cast_like,
    client_index,
    device_of,
    mean_over_clients,
    moved,
    stack,
)
from aoi_fl.core.validation import require_int, require_real
from aoi_fl.fedsum.stateful import LatestTable, MeanGradientClient, named, require_server_lr


class Scaffold(MeanGradientClient):
    """SCAFFOLD (Karimireddy et al. 2020, option II) in the single-upload form (Huang et al.).

    Local steps x <- x - eta_l (g - c_i + c); the client sends u_i, the mean of its K_i
    gradients (the new c_i, summed exactly, see :mod:`aoi_fl.fedsum.stateful`). The server keeps
    the table of the c_i (it receives every new one) and their sum, and sends each selected
    client its correction c - c_i with the model (2 down, 1 up); the clients keep no state.
    Server: x <- x - eta_g eta_l (1/|S|) sum_i K_i (c + u_i - c_i) (= x + eta_g mean_i Delta x_i)
    and c_i <- u_i, so c stays the mean of the c_i.
    """

    name = "scaffold"
    style = Style("SCAFFOLD", PALETTE[0], "X")

    def __init__(self, server_lr: float = 1.0) -> None:
        self.server_lr = require_server_lr(server_lr)

    def setup(self, n_clients: int, global_params: Params) -> None:
        super().setup(n_clients, global_params)
        self.controls = LatestTable(n_clients, global_params)

    def server_message(self, t: int, ids: np.ndarray, global_params: Params, lr: float) -> Params:
        c, c_i = self.controls.mean(), self.controls.get(ids)
        return {f"correction.{k}": c[k] - c_i[k] for k in c}

    def client_begin(
        self, t: int, lr: float, count: int, global_params: Params, sent: Params, own: Params
    ) -> tuple[Params, dict[str, torch.Tensor]]:
        return self.start_from_global(count, global_params, named(sent, "correction"))

    def client_end(self, updates: ClientUpdates, own: Params) -> tuple[Params, Params]:
        return {f"u.{k}": v for k, v in self.mean_gradients(updates).items()}, own

    def server_update(
        self, global_params: Params, updates: ClientUpdates, upload: Params
    ) -> Params:
        if updates.ids.size == 0:
            return global_params
        c = self.controls.mean()
        u = named(upload, "u")
        old = self.controls.replace(updates.ids, u)
        steps = torch.as_tensor(updates.steps, dtype=torch.float64, device=self.controls.device)
        moves = {k: steps.view(-1, *([1] * v.dim())) * (v + u[k] - old[k]) for k, v in c.items()}
        return moved(global_params, mean_over_clients(moves), -self.server_lr * updates.lr)

    def server_state(self) -> dict[str, torch.Tensor]:
        return self.controls.state_dict("c")

    def config(self) -> dict:
        return {"name": self.name, "server_lr": self.server_lr}


class _LatestUpdates(Algorithm):
    """A server table Y_i of every client's latest model update Delta_i (zero at first)."""

    def __init__(self, server_lr: float = 1.0) -> None:
        self.server_lr = require_server_lr(server_lr)

    def setup(self, n_clients: int, global_params: Params) -> None:
        super().setup(n_clients, global_params)
        self.table = LatestTable(n_clients, global_params)

    def server_state(self) -> dict[str, torch.Tensor]:
        return self.table.state_dict("updates")

    def config(self) -> dict:
        return {"name": self.name, "server_lr": self.server_lr}


class MIFA(_LatestUpdates):
    """MIFA (Gu et al. 2021), delta form of the reference code: every round, also without
    active clients, x <- x + eta_g (1/N) sum_{i=1}^N Y_i after Y_i <- Delta_i for i in S_t.

    No waiting for every client to be seen once (never-seen clients count zero).
    """

    name = "mifa"
    style = Style("MIFA", PALETTE[8], "D")

    def server_update(
        self, global_params: Params, updates: ClientUpdates, upload: Params
    ) -> Params:
        if updates.ids.size:
            self.table.replace(updates.ids, updates.deltas())
        return moved(global_params, self.table.mean(), self.server_lr)


class FedVARP(_LatestUpdates):
    """FedVARP (Jhunjhunwala et al. 2022): if S_t is not empty,
    x <- x + eta_g [(1/N) sum_j Y_j + (1/|S|) sum_{i in S} (Delta_i - Y_i)] (old Y), then
    Y_i <- Delta_i for i in S_t.
    """

    name = "fedvarp"
    style = Style("FedVARP", PALETTE[6], ">")

    def server_update(
        self, global_params: Params, updates: ClientUpdates, upload: Params
    ) -> Params:
        if updates.ids.size == 0:
            return global_params
        mean_old = self.table.mean()
        deltas = updates.deltas()
        old = self.table.replace(updates.ids, deltas)
        fresh = mean_over_clients({k: v.to(torch.float64) - old[k] for k, v in deltas.items()})
        return moved(global_params, {k: mean_old[k] + fresh[k] for k in fresh}, self.server_lr)


class FedAU(Algorithm):
    """FedAU (Wang & Ji 2023), the reference code's online weights with cutoff K = ``cutoff``.

    omega_i is the mean of client i's recorded participation intervals (1 before any): an
    active client records (rounds absent + 1); a client absent ``cutoff`` rounds in a row
    records ``cutoff`` and starts counting again. Server (divides by N, not |S|):
    x <- x + eta_g (1/N) sum_{i in S_t} omega_i Delta_i, with omega from before this round.
    """

    name = "fedau"
    style = Style("FedAU", PALETTE[4], "v")

    def __init__(self, cutoff: int = 50, server_lr: float = 1.0) -> None:
        self.cutoff = require_int("cutoff", cutoff, minimum=1)
        self.server_lr = require_server_lr(server_lr)

    def setup(self, n_clients: int, global_params: Params) -> None:
        super().setup(n_clients, global_params)
        self.n = n_clients
        self.device = device_of(global_params)
        self.absent = torch.zeros(n_clients, dtype=torch.int64, device=self.device)
        self.interval_sum = torch.zeros(n_clients, dtype=torch.float64, device=self.device)
        self.interval_count = torch.zeros(n_clients, dtype=torch.int64, device=self.device)

    def omega(self) -> torch.Tensor:
        """Every client's current weight omega_i (an estimate of 1 / p_i)."""
        seen = self.interval_count > 0
        mean = self.interval_sum / self.interval_count.clamp(min=1)
        return torch.where(seen, mean, torch.ones_like(mean))

    def _record(self, active: torch.Tensor) -> None:
        closed = active | (self.absent + 1 >= self.cutoff)
        interval = torch.where(active, self.absent + 1, torch.full_like(self.absent, self.cutoff))
        self.interval_sum += torch.where(closed, interval, 0).to(torch.float64)
        self.interval_count += closed.to(torch.int64)
        self.absent = torch.where(closed, 0, self.absent + 1)

    def server_update(
        self, global_params: Params, updates: ClientUpdates, upload: Params
    ) -> Params:
        active = torch.zeros(self.n, dtype=torch.bool, device=self.device)
        new = global_params
        if updates.ids.size:
            idx = client_index(updates.ids, self.device)
            active[idx] = True
            weights = self.omega().index_select(0, idx) / self.n
            step = mean_over_clients(updates.deltas(), weights)
            new = moved(global_params, step, self.server_lr)
        self._record(active)
        return new

    def server_state(self) -> dict[str, torch.Tensor]:
        return {
            "absent": self.absent,
            "interval_sum": self.interval_sum,
            "interval_count": self.interval_count,
        }

    def config(self) -> dict:
        return {"name": self.name, "cutoff": self.cutoff, "server_lr": self.server_lr}


class FedAWE(Algorithm):
    """FedAWE (Xiang et al. 2024): implicit gossiping and adaptive innovation echoing.

    Client i keeps x_i (the global model of its last participation, x^{(0)} at first) and the
    echo e_i = t - a_{i,t-1} (1 at first). Active clients train K steps from their stale x_i;
    Delta_i = x~_i - x_i. If S_t is not empty the server forms
    x^{(t+1)} = (1/|S|) sum_{i in S} x_i + eta_g clip((1/|S|) sum_{i in S} e_i Delta_i) (the
    reference code clips the echoed innovation to norm ``clip`` = 0.5; None: no clip) and sends
    it to the active clients (x_i <- x^{(t+1)}). The server keeps every x_i (it sent them, and
    reports their mean), so here it sends a client its x_i when the client is next
    selected: the same one model down per participation, and the clients keep no state of
    their own. The model this method reports (and the trainer evaluates) is the mean of all
    N local models, as in the reference code and FedAWE's analysis; it is what
    :meth:`server_update` returns.
    """

    name = "fedawe"
    style = Style("FedAWE", PALETTE[5], "<")

    def __init__(self, server_lr: float = 1.0, clip: float | None = 0.5) -> None:
        self.server_lr = require_server_lr(server_lr)
        self.clip = None if clip is None else require_real("clip", clip, minimum=0.0)

    def setup(self, n_clients: int, global_params: Params) -> None:
        super().setup(n_clients, global_params)
        self.local = LatestTable(n_clients, global_params, initial=global_params)
        self.echo = torch.ones(n_clients, dtype=torch.float64, device=device_of(global_params))

    def _stale(self, ids: np.ndarray, global_params: Params) -> Params:
        return cast_like(self.local.get(ids), global_params)

    def server_message(self, t: int, ids: np.ndarray, global_params: Params, lr: float) -> Params:
        return {f"x.{k}": v for k, v in self._stale(ids, global_params).items()}

    def start_models(self, count: int, global_params: Params, sent: Params) -> Params:
        return {k: v.clone() for k, v in named(sent, "x").items()}

    def _clipped(self, v: Params) -> Params:
        if self.clip is None:
            return v
        norm = float(torch.sqrt(sum(x.square().sum() for x in v.values())))
        scale = min(1.0, self.clip / norm) if norm > 0 else 1.0
        return {k: x * scale for k, x in v.items()}

    def server_update(
        self, global_params: Params, updates: ClientUpdates, upload: Params
    ) -> Params:
        idx = client_index(updates.ids, self.echo.device)
        if idx.numel():
            echo = self.echo.index_select(0, idx) / idx.numel()
            innovation = self._clipped(mean_over_clients(updates.deltas(), echo))
            gossip = mean_over_clients(updates.start)
            server = cast_like(moved(gossip, innovation, self.server_lr), global_params)
            self.local.replace(updates.ids, stack(server, idx.numel()))
        self.echo += 1
        self.echo[idx] = 1
        return cast_like(self.local.mean(), global_params)

    def server_state(self) -> dict[str, torch.Tensor]:
        return {**self.local.state_dict("local"), "echo": self.echo}

    def config(self) -> dict:
        return {"name": self.name, "server_lr": self.server_lr, "clip": self.clip}
