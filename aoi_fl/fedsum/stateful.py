"""Building blocks of federated methods that keep per-client state across rounds.

- :class:`LatestTable`: a server's table of the latest vector each client sent (one row per
  client) and the running sum of the rows: SCAFFOLD's (c_i, N c), MIFA's and FedVARP's tables
  of the clients' latest updates, and FedAWE's local models are all this.
- :func:`zeros64`: a client's float64 vector that starts at zero (FedSUM's h_i before the
  client's first round; the server keeps y = sum_i h_i beside it), and :func:`named`, the
  tensors of one name in a client's state or a server's message.
- :class:`MeanGradientClient`: the client side of methods that transmit the mean of their K
  local gradients (FedSUM family eqs 5 and 8, SCAFFOLD's new control variate). The gradients are
  summed during the local steps and the mean is sent as such: recovering it from the model
  difference, (x - x^{(t,K)}) / (eta_l K) (times N for FedSUM), amplifies float32 rounding by
  N / (eta_l K) (measured for d = 1e5, N = 100, K = 10: 18% relative error at
  eta_l = 7e-4, the end of the decayed schedule), and the error
  would be summed into the server's aggregate for ever.

Tables and sums are float64, so that the server's running sums stay equal to the sums of the
rows (FedSUM's eq. 7: y moved by the deltas u_i - h_i) to float64 rounding over thousands of
rounds.
"""

from __future__ import annotations

import numpy as np
import torch

from aoi_fl.core.algorithms import Algorithm, ClientUpdates
from aoi_fl.core.tensors import (
    Params,
    client_index,
    device_of,
    per_client_table,
    stack,
)
from aoi_fl.core.validation import require_int, require_real


class LatestTable:
    """Rows (one per client, float64) holding each client's latest vector, and their sum.

    ``initial`` (optional) fills every row with the same parameters (FedAWE's local models
    start at x^(0)); by default the rows start at zero ("never sent").
    """

    def __init__(self, n_clients: int, like: Params, initial: Params | None = None) -> None:
        self.n = require_int("n_clients", n_clients, minimum=1)
        self.rows = per_client_table(self.n, like, torch.float64)
        if initial is not None:
            for k, v in self.rows.items():
                v.copy_(initial[k].to(torch.float64).expand_as(v))
        self.total = {k: v.sum(dim=0) for k, v in self.rows.items()}
        self.device = device_of(like)

    def get(self, ids: np.ndarray) -> Params:
        """Copies of the rows of ``ids`` (client axis first)."""
        idx = client_index(ids, self.device)
        return {k: v.index_select(0, idx) for k, v in self.rows.items()}

    def replace(self, ids: np.ndarray, new: Params) -> Params:
        """Set the rows of ``ids`` to ``new`` (stacked in the order of ``ids``); return the old.

        The sum moves by sum_i (new_i - old_i), so it is never recomputed from the N rows.
        """
        idx = client_index(ids, self.device)
        old = self.get(ids)
        for k, rows in self.rows.items():
            value = new[k].to(torch.float64)
            self.total[k] += (value - old[k]).sum(dim=0)
            rows.index_copy_(0, idx, value)
        return old

    def mean(self) -> Params:
        """(1/N) sum_i row_i (float64)."""
        return {k: v / self.n for k, v in self.total.items()}

    def state_dict(self, prefix: str) -> dict[str, torch.Tensor]:
        """The live tensors (rows and sum) under ``prefix``, for checkpoints."""
        out = {f"{prefix}.rows.{k}": v for k, v in self.rows.items()}
        out.update({f"{prefix}.total.{k}": v for k, v in self.total.items()})
        return out


def zeros64(like: Params, prefix: str) -> Params:
    """A float64 zero tensor per parameter, named ``prefix.<parameter>``."""
    return {
        f"{prefix}.{k}": torch.zeros(v.shape, dtype=torch.float64, device=v.device)
        for k, v in like.items()
    }


def named(params: Params, prefix: str) -> Params:
    """The tensors of ``params`` named ``prefix.<parameter>``, without the prefix."""
    return {
        k.removeprefix(f"{prefix}."): v for k, v in params.items() if k.startswith(f"{prefix}.")
    }


def require_server_lr(value: float) -> float:
    """The server learning rate eta_g > 0."""
    return require_real("server_lr", value, minimum=0.0, strict_minimum=True)


class MeanGradientClient(Algorithm):
    """Local steps x <- x - eta_l (s g + c_i) that also sum the gradients g (see module doc).

    ``s`` is :attr:`gradient_scale` (1 for SCAFFOLD, 1/N for FedSUM and FedSUM-CR, 0 for
    FedSUM-B, whose clients do not move); c_i is the per-round correction each client is
    given (none for FedSUM-B). After the round :meth:`mean_gradients` returns
    (1/K_i) sum_k g_i^{(t,k)}, the quantity the client transmits.
    """

    gradient_scale: float = 1.0

    def start_from_global(
        self, count: int, global_params: Params, correction: Params | None
    ) -> tuple[Params, dict[str, torch.Tensor]]:
        """:meth:`client_begin`'s answer: every client starts from the global model, with
        zeroed gradient sums (float64) and its correction c_i (model dtype) as per-round state.
        """
        state = {
            f"grad_sum.{k}": torch.zeros((count, *v.shape), dtype=torch.float64, device=v.device)
            for k, v in global_params.items()
        }
        if correction is not None:
            state.update(
                {f"correction.{k}": v.to(global_params[k].dtype) for k, v in correction.items()}
            )
        return stack(global_params, count), state

    def local_step(
        self, params: Params, grads: Params, lr: float, state: dict[str, torch.Tensor]
    ) -> None:
        """x <- x - eta_l (s g + c) with s = :attr:`gradient_scale` and c the round's correction,
        the gradient also summed for the upload (FedSUM and FedSUM-CR: s = 1/N and c = y_i / N,
        Algs 2-3 line 9)."""
        for k, p in params.items():
            g = grads[k]
            state[f"grad_sum.{k}"].add_(g)
            if self.gradient_scale:
                p.sub_(g, alpha=lr * self.gradient_scale)
            if (c := state.get(f"correction.{k}")) is not None:
                p.sub_(c, alpha=lr)

    @staticmethod
    def mean_gradients(updates: ClientUpdates) -> Params:
        """(1/K_i) sum_k g_i^{(t,k)} per active client (float64, client axis first)."""
        steps = torch.as_tensor(updates.steps, dtype=torch.float64, device=device_of(updates.state))
        out = {}
        for name, v in updates.state.items():
            if name.startswith("grad_sum."):
                out[name.removeprefix("grad_sum.")] = v / steps.view(-1, *([1] * (v.dim() - 1)))
        return out
