"""Clustered Sampling (Fraboni, Vidal, Kameni & Lorenzi, ICML 2021), Algorithms 1 and 2.

Both policies build m distributions ("clusters") r_k = (r_{k,1}, ..., r_{k,n}) over the n clients
with

    sum_i r_{k,i} = 1 for every k,        sum_k r_{k,i} = m p_i for every client i,

p_i = d_i / sum_j d_j the clients' data shares, and each round draw one client from every cluster
independently; every draw carries the aggregation weight 1/m (a client drawn from l clusters gets
l/m, ``hits`` = l). Then E[sum_k theta_{drawn k} / m] = sum_k sum_i r_{k,i} theta_i / m
= sum_i p_i theta_i: the aggregate is unbiased, and client i is drawn m p_i times on average, as
under multinomial sampling with m draws from p, but with a smaller variance of the weights (the
paper's claim). The two policies differ in how they group the clients:

=======================  ===========================================================================
name                     clusters
=======================  ===========================================================================
``clustered_size``       Algorithm 1, by sample size (:func:`size_distributions`): fixed for the run
``clustered_similarity`` Algorithm 2, by the similarity of the clients' last model updates
                         (:func:`similarity_distributions`): recomputed every ``recluster_every``
                         rounds from the updates the trainer feeds back
=======================  ===========================================================================

Facts taken from the authors' public code (Accenture/Labs-Federated-Learning, branch of the
paper, files ``py_func/clustering.py`` and ``py_func/FedProx.py``), besides the paper:

- Algorithm 1 takes the clients by decreasing p_i and fills distribution after distribution with
  the masses m p_i, a client's mass continuing in the next distribution when it overflows
  (``get_clusters_with_alg1``).
- Algorithm 2's representative gradient of a client is its last update theta_i - theta; the
  history starts at zero for every client and a client's entry is replaced whenever it is sampled
  (``FedProx_clustered_sampling``). The similarity of two updates is the arccos of their cosine
  (0 when one of them is zero), or the L2 distance *squared*, or the L1 distance
  (``get_similarity``); the experiments use the arccos. The n x n similarity matrix is handed to
  ``scipy.cluster.hierarchy.linkage(..., "ward")`` as it is: each client's row of similarities is
  its feature vector for Ward's linkage.
- The dendrogram is cut into the largest subtrees of total weight <= 1/m (the merge heights
  replaced by the merged weights, then ``fcluster`` at 1/m); the m heaviest of these groups keep a
  distribution each, and the clients of the others (lighter groups first, each group's clients in
  random order) fill the distributions' remaining room in turn (``get_clusters_with_alg2``).

Ours, where the code leaves a case open or does not apply:

- Ties in p (Algorithm 1) and in group weights (Algorithm 2) are broken by the smallest client id
  (stable order), so that the clusters are reproducible.
- A client with m p_i > 1 cannot fit in one distribution. Algorithm 1 spreads it over consecutive
  distributions by construction; in Algorithm 2 (where the authors' code would give negative
  entries) a kept group of weight a takes ceil(a) fresh distributions, the room left in the last
  of them being filled like the others. Groups are kept heaviest first while distributions remain.
- Availability (the paper assumes every client can be sampled): the round's distributions are
  restricted to the available clients and each is renormalised over its available members; a
  cluster with no available member draws nothing, so fewer than m clients may be drawn. The
  drawn clients share the weight equally, w_i = hits_i / (number of draws), which is the paper's
  1/m per draw whenever every cluster draws (in particular under full availability), and keeps
  the weights summing to one otherwise.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import numpy as np
from scipy.cluster.hierarchy import ClusterWarning, linkage
from scipy.spatial.distance import cdist

from aoi_fl.arena.policies import policy_factory
from aoi_fl.core.registry import Style
from aoi_fl.core.selection import SeededSampler, Selection, check_available, sizes_key
from aoi_fl.core.validation import require_choice, require_int, require_n_m, require_sizes

#: the similarity measures of Algorithm 2 (the authors' ``get_similarity``; "arccos" is their
#: "cosine", the one their experiments use)
SIMILARITIES: tuple[str, ...] = ("arccos", "L2", "L1")

#: relative slack when comparing a group's weight with 1/m: groups of exactly 1/m (up to float
#: rounding of the sums) must count as fitting in one distribution
_FIT = 1e-12


def _pour(masses: np.ndarray, room: np.ndarray) -> np.ndarray:
    """Lay the masses end to end over the distributions' room, in order; returns (len(room),
    len(masses)): entry (k, j) is the part of mass j that falls in distribution k.

    Mass j covers [c_{j-1}, c_j) of the line, c the cumulative masses, distribution k the span
    [e_{k-1}, e_k) of its cumulative room; both ends are pinned to the same total so that float
    rounding loses no mass. Where a mass ends on a boundary, the two sums' round-off would leave
    a sliver (~1e-16) of the next mass in the distribution, a member that availability's
    renormalisation would draw for certain: pieces up to _FIT (times the total) are dropped.
    """
    c = np.concatenate(([0.0], np.cumsum(masses)))
    e = np.concatenate(([0.0], np.cumsum(room)))
    e[-1] = c[-1]
    lo = np.maximum(c[None, :-1], e[:-1, None])
    hi = np.minimum(c[None, 1:], e[1:, None])
    pieces = hi - lo
    return np.where(pieces > _FIT * max(c[-1], 1.0), pieces, 0.0)


def size_distributions(p: np.ndarray, m: int) -> np.ndarray:
    """Algorithm 1 (clustering by sample size): the (m, n) matrix r of the m distributions.

    The clients, by decreasing p_i (ties: smaller id first), pour their masses m p_i into the
    distributions 0, 1, ..., m-1 in turn, each holding 1; a client whose mass overflows the
    current distribution continues in the next one. Rows sum to 1 and column i to m p_i.
    """
    p = np.asarray(p, dtype=np.float64)
    _, m = require_n_m(p.size, m)
    order = np.argsort(-p, kind="stable")
    r = np.zeros((m, p.size))
    r[:, order] = _pour(m * p[order], np.ones(m))
    return r


def similarity_matrix(updates: np.ndarray, similarity: str = "arccos") -> np.ndarray:
    """The clients' pairwise dissimilarities of Algorithm 2 (the authors' ``get_similarity``).

    ``updates``: one representative gradient per client (n, dim). "arccos": the angle
    arccos(<u_i, u_j> / (|u_i| |u_j|)), 0 when either update is zero; "L2": |u_i - u_j|^2 (squared,
    as the authors' code); "L1": sum |u_i - u_j|.
    """
    similarity = require_choice("similarity", similarity, SIMILARITIES)
    u = np.asarray(updates, dtype=np.float64)
    if similarity == "L1":
        return cdist(u, u, "cityblock")
    gram = u @ u.T
    sq = np.diag(gram).copy()
    if similarity == "L2":
        d = np.maximum(sq[:, None] + sq[None, :] - 2.0 * gram, 0.0)
    else:
        norm = np.sqrt(sq)
        both = np.outer(norm, norm)
        cosine = np.divide(gram, both, out=np.ones_like(gram), where=both > 0)
        d = np.arccos(np.clip(cosine, -1.0, 1.0))
    np.fill_diagonal(d, 0.0)  # rounding of the Gram form leaves ~1e-8 angles on the diagonal
    return d


def weight_groups(tree: np.ndarray, p: np.ndarray, m: int) -> np.ndarray:
    """The groups of Algorithm 2: the largest subtrees of the dendrogram ``tree`` (a scipy linkage
    matrix over the n clients) whose weight sum p_i is at most 1/m; a client heavier than 1/m is a
    group of its own. Returns each client's group label (0, 1, ...)."""
    n = p.size
    weight = np.concatenate((p, np.zeros(n - 1)))
    children = tree[:, :2].astype(np.int64)
    for t, (a, b) in enumerate(children):
        weight[n + t] = weight[a] + weight[b]
    fits = m * weight <= 1.0 + _FIT
    label = np.full(2 * n - 1, -1)
    label[-1] = 0 if fits[-1] else -1
    groups = int(fits[-1])
    for t in range(n - 2, -1, -1):  # parents (n + t) before their children
        for child in children[t]:
            if label[n + t] >= 0:
                label[child] = label[n + t]
            elif fits[child] or child < n:
                label[child], groups = groups, groups + 1
    return label[:n]


def group_distributions(
    groups: np.ndarray, p: np.ndarray, m: int, rng: np.random.Generator
) -> np.ndarray:
    """Algorithm 2's (m, n) distributions from the client groups of :func:`weight_groups`.

    The heaviest groups keep distributions of their own (r_{k,i} = m p_i for their clients); the
    clients of the other groups, lighter groups first and each group's clients in an order drawn
    from ``rng``, fill the room left in the kept distributions (the smallest kept one first) and
    in any unused distribution. See the module docstring for groups heavier than 1/m.
    """
    labels = np.unique(groups)
    members = [np.flatnonzero(groups == g) for g in labels]
    mass = np.array([m * p[ids].sum() for ids in members])
    heavy_first = sorted(range(labels.size), key=lambda g: (-mass[g], members[g][0]))
    kept, free = [], m
    for g in heavy_first:
        need = max(1, math.ceil(mass[g] - _FIT))
        if need <= free:
            kept.append((g, need))
            free -= need
    r = np.zeros((m, p.size))
    room = np.ones(m)
    k = 0
    for g, need in reversed(kept):  # the lightest kept group in distribution 0
        ids = members[g]
        r[k : k + need, ids] = _pour(m * p[ids], np.ones(need))
        room[k : k + need] = np.maximum(1.0 - r[k : k + need].sum(axis=1), 0.0)
        k += need
    chosen = {g for g, _ in kept}
    rest = [g for g in reversed(heavy_first) if g not in chosen]
    if rest:
        order = np.concatenate([rng.permutation(members[g]) for g in rest])
        r[:, order] += _pour(m * p[order], room)
    return r


def similarity_distributions(
    updates: np.ndarray,
    p: np.ndarray,
    m: int,
    rng: np.random.Generator,
    similarity: str = "arccos",
) -> np.ndarray:
    """Algorithm 2 (clustering by model similarity): the (m, n) distributions from the clients'
    representative gradients ``updates`` (n, dim): similarity matrix, Ward's dendrogram over its
    rows (as the authors' code), groups of weight <= 1/m, then the allocation of
    :func:`group_distributions`."""
    p = np.asarray(p, dtype=np.float64)
    _, m = require_n_m(p.size, m)
    if p.size == 1:
        return np.ones((1, 1))
    with warnings.catch_warnings():
        # the authors' code hands Ward the square matrix on purpose (rows as feature vectors),
        # which scipy suspects to be a distance matrix given in the wrong form
        warnings.simplefilter("ignore", ClusterWarning)
        tree = linkage(similarity_matrix(updates, similarity), method="ward")
    return group_distributions(weight_groups(tree, p, m), p, m, rng)


class ClusteredSampler(SeededSampler):
    """One draw from each of the m distributions per round (module docstring), among the
    available clients; subclasses supply the distributions (:meth:`distributions`)."""

    availability_aware = True

    def __init__(self, sizes: Any, m: int, seed: int = 0) -> None:
        self.sizes = require_sizes("sizes", sizes)
        n, self.m = require_n_m(self.sizes.size, m)
        super().__init__(n, seed)
        self.p = self.sizes / self.sizes.sum()
        self._supported: np.ndarray | None = None
        self._supports: list[np.ndarray] = []

    def distributions(self) -> np.ndarray:
        """The (m, n) matrix r of the coming round."""
        raise NotImplementedError

    def sample(self, available: np.ndarray | None = None) -> Selection:
        available = check_available(available, self.n)
        r = self.distributions()
        if r is not self._supported:
            # each cluster's members, found once per set of distributions: r has only n + m - 1
            # non-zero entries, and scanning all m n of them each round dominated the cost
            self._supported, self._supports = r, [np.flatnonzero(row > 0) for row in r]
        hits = np.zeros(self.n, dtype=np.int64)
        for row, members in zip(r, self._supports, strict=True):
            support = members if available is None else members[available[members]]
            if support.size:  # a cluster with no available member draws nothing
                q = row[support]
                hits[support[self._rng.choice(support.size, p=q / q.sum())]] += 1
        self.round += 1
        ids = np.flatnonzero(hits)
        draws = hits.sum()
        return Selection(ids, hits[ids] / max(draws, 1), hits=hits[ids])

    def config(self) -> dict:
        return {**super().config(), "m": self.m, "sizes": sizes_key(self.sizes)}


class ClusteredBySize(ClusteredSampler):
    """Clustered sampling with Algorithm 1 (:func:`size_distributions`), fixed for the run."""

    name = "clustered_size"

    def __init__(self, sizes: Any, m: int, seed: int = 0) -> None:
        super().__init__(sizes, m, seed)
        self._r = size_distributions(self.p, self.m)

    def distributions(self) -> np.ndarray:
        return self._r


class ClusteredBySimilarity(ClusteredSampler):
    """Clustered sampling with Algorithm 2 (:func:`similarity_distributions`).

    Keeps every client's last update (zero until it is first sampled, as the authors' code) from
    :meth:`feedback_updates` and reclusters at rounds 0, ``recluster_every``, 2 ``recluster_every``,
    ...; in between the last distributions are reused. Before any update arrives every client's
    update is zero: every dissimilarity is 0 and the groups follow scipy's order of ties.
    """

    name = "clustered_similarity"
    wants_updates = True

    def __init__(
        self,
        sizes: Any,
        m: int,
        seed: int = 0,
        similarity: str = "arccos",
        recluster_every: int = 1,
    ) -> None:
        super().__init__(sizes, m, seed)
        self.similarity = require_choice("similarity", similarity, SIMILARITIES)
        self.recluster_every = require_int("recluster_every", recluster_every, minimum=1)
        #: the clients' last updates (n, dim); None until the first feedback
        self.updates: np.ndarray | None = None
        self._r: np.ndarray | None = None

    def feedback_updates(self, ids: np.ndarray, updates: np.ndarray) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        u = np.asarray(updates, dtype=np.float64)
        if u.ndim != 2 or u.shape[0] != ids.size:
            raise ValueError(f"updates must have one row per id ({ids.size}), got shape {u.shape}")
        if ids.size and (ids.min() < 0 or ids.max() >= self.n):
            raise ValueError(f"ids must be client indices in [0, {self.n}), got {ids.tolist()}")
        if self.updates is None:
            self.updates = np.zeros((self.n, u.shape[1]))
        if u.shape[1] != self.updates.shape[1]:
            raise ValueError(
                f"updates must have {self.updates.shape[1]} entries per client (as before), "
                f"got {u.shape[1]}"
            )
        self.updates[ids] = u

    def distributions(self) -> np.ndarray:
        if self._r is None or self.round % self.recluster_every == 0:
            u = np.zeros((self.n, 1)) if self.updates is None else self.updates
            self._r = similarity_distributions(u, self.p, self.m, self._rng, self.similarity)
        return self._r

    def config(self) -> dict:
        return {
            **super().config(),
            "similarity": self.similarity,
            "recluster_every": self.recluster_every,
        }

    def state_dict(self) -> dict:
        seen = [] if self.updates is None else np.flatnonzero(self.updates.any(axis=1)).tolist()
        return {
            **super().state_dict(),
            "dim": None if self.updates is None else int(self.updates.shape[1]),
            "seen": seen,
            "updates": [] if self.updates is None else self.updates[seen].tolist(),
            "distributions": None if self._r is None else self._r.tolist(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        rng, round_ = self._check_state(state)
        missing = {"dim", "seen", "updates", "distributions"} - set(state)
        if missing:
            raise ValueError(f"state lacks the entries {sorted(missing)}")
        updates = None
        if state["dim"] is not None:
            dim = require_int("state['dim']", state["dim"], minimum=1)
            rows = np.asarray(state["updates"], dtype=np.float64).reshape(-1, dim)
            seen = np.asarray(state["seen"], dtype=np.int64)
            inside = seen.size == 0 or (seen.min() >= 0 and seen.max() < self.n)
            if seen.shape != (rows.shape[0],) or not inside:
                raise ValueError("state['seen'] must list one client index per stored update")
            updates = np.zeros((self.n, dim))
            updates[seen] = rows
        r = state["distributions"]
        if r is not None:
            r = np.asarray(r, dtype=np.float64)
            if r.shape != (self.m, self.n):
                raise ValueError(
                    f"state['distributions'] must be {self.m} x {self.n}, got {r.shape}"
                )
        self._rng, self.round, self.updates, self._r = rng, round_, updates, r


#: the factories ``aoi_fl/entry_points.txt`` names (``aoi_fl.samplers``)
PLUGINS = SimpleNamespace(
    clustered_size=policy_factory(
        ClusteredBySize, Style("Clustered sampling (Alg. 1, size)", "#1b7837", "H")
    ),
    clustered_similarity=policy_factory(
        ClusteredBySimilarity, Style("Clustered sampling (Alg. 2, similarity)", "#5aae61", "P")
    ),
)
