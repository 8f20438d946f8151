"""Federated training with partial participation on one machine (AoI paper, eqs 15-18).

One round t (0-based) of :class:`FederatedTrainer`:

1. the sampler returns the selected clients S and their weights w (a :class:`Selection`);
2. the algorithm (:mod:`aoi_fl.core.algorithms`; default FedAvg) gives each i in S its starting
   parameters (FedAvg: the global model, eq. 16) and per-round state;
3. every i in S runs its local steps with learning rate eta_t (eqs 17-18): ``local_epochs``
   epochs of mini-batch SGD (the AoI paper: 5 epochs of batch 50, eta_t = 0.1 * 0.998^t; the
   last mini-batch of an epoch is the remainder), or exactly ``local_steps`` steps (FedSUM,
   agnostic FedAvg's H), all selected clients batched by an engine (:mod:`aoi_fl.core.engines`);
4. the algorithm aggregates (FedAvg, eq. 15: theta = sum_{i in S} w_i theta_i);
5. the sampler gets feedback (by default the update norms ||theta_i - theta||_2).

Every ``eval_every`` rounds the global model is evaluated on the test set and, optionally, every
client's own training loss F_k is recorded (for the selection skew rho of the AoI paper, the
objectives of problem (3) of the agnostic-FedAvg paper, the FedSUM training loss).

With ``screen_samples`` (rounds to a target accuracy at a fraction of the evaluation cost), every
round until the target is first reached is screened on a fixed seeded subset of the test set, and
the full test set is evaluated in every round whose screen accuracy is within ``screen_margin``
of ``screen_target`` (and at the scheduled evaluations). The first round whose full-test
accuracy reaches the target is therefore found exactly unless the subset's accuracy falls more
than ``screen_margin`` below the full set's in that very round; the records let a caller check
that gap on every round where both were measured (:func:`screen_gaps`).

With an availability model (:mod:`aoi_fl.core.availability`) the trainer asks it, before step
1 of round t, who can take part, and the (availability-aware) sampler picks among those; the
number available is recorded per round (``available``). A sampler that ranks clients by their
loss (Power-of-d-Choice, Oort) gets the trainer's loss probe (:class:`LossProbe`): the loss of
the current global model on a fixed seeded subset of each asked client's samples; evaluations
beyond those clients would make while training are counted per round (``probed``, in samples).
A sampler that clusters clients by their updates gets them after each round.
``client_accuracy`` records, after the last round, every client's accuracy on its own samples
(the worst-served clients of a policy).

In the ``full_information`` mode (the K-Vib paper's metrics) *every* client trains from the
round's model before the sampler draws; the sampler may see all update norms
(:meth:`Sampler.inform`, used only by the full-information optimum), only the selected clients'
updates are aggregated, and a :class:`RoundRecorder` given to the trainer records what it
computes from every client's update each round (the K-Vib paper's costs and estimation errors,
the recorder it registers in ``registry.RECORDERS``). The selected clients' updates are the same
as without the mode (mini-batches depend only on (seed, round, client)), so it changes no
trajectory.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from torch import nn
from torch.func import functional_call
from tqdm import tqdm  # plain bars: tqdm.auto warns (with a machine path) without ipywidgets

from aoi_fl.core.algorithms import Algorithm, ClientUpdates, FedAvg, update_norms
from aoi_fl.core.device import eval_batch_size, memory_hint, resolve_device
from aoi_fl.core.engines import (
    ENGINES,
    LOSSES,
    LocalTraining,
    local_batches,
    local_step_batches,
    single_linear,
)
from aoi_fl.core.seeding import generator
from aoi_fl.core.selection import (
    Sampler,
    Selection,
    check_available_selection,
    check_selection_ids,
)
from aoi_fl.core.tensors import Params, TensorSplit
from aoi_fl.core.validation import require_choice, require_int, require_real

if TYPE_CHECKING:
    from aoi_fl.core.availability import Availability

# ---------------------------------------------------------------------------------------------
# Learning-rate schedules: callables round -> lr with a config() for cache keys


class _Schedule:
    """eta_t = ``self(t)``; :meth:`config` (its name and fields) keys the runs that use it."""

    name: ClassVar[str]

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # every parameter of a schedule is a positive real
            require_real(f.name, getattr(self, f.name), minimum=0.0, strict_minimum=True)

    def config(self) -> dict:
        return {"name": self.name, **dataclasses.asdict(self)}

    def first_outside(self, low: float, high: float, rounds: int) -> tuple[int, float] | None:
        """The first (round t, eta_t) of rounds 0..rounds-1 with eta_t outside [low, high], or
        None. Every schedule here is non-increasing in t, so this bisects: O(log rounds) rates
        whatever the number of rounds."""
        if rounds == 0:
            return None
        first = float(self(0))
        if not low <= first <= high:
            return 0, first
        if float(self(rounds - 1)) >= low:
            return None
        inside, below = 0, rounds - 1
        while below - inside > 1:
            middle = (inside + below) // 2
            inside, below = (middle, below) if float(self(middle)) >= low else (inside, middle)
        return below, float(self(below))


@dataclass(frozen=True)
class ExponentialDecay(_Schedule):
    """eta_t = lr0 * decay^t (the AoI paper: lr0 = 0.1, decay = 0.998)."""

    name = "exponential"

    lr0: float = 0.1
    decay: float = 0.998

    def __post_init__(self) -> None:
        super().__post_init__()
        require_real("decay", self.decay, maximum=1.0)

    def __call__(self, t: int) -> float:
        return self.lr0 * self.decay**t


@dataclass(frozen=True)
class InverseSqrtDecay(_Schedule):
    """eta_t = lr0 / sqrt(t / period + 1) (the FedSUM experiments: period 10)."""

    name = "inverse_sqrt"

    lr0: float = 0.01
    period: float = 10.0

    def __call__(self, t: int) -> float:
        return self.lr0 / math.sqrt(t / self.period + 1.0)


@dataclass(frozen=True)
class ConstantLR(_Schedule):
    """eta_t = lr."""

    name = "constant"

    lr: float = 0.1

    def __call__(self, t: int) -> float:
        return self.lr


#: schedule name -> class (every one a non-increasing :class:`_Schedule`)
LR_SCHEDULES: dict[str, Callable[..., _Schedule]] = {
    "exponential": ExponentialDecay,
    "inverse_sqrt": InverseSqrtDecay,
    "constant": ConstantLR,
}


# ---------------------------------------------------------------------------------------------
# Evaluation


def _batched_outputs(
    model: nn.Module, params: Params, split: TensorSplit, batch_size: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    with torch.no_grad():
        for lo in range(0, len(split), batch_size):
            x, y = split.x[lo : lo + batch_size], split.y[lo : lo + batch_size]
            yield functional_call(model, params, (x,)), y


#: how many runs' single linear layer (softmax or linear regression) one evaluation product
#: holds: always this many (a group with fewer runs is padded with zero models), so that the
#: product has one shape, and a run's outputs one kernel, whatever runs are evaluated with it (a
#: run alone is a group of one run and three zero models). The outputs come classes first
#: (classes x samples), where the softmax runs along the samples: PyTorch's cross-entropy of a
#: (500, 10) block took 16x as long as a log-softmax over the classes of its (10, 500) transpose
#: on the 2-core machine. Measured there (Fashion-MNIST's 10,000 test images, 784 -> 10, two
#: threads; ms per run and evaluation, alone / in a batch of 32 runs): groups of 1: 7.8 / 7.2,
#: 2: 9.0 / 4.0, 4: 9.4 / 2.3, 8: 14.4 / 1.6, 16: 20.0 / 1.3. Four keeps a run alone about as
#: fast as before batching existed (one product of its own) and a batch 3x faster
EVAL_GROUP = 4


def _grouped_linear_sums(
    layer: str,
    params: Sequence[Params],
    split: TensorSplit,
    loss: str,
    batch_size: int,
) -> list[tuple[float, int]]:
    """(sum of the per-sample losses, correct predictions) of each run of a single-linear model,
    one product per group of :data:`EVAL_GROUP` runs and batch of ``split``."""
    out: list[tuple[float, int]] = []
    for lo in range(0, len(params), EVAL_GROUP):
        group = params[lo : lo + EVAL_GROUP]
        weight = split.x.new_zeros((EVAL_GROUP, *group[0][f"{layer}.weight"].shape))
        bias = weight.new_zeros(weight.shape[:2])
        for r, p in enumerate(group):
            weight[r] = p[f"{layer}.weight"]
            if f"{layer}.bias" in p:
                bias[r] = p[f"{layer}.bias"]
        classes = weight.shape[1]
        totals = torch.zeros(EVAL_GROUP, dtype=torch.float64, device=split.x.device)
        correct = torch.zeros(EVAL_GROUP, dtype=torch.int64, device=split.x.device)
        with torch.no_grad():
            for b in range(0, len(split), batch_size):
                x, y = split.x[b : b + batch_size].flatten(1), split.y[b : b + batch_size]
                # (group, classes, samples): every run's outputs, classes first
                o = torch.addmm(bias.view(-1, 1), weight.flatten(0, 1), x.t())
                o = o.view(EVAL_GROUP, classes, -1)
                if loss == "cross_entropy":
                    target = y.view(1, 1, -1).expand(EVAL_GROUP, 1, -1)
                    per_sample = -o.log_softmax(dim=1).gather(1, target).squeeze(1)
                    # max's indices are argmax's (the first maximum), 10x faster on this layout
                    correct += (o.max(dim=1).indices == y).sum(dim=1)
                else:  # the squared error of the one output (the mean over one output is exact)
                    per_sample = (o.squeeze(1) - y.to(o.dtype)).square()
                totals += per_sample.to(torch.float64).sum(dim=1)
        out.extend(zip(totals.tolist()[: len(group)], correct.tolist()[: len(group)], strict=True))
    return out


def evaluate_many(
    model: nn.Module,
    params: Sequence[Params],
    split: TensorSplit,
    loss: str = "cross_entropy",
    batch_size: int = 500,
) -> list[tuple[float, float | None]]:
    """:func:`evaluate` of several parameter sets of one ``model`` on one ``split``, each batch
    of the split read once for all of them. Each run's numbers are those of :func:`evaluate` of
    its parameters alone, bit for bit: a single-linear model's runs share products of one fixed
    shape (:data:`EVAL_GROUP`), any other model runs each run's own forward pass."""
    loss_fn = LOSSES[require_choice("loss", loss, LOSSES)]
    layer = single_linear(model)
    if layer is not None:
        sums = _grouped_linear_sums(layer, params, split, loss, batch_size)
    else:
        sums = [(0.0, 0)] * len(params)
        with torch.no_grad():
            for lo in range(0, len(split), batch_size):
                x, y = split.x[lo : lo + batch_size], split.y[lo : lo + batch_size]
                for r, p in enumerate(params):
                    o = functional_call(model, p, (x,))
                    total = float(loss_fn(o, y).to(torch.float64).sum())
                    hits = int((o.argmax(dim=1) == y).sum()) if loss == "cross_entropy" else 0
                    sums[r] = (sums[r][0] + total, sums[r][1] + hits)
    n = len(split)
    return [(t / n, (c / n if loss == "cross_entropy" else None)) for t, c in sums]


