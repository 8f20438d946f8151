"""Synthetic(alpha, beta) of FedProx (the K-Vib paper's Sec. 6.1) and the lognormal-size
Dirichlet partition of the MNIST substitute."""

import numpy as np
import pytest
import torch
from scipy import stats

from aoi_fl.data.partition import dirichlet_class_mix, label_histogram, lognormal_sizes
from aoi_fl.data.synthetic import fedprox_synthetic


@pytest.mark.slow
def test_sizes_and_shapes_for_a_fixed_seed():
    b = fedprox_synthetic(seed=0)
    sizes = np.array([len(p) for p in b.partition])
    # pinned realisation of seed 0 (numpy 2.4.6): 100 clients, 54,381 training samples
    assert sizes.size == 100 and sizes.sum() == 54_381 and len(b.test) == 6_096
    assert sizes[:5].tolist() == [91, 73, 49, 208, 140]
    assert b.train.x.shape == (54_381, 60) and b.train.x.dtype == torch.float32
    assert b.train.y.dtype == torch.int64 and set(b.train.y.unique().tolist()) <= set(range(10))
    assert b.num_classes == 10 and b.synthetic
    # clients are contiguous blocks; each holds out n_i - floor(0.9 n_i) of its n_i samples
    assert np.array_equal(np.concatenate(b.partition), np.arange(len(b.train)))
    # catches a train/test split that is not "the first floor(0.9 n_i) samples of client i
    # train, the rest test": the same seed with train_fraction = 1 keeps each client's n_i
    # samples whole (the draws do not depend on the split), so every client's training rows
    # must be the head of its full block and the test split the concatenated tails
    whole = fedprox_synthetic(seed=0, train_fraction=1.0)
    n = np.array([len(p) for p in whole.partition])
    assert len(whole.test) == 0 and n.sum() == sizes.sum() + len(b.test)
    assert n.min() >= 50 and np.array_equal(sizes, (9 * n) // 10)  # integer floor(0.9 n)
    heads = np.concatenate([p[:k] for p, k in zip(whole.partition, sizes, strict=True)])
    tails = np.concatenate([p[k:] for p, k in zip(whole.partition, sizes, strict=True)])
    assert torch.equal(b.train.x, whole.train.x[heads])
    assert torch.equal(b.train.y, whole.train.y[heads])
    assert torch.equal(b.test.x, whole.train.x[tails])
    assert torch.equal(b.test.y, whole.train.y[tails])


@pytest.mark.slow
def test_client_sizes_follow_the_documented_lognormal_law():
    # catches sizes drawn from another law than n_i = floor(LogNormal(4, 2)) + 50 (sigma read
    # as a variance, log-mean 4 read as a mean, the +50 floor or the floor() dropped). 10,000
    # clients with one feature and two classes (the sizes do not depend on either) and no
    # held-out part, so len(partition[i]) is n_i. Tolerances: 5 standard errors at this n
    # (median of log: 2 sqrt(pi / 2) / sqrt(n) = 0.025; sigma from the 16% and 84% quantiles:
    # 0.019; the share at exactly 50: 0.0015) and the 0.1% Kolmogorov bound 1.95 / sqrt(n).
    # Measured (seeds 0-3): log-median 3.98-4.03, sigma 1.99-2.01, share at 50 0.022-0.025,
    # KS distance 0.006-0.011.
    clients = 10_000
    bundle = fedprox_synthetic(n_clients=clients, features=1, classes=2, train_fraction=1.0)
    n = np.array([len(p) for p in bundle.partition])
    assert n.dtype.kind == "i" and n.sum() == len(bundle.train) and len(bundle.test) == 0
    assert n.min() == 50  # floor(L) = 0 for L < 1, P = Phi(-2) = 2.3% of the clients
    share = np.mean(n == 50)
    assert abs(share - stats.norm.cdf(-2)) < 5 * np.sqrt(0.0228 * 0.9772 / clients)
    extra = n - 50  # floor(L), L ~ LogNormal(4, 2)
    q16, q50, q84 = np.quantile(extra, stats.norm.cdf([-1.0, 0.0, 1.0]))
    mu = np.log(q50 + 0.5)  # + 0.5: the middle of the floor's unit interval
    sigma = (np.log(q84 + 0.5) - np.log(q16 + 0.5)) / 2
    assert abs(mu - 4.0) < 5 * 0.025 and abs(sigma - 2.0) < 5 * 0.019
    # the whole law: P(n_i <= 50 + k) = P(L < k + 1) = Phi((ln(k + 1) - 4) / 2)
    k = np.arange(extra.max() + 1)
    empirical = np.searchsorted(np.sort(extra), k, side="right") / clients
    law = stats.norm.cdf((np.log(k + 1) - 4.0) / 2.0)
    assert np.abs(empirical - law).max() < 1.95 / np.sqrt(clients)


@pytest.mark.slow
def test_generator_is_seeded_and_clients_are_heterogeneous():
    a, b = fedprox_synthetic(n_clients=5, seed=3), fedprox_synthetic(n_clients=5, seed=3)
    c = fedprox_synthetic(n_clients=5, seed=4)
    assert torch.equal(a.train.x, b.train.x) and torch.equal(a.test.y, b.test.y)
    assert not torch.equal(a.train.x[:40], c.train.x[:40])
    # every client has its own linear labelling rule and input mean: the label mixes differ
    full = fedprox_synthetic(seed=0)
    mixes = np.stack(
        [np.bincount(full.train.y[p].numpy(), minlength=10) / len(p) for p in full.partition]
    )
    assert len(full.train.y.unique()) == 10 and mixes.max(axis=1).mean() > 0.5


def test_bad_arguments():
    with pytest.raises(ValueError, match="alpha must be >= 0.0"):
        fedprox_synthetic(alpha=-1.0)
    with pytest.raises(ValueError, match="classes must be >= 2"):
        fedprox_synthetic(classes=1)
    with pytest.raises(ValueError, match="train_fraction must be <= 1.0"):
        fedprox_synthetic(train_fraction=1.5)


def test_lognormal_sizes():
    s = lognormal_sizes(100, 2.0, seed=0, total=30_000, min_size=20)
    assert s.sum() == 30_000 and s.min() >= 20 and s.dtype == np.int64
    assert np.array_equal(s, lognormal_sizes(100, 2.0, seed=0, total=30_000, min_size=20))
    assert np.sort(s)[-10:].sum() > 0.4 * s.sum()  # heavy tail: the top 10% hold a lot
    raw = lognormal_sizes(50, 1.0, seed=1, min_size=3)
    assert raw.min() >= 3
    with pytest.raises(ValueError, match="total must be >= 200"):
        lognormal_sizes(10, 1.0, 0, total=100, min_size=20)


def test_dirichlet_class_mix_is_a_disjoint_partition_with_the_sizes():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, 5000)
    sizes = lognormal_sizes(40, 1.5, seed=2, total=4000, min_size=5)
    parts = dirichlet_class_mix(labels, sizes, alpha=0.5, seed=7)
    assert [len(p) for p in parts] == sizes.tolist()
    flat = np.concatenate(parts)
    assert np.unique(flat).size == flat.size == 4000
    again = dirichlet_class_mix(labels, sizes, alpha=0.5, seed=7)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))
    # tiny alpha: clients are nearly single-class, and it still ends (classes run out)
    skewed = dirichlet_class_mix(labels, sizes, alpha=1e-3, seed=7)
    hist = label_histogram(labels, skewed, 10)
    assert (hist.max(axis=1) / hist.sum(axis=1)).mean() > 0.8
    everything = dirichlet_class_mix(labels, np.full(50, 100), alpha=1e-3, seed=1)
    assert np.unique(np.concatenate(everything)).size == 5000


def test_dirichlet_class_mix_rejects_bad_input():
    labels = np.zeros(10, dtype=int)
    with pytest.raises(ValueError, match="exceeds the 10 samples"):
        dirichlet_class_mix(labels, [6, 6], 1.0, 0)
    with pytest.raises(ValueError, match="alpha must be > 0.0"):
        dirichlet_class_mix(labels, [5], 0.0, 0)
    with pytest.raises(ValueError, match="integer array"):
        dirichlet_class_mix(labels, [2.5], 1.0, 0)
