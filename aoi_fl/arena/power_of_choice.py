"""Power-of-d-Choice client selection (Cho, Wang & Joshi, "Client Selection in Federated
Learning: Convergence Analysis and Power-of-Choice Selection Strategies", arXiv 2010.01243,
AISTATS 2022).

The paper's strategy pi_pow-d, each round:

1. the server draws a candidate set A of d clients *without replacement*, client k with
   probability proportional to its data fraction p_k = d_k / sum_j d_j;
2. the candidates receive the current global model w and report their local loss F_k(w) (the
   mean loss over their own training samples);
3. the m candidates with the highest loss train; their models are averaged with equal weights
   1/m (the paper's update rule; the authors' code averages the returned models likewise, since
   the size-proportional draw already favours large clients).

d between m and n trades convergence speed (large d: more bias towards high-loss clients)
against the solution's bias (d = m is the size-proportional draw without the loss step).

Variants of the paper implemented here:

* cpow-d (``probe_samples=b``): the candidates estimate F_k(w) on b of their samples instead of
  all of them. The paper draws a fresh mini-batch; the trainer's probe uses a fixed seeded
  subset of b samples per client (:class:`aoi_fl.core.selection.LossProbe`).
* rpow-d (:class:`PowerOfChoiceStale`, ``"power_of_choice_stale"``): no extra evaluation. The
  server keeps the loss each client reported when it last took part and ranks the d candidates
  by that stale value; a client never selected has +inf (the authors' public code sets the proxy
  of unvisited clients to +inf), so it goes first. The paper's clients report the average loss of
  their local iterations; here a participant reports the loss of the model it received, on its
  own samples (``loss_probe(..., free=True)`` right after selection: computed while it trains,
  so not an extra evaluation).

Ties in the loss ranking keep the order in which the candidates were drawn (a seeded random
order), as the authors' code does with a stable descending sort.

Under availability (ours; the authors' code has an intermittent variant, pow-dint, that draws
the candidates among the clients present with renormalised p_k), both draw the candidates among
the available clients with p_k renormalised over them, all of them when at most d are available;
they select min(m, |A|) clients and never an unavailable one.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import numpy as np

from aoi_fl.arena.policies import policy_factory
from aoi_fl.core.registry import Style
from aoi_fl.core.selection import (
    SeededSampler,
    Selection,
    available_ids,
    check_available,
    sizes_key,
)
from aoi_fl.core.validation import require_int, require_n_m, require_sizes


class PowerOfChoice(SeededSampler):
    """pi_pow-d (and cpow-d with ``probe_samples``): the m highest-loss of d size-drawn candidates.

    ``m`` clients per round out of ``d`` candidates (m <= d <= n); ``probe_samples``: None, each
    candidate's loss on all its samples (pow-d), or an int b >= 1, on b of them (cpow-d).
    """

    name = "power_of_choice"
    availability_aware = True
    wants_losses = True

    def __init__(
        self, sizes: Any, m: int, d: int, seed: int = 0, probe_samples: int | None = None
    ) -> None:
        self.sizes = require_sizes("sizes", sizes)
        n, self.m = require_n_m(self.sizes.size, m)
        self.d = require_int("d", d, minimum=1, maximum=n)
        if self.d < self.m:
            raise ValueError(
                f"d must be >= m = {self.m} (the m selected come from the d candidates), "
                f"got d={self.d}"
            )
        self.probe_samples = (
            None
            if probe_samples is None
            else require_int("probe_samples", probe_samples, minimum=1)
        )
        super().__init__(n, seed)

    def sample(self, available: np.ndarray | None = None) -> Selection:
        available = check_available(available, self.n)
        self.require_loss_probe()
        candidates = self.candidates(available)
        ranking = np.argsort(-self.candidate_losses(candidates), kind="stable")
        ids = np.sort(candidates[ranking[: self.m]])
        self.report(ids)
        self.round += 1
        return Selection(ids, np.full(ids.size, 1.0 / max(ids.size, 1)))

    def candidates(self, available: np.ndarray | None) -> np.ndarray:
        """Step 1: d clients without replacement with P proportional to p_k, in draw order."""
        pool = available_ids(available, self.n)
        if pool.size == 0:
            return pool
        p = self.sizes[pool] / self.sizes[pool].sum()
        return self._rng.choice(pool, size=min(self.d, pool.size), replace=False, p=p)

    def candidate_losses(self, candidates: np.ndarray) -> np.ndarray:
        """Step 2: the candidates' mean loss F_k(w) at the current global model."""
        return probe_mean_losses(self.loss_probe, candidates, self.probe_samples, free=False)

    def report(self, ids: np.ndarray) -> None:
        """What the selected clients report after selection (pow-d: nothing)."""

    def config(self) -> dict:
        return {
            **super().config(),
            "m": self.m,
            "d": self.d,
            "probe_samples": self.probe_samples,
            "sizes": sizes_key(self.sizes),
        }


class PowerOfChoiceStale(PowerOfChoice):
    """pi_rpow-d: the m candidates with the highest *stored* loss (+inf: never selected)."""

    name = "power_of_choice_stale"

    def __init__(
        self, sizes: Any, m: int, d: int, seed: int = 0, probe_samples: int | None = None
    ) -> None:
        super().__init__(sizes, m, d, seed, probe_samples)
        #: each client's loss when it last took part; +inf until it first does
        self.losses = np.full(self.n, np.inf)

    def candidate_losses(self, candidates: np.ndarray) -> np.ndarray:
        return self.losses[candidates]

    def report(self, ids: np.ndarray) -> None:
        """The participants' losses of the model they received (free: computed while training)."""
        if ids.size:
            self.losses[ids] = probe_mean_losses(
                self.loss_probe, ids, self.probe_samples, free=True
            )

    def state_dict(self) -> dict:
        # JSON has no infinity: a client that never reported is stored as None
        stored = [None if np.isinf(x) else float(x) for x in self.losses]
        return {**super().state_dict(), "losses": stored}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        rng, t = self._check_state(state)
        stored = state.get("losses")
        if not isinstance(stored, list) or len(stored) != self.n:
            raise ValueError(f"state['losses'] must be a list of {self.n} losses (None: never)")
        losses = np.array([np.inf if x is None else x for x in stored], dtype=float)
        if np.isnan(losses).any() or np.isneginf(losses).any():
            raise ValueError("state['losses'] must hold real losses or None")
        self._rng, self.round, self.losses = rng, t, losses


def probe_mean_losses(
    probe: Any, ids: np.ndarray, samples: int | None, *, free: bool
) -> np.ndarray:
    """The mean losses of clients ``ids`` from the trainer's probe, checked (no NaN)."""
    if len(ids) == 0:  # nobody available: nothing to ask
        return np.empty(0)
    mean, _ = probe(np.asarray(ids, dtype=np.int64), samples, free=free)
    mean = np.asarray(mean, dtype=float)
    if mean.shape != (len(ids),) or np.isnan(mean).any():
        raise ValueError(
            f"the loss probe must return one mean loss (not NaN) per client of {len(ids)}, "
            f"got {mean!r}"
        )
    return mean


#: the factories ``aoi_fl/entry_points.txt`` names (``aoi_fl.samplers``)
PLUGINS = SimpleNamespace(
    power_of_choice=policy_factory(
        PowerOfChoice, Style("Power-of-d-Choice (pow-d)", "#7b3294", "d")
    ),
    power_of_choice_stale=policy_factory(
        PowerOfChoiceStale, Style("Power-of-d-Choice, stale losses (rpow-d)", "#c2a5cf", "8")
    ),
)
