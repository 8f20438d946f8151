"""Which models the training engines take: no buffers or random layers, and the layer layouts
that the ``blocked``/``grouped`` and ``linear`` engines support."""

from __future__ import annotations

from torch import nn

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