def evaluate(
    model: nn.Module,
    params: Params,
    split: TensorSplit,
    loss: str = "cross_entropy",
    batch_size: int = 500,
) -> tuple[float, float | None]:
    """Mean loss and accuracy of ``model`` with ``params`` on ``split`` (accuracy None for mse).

    A single-linear model is evaluated as a group of :data:`EVAL_GROUP` runs
    (:func:`evaluate_many`)."""
    return evaluate_many(model, [params], split, loss, batch_size)[0]


def per_sample_losses(
    model: nn.Module,
    params: Params,
    split: TensorSplit,
    loss: str = "cross_entropy",
    batch_size: int = 500,
) -> torch.Tensor:
    """The loss of every sample of ``split`` under ``params`` (1-d tensor, split order)."""
    loss_fn = LOSSES[require_choice("loss", loss, LOSSES)]
    parts = [loss_fn(out, y) for out, y in _batched_outputs(model, params, split, batch_size)]
    return torch.cat(parts) if parts else torch.zeros(0)


def screen_pairs(history: Mapping[str, list]) -> tuple[np.ndarray, np.ndarray]:
    """(full-test, screen) accuracy on every round where both were measured (screened runs)."""
    screen = history["screen_accuracy"]  # entry t - 1 belongs to round t
    full = dict(zip(history["eval_round"], history["test_accuracy"], strict=True))
    both = [(full[t], a) for t, a in enumerate(screen, start=1) if a is not None and t in full]
    return np.array([f for f, _ in both]), np.array([a for _, a in both])


