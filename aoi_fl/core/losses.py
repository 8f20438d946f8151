"""The losses of local training and evaluation, per sample so that padded samples can be masked
out."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F


def _cross_entropy(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output, target, reduction="none")


def _squared_error(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    diff = output - target.to(output.dtype).view_as(output)
    return diff.square().reshape(output.shape[0], -1).mean(dim=1)


LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
LOSSES: dict[str, LossFn] = {"cross_entropy": _cross_entropy, "mse": _squared_error}
