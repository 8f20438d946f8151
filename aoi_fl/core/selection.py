"""What a client sampler returns each round, and the interface every sampler implements.

The four policies of the AoI paper (Sec. III-B), and the adaptive samplers of later issues, all
produce one :class:`Selection` per round: the selected client ids and their aggregation weights
(eq. 15: ``theta = sum_{i in S} w_i theta_i``). Adaptive samplers additionally receive feedback
after a round through :meth:`Sampler.feedback`.

The unbiased samplers of the K-Vib paper (its ``samplers`` module) also say how they drew
the clients (``procedure``, one of :data:`PROCEDURES`) and with which probabilities, so that the
trainer can measure their estimator's cost and variance; a sampler that needs every client's
update norm before it samples (the full-information optimum) gets them through
:meth:`Sampler.inform`.

Client availability (:mod:`aoi_fl.core.availability`) is separate from selection: an
availability model says who can take part in round t, and a sampler registered as availability
aware (``register_sampler(..., availability=True)``, class attribute ``availability_aware``)
picks among those: its ``sample(available)`` takes the round's boolean mask over the n clients
(None: everyone). What a policy does with unavailable clients is its own definition (documented
with it); a sampler never selects an unavailable client (:func:`check_available_selection`).

Two more channels serve the loss- and similarity-driven policies of the field (Power-of-d-Choice,
Oort, Clustered Sampling): a sampler with ``wants_losses`` gets the trainer's :class:`LossProbe`
in ``loss_probe`` (each client's loss of the current global model, on its own samples), and one
with ``wants_updates`` gets the selected clients' model updates after a round through
:meth:`Sampler.feedback_updates`.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from aoi_fl.core.seeding import generator
from aoi_fl.core.validation import require_choice, require_int, require_n_m, require_sizes

#: how an unbiased sampler draws its clients (K-Vib paper, Sec. 2): "isp" each client by its own
#: coin with probability p_i; "with_replacement" K i.i.d. draws from q = p / K;
#: "without_replacement" K distinct clients (uniformly: p_i = K / n)
PROCEDURES: tuple[str, ...] = ("isp", "with_replacement", "without_replacement")


@dataclass(frozen=True)
class Selection:
    """The clients chosen in one round.

    ``ids`` are distinct client indices in increasing order (int64); ``weights`` are the
    aggregation weights w_i >= 0 of those clients, in the same order (float64). For the paper's
    four policies the weights sum to one; unbiased estimators of later issues may not.

    Unbiased samplers also set ``procedure`` (one of :data:`PROCEDURES`) and ``probabilities``:
    p_i for all n clients such that w_i = (number of draws of i) * lambda_i / p_i makes
    sum_{i in S} w_i g_i an unbiased estimate of sum_i lambda_i g_i (inclusion probabilities for
    "isp" and "without_replacement", K q_i for "with_replacement"). Both are None otherwise.

    A sampler that draws with replacement and counts a client drawn l times l times (AoI Policy
    2: "selected l times out of m total selections") sets ``hits``: l per selected id (integers
    >= 1, aligned with ``ids``); None means each selected client counts once.
    """

    ids: np.ndarray
    weights: np.ndarray
    probabilities: np.ndarray | None = None
    procedure: str | None = None
    hits: np.ndarray | None = None

    def __post_init__(self) -> None:
        ids = np.asarray(self.ids, dtype=np.int64)
        weights = np.asarray(self.weights, dtype=np.float64)
        if ids.ndim != 1 or weights.shape != ids.shape:
            raise ValueError(
                f"ids and weights must be 1-d of equal length, got {ids.shape} and {weights.shape}"
            )
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "weights", weights)
        if self.hits is not None:
            hits = np.asarray(self.hits)
            if hits.shape != ids.shape or not np.issubdtype(hits.dtype, np.integer):
                raise ValueError(f"hits must be integers, one per selected id, got {self.hits!r}")
            if hits.size and hits.min() < 1:
                raise ValueError(f"hits must be at least 1, got {hits}")
            object.__setattr__(self, "hits", hits.astype(np.int64, copy=False))
        if (self.probabilities is None) != (self.procedure is None):
            raise ValueError("probabilities and procedure must be given together (or neither)")
        if self.procedure is not None:
            require_choice("procedure", self.procedure, PROCEDURES)
            p = np.asarray(self.probabilities, dtype=np.float64)
            if p.ndim != 1 or not np.all(np.isfinite(p)) or (p < 0).any():
                raise ValueError("probabilities must be a 1-d array of finite values >= 0")
            if ids.size and (ids[-1] >= p.size or (p[ids] <= 0).any()):
                raise ValueError("every selected client needs a probability > 0")
            object.__setattr__(self, "probabilities", p)

    def __len__(self) -> int:
        return int(self.ids.size)

    def dense(self, n: int) -> np.ndarray:
        """The weight vector over all ``n`` clients (zeros for the clients not selected)."""
        w = np.zeros(n)
        w[self.ids] = self.weights
        return w


def check_available(available: Any, n: int) -> np.ndarray | None:
    """A round's availability mask: None (everyone) or a boolean vector of the n clients."""
    if available is None:
        return None
    mask = np.asarray(available)
    if mask.shape != (n,) or mask.dtype != np.bool_:
        raise ValueError(
            f"available must be a boolean mask of the n={n} clients (or None), "
            f"got dtype {mask.dtype} and shape {mask.shape}"
        )
    return mask