def screen_gaps(history: Mapping[str, list]) -> np.ndarray:
    """Full-test minus screen accuracy on every round where both were measured (screened runs).

    The first crossing of the target can be missed only in a round where this gap exceeds the
    screening margin, so its maximum over a run is the check that none was.
    """
    full, screen = screen_pairs(history)
    return full - screen


def rounds_to_target(
    accuracy: Sequence[float | None] | Mapping[int, float | None],
    target: float,
    rounds: Sequence[int] | None = None,
) -> int | None:
    """The first round whose accuracy reaches ``target``, or None if none does.

    ``accuracy`` is a mapping round -> accuracy, or a sequence whose entries belong to
    ``rounds`` (default 1, 2, ...). Missing values (None) never reach the target.
    """
    target = require_real("target", target)
    if isinstance(accuracy, Mapping):
        rounds, accuracy = list(accuracy.keys()), list(accuracy.values())
    elif rounds is None:
        rounds = range(1, len(accuracy) + 1)
    if len(rounds) != len(accuracy):
        raise ValueError(f"rounds has {len(rounds)} entries but accuracy has {len(accuracy)}")
    reached = [r for r, a in zip(rounds, accuracy, strict=True) if a is not None and a >= target]
    return int(min(reached)) if reached else None


# ---------------------------------------------------------------------------------------------
# The federated trainer


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
    that many steps (:func:`engines.local_step_batches`).
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
    #: train every client every round and record the K-Vib metrics (module docstring); needs a
    #: sampler whose selections carry probabilities (the K-Vib paper's unbiased samplers)
    full_information: bool = False
    #: record each round's selected ids, weights and update norms (off: scalar records only,
    #: which keeps long grids of cached results small)
    record_clients: bool = True
    #: size of the fixed test subset that screens every round for the target (0: off; see the
    #: module docstring); the full test set is evaluated when the screen is within the margin
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


