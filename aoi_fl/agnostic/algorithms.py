"""Agnostic vs weighted FedAvg under unknown participation ("Convergence of Agnostic Federated
Averaging", Sec. 2 and 4).

- The participation processes are samplers (:mod:`aoi_fl.agnostic.samplers`).
- The induced client weights of eq. 2, p_i = E[1[i in S] / |S|], for any sampler
  (:func:`induced_weights`, estimated from draws; exact for the prior sampler at small N by
  enumeration, :func:`exact_prior_weights`); they sum to one (Lemma 1). The participation skew
  of Fig. 2 is ||p - 1/N||_1 (:func:`l1_skew`).
- Aggregation rules as algorithms of the common trainer: :class:`AgnosticFedAvg` (Algorithm 1,
  line 5: the plain mean of the available clients) and :class:`WeightedFedAvg` (eq. 10:
  (N/|S|) sum_{i in S} p_i theta_i with the known p; also self-normalised, p_i / sum_{j in S}
  p_j, and rescaled to a mean total weight of 1), each optionally with Algorithm 1's projection
  onto a ball and averaged iterate.
- The objective of problem (3), sum_i p_i f_i, and the uniform one, (1/N) sum_i f_i
  (:func:`objective`), from the per-client losses the trainer records.

Algorithm 1 lets every client run H local steps and then broadcasts the aggregate to all N
clients, so the work of the clients that were not available is overwritten: on the common
trainer it is FedAvg in which only the available clients train, ``local_steps = H``.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from aoi_fl.core.algorithms import FedAvg
from aoi_fl.core.selection import Sampler
from aoi_fl.core.tensors import Params
from aoi_fl.core.validation import require_choice, require_int, require_n_m


def inclusion_and_induced(sampler: Sampler, rounds: int) -> tuple[np.ndarray, np.ndarray]:
    """Estimated P(i in S) and p_i = E[1[i in S] / |S|] (eq. 2) from ``rounds`` draws.

    The draws advance ``sampler`` (pass a fresh one). Rounds with nobody selected carry no
    aggregation step in FedAvg, so p is conditioned on S being non-empty (the paper assumes
    q(empty) = 0); the inclusion frequency counts every round.
    """
    rounds = require_int("rounds", rounds, minimum=1)
    hits = np.zeros(sampler.n)
    shares = np.zeros(sampler.n)
    nonempty = 0
    for _ in range(rounds):
        ids = sampler.sample().ids
        hits[ids] += 1
        if ids.size:
            shares[ids] += 1.0 / ids.size
            nonempty += 1
    if nonempty == 0:
        raise ValueError(f"the sampler selected nobody in all {rounds} rounds")
    return hits / rounds, shares / nonempty


def induced_weights(sampler: Sampler, rounds: int) -> np.ndarray:
    """p_i = E[1[i in S] / |S|] (eq. 2) estimated from ``rounds`` draws; sums to one (Lemma 1)."""
    return inclusion_and_induced(sampler, rounds)[1]


def exact_prior_weights(weights: Any, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact inclusion probabilities and p_i = P(i in S)/m of :class:`PriorSampler`.

    Enumerates every ordered sequence of m distinct draws (n!/(n-m)! of them), so it is meant
    for small n: a test oracle for the estimates.
    """
    w = np.asarray(weights, dtype=float)
    n, m = require_n_m(w.size, m)
    if n > 10:
        raise ValueError(f"exact enumeration is for n <= 10 clients, got n={n}")
    w = w / w.sum()
    inclusion = np.zeros(n)
    for seq in itertools.permutations(range(n), m):
        prob, left = 1.0, 1.0
        for i in seq:
            prob *= w[i] / left
            left -= w[i]
        inclusion[list(seq)] += prob
    return inclusion, inclusion / m


def l1_skew(p: Any) -> float:
    """Participation skew ||p - (1/N) 1||_1 (Fig. 2): 0 for uniform p, up to 2 - 2/N."""
    p = np.asarray(p, dtype=float)
    return float(np.abs(p - 1.0 / p.size).sum())


def objective(client_losses: Any, p: Any | None = None) -> np.ndarray:
    """sum_i p_i f_i (problem (3)); p = None gives the uniform objective (1/N) sum_i f_i.

    ``client_losses`` is (N,) or (evaluations, N) (the trainer's ``client_losses`` record).
    """
    losses = np.asarray(client_losses, dtype=float)
    n = losses.shape[-1]
    weights = np.full(n, 1.0 / n) if p is None else np.asarray(p, dtype=float)
    if weights.shape != (n,):
        raise ValueError(f"p must have one weight per client ({n}), got shape {weights.shape}")
    return losses @ weights


class AgnosticFedAvg(FedAvg):
    """Algorithm 1, line 5: theta = (1/|S|) sum_{i in S} theta_i, whatever the sampler's weights.

    ``radius`` and ``average`` add Algorithm 1's projection of the local iterates onto a ball
    and its averaged iterate as the reported model (:class:`~aoi_fl.core.algorithms.FedAvg`).
    """

    name = "agnostic"

    def __init__(self, radius: float | None = None, average: bool = False) -> None:
        super().__init__("weighted_sum", radius=radius, average=average)

    def aggregation_weights(self, updates: Any) -> np.ndarray:
        """1/|S_t| for each active client, whatever its participation rate (Alg. 1 line 5)."""
        return np.full(updates.ids.size, 1.0 / max(updates.ids.size, 1))

    def config(self) -> dict:
        return {"name": self.name, **self.options()}


