"""Every client's mini-batches of a round, seeded by (seed, round, client) alone: they do not
depend on the engine, on the other selected clients or on resuming from a checkpoint."""

from __future__ import annotations

import numpy as np

from aoi_fl.core.seeding import generator
from aoi_fl.core.validation import require_int


def local_batches(
    seed: int, t: int, client: int, size: int, epochs: int, batch_size: int
) -> np.ndarray:
    """The positions (into the client's data) of each local step's mini-batch in round ``t``.

    Returns an int64 array (epochs * ceil(size / batch_size), batch_size): one row per step,
    each epoch a fresh permutation from ``generator(seed, "batches", t, client)`` cut into
    consecutive batches; the short last batch of an epoch is padded with -1.
    """
    size = require_int("size", size, minimum=0)
    epochs = require_int("epochs", epochs, minimum=1)
    batch_size = require_int("batch_size", batch_size, minimum=1)
    steps = -(-size // batch_size)
    rng = generator(seed, "batches", t, client)
    out = np.full((epochs, steps * batch_size), -1, dtype=np.int64)
    for e in range(epochs):
        out[e, :size] = rng.permutation(size)
    return out.reshape(epochs * steps, batch_size)


def local_step_batches(
    seed: int, t: int, client: int, size: int, steps: int, batch_size: int
) -> np.ndarray:
    """Mini-batches of ``steps`` local steps in round ``t`` (a fixed step count, not epochs).

    Returns an int64 array (steps, min(batch_size, size)): consecutive full batches of fresh
    permutations from ``generator(seed, "batches", t, client)``; a permutation's remainder
    (fewer than a batch) is dropped and the next permutation starts. A client with fewer than
    ``batch_size`` samples uses all of them in every step (as in the FedAU/FedAWE reference
    code the FedSUM experiments follow).
    """
    size = require_int("size", size, minimum=1)
    steps = require_int("steps", steps, minimum=1)
    batch_size = min(require_int("batch_size", batch_size, minimum=1), size)
    per_permutation = size // batch_size
    rng = generator(seed, "batches", t, client)
    # filled in place: a list of rows would cost an object per step besides the indices
    out = np.empty((steps, batch_size), dtype=np.int64)
    done = 0
    while done < steps:
        perm = rng.permutation(size)
        take = min(per_permutation, steps - done)
        out[done : done + take] = perm[: take * batch_size].reshape(take, batch_size)
        done += take
    return out
