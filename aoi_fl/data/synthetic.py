"""Natively federated synthetic datasets, generated client by client from a seed.

Each generator returns a :class:`~aoi_fl.data.datasets.DatasetBundle` whose ``partition`` holds the
clients it was generated with (configurations use it through the partition ``"natural"``); the
test split is the union of the clients' held-out samples.

- :func:`linear_regression`: the convex task of the agnostic-FedAvg experiments (Sec. 4 of
  "Convergence of Agnostic Federated Averaging"; the paper does not give its generator, this one
  is ours): heterogeneous clients, each with its own optimum.
- :func:`fedprox_synthetic`: Synthetic(alpha, beta) of Li et al. (FedProx, 2020), the
  classification task of the K-Vib paper's Sec. 6.1 (10 classes, 60 features, lognormal sizes).
"""

from __future__ import annotations

import numpy as np
import torch

from aoi_fl.core.seeding import generator
from aoi_fl.core.tensors import TensorSplit
from aoi_fl.core.validation import require_int, require_memory, require_real
from aoi_fl.data.datasets import DatasetBundle


def _bundle(
    name: str, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]], classes: int
) -> DatasetBundle:
    """Concatenate per-client (x_train, y_train, x_test, y_test) into one bundle."""
    sizes = [len(p[1]) for p in parts]
    bounds = np.concatenate(([0], np.cumsum(sizes)))
    partition = tuple(
        np.arange(a, b, dtype=np.int64) for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    )

    def split(i: int, j: int) -> TensorSplit:
        x = torch.from_numpy(np.concatenate([p[i] for p in parts]).astype(np.float32))
        y = np.concatenate([p[j] for p in parts])
        return TensorSplit(x, torch.from_numpy(y.astype(np.float32 if classes == 1 else np.int64)))

    return DatasetBundle(name, split(0, 1), split(2, 3), classes, True, partition)


def linear_regression_options(
    n_clients: int,
    samples: int,
    test_samples: int,
    features: int,
    heterogeneity: float,
    noise: float,
) -> tuple[int, int, int, int, float, float]:
    """The options of :func:`linear_regression`, checked (also before anything is generated).

    Memory: the samples are generated in float64 and copied to float32, so the data needs at
    least 12 * n_clients * (samples + test_samples) * (features + 1) bytes (inputs and
    target); more than the machine's memory is refused.
    """
    checked = (
        require_int("n_clients", n_clients, minimum=1),
        require_int("samples", samples, minimum=1),
        require_int("test_samples", test_samples, minimum=1),
        require_int("features", features, minimum=1),
        require_real("heterogeneity", heterogeneity, minimum=0.0),
        require_real("noise", noise, minimum=0.0),
    )
    require_memory(
        dict(zip(("n_clients", "samples", "test_samples", "features"), checked[:4], strict=True)),
        lambda n_clients, samples, test_samples, features: (
            12 * n_clients * (samples + test_samples) * (features + 1)
        ),
        "12 bytes * n_clients * (samples + test_samples) * (features + 1): generated in "
        "float64, copied to float32",
    )
    return checked


def linear_regression(
    n_clients: int = 100,
    samples: int = 100,
    test_samples: int = 20,
    features: int = 20,
    heterogeneity: float = 1.0,
    noise: float = 0.1,
    seed: int = 0,
) -> DatasetBundle:
    """Heterogeneous least squares: client i's data follow its own model w_i.

    w* ~ N(0, I_d) is shared; client i has w_i = w* + heterogeneity * u_i, u_i ~ N(0, I_d), and
    inputs x ~ N(m_i, I_d) with a client mean m_i ~ N(0, I_d); targets y = x . w_i + e,
    e ~ N(0, noise^2). Every client holds ``samples`` training and ``test_samples`` held-out
    samples. The loss f_i(theta) = mean (x . theta - y)^2 is convex, and the minimisers of
    sum_i p_i f_i differ between weightings p (the point of the agnostic-FedAvg paper's problem
    (3)). Use with :class:`~aoi_fl.core.models.LinearRegression` and the loss ``"mse"``.
    """
    n_clients, samples, test_samples, features, heterogeneity, noise = linear_regression_options(
        n_clients, samples, test_samples, features, heterogeneity, noise
    )
    rng = generator(seed, "synthetic_linear_regression")
    shared = rng.standard_normal(features)
    parts = []
    for _ in range(n_clients):
        w = shared + heterogeneity * rng.standard_normal(features)
        mean = rng.standard_normal(features)
        client = []
        for n in (samples, test_samples):
            x = mean + rng.standard_normal((n, features))
            y = x @ w + noise * rng.standard_normal(n)
            client += [x, y]
        parts.append(tuple(client))
    return _bundle("synthetic-linear-regression", parts, 1)


