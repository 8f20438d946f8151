"""Everyone available takes part: the server's selection that turns an availability model into a
participation pattern (ours).

With it, the FedSUM paper's server-side patterns are availability models: its P2 (each client
independently with probability p) is ``bernoulli`` availability with every rate p, and its P3
(``SineBernoulli``) is ``diurnal`` availability with base p * offset, amplitude p * A and every
phase 0 (:mod:`aoi_fl.core.availability`; the tests check the equivalence in law). Weights 1/|S|,
as FedSUM's patterns give.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from aoi_fl.core.registry import Style, declare_options, declared
from aoi_fl.core.selection import SeededSampler, Selection, available_ids, check_available


class AllAvailable(SeededSampler):
    """Selects every available client of the round (everyone without a mask), weights 1/|S|."""

    name = "all_available"
    availability_aware = True

    def sample(self, available: np.ndarray | None = None) -> Selection:
        ids = available_ids(check_available(available, self.n), self.n)
        self.round += 1
        return Selection(ids, np.full(ids.size, 1.0 / max(ids.size, 1)))


def _configured(n: int, sizes: Any, seed: int = 0) -> AllAvailable:
    return AllAvailable(n, seed)


#: the factory ``aoi_fl/entry_points.txt`` names (``aoi_fl.samplers``)
PLUGINS = SimpleNamespace(
    all_available=declared(
        declare_options(_configured, AllAvailable),
        Style("everyone available", "#4d4d4d", "x"),
        availability=True,
    )
)
