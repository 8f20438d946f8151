"""Federated training: FedAvg with partial participation (AoI paper, eqs 15-18).

One round t (0-based):

1. the sampler returns the selected clients S and their weights w (a :class:`Selection`);
2. every i in S starts from the global model (eq. 16) and runs ``local_epochs`` epochs of
   mini-batch SGD with learning rate eta_t (eqs 17-18; the paper: batch 50, eta_t = 0.1 *
   0.998^t); the last mini-batch of an epoch is the remainder, smaller than the others;
3. the server aggregates, by default with eq. 15: theta = sum_{i in S} w_i theta_i;
4. the sampler gets feedback (by default the update norms ||theta_i - theta||_2).

Pluggable parts, for the later methods (unbiased estimators, control variates, adaptive
samplers): the aggregation rule (:class:`Aggregator`), the local solver (:class:`LocalSolver`),
the learning-rate schedule (any callable round -> lr) and the feedback function.

Local training has four engines that give the same model up to float rounding:

- ``"sequential"``: the reference, client after client, batch after batch, plain autograd;
- ``"vmap"``: all selected clients at once with ``torch.func`` (``vmap(grad(functional_call))``
  over parameters stacked along a leading client axis); works for any buffer-free model;
- ``"stacked"``: the selected clients in chunks through a client-stacked copy of the model, in
  which ``Linear`` layers become batched matmuls over the client axis and ``Conv2d`` layers run
  one convolution per client with channels-last outputs; every other layer sees the clients
  folded into the batch axis. One backward pass of the sum of the clients' losses gives every
  client's own gradient (the clients share no parameter);
- ``"blocked"`` (opt-in, for flat ``nn.Sequential`` CNNs): like ``"stacked"``, but the
  convolutional section runs client by client (each client's activations stay in the cache)
  in channels-last layout from the first layer on, with every ReLU moved after the max-pool
  that follows it (an exact rewrite, on a 4x smaller tensor). Not the default because its
  first convolution uses other oneDNN kernels than ``"stacked"`` (results equal up to float
  rounding, not bit for bit, to those cached with ``"auto"``).

``"auto"`` (the default) takes ``"stacked"`` when the model's only parametrised layers are
``Linear``/``Conv2d``, else ``"vmap"``. Clients have different data sizes, hence different
numbers of steps and a partial last batch: batches are padded to the batch size and masked (the
loss is the mean over the real samples), and clients are ordered by decreasing step count so
that the clients still training are always a prefix of the stack (a finished client is never
touched again).

On a CPU the kernels, not Python overhead, bound the speed: one client's batch of 50 already
fills the cores, and a larger folded batch spills the activations out of the caches. So the
chunk size is chosen from the activation memory (:data:`CHUNK_ACTIVATION_BYTES`; McMahan's CNN
trains one client at a time), and most of the stacked engine's gain over a plain per-client
loop comes from channels-last convolutions and pooling. ``vmap`` is the slowest here: it turns
the convolutions into grouped convolutions in a slow layout. ``blocked`` is the fastest: on a
2-core Xeon, one round of 15 clients (5 epochs of 600 samples) ran 1.6-1.9x as fast as a plain
per-client loop for SmallCNN and 1.2-1.3x for McMahan's CNN (65% of a large matmul's FLOP/s),
against 1.1-1.4x and 1.1-1.2x for ``stacked``. Measurements: ``benchmarks/bench_train.py``.

Mini-batch order comes from ``generator(seed, "batches", round, client)``: it does not depend
on the engine, on the other selected clients or on resuming from a checkpoint.

Threads: library functions never change torch's thread settings. Entry points (benchmark
scripts, the first cell of a notebook, a subprocess driver) call ``torch.set_num_threads``;
on a 2-core machine torch's default (2 intra-op threads) is already the right choice.
"""

from __future__ import annotations

import copy
import math
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap
from tqdm import tqdm  # plain bars: tqdm.auto warns (with a machine path) without ipywidgets

from ._validation import require_choice, require_int, require_real
from .cache import CheckpointStore, ResultStore, config_key
from .data import DatasetBundle, TensorSplit, load_dataset, synthetic_cifar
from .models import MODELS, build_model
from .partition import dirichlet_label_skew, iid_equal, iid_sizes, zipf_sizes
from .samplers import POLICIES, make_sampler
from .seeding import generator
from .selection import Sampler

Params = dict[str, torch.Tensor]
ENGINES = ("auto", "sequential", "stacked", "vmap", "blocked")


# ---------------------------------------------------------------------------------------------
# Learning-rate schedules: callables round -> lr with a config() for cache keys


@dataclass(frozen=True)
class ExponentialDecay:
    """eta_t = lr0 * decay^t (the AoI paper: lr0 = 0.1, decay = 0.998)."""

    lr0: float = 0.1
    decay: float = 0.998

    def __post_init__(self) -> None:
        require_real("lr0", self.lr0, minimum=0.0, strict_minimum=True)
        require_real("decay", self.decay, minimum=0.0, maximum=1.0, strict_minimum=True)

    def __call__(self, t: int) -> float:
        return self.lr0 * self.decay**t

    def config(self) -> dict:
        return {"name": "exponential", "lr0": self.lr0, "decay": self.decay}


@dataclass(frozen=True)
class InverseSqrtDecay:
    """eta_t = lr0 / sqrt(t / period + 1) (the FedSUM experiments: period 10)."""

    lr0: float = 0.01
    period: float = 10.0

    def __post_init__(self) -> None:
        require_real("lr0", self.lr0, minimum=0.0, strict_minimum=True)
        require_real("period", self.period, minimum=0.0, strict_minimum=True)

    def __call__(self, t: int) -> float:
        return self.lr0 / math.sqrt(t / self.period + 1.0)

    def config(self) -> dict:
        return {"name": "inverse_sqrt", "lr0": self.lr0, "period": self.period}


@dataclass(frozen=True)
class ConstantLR:
    """eta_t = lr."""

    lr: float = 0.1

    def __post_init__(self) -> None:
        require_real("lr", self.lr, minimum=0.0, strict_minimum=True)

    def __call__(self, t: int) -> float:
        return self.lr

    def config(self) -> dict:
        return {"name": "constant", "lr": self.lr}


