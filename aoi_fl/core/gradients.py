"""The batched engines' gradient functions: every client's gradient of its masked mean loss on
one step's mini-batches, one function per engine (:mod:`aoi_fl.core.engines`)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from aoi_fl.core.losses import LossFn
from aoi_fl.core.model_support import Layers
from aoi_fl.core.stacked_layers import _stacked_linear, client_products
from aoi_fl.core.tensors import Params

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
        # unbind, not indexing: see stacked_layers._StackedConv2d
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
    number of clients still training (:mod:`aoi_fl.core.engines`).
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