def fedprox_synthetic_options(
    alpha: float,
    beta: float,
    n_clients: int,
    features: int,
    classes: int,
    train_fraction: float,
) -> tuple[float, float, int, int, int, float]:
    """The options of :func:`fedprox_synthetic`, checked (also before anything is generated).

    Memory: every client holds at least 50 samples, generated in float64 and copied to
    float32, so the inputs need at least 12 * 50 * n_clients * features bytes; more than the
    machine's memory is refused.
    """
    checked = (
        require_real("alpha", alpha, minimum=0.0),
        require_real("beta", beta, minimum=0.0),
        require_int("n_clients", n_clients, minimum=1),
        require_int("features", features, minimum=1),
        require_int("classes", classes, minimum=2),
        require_real("train_fraction", train_fraction, minimum=0.0, maximum=1.0),
    )
    require_memory(
        {"n_clients": checked[2], "features": checked[3]},
        lambda n_clients, features: 12 * 50 * n_clients * features,
        "12 bytes * 50 * n_clients * features: at least 50 samples per client, generated in "
        "float64, copied to float32",
    )
    return checked


def fedprox_synthetic(
    alpha: float = 0.0,
    beta: float = 0.0,
    n_clients: int = 100,
    features: int = 60,
    classes: int = 10,
    train_fraction: float = 0.9,
    seed: int = 0,
) -> DatasetBundle:
    """Synthetic(alpha, beta) of Li et al. (FedProx, 2020), as used by the K-Vib paper (Sec. 6.1).

    Client i holds n_i = floor(LogNormal(4, 2)) + 50 samples (the "power law" sizes of the K-Vib
    paper's Fig. 3a). Its model is W_i ~ N(u_i, 1)^{features x classes}, b_i ~ N(u_i, 1)^classes
    with u_i ~ N(0, alpha^2); its inputs are x ~ N(v_i, diag(j^-1.2)), j = 1..features, with
    v_i ~ N(B_i, 1)^features and B_i ~ N(0, beta^2); labels are y = argmax(x W_i + b_i).
    alpha and beta are standard deviations (as in the FedProx and K-Vib generators; with the
    K-Vib paper's alpha = beta = 0 the reading does not matter). Each client's samples are
    split into its first floor(train_fraction * n_i) for training and the rest for testing.
    Use with :class:`~aoi_fl.core.models.LogisticRegression` and cross-entropy.
    """
    alpha, beta, n_clients, features, classes, train_fraction = fedprox_synthetic_options(
        alpha, beta, n_clients, features, classes, train_fraction
    )
    rng = generator(seed, "synthetic_fedprox")
    sizes = np.floor(rng.lognormal(4.0, 2.0, n_clients)).astype(np.int64) + 50
    u = rng.normal(0.0, alpha, n_clients)
    b_mean = rng.normal(0.0, beta, n_clients)
    std = np.arange(1, features + 1) ** -0.6  # sqrt of the covariance diagonal j^-1.2
    parts = []
    for i in range(n_clients):
        w = rng.normal(u[i], 1.0, (features, classes))
        b = rng.normal(u[i], 1.0, classes)
        v = rng.normal(b_mean[i], 1.0, features)
        x = v + std * rng.standard_normal((sizes[i], features))
        y = np.argmax(x @ w + b, axis=1)
        cut = int(train_fraction * sizes[i])
        parts.append((x[:cut], y[:cut], x[cut:], y[cut:]))
    return _bundle(f"synthetic-fedprox({alpha:g},{beta:g})", parts, classes)