def available_ids(available: np.ndarray | None, n: int) -> np.ndarray:
    """The ids of the available clients, in increasing order (all n for None)."""
    return np.arange(n) if available is None else np.flatnonzero(available)


def check_selection_ids(selection: Any, n: int, sampler: str) -> Selection:
    """``selection``, after checking that it is a :class:`Selection` of distinct clients among
    0..n-1 in increasing order (a user's sampler may return anything)."""
    if not isinstance(selection, Selection):
        raise RuntimeError(
            f"sampler {sampler!r} returned {selection!r} ({type(selection).__name__}) from "
            "sample(); it must return a Selection"
        )
    ids = selection.ids
    if ids.size and (ids[0] < 0 or ids[-1] >= n or (np.diff(ids) <= 0).any()):
        outside = ids[(ids < 0) | (ids >= n)]
        raise RuntimeError(
            f"sampler {sampler!r} selected client ids {ids.tolist()}"
            + (f" ({outside.tolist()} outside)" if outside.size else "")
            + f"; allowed: distinct ids among 0..{n - 1} (n={n}) in increasing order"
        )
    return selection


def check_available_selection(selection: Selection, available: np.ndarray | None) -> Selection:
    """``selection``, after checking that it holds available clients only."""
    if available is not None and selection.ids.size and not available[selection.ids].all():
        away = selection.ids[~available[selection.ids]]
        raise RuntimeError(f"the sampler selected unavailable clients {away.tolist()}")
    return selection


class LossProbe(Protocol):
    """The trainer's view of the clients' losses at the current global model.

    ``probe(ids, samples)`` returns, per client in ``ids``, the mean and the root mean square of
    the per-sample losses of the current global model on (up to) ``samples`` of the client's
    training samples (a seeded subset, the same every round; None: all of them). ``free=True``
    marks losses the clients compute anyway while they train (a participant's training loss):
    the trainer does not count them as extra evaluations.
    """

    def __call__(
        self, ids: np.ndarray, samples: int | None = None, *, free: bool = False
    ) -> tuple[np.ndarray, np.ndarray]: ...


class Sampler(ABC):
    """A client selection policy with its own random generator.

    ``sample()`` draws the next round. Two samplers built with the same arguments and seed
    produce the same sequence of selections. An ``availability_aware`` sampler's ``sample``
    takes ``available`` (module docstring).
    """

    #: short machine name used in configs and cache keys, e.g. ``"markov_optimal"``
    name: str = "sampler"
    n: int
    #: whether ``sample(available)`` picks among the available clients of a round
    availability_aware: ClassVar[bool] = False
    #: whether the trainer must set :attr:`loss_probe` before the first round
    wants_losses: ClassVar[bool] = False
    #: whether the trainer calls :meth:`feedback_updates` after each round
    wants_updates: ClassVar[bool] = False
    #: set by the trainer for samplers that want losses (:class:`LossProbe`)
    loss_probe: LossProbe | None = None

    @abstractmethod
    def sample(self) -> Selection:
        """Select the clients of the next round and their aggregation weights."""

    def require_loss_probe(self) -> LossProbe:
        """The loss probe a sampler with ``wants_losses`` needs before :meth:`sample`."""
        if self.loss_probe is None:
            raise RuntimeError(
                f"sampler {self.name!r} needs the clients' losses: set its loss_probe (the "
                "trainer does so for samplers with wants_losses) before sample()"
            )
        return self.loss_probe

    def feedback(self, ids: np.ndarray, values: np.ndarray) -> None:  # noqa: B027
        """Receive per-client feedback after a round (e.g. update norms); ignored by default."""

    def feedback_updates(self, ids: np.ndarray, updates: np.ndarray) -> None:  # noqa: B027
        """Receive the selected clients' model updates theta_i - theta (one float64 row per id,
        flattened) after a round; only samplers with ``wants_updates`` get them."""

    def set_availability_rates(self, rates: np.ndarray) -> None:  # noqa: B027
        """Receive each client's long-run availability rate before the first round (the trainer
        passes its availability model's); only availability-calibrated policies use it."""

    def inform(self, values: np.ndarray) -> None:  # noqa: B027
        """Receive every client's feedback of the coming round before :meth:`sample`.

        Only full-information samplers use it (the trainer calls it in its
        ``full_information`` mode); ignored by default.
        """

    def config(self) -> dict:
        """The parameters that define this sampler (for cache keys and reports)."""
        return {"name": self.name, "n": self.n}

    @abstractmethod
    def state_dict(self) -> dict:
        """Everything needed to continue the exact same sequence of selections.

        Values are JSON-serialisable (ints, floats, strings, lists, dicts; arrays as lists), so
        that checkpoints never need pickle.
        """

    @abstractmethod
    def load_state_dict(self, state: dict) -> None:
        """Restore a state produced by :meth:`state_dict` of a sampler built the same way."""


