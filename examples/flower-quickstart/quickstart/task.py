"""The app's own model and data: a small MLP on MNIST read from the IDX files of a local
folder, each node's partition a seeded share of the training set (a tenth held out)."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import torch
from torch import nn

#: the seed of the split into partitions (the same on every node)
SPLIT_SEED = 0


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Flatten(), nn.Linear(784, 32), nn.ReLU(), nn.Linear(32, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def initial_model(seed: int = 0) -> Net:
    """The model every run starts from (``seed``'s), leaving torch's global generator as it was."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return Net()


def _idx(path: Path) -> np.ndarray:
    data = path.read_bytes()
    dims = data[3]  # the IDX header: two zero bytes, the type, the number of dimensions
    shape = np.frombuffer(data, dtype=">u4", count=dims, offset=4)
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


@functools.cache  # a node reads the files once, not once per message
def _mnist(data_root: str) -> tuple[torch.Tensor, torch.Tensor]:
    raw = Path(data_root) / "MNIST" / "raw"
    if not (raw / "train-images-idx3-ubyte").is_file():
        raise FileNotFoundError(f"no MNIST in {raw}: set the run config's data-root")
    images = torch.from_numpy(_idx(raw / "train-images-idx3-ubyte").astype(np.float32) / 255.0)
    return images, torch.from_numpy(_idx(raw / "train-labels-idx1-ubyte").astype(np.int64))


def load_data(
    data_root: str, partition_id: int, num_partitions: int
) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """Partition ``partition_id`` of ``num_partitions``: (train, held-out) as (images, labels)."""
    images, labels = _mnist(data_root)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(labels))
    mine = torch.from_numpy(np.array_split(order, num_partitions)[partition_id])
    cut = len(mine) // 10
    held, train = mine[:cut], mine[cut:]
    return (images[train], labels[train]), (images[held], labels[held])


def train(net: Net, data, steps: int, batch_size: int, lr: float, seed: int) -> float:
    """``steps`` SGD steps on mini-batches drawn with ``seed``; the mean training loss."""
    images, labels = data
    rng = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.SGD(net.parameters(), lr=lr)
    net.train()
    total = 0.0
    for _ in range(steps):
        batch = torch.randint(len(labels), (batch_size,), generator=rng)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(net(images[batch]), labels[batch])
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / steps


@torch.no_grad()
def test(net: Net, data) -> tuple[float, float, float]:
    """Mean loss, root mean square of the per-sample losses, and accuracy on ``data``."""
    images, labels = data
    net.eval()
    logits = net(images)
    losses = nn.functional.cross_entropy(logits, labels, reduction="none")
    accuracy = (logits.argmax(1) == labels).float().mean()
    return losses.mean().item(), losses.square().mean().sqrt().item(), accuracy.item()
