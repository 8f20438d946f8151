"""Shared by the benchmarks: wall-clock timing, FLOP counts and the float32 matmul reference.

FLOPs are counted by ``torch.utils.flop_counter`` (matmuls and convolutions; element-wise
layers, pooling and the loss count as zero), and rates are reported as a share of the FLOP/s of
a large float32 matmul measured in the same run and thread setting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode


def timed_value(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(wall-clock seconds of one call of ``fn``, its return value)."""
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def timed(fn: Callable[[], Any]) -> float:
    """Wall-clock seconds of one call of ``fn``."""
    return timed_value(fn)[0]


def matmul_flops_per_s(n: int = 4096, repeats: int = 3) -> float:
    """FLOP/s of an (n x n) @ (n x n) float32 matmul: best of ``repeats`` after a warm-up."""
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=gen), torch.randn(n, n, generator=gen)
    a @ b
    best = min(timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n**3 / best


def step_flops(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> int:
    """Forward + backward FLOPs of one mini-batch step of ``model``."""
    counter = FlopCounterMode(display=False)
    with counter:
        F.cross_entropy(model(x), y).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def forward_flops(model: torch.nn.Module, x: torch.Tensor) -> int:
    """FLOPs of one forward pass of ``model`` on the batch ``x`` (no gradients)."""
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(x)
    return counter.get_total_flops()