def sizes_key(sizes: np.ndarray) -> str:
    """A compact, exact description of the dataset sizes for ``config()``."""
    if np.all(sizes == sizes[0]):
        return "equal"
    digest = hashlib.sha256(np.ascontiguousarray(sizes, dtype="<f8").tobytes()).hexdigest()
    return f"sha256:{digest}"


class SeededSampler(Sampler):
    """The base of every sampler here: its own generator ``generator(seed, "sampler")``, the
    round counter, ``config()`` and JSON checkpointing; a subclass adding state extends
    ``state_dict`` / ``load_state_dict`` (validating with :meth:`_check_state`)."""

    def __init__(self, n: int, seed: int) -> None:
        self.n = n
        self.seed = require_int("seed", seed, minimum=0)
        self._rng = generator(self.seed, "sampler")
        #: number of rounds sampled so far (the index of the next round)
        self.round = 0

    def config(self) -> dict:
        return {"name": self.name, "n": self.n, "seed": self.seed}

    def state_dict(self) -> dict:
        return {
            "name": self.name,
            "n": self.n,
            "round": self.round,
            "rng": self._rng.bit_generator.state,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._rng, self.round = self._check_state(state)

    def _check_state(self, state: Mapping[str, Any]) -> tuple[np.random.Generator, int]:
        """The generator and round of a state from ``state_dict()``; validated, not applied."""
        if not isinstance(state, Mapping):
            raise TypeError(f"state must be a dict from state_dict(), got {type(state).__name__}")
        missing = {"name", "n", "round", "rng"} - set(state)
        if missing:
            raise ValueError(f"state lacks the entries {sorted(missing)}")
        if state["name"] != self.name or state["n"] != self.n:
            raise ValueError(
                f"state of sampler {state['name']!r} with n={state['n']} cannot be loaded into "
                f"{self.name!r} with n={self.n}"
            )
        rng = generator(self.seed, "sampler")
        rng.bit_generator.state = state["rng"]  # validates the bit generator's name and fields
        return rng, require_int("state['round']", state["round"], minimum=0)


class SizeWeighted(SeededSampler):
    """Policies 1 and 2: a fixed budget of m per round over clients with dataset sizes d."""

    def __init__(self, sizes: Any, m: int, seed: int = 0) -> None:
        self.sizes = require_sizes("sizes", sizes)
        n, self.m = require_n_m(self.sizes.size, m)
        super().__init__(n, seed)

    def config(self) -> dict:
        return {**super().config(), "m": self.m, "sizes": sizes_key(self.sizes)}


class RandomWeighted(SizeWeighted):
    """Policy 1: m of n clients uniformly without replacement, w_i = d_i / sum_{j in S} d_j.

    Under availability: m of the available clients uniformly (all of them when fewer than m are
    available; none when nobody is).
    """

    name = "random"
    availability_aware = True

    def sample(self, available: np.ndarray | None = None) -> Selection:
        available = check_available(available, self.n)
        if available is None:  # the draws of every run cached before availability existed
            ids = np.sort(self._rng.choice(self.n, size=self.m, replace=False, shuffle=False))
        else:
            pool = np.flatnonzero(available)
            take = min(self.m, pool.size)
            ids = np.sort(
                pool[self._rng.choice(pool.size, size=take, replace=False, shuffle=False)]
            )
        d = self.sizes[ids]
        self.round += 1
        return Selection(ids, d / d.sum() if ids.size else d.astype(float))
