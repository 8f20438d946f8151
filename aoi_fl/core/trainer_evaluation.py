"""The evaluating half of the federated trainer: test and screen accuracy, per-client losses
and accuracies, the samplers' loss probe, and when each is due."""

from __future__ import annotations

import numpy as np
import torch

from aoi_fl.core.device import memory_hint
from aoi_fl.core.evaluation import _batched_outputs, evaluate, per_sample_losses
from aoi_fl.core.seeding import generator
from aoi_fl.core.tensors import Params, TensorSplit
from aoi_fl.core.train_settings import CLIENT_ACCURACY_KEY
from aoi_fl.core.validation import require_int


class TrainerEvaluation:
    """The evaluation methods of :class:`~aoi_fl.core.train.FederatedTrainer`, its base class:
    they work on the trainer's fields (model, data, settings, device, history, round), kept
    apart from the training half of the class."""

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
        """Whether the round just trained is screened on the test subset
        (:mod:`aoi_fl.core.train`)."""
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