#: how :class:`WeightedFedAvg` scales eq. 10's weights (N/|S|) p_i
NORMALISATIONS = ("none", "round", "mean")


class WeightedFedAvg(FedAvg):
    """Weighted FedAvg (eq. 10): theta = (N/|S|) sum_{i in S} p_i theta_i with the known p.

    The weights (N/|S|) p_i sum to one only in expectation under uniform participation (with
    p_i = 1/N it is Algorithm 1); under skewed participation they do not, and eq. 10 rescales
    the model. ``aggregation="weighted_delta"`` applies the same weights to the updates instead
    (theta + sum (N/|S|) p_i (theta_i - theta)), a reading that leaves the model's scale alone
    but moves the model by a total weight sum_{i in S} (N/|S|) p_i whose mean over the
    participation law is N sum_i p_i^2 (by eq. 2, E[1(i in S)/|S|] = p_i), above 1 for any
    non-uniform p: a larger step, not only another weighting.

    ``normalise`` separates the two:

    - ``"none"``: eq. 10's weights (N/|S|) p_i;
    - ``"round"``: self-normalised, p_i / sum_{j in S} p_j: the weights sum to 1 in every round
      (the same under both aggregations);
    - ``"mean"``: eq. 10's weights divided by N sum_i p_i^2, their mean total weight, so that
      the total weight is 1 on average over the participation law (exactly when p is the
      process's induced weights; with an estimate p_hat the mean is sum_i p_hat_i p_i /
      sum_i p_hat_i^2, 1 up to the estimation error).

    ``radius`` and ``average``: Algorithm 1's projection and averaged iterate
    (:class:`~aoi_fl.core.algorithms.FedAvg`).
    """

    name = "weighted"

    def __init__(
        self,
        p: Any,
        aggregation: str = "weighted_sum",
        normalise: str = "none",
        radius: float | None = None,
        average: bool = False,
    ) -> None:
        super().__init__(aggregation, radius=radius, average=average)
        p = np.asarray(p, dtype=float)
        if p.ndim != 1 or p.size == 0 or (p < 0).any() or not np.isclose(p.sum(), 1.0):
            raise ValueError(f"p must be a probability vector over the clients, got {p}")
        self.p = p
        self.normalise = require_choice("normalise", normalise, NORMALISATIONS)
        #: the mean total weight of eq. 10 per round, N sum_i p_i^2
        self.mean_total_weight = float(p.size * (p**2).sum())

    def aggregation_weights(self, updates: Any) -> np.ndarray:
        """Eq. 10's weights (N/|S_t|) p_i of the active clients, scaled as ``normalise`` says."""
        if updates.ids.size and updates.ids.max() >= self.p.size:
            raise ValueError(f"client id {updates.ids.max()} has no weight in p ({self.p.size})")
        p_s = self.p[updates.ids]
        if self.normalise == "round":
            total = p_s.sum()
            if updates.ids.size and total <= 0:
                raise ValueError(
                    f"normalise='round' needs a selected client with p_i > 0; clients "
                    f"{updates.ids.tolist()} all have p_i = 0"
                )
            return p_s / total if updates.ids.size else p_s
        weights = self.p.size / max(updates.ids.size, 1) * p_s
        return weights / self.mean_total_weight if self.normalise == "mean" else weights

    def setup(self, n_clients: int, global_params: Params) -> None:
        if n_clients != self.p.size:
            raise ValueError(f"p has {self.p.size} weights but there are {n_clients} clients")
        super().setup(n_clients, global_params)

    def config(self) -> dict:
        return {
            "name": self.name,
            "p": self.p.tolist(),
            "aggregation": self.aggregation,
            **({"normalise": self.normalise} if self.normalise != "none" else {}),
            **self.options(),
        }


def least_squares_optimum(bundle: Any, p: Any | None = None) -> tuple[np.ndarray, float]:
    """Minimiser and minimum of sum_i p_i f_i for a natively federated least-squares dataset.

    f_i(w, b) = mean over client i's training samples of (x . w + b - y)^2 (the loss "mse" of
    :class:`~aoi_fl.core.models.LinearRegression`); p = None is the uniform objective. Solved in
    float64 as weighted least squares with per-sample weights p_i / n_i. Returns ((w, b) as one
    vector of d + 1 entries, the minimum).
    """
    if bundle.partition is None:
        raise ValueError("least_squares_optimum needs a natively federated dataset (partition)")
    n = len(bundle.partition)
    p = np.full(n, 1.0 / n) if p is None else np.asarray(p, dtype=float)
    if p.shape != (n,):
        raise ValueError(f"p must have one weight per client ({n}), got shape {p.shape}")
    x = bundle.train.x.double().numpy().reshape(len(bundle.train), -1)
    y = bundle.train.y.double().numpy().reshape(-1)
    design = np.hstack([x, np.ones((x.shape[0], 1))])
    sample_weight = np.empty(x.shape[0])
    for i, idx in enumerate(bundle.partition):
        sample_weight[idx] = p[i] / len(idx)
    root = np.sqrt(sample_weight)
    theta, *_ = np.linalg.lstsq(design * root[:, None], y * root, rcond=None)
    minimum = float(sample_weight @ (design @ theta - y) ** 2)
    return theta, minimum
