"""Where training runs: one device setting for every run, and what follows from it.

A device is named ``auto`` (CUDA if PyTorch sees a GPU, else the CPU), ``cpu``, ``cuda`` or
``cuda:N``. The name comes from, first to last: an explicit argument, a configuration's
``training.device``, the environment variable ``AOI_FL_DEVICE`` (``make figures DEVICE=...``),
``auto``. ``auto`` on a machine without a GPU is the CPU, where every number is the same, bit for
bit, as before devices existed.

Apple's ``mps`` is refused with an explanation rather than picked: every aggregation of this
project accumulates in float64 (:mod:`aoi_fl.core.tensors`), which the MPS backend does not
support, so a run there would fail mid-way or need a float32 path with other numbers.

The device is not part of a result's identity: a configuration's cache key is the same on every
device, so a result computed on one device is served as it is on another. The numbers of one
configuration agree across devices up to floating-point rounding (the order of reductions in
matrix products and convolutions differs), which a long training run can amplify.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager

import torch

#: the environment variable that names the device when no argument or configuration does
DEVICE_VAR = "AOI_FL_DEVICE"
#: the environment variable that sets the evaluation batch size (:func:`eval_batch_size`)
EVAL_BATCH_VAR = "AOI_FL_EVAL_BATCH_SIZE"
#: evaluation batch size on the CPU: the one every committed result was evaluated with (a
#: loss is summed batch after batch, so another size changes its last bits)
CPU_EVAL_BATCH = 500
#: evaluation batch size on a GPU: large enough that evaluating a test set is a few launches
GPU_EVAL_BATCH = 10_000

_NAME = re.compile(r"auto|cpu|cuda(:\d+)?|mps")
ALLOWED = "'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'"


def requested_device(name: str | None = None) -> str:
    """The device name in force: ``name`` if given, else ``$AOI_FL_DEVICE``, else ``auto``."""
    if name is None:
        name = os.environ.get(DEVICE_VAR) or "auto"
    if not isinstance(name, str) or not _NAME.fullmatch(name.strip().lower()):
        raise ValueError(f"device must be {ALLOWED}, got {name!r}")
    return name.strip().lower()


def _found() -> str:
    """What this machine offers, in words (for error messages)."""
    if torch.cuda.is_available():
        return f"{torch.cuda.device_count()} CUDA device(s)"
    return "no CUDA device (torch.cuda.is_available() is False)"


def resolve_device(name: str | None = None) -> torch.device:
    """The :class:`torch.device` a device name stands for (see the module docstring).

    Asking for a GPU that is not there raises an error naming the device and what was found;
    on CUDA the deterministic settings of :func:`make_deterministic` are applied.
    """
    name = requested_device(name)
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "mps":
        raise ValueError(
            "device 'mps' is not supported: the aggregations accumulate in float64, which "
            "Apple's MPS backend does not provide; use device 'cpu'"
        )
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r} was requested but this machine has {_found()}")
        index = 0 if device.index is None else device.index
        if index >= torch.cuda.device_count():
            raise ValueError(f"device {name!r} was requested but this machine has {_found()}")
        device = torch.device("cuda", index)
        make_deterministic()
    return device


def make_deterministic() -> None:
    """PyTorch's documented settings for repeatable CUDA runs.

    cuBLAS gets a fixed workspace (``CUBLAS_WORKSPACE_CONFIG``, read when the CUDA context
    starts), cuDNN picks deterministic kernels without benchmarking, TF32 is off (float32
    products stay float32, as on the CPU), and operations with a deterministic implementation
    use it; those without one warn instead of failing (the CIFAR CNNs' local response norm, whose
    ``avg_pool3d`` backward has none, so CIFAR runs on a GPU are not repeatable bit for bit).
    The settings are global: they stay on for the rest of the process.
    """
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.use_deterministic_algorithms(True, warn_only=True)


def describe(device: torch.device) -> str:
    """``cpu`` or ``cuda:0 (NVIDIA H100 ...)``: the device as a training notebook prints it."""
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return str(device)


def eval_batch_size(device: torch.device) -> int:
    """Samples per evaluation batch on ``device``: on a GPU ``$AOI_FL_EVAL_BATCH_SIZE`` if set,
    else :data:`GPU_EVAL_BATCH`; on the CPU always :data:`CPU_EVAL_BATCH` (another size would
    change the last bits of cached losses under an unchanged key)."""
    if device.type == "cpu":
        return CPU_EVAL_BATCH
    value = os.environ.get(EVAL_BATCH_VAR)
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"{EVAL_BATCH_VAR} must be a positive integer, got {value!r}")
        return int(value)
    return GPU_EVAL_BATCH


@contextmanager
def memory_hint(device: torch.device) -> Iterator[None]:
    """Turn a GPU out-of-memory error into one that names the settings to lower."""
    try:
        yield
    except torch.OutOfMemoryError as exc:
        raise torch.OutOfMemoryError(
            f"out of memory on {describe(device)}: lower the evaluation batch size "
            f"({EVAL_BATCH_VAR}, now {eval_batch_size(device)}) or the number of clients trained "
            f"at once (training.client_chunk), or use device 'cpu'. {exc}"
        ) from exc
