"""Normalisation, the tensor containers, client slices and the synthetic CIFAR stand-in."""

import numpy as np
import pytest
import torch

from aoi_fl.core.tensors import TensorSplit
from aoi_fl.data.datasets import (
    NORMALIZATION,
    client_tensors,
    load_dataset,
    normalize_images,
    synthetic_cifar,
)
from aoi_fl.data.partition import dirichlet_label_skew


def test_normalize_images_exact_small_case():
    # one 1x2 channels-last image with two channels
    img = torch.tensor([[[[0, 255], [51, 102]]]], dtype=torch.uint8)
    out = normalize_images(img, mean=(0.0, 0.5), std=(1.0, 0.25))
    assert out.shape == (1, 2, 1, 2) and out.dtype == torch.float32
    torch.testing.assert_close(out[0, 0], torch.tensor([[0.0, 0.2]]))
    torch.testing.assert_close(out[0, 1], torch.tensor([[2.0, -0.4]]))
    gray = normalize_images(torch.full((3, 4, 5), 255, dtype=torch.uint8), (0.5,), (0.5,))
    assert gray.shape == (3, 1, 4, 5) and torch.all(gray == 1.0)


def test_normalize_images_rejects_bad_input():
    with pytest.raises(ValueError, match="must be uint8"):
        normalize_images(torch.zeros(2, 4, 4), (0.0,), (1.0,))
    with pytest.raises(ValueError, match="need 3 entries"):
        normalize_images(torch.zeros(2, 4, 4, 3, dtype=torch.uint8), (0.0,), (1.0,))


def test_tensor_split_is_dataset_like():
    split = TensorSplit(torch.arange(12.0).view(6, 2), torch.arange(6))
    assert len(split) == 6
    x, y = split[4]
    assert x.tolist() == [8.0, 9.0] and int(y) == 4
    loader = torch.utils.data.DataLoader(split, batch_size=4)
    assert [len(b[1]) for b in loader] == [4, 2]
    with pytest.raises(ValueError, match="x has 6 rows but y has 5"):
        TensorSplit(torch.zeros(6, 2), torch.zeros(5))


def test_client_tensors_slices_each_client():
    x = torch.arange(20.0).view(10, 2)
    y = torch.arange(10) % 3
    parts = [np.array([0, 4, 9]), np.array([], dtype=np.int64), np.array([1, 2])]
    out = client_tensors(x, y, parts)
    assert [len(cy) for _, cy in out] == [3, 0, 2]
    assert out[0][0].tolist() == [[0.0, 1.0], [8.0, 9.0], [18.0, 19.0]]
    assert out[2][1].tolist() == [1, 2]
    with pytest.raises(IndexError, match=r"partition\[1\] holds indices outside \[0, 10\)"):
        client_tensors(x, y, [np.array([0]), np.array([10])])


def test_synthetic_cifar_is_labelled_shaped_and_seeded():
    a = synthetic_cifar(10, n_train=200, n_test=50, seed=3)
    assert a.synthetic and a.name == "synthetic-cifar10" and a.num_classes == 10
    assert a.train.x.shape == (200, 3, 32, 32) and a.test.x.shape == (50, 3, 32, 32)
    assert a.train.y.dtype == torch.int64 and 0 <= a.train.y.min() and a.train.y.max() < 10
    b = synthetic_cifar(10, n_train=200, n_test=50, seed=3)
    c = synthetic_cifar(10, n_train=200, n_test=50, seed=4)
    assert torch.equal(a.train.x, b.train.x) and torch.equal(a.test.y, b.test.y)
    assert not torch.equal(a.train.x, c.train.x)
    assert synthetic_cifar(100, 10, 10, 0).name == "synthetic-cifar100"


def test_synthetic_cifar_is_learnable():
    # nearest class mean (from train) classifies test far above chance (10%)
    d = synthetic_cifar(10, n_train=500, n_test=200, seed=0)
    means = torch.stack([d.train.x[d.train.y == c].mean(0) for c in range(10)]).flatten(1)
    pred = torch.cdist(d.test.x.flatten(1), means).argmin(1)
    assert (pred == d.test.y).double().mean() > 0.9


def test_synthetic_partitions_like_real_data():
    d = synthetic_cifar(10, n_train=1000, n_test=10, seed=0)
    part = dirichlet_label_skew(d.train.y.numpy(), 10, 0.3, seed=0)
    slices = client_tensors(d.train.x, d.train.y, part)
    assert sum(len(cy) for _, cy in slices) == 1000


def test_load_dataset_rejects_unknown_name():
    with pytest.raises(ValueError, match="valid: cifar10, cifar100, fashion_mnist, mnist"):
        load_dataset("femnist")
    assert set(NORMALIZATION) == {"mnist", "fashion_mnist", "cifar10", "cifar100"}
