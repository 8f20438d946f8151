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
the recorder its entry point puts in ``registry.RECORDERS``). The selected clients' updates are
the same as without the mode (mini-batches depend only on (seed, round, client)), so it changes
no trajectory.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm  # plain bars: tqdm.auto warns (with a machine path) without ipywidgets

from aoi_fl.core.algorithms import Algorithm, ClientUpdates, FedAvg, update_norms
from aoi_fl.core.device import eval_batch_size, memory_hint, resolve_device
from aoi_fl.core.engines import LocalTraining
from aoi_fl.core.evaluation import (
    EVAL_GROUP,
    _batched_outputs,
    _grouped_linear_sums,
    evaluate,
    evaluate_many,
    per_sample_losses,
    rounds_to_target,
    screen_gaps,
    screen_pairs,
)
from aoi_fl.core.lr_schedules import (
    LR_SCHEDULES,
    ConstantLR,
    ExponentialDecay,
    InverseSqrtDecay,
    _Schedule,
)
from aoi_fl.core.minibatches import local_batches, local_step_batches
from aoi_fl.core.selection import (
    Sampler,
    Selection,
    check_available_selection,
    check_selection_ids,
)
from aoi_fl.core.tensors import Params
from aoi_fl.core.train_settings import (
    AVAILABILITY_KEY,
    CLIENT_ACCURACY_KEY,
    HISTORY_KEYS,
    PROBE_KEY,
    SCREEN_KEYS,
    FederatedData,
    RoundRecorder,
    TrainSettings,
)
from aoi_fl.core.trainer_evaluation import TrainerEvaluation
from aoi_fl.core.validation import require_int

if TYPE_CHECKING:
    from aoi_fl.core.availability import Availability

# every name this module defined before its parts moved out, for the code that imports them
# from here
__all__ = [
    "AVAILABILITY_KEY",
    "CLIENT_ACCURACY_KEY",
    "EVAL_GROUP",
    "HISTORY_KEYS",
    "LR_SCHEDULES",
    "PROBE_KEY",
    "SCREEN_KEYS",
    "ConstantLR",
    "ExponentialDecay",
    "FederatedData",
    "FederatedTrainer",
    "InverseSqrtDecay",
    "RoundRecorder",
    "RoundWork",
    "TrainSettings",
    "evaluate",
    "evaluate_many",
    "per_sample_losses",
    "rounds_to_target",
    "screen_gaps",
    "screen_pairs",
    "_Schedule",
    "_batched_outputs",
    "_grouped_linear_sums",
    "_subset",
]


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
class FederatedTrainer(TrainerEvaluation):
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
