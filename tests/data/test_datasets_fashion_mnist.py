"""Fashion-MNIST: tiny IDX files checked against their own digests, the fetch logic, the real files.

The real files (fetched by `make data`) are needed only by the last tests, which are skipped
when ``data/FashionMNIST`` is absent.
"""

import dataclasses
import gzip
import hashlib
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import aoi_fl.data.datasets as data
from aoi_fl.data import fashion_mnist
from aoi_fl.data.datasets import (
    FASHION_MNIST_FILES,
    DataError,
    PackageNotListed,
    fashion_mnist_available,
    fetch_fashion_mnist,
    load_dataset,
    load_fashion_mnist,
    normalize_fashion_mnist,
    verify_fashion_mnist,
)
from aoi_fl.pipeline.runs import DATASETS

REPO = Path(__file__).resolve().parents[2]
COMMAND = "python -m aoi_fl.data fetch-fashion-mnist --root"


def idx_bytes(array: np.ndarray) -> bytes:
    """The IDX format of uint8 data: magic 0x0000080D (D = number of dims), big-endian dims."""
    header = np.array([0x0800 | array.ndim, *array.shape], dtype=">u4")
    return header.tobytes() + np.ascontiguousarray(array, dtype=np.uint8).tobytes()


def tiny_files() -> dict[str, bytes]:
    """Five train and three test images (28 x 28), as the four IDX files."""
    rng = np.random.default_rng(0)
    return {
        "train-images-idx3-ubyte": idx_bytes(rng.integers(0, 256, (5, 28, 28), dtype=np.uint8)),
        "train-labels-idx1-ubyte": idx_bytes(np.array([9, 0, 0, 3, 7], dtype=np.uint8)),
        "t10k-images-idx3-ubyte": idx_bytes(rng.integers(0, 256, (3, 28, 28), dtype=np.uint8)),
        "t10k-labels-idx1-ubyte": idx_bytes(np.array([2, 1, 8], dtype=np.uint8)),
    }


@pytest.fixture
def tiny(monkeypatch) -> dict[str, bytes]:
    """The tiny files, pinned in place of the real ones for this test."""
    files = tiny_files()
    for name, content in files.items():
        pin = (len(content), hashlib.sha256(content).hexdigest())
        monkeypatch.setitem(FASHION_MNIST_FILES, name, pin)
    return files


def write_raw(root: Path, files: dict[str, bytes]) -> Path:
    raw = root / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for name, content in files.items():
        (raw / name).write_bytes(content)
    return raw


