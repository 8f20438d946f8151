"""Oort's participant selection for training, its statistical part (Lai et al., "Oort:
Efficient Federated Learning via Guided Participant Selection", OSDI 2021; the authors' public
code, SymbioticLab/Oort ``oort/oort.py``).

Oort treats the clients as the arms of a bandit. Its pieces, and what is kept here:

* Statistical utility: U_i = |B_i| sqrt((1/|B_i|) sum_{k in B_i}
  Loss(k)^2), B_i the samples client i trained on when it last took part: the number of samples
  times the root mean square of their losses (:func:`statistical_utility`). Here |B_i| =
  min(d_i, ``trained_samples``), the samples a client's K local steps of batch B visit (the
  arena passes K B), and the losses are those of the model the client received on a fixed seeded
  subset of that many of its samples (``loss_probe(ids, trained_samples, free=True)`` right after
  selection: as many losses as its training computes, so not counted as an extra evaluation),
  not the losses logged during local training. With ``trained_samples=None``, |B_i| = d_i and
  the losses cover all its samples.
* Temporal uncertainty (Alg. 1): an explored client's utility gains sqrt(0.1 log R / L_i), R the
  current round and L_i the last round client i took part, both counted from 1
  (:func:`staleness_bonus`): a client left out for long gains. The authors' code first clips U at
  an order statistic of the explored clients' utilities (its ``get_norm`` default: the one 95% of
  the way up) and rescales to [0, 1] by the smallest and largest; done here too, since otherwise
  U (samples times loss) dwarfs the bonus.
* Exploitation (Alg. 1): of the (1 - eps) m exploitation slots, admit the explored clients whose
  utility is at least c times that of the ((1 - eps) m)-th best (c = 0.95, the paper's default;
  versions of the authors' code use other values, and index the next one), then draw
  (1 - eps) m of them without replacement with probability proportional to utility.
* Exploration: the other eps m slots go to clients never tried. Oort draws them by speed (its
  system utility); speed is not modelled here, so they are drawn uniformly at random among the
  available unexplored clients.
* eps: 0.9 at first, times 0.98 per round, never below 0.2 (the paper's defaults; the authors'
  code has the same defaults and decays once before its first round); once every client has been
  tried nothing is left to explore and eps = 0 (the code does the same).

Left out: the system utility (T / D_i)^alpha that penalises slow clients, the pacer that relaxes
the preferred round duration T, and the blacklist of over-selected clients (off by default in
the authors' code). (1 - eps) m is rounded down (after a 1e-9 guard against round-off).

Under availability (ours): every step uses the available clients only, and min(m, #available)
are selected; slots that neither step can fill (too few available unexplored clients) go to
other available clients uniformly at random, as the authors' code fills them.

Aggregation weights: FedAvg's w_i = d_i / sum_{j in S} d_j.
"""

from __future__ import annotations

import math
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
from aoi_fl.core.validation import require_int, require_n_m, require_real, require_sizes


def statistical_utility(samples: Any, rms_loss: Any) -> np.ndarray:
    """Oort's statistical utility U = |B| sqrt((1/|B|) sum_k Loss(k)^2) = |B| * rms loss."""
    return np.asarray(samples, dtype=float) * np.asarray(rms_loss, dtype=float)


def staleness_bonus(round_number: int, last_round: Any) -> np.ndarray:
    """sqrt(0.1 ln R / L_i) (Oort, Alg. 1): R the round now, L_i the last one of client i."""
    return np.sqrt(0.1 * math.log(round_number) / np.asarray(last_round, dtype=float))


def _floor(x: float) -> int:
    # m (1 - eps) = 10 * (1 - 0.9) is 0.9999999999999998 in floating point
    return int(math.floor(x + 1e-9))


