"""The FedSUM family of You & Pu: FedSUM-B (Alg. 1), FedSUM (Alg. 2) and FedSUM-CR (Alg. 3).

All three share the server (line 13 of Alg. 1, 14 of Alg. 2, 15 of Alg. 3). Each client i
keeps h_i, the mean of the K gradients it computed when it was last active (zero before), and
the server keeps y = sum_i h_i (eq. 7). An active client sends delta_i = u_i - h_i with u_i its
new mean gradient (eq. 5 for FedSUM-B, eq. 8 for FedSUM and FedSUM-CR) and sets h_i = u_i;
then, every round, even when nobody was active,

    y^{(t)} = y^{(t-1)} + sum_{i in S_t} delta_i,
    x^{(t+1)} = x^{(t)} - (eta_g eta_l K / N) y^{(t)},

a SAG-like step along the average of the latest gradients of all N clients (never-seen clients
count zero). The variants differ in what the clients do locally:

- **FedSUM-B**: no local movement: K mini-batch gradients at x^{(t)} (one large batch);
- **FedSUM**: K local steps x <- x - (eta_l/N)(g + y_i) with the correction y_i = y^{(t-1)} -
  h_i sent by the server (eq. 9): the client's own term fresh, the other N - 1 stale;
- **FedSUM-CR**: the same local steps, with y_i rebuilt by the client from the model it last
  received (Alg. 3 line 6, eq. 11): y_i = N (z_i - x^{(t)}) / (eta_g eta_l K (t - a_i)) - h_i.

Choices (where the paper leaves room or exact arithmetic hides a trap):

- u_i is the mean of the gradients summed during the local steps (:class:`MeanGradientClient`),
  not recovered from the model difference N (x - x^{(t,K)}) / (eta_l K) - y_i: equal in exact
  arithmetic (eq. 8, tested), but in float32 the recovery amplifies rounding by N / (eta_l K).
- FedSUM-CR uses line 6 literally, with the current eta_l^{(t)}. With a constant eta_l it is
  the mean of y^{(p)} over the rounds p = a_i .. t-1 since i's last participation, minus h_i
  (eqs 79-80; y^{(-1)} = 0); under a decaying schedule it is the mean of
  (eta_l^{(p)} / eta_l^{(t)}) y^{(p)} instead: too large by the ratio of the mean past step
  to the current one (for eta_l = 0.01/sqrt(t/10+1) and the typical gap of N/S = 5 rounds:
  about 9% at t = 10, 2.6% at t = 50, 0.7% at t = 200).
- Tables and y are float64; the model x keeps the model's dtype.

The number of local steps K is a parameter of the method (it scales the server step, which is
taken even in rounds without clients); every active client must take exactly K steps
(``TrainSettings.local_steps = K``).
"""

from __future__ import annotations

import numpy as np
import torch

from aoi_fl.core.algorithms import ClientUpdates
from aoi_fl.core.registry import PALETTE, Style
from aoi_fl.core.tensors import Params, device_of, moved
from aoi_fl.core.validation import require_int
from aoi_fl.fedsum.stateful import MeanGradientClient, named, require_server_lr, zeros64


class _FedSUMFamily(MeanGradientClient):
    """The common server (Alg. 1 line 13, Alg. 2 line 14, Alg. 3 line 15) and client state h_i.

    Client i keeps h_i and uploads delta_i = u_i - h_i (Alg. 1 lines 10-11); the server keeps
    only y = sum_i h_i (eq. 7) and moves it by the deltas it receives.
    """

    def __init__(self, local_steps: int, server_lr: float = 1.0) -> None:
        self.local_steps = require_int("local_steps", local_steps, minimum=1)
        self.server_lr = require_server_lr(server_lr)

    def setup(self, n_clients: int, global_params: Params) -> None:
        self.n = require_int("n_clients", n_clients, minimum=1)
        super().setup(n_clients, global_params)
        self.y = {
            k: torch.zeros_like(v) for k, v in named(self.client_state(global_params), "h").items()
        }

    def client_state(self, global_params: Params) -> Params:
        return zeros64(global_params, "h")

    def client_end(self, updates: ClientUpdates, own: Params) -> tuple[Params, Params]:
        """A client's upload delta_i = u_i - h_i and its new h_i = u_i (eqs 5-6; Alg. 1 lines
        10-11, and Algs 2-3's)."""
        u = self.mean_gradients(updates)
        h = named(own, "h")
        delta = {f"delta.{k}": v - h[k] for k, v in u.items()}
        return delta, {**own, **{f"h.{k}": v for k, v in u.items()}}

    def server_update(
        self, global_params: Params, updates: ClientUpdates, upload: Params
    ) -> Params:
        """y <- y + sum_i delta_i over the active clients, then x <- x - eta_g eta_l K / N y
        (Alg. 1 line 13, Alg. 2 line 14, Alg. 3 line 15; y = sum_i h_i, eq. 7)."""
        if updates.ids.size:
            steps = np.unique(updates.steps)
            if steps.tolist() != [self.local_steps]:
                raise ValueError(
                    f"{self.name} was built with local_steps={self.local_steps}, but the clients "
                    f"took {steps.tolist()} steps; set TrainSettings.local_steps to "
                    f"{self.local_steps}"
                )
            for k, d in named(upload, "delta").items():
                self.y[k] += d.sum(dim=0)
        step = self.server_lr * updates.lr * self.local_steps / self.n
        return moved(global_params, self.y, -step)

    def server_state(self) -> dict[str, torch.Tensor]:
        """y (eq. 7), the server's state a checkpoint keeps."""
        return {f"y.{k}": v for k, v in self.y.items()}

    def config(self) -> dict:
        return {"name": self.name, "local_steps": self.local_steps, "server_lr": self.server_lr}


