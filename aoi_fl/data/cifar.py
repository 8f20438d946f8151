"""CIFAR-10/100 from the standard python-pickle folders under a root the user names.

They cannot be fetched here. The folders (``cifar-10-batches-py``, ``cifar-100-python``) are
checked with torchvision's own md5 table and read through a restricted unpickler that accepts
only NumPy arrays and plain Python containers. Those batch files are the only pickles this
package reads.
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torchvision

from aoi_fl.core.validation import require_choice
from aoi_fl.data.files import DataError, _digest, _writable_folder


@dataclass(frozen=True)
class _CifarSpec:
    title: str
    tv_class: type
    label_key: str
    meta_key: str
    num_classes: int
    url: str


_CIFAR = {
    "cifar10": _CifarSpec(
        "CIFAR-10",
        torchvision.datasets.CIFAR10,
        "labels",
        "label_names",
        10,
        "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
    ),
    "cifar100": _CifarSpec(
        "CIFAR-100",
        torchvision.datasets.CIFAR100,
        "fine_labels",
        "fine_label_names",
        100,
        "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
    ),
}


def _cifar_files(spec: _CifarSpec, train: bool) -> list[tuple[str, str]]:
    """(file name, md5) of the batches of one split plus the meta file, from torchvision."""
    tv = spec.tv_class
    batches = tv.train_list if train else tv.test_list
    return [(name, md5) for name, md5 in batches] + [(tv.meta["filename"], tv.meta["md5"])]


def cifar_available(name: str, root: str | os.PathLike = "data") -> bool:
    """True when every file of ``name`` ("cifar10" or "cifar100") exists under ``root``."""
    spec = _CIFAR[require_choice("name", name, _CIFAR)]
    folder = Path(root) / spec.tv_class.base_folder
    return all(
        (folder / f).is_file() for split in (True, False) for f, _ in _cifar_files(spec, split)
    )


class _BatchUnpickler(pickle.Unpickler):
    """Unpickles CIFAR batches: dicts of NumPy arrays, lists and strings, and nothing else."""

    _ALLOWED = {
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy._core.numeric", "_frombuffer"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),  # how Python 3 protocol-2 pickles store bytes
    }

    def find_class(self, module: str, name: str) -> object:
        if module.startswith("numpy.core"):  # Python 2 / NumPy 1 pickles, like the originals
            module = "numpy._core" + module.removeprefix("numpy.core")
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(
                f"refusing to load {module}.{name}: a CIFAR batch holds only arrays, lists and "
                "strings"
            )
        return super().find_class(module, name)


def _read_batch(path: Path) -> dict[str, object]:
    with open(path, "rb") as f:
        # latin1 is how Python 2 pickles of NumPy arrays must be decoded
        entry = _BatchUnpickler(f, encoding="latin1").load()
    if not isinstance(entry, dict):
        raise DataError(f"{path}: expected a pickled dict, got {type(entry).__name__}")
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in entry.items()}


def _field(entry: dict[str, object], key: str, path: Path) -> object:
    if key not in entry:
        raise DataError(f"{path}: no '{key}' entry (has {sorted(entry)})")
    return entry[key]


def require_cifar_files(name: str, root: str | os.PathLike = "data", train: bool = True) -> None:
    """Raise, saying how to provide them, if the files of a CIFAR split are not under ``root``
    (their presence only: :func:`load_cifar10` and :func:`load_cifar100` check their digests)."""
    spec = _CIFAR[name]
    folder = Path(root) / spec.tv_class.base_folder
    missing = [f for f, _ in _cifar_files(spec, train) if not (folder / f).is_file()]
    if missing:
        raise DataError(
            f"{spec.title} is not available under {root}: {folder} lacks {', '.join(missing)}. "
            "It cannot be fetched on this machine (no package registry ships it). To provide "
            f"it, download {spec.url} (see https://www.cs.toronto.edu/~kriz/cifar.html) and "
            f"unpack it into {root} (creating {folder}), or run `python -m aoi_fl.data "
            f"fetch-cifar --name {name} --root {root}` where the internet is reachable."
        )


def _load_cifar(
    name: str, root: str | os.PathLike, train: bool, verify: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    spec = _CIFAR[name]
    folder = Path(root) / spec.tv_class.base_folder
    files = _cifar_files(spec, train)
    require_cifar_files(name, root, train)
    if verify:
        for f, md5 in files:
            if (digest := _digest(folder / f, "md5")) != md5:
                raise DataError(
                    f"{folder / f}: md5 {digest} differs from torchvision's {md5} (altered or "
                    f"corrupt; download {spec.url} again). Pass verify=False only for a folder "
                    "you built yourself."
                )
    meta_path = folder / files[-1][0]
    class_names = _field(_read_batch(meta_path), spec.meta_key, meta_path)
    if len(class_names) != spec.num_classes:
        raise DataError(f"{meta_path}: {len(class_names)} class names, expected {spec.num_classes}")
    images, labels = [], []
    for f, _ in files[:-1]:
        path = folder / f
        entry = _read_batch(path)
        data = np.asarray(_field(entry, "data", path))
        y = np.asarray(_field(entry, spec.label_key, path), dtype=np.int64)
        if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
            raise DataError(
                f"{path}: 'data' is {data.dtype} {data.shape}, expected uint8 (N, 3072)"
            )
        if y.shape != (data.shape[0],) or y.min() < 0 or y.max() >= spec.num_classes:
            raise DataError(
                f"{path}: '{spec.label_key}' must hold {data.shape[0]} labels in "
                f"[0, {spec.num_classes})"
            )
        images.append(data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
        labels.append(y)
    return torch.from_numpy(np.concatenate(images)), torch.from_numpy(np.concatenate(labels))


def load_cifar10(
    root: str | os.PathLike = "data", train: bool = True, verify: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """CIFAR-10 from ``<root>/cifar-10-batches-py``: ``(uint8 (N, 32, 32, 3), int64 (N,))``.

    ``verify`` checks every file against torchvision's md5 table (as
    ``torchvision.datasets.CIFAR10(download=False)`` does); turn it off only for a folder you
    built yourself in the same format.
    """
    return _load_cifar("cifar10", root, train, verify)


def load_cifar100(
    root: str | os.PathLike = "data", train: bool = True, verify: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """CIFAR-100 (fine labels) from ``<root>/cifar-100-python``; as ``load_cifar10``."""
    return _load_cifar("cifar100", root, train, verify)


def fetch_cifar(name: str, root: str | os.PathLike = "data") -> Path:
    """Download ``name`` through torchvision (needs internet access; not possible here)."""
    spec = _CIFAR[require_choice("name", name, _CIFAR)]
    _writable_folder(Path(root), root)
    try:
        spec.tv_class(str(root), train=True, download=True)
    except (RuntimeError, OSError) as exc:
        raise DataError(f"torchvision could not download {spec.title}: {exc}") from exc
    return Path(root) / spec.tv_class.base_folder
