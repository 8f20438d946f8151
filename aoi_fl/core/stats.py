"""Selection statistics of Sec. V (Figs 2-4), streamed round by round.

:class:`SelectionStats` never stores the T x n matrix of weights: per round it does O(|S|) work
(plus O(n) at the end of each counting window), so it runs alongside a sampler with n = 10^6
clients. It tracks

- how often each client was selected;
- the inter-selection intervals X (Fig. 3): a histogram of t - (round of the previous selection)
  over all consecutive pairs of selections of a client;
- the windowed count statistic of Fig. 4: the rounds are cut into consecutive, non-overlapping
  windows of T rounds (an incomplete last window is left out), Y is the number of selections of
  a client in a window, and the metric is sqrt(Var(Y))/T with the variance over all
  (client, window) pairs. A selected client counts once per round, unless the round says how
  many times it was selected (``hits``: Policy 2's m draws with replacement, whose client "is
  selected l times out of m total selections", AoI paper Sec. III-B);
- the empirical Sigma of Fig. 2 (eq. 14): for each client the variance over rounds of its weight
  w_i(t) (0 in rounds it is not selected), summed over clients. With R rounds,
  Sigma = sum_i [S2_i / R - (S1_i / R)^2], S1_i and S2_i the sums of w_i(t) and w_i(t)^2, so two
  running totals (sum_i S2_i and sum_i S1_i^2) give Sigma after every round in O(|S|).

Variances are population variances (divided by the number of terms). The dense functions at the
end compute the same quantities from a full matrix; they are the reference for small n.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from aoi_fl.core.selection import Sampler, Selection
from aoi_fl.core.validation import require_int

_MAX_ROUNDS = int(np.iinfo(np.int32).max) - 1
#: rounds that :func:`simulate` draws before recording them together
_BLOCK = 1024

# What is kept per client, in one record so that a round costs one gather and one scatter of
# 16 bytes per selected client (instead of three of each over separate arrays).
_CLIENT = np.dtype(
    [
        ("last", np.int32),  # round of the latest selection, -1 before the first
        ("count", np.int32),  # number of selections
        ("weight_sum", np.float64),  # S1_i = sum_t w_i(t)
    ]
)


def _require_windows(windows: Iterable[int]) -> tuple[int, ...]:
    return tuple(sorted({require_int("window", w, minimum=1) for w in windows}))


def _hits(ids: np.ndarray, hits: np.ndarray | None) -> np.ndarray:
    """How many selections each of ``ids`` counts in its round: ``hits`` validated, or 1 each."""
    if hits is None:
        return np.ones(ids.size, dtype=np.int64)
    hits = np.asarray(hits)
    if hits.shape != ids.shape or not np.issubdtype(hits.dtype, np.integer):
        raise ValueError(f"hits must be integers, one per selected id, got {hits!r}")
    if hits.size and hits.min() < 1:
        raise ValueError(f"hits must be at least 1, got {hits}")
    return hits.astype(np.int64, copy=False)


class SelectionStats:
    """Streaming statistics of a sequence of selections over ``n`` clients.

    ``windows`` are the window sizes T of Fig. 4 to track; ``record_sigma`` keeps the empirical
    Sigma after every round (:attr:`sigma_history`, Fig. 2).
    """

    def __init__(self, n: int, windows: Iterable[int] = (), record_sigma: bool = False) -> None:
        self.n = require_int("n", n, minimum=1)
        self.windows = _require_windows(windows)
        self.record_sigma = bool(record_sigma)
        #: number of rounds recorded so far
        self.rounds = 0
        #: total number of selections (sum of |S| over rounds)
        self.selections = 0
        self._clients = np.zeros(self.n, dtype=_CLIENT)
        self._clients["last"] = -1
        self._unseen = self.n  # clients not selected yet (their first selection ends no interval)
        self._interval_hist = np.zeros(1, dtype=np.int64)
        self._sum_sq_weights = 0.0  # sum_i S2_i
        self._sum_sq_weight_sums = 0.0  # sum_i S1_i^2
        # per window size: the counts and the number of selections when the current window began
        self._window_start = {w: (np.zeros(self.n, dtype=np.int32), 0) for w in self.windows}
        self._window_y = np.empty(self.n if self.windows else 0, dtype=np.int32)
        # per window size: [complete windows, sum of Y, sum of Y^2] as exact Python ints
        self._window_moments = {w: [0, 0, 0] for w in self.windows}
        self._sigma_history: list[float] = []

    @property
    def counts(self) -> np.ndarray:
        """Number of times each client was selected (a copy)."""
        return self._clients["count"].copy()

    def update(self, selection: Selection, hits: np.ndarray | None = None) -> None:
        """Record one round. ``selection.ids`` must be distinct client ids in [0, n).

        ``hits``: how many times each id was selected in this round (positive integers aligned
        with ``ids``; default 1 each). It changes the selection counts (and so Y of Fig. 4 and
        :meth:`selection_rate`), not the intervals or Sigma.
        """
        self.update_rounds([selection], None if hits is None else [hits])

    def update_rounds(
        self, selections: Sequence[Selection], hits: Sequence[np.ndarray | None] | None = None
    ) -> None:
        """Record consecutive rounds, as :meth:`update` on each in turn, to the last bit. A block
        costs a few array operations over its selections (and one per selection of its most
        selected client), not a few per round: what makes long simulations fast."""
        if hits is not None and len(hits) != len(selections):
            raise ValueError(
                f"hits must give one entry per round, got {len(hits)} for {len(selections)}"
            )
        ids = [selection.ids for selection in selections]
        counted = [_hits(a, None if hits is None else hits[k]) for k, a in enumerate(ids)]
        # every check before anything is recorded: a bad round leaves the statistics as they were
        if self.rounds + len(selections) > _MAX_ROUNDS:
            raise OverflowError(f"SelectionStats supports at most {_MAX_ROUNDS} rounds")
        if not selections:
            return
        flat = np.concatenate(ids)
        if flat.size and (flat.min() < 0 or flat.max() >= self.n):
            bad = flat[(flat < 0) | (flat >= self.n)]
            raise ValueError(f"selection ids must lie in [0, {self.n}), got {bad}")
        sizes = np.array([a.size for a in ids], dtype=np.int64)
        offsets = np.concatenate(([0], np.cumsum(sizes)))
        w = np.concatenate([selection.weights for selection in selections])
        h = np.concatenate(counted)
        start = 0
        while start < len(selections):
            # a window that closes inside the block needs the counts at its end: split there
            stop = min(
                [len(selections)] + [start + self._to_boundary(size) for size in self.windows]
            )
            part = slice(offsets[start], offsets[stop])
            self._record(sizes[start:stop], flat[part], w[part], h[part])
            start = stop

    def _to_boundary(self, window: int) -> int:
        """Rounds left until the current window of size ``window`` closes."""
        return window - self.rounds % window

    def _record(self, sizes: np.ndarray, flat: np.ndarray, w: np.ndarray, h: np.ndarray) -> None:
        """Record rounds of which no window closes before the last: ``sizes[k]`` selections in
        the k-th, whose ids, weights and hits follow each other in ``flat``, ``w``, ``h``."""
        rounds = sizes.size
        t0 = self.rounds
        # the selections client by client, each client's in round order
        order = np.argsort(flat, kind="stable")
        client, t = flat[order], np.repeat(np.arange(t0, t0 + rounds, dtype=np.int64), sizes)[order]
        wc = w[order]
        first = np.ones(client.size, dtype=bool)
        first[1:] = client[1:] != client[:-1]
        starts = np.flatnonzero(first)
        touched = client[starts]
        records = self._clients[touched]
        last = records["last"].astype(np.int64)
        seen = last >= 0
        self._unseen -= int(np.count_nonzero(~seen))
        gaps = np.concatenate([t[starts][seen] - last[seen], (t[1:] - t[:-1])[~first[1:]]])
        if gaps.size:
            self._add_intervals(gaps)
        # Sigma: a selection with weight w of a client whose weights so far sum to S1 adds
        # (S1 + w)^2 - S1^2 = 2 S1 w + w^2 to sum_i S1_i^2, and w^2 to sum_i S2_i. Every sum is
        # taken in round order, one addition at a time, so any cut into blocks gives the same bits
        group = np.cumsum(first) - 1
        level = np.arange(client.size) - starts[group]  # a client's k-th selection in the block
        by_level = np.argsort(level, kind="stable")
        ends_of_level = np.cumsum(np.bincount(level))
        s1 = records["weight_sum"].copy()
        before = np.empty(client.size)
        begin = 0
        for end in ends_of_level:  # a client at most once per level
            at = by_level[begin:end]
            before[at] = s1[group[at]]
            s1[group[at]] += wc[at]
            begin = end
        gain_sq_sums = np.empty(client.size)
        gain_sq_sums[order] = 2.0 * before * wc + wc * wc
        per_round = np.repeat(np.arange(rounds), sizes)
        sq_sums = np.cumsum(
            np.append(self._sum_sq_weight_sums, np.bincount(per_round, gain_sq_sums, rounds))
        )[1:]
        sq = np.cumsum(np.append(self._sum_sq_weights, np.bincount(per_round, w * w, rounds)))[1:]
        ends = np.append(starts[1:], client.size)[: starts.size] - 1
        records["weight_sum"] = s1
        records["last"] = t[ends]
        records["count"] += np.add.reduceat(h[order], starts) if starts.size else 0
        self._clients[touched] = records
        self.selections += int(h.sum())
        self.rounds = t0 + rounds
        self._sum_sq_weight_sums, self._sum_sq_weights = float(sq_sums[-1]), float(sq[-1])
        for size in self.windows:
            if self.rounds % size == 0:
                self._close_window(size)
        if self.record_sigma:
            r = np.arange(t0 + 1, t0 + rounds + 1, dtype=np.float64)
            self._sigma_history.extend(np.maximum(sq / r - sq_sums / r**2, 0.0).tolist())

    def _add_intervals(self, gaps: np.ndarray) -> None:
        counts = np.bincount(gaps)
        if counts.size > self._interval_hist.size:
            self._interval_hist = np.pad(
                self._interval_hist, (0, counts.size - self._interval_hist.size)
            )
        self._interval_hist[: counts.size] += counts

    def _close_window(self, size: int) -> None:
        start, start_selections = self._window_start[size]
        counts = self._clients["count"]
        y = np.subtract(counts, start, out=self._window_y)
        moments = self._window_moments[size]
        moments[0] += 1
        moments[1] += self.selections - start_selections
        moments[2] += int(np.einsum("i,i->", y, y, dtype=np.int64))
        np.copyto(start, counts)
        self._window_start[size] = (start, self.selections)

    # --- selection counts -------------------------------------------------------------------
    def selection_rate(self) -> float:
        """Selections per client per round: sum_i counts_i / (n * rounds) (with ``hits``, a
        client selected l times in a round counts l)."""
        self._require_rounds()
        return self.selections / (self.n * self.rounds)

    # --- inter-selection intervals (Fig. 3) -------------------------------------------------
    def interval_histogram(self) -> np.ndarray:
        """h[x] = number of observed intervals of x rounds (h[0] = 0)."""
        return self._interval_hist.copy()

    @property
    def interval_count(self) -> int:
        """Number of observed intervals (pairs of consecutive selections of a client)."""
        return int(self._interval_hist.sum())

    def interval_mean(self) -> float:
        """Mean of the observed intervals."""
        h = self._require_intervals()
        return float(np.dot(h, np.arange(h.size))) / h.sum()

    def interval_var(self) -> float:
        """Population variance of the observed intervals."""
        h = self._require_intervals()
        x = np.arange(h.size)
        return float(np.dot(h, (x - self.interval_mean()) ** 2)) / h.sum()

    def _require_intervals(self) -> np.ndarray:
        if self.interval_count == 0:
            raise ValueError("no interval observed yet: no client was selected twice")
        return self._interval_hist

    # --- windowed counts (Fig. 4) -----------------------------------------------------------
    def window_std_ratio(self, window: int) -> float:
        """sqrt(Var(Y)) / T for windows of T = ``window`` rounds (Fig. 4)."""
        window = require_int("window", window, minimum=1)
        if window not in self._window_moments:
            raise ValueError(
                f"window {window} is not tracked; tracked windows: {list(self.windows)} "
                "(pass windows=... when creating the statistics)"
            )
        k, s1, s2 = self._window_moments[window]
        if k == 0:
            raise ValueError(
                f"window T={window} is larger than the {self.rounds} rounds recorded: "
                "no complete window to compute Var(Y) from"
            )
        pairs = k * self.n
        # exact integer arithmetic: Var(Y) = (N sum Y^2 - (sum Y)^2) / N^2
        return float(np.sqrt((pairs * s2 - s1 * s1) / pairs**2)) / window

    # --- Sigma (Fig. 2) ---------------------------------------------------------------------
    def sigma(self) -> float:
        """Empirical Sigma = sum_i Var_t[w_i(t)] over the rounds so far (eq. 14)."""
        r = self._require_rounds()
        return max(self._sum_sq_weights / r - self._sum_sq_weight_sums / r**2, 0.0)

    @property
    def sigma_history(self) -> np.ndarray:
        """Sigma over rounds 0..t, for every t (needs ``record_sigma=True``)."""
        if not self.record_sigma:
            raise ValueError("sigma_history needs SelectionStats(..., record_sigma=True)")
        return np.array(self._sigma_history)

    def _require_rounds(self) -> int:
        if self.rounds == 0:
            raise ValueError("no round recorded yet")
        return self.rounds


def simulate(
    sampler: Sampler,
    rounds: int,
    *,
    windows: Iterable[int] = (),
    record_sigma: bool = False,
    count_hits: bool = False,
) -> SelectionStats:
    """Draw ``rounds`` selections from ``sampler`` and return their streaming statistics.

    ``count_hits``: a selected client counts as many selections as its draws in the round
    (:attr:`Selection.hits`, set by samplers that draw with replacement: AoI Policy 2); a
    sampler whose selections carry no hits raises ``ValueError``. Default: a selected client
    counts once.
    """
    if not isinstance(sampler, Sampler):
        raise TypeError(f"sampler must be a Sampler, got {type(sampler).__name__}")
    rounds = require_int("rounds", rounds, minimum=1)
    stats = SelectionStats(sampler.n, windows, record_sigma)
    for start in range(0, rounds, _BLOCK):
        block = [sampler.sample() for _ in range(min(_BLOCK, rounds - start))]
        if count_hits and any(s.hits is None for s in block):
            raise ValueError(
                f"count_hits=True but {type(sampler).__name__}'s selections carry no hits "
                "(only samplers that draw with replacement, such as AoI Policy 2, set them)"
            )
        stats.update_rounds(block, [s.hits for s in block] if count_hits else None)
    return stats


# --- dense reference implementations (small n) ----------------------------------------------
def weight_matrix(sampler: Sampler, rounds: int) -> np.ndarray:
    """The (rounds, n) matrix of weights w_i(t), 0 for clients not selected in round t."""
    if not isinstance(sampler, Sampler):
        raise TypeError(f"sampler must be a Sampler, got {type(sampler).__name__}")
    rounds = require_int("rounds", rounds, minimum=1)
    w = np.zeros((rounds, sampler.n))
    for t in range(rounds):
        sel = sampler.sample()
        w[t, sel.ids] = sel.weights
    return w


def _require_matrix(matrix: object) -> np.ndarray:
    arr = np.asarray(matrix, dtype=float)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"expected a non-empty (rounds, n) matrix, got shape {arr.shape}")
    if not np.isfinite(arr).all() or (arr < 0).any():
        raise ValueError("matrix entries must be finite and >= 0 (selection indicators or weights)")
    return arr


def intervals_from_matrix(matrix: object) -> np.ndarray:
    """All inter-selection intervals of a (rounds, n) 0/1 or weight matrix (entry > 0: selected).

    Ordered by client, then by time.
    """
    selected = _require_matrix(matrix) > 0
    client, t = np.nonzero(selected.T)
    same_client = client[1:] == client[:-1]
    return np.diff(t)[same_client]


def window_std_ratio_from_matrix(matrix: object, window: int, counts: bool = False) -> float:
    """sqrt(Var(Y)) / T over complete windows of T = ``window`` rounds (Fig. 4).

    Entries > 0 count as one selection, or (``counts``) as that many selections (a matrix of
    per-round selection counts, e.g. Policy 2's l_i)."""
    arr = _require_matrix(matrix)
    selected = arr if counts else arr > 0
    window = require_int("window", window, minimum=1)
    rounds, n = selected.shape
    k = rounds // window
    if k == 0:
        raise ValueError(
            f"window T={window} is larger than the {rounds} rounds: no complete window"
        )
    y = selected[: k * window].reshape(k, window, n).sum(axis=1)
    return float(np.sqrt(y.var())) / window


def empirical_sigma_from_matrix(weights: object) -> float:
    """Sum over clients of the variance over rounds of w_i(t) (eq. 14, empirical)."""
    return float(_require_matrix(weights).var(axis=0).sum())
