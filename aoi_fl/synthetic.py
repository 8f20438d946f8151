"""Natively federated synthetic datasets, generated client by client from a seed.

Each generator returns a :class:`~aoi_fl.data.DatasetBundle` whose ``partition`` holds the
clients it was generated with (configurations use it through the partition ``"natural"``); the
test split is the union of the clients' held-out samples.

- :func:`linear_regression`: the convex task of the agnostic-FedAvg experiments (Sec. 4 of
  "Convergence of Agnostic Federated Averaging"; the paper does not give its generator, this one
  is ours): heterogeneous clients, each with its own optimum.
"""

from __future__ import annotations

import numpy as np
import torch

from ._validation import require_int, require_real
from .data import DatasetBundle, TensorSplit
from .seeding import generator


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
    (3)). Use with :class:`~aoi_fl.models.LinearRegression` and the loss ``"mse"``.
    """
    n_clients = require_int("n_clients", n_clients, minimum=1)
    samples = require_int("samples", samples, minimum=1)
    test_samples = require_int("test_samples", test_samples, minimum=1)
    features = require_int("features", features, minimum=1)
    heterogeneity = require_real("heterogeneity", heterogeneity, minimum=0.0)
    noise = require_real("noise", noise, minimum=0.0)
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
