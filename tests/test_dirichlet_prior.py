"""The FedSUM/FedAWE label-skew procedure (per-client label priors, proportional split), and the
batched engines with clients smaller than the batch (which that procedure produces)."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from aoi_fl import runs
from aoi_fl.data import TensorSplit
from aoi_fl.engines import LocalTraining, local_step_batches, stack
from aoi_fl.partition import dirichlet_client_prior, label_histogram

LABELS = np.random.default_rng(7).integers(0, 10, size=6000)


def assert_disjoint_cover(partition, num_samples):
    every = np.concatenate(partition)
    assert every.dtype == np.int64
    assert np.array_equal(np.sort(every), np.arange(num_samples))
    assert all(np.all(np.diff(p) > 0) for p in partition)


def test_cover_determinism_and_unequal_sizes():
    part = dirichlet_client_prior(LABELS, 50, 0.1, seed=0)
    assert len(part) == 50
    assert_disjoint_cover(part, LABELS.size)
    again = dirichlet_client_prior(LABELS, 50, 0.1, seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(part, again, strict=True))
    other = dirichlet_client_prior(LABELS, 50, 0.1, seed=1)
    assert not all(np.array_equal(a, b) for a, b in zip(part, other, strict=True))
    sizes = np.array([len(p) for p in part])
    assert sizes.min() >= 1 and sizes.max() > 1.5 * sizes.min()  # Fig. 4: unequal sizes


def test_clients_concentrate_on_few_labels_at_small_alpha():
    def top_label_share(alpha):
        h = label_histogram(LABELS, dirichlet_client_prior(LABELS, 50, alpha, seed=2), 10)
        return (h.max(axis=1) / h.sum(axis=1)).mean()

    assert top_label_share(0.1) > 0.6 > top_label_share(1.0) > 0.2 > top_label_share(100.0)


def test_each_class_is_split_in_proportion_to_the_clients_priors():
    """With one client holding all of a class's prior mass, it gets the whole class."""
    labels = np.repeat(np.arange(3), 100)
    part = dirichlet_client_prior(labels, 2, 1e-3, seed=5, max_retries=50, min_size=0)
    h = label_histogram(labels, part, 3)
    assert np.array_equal(h.sum(axis=0), [100, 100, 100])
    assert ((h == 0) | (h == 100)).mean() > 0.6  # tiny alpha: priors are nearly one-hot


@settings(max_examples=30, deadline=None)
@given(
    n_clients=st.integers(1, 12),
    alpha=st.floats(0.05, 10.0),
    min_size=st.integers(0, 4),
    num_classes=st.integers(1, 6),
    seed=st.integers(0, 2**32),
)
def test_properties(n_clients, alpha, min_size, num_classes, seed):
    labels = np.random.default_rng(seed).integers(0, num_classes, size=300)
    try:
        part = dirichlet_client_prior(labels, n_clients, alpha, seed, min_size=min_size)
    except RuntimeError as err:  # only the documented bounded-retry failure
        assert "max_retries=1000" in str(err)
        return
    assert len(part) == n_clients
    assert_disjoint_cover(part, labels.size)
    assert min(len(p) for p in part) >= min_size


@pytest.mark.parametrize("alpha", [0.0, -0.5, float("nan")])
def test_bad_alpha(alpha):
    with pytest.raises(ValueError, match="alpha"):
        dirichlet_client_prior(LABELS, 10, alpha, 0)


def test_tiny_alpha_stops_after_bounded_retries():
    with pytest.raises(RuntimeError) as err:
        dirichlet_client_prior(LABELS, 50, 1e-4, 0, min_size=100, max_retries=200)
    for part in ("dirichlet_client_prior", "min_size=100", "max_retries=200", "best minimum"):
        assert part in str(err.value)


def test_num_classes_must_cover_the_labels():
    with pytest.raises(ValueError, match="num_classes must be >= 10"):
        dirichlet_client_prior(LABELS, 5, 0.5, 0, num_classes=9)


def test_registered_partition_uses_the_dataset_classes():
    assert "dirichlet_prior" in runs.PARTITIONS
    bundle = runs.DATASETS["synthetic_cifar"]("data", n_train=500, n_test=50)
    part = runs.PARTITIONS["dirichlet_prior"](bundle, 20, 3, alpha=0.1)
    assert_disjoint_cover(part, 500)


# ---------------------------------------------------------------------------------------------
# Clients with fewer samples than the batch size, trained batched


@pytest.mark.parametrize("engine", ["blocked", "stacked", "vmap"])
def test_batched_engines_handle_clients_smaller_than_the_batch(engine):
    gen = torch.Generator().manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 2, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(2 * 4 * 4, 3),
    )
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    data = TensorSplit(torch.randn(60, 1, 8, 8, generator=gen), torch.randint(0, 3, (60,)))
    sizes = [5, 30, 2, 23]  # batch 8: clients 0 and 2 use all of their data in every step
    bounds = np.cumsum([0, *sizes])
    schedules = [
        lo + local_step_batches(0, 0, c, size, 3, 8)
        for c, (lo, size) in enumerate(zip(bounds[:-1], sizes, strict=True))
    ]
    assert [s.shape[1] for s in schedules] == [5, 8, 2, 8]
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    start = stack(params, len(sizes))
    reference = LocalTraining(model, engine="sequential")(start, data, schedules, 0.1)
    batched = LocalTraining(model, engine=engine, chunk=3)(start, data, schedules, 0.1)
    for k, v in reference.items():
        torch.testing.assert_close(batched[k], v, rtol=1e-5, atol=1e-6)
