"""Layers over client-stacked parameters: batched products whose bits do not depend on how many
clients share a call, and the client-stacked copy of a model that the ``stacked`` engine runs."""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


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
