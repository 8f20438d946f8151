"""What a training run is given and what it records: the clients' data, the hyper-parameters,
the full-information recorder and the names of the history's records."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aoi_fl.core.engines import ENGINES
from aoi_fl.core.losses import LOSSES
from aoi_fl.core.selection import Selection
from aoi_fl.core.tensors import TensorSplit
from aoi_fl.core.validation import require_choice, require_int, require_real


@dataclass(frozen=True)
class FederatedData:
    """Training samples split over clients (``partition[i]``: client i's indices) and a test set."""

    train: TensorSplit
    test: TensorSplit
    partition: Sequence[np.ndarray]

    def __post_init__(self) -> None:
        n = len(self.train)
        for i, idx in enumerate(self.partition):
            idx = np.asarray(idx)
            if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
                raise ValueError(f"partition[{i}] must be a 1-d integer array, got {idx.dtype}")
            if idx.size and (idx.min() < 0 or idx.max() >= n):
                raise ValueError(f"partition[{i}] has indices outside [0, {n})")

    @property
    def sizes(self) -> np.ndarray:
        return np.array([len(idx) for idx in self.partition], dtype=np.int64)


@dataclass(frozen=True)
class TrainSettings:
    """Hyper-parameters of a training run (the AoI paper's: 5 local epochs of batch 50).

    ``local_steps``, when set, replaces ``local_epochs``: every selected client takes exactly
    that many steps (:func:`~aoi_fl.core.minibatches.local_step_batches`).
    """

    rounds: int
    local_epochs: int = 5
    local_steps: int | None = None
    batch_size: int = 50
    seed: int = 0
    eval_every: int = 1
    loss: str = "cross_entropy"
    engine: str = "auto"
    client_chunk: int | None = None
    #: at each evaluation also record every client's training loss F_k of the global model on
    #: (up to) this many of its samples (0: off); needed for the selection skew rho (eq. 24)
    client_loss_samples: int = 0
    #: train every client every round and record the K-Vib metrics (:mod:`aoi_fl.core.train`);
    #: needs a sampler whose selections carry probabilities (the K-Vib paper's unbiased
    #: samplers)
    full_information: bool = False
    #: record each round's selected ids, weights and update norms (off: scalar records only,
    #: which keeps long grids of cached results small)
    record_clients: bool = True
    #: size of the fixed test subset that screens every round for the target (0: off; see
    #: :mod:`aoi_fl.core.train`); the full test set is evaluated when the screen is within
    #: the margin
    screen_samples: int = 0
    screen_target: float = 0.0
    screen_margin: float = 0.015
    #: after the last round, record every client's accuracy on its own training samples
    client_accuracy: bool = False
    #: False: with ``record_clients``, the update norms are not recorded (they are still fed
    #: back to the sampler); the selections and weights are
    record_norms: bool = True

    def __post_init__(self) -> None:
        for name in ("full_information", "record_clients", "client_accuracy", "record_norms"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        require_int("rounds", self.rounds, minimum=0)
        require_int("client_loss_samples", self.client_loss_samples, minimum=0)
        require_int("local_epochs", self.local_epochs, minimum=1)
        if self.local_steps is not None:
            require_int("local_steps", self.local_steps, minimum=1)
        require_int("batch_size", self.batch_size, minimum=1)
        require_int("seed", self.seed, minimum=0)
        require_int("eval_every", self.eval_every, minimum=1)
        require_choice("loss", self.loss, LOSSES)
        require_choice("engine", self.engine, ENGINES)
        if self.client_chunk is not None:
            require_int("client_chunk", self.client_chunk, minimum=1)
        require_int("screen_samples", self.screen_samples, minimum=0)
        if self.screen_samples:
            require_real("screen_target", self.screen_target, minimum=0.0, maximum=1.0)
            require_real("screen_margin", self.screen_margin, minimum=0.0, maximum=1.0)
            if self.loss != "cross_entropy":
                raise ValueError("screen_samples needs an accuracy: loss must be 'cross_entropy'")


HISTORY_KEYS = (
    "lr",
    "selected",
    "weights",
    "update_norms",
    "eval_round",
    "test_loss",
    "test_accuracy",
    "client_losses",
)


@dataclass(frozen=True)
class RoundRecorder:
    """A per-round hook of the ``full_information`` mode: ``record(selection, g, lam)`` gets
    the round's selection, every client's update g_i as a float64 row and the clients' weights
    lambda_i = d_i / sum_j d_j, and returns the values of ``keys`` for that round."""

    keys: tuple[str, ...]
    record: Callable[[Selection, np.ndarray, np.ndarray], Mapping[str, Any]]


#: records added by screening: the screen accuracy after each round (None once the target was
#: reached) and the rounds at which ``client_losses`` were taken (the scheduled evaluations only)
SCREEN_KEYS = ("screen_accuracy", "client_loss_round")
#: records added by an availability model (clients available per round), by a sampler that
#: probes losses (samples evaluated for selection per round) and by ``client_accuracy``
AVAILABILITY_KEY, PROBE_KEY, CLIENT_ACCURACY_KEY = "available", "probed", "client_accuracy"
