"""Many runs as one computation: R federated runs advanced together, round by round.

A :class:`RunBatch` holds R :class:`~aoi_fl.core.train.FederatedTrainer` objects of one model
architecture, dataset, device and local-work shape (:func:`batch_signature`). Each run keeps
everything it has alone: its sampler, availability model, algorithm state, learning-rate
schedule, partition and random streams (selections and mini-batches come from the run's own
seed). In every round

1. each run does the first half of its round (:meth:`FederatedTrainer.begin_round`: the
   selection, its clients' mini-batches, starting parameters and per-round state);
2. the local steps of all runs' clients go through **one** engine call
   (:class:`~aoi_fl.core.engines.LocalTraining`): the client axis becomes runs x clients;
3. each run aggregates (in float64, as alone), feeds its sampler back and records
   (:meth:`FederatedTrainer.end_round`);
4. the runs whose test evaluation is due are evaluated together (:func:`evaluate_many`: the test
   set is read once for all of them).

A run that reaches its last round leaves the batch (``on_finish``); the others go on.

Reproducibility. A run's numbers do not depend on the runs that share its batch, on their
number or order: every operation of the engines is per client (per-client convolutions and
batched matrix products, per-client reductions; clients share no parameter), aggregation is per
run, and the evaluation runs each run's own forward pass, or, for a single-linear model, a
product of fixed shape (:data:`~aoi_fl.core.train.EVAL_GROUP`). So a run trained in a batch
has the bits it has trained alone by :meth:`FederatedTrainer.run` on the same machine and
device (``tests/pipeline/test_run_batch.py`` checks it for every method and engine). On a GPU a
kernel may choose its algorithm by the shape of the whole call (cuDNN); the engines padded to
a fixed chunk there keep the shapes fixed, and the GPU session checks the bits before it keeps
any run. With more than one torch thread the BLAS would split a product over a lone client
across its threads and compute each client of a larger call on one thread;
:func:`~aoi_fl.core.engines.client_products` pads a call over fewer clients than threads, so a
client's product has the same bits in any call (tested at one, two and four threads).

Runs at different rounds (some resumed from a checkpoint) share a batch too: their learning
rates may differ, and the clients of runs with another learning rate, or another per-round
state, go through an engine call of their own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch

from aoi_fl.core.device import memory_hint
from aoi_fl.core.tensors import Params
from aoi_fl.core.train import FederatedTrainer, RoundWork, evaluate_many

#: the settings that decide the shape of the local work and the kernels
SHARED_SETTINGS = (
    "local_epochs",
    "local_steps",
    "batch_size",
    "loss",
    "engine",
    "client_chunk",
    "full_information",
)


def batch_signature(trainer: FederatedTrainer) -> dict[str, Any]:
    """What runs must have in common to share a batch: the model architecture (its layers and
    parameter shapes), the data's shapes, the device, the local-work settings and the algorithm
    (type and configuration: its local step is applied to all clients of the call)."""
    s = trainer.settings
    return {
        "model": repr(trainer.model),
        "parameters": [(k, tuple(v.shape), str(v.dtype)) for k, v in trainer.params.items()],
        "train": (tuple(trainer.data.train.x.shape), str(trainer.data.train.x.dtype)),
        "test": (tuple(trainer.data.test.x.shape), str(trainer.data.test.x.dtype)),
        "device": str(trainer.device),
        **{name: getattr(s, name) for name in SHARED_SETTINGS},
        "algorithm": (type(trainer.algorithm).__qualname__, trainer.algorithm.config()),
    }


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a is b or (a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b))


class RunBatch:
    """R runs trained together (module docstring); ``run()`` trains them all to their last
    round and returns their histories, in order."""

    def __init__(self, trainers: Sequence[FederatedTrainer]) -> None:
        trainers = list(trainers)
        if not trainers:
            raise ValueError("a RunBatch needs at least one trainer, got none")
        first = batch_signature(trainers[0])
        for i, trainer in enumerate(trainers[1:], start=1):
            other = batch_signature(trainer)
            if differ := [k for k in first if first[k] != other[k]]:
                raise ValueError(
                    f"trainer {i} cannot share a batch with trainer 0: they differ in "
                    f"{differ} (runs of a batch need the same {list(first)})"
                )
        lead = trainers[0].data
        for i, trainer in enumerate(trainers[1:], start=1):
            data = trainer.data
            if not (
                _same_tensor(lead.train.x, data.train.x)
                and _same_tensor(lead.train.y, data.train.y)
                and _same_tensor(lead.test.x, data.test.x)
                and _same_tensor(lead.test.y, data.test.y)
            ):
                raise ValueError(
                    f"trainer {i} holds other training or test samples than trainer 0: runs of a "
                    "batch share one dataset (their partitions may differ)"
                )
            # one copy of the samples for all runs (each trainer moved its own to the device)
            trainer.data = dataclasses.replace(data, train=lead.train, test=lead.test)
        self.trainers = trainers
        self.local = trainers[0].local
        self.device = trainers[0].device

    def run(
        self,
        *,
        on_round: Callable[[int, FederatedTrainer], None] | None = None,
        on_finish: Callable[[int, FederatedTrainer], None] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> list[int]:
        """Train every run to ``settings.rounds``; return the runs still unfinished (none
        unless ``stop`` ended the batch early).

        ``on_round(i, trainer)`` is called after each round of run i (e.g. to checkpoint it),
        ``on_finish(i, trainer)`` once run i has trained its last round (e.g. to store it), as
        soon as it has, while the other runs go on. ``stop()`` is asked after every round of
        the batch; when it says True the batch ends there, every run between two rounds
        (``trainers[i]`` holds its state: checkpoint it to resume it later).
        """
        trainers = self.trainers
        self._evaluate_initial(range(len(trainers)))
        active = []
        for i, trainer in enumerate(trainers):
            if trainer.round < trainer.settings.rounds:
                active.append(i)
            elif on_finish is not None:
                on_finish(i, trainer)
        while active:
            works = {i: trainers[i].begin_round() for i in active}
            for i, (params, state) in self._train_together(works).items():
                trainers[i].end_round(works[i], params, state)
            self._evaluate_after_round(active)
            for i in active:
                if on_round is not None:
                    on_round(i, trainers[i])
            finished = [i for i in active if trainers[i].round >= trainers[i].settings.rounds]
            active = [i for i in active if i not in finished]
            for i in finished:
                if on_finish is not None:
                    on_finish(i, trainers[i])
            if active and stop is not None and stop():
                break
        return active

    # -- the shared computations -------------------------------------------------------------

    def _train_together(
        self, works: dict[int, RoundWork]
    ) -> dict[int, tuple[Params, dict[str, torch.Tensor]]]:
        """Every run's clients' final parameters and state: one engine call per group of runs
        with the same learning rate and per-round state keys (usually one call for all)."""
        groups: dict[tuple, list[int]] = {}
        for i, work in works.items():
            groups.setdefault((work.lr, tuple(sorted(work.state))), []).append(i)
        out = {}
        step = self.trainers[0].algorithm.local_step
        for (lr, keys), members in groups.items():
            counts = [len(works[i].schedules) for i in members]
            start = {
                k: torch.cat([works[i].start[k] for i in members]) for k in works[members[0]].start
            }
            state = {k: torch.cat([works[i].state[k] for i in members]) for k in keys}
            schedules = [s for i in members for s in works[i].schedules]
            with memory_hint(self.device):
                params = self.local(start, self.trainers[0].data.train, schedules, lr, step, state)
            split_params = {k: v.split(counts) for k, v in params.items()}
            split_state = {k: v.split(counts) for k, v in state.items()}
            for j, i in enumerate(members):
                out[i] = (
                    {k: v[j] for k, v in split_params.items()},
                    {k: v[j] for k, v in split_state.items()},
                )
        return out

    def _evaluate(self, members: list[int]) -> dict[int, tuple[float, float | None]]:
        """The test evaluation of the reported models of runs ``members``, read once."""
        if not members:
            return {}
        lead = self.trainers[0]
        with memory_hint(self.device):
            results = evaluate_many(
                lead.model,
                [self.trainers[i].reported_params() for i in members],
                lead.data.test,
                lead.settings.loss,
                lead.eval_batch_size,
            )
        return dict(zip(members, results, strict=True))

    def _evaluate_initial(self, members: Sequence[int]) -> None:
        due = [i for i in members if self.trainers[i].initial_evaluation_due()]
        for i, result in self._evaluate(due).items():
            self.trainers[i].record_evaluation(result=result)

    def _evaluate_after_round(self, members: Sequence[int]) -> None:
        trainers = self.trainers
        # each run screens on its own seeded subset of the test set: no split to share
        screens = {i: trainers[i].screen_accuracy() for i in members if trainers[i].screen_due()}
        due = [i for i in members if trainers[i].test_due(screens.get(i))]
        results = self._evaluate(due)
        for i in members:
            trainers[i].record_round_evaluations(screens.get(i), results.get(i))
