"""The loops of local training: the sequential reference (client after client, batch after
batch) and the batched loop over chunks of clients, with plain SGD's step."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import nn
from torch.func import functional_call

from aoi_fl.core.gradients import GradientFn
from aoi_fl.core.losses import LossFn
from aoi_fl.core.tensors import Params, TensorSplit, gather_rows

#: ``step(params, grads, lr, state)``: move the (client-stacked) ``params`` in place
StepFn = Callable[[Params, Params, float, dict[str, torch.Tensor]], None]


def sgd_step(params: Params, grads: Params, lr: float, state: dict[str, torch.Tensor]) -> None:
    """Plain SGD on client-stacked parameters: theta <- theta - lr * g."""
    for k, p in params.items():
        p.sub_(grads[k], alpha=lr)


def _train_sequential(
    model: nn.Module,
    start: Params,
    data: TensorSplit,
    schedules: Sequence[np.ndarray],
    lr: float,
    step: StepFn,
    state: dict[str, torch.Tensor],
    loss: LossFn,
) -> Params:
    """Reference: one client after the other, one unpadded mini-batch after the other."""
    out = {k: v.clone() for k, v in start.items()}
    for i, schedule in enumerate(schedules):
        params = {k: v[i : i + 1] for k, v in out.items()}
        client_state = {k: v[i : i + 1] for k, v in state.items()}
        for row in schedule:
            batch = torch.from_numpy(row[row >= 0]).to(data.x.device)
            leaves = {k: v[0].detach().requires_grad_() for k, v in params.items()}
            value = loss(functional_call(model, leaves, (data.x[batch],)), data.y[batch]).mean()
            grads = torch.autograd.grad(value, list(leaves.values()))
            stacked = {k: g[None] for k, g in zip(leaves, grads, strict=True)}
            step(params, stacked, lr, client_state)
    return out


def _train_batched(
    gradients: GradientFn,
    start: Params,
    data: TensorSplit,
    schedules: Sequence[np.ndarray],
    lr: float,
    step: StepFn,
    state: dict[str, torch.Tensor],
    chunk: int,
    batch_size: int,
) -> Params:
    """Chunks of ``chunk`` clients at once, padded and masked.

    Rows may be narrower than the batch (a client smaller than the batch size uses all of its
    samples in every step): every row is padded to ``batch_size``, the widest one.
    """
    count = len(schedules)
    steps = np.array([len(s) for s in schedules])
    order = np.argsort(-steps, kind="stable")  # still-training clients form a prefix
    device = data.x.device
    perm = None if (order == np.arange(count)).all() else torch.from_numpy(order).to(device)
    params = {k: (v.clone() if perm is None else v.index_select(0, perm)) for k, v in start.items()}
    ordered_state = (
        state if perm is None else {k: v.index_select(0, perm) for k, v in state.items()}
    )
    for lo in range(0, count, chunk):
        members = order[lo : lo + chunk]
        n_steps = steps[members]
        index = np.zeros((members.size, n_steps[0], batch_size), dtype=np.int64)
        mask = np.zeros(index.shape, dtype=np.float32)
        for j, c in enumerate(members):
            rows = schedules[c]
            # padding repeats a real sample of the same batch; the mask gives it weight 0
            width = rows.shape[1]
            index[j, : len(rows)] = rows[:, :1]
            index[j, : len(rows), :width] = np.where(rows >= 0, rows, rows[:, :1])
            mask[j, : len(rows), :width] = rows >= 0
        index_t, mask_t = torch.from_numpy(index).to(device), torch.from_numpy(mask).to(device)
        for s in range(int(n_steps[0])):
            n = int((n_steps > s).sum())
            sl = slice(lo, lo + n)
            active = {k: v[sl] for k, v in params.items()}
            batch = index_t[:n, s]
            xb, yb = gather_rows(data.x, batch), gather_rows(data.y, batch)
            grads = gradients(active, xb, yb, mask_t[:n, s])
            step(active, grads, lr, {k: v[sl] for k, v in ordered_state.items()})
    if perm is None:
        return params
    for k, v in ordered_state.items():
        state[k].index_copy_(0, perm, v)
    return {k: torch.empty_like(v).index_copy_(0, perm, v) for k, v in params.items()}