def _subset(everyone: ClientUpdates, selection: Selection, device: torch.device) -> ClientUpdates:
    """The selected clients' part of every client's updates (``everyone.ids`` = 0..n-1)."""
    rows = torch.from_numpy(selection.ids).to(device)

    def take(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {k: v.index_select(0, rows) for k, v in tensors.items()}

    return ClientUpdates(
        everyone.t,
        everyone.lr,
        selection.ids,
        selection.weights,
        take(everyone.start),
        take(everyone.params),
        take(everyone.state),
        everyone.steps[selection.ids],
    )


@dataclass
class RoundWork:
    """One run's local training of a round, between :meth:`FederatedTrainer.begin_round` and
    :meth:`FederatedTrainer.end_round`: the clients' ids, aggregation weights, mini-batches
    (:meth:`FederatedTrainer.client_schedule`), starting parameters and per-round state, and
    the selection (None in the ``full_information`` mode, where it follows the training)."""

    t: int
    lr: float
    ids: np.ndarray
    weights: np.ndarray
    schedules: list[np.ndarray]
    start: Params
    state: dict[str, torch.Tensor]
    selection: Selection | None = None

    def updates(self, params: Params, state: dict[str, torch.Tensor]) -> ClientUpdates:
        """The clients' returns once their local steps ended in ``params`` and ``state``."""
        steps = np.array([len(s) for s in self.schedules], dtype=np.int64)
        return ClientUpdates(
            self.t, self.lr, self.ids, self.weights, self.start, params, state, steps
        )


@dataclass
class FederatedTrainer:
    """Federated training with partial participation; ``run()`` trains, ``history`` records.

    ``history`` (JSON-serialisable): per round ``lr``, ``selected`` (ids), ``weights`` and
    ``update_norms`` (||theta_i - theta||_2, also the sampler's feedback by default); per
    evaluation ``eval_round`` (0 = the initial model), ``test_loss`` and ``test_accuracy`` of
    the reported model (:meth:`reported_params`: the global model unless the algorithm reports
    e.g. an averaged iterate) and, with ``client_loss_samples``, ``client_losses`` (F_k of that
    model for every client k), every ``eval_every`` rounds and after the last round. The
    ``full_information`` mode adds the ``recorder``'s keys, one value per round; without
    ``record_clients`` the per-client lists stay empty.

    ``device`` (:mod:`aoi_fl.core.device`; default ``$AOI_FL_DEVICE`` or ``auto``) is where the
    model, the data (moved once, here), the algorithm's state and evaluation live; the sampler
    and every record stay on the CPU.
    """

    model: nn.Module
    data: FederatedData
    sampler: Sampler
    settings: TrainSettings
    lr_schedule: Callable[[int], float] = field(default_factory=ExponentialDecay)
    algorithm: Algorithm = field(default_factory=FedAvg)
    feedback: Callable[[Params, ClientUpdates], np.ndarray] = update_norms
    #: used in the ``full_information`` mode only (the trainer imports no paper's metrics)
    recorder: RoundRecorder | None = None
    device: torch.device | str | None = None
    #: who can take part in each round (None: everyone, the papers' setting)
    availability: Availability | None = None

    def __post_init__(self) -> None:
        n = len(self.data.partition)
        if self.sampler.n != n:
            raise ValueError(f"sampler has n={self.sampler.n} clients but the partition has {n}")
        if self.availability is not None:
            if self.availability.n != n:
                raise ValueError(
                    f"availability model has n={self.availability.n} clients but the partition "
                    f"has {n}"
                )
            if not self.sampler.availability_aware:
                raise ValueError(
                    f"sampler {self.sampler.name!r} cannot select under an availability model "
                    "(it is not availability aware)"
                )
            if self.settings.full_information:
                raise ValueError("the full_information mode trains every client: no availability")
            self.sampler.set_availability_rates(self.availability.long_run_rates())
        if self.sampler.wants_losses:
            self.sampler.loss_probe = self.probe_losses
            self._probed = 0
        self.device = resolve_device(None if self.device is None else str(self.device))
        self.eval_batch_size = eval_batch_size(self.device)
        self.model.to(self.device)
        self.data = dataclasses.replace(
            self.data, train=self.data.train.to(self.device), test=self.data.test.to(self.device)
        )
        self.local = LocalTraining(
            self.model,
            self.settings.loss,
            self.settings.engine,
            self.settings.client_chunk,
            device=self.device,
        )
        self.params: Params = {k: v.detach().clone() for k, v in self.model.named_parameters()}
        self.algorithm.setup(len(self.data.partition), self.params)
        self.round = 0
        self.history: dict[str, list] = {key: [] for key in self._history_keys()}

    def _history_keys(self) -> tuple[str, ...]:
        s = self.settings
        return (
            HISTORY_KEYS
            + (self.recorder.keys if s.full_information and self.recorder else ())
            + (SCREEN_KEYS if s.screen_samples else ())
            + ((AVAILABILITY_KEY,) if self.availability is not None else ())
            + ((PROBE_KEY,) if self.sampler.wants_losses else ())
            + ((CLIENT_ACCURACY_KEY,) if s.client_accuracy else ())
        )

    def client_schedule(self, t: int, client: int) -> np.ndarray:
        """Client ``client``'s mini-batches in round t (rows of training-set indices; -1 pads)."""
        s = self.settings
        idx = np.asarray(self.data.partition[client], dtype=np.int64)
        if s.local_steps is not None:
            return idx[local_step_batches(s.seed, t, client, idx.size, s.local_steps, s.batch_size)]
        rows = local_batches(s.seed, t, client, idx.size, s.local_epochs, s.batch_size)
        return np.where(rows >= 0, idx[np.maximum(rows, 0)], -1)

    def reported_params(self) -> Params:
        """The model the algorithm reports after the rounds so far: what is evaluated and what
        a run returns (the global model, or e.g. Algorithm 1's averaged iterate,
        :meth:`Algorithm.reported_params`)."""
        return self.algorithm.reported_params(self.params)

    def evaluate(self) -> tuple[float, float | None]:
        return self._evaluate_on(self.data.test)

    def _evaluate_on(self, split: TensorSplit) -> tuple[float, float | None]:
        with memory_hint(self.device):
            return evaluate(
                self.model, self.reported_params(), split, self.settings.loss, self.eval_batch_size
            )

    def client_loss_counts(self) -> np.ndarray:
        """How many samples of each client its loss subset holds (client order)."""
        k = self.settings.client_loss_samples
        return np.array([min(len(idx), k) for idx in self.data.partition], dtype=np.int64)

    def client_loss_indices(self) -> np.ndarray:
        """Indices into the training set of the per-client loss subsets, client after client.

        Each client's subset is a seeded sample of ``client_loss_samples`` of its samples (all of
        them when it has no more), the same for every evaluation.
        """
        k = self.settings.client_loss_samples
        parts = []
        for i, idx in enumerate(self.data.partition):
            idx = np.asarray(idx, dtype=np.int64)
            take = generator(self.settings.seed, "client_loss_subset", i).permutation(idx.size)
            parts.append(idx[np.sort(take[:k])])
        return np.concatenate(parts)

    def client_loss_split(self) -> TensorSplit:
        """The samples on which per-client losses are measured (see client_loss_indices)."""
        flat = torch.from_numpy(self.client_loss_indices()).to(self.device)
        return TensorSplit(self.data.train.x[flat], self.data.train.y[flat])

    def client_losses(self, params: Params | None = None) -> list[float]:
        """F_k of ``params`` (default: the reported model, :meth:`reported_params`) for every
        client k, on its loss subset."""
        if self.settings.client_loss_samples == 0:
            raise ValueError("client_losses needs TrainSettings(client_loss_samples > 0)")
        if not hasattr(self, "_loss_owner"):
            counts = self.client_loss_counts()
            flat = self.client_loss_indices()
            owner = np.repeat(np.arange(len(counts)), counts)
            if np.array_equal(np.sort(flat), np.arange(len(self.data.train))):
                # every training sample is in some subset: evaluate the training set in place
                # (no copy of it), each sample's loss going to its owner
                self._loss_split = self.data.train
                by_position = np.empty(len(flat), dtype=np.int64)
                by_position[flat] = owner
                owner = by_position
            else:
                self._loss_split = self.client_loss_split()
            self._loss_owner = torch.from_numpy(owner)
            self._loss_counts = torch.tensor(counts, dtype=torch.float64)
        params = self.reported_params() if params is None else params
        with memory_hint(self.device):
            per_sample = per_sample_losses(
                self.model, params, self._loss_split, self.settings.loss, self.eval_batch_size
            )
        sums = torch.zeros(len(self._loss_counts), dtype=torch.float64)
        sums.index_add_(0, self._loss_owner, per_sample.double().cpu())
        return (sums / self._loss_counts).tolist()

    def probe_losses(
        self, ids: np.ndarray, samples: int | None = None, *, free: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """The sampler's :class:`LossProbe`: per client of ``ids``, the mean and the root mean
        square of the per-sample losses of the current global model on (up to) ``samples`` of
        its training samples (a seeded subset, fixed for the run; None: all of them)."""
        ids = np.asarray(ids, dtype=np.int64)
        if samples is not None:
            require_int("samples", samples, minimum=1)
        rows = [self._probe_rows(int(i), samples) for i in ids]
        counts = np.array([r.size for r in rows], dtype=np.int64)
        if not counts.sum():
            return np.zeros(ids.size), np.zeros(ids.size)
        flat = torch.from_numpy(np.concatenate(rows)).to(self.device)
        split = TensorSplit(self.data.train.x[flat], self.data.train.y[flat])
        with memory_hint(self.device):
            per_sample = per_sample_losses(
                self.model, self.params, split, self.settings.loss, self.eval_batch_size
            )
        losses = per_sample.double().cpu().numpy()
        owner = np.repeat(np.arange(ids.size), counts)
        denominator = np.maximum(counts, 1)
        mean = np.bincount(owner, losses, minlength=ids.size) / denominator
        rms = np.sqrt(np.bincount(owner, losses**2, minlength=ids.size) / denominator)
        if not free:
            self._probed += int(counts.sum())
        return mean, rms

    def _probe_rows(self, client: int, samples: int | None) -> np.ndarray:
        idx = np.asarray(self.data.partition[client], dtype=np.int64)
        if samples is None or samples >= idx.size:
            return idx
        take = generator(self.settings.seed, "loss_probe", client).permutation(idx.size)
        return idx[np.sort(take[:samples])]

    def client_accuracies(self) -> list[float]:
        """Every client's accuracy of the reported model on all of its own training samples."""
        with memory_hint(self.device):
            outputs = _batched_outputs(
                self.model, self.reported_params(), self.data.train, self.eval_batch_size
            )
            hits = torch.cat([(out.argmax(1) == y) for out, y in outputs]).cpu().numpy()
        # each client counts its own samples (a sample of no client, or of two, is no problem)
        correct = np.array(
            [hits[np.asarray(idx, dtype=np.int64)].sum() for idx in self.data.partition],
            dtype=np.float64,
        )
        return (correct / np.maximum(self.data.sizes, 1)).tolist()

    def screen_split(self) -> TensorSplit:
        """The fixed seeded subset of the test set that screens for the target."""
        if not hasattr(self, "_screen"):
            test = self.data.test
            take = generator(self.settings.seed, "screen").permutation(len(test))
            rows = torch.from_numpy(np.sort(take[: self.settings.screen_samples])).to(self.device)
            self._screen = TensorSplit(test.x[rows], test.y[rows])
        return self._screen

    def _target_reached(self) -> bool:
        target = self.settings.screen_target
        return any(a is not None and a >= target for a in self.history["test_accuracy"])

    def record_evaluation(
        self, *, scheduled: bool = True, result: tuple[float, float | None] | None = None
    ) -> None:
        """Record the reported model's test loss and accuracy (``result`` if it was computed
        already, e.g. among a batch of runs) and, at scheduled evaluations, the clients' losses."""
        loss, accuracy = self.evaluate() if result is None else result
        h = self.history
        h["eval_round"].append(self.round)
        h["test_loss"].append(loss)
        h["test_accuracy"].append(accuracy)
        if self.settings.client_loss_samples and scheduled:
            h["client_losses"].append(self.client_losses())
            if self.settings.screen_samples:
                h["client_loss_round"].append(self.round)

    def _scheduled(self) -> bool:
        return self.round % self.settings.eval_every == 0 or self.round == self.settings.rounds

    def screen_due(self) -> bool:
        """Whether the round just trained is screened on the test subset (module docstring)."""
        return bool(self.settings.screen_samples) and not self._target_reached()

    def screen_accuracy(self) -> float | None:
        """The reported model's accuracy on the screening subset (:meth:`screen_split`)."""
        return self._evaluate_on(self.screen_split())[1]

    def test_due(self, screen: float | None) -> bool:
        """Whether the round just trained is evaluated on the whole test set, given its screen
        accuracy (None: not screened)."""
        s = self.settings
        near = screen is not None and screen >= s.screen_target - s.screen_margin
        return self._scheduled() or (bool(s.screen_samples) and near)

    def record_round_evaluations(
        self, screen: float | None, result: tuple[float, float | None] | None
    ) -> None:
        """Record the round's screen accuracy (screened runs) and test evaluation (``result``,
        None if :meth:`test_due` said none), and after the last round the clients'
        accuracies."""
        if self.settings.screen_samples:
            self.history["screen_accuracy"].append(screen)
        if result is not None:
            self.record_evaluation(scheduled=self._scheduled(), result=result)
        if self.settings.client_accuracy and self.round == self.settings.rounds:
            self.history[CLIENT_ACCURACY_KEY].append(self.client_accuracies())

    def _evaluate_after_round(self) -> None:
        screen = self.screen_accuracy() if self.screen_due() else None
        result = self.evaluate() if self.test_due(screen) else None
        self.record_round_evaluations(screen, result)

    def initial_evaluation_due(self) -> bool:
        """Whether the initial model is still to be evaluated (before the first round)."""
        return not self.history["eval_round"]

    def _evaluate_initial_model(self) -> None:
        if self.initial_evaluation_due():
            self.record_evaluation()

    def prepare_training(
        self, t: int, lr: float, ids: np.ndarray, weights: np.ndarray
    ) -> RoundWork:
        """Round t's local training of clients ``ids`` (aggregation weights ``weights``), not yet
        run: their mini-batches, starting parameters and per-round state."""
        schedules = [self.client_schedule(t, int(i)) for i in ids]
        start, state = self.algorithm.client_start(t, ids, self.params, lr)
        return RoundWork(t, lr, np.asarray(ids), np.asarray(weights), schedules, start, state)

    def train_locally(self, work: RoundWork) -> tuple[Params, dict[str, torch.Tensor]]:
        """The clients' final parameters and per-round state after ``work``'s local steps."""
        with memory_hint(self.device):
            params = self.local(
                work.start,
                self.data.train,
                work.schedules,
                work.lr,
                self.algorithm.local_step,
                work.state,
            )
        return params, work.state

    def _train(self, t: int, lr: float, ids: np.ndarray, weights: np.ndarray) -> ClientUpdates:
        """Round t's local training of clients ``ids`` (aggregation weights ``weights``)."""
        work = self.prepare_training(t, lr, ids, weights)
        return work.updates(*self.train_locally(work))

    def _checked(self, selection: Any) -> Selection:
        # a user's sampler may select anything: a clear error instead of NumPy's in training
        return check_selection_ids(selection, len(self.data.partition), self.sampler.name)

    def begin_round(self) -> RoundWork:
        """The first half of a round: the initial evaluation if due, the selection (in the
        ``full_information`` mode: everyone, the selection comes after training) and the local
        training it asks for, prepared but not run (:meth:`train_locally`)."""
        self._evaluate_initial_model()
        t = self.round
        lr = float(self.lr_schedule(t))
        if self.settings.full_information:
            n = len(self.data.partition)
            return self.prepare_training(t, lr, np.arange(n), np.zeros(n))
        h = self.history
        if self.sampler.wants_losses:
            self._probed = 0
        if self.availability is None:
            selection = self._checked(self.sampler.sample())
        else:
            available = self.availability.mask(t)
            selection = check_available_selection(
                self._checked(self.sampler.sample(available)), available
            )
            h[AVAILABILITY_KEY].append(int(available.sum()))
        if self.sampler.wants_losses:
            h[PROBE_KEY].append(self._probed)
        work = self.prepare_training(t, lr, selection.ids, selection.weights)
        work.selection = selection
        return work

    def end_round(
        self, work: RoundWork, client_params: Params, state: dict[str, torch.Tensor]
    ) -> None:
        """The second half of a round, after its local training: (in the ``full_information``
        mode, the selection,) aggregation, feedback and the round's records; evaluations are
        left to :meth:`record_round_evaluations`."""
        h = self.history
        trained = work.updates(client_params, state)
        if work.selection is None:  # the full_information mode: everyone trained
            all_norms = np.asarray(self.feedback(self.params, trained), dtype=np.float64)
            self.sampler.inform(all_norms)
            selection = self._checked(self.sampler.sample())
            updates, norms = _subset(trained, selection, self.device), all_norms[selection.ids]
            if self.recorder is not None:
                deltas = torch.cat([v.flatten(1) for v in trained.deltas().values()], dim=1)
                sizes = self.data.sizes.astype(np.float64)
                record = self.recorder.record(
                    selection, deltas.double().cpu().numpy(), sizes / sizes.sum()
                )
                for key in self.recorder.keys:
                    h[key].append(record[key])
        else:
            selection, updates = work.selection, trained
            norms = np.asarray(self.feedback(self.params, updates), dtype=np.float64)
            if self.sampler.wants_updates:
                deltas = torch.cat([v.flatten(1) for v in updates.deltas().values()], dim=1)
                self.sampler.feedback_updates(selection.ids, deltas.double().cpu().numpy())
        self.params = self.algorithm.aggregate(self.params, updates)
        self.sampler.feedback(selection.ids, norms)
        self.round = work.t + 1
        h["lr"].append(work.lr)
        if self.settings.record_clients:
            h["selected"].append(selection.ids.tolist())
            h["weights"].append(selection.weights.tolist())
            if self.settings.record_norms:
                h["update_norms"].append(norms.tolist())

    def run_round(self) -> None:
        """One round: select, train locally, aggregate, feed back (and evaluate if due)."""
        work = self.begin_round()
        self.end_round(work, *self.train_locally(work))
        self._evaluate_after_round()

    def run(
        self,
        *,
        progress: bool = False,
        on_round: Callable[[FederatedTrainer], None] | None = None,
    ) -> dict[str, list]:
        """Train up to ``settings.rounds`` (from the current round); return ``history``."""
        self._evaluate_initial_model()
        with tqdm(
            total=self.settings.rounds,
            initial=self.round,
            disable=not progress,
            desc=f"{self.sampler.name}",
            unit="round",
        ) as bar:
            while self.round < self.settings.rounds:
                self.run_round()
                if on_round is not None:
                    on_round(self)
                bar.update(1)
                if self.history["eval_round"][-1] == self.round:
                    bar.set_postfix(acc=self.history["test_accuracy"][-1], refresh=False)
        return self.history

    def state_dict(self) -> tuple[dict[str, torch.Tensor], dict]:
        """(tensors, JSON state): everything needed to continue the exact same run."""
        tensors = {f"params.{k}": v for k, v in self.params.items()}
        tensors.update({f"algorithm.{k}": v for k, v in self.algorithm.state_dict().items()})
        state = {"round": self.round, "sampler": self.sampler.state_dict(), "history": self.history}
        return tensors, copy.deepcopy(state)

    def load_state_dict(self, tensors: Mapping[str, torch.Tensor], state: Mapping) -> None:
        groups: dict[str, dict[str, torch.Tensor]] = {"params": {}, "algorithm": {}}
        for name, value in tensors.items():
            group, _, key = name.partition(".")
            if group not in groups:
                raise ValueError(f"unexpected tensor {name!r} in the checkpoint")
            groups[group][key] = value
        if set(groups["params"]) != set(self.params) or any(
            groups["params"][k].shape != v.shape for k, v in self.params.items()
        ):
            raise ValueError("checkpoint parameters do not match the model")
        if set(state.get("history", {})) != set(self._history_keys()):
            raise ValueError("checkpoint history does not have the expected records")
        done = require_int("round", state["round"], minimum=0)
        recorded = len(state["history"]["lr"])  # one learning rate per round trained
        if done > self.settings.rounds or recorded != done:
            raise ValueError(
                f"checkpoint of round {done} with {recorded} rounds recorded does not fit a run "
                f"of {self.settings.rounds} rounds"
            )
        self.algorithm.load_state_dict(groups["algorithm"])
        self.sampler.load_state_dict(state["sampler"])
        # .to() with copy: a checkpoint from any device resumes here (a clone where it matches)
        self.params = {k: v.to(self.device, copy=True) for k, v in groups["params"].items()}
        self.round = done
        self.history = copy.deepcopy(dict(state["history"]))