def write_gz(folder: Path, files: dict[str, bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (folder / f"{name}.gz").write_bytes(gzip.compress(content))
    return folder


def test_pinned_table_is_the_original_files():
    assert set(FASHION_MNIST_FILES) == set(data.MNIST_FILES)
    # same sizes as MNIST (same shapes), different contents
    for name, (size, sha256) in FASHION_MNIST_FILES.items():
        assert size == data.MNIST_FILES[name][0] and sha256 != data.MNIST_FILES[name][1]
        assert len(sha256) == 64


def test_loader_reads_tiny_idx_files(tiny, tmp_path):
    raw = write_raw(tmp_path, tiny)
    assert verify_fashion_mnist(tmp_path) == raw and fashion_mnist_available(tmp_path)
    x, y = load_fashion_mnist(tmp_path, train=True)
    assert x.shape == (5, 28, 28) and x.dtype == torch.uint8
    assert y.tolist() == [9, 0, 0, 3, 7] and y.dtype == torch.int64
    expected = np.frombuffer(tiny["train-images-idx3-ubyte"], np.uint8, offset=16)
    assert np.array_equal(x.numpy().ravel(), expected)
    xt, yt = load_fashion_mnist(tmp_path, train=False)
    assert xt.shape == (3, 28, 28) and yt.tolist() == [2, 1, 8]
    bundle = load_dataset("fashion_mnist", tmp_path, n_train=4)
    assert bundle.name == "fashion_mnist" and bundle.num_classes == 10 and not bundle.synthetic
    assert bundle.train.x.shape == (4, 1, 28, 28) and len(bundle.test) == 3
    torch.testing.assert_close(bundle.train.x, normalize_fashion_mnist(x[:4]))
    torch.testing.assert_close(bundle.test.x, (xt.float().unsqueeze(1) / 255 - 0.2860) / 0.3530)
    assert DATASETS["fashion_mnist"](tmp_path, n_test=2).test.y.tolist() == [2, 1]


def test_missing_files_error_names_them_and_the_command(tiny, tmp_path):
    with pytest.raises(DataError) as err:
        load_fashion_mnist(tmp_path)
    msg = str(err.value)
    for name in FASHION_MNIST_FILES:
        assert f"{name}: missing" in msg
    assert "make data" in msg and f"{COMMAND} {tmp_path}`" in msg
    assert not fashion_mnist_available(tmp_path)
    raw = write_raw(tmp_path, tiny)
    (raw / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(DataError) as err:
        load_dataset("fashion_mnist", tmp_path)
    msg = str(err.value)
    assert "t10k-labels-idx1-ubyte: missing" in msg and f"{COMMAND} {tmp_path}`" in msg
    assert "train-" not in msg  # only the missing file is listed


def test_altered_and_truncated_files_are_refused(tiny, tmp_path):
    raw = write_raw(tmp_path, tiny)
    content = bytearray(tiny["train-labels-idx1-ubyte"])
    content[9] = (content[9] + 1) % 10  # one label changed, same size
    (raw / "train-labels-idx1-ubyte").write_bytes(bytes(content))
    with pytest.raises(DataError) as err:
        verify_fashion_mnist(tmp_path)
    msg = str(err.value)
    assert "train-labels-idx1-ubyte: SHA-256" in msg and "altered or corrupt" in msg
    assert "images" not in msg and f"{COMMAND} {tmp_path}`" in msg
    assert not fashion_mnist_available(tmp_path)
    (raw / "train-labels-idx1-ubyte").write_bytes(tiny["train-labels-idx1-ubyte"][:7])
    with pytest.raises(DataError, match=r"train-labels-idx1-ubyte: 7 bytes, expected 13 \(trunc"):
        load_fashion_mnist(tmp_path)


def test_legacy_torchvision_cache_is_refused(tiny, tmp_path):
    write_raw(tmp_path, tiny)
    legacy = tmp_path / "FashionMNIST" / "processed"
    legacy.mkdir()
    (legacy / "training.pt").write_bytes(b"")
    (legacy / "test.pt").write_bytes(b"")
    with pytest.raises(DataError, match="legacy Fashion-MNIST cache"):
        load_fashion_mnist(tmp_path)


def no_subprocess(*args, **kwargs):
    raise AssertionError("nothing may be run here")


def test_fetch_gunzips_the_installed_package(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(fashion_mnist, "FASHION_MNIST_DEBIAN_DIR", write_gz(tmp_path / "deb", tiny))
    monkeypatch.setattr(subprocess, "run", no_subprocess)
    root = tmp_path / "root"
    raw = fetch_fashion_mnist(root)
    assert raw == root / "FashionMNIST" / "raw"
    assert sorted(p.name for p in raw.iterdir()) == sorted(tiny)  # no partial files left
    assert all((raw / name).read_bytes() == content for name, content in tiny.items())
    (tmp_path / "deb" / "t10k-images-idx3-ubyte.gz").unlink()
    assert data.main(["fetch-fashion-mnist", "--root", str(root)]) == 0  # no-op: they verify


def test_fetch_writes_nothing_when_a_packaged_file_is_altered(tiny, tmp_path, monkeypatch):
    altered = {**tiny, "t10k-labels-idx1-ubyte": tiny["t10k-labels-idx1-ubyte"][:-1] + b"\x00"}
    monkeypatch.setattr(
        fashion_mnist, "FASHION_MNIST_DEBIAN_DIR", write_gz(tmp_path / "deb", altered)
    )
    root = tmp_path / "root"
    with pytest.raises(DataError, match="t10k-labels-idx1-ubyte: SHA-256"):
        fetch_fashion_mnist(root)
    (tmp_path / "deb" / "train-images-idx3-ubyte.gz").write_bytes(b"not gzip")
    with pytest.raises(DataError, match="train-images-idx3-ubyte.gz cannot be decompressed"):
        fetch_fashion_mnist(root)
    assert not root.exists()  # nothing half-written


def fake_tools(tmp_path: Path, gz_folder: Path | None, monkeypatch) -> Path:
    """apt-get and dpkg-deb stand-ins: the .deb 'holds' gz_folder (None: dpkg-deb fails)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    (bin_dir / "apt-get").write_text(
        f'#!/bin/sh\necho "apt-get $*" >> {log}\necho deb > dataset-fashion-mnist_1_all.deb\n'
    )
    target = "deb/usr/share/datasets/fashion-mnist"
    unpack = f"mkdir -p {target} && cp {gz_folder}/*.gz {target}/" if gz_folder else "exit 2"
    (bin_dir / "dpkg-deb").write_text(f'#!/bin/sh\necho "dpkg-deb $*" >> {log}\n{unpack}\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    monkeypatch.setattr(shutil, "which", lambda name: str(bin_dir / name))
    monkeypatch.setattr(fashion_mnist, "FASHION_MNIST_DEBIAN_DIR", tmp_path / "not-installed")
    return log


def test_fetch_downloads_and_unpacks_the_package(tiny, tmp_path, monkeypatch):
    log = fake_tools(tmp_path, write_gz(tmp_path / "gz", tiny), monkeypatch)
    root = tmp_path / "root"
    assert data.main(["fetch-fashion-mnist", "--root", str(root), "--source", "debian"]) == 0
    assert fashion_mnist_available(root)
    assert log.read_text().splitlines() == [
        "apt-get download dataset-fashion-mnist",
        "dpkg-deb -x dataset-fashion-mnist_1_all.deb deb",
    ]


def test_a_package_apt_does_not_list_is_told_apart(tmp_path, monkeypatch, capsys):
    # a fresh machine's empty package lists: its own error and exit status, which make data
    # answers with `apt-get update`; another failure of apt-get is a plain DataError
    fake_tools(tmp_path, None, monkeypatch)
    apt_get = tmp_path / "bin" / "apt-get"
    apt_get.write_text(
        '#!/bin/sh\n[ "$LC_ALL" = C ] || exit 9\n'
        'echo "E: Unable to locate package dataset-fashion-mnist" >&2\nexit 100\n'
    )
    root = tmp_path / "root"
    with pytest.raises(PackageNotListed, match="run `apt-get update` as root first"):
        fetch_fashion_mnist(root)
    assert data.main(["fetch-fashion-mnist", "--root", str(root)]) == 3
    assert "Unable to locate package" in capsys.readouterr().err
    apt_get.write_text('#!/bin/sh\necho "E: Could not resolve deb.debian.org" >&2\nexit 100\n')
    with pytest.raises(DataError, match="Could not resolve") as other:
        fetch_fashion_mnist(root)
    assert not isinstance(other.value, PackageNotListed)
    assert data.main(["fetch-fashion-mnist", "--root", str(root)]) == 1
    assert not root.exists()  # nothing half-written


def test_fetch_refuses_a_package_that_does_not_unpack(tiny, tmp_path, monkeypatch):
    fake_tools(tmp_path, None, monkeypatch)
    root = tmp_path / "root"
    with pytest.raises(DataError, match="dpkg-deb -x dataset-fashion-mnist_1_all.deb deb"):
        fetch_fashion_mnist(root)
    assert not root.exists()


def test_fetch_without_apt_says_what_to_do(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(fashion_mnist, "FASHION_MNIST_DEBIAN_DIR", tmp_path / "not-installed")
    with pytest.raises(DataError, match="apt-get and dpkg-deb are not available"):
        fetch_fashion_mnist(tmp_path)
    assert data.main(["fetch-fashion-mnist", "--root", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "error: apt-get and dpkg-deb" in err and "--source torchvision" in err


def test_fetch_through_torchvision(tiny, tmp_path, monkeypatch):
    class FashionMNIST:  # torchvision's class name is the folder name
        def __init__(self, root, train, download):
            assert download
            if Path(root).name == "offline":
                raise RuntimeError("Error downloading train-images-idx3-ubyte.gz")
            write_raw(Path(root), tiny)

    spec = dataclasses.replace(fashion_mnist._FASHION_MNIST, tv_class=FashionMNIST)
    monkeypatch.setattr(fashion_mnist, "_FASHION_MNIST", spec)
    root = tmp_path / "root"
    assert fetch_fashion_mnist(root, "torchvision") == root / "FashionMNIST" / "raw"
    assert fashion_mnist_available(root)
    with pytest.raises(DataError, match="torchvision could not download Fashion-MNIST"):
        fetch_fashion_mnist(tmp_path / "offline", source="torchvision")


def test_fetch_rejects_unknown_source(tmp_path):
    with pytest.raises(ValueError, match="valid: debian, torchvision"):
        fetch_fashion_mnist(tmp_path, source="kaggle")


# ---------------------------------------------------------------------------------------------
# The real files


@pytest.fixture(scope="module")
def fashion_root() -> Path:
    root = REPO / "data"
    if not (root / "FashionMNIST").exists():
        pytest.skip(f"no Fashion-MNIST under {root} (`make data` fetches it)")
    return root  # present but not verifying: the tests fail with the DataError


@pytest.mark.slow
def test_real_fashion_mnist(fashion_root):
    x, y = load_fashion_mnist(fashion_root, train=True)
    assert x.shape == (60000, 28, 28) and x.dtype == torch.uint8
    assert y.shape == (60000,) and y.dtype == torch.int64
    assert y[:10].tolist() == [9, 0, 0, 3, 0, 2, 7, 2, 5, 5]
    assert torch.bincount(y).tolist() == [6000] * 10
    assert abs(x.double().mean().item() / 255 - 0.2860) < 5e-5
    assert abs((x.double() / 255).std().item() - 0.3530) < 5e-5
    xt, yt = load_fashion_mnist(fashion_root, train=False)
    assert xt.shape == (10000, 28, 28)
    assert torch.bincount(yt).tolist() == [1000] * 10
    bundle = load_dataset("fashion_mnist", fashion_root, n_test=100)
    assert bundle.train.x.shape == (60000, 1, 28, 28) and len(bundle.test) == 100
    # mean 0.2860 / std 0.3530 are the train-set statistics, so the result is standardised
    assert abs(bundle.train.x.mean().item()) < 1e-3
    assert abs(bundle.train.x.std().item() - 1) < 1e-3
