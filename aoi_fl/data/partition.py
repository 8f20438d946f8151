"""Client data partitions and dataset sizes.

A partition is a list with one entry per client: a sorted int64 array of the sample indices
that client holds. All functions are pure functions of (labels or sizes, parameters, seed): the
randomness comes from ``seeding.generator(seed, "partition")`` (index assignment) or
``seeding.generator(seed, "dataset_sizes")`` (Zipf and lognormal sizes), never from a global
RNG.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from aoi_fl.core.seeding import generator
from aoi_fl.core.validation import require_int, require_real

Partition = list[np.ndarray]

#: the largest lognormal sigma: sizes are proportional to exp(sigma x), x ~ N(0, 1), which
#: stays finite in float64 (and so does the sum of any number of clients' draws) while
#: sigma |x| < 650, i.e. for |x| < 13 at sigma = 50 (a normal draw beyond 13 has probability
#: below 1e-37); from sigma = 5 on, one client holds nearly every sample anyway
MAX_LOGNORMAL_SIGMA = 50.0


def _cut(indices: np.ndarray, sizes: np.ndarray) -> Partition:
    """Consecutive blocks of ``indices`` with the given sizes, each sorted."""
    bounds = np.cumsum(sizes)[:-1]
    return [np.sort(block).astype(np.int64) for block in np.split(indices, bounds)]


def _require_labels(labels: object) -> np.ndarray:
    arr = np.asarray(labels)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"labels must be a non-empty 1-d array, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"labels must be integers, got dtype {arr.dtype}")
    if arr.min() < 0:
        raise ValueError(f"labels must be >= 0, got minimum {arr.min()}")
    return arr.astype(np.int64)


def iid_equal(num_samples: int, n_clients: int, seed: int) -> Partition:
    """Shuffle ``range(num_samples)`` and deal it into ``n_clients`` near-equal parts.

    Sizes differ by at most one (the first ``num_samples % n_clients`` clients get one more).
    """
    num_samples = require_int("num_samples", num_samples, minimum=1)
    n_clients = require_int("n_clients", n_clients, minimum=1, maximum=num_samples)
    base, extra = divmod(num_samples, n_clients)
    sizes = np.full(n_clients, base, dtype=np.int64)
    sizes[:extra] += 1
    return _cut(generator(seed, "partition").permutation(num_samples), sizes)


def _require_part_sizes(
    sizes: Sequence[int] | np.ndarray, available: int, available_text: str
) -> np.ndarray:
    """``sizes`` as an array of disjoint part sizes (>= 1 each) out of ``available`` samples."""
    arr = np.asarray(sizes)
    if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"sizes must be a non-empty 1-d integer array, got {sizes!r}")
    if arr.min() < 1:
        raise ValueError(f"every entry of sizes must be >= 1, got minimum {arr.min()}")
    if arr.sum() > available:
        raise ValueError(
            f"sum(sizes) = {arr.sum()} exceeds {available_text}; the parts must be disjoint"
        )
    return arr


def iid_sizes(num_samples: int, sizes: Sequence[int] | np.ndarray, seed: int) -> Partition:
    """Client i gets ``sizes[i]`` samples drawn uniformly without replacement.

    The parts are disjoint; they cover every index only when ``sum(sizes) == num_samples``.
    """
    num_samples = require_int("num_samples", num_samples, minimum=1)
    arr = _require_part_sizes(sizes, num_samples, f"num_samples = {num_samples}")
    perm = generator(seed, "partition").permutation(num_samples)[: int(arr.sum())]
    return _cut(perm, arr.astype(np.int64))


def _apportion(total: int, weights: np.ndarray) -> np.ndarray:
    """Integers proportional to ``weights`` that sum to ``total`` (largest-remainder method)."""
    quota = total * weights / weights.sum()
    counts = np.floor(quota).astype(np.int64)
    short = total - int(counts.sum())
    # stable sort: ties go to the lower client index, so the result is deterministic
    counts[np.argsort(counts - quota, kind="stable")[:short]] += 1
    return counts


def _require_size_law(
    n_clients: int, total: int | None, min_size: int
) -> tuple[int, int | None, int]:
    n_clients = require_int("n_clients", n_clients, minimum=1)
    min_size = require_int("min_size", min_size, minimum=1)
    if total is not None:
        total = require_int("total", total, minimum=n_clients * min_size)
    return n_clients, total, min_size


def _sizes_from_law(
    raw: np.ndarray | None, weights: np.ndarray, total: int | None, min_size: int
) -> np.ndarray:
    """Sizes from one draw of a size law: the integer draws ``raw`` floored at ``min_size``, or,
    with ``total``, ``min_size`` plus a largest-remainder share of the rest by ``weights``."""
    if total is None:
        return np.maximum(raw, min_size)
    return min_size + _apportion(total - weights.size * min_size, weights)


def zipf_sizes(
    n_clients: int, a: float, seed: int, total: int | None = None, min_size: int = 1
) -> np.ndarray:
    """Client dataset sizes from a Zipf law, as in the AoI paper (Zipf shape a = 2.0).

    Draws ``z_i ~ Zipf(a)`` with NumPy's ``Generator.zipf`` (P(z = k) proportional to k^-a,
    k >= 1). Without ``total`` the sizes are the raw realisation, floored at ``min_size``.
    With ``total`` each client gets ``min_size`` plus a largest-remainder share of
    ``total - n_clients * min_size`` proportional to ``z_i``, so the sizes sum to ``total``.
    """
    a = require_real("a", a, minimum=1.0, strict_minimum=True)
    n_clients, total, min_size = _require_size_law(n_clients, total, min_size)
    z = generator(seed, "dataset_sizes").zipf(a, size=n_clients).astype(np.int64)
    return _sizes_from_law(z, z.astype(float), total, min_size)


def lognormal_sizes(
    n_clients: int, sigma: float, seed: int, total: int | None = None, min_size: int = 1
) -> np.ndarray:
    """Client dataset sizes from a lognormal law (the "power law" sizes of the K-Vib paper).

    Draws ``z_i ~ LogNormal(0, sigma)`` from ``generator(seed, "dataset_sizes")``. Without
    ``total`` the sizes are floor(z_i), floored at ``min_size``; with ``total`` each client gets
    ``min_size`` plus a largest-remainder share of ``total - n_clients * min_size``
    proportional to ``z_i`` (the sizes then sum to ``total``; the location of the lognormal
    does not matter).
    """
    sigma = require_real("sigma", sigma, minimum=0.0, maximum=MAX_LOGNORMAL_SIGMA)
    n_clients, total, min_size = _require_size_law(n_clients, total, min_size)
    z = generator(seed, "dataset_sizes").lognormal(0.0, sigma, size=n_clients)
    if total is None and z.max() >= np.iinfo(np.int64).max:
        raise ValueError(
            f"sigma={sigma} draws a client size of {z.max():.3g} samples, more than an int64 "
            "holds; lower sigma or give total (the sizes then share total)"
        )
    # with total the draws only weigh the shares (their floor may not fit an int64)
    return _sizes_from_law(
        None if total is not None else np.floor(z).astype(np.int64), z, total, min_size
    )


def dirichlet_class_mix(
    labels: Sequence[int] | np.ndarray,
    sizes: Sequence[int] | np.ndarray,
    alpha: float,
    seed: int,
) -> Partition:
    """Label-skewed partition with given sizes, algorithm (B) "per client, over classes".

    Client i (in index order) draws a class prior ``Dir_C(alpha)`` and fills its ``sizes[i]``
    samples with class counts ``Multinomial(sizes[i], prior)``, taken without replacement from
    each class's shuffled pool. When a class runs out, the prior is renormalised over the
    classes that remain (uniform over them if the prior puts no mass there) and the shortfall is
    drawn again; each draw takes at least one sample, so this ends. Late clients may thus get a
    less skewed mix when ``sum(sizes)`` is close to the number of samples.
    """
    labels = _require_labels(labels)
    sizes = _require_part_sizes(sizes, labels.size, f"the {labels.size} samples")
    alpha = require_real("alpha", alpha, minimum=0.0, strict_minimum=True)
    rng = generator(seed, "partition")
    classes = np.unique(labels)
    pools = [rng.permutation(np.flatnonzero(labels == c)) for c in classes]
    left = np.array([pool.size for pool in pools])
    parts = []
    for size in sizes:
        prior = rng.dirichlet(np.full(classes.size, alpha))
        counts = np.zeros(classes.size, dtype=np.int64)
        need = int(size)
        while need:
            open_ = left - counts > 0
            weights = np.where(open_, prior, 0.0)
            weights = weights if weights.sum() > 0 else open_.astype(float)
            got = np.minimum(rng.multinomial(need, weights / weights.sum()), left - counts)
            counts += got
            need -= int(got.sum())
        used = [pool.size - remaining for pool, remaining in zip(pools, left, strict=True)]
        taken = [pool[u : u + c] for pool, u, c in zip(pools, used, counts, strict=True)]
        left -= counts
        parts.append(np.sort(np.concatenate(taken)).astype(np.int64))
    return parts


def dirichlet_label_skew(
    labels: Sequence[int] | np.ndarray,
    n_clients: int,
    alpha: float,
    seed: int,
    min_size: int = 10,
    max_retries: int = 1000,
) -> Partition:
    """Label-skewed non-IID partition, algorithm (A) "per class, split across clients".

    For every class c, draw ``p ~ Dir_N(alpha)`` over the ``N = n_clients`` clients and cut
    that class's shuffled indices into consecutive blocks of sizes
    ``diff(floor(cumsum(p) * n_c))``. This is the usual reading of "Dirichlet alpha" in FL
    papers (e.g. the AoI paper's alpha = 0.3). If some client ends up with fewer than
    ``min_size`` samples the whole draw is repeated, at most ``max_retries`` times; then a
    ``RuntimeError`` names alpha, min_size and the best minimum reached (never a hang). There
    is no self-balancing step: a client may receive many samples.
    """
    labels, n_clients, alpha, min_size, max_retries = _require_skew_args(
        labels, n_clients, alpha, min_size, max_retries
    )
    rng = generator(seed, "partition")
    classes = np.unique(labels)
    class_counts = np.array([(labels == c).sum() for c in classes])
    # only the counts are drawn per attempt; indices are assigned once a draw is accepted
    counts = _accepted_counts(
        "dirichlet_label_skew",
        lambda: _cumulative_counts(
            rng.dirichlet(np.full(n_clients, alpha), size=classes.size), class_counts
        ),
        min_size,
        max_retries,
        f"alpha={alpha}, n_clients={n_clients}, {labels.size} samples",
    )
    return _assign(labels, classes, counts, rng)


def _require_skew_args(
    labels: object, n_clients: int, alpha: float, min_size: int, max_retries: int
) -> tuple[np.ndarray, int, float, int, int]:
    labels = _require_labels(labels)
    n_clients = require_int("n_clients", n_clients, minimum=1)
    alpha = require_real("alpha", alpha, minimum=0.0, strict_minimum=True)
    min_size = require_int("min_size", min_size, minimum=0)
    max_retries = require_int("max_retries", max_retries, minimum=1)
    if n_clients * min_size > labels.size:
        raise ValueError(
            f"impossible: n_clients * min_size = {n_clients} * {min_size} exceeds the "
            f"{labels.size} samples"
        )
    return labels, n_clients, alpha, min_size, max_retries


def _cumulative_counts(shares: np.ndarray, class_counts: np.ndarray) -> np.ndarray | None:
    """(classes, clients) counts: class c's n_c samples cut at floor(cumsum(shares[c]) n_c).

    ``shares[c]`` sums to one over the clients; rows that do not (NaN from an underflowing
    Dirichlet draw) make the draw unusable, signalled by returning None.
    """
    if not np.isfinite(shares).all():
        return None
    cuts = np.floor(np.cumsum(shares, axis=1) * class_counts[:, None]).astype(np.int64)
    cuts[:, -1] = class_counts  # cumsum may end at 1 - eps
    return np.diff(cuts, axis=1, prepend=0)


def _accepted_counts(
    caller: str, draw, min_size: int, max_retries: int, context: str
) -> np.ndarray:
    """The first ``draw()`` whose every client holds >= ``min_size`` samples (bounded retries)."""
    best = -1
    for _ in range(max_retries):
        counts = draw()
        if counts is None:
            continue
        smallest = int(counts.sum(axis=0).min())
        best = max(best, smallest)
        if smallest >= min_size:
            return counts
    raise RuntimeError(
        f"{caller}: no partition with every client holding >= min_size={min_size} samples "
        f"after max_retries={max_retries} draws ({context}); the best minimum reached was "
        f"{best}. Raise alpha, lower min_size, or raise max_retries."
    )


def _assign(
    labels: np.ndarray, classes: np.ndarray, counts: np.ndarray, rng: np.random.Generator
) -> Partition:
    """Each class's shuffled indices cut into consecutive blocks of ``counts[c]`` per client."""
    parts: list[list[np.ndarray]] = [[] for _ in range(counts.shape[1])]
    for c, row in zip(classes, counts, strict=True):
        shuffled = rng.permutation(np.flatnonzero(labels == c))
        for client, block in enumerate(np.split(shuffled, np.cumsum(row)[:-1])):
            parts[client].append(block)
    return [np.sort(np.concatenate(blocks)).astype(np.int64) for blocks in parts]


def dirichlet_client_prior(
    labels: Sequence[int] | np.ndarray,
    n_clients: int,
    alpha: float,
    seed: int,
    num_classes: int | None = None,
    min_size: int = 1,
    max_retries: int = 1000,
) -> Partition:
    """Label skew from per-client label priors: the FedSUM / FedAWE experiments' procedure.

    Every client n draws a label prior q_n ~ Dir(alpha 1_C); class c's shuffled indices are
    then split across all clients in proportion q_{n,c} / sum_m q_{m,c}, cut at the floors of
    the cumulative shares (so client sizes differ, FedSUM's Fig. 4). This is the procedure of
    the public FedAWE code that the FedSUM experiments build on; the paper itself only says
    "Dirichlet alpha = 0.1". It is neither of the two usual algorithms
    (:func:`dirichlet_label_skew`, and the fixed-size per-client class mix): the Dirichlet draw
    is per client over classes, but clients do not get a fixed size. A draw in which some
    client gets fewer than ``min_size`` samples (or a class gets no positive share)
    is repeated, at most ``max_retries`` times, then a ``RuntimeError`` says what to change.
    """
    labels, n_clients, alpha, min_size, max_retries = _require_skew_args(
        labels, n_clients, alpha, min_size, max_retries
    )
    if num_classes is None:
        num_classes = int(labels.max()) + 1
    num_classes = require_int("num_classes", num_classes, minimum=int(labels.max()) + 1)
    rng = generator(seed, "partition")
    classes = np.arange(num_classes)
    class_counts = np.bincount(labels, minlength=num_classes)

    def draw() -> np.ndarray | None:
        q = rng.dirichlet(np.full(num_classes, alpha), size=n_clients)  # (clients, classes)
        with np.errstate(invalid="ignore", divide="ignore"):
            shares = (q / q.sum(axis=0)).T
        return _cumulative_counts(shares, class_counts)

    counts = _accepted_counts(
        "dirichlet_client_prior",
        draw,
        min_size,
        max_retries,
        f"alpha={alpha}, n_clients={n_clients}, {labels.size} samples",
    )
    return _assign(labels, classes, counts, rng)


def label_histogram(
    labels: Sequence[int] | np.ndarray, partition: Partition, num_classes: int
) -> np.ndarray:
    """Counts of each class per client: an ``(n_clients, num_classes)`` int64 array."""
    labels = _require_labels(labels)
    num_classes = require_int("num_classes", num_classes, minimum=1)
    if labels.max() >= num_classes:
        raise ValueError(f"labels go up to {labels.max()}, but num_classes = {num_classes}")
    return np.stack(
        [np.bincount(labels[np.asarray(idx)], minlength=num_classes) for idx in partition]
    ).astype(np.int64)