class Oort(SeededSampler):
    """Oort's training selector without system utility (module docstring).

    ``m`` clients per round; ``epsilon``, ``epsilon_decay``, ``epsilon_min``: the exploration
    factor's start, per-round factor and floor; ``cutoff``: c of the admission rule;
    ``clip_quantile``: where the utility is clipped among the explored clients' utilities.
    """

    name = "oort"
    availability_aware = True
    wants_losses = True

    def __init__(
        self,
        sizes: Any,
        m: int,
        seed: int = 0,
        epsilon: float = 0.9,
        epsilon_decay: float = 0.98,
        epsilon_min: float = 0.2,
        cutoff: float = 0.95,
        clip_quantile: float = 0.95,
        trained_samples: int | None = None,
    ) -> None:
        self.sizes = require_sizes("sizes", sizes)
        self.trained_samples = (
            None
            if trained_samples is None
            else require_int("trained_samples", trained_samples, minimum=1)
        )
        n, self.m = require_n_m(self.sizes.size, m)
        self.epsilon = require_real("epsilon", epsilon, minimum=0.0, maximum=1.0)
        self.epsilon_decay = require_real(
            "epsilon_decay", epsilon_decay, minimum=0.0, strict_minimum=True, maximum=1.0
        )
        self.epsilon_min = require_real("epsilon_min", epsilon_min, minimum=0.0, maximum=1.0)
        if self.epsilon_min > self.epsilon:
            raise ValueError(
                f"epsilon_min must be <= epsilon = {self.epsilon}, got {self.epsilon_min}"
            )
        self.cutoff = require_real("cutoff", cutoff, minimum=0.0, strict_minimum=True, maximum=1.0)
        self.clip_quantile = require_real(
            "clip_quantile", clip_quantile, minimum=0.0, strict_minimum=True, maximum=1.0
        )
        super().__init__(n, seed)
        #: U_i from each client's last participation (0 until it first takes part)
        self.utility = np.zeros(n)
        #: the round (counted from 1) in which each client last took part; 0: never
        self.last_round = np.zeros(n, dtype=np.int64)

    def exploration_factor(self) -> float:
        """eps of the coming round: max(epsilon * decay^t, epsilon_min), 0 once all explored."""
        if (self.last_round > 0).all():
            return 0.0
        return max(self.epsilon * self.epsilon_decay**self.round, self.epsilon_min)

    def utilities(self, ids: np.ndarray) -> np.ndarray:
        """Alg. 1's Util of explored clients ``ids`` in the coming round: clipped and rescaled
        U, plus the temporal uncertainty."""
        u = self.utility[ids]
        clip = np.sort(u)[min(_floor(u.size * self.clip_quantile), u.size - 1)]
        span = u.max() - u.min()
        scaled = (np.minimum(u, clip) - u.min()) / span if span > 0 else np.zeros(u.size)
        return scaled + staleness_bonus(self.round + 1, self.last_round[ids])

    def sample(self, available: np.ndarray | None = None) -> Selection:
        available = check_available(available, self.n)
        self.require_loss_probe()
        pool = available_ids(available, self.n)
        total = min(self.m, pool.size)
        tried = self.last_round[pool] > 0
        n_exploit = min(_floor(self.m * (1 - self.exploration_factor())), int(tried.sum()), total)
        n_explore = min(int((~tried).sum()), total - n_exploit)
        chosen = np.concatenate(
            (self.exploit(pool[tried], n_exploit), self._draw(pool[~tried], n_explore))
        )
        rest = np.setdiff1d(pool, chosen, assume_unique=True)  # both hold distinct ids
        ids = np.sort(np.concatenate((chosen, self._draw(rest, total - chosen.size))))
        self.observe(ids)
        self.round += 1
        d = self.sizes[ids]
        return Selection(ids, d / d.sum() if ids.size else d)

    def exploit(self, explored: np.ndarray, k: int) -> np.ndarray:
        """k of the ``explored`` clients: admitted by the cut-off, drawn by utility."""
        if k == 0:
            return np.empty(0, dtype=np.int64)
        util = self.utilities(explored)
        admitted = util >= self.cutoff * np.sort(util)[::-1][k - 1]
        p = util[admitted] / util[admitted].sum()
        return self._rng.choice(explored[admitted], size=k, replace=False, p=p)

    def _draw(self, ids: np.ndarray, k: int) -> np.ndarray:
        """k of ``ids`` uniformly without replacement."""
        if k == 0:
            return np.empty(0, dtype=np.int64)
        return self._rng.choice(ids, size=k, replace=False)

    def batch_sizes(self, ids: np.ndarray) -> np.ndarray:
        """|B_i|: the samples client i trains on in a round, min(d_i, ``trained_samples``)
        (all d_i when ``trained_samples`` is None)."""
        d = self.sizes[ids]
        return d if self.trained_samples is None else np.minimum(d, self.trained_samples)

    def observe(self, ids: np.ndarray) -> None:
        """The participants' utility from the loss of the model they received (free: computed
        while they train) and the round they took part in."""
        if ids.size == 0:
            return
        _, rms = self.loss_probe(ids, self.trained_samples, free=True)
        rms = np.asarray(rms, dtype=float)
        if rms.shape != ids.shape or not np.all(np.isfinite(rms)) or (rms < 0).any():
            raise ValueError(
                f"the loss probe must return one finite root-mean-square loss >= 0 per client "
                f"of {ids.size}, got {rms!r}"
            )
        self.utility[ids] = statistical_utility(self.batch_sizes(ids), rms)
        self.last_round[ids] = self.round + 1

    def config(self) -> dict:
        return {
            **super().config(),
            "m": self.m,
            "epsilon": self.epsilon,
            "epsilon_decay": self.epsilon_decay,
            "epsilon_min": self.epsilon_min,
            "cutoff": self.cutoff,
            "clip_quantile": self.clip_quantile,
            "trained_samples": self.trained_samples,
            "sizes": sizes_key(self.sizes),
        }

    def state_dict(self) -> dict:
        return {
            **super().state_dict(),
            "utility": self.utility.tolist(),
            "last_round": self.last_round.tolist(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        rng, t = self._check_state(state)
        utility = np.asarray(state.get("utility"), dtype=float)
        last = np.asarray(state.get("last_round"))
        if utility.shape != (self.n,) or not np.all(np.isfinite(utility)) or (utility < 0).any():
            raise ValueError(f"state['utility'] must hold {self.n} finite utilities >= 0")
        if (
            last.shape != (self.n,)
            or not np.issubdtype(last.dtype, np.integer)
            or (last < 0).any()
            or (last > t).any()
        ):
            raise ValueError(f"state['last_round'] must hold {self.n} rounds in [0, {t}]")
        self._rng, self.round = rng, t
        self.utility, self.last_round = utility, last.astype(np.int64)


#: the factory ``aoi_fl/entry_points.txt`` names (``aoi_fl.samplers``)
PLUGINS = SimpleNamespace(
    oort=policy_factory(Oort, Style("Oort (statistical utility)", "#01665e", "h"))
)
