"""Local training engines: the selected clients' SGD steps of one round, batched across clients.

Every engine takes the clients' starting parameters (stacked along a leading client axis), their
mini-batch schedules (rows of sample indices, see :func:`local_batches` and
:func:`local_step_batches`), a learning rate and a step function ``step(params, grads, lr,
state)`` that moves the parameters in place (plain SGD, or a federated method's corrected step,
see :mod:`aoi_fl.core.algorithms`), and returns every client's final parameters. The engines give
the same result up to float rounding:

- ``"sequential"``: the reference, client after client, batch after batch, plain autograd;
- ``"vmap"``: all selected clients at once with ``torch.func`` (``vmap(grad(functional_call))``
  over parameters stacked along a leading client axis); works for any buffer-free model;
- ``"stacked"``: the selected clients in chunks through a client-stacked copy of the model, in
  which ``Linear`` layers become batched matmuls over the client axis and ``Conv2d`` layers run
  one convolution per client with channels-last outputs; every other layer sees the clients
  folded into the batch axis. One backward pass of the sum of the clients' losses gives every
  client's own gradient (the clients share no parameter);
- ``"blocked"`` (for flat ``nn.Sequential`` models): like ``"stacked"``, but the convolutional
  section runs client by client (each client's activations stay in the cache) in channels-last
  layout from the first layer on, with every ReLU moved after the max-pool that follows it (an
  exact rewrite, on a 4x smaller tensor).
- ``"grouped"`` (for the models ``"blocked"`` supports; ``"auto"``'s choice on a CUDA device):
  the convolutional section runs all clients of a chunk as one grouped convolution per layer
  (the clients' channels side by side, ``groups`` times the number of clients), so a chunk of
  hundreds of clients costs a few kernel launches per layer instead of one per client; each
  parameter-free layer sees one client's channels per row, so that a layer across channels
  (``LocalResponseNorm``) never mixes clients. On CUDA every call is padded to exactly ``chunk``
  clients with copies of a real client, whose results are dropped: cuDNN and cuBLAS pick their
  kernels by shape, and fixed shapes keep a client's numbers independent of how many other
  clients share its call (the clients of many runs may share one); the batch width is the call's
  widest mini-batch, the batch size unless every client of the call holds fewer samples than
  that (:func:`local_step_batches`). On a CPU it is opt-in, unpadded and slower (SmallCNN, 10
  clients of 4 steps of 50 samples, one thread of a 2-core AMD EPYC: 580 ms per round against
  320 ms with ``"blocked"``).
- ``"linear"`` (opt-in, for ``Flatten -> Linear`` models such as softmax or linear regression):
  the closed-form gradient of the loss, no autograd. Per step this is a few batched matrix
  products, about 3x faster than ``"blocked"`` when the steps themselves are tiny (the K-Vib
  synthetic task); ``"auto"`` never picks it, so cached results of such models keep their bits.

``"auto"`` (the default) takes ``"blocked"`` when the model is a flat ``nn.Sequential`` it
supports (``"grouped"`` on a CUDA device), else ``"stacked"`` when the model's only parametrised
layers are ``Linear``/``Conv2d``, else ``"vmap"``. The device is the data's, so
:class:`LocalTraining` resolves ``"auto"`` per call (:meth:`LocalTraining.engine_for`). Clients
have different data sizes, hence different numbers of steps and a partial last batch: batches
are padded to the batch size and masked (the loss is the mean over the real samples), and
clients are ordered by decreasing step count so that the clients still training are always a
prefix of the stack (a finished client is never touched again).

On a CPU the kernels, not Python overhead, bound the speed: one client's batch of 50 already
fills the cores, and a larger folded batch spills the activations out of the caches. So the
chunk size is chosen from the activation memory (:data:`CHUNK_ACTIVATION_BYTES`; McMahan's CNN
trains one client at a time), and most of the gain over a plain per-client loop comes from
channels-last convolutions and pooling. ``vmap`` is the slowest here: it turns the convolutions
into grouped convolutions in a slow layout. Measurements: ``benchmarks/bench_train.py``.

Mini-batch order comes from ``generator(seed, "batches", round, client)``: it does not depend
on the engine, on the other selected clients or on resuming from a checkpoint.

Threads: library functions never change torch's thread settings. Entry points (benchmark
scripts, the first cell of a notebook, a subprocess driver) call ``torch.set_num_threads``;
on a 2-core machine torch's default (2 intra-op threads) is already the right choice.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from aoi_fl.core.seeding import generator
from aoi_fl.core.tensors import Params, TensorSplit, gather_rows
from aoi_fl.core.validation import require_choice, require_int

#: ``step(params, grads, lr, state)``: move the (client-stacked) ``params`` in place
StepFn = Callable[[Params, Params, float, dict[str, torch.Tensor]], None]
ENGINES = ("auto", "sequential", "stacked", "vmap", "blocked", "grouped", "linear")


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


def local_step_batches(
    seed: int, t: int, client: int, size: int, steps: int, batch_size: int
) -> np.ndarray:
    """Mini-batches of ``steps`` local steps in round ``t`` (a fixed step count, not epochs).

    Returns an int64 array (steps, min(batch_size, size)): consecutive full batches of fresh
    permutations from ``generator(seed, "batches", t, client)``; a permutation's remainder
    (fewer than a batch) is dropped and the next permutation starts. A client with fewer than
    ``batch_size`` samples uses all of them in every step (as in the FedAU/FedAWE reference
    code the FedSUM experiments follow).
    """
    size = require_int("size", size, minimum=1)
    steps = require_int("steps", steps, minimum=1)
    batch_size = min(require_int("batch_size", batch_size, minimum=1), size)
    per_permutation = size // batch_size
    rng = generator(seed, "batches", t, client)
    # filled in place: a list of rows would cost an object per step besides the indices
    out = np.empty((steps, batch_size), dtype=np.int64)
    done = 0
    while done < steps:
        perm = rng.permutation(size)
        take = min(per_permutation, steps - done)
        out[done : done + take] = perm[: take * batch_size].reshape(take, batch_size)
        done += take
    return out


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


def _with_copies(t: torch.Tensor, extra: int) -> torch.Tensor:
    """``t`` with ``extra`` copies of its last client appended, in ``t``'s memory layout (a
    transposed operand stays transposed, so the BLAS runs the same kernel on it)."""
    perm = (0, *sorted(range(1, t.dim()), key=lambda d: -t.stride(d)))
    base = t.permute(perm)
    padded = torch.cat((base, base[-1:].expand(extra, *base.shape[1:])))
    return padded.permute([perm.index(d) for d in range(t.dim())])


def client_products(
    x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """``x_c w_c (+ bias_c)`` for every client c, with bits that do not depend on the call's size.

    PyTorch hands a product over one client to the BLAS's gemm, which may split that product over
    its threads, and a product over several clients to the batched gemm, which computes each
    client's product on one thread. With two threads on the 2-core machine a lone client's weight
    gradient (10 x 64 by 64 x 60, or 10 x 32 by 32 x 784) came out with other last bits than the
    same client's among others, so a run alone and the same run in a batch could drift apart.
    A call over fewer clients than torch has threads is therefore padded to one client per
    thread with copies of its last client, whose products are dropped: every client's product
    is made whole by one thread whatever shares the call (as with one thread, so runs computed
    single-threaded keep their bits).
    """
    clients, threads = x.shape[0], torch.get_num_threads()
    if 0 < clients < threads:
        extra = threads - clients
        x, w = _with_copies(x, extra), _with_copies(w, extra)
        bias = None if bias is None else _with_copies(bias, extra)
    out = torch.bmm(x, w) if bias is None else torch.baddbmm(bias[:, None], x, w)
    return out[:clients]


class _BatchedLinear(torch.autograd.Function):
    """y_c = x_c W_c^T + b_c for every client c, with gradients laid out like the parameters.

    Autograd through ``bmm(x, W.transpose(1, 2))`` would hand back a transposed (strided) weight
    gradient, which makes the solver's in-place update several times slower for large layers.
    """

    @staticmethod
    def forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return client_products(x, weight.transpose(1, 2), bias)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
        x, weight, bias = inputs
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple:
        x, weight = ctx.saved_tensors
        gx = client_products(g, weight) if ctx.needs_input_grad[0] else None
        gw = client_products(g.transpose(1, 2), x)
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


def _run_stacked(layers: Layers, leaves: Params, h: torch.Tensor) -> torch.Tensor:
    """The dense section on client-grouped rows: Linear layers as batched matmuls per client."""
    for name, m in layers:
        if isinstance(m, nn.Linear):
            h = _stacked_linear(h, leaves[f"{name}.weight"], leaves.get(f"{name}.bias"))
        else:
            h = m(h)
    return h


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
        return _client_gradients(leaves, _run_stacked(stacked, leaves, h), y, mask, loss)

    return gradients


def _grouped_gradients(
    sections: tuple[Layers, Layers], loss: LossFn, clients: int | None
) -> GradientFn:
    """All clients' convolutions as one grouped convolution per layer, the rest stacked.

    The convolutional section holds the activations as (batch, clients, C, H, W). A convolution
    sees (batch, clients * C, H, W) and the clients' filters stacked into clients * groups
    groups, so client c's output channels come from its own input channels and weights only; a
    parameter-free layer sees (batch * clients, C, H, W), one client's channels per row, so that
    a layer across channels (``LocalResponseNorm``) never mixes clients. In NCHW both are views
    of the same memory: the only copies are the input's and the section output's transposes.

    ``clients`` (CUDA): every call is padded to this many clients with copies of the first one
    (parameters, batch and mask: an all-zero mask would make its mean loss 0/0), whose gradients
    go to their own leaves and are dropped; so every kernel sees the same shapes, whatever the
    number of clients still training (module docstring).
    """
    per_client, stacked = sections

    def gradients(params: Params, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> Params:
        real = mask.shape[0]
        if clients is not None and clients > real:

            def pad(v: torch.Tensor) -> torch.Tensor:
                return torch.cat([v, v[:1].expand(clients - real, *v.shape[1:])])

            params = {k: pad(v) for k, v in params.items()}
            x, y, mask = pad(x), pad(y), pad(mask)
        leaves = {k: v.detach().requires_grad_() for k, v in params.items()}
        h = x.transpose(0, 1)
        for name, m in per_client:
            if isinstance(m, nn.Conv2d):
                w, bias = leaves[f"{name}.weight"], leaves.get(f"{name}.bias")
                out = F.conv2d(
                    h.flatten(1, 2),
                    w.flatten(0, 1),
                    None if bias is None else bias.flatten(),
                    m.stride,
                    m.padding,
                    m.dilation,
                    w.shape[0] * m.groups,
                )
                h = out.unflatten(1, (w.shape[0], -1))
            else:
                h = m(h.flatten(0, 1)).unflatten(0, h.shape[:2])
        h = _run_stacked(stacked, leaves, h.transpose(0, 1).flatten(0, 1))
        grads = _client_gradients(leaves, h, y, mask, loss)
        return grads if clients is None else {k: g[:real] for k, g in grads.items()}

    return gradients


def single_linear(model: nn.Module) -> str | None:
    """The name of the Linear layer of a ``[Flatten ->] Linear [-> Flatten(0)]`` model, or None.

    The trailing ``Flatten(start_dim=0)`` (one output, as in ``LinearRegression``) is allowed.
    """
    if not isinstance(model, nn.Sequential) or type(model).forward is not nn.Sequential.forward:
        return None
    layers = [(n, m) for n, m in model.named_children() if not isinstance(m, _DROPOUT)]
    if layers and type(layers[0][1]) is nn.Flatten:
        if (layers[0][1].start_dim, layers[0][1].end_dim) != (1, -1):
            return None
        layers = layers[1:]
    if not layers or type(layers[0][1]) is not nn.Linear:
        return None
    name, linear = layers[0]
    rest = layers[1:]
    if rest and not (
        len(rest) == 1
        and type(rest[0][1]) is nn.Flatten
        and rest[0][1].start_dim == 0
        and linear.out_features == 1
    ):
        return None
    return name


def _linear_gradients(name: str, loss: str) -> GradientFn:
    """Closed-form gradients of the masked mean loss of a single linear layer, per client.

    With outputs o = x W^T + b: cross-entropy gives dL/do = softmax(o) - onehot(y), the mean
    squared error 2 (o - y) / outputs; both times mask / (real samples), then dW = (dL/do)^T x
    and db = sum over the batch of dL/do.
    """
    weight, bias = f"{name}.weight", f"{name}.bias"

    def gradients(params: Params, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> Params:
        x = x.reshape(x.shape[0], x.shape[1], -1)
        out = client_products(x, params[weight].transpose(1, 2), params.get(bias))
        if loss == "cross_entropy":
            d_out = torch.softmax(out, dim=2)
            d_out.scatter_add_(2, y[..., None], torch.full_like(d_out[..., :1], -1.0))
        else:
            d_out = (out - y.to(out.dtype).view_as(out)).mul_(2.0 / out.shape[2])
        d_out.mul_((mask / mask.sum(dim=1, keepdim=True))[..., None])
        grads = {weight: client_products(d_out.transpose(1, 2), x)}
        if bias in params:
            grads[bias] = d_out.sum(dim=1)
        return grads

    return gradients


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


#: Activation memory (the outputs of all layers in one forward pass) that one chunk of clients
#: may take when the chunk size is chosen automatically: larger chunks spill out of the CPU
#: caches. On a 2-core Xeon (benchmarks/bench_train.py) McMahan's CNN (17 MB per client batch
#: of 50) ran 1.5x faster one client at a time than 15 at once; SmallCNN (6 MB) was insensitive.
CHUNK_ACTIVATION_BYTES = 32 * 2**20
#: the gathered mini-batch inputs of one chunk on a CPU: they are read again by the first layer,
#: so they should stay in the caches. It binds only where activations are tiny (a linear model:
#: 3 KB of input against 40 bytes of output per sample): measured on the 2-core machine, 320
#: softmax-regression clients of 5 steps of batch 32 took 405 us a client in one chunk and
#: 326-332 us in chunks of 10-40 (the same numbers: every client's result is its own)
CHUNK_INPUT_BYTES = 4 * 2**20
#: the same budget on a GPU, where a chunk is one batched launch per layer (McMahan's CNN:
#: about 120 clients at once); ``"grouped"`` pads every CUDA call to the chunk
GPU_CHUNK_ACTIVATION_BYTES = 2 * 2**30
#: at most this many clients in an automatic chunk of ``"grouped"`` on CUDA, where every call is
#: padded to its chunk: the activation budget alone would pad a logistic regression's call to
#: 13,500 clients (batch 50), whatever few it trains; McMahan's CNN keeps its budget's 120
GPU_GROUPED_CHUNK_CLIENTS = 128


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
    """The selected clients' local steps of one round, run by one engine (module docstring).

    ``chunk`` is how many clients the batched engines train at once; None picks it so that one
    chunk's activations stay within :data:`CHUNK_ACTIVATION_BYTES` (on a GPU
    :data:`GPU_CHUNK_ACTIVATION_BYTES`, and for ``"grouped"`` on CUDA at most
    :data:`GPU_GROUPED_CHUNK_CLIENTS` clients).

    ``"auto"`` depends on the device, which only the data tell: every call trains with
    :meth:`engine_for` the data's device, and :attr:`engine` names the engine of the latest
    call (what a run's record must name); before the first call it names the choice for
    ``device`` (default: the CPU), so a trainer that knows its device passes it.
    """

    def __init__(
        self,
        model: nn.Module,
        loss: str = "cross_entropy",
        engine: str = "auto",
        chunk: int | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        check_model(model)
        self.model = model
        self._loss_name = require_choice("loss", loss, LOSSES)
        self.loss = LOSSES[loss]
        self.requested_engine = require_choice("engine", engine, ENGINES)
        self.chunk = None if chunk is None else require_int("chunk", chunk, minimum=1)
        self._activation_bytes: dict[tuple[int, ...], int] = {}  # per sample, by input shape
        self._sections = _blocked_layers(model)  # a check of the layers, no copy
        self._stacked = _client_stacked(model) if engine in ("auto", "stacked") else None
        self._linear = single_linear(model) if engine == "linear" else None
        if engine == "stacked" and self._stacked is None:
            raise ValueError(
                "engine 'stacked' supports models whose only parametrised layers are nn.Linear "
                "and zero-padded nn.Conv2d; use engine 'vmap' for this model"
            )
        if engine in ("blocked", "grouped") and self._sections is None:
            raise ValueError(
                f"engine {engine!r} supports flat nn.Sequential models of zero-padded "
                "nn.Conv2d layers followed by nn.Linear layers (and layers without "
                "parameters); use engine 'stacked' or 'vmap' for this model"
            )
        if engine == "linear" and self._linear is None:
            raise ValueError(
                "engine 'linear' supports nn.Sequential models Flatten -> Linear (optionally "
                "-> Flatten(start_dim=0) for one output); use engine 'auto' for this model"
            )
        self.engine = self.engine_for("cpu" if device is None else device)

    def engine_for(self, device: torch.device | str) -> str:
        """The engine that trains on ``device``: the one asked for, or auto's choice there.

        Needs no such device: a CPU-only machine can say what a CUDA run would use.
        """
        if self.requested_engine != "auto":
            return self.requested_engine
        if self._sections is not None:
            return "grouped" if torch.device(device).type == "cuda" else "blocked"
        return "stacked" if self._stacked is not None else "vmap"

    def _gradients(self, engine: str, device: torch.device, chunk: int) -> GradientFn:
        if engine == "linear":
            return _linear_gradients(self._linear, self._loss_name)
        if engine == "blocked":
            return _blocked_gradients(self._sections, self.loss)
        if engine == "grouped":
            return _grouped_gradients(
                self._sections, self.loss, chunk if self._pads(device) else None
            )
        if engine == "stacked":
            return _stacked_gradients(self._stacked, self.loss)
        return _vmap_gradients(self.model, self.loss)

    def _pads(self, device: torch.device) -> bool:
        """Whether every call on ``device`` is padded to the chunk: ``"grouped"`` on CUDA, where
        the kernels are picked by shape (module docstring)."""
        return device.type == "cuda" and self.engine_for(device) == "grouped"

    def chunk_size(self, data: TensorSplit, batch_size: int) -> int:
        """The number of clients trained together (see ``chunk``)."""
        if self.chunk is not None:
            return self.chunk
        shape = tuple(data.x.shape[1:])
        if shape not in self._activation_bytes:
            self._activation_bytes[shape] = activation_bytes(self.model, data.x[:1])
        device = data.x.device
        budget = CHUNK_ACTIVATION_BYTES if device.type == "cpu" else GPU_CHUNK_ACTIVATION_BYTES
        chunk = max(1, budget // (self._activation_bytes[shape] * batch_size))
        if device.type == "cpu":
            per_client = data.x[:1].numel() * data.x.element_size() * batch_size
            chunk = min(chunk, max(1, CHUNK_INPUT_BYTES // per_client))
        return min(chunk, GPU_GROUPED_CHUNK_CLIENTS) if self._pads(device) else chunk

    def __call__(
        self,
        start: Params,
        data: TensorSplit,
        schedules: Sequence[np.ndarray],
        lr: float,
        step: StepFn = sgd_step,
        state: dict[str, torch.Tensor] | None = None,
    ) -> Params:
        """Final local parameters of each client (leading axis in the order of ``schedules``).

        ``start`` holds the clients' starting parameters stacked in the order of ``schedules``
        (:func:`stack` of the global model for FedAvg); it is not modified. ``schedules[i]``
        holds client i's mini-batches as rows of indices into ``data``, padded with -1 (see
        :func:`local_batches`); ``step`` moves the parameters (default: plain SGD) and may
        update the per-client ``state`` (stacked tensors, updated in place).
        """
        state = {} if state is None else state
        count = len(schedules)
        if any(v.shape[0] != count for v in (*start.values(), *state.values())):
            raise ValueError(
                f"start and state must have one entry per schedule ({count}) on their first axis"
            )
        device = data.x.device
        self.engine = self.engine_for(device)
        if not schedules:
            return {k: v.clone() for k, v in start.items()}
        if self.engine == "sequential":
            return _train_sequential(self.model, start, data, schedules, lr, step, state, self.loss)
        width = max(s.shape[1] for s in schedules)
        chunk = self.chunk_size(data, width)
        gradients = self._gradients(self.engine, device, chunk)
        return _train_batched(gradients, start, data, schedules, lr, step, state, chunk, width)
