"""Independent random streams derived from one seed.

Every source of randomness in aoi_fl (data partition, sampler, model initialisation, mini-batch
order, ...) gets its own generator, derived from ``(seed, stream name)`` through NumPy's
``SeedSequence``. Changing how much one stream consumes never changes another, and no code path
touches a global RNG.
"""

from __future__ import annotations

import zlib

import numpy as np

from aoi_fl.core.validation import require_int


def _spawn_key(stream: str, extra: tuple[int, ...]) -> tuple[int, ...]:
    if not isinstance(stream, str) or not stream:
        raise ValueError(f"stream must be a non-empty string, got {stream!r}")
    return (zlib.crc32(stream.encode("utf-8")), *extra)


def seed_sequence(seed: int, stream: str, *extra: int) -> np.random.SeedSequence:
    """The ``SeedSequence`` of stream ``stream`` (optionally sub-indexed by ``extra``)."""
    seed = require_int("seed", seed, minimum=0)
    extra = tuple(require_int("extra", e, minimum=0) for e in extra)
    return np.random.SeedSequence(entropy=seed, spawn_key=_spawn_key(stream, extra))


def generator(seed: int, stream: str, *extra: int) -> np.random.Generator:
    """A NumPy generator private to ``stream``; e.g. ``generator(0, "sampler")``."""
    return np.random.default_rng(seed_sequence(seed, stream, *extra))


def derived_seed(seed: int, stream: str, *extra: int) -> int:
    """A 63-bit integer seed for libraries that take an int (e.g. ``torch.Generator``)."""
    state = seed_sequence(seed, stream, *extra).generate_state(2, dtype=np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1])) & ((1 << 63) - 1)
