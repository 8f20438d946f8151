"""Fashion-MNIST: its pinned files, fetched from Debian's package ``dataset-fashion-mnist``.

Fashion-MNIST (Zalando Research, https://github.com/zalandoresearch/fashion-mnist; MIT (Expat)
license, (c) 2017 Zalando SE) lives in ``<root>/FashionMNIST/raw/`` (:mod:`aoi_fl.data.idx`),
from torchvision's download or from Debian's package (0.0~git20200523.55506a9-1, same license),
fetched with ``apt-get download`` and unpacked without installing it.
"""

from __future__ import annotations

import gzip
import os
import shutil
import tempfile
from pathlib import Path

import torch
import torchvision

from aoi_fl.data.files import DataError, PackageNotListed, _run
from aoi_fl.data.idx import (
    _fetch_idx,
    _idx_problems,
    _idx_raw_dir,
    _IdxSpec,
    _install_idx,
    _load_idx,
    _verify_idx,
)

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
    try:  # apt's messages in English, whatever the user's language
        _run([apt_get, "download", FASHION_MNIST_DEBIAN_PACKAGE], cwd=tmp, env={"LC_ALL": "C"})
    except DataError as exc:
        if "Unable to locate package" not in str(exc):
            raise
        raise PackageNotListed(
            f"{exc}\n(apt-get does not list {FASHION_MNIST_DEBIAN_PACKAGE}: run `apt-get update` "
            "as root first, as `make data` does, or on a system that is not Debian's use "
            "`--source torchvision` where the internet is reachable)"
        ) from None
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