LR_SCHEDULES: dict[str, Callable[..., Callable[[int], float]]] = {
    "exponential": ExponentialDecay,
    "inverse_sqrt": InverseSqrtDecay,
    "constant": ConstantLR,
}


# ---------------------------------------------------------------------------------------------
# Losses: per-sample values, so that padded samples can be masked out


def _cross_entropy(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output, target, reduction="none")


def _squared_error(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    diff = output - target.to(output.dtype).view_as(output)
    return diff.square().reshape(output.shape[0], -1).mean(dim=1)


LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
LOSSES: dict[str, LossFn] = {"cross_entropy": _cross_entropy, "mse": _squared_error}


# ---------------------------------------------------------------------------------------------
# Local solvers and aggregation rules


class LocalSolver:
    """How a client's parameters move given a mini-batch gradient (default: plain SGD).

    All tensors carry a leading client axis. ``start`` returns the per-round state of the
    selected clients (a dict of stacked tensors, e.g. a control variate per client); ``step``
    updates ``params`` in place. ``state_dict``/``load_state_dict`` carry state that persists
    across rounds (tensors only, for checkpoints).
    """

    name = "sgd"

    def start(self, ids: np.ndarray, global_params: Params) -> dict[str, torch.Tensor]:
        return {}

    def step(
        self, params: Params, grads: Params, lr: float, state: dict[str, torch.Tensor]
    ) -> None:
        for k, p in params.items():
            p.sub_(grads[k], alpha=lr)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        if state:
            raise ValueError(f"{type(self).__name__} keeps no state, got keys {sorted(state)}")

    def config(self) -> dict:
        return {"name": self.name}


@dataclass
class ClientUpdates:
    """What the selected clients return in one round, in the order of ``ids``.

    ``params``: their final local models (leading client axis); ``state``: the local solver's
    per-round state after training; ``steps``: the number of local SGD steps each took.
    """

    ids: np.ndarray
    weights: np.ndarray
    params: Params
    state: dict[str, torch.Tensor]
    steps: np.ndarray


class Aggregator(ABC):
    """The server's rule: new global parameters from the global ones and the client updates.

    Subclasses may keep server state (e.g. a running sum of updates) exposed through
    ``state_dict``/``load_state_dict`` (tensors only, for checkpoints).
    """

    name = "aggregator"

    @abstractmethod
    def __call__(self, global_params: Params, updates: ClientUpdates) -> Params:
        """The new global parameters (must not modify the inputs in place)."""

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        if state:
            raise ValueError(f"{type(self).__name__} keeps no state, got keys {sorted(state)}")

    def config(self) -> dict:
        return {"name": self.name}


def _weighted_sum(weights: np.ndarray, stacked: torch.Tensor) -> torch.Tensor:
    """sum_i w_i x_i over the leading axis, accumulated in float64."""
    w = torch.as_tensor(weights, dtype=torch.float64).view(-1, *([1] * (stacked.dim() - 1)))
    return (w * stacked.to(torch.float64)).sum(dim=0).to(stacked.dtype)


class WeightedSum(Aggregator):
    """Eq. 15: theta^{t+1} = sum_{i in S} w_i theta_i^{t+1}.

    With no client selected the global model is kept (the empty sum would be the zero model).
    """

    name = "weighted_sum"

    def __call__(self, global_params: Params, updates: ClientUpdates) -> Params:
        if updates.ids.size == 0:
            return global_params
        return {k: _weighted_sum(updates.weights, v) for k, v in updates.params.items()}


class WeightedDelta(Aggregator):
    """theta^{t+1} = theta^t + server_lr * sum_{i in S} w_i (theta_i^{t+1} - theta^t).

    Equal to eq. 15 when the weights sum to one and server_lr = 1. With weights that do not
    sum to one (unbiased estimators such as sum_i lambda_i g_i / p_i) it moves along the
    weighted sum of the updates instead of rescaling the model.
    """

    name = "weighted_delta"

    def __init__(self, server_lr: float = 1.0) -> None:
        self.server_lr = require_real("server_lr", server_lr, minimum=0.0, strict_minimum=True)

    def __call__(self, global_params: Params, updates: ClientUpdates) -> Params:
        if updates.ids.size == 0:
            return global_params
        return {
            k: g + self.server_lr * _weighted_sum(updates.weights, updates.params[k] - g)
            for k, g in global_params.items()
        }

    def config(self) -> dict:
        return {"name": self.name, "server_lr": self.server_lr}


AGGREGATORS: dict[str, Callable[..., Aggregator]] = {
    "weighted_sum": WeightedSum,
    "weighted_delta": WeightedDelta,
}
SOLVERS: dict[str, Callable[..., LocalSolver]] = {"sgd": LocalSolver}


def update_norms(global_params: Params, updates: ClientUpdates) -> np.ndarray:
    """||theta_i - theta||_2 over all parameters, per selected client (the default feedback)."""
    if updates.ids.size == 0:
        return np.zeros(0)
    sq = sum(
        (updates.params[k] - g).flatten(1).to(torch.float64).square().sum(dim=1)
        for k, g in global_params.items()
    )
    return sq.sqrt().numpy()


# ---------------------------------------------------------------------------------------------
# Mini-batch schedules


def local_batches(
    seed: int, t: int, client: int, size: int, epochs: int, batch_size: int
) -> np.ndarray:
    """The positions (into the client's data) of each local step's mini-batch in round ``t``.

    Returns an int64 array (epochs * ceil(size / batch_size), batch_size): one row per step,
    each epoch a fresh permutation from ``generator(seed, "batches", t, client)`` cut into
    consecutive batches; the short last batch of an epoch is padded with -1.
    """
    size = require_int("size", size, minimum=0)
    epochs = require_int("epochs", epochs, minimum=1)
    batch_size = require_int("batch_size", batch_size, minimum=1)
    steps = -(-size // batch_size)
    rng = generator(seed, "batches", t, client)
    out = np.full((epochs, steps * batch_size), -1, dtype=np.int64)
    for e in range(epochs):
        out[e, :size] = rng.permutation(size)
    return out.reshape(epochs * steps, batch_size)


# ---------------------------------------------------------------------------------------------
# Local training engines


_DROPOUT = (
    nn.Dropout,
    nn.Dropout1d,
    nn.Dropout2d,
    nn.Dropout3d,
    nn.AlphaDropout,
    nn.FeatureAlphaDropout,
)


def check_model(model: nn.Module) -> None:
    """The trainer's requirements: no buffers, no random layers (they would use global RNG)."""
    buffers = [name for name, _ in model.named_buffers()]
    if buffers:
        raise ValueError(
            f"model has buffers {buffers[:3]}; batched local training needs a model whose "
            "whole state is its parameters (use e.g. GroupNorm instead of BatchNorm)"
        )
    for name, module in model.named_modules():
        p = getattr(module, "p", 0.0)
        if isinstance(module, _DROPOUT) and p > 0:
            raise ValueError(
                f"model layer {name!r} is dropout with p={p}; random layers would draw from "
                "torch's global RNG, which the trainer never uses: build the model with p=0"
            )


class _BatchedLinear(torch.autograd.Function):
    """y_c = x_c W_c^T + b_c for every client c, with gradients laid out like the parameters.

    Autograd through ``bmm(x, W.transpose(1, 2))`` would hand back a transposed (strided) weight
    gradient, which makes the solver's in-place update several times slower for large layers.
    """

    @staticmethod
    def forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        w = weight.transpose(1, 2)
        return torch.bmm(x, w) if bias is None else torch.baddbmm(bias[:, None], x, w)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
        x, weight, bias = inputs
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple:
        x, weight = ctx.saved_tensors
        gx = torch.bmm(g, weight) if ctx.needs_input_grad[0] else None
        gw = torch.bmm(g.transpose(1, 2), x)
        return gx, gw, (g.sum(dim=1) if ctx.has_bias else None)


class _StackedLinear(nn.Module):
    """``nn.Linear`` with weights stacked over clients; input rows grouped by client."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.weight = linear.weight
        self.bias = linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _stacked_linear(x, self.weight, self.bias)


def _stacked_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    h = x.reshape(weight.shape[0], -1, x.shape[-1])
    return _BatchedLinear.apply(h, weight, bias).reshape(*x.shape[:-1], -1)


class _StackedConv2d(nn.Module):
    """``nn.Conv2d`` with weights stacked over clients: one convolution per client.

    One grouped convolution over all clients (what vmap does) was slower on CPU, with or
    without channels-last. ``unbind`` (not indexing) keeps the backward pass linear in the
    number of clients: indexing would scatter each client's gradient into a full-size zero
    tensor.
    """

    def __init__(self, conv: nn.Conv2d) -> None:
        super().__init__()
        self.weight = conv.weight
        self.bias = conv.bias
        self.stride, self.padding = conv.stride, conv.padding
        self.dilation, self.groups = conv.dilation, conv.groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = self.weight.unbind(0)
        biases = [None] * len(weights) if self.bias is None else self.bias.unbind(0)
        outs = [
            F.conv2d(part, w, b, self.stride, self.padding, self.dilation, self.groups)
            for part, w, b in zip(x.chunk(len(weights)), weights, biases, strict=True)
        ]
        out = outs[0] if len(outs) == 1 else torch.cat(outs)
        # A one-channel input leaves the layout ambiguous and the output comes back NCHW: force
        # channels-last, where the pooling and activation kernels that follow are much faster.
        return out.contiguous(memory_format=torch.channels_last)


def _client_stacked(model: nn.Module) -> nn.Module | None:
    """A copy of ``model`` that runs stacked parameters on client-folded batches, or None.

    None when some parametrised layer is not a plain ``nn.Linear``/``nn.Conv2d`` (zero padding).
    """
    model = copy.deepcopy(model)

    def convert(module: nn.Module) -> bool:
        for name, child in module.named_children():
            if type(child) is nn.Linear:
                setattr(module, name, _StackedLinear(child))
            elif type(child) is nn.Conv2d and child.padding_mode == "zeros":
                setattr(module, name, _StackedConv2d(child))
            elif any(True for _ in child.parameters(recurse=False)) or not convert(child):
                return False
        return True

    if any(True for _ in model.parameters(recurse=False)) or not convert(model):
        return None
    return model


GradientFn = Callable[[Params, torch.Tensor, torch.Tensor, torch.Tensor], Params]


def _vmap_gradients(model: nn.Module, loss: LossFn) -> GradientFn:
    def client_loss(params: Params, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor):
        per_sample = loss(functional_call(model, params, (x,)), y)
        return (per_sample * mask).sum() / mask.sum()

    return vmap(grad(client_loss))


def _client_gradients(
    leaves: Params, out: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, loss: LossFn
) -> Params:
    """Every client's gradient of its masked mean loss, from client-folded outputs ``out``."""
    clients, batch = mask.shape
    per_sample = loss(out, y.reshape(clients * batch)).view(clients, batch)
    # clients share no parameter, so d(sum of losses)/d(theta_i) is client i's own gradient
    total = ((per_sample * mask).sum(dim=1) / mask.sum(dim=1)).sum()
    return dict(zip(leaves, torch.autograd.grad(total, list(leaves.values())), strict=True))


def _stacked_gradients(stacked: nn.Module, loss: LossFn) -> GradientFn:
    def gradients(params: Params, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> Params:
        clients, batch = mask.shape
        leaves = {k: v.detach().requires_grad_() for k, v in params.items()}
        x = x.reshape(clients * batch, *x.shape[2:])
        if x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        out = functional_call(stacked, leaves, (x,))
        return _client_gradients(leaves, out, y, mask, loss)

    return gradients


Layers = list[tuple[str, nn.Module]]


def _blocked_layers(model: nn.Module) -> tuple[Layers, Layers] | None:
    """``model``'s layers as (per-client section, stacked section), or None if unsupported.

    Supported: a flat ``nn.Sequential`` of zero-padded ``Conv2d`` and parameter-free layers,
    then, from the first ``Flatten`` or ``Linear`` on, ``Linear`` and parameter-free layers.
    Dropout layers (p = 0, see :func:`check_model`) are dropped, and a ReLU followed by a
    max-pool is moved after it: the same values and gradients (max commutes with a monotone
    function, and both orders route the gradient to the same element) on a 4x smaller tensor.
    """
    if not isinstance(model, nn.Sequential) or type(model).forward is not nn.Sequential.forward:
        return None
    layers = [(n, m) for n, m in model.named_children() if not isinstance(m, _DROPOUT)]
    for i in range(len(layers) - 1):
        if type(layers[i][1]) is nn.ReLU and type(layers[i + 1][1]) is nn.MaxPool2d:
            layers[i], layers[i + 1] = layers[i + 1], layers[i]
    split = next(
        (i for i, (_, m) in enumerate(layers) if isinstance(m, nn.Flatten | nn.Linear)),
        len(layers),
    )
    for i, (_, m) in enumerate(layers):
        conv = type(m) is nn.Conv2d and m.padding_mode == "zeros" and i < split
        if any(True for _ in m.parameters()) and not (conv or type(m) is nn.Linear):
            return None
    return layers[:split], layers[split:]


def _channels_last(x: torch.Tensor) -> torch.Tensor:
    """``x`` (N, C, H, W) in channels-last layout.

    A one-channel tensor is both layouts at once, and oneDNN then picks its (slower) NCHW
    kernels and returns an NCHW output; explicit channels-last strides (a view) avoid that.
    """
    if x.shape[1] == 1:
        n, _, h, w = x.shape
        return x.contiguous().as_strided(x.shape, (h * w, 1, w, 1))
    return x.contiguous(memory_format=torch.channels_last)


def _blocked_gradients(sections: tuple[Layers, Layers], loss: LossFn) -> GradientFn:
    """Convolutions client by client (their activations stay in cache), the rest stacked."""
    per_client, stacked = sections
    conv_names = {name for name, m in per_client if isinstance(m, nn.Conv2d)}

    def gradients(params: Params, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> Params:
        clients = mask.shape[0]
        leaves = {k: v.detach().requires_grad_() for k, v in params.items()}
        # unbind, not indexing: see _StackedConv2d
        per = {k: v.unbind(0) for k, v in leaves.items() if k.partition(".")[0] in conv_names}
        outs = []
        for c in range(clients):
            h = _channels_last(x[c]) if x.dim() == 5 else x[c]
            for name, m in per_client:
                if isinstance(m, nn.Conv2d):
                    bias = per[f"{name}.bias"][c] if m.bias is not None else None
                    w = per[f"{name}.weight"][c]
                    h = F.conv2d(h, w, bias, m.stride, m.padding, m.dilation, m.groups)
                    h = h.contiguous(memory_format=torch.channels_last)
                else:
                    h = m(h)
            outs.append(h)
        h = torch.cat(outs)
        for name, m in stacked:
            if isinstance(m, nn.Linear):
                h = _stacked_linear(h, leaves[f"{name}.weight"], leaves.get(f"{name}.bias"))
            else:
                h = m(h)
        return _client_gradients(leaves, h, y, mask, loss)

    return gradients


def _stack(global_params: Params, clients: int) -> Params:
    return {k: v.unsqueeze(0).repeat(clients, *([1] * v.dim())) for k, v in global_params.items()}


def _train_sequential(
    model: nn.Module,
    global_params: Params,
    data: TensorSplit,
    schedules: Sequence[np.ndarray],
    lr: float,
    solver: LocalSolver,
    state: dict[str, torch.Tensor],
    loss: LossFn,
) -> Params:
    """Reference: one client after the other, one unpadded mini-batch after the other."""
    out = _stack(global_params, len(schedules))
    for i, schedule in enumerate(schedules):
        params = {k: v[i : i + 1] for k, v in out.items()}
        client_state = {k: v[i : i + 1] for k, v in state.items()}
        for row in schedule:
            batch = torch.from_numpy(row[row >= 0])
            leaves = {k: v[0].detach().requires_grad_() for k, v in params.items()}
            value = loss(functional_call(model, leaves, (data.x[batch],)), data.y[batch]).mean()
            grads = torch.autograd.grad(value, list(leaves.values()))
            stacked = {k: g[None] for k, g in zip(leaves, grads, strict=True)}
            solver.step(params, stacked, lr, client_state)
    return out


def _train_batched(
    gradients: GradientFn,
    global_params: Params,
    data: TensorSplit,
    schedules: Sequence[np.ndarray],
    lr: float,
    solver: LocalSolver,
    state: dict[str, torch.Tensor],
    chunk: int,
) -> Params:
    """Chunks of ``chunk`` clients at once, padded and masked."""
    count = len(schedules)
    steps = np.array([len(s) for s in schedules])
    order = np.argsort(-steps, kind="stable")  # still-training clients form a prefix
    perm = None if (order == np.arange(count)).all() else torch.from_numpy(order)
    params = _stack(global_params, count)  # all equal: needs no reordering
    ordered_state = (
        state if perm is None else {k: v.index_select(0, perm) for k, v in state.items()}
    )
    batch_size = schedules[0].shape[1]
    for lo in range(0, count, chunk):
        members = order[lo : lo + chunk]
        n_steps = steps[members]
        index = np.zeros((members.size, n_steps[0], batch_size), dtype=np.int64)
        mask = np.zeros(index.shape, dtype=np.float32)
        for j, c in enumerate(members):
            rows = schedules[c]
            # padding repeats a real sample of the same batch; the mask gives it weight 0
            index[j, : len(rows)] = np.where(rows >= 0, rows, rows[:, :1])
            mask[j, : len(rows)] = rows >= 0
        index_t, mask_t = torch.from_numpy(index), torch.from_numpy(mask)
        for s in range(int(n_steps[0])):
            n = int((n_steps > s).sum())
            sl = slice(lo, lo + n)
            active = {k: v[sl] for k, v in params.items()}
            batch = index_t[:n, s]
            grads = gradients(active, data.x[batch], data.y[batch], mask_t[:n, s])
            solver.step(active, grads, lr, {k: v[sl] for k, v in ordered_state.items()})
    if perm is None:
        return params
    for k, v in ordered_state.items():
        state[k].index_copy_(0, perm, v)
    return {k: torch.empty_like(v).index_copy_(0, perm, v) for k, v in params.items()}


#: Activation memory (the outputs of all layers in one forward pass) that one chunk of clients
#: may take when the chunk size is chosen automatically: larger chunks spill out of the CPU
#: caches. On a 2-core Xeon (benchmarks/bench_train.py) McMahan's CNN (17 MB per client batch
#: of 50) ran 1.5x faster one client at a time than 15 at once; SmallCNN (6 MB) was insensitive.
CHUNK_ACTIVATION_BYTES = 32 * 2**20


def activation_bytes(model: nn.Module, x: torch.Tensor) -> int:
    """Bytes of the outputs of all leaf layers in one forward pass of ``x``."""
    total = 0

    def count(module: nn.Module, inputs: Any, output: Any) -> None:
        nonlocal total
        if isinstance(output, torch.Tensor):
            total += output.numel() * output.element_size()

    leaves = [m for m in model.modules() if next(m.children(), None) is None]
    handles = [m.register_forward_hook(count) for m in leaves]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return total


class LocalTraining:
    """The selected clients' local epochs, run by one engine (see the module docstring).

    ``chunk`` is how many clients the batched engines train at once; None picks it so that one
    chunk's activations stay within :data:`CHUNK_ACTIVATION_BYTES`.
    """

    def __init__(
        self,
        model: nn.Module,
        loss: str = "cross_entropy",
        engine: str = "auto",
        chunk: int | None = None,
    ) -> None:
        check_model(model)
        self.model = model
        self.loss = LOSSES[require_choice("loss", loss, LOSSES)]
        engine = require_choice("engine", engine, ENGINES)
        self.chunk = None if chunk is None else require_int("chunk", chunk, minimum=1)
        self._activation_bytes: dict[tuple[int, ...], int] = {}  # per sample, by input shape
        stacked = _client_stacked(model) if engine in ("auto", "stacked") else None
        if engine == "stacked" and stacked is None:
            raise ValueError(
                "engine 'stacked' supports models whose only parametrised layers are nn.Linear "
                "and zero-padded nn.Conv2d; use engine 'vmap' for this model"
            )
        if engine == "auto":
            engine = "vmap" if stacked is None else "stacked"
        self.engine = engine
        if engine == "blocked":
            sections = _blocked_layers(model)
            if sections is None:
                raise ValueError(
                    "engine 'blocked' supports flat nn.Sequential models of zero-padded "
                    "nn.Conv2d layers followed by nn.Linear layers (and layers without "
                    "parameters); use engine 'stacked' or 'vmap' for this model"
                )
            self._gradients = _blocked_gradients(sections, self.loss)
        elif engine == "stacked":
            self._gradients = _stacked_gradients(stacked, self.loss)
        elif engine == "vmap":
            self._gradients = _vmap_gradients(model, self.loss)

    def chunk_size(self, data: TensorSplit, batch_size: int) -> int:
        """The number of clients trained together (see ``chunk``)."""
        if self.chunk is not None:
            return self.chunk
        shape = tuple(data.x.shape[1:])
        if shape not in self._activation_bytes:
            self._activation_bytes[shape] = activation_bytes(self.model, data.x[:1])
        return max(1, CHUNK_ACTIVATION_BYTES // (self._activation_bytes[shape] * batch_size))

    def __call__(
        self,
        global_params: Params,
        data: TensorSplit,
        schedules: Sequence[np.ndarray],
        lr: float,
        solver: LocalSolver,
        state: dict[str, torch.Tensor],
    ) -> Params:
        """Final local parameters of each client (leading axis in the order of ``schedules``).

        ``schedules[i]`` holds client i's mini-batches as rows of indices into ``data``, padded
        with -1 (see :func:`local_batches`); ``state`` is updated in place.
        """
        if not schedules:
            return {k: v.new_empty((0, *v.shape)) for k, v in global_params.items()}
        if self.engine == "sequential":
            return _train_sequential(
                self.model, global_params, data, schedules, lr, solver, state, self.loss
            )
        chunk = self.chunk_size(data, schedules[0].shape[1])
        return _train_batched(
            self._gradients, global_params, data, schedules, lr, solver, state, chunk
        )


@torch.no_grad()
def _batched_outputs(
    model: nn.Module, params: Params, split: TensorSplit, batch_size: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    with torch.no_grad():
        for lo in range(0, len(split), batch_size):
            x, y = split.x[lo : lo + batch_size], split.y[lo : lo + batch_size]
            yield functional_call(model, params, (x,)), y


def evaluate(
    model: nn.Module,
    params: Params,
    split: TensorSplit,
    loss: str = "cross_entropy",
    batch_size: int = 500,
) -> tuple[float, float | None]:
    """Mean loss and accuracy of ``model`` with ``params`` on ``split`` (accuracy None for mse)."""
    loss_fn = LOSSES[require_choice("loss", loss, LOSSES)]
    total, correct = 0.0, 0
    for out, y in _batched_outputs(model, params, split, batch_size):
        total += float(loss_fn(out, y).to(torch.float64).sum())
        if loss == "cross_entropy":
            correct += int((out.argmax(dim=1) == y).sum())
    n = len(split)
    return total / n, (correct / n if loss == "cross_entropy" else None)


def per_sample_losses(
    model: nn.Module,
    params: Params,
    split: TensorSplit,
    loss: str = "cross_entropy",
    batch_size: int = 500,
) -> torch.Tensor:
    """The loss of every sample of ``split`` under ``params`` (1-d tensor, split order)."""
    loss_fn = LOSSES[require_choice("loss", loss, LOSSES)]
    parts = [loss_fn(out, y) for out, y in _batched_outputs(model, params, split, batch_size)]
    return torch.cat(parts) if parts else torch.zeros(0)


def rounds_to_target(
    accuracy: Sequence[float | None] | Mapping[int, float | None],
    target: float,
    rounds: Sequence[int] | None = None,
) -> int | None:
    """The first round whose accuracy reaches ``target``, or None if none does.

    ``accuracy`` is a mapping round -> accuracy, or a sequence whose entries belong to
    ``rounds`` (default 1, 2, ...). Missing values (None) never reach the target.
    """
    target = require_real("target", target)
    if isinstance(accuracy, Mapping):
        rounds, accuracy = list(accuracy.keys()), list(accuracy.values())
    elif rounds is None:
        rounds = range(1, len(accuracy) + 1)
    if len(rounds) != len(accuracy):
        raise ValueError(f"rounds has {len(rounds)} entries but accuracy has {len(accuracy)}")
    reached = [r for r, a in zip(rounds, accuracy, strict=True) if a is not None and a >= target]
    return int(min(reached)) if reached else None


# ---------------------------------------------------------------------------------------------
# The federated trainer


@dataclass(frozen=True)
class FederatedData:
    """Training samples split over clients (``partition[i]``: client i's indices) and a test set."""

    train: TensorSplit
    test: TensorSplit
    partition: Sequence[np.ndarray]

    def __post_init__(self) -> None:
        n = len(self.train)
        for i, idx in enumerate(self.partition):
            idx = np.asarray(idx)
            if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
                raise ValueError(f"partition[{i}] must be a 1-d integer array, got {idx.dtype}")
            if idx.size and (idx.min() < 0 or idx.max() >= n):
                raise ValueError(f"partition[{i}] has indices outside [0, {n})")

    @property
    def sizes(self) -> np.ndarray:
        return np.array([len(idx) for idx in self.partition], dtype=np.int64)


@dataclass(frozen=True)
class TrainSettings:
    """Hyper-parameters of a training run (the AoI paper's: 5 local epochs of batch 50)."""

    rounds: int
    local_epochs: int = 5
    batch_size: int = 50
    seed: int = 0
    eval_every: int = 1
    loss: str = "cross_entropy"
    engine: str = "auto"
    client_chunk: int | None = None
    #: at each evaluation also record every client's training loss F_k of the global model on
    #: (up to) this many of its samples (0: off); needed for the selection skew rho (eq. 24)
    client_loss_samples: int = 0

    def __post_init__(self) -> None:
        require_int("rounds", self.rounds, minimum=0)
        require_int("client_loss_samples", self.client_loss_samples, minimum=0)
        require_int("local_epochs", self.local_epochs, minimum=1)
        require_int("batch_size", self.batch_size, minimum=1)
        require_int("seed", self.seed, minimum=0)
        require_int("eval_every", self.eval_every, minimum=1)
        require_choice("loss", self.loss, LOSSES)
        require_choice("engine", self.engine, ENGINES)
        if self.client_chunk is not None:
            require_int("client_chunk", self.client_chunk, minimum=1)


HISTORY_KEYS = (
    "lr",
    "selected",
    "weights",
    "update_norms",
    "eval_round",
    "test_loss",
    "test_accuracy",
    "client_losses",
)


@dataclass
class FederatedTrainer:
    """FedAvg with partial participation; ``run()`` trains, ``history`` holds the records.

    ``history`` (JSON-serialisable): per round ``lr``, ``selected`` (ids), ``weights`` and
    ``update_norms`` (||theta_i - theta||_2, also the sampler's feedback by default); per
    evaluation ``eval_round`` (0 = the initial model), ``test_loss`` and ``test_accuracy`` of
    the global model, every ``eval_every`` rounds and after the last round.
    """

    model: nn.Module
    data: FederatedData
    sampler: Sampler
    settings: TrainSettings
    lr_schedule: Callable[[int], float] = field(default_factory=ExponentialDecay)
    aggregator: Aggregator = field(default_factory=WeightedSum)
    solver: LocalSolver = field(default_factory=LocalSolver)
    feedback: Callable[[Params, ClientUpdates], np.ndarray] = update_norms

    def __post_init__(self) -> None:
        if self.sampler.n != len(self.data.partition):
            raise ValueError(
                f"sampler has n={self.sampler.n} clients but the partition has "
                f"{len(self.data.partition)}"
            )
        self.local = LocalTraining(
            self.model, self.settings.loss, self.settings.engine, self.settings.client_chunk
        )
        self.params: Params = {k: v.detach().clone() for k, v in self.model.named_parameters()}
        self.round = 0
        self.history: dict[str, list] = {key: [] for key in HISTORY_KEYS}

    def _schedule(self, t: int, client: int) -> np.ndarray:
        s = self.settings
        idx = np.asarray(self.data.partition[client], dtype=np.int64)
        rows = local_batches(s.seed, t, client, idx.size, s.local_epochs, s.batch_size)
        return np.where(rows >= 0, idx[np.maximum(rows, 0)], -1)

    def evaluate(self) -> tuple[float, float | None]:
        return evaluate(self.model, self.params, self.data.test, self.settings.loss)

    def client_loss_counts(self) -> np.ndarray:
        """How many samples of each client its loss subset holds (client order)."""
        k = self.settings.client_loss_samples
        return np.array([min(len(idx), k) for idx in self.data.partition], dtype=np.int64)

    def client_loss_split(self) -> TensorSplit:
        """The samples on which per-client losses are measured: a seeded subset of each client."""
        k = self.settings.client_loss_samples
        parts = []
        for i, idx in enumerate(self.data.partition):
            idx = np.asarray(idx, dtype=np.int64)
            take = generator(self.settings.seed, "client_loss_subset", i).permutation(idx.size)
            parts.append(idx[np.sort(take[:k])])
        flat = torch.from_numpy(np.concatenate(parts))
        return TensorSplit(self.data.train.x[flat], self.data.train.y[flat])

    def client_losses(self, params: Params | None = None) -> list[float]:
        """F_k of ``params`` (default: the global model) for every client k, on its loss subset."""
        if self.settings.client_loss_samples == 0:
            raise ValueError("client_losses needs TrainSettings(client_loss_samples > 0)")
        if not hasattr(self, "_loss_split"):
            self._loss_split = self.client_loss_split()
            counts = self.client_loss_counts()
            self._loss_owner = torch.from_numpy(np.repeat(np.arange(len(counts)), counts))
            self._loss_counts = torch.tensor(counts, dtype=torch.float64)
        params = self.params if params is None else params
        per_sample = per_sample_losses(self.model, params, self._loss_split, self.settings.loss)
        sums = torch.zeros(len(self._loss_counts), dtype=torch.float64)
        sums.index_add_(0, self._loss_owner, per_sample.double())
        return (sums / self._loss_counts).tolist()

    def _record_evaluation(self) -> None:
        loss, accuracy = self.evaluate()
        self.history["eval_round"].append(self.round)
        self.history["test_loss"].append(loss)
        self.history["test_accuracy"].append(accuracy)
        if self.settings.client_loss_samples:
            self.history["client_losses"].append(self.client_losses())

    def _evaluate_initial_model(self) -> None:
        if not self.history["eval_round"]:
            self._record_evaluation()

    def run_round(self) -> None:
        """One round: select, train locally, aggregate, feed back (and evaluate if due)."""
        self._evaluate_initial_model()
        t = self.round
        selection = self.sampler.sample()
        lr = float(self.lr_schedule(t))
        schedules = [self._schedule(t, int(i)) for i in selection.ids]
        state = self.solver.start(selection.ids, self.params)
        client_params = self.local(self.params, self.data.train, schedules, lr, self.solver, state)
        updates = ClientUpdates(
            selection.ids,
            selection.weights,
            client_params,
            state,
            np.array([len(s) for s in schedules], dtype=np.int64),
        )
        norms = np.asarray(self.feedback(self.params, updates), dtype=np.float64)
        self.params = self.aggregator(self.params, updates)
        self.sampler.feedback(selection.ids, norms)
        self.round = t + 1
        h = self.history
        h["lr"].append(lr)
        h["selected"].append(selection.ids.tolist())
        h["weights"].append(selection.weights.tolist())
        h["update_norms"].append(norms.tolist())
        if self.round % self.settings.eval_every == 0 or self.round == self.settings.rounds:
            self._record_evaluation()

    def run(
        self,
        *,
        progress: bool = False,
        on_round: Callable[[FederatedTrainer], None] | None = None,
    ) -> dict[str, list]:
        """Train up to ``settings.rounds`` (from the current round); return ``history``."""
        self._evaluate_initial_model()
        with tqdm(
            total=self.settings.rounds,
            initial=self.round,
            disable=not progress,
            desc=f"{self.sampler.name}",
            unit="round",
        ) as bar:
            while self.round < self.settings.rounds:
                self.run_round()
                if on_round is not None:
                    on_round(self)
                bar.update(1)
                if self.history["eval_round"][-1] == self.round:
                    bar.set_postfix(acc=self.history["test_accuracy"][-1], refresh=False)
        return self.history

    def state_dict(self) -> tuple[dict[str, torch.Tensor], dict]:
        """(tensors, JSON state): everything needed to continue the exact same run."""
        tensors = {f"params.{k}": v for k, v in self.params.items()}
        tensors.update({f"aggregator.{k}": v for k, v in self.aggregator.state_dict().items()})
        tensors.update({f"solver.{k}": v for k, v in self.solver.state_dict().items()})
        state = {"round": self.round, "sampler": self.sampler.state_dict(), "history": self.history}
        return tensors, copy.deepcopy(state)

    def load_state_dict(self, tensors: Mapping[str, torch.Tensor], state: Mapping) -> None:
        groups: dict[str, dict[str, torch.Tensor]] = {"params": {}, "aggregator": {}, "solver": {}}
        for name, value in tensors.items():
            group, _, key = name.partition(".")
            if group not in groups:
                raise ValueError(f"unexpected tensor {name!r} in the checkpoint")
            groups[group][key] = value
        if set(groups["params"]) != set(self.params) or any(
            groups["params"][k].shape != v.shape for k, v in self.params.items()
        ):
            raise ValueError("checkpoint parameters do not match the model")
        if set(state.get("history", {})) != set(HISTORY_KEYS):
            raise ValueError("checkpoint history does not have the expected records")
        self.aggregator.load_state_dict(groups["aggregator"])
        self.solver.load_state_dict(groups["solver"])
        self.sampler.load_state_dict(state["sampler"])
        self.params = {k: v.clone() for k, v in groups["params"].items()}
        self.round = require_int("round", state["round"], minimum=0)
        self.history = copy.deepcopy(dict(state["history"]))


# ---------------------------------------------------------------------------------------------
# Experiments from configurations, cached on disk


def _iid(labels: np.ndarray, n_clients: int, seed: int) -> list[np.ndarray]:
    return iid_equal(labels.size, n_clients, seed)


def _dirichlet(
    labels: np.ndarray, n_clients: int, seed: int, alpha: float, min_size: int = 10
) -> list[np.ndarray]:
    return dirichlet_label_skew(labels, n_clients, alpha, seed, min_size=min_size)


def _zipf(
    labels: np.ndarray, n_clients: int, seed: int, a: float, min_size: int = 1
) -> list[np.ndarray]:
    """IID samples with Zipf(a) client sizes that use the whole training set."""
    sizes = zipf_sizes(n_clients, a, seed, total=labels.size, min_size=min_size)
    return iid_sizes(labels.size, sizes, seed)


#: partition name -> function(labels, n_clients, seed, **options) -> list of index arrays
PARTITIONS: dict[str, Callable[..., list[np.ndarray]]] = {
    "iid": _iid,
    "dirichlet": _dirichlet,
    "zipf": _zipf,
}

#: dataset name -> function(root, **options) -> DatasetBundle
DATASETS: dict[str, Callable[..., DatasetBundle]] = {
    "mnist": lambda root, **kw: load_dataset("mnist", root, **kw),
    "cifar10": lambda root, **kw: load_dataset("cifar10", root, **kw),
    "cifar100": lambda root, **kw: load_dataset("cifar100", root, **kw),
    "synthetic_cifar": lambda root, **kw: synthetic_cifar(**kw),
}

_SECTIONS = ("dataset", "partition", "model", "sampler", "training")
#: defaults of the "training" section (the AoI paper's MNIST setting, 100 rounds)
TRAINING_DEFAULTS: dict[str, Any] = {
    "rounds": 100,
    "local_epochs": 5,
    "batch_size": 50,
    "seed": 0,
    "eval_every": 1,
    "loss": "cross_entropy",
    "engine": "auto",
    "client_chunk": None,
    "client_loss_samples": 0,
    "lr": {"name": "exponential", "lr0": 0.1, "decay": 0.998},
    "aggregator": {"name": "weighted_sum"},
    "solver": {"name": "sgd"},
}


def _named(section: str, spec: Any, registry: Mapping[str, Callable[..., Any]]) -> Any:
    if not isinstance(spec, Mapping) or "name" not in spec:
        raise ValueError(f"{section} must be a dict with a 'name', got {spec!r}")
    name = require_choice(section, spec["name"], registry)
    return registry[name](**{k: v for k, v in spec.items() if k != "name"})


def _training_parts(
    t: Mapping[str, Any],
) -> tuple[TrainSettings, Callable[[int], float], Aggregator, LocalSolver]:
    parts = ("lr", "aggregator", "solver")
    settings = TrainSettings(**{k: v for k, v in t.items() if k not in parts})
    return (
        settings,
        _named("training lr", t["lr"], LR_SCHEDULES),
        _named("training aggregator", t["aggregator"], AGGREGATORS),
        _named("training solver", t["solver"], SOLVERS),
    )


def resolve_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with the training defaults filled in, checked (the cache key's input).

    Sections: ``dataset`` ({"name", options}), ``partition`` ({"name", "n_clients", "seed",
    options}), ``model`` ({"name", "seed", options for :func:`models.build_model`}),
    ``sampler`` ({"policy", "m", "seed", options for :func:`samplers.make_sampler`}) and
    ``training`` (:data:`TRAINING_DEFAULTS`; ``lr``, ``aggregator`` and ``solver`` are
    {"name", options} dicts naming entries of :data:`LR_SCHEDULES`, :data:`AGGREGATORS`,
    :data:`SOLVERS`).
    """
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    unknown = set(config) - set(_SECTIONS)
    missing = set(_SECTIONS) - set(config) - {"training"}
    if unknown or missing:
        raise ValueError(
            f"config sections must be {list(_SECTIONS)} (training optional); "
            f"unknown: {sorted(unknown)}, missing: {sorted(missing)}"
        )
    training = dict(config.get("training", {}))
    if extra := set(training) - set(TRAINING_DEFAULTS):
        raise ValueError(
            f"unknown training options {sorted(extra)}; valid: {list(TRAINING_DEFAULTS)}"
        )
    resolved = {s: copy.deepcopy(dict(config[s])) for s in _SECTIONS if s != "training"}
    resolved["training"] = {**copy.deepcopy(TRAINING_DEFAULTS), **copy.deepcopy(training)}
    for section, key, registry in (
        ("dataset", "name", DATASETS),
        ("partition", "name", PARTITIONS),
        ("model", "name", MODELS),
        ("sampler", "policy", POLICIES),
    ):
        require_choice(f"{section} {key}", resolved[section].get(key), registry)
    _training_parts(resolved["training"])
    config_key(resolved)  # fails here, not after training, if something is not JSON
    return resolved


def build_trainer(config: Mapping[str, Any], data_root: str = "data") -> FederatedTrainer:
    """The :class:`FederatedTrainer` a configuration describes (see :func:`resolve_config`)."""
    c = resolve_config(config)
    ds = dict(c["dataset"])
    bundle = DATASETS[ds.pop("name")](data_root, **ds)
    part = dict(c["partition"])
    labels = bundle.train.y.numpy()
    partition = PARTITIONS[part.pop("name")](labels, **part)
    data = FederatedData(bundle.train, bundle.test, partition)
    model_spec = dict(c["model"])
    model = build_model(model_spec.pop("name"), **model_spec)
    sampler_spec = dict(c["sampler"])
    sampler = make_sampler(
        sampler_spec.pop("policy"), n=len(partition), sizes=data.sizes, **sampler_spec
    )
    settings, lr_schedule, aggregator, solver = _training_parts(c["training"])
    return FederatedTrainer(
        model,
        data,
        sampler,
        settings,
        lr_schedule=lr_schedule,
        aggregator=aggregator,
        solver=solver,
    )


@dataclass(frozen=True)
class ExperimentResult:
    """A finished run: its resolved config, records, final global model and sampler config."""

    key: str
    config: dict
    history: dict
    final_params: dict[str, np.ndarray]
    sampler: dict
    cached: bool

    def rounds_to_target(self, target: float) -> int | None:
        h = self.history
        return rounds_to_target(h["test_accuracy"], target, rounds=h["eval_round"])


def run_experiment(
    config: Mapping[str, Any],
    *,
    cache_dir: str = "results",
    rerun: bool = False,
    progress: bool = True,
    data_root: str = "data",
    checkpoint_every: int = 5,
) -> ExperimentResult:
    """The cached result of ``config``, or compute it (resuming from its latest checkpoint).

    A checkpoint is written every ``checkpoint_every`` rounds; a run killed mid-way and started
    again continues from it and ends with exactly the numbers of an uninterrupted run.
    ``rerun=True`` ignores the cached result and any checkpoint and trains from scratch.
    """
    resolved = resolve_config(config)
    checkpoint_every = require_int("checkpoint_every", checkpoint_every, minimum=1)
    key = config_key(resolved)
    results = ResultStore(cache_dir)
    if not rerun and (hit := results.load(resolved)) is not None:
        result, arrays = hit
        return ExperimentResult(key, resolved, result["history"], arrays, result["sampler"], True)
    checkpoints = CheckpointStore(cache_dir, resolved)
    if rerun:
        checkpoints.clear()
    trainer = build_trainer(resolved, data_root)
    if (checkpoint := checkpoints.load()) is not None:
        _, tensors, state = checkpoint
        try:
            trainer.load_state_dict(tensors, state)
        except (KeyError, TypeError, ValueError) as exc:
            warnings.warn(f"ignoring unusable checkpoint (restarting the run): {exc}", stacklevel=2)
            trainer = build_trainer(resolved, data_root)  # loading may have changed some parts

    def save_checkpoint(tr: FederatedTrainer) -> None:
        if tr.round % checkpoint_every == 0 and tr.round < tr.settings.rounds:
            checkpoints.save(tr.round, *tr.state_dict())

    history = trainer.run(progress=progress, on_round=save_checkpoint)
    final = {k: v.numpy() for k, v in trainer.params.items()}
    sampler = trainer.sampler.config()
    result = {"history": history, "sampler": sampler, "torch_version": torch.__version__}
    results.save(resolved, result, final)
    checkpoints.clear()
    return ExperimentResult(key, resolved, copy.deepcopy(history), final, sampler, False)
