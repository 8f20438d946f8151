"""Any registered selection policy by name, built as a configuration's ``sampler`` section is:
one name for clients per round, its options checked before anything is built."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aoi_fl.core import registry
from aoi_fl.core.selection import Sampler
from aoi_fl.core.validation import require_int
from aoi_fl.pipeline import config_checks, plugins


def make_policy(
    policy: str, n: int, sizes: Sequence[float] | None = None, **options: Any
) -> Sampler:
    """Registered sampler ``policy`` for ``n`` clients of data sizes ``sizes`` (None: equal).

    ``m`` is the clients per round for every policy (K-Vib's ``k`` and the cyclic patterns'
    ``s`` are mapped by :func:`registry.with_clients`; their own names work too). The options
    are checked as a configuration's ``sampler`` section is (unknown or missing ones named with
    the valid ones, values by a dry draw), after :func:`plugins.load` has registered every
    paper's policies and any an installed package declares.
    """
    plugins.load()
    n = require_int("n", n, minimum=1)
    if not isinstance(policy, str) or policy not in registry.SAMPLERS:
        raise ValueError(
            f"policy={policy!r} is not a registered aoi_fl policy; allowed: "
            f"{', '.join(sorted(registry.SAMPLERS))}"
        )
    options = registry.with_clients(policy, options)
    config_checks.check_sampler({"name": policy, **options}, n)
    sizes = np.ones(n) if sizes is None else np.asarray(sizes, dtype=np.float64)
    if sizes.shape != (n,):
        raise ValueError(f"sizes must give one data size per client (n={n}), got {sizes.shape}")
    return registry.SAMPLERS[policy](n, sizes, **options)
