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

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from aoi_fl.core.gradients import (
    GradientFn,
    _blocked_gradients,
    _channels_last,
    _client_gradients,
    _grouped_gradients,
    _linear_gradients,
    _run_stacked,
    _stacked_gradients,
    _vmap_gradients,
)
from aoi_fl.core.local_steps import StepFn, _train_batched, _train_sequential, sgd_step
from aoi_fl.core.losses import LOSSES, LossFn, _cross_entropy, _squared_error
from aoi_fl.core.minibatches import local_batches, local_step_batches
from aoi_fl.core.model_support import (
    _DROPOUT,
    Layers,
    _blocked_layers,
    check_model,
    single_linear,
)
from aoi_fl.core.stacked_layers import (
    _BatchedLinear,
    _client_stacked,
    _stacked_linear,
    _StackedConv2d,
    _StackedLinear,
    _with_copies,
    client_products,
)
from aoi_fl.core.tensors import Params, TensorSplit
from aoi_fl.core.validation import require_choice, require_int

# every name this module defined before its helpers moved out, for the code that imports them
# from here (benchmarks and tests use some of the private ones)
__all__ = [
    "CHUNK_ACTIVATION_BYTES",
    "CHUNK_INPUT_BYTES",
    "ENGINES",
    "GPU_CHUNK_ACTIVATION_BYTES",
    "GPU_GROUPED_CHUNK_CLIENTS",
    "LOSSES",
    "GradientFn",
    "Layers",
    "LocalTraining",
    "LossFn",
    "StepFn",
    "activation_bytes",
    "check_model",
    "client_products",
    "local_batches",
    "local_step_batches",
    "sgd_step",
    "single_linear",
    "_DROPOUT",
    "_BatchedLinear",
    "_StackedConv2d",
    "_StackedLinear",
    "_blocked_gradients",
    "_blocked_layers",
    "_channels_last",
    "_client_gradients",
    "_client_stacked",
    "_cross_entropy",
    "_grouped_gradients",
    "_linear_gradients",
    "_run_stacked",
    "_squared_error",
    "_stacked_gradients",
    "_stacked_linear",
    "_train_batched",
    "_train_sequential",
    "_vmap_gradients",
    "_with_copies",
]

ENGINES = ("auto", "sequential", "stacked", "vmap", "blocked", "grouped", "linear")


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