class FedSUMB(_FedSUMFamily):
    """FedSUM-B (Alg. 1): K mini-batch gradients at x^{(t)}, no local movement; 1 down, 1 up."""

    name = "fedsum_b"
    style = Style("FedSUM-B", PALETTE[9], "P")
    gradient_scale = 0.0

    def client_begin(
        self, t: int, lr: float, count: int, global_params: Params, sent: Params, own: Params
    ) -> tuple[Params, dict[str, torch.Tensor]]:
        return self.start_from_global(count, global_params, None)


class FedSUM(_FedSUMFamily):
    """FedSUM (Alg. 2): local steps x <- x - (eta_l/N)(g + y_i), y_i = y - h_i; 2 down, 1 up
    (the server sends y with the model)."""

    name = "fedsum"
    style = Style("FedSUM", PALETTE[3], "o")

    def setup(self, n_clients: int, global_params: Params) -> None:
        super().setup(n_clients, global_params)
        self.gradient_scale = 1.0 / self.n

    def server_message(self, t: int, ids: np.ndarray, global_params: Params, lr: float) -> Params:
        return {f"y.{k}": v.expand(len(ids), *v.shape) for k, v in self.y.items()}

    def client_begin(
        self, t: int, lr: float, count: int, global_params: Params, sent: Params, own: Params
    ) -> tuple[Params, dict[str, torch.Tensor]]:
        """Start from x^{(t)} with the correction term (eta_l/N) y_i of every local step,
        y_i = y^{(t-1)} - h_i^{(t)} (eq. 9; Alg. 2 line 6)."""
        y, h = named(sent, "y"), named(own, "h")
        correction = {k: (y[k] - h[k]) / self.n for k in h}
        return self.start_from_global(count, global_params, correction)


class FedSUMCR(FedSUM):
    """FedSUM-CR (Alg. 3): FedSUM's local steps, y_i rebuilt locally (eq. 11); 1 down, 1 up.

    Client i keeps z_i (the model it last received, x^{(0)} at first) and a_i (the round it
    was last active, -1 at first) besides h_i; the server sends only the model.
    """

    name = "fedsum_cr"
    style = Style("FedSUM-CR", PALETTE[2], "s")

    def client_state(self, global_params: Params) -> Params:
        return {
            **super().client_state(global_params),
            **{f"z.{k}": v.detach().clone() for k, v in global_params.items()},
            "last": torch.tensor(-1, dtype=torch.int64, device=device_of(global_params)),
        }

    def server_message(self, t: int, ids: np.ndarray, global_params: Params, lr: float) -> Params:
        return {}

    def client_begin(
        self, t: int, lr: float, count: int, global_params: Params, sent: Params, own: Params
    ) -> tuple[Params, dict[str, torch.Tensor]]:
        """Start from x^{(t)} with the correction (eta_l/N) y_i, y_i rebuilt from the model the
        client last received and the rounds since: y_i = N (z_i - x) / (eta_g eta_l K (t - a_i))
        - h_i (eq. 11; Alg. 3 line 6)."""
        h, z = named(own, "h"), named(own, "z")
        gap = (t - own["last"]).to(torch.float64)
        coef = 1.0 / (self.server_lr * lr * self.local_steps * gap)
        correction = {}
        for k, x in global_params.items():
            drift = z[k].to(torch.float64) - x.to(torch.float64)
            correction[k] = coef.view(-1, *([1] * x.dim())) * drift - h[k] / self.n
        return self.start_from_global(count, global_params, correction)

    def client_end(self, updates: ClientUpdates, own: Params) -> tuple[Params, Params]:
        """FedSUM's upload and h_i, then z_i <- x^{(t)} (the model the client started from) and
        a_i <- t (eq. 10; Alg. 3 line 12)."""
        delta, own = super().client_end(updates, own)
        z = {f"z.{k}": v.clone() for k, v in updates.start.items()}
        last = torch.full_like(own["last"], updates.t)
        return delta, {**own, **z, "last": last}
