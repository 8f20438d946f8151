"""Evaluation of models on a split (mean loss, accuracy, per-sample losses, many runs at once)
and reading a run's evaluations (rounds to a target, screening gaps)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import torch
from torch import nn
from torch.func import functional_call

from aoi_fl.core.losses import LOSSES
from aoi_fl.core.model_support import single_linear
from aoi_fl.core.tensors import Params, TensorSplit
from aoi_fl.core.validation import require_choice, require_real


def _batched_outputs(
    model: nn.Module, params: Params, split: TensorSplit, batch_size: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    with torch.no_grad():
        for lo in range(0, len(split), batch_size):
            x, y = split.x[lo : lo + batch_size], split.y[lo : lo + batch_size]
            yield functional_call(model, params, (x,)), y


#: how many runs' single linear layer (softmax or linear regression) one evaluation product
#: holds: always this many (a group with fewer runs is padded with zero models), so that the
#: product has one shape, and a run's outputs one kernel, whatever runs are evaluated with it (a
#: run alone is a group of one run and three zero models). The outputs come classes first
#: (classes x samples), where the softmax runs along the samples: PyTorch's cross-entropy of a
#: (500, 10) block took 16x as long as a log-softmax over the classes of its (10, 500) transpose
#: on the 2-core machine. Measured there (Fashion-MNIST's 10,000 test images, 784 -> 10, two
#: threads; ms per run and evaluation, alone / in a batch of 32 runs): groups of 1: 7.8 / 7.2,
#: 2: 9.0 / 4.0, 4: 9.4 / 2.3, 8: 14.4 / 1.6, 16: 20.0 / 1.3. Four keeps a run alone about as
#: fast as before batching existed (one product of its own) and a batch 3x faster
EVAL_GROUP = 4


def _grouped_linear_sums(
    layer: str,
    params: Sequence[Params],
    split: TensorSplit,
    loss: str,
    batch_size: int,
) -> list[tuple[float, int]]:
    """(sum of the per-sample losses, correct predictions) of each run of a single-linear model,
    one product per group of :data:`EVAL_GROUP` runs and batch of ``split``."""
    out: list[tuple[float, int]] = []
    for lo in range(0, len(params), EVAL_GROUP):
        group = params[lo : lo + EVAL_GROUP]
        weight = split.x.new_zeros((EVAL_GROUP, *group[0][f"{layer}.weight"].shape))
        bias = weight.new_zeros(weight.shape[:2])
        for r, p in enumerate(group):
            weight[r] = p[f"{layer}.weight"]
            if f"{layer}.bias" in p:
                bias[r] = p[f"{layer}.bias"]
        classes = weight.shape[1]
        totals = torch.zeros(EVAL_GROUP, dtype=torch.float64, device=split.x.device)
        correct = torch.zeros(EVAL_GROUP, dtype=torch.int64, device=split.x.device)
        with torch.no_grad():
            for b in range(0, len(split), batch_size):
                x, y = split.x[b : b + batch_size].flatten(1), split.y[b : b + batch_size]
                # (group, classes, samples): every run's outputs, classes first
                o = torch.addmm(bias.view(-1, 1), weight.flatten(0, 1), x.t())
                o = o.view(EVAL_GROUP, classes, -1)
                if loss == "cross_entropy":
                    target = y.view(1, 1, -1).expand(EVAL_GROUP, 1, -1)
                    per_sample = -o.log_softmax(dim=1).gather(1, target).squeeze(1)
                    # max's indices are argmax's (the first maximum), 10x faster on this layout
                    correct += (o.max(dim=1).indices == y).sum(dim=1)
                else:  # the squared error of the one output (the mean over one output is exact)
                    per_sample = (o.squeeze(1) - y.to(o.dtype)).square()
                totals += per_sample.to(torch.float64).sum(dim=1)
        out.extend(zip(totals.tolist()[: len(group)], correct.tolist()[: len(group)], strict=True))
    return out


def evaluate_many(
    model: nn.Module,
    params: Sequence[Params],
    split: TensorSplit,
    loss: str = "cross_entropy",
    batch_size: int = 500,
) -> list[tuple[float, float | None]]:
    """:func:`evaluate` of several parameter sets of one ``model`` on one ``split``, each batch
    of the split read once for all of them. Each run's numbers are those of :func:`evaluate` of
    its parameters alone, bit for bit: a single-linear model's runs share products of one fixed
    shape (:data:`EVAL_GROUP`), any other model runs each run's own forward pass."""
    loss_fn = LOSSES[require_choice("loss", loss, LOSSES)]
    layer = single_linear(model)
    if layer is not None:
        sums = _grouped_linear_sums(layer, params, split, loss, batch_size)
    else:
        sums = [(0.0, 0)] * len(params)
        with torch.no_grad():
            for lo in range(0, len(split), batch_size):
                x, y = split.x[lo : lo + batch_size], split.y[lo : lo + batch_size]
                for r, p in enumerate(params):
                    o = functional_call(model, p, (x,))
                    total = float(loss_fn(o, y).to(torch.float64).sum())
                    hits = int((o.argmax(dim=1) == y).sum()) if loss == "cross_entropy" else 0
                    sums[r] = (sums[r][0] + total, sums[r][1] + hits)
    n = len(split)
    return [(t / n, (c / n if loss == "cross_entropy" else None)) for t, c in sums]


def evaluate(
    model: nn.Module,
    params: Params,
    split: TensorSplit,
    loss: str = "cross_entropy",
    batch_size: int = 500,
) -> tuple[float, float | None]:
    """Mean loss and accuracy of ``model`` with ``params`` on ``split`` (accuracy None for mse).

    A single-linear model is evaluated as a group of :data:`EVAL_GROUP` runs
    (:func:`evaluate_many`)."""
    return evaluate_many(model, [params], split, loss, batch_size)[0]


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


def screen_pairs(history: Mapping[str, list]) -> tuple[np.ndarray, np.ndarray]:
    """(full-test, screen) accuracy on every round where both were measured (screened runs)."""
    screen = history["screen_accuracy"]  # entry t - 1 belongs to round t
    full = dict(zip(history["eval_round"], history["test_accuracy"], strict=True))
    both = [(full[t], a) for t, a in enumerate(screen, start=1) if a is not None and t in full]
    return np.array([f for f, _ in both]), np.array([a for _, a in both])


def screen_gaps(history: Mapping[str, list]) -> np.ndarray:
    """Full-test minus screen accuracy on every round where both were measured (screened runs).

    The first crossing of the target can be missed only in a round where this gap exceeds the
    screening margin, so its maximum over a run is the check that none was.
    """
    full, screen = screen_pairs(history)
    return full - screen


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
