"""Participation delays tau_t, tau_max and tau_avg of a trace (FedSUM paper, eqs 2-4), and bounds.

For a trace {S_t}, a_{i,t} = max{j <= t : i in S_j} is the last round client i was active by
round t (a_{i,t} = -1 before its first participation, eqs 2-3), and

    tau_t = max_i (t - a_{i,t}) = t - min_i a_{i,t},
    tau_max = max_{0 <= t < T} tau_t,   tau_avg = (1/T) sum_{t < T} tau_t

(tau_t is eq. 4; tau_max and tau_avg are the unnumbered definitions after it, Sec. 2.2).

tau_t = 0 exactly when every client is active in round t; a client not yet seen counts t + 1.
:class:`DelayTracker` computes them streaming (O(N) memory, O(|S_t| + N) per round, vectorised).

Bounds of App. F (Lemmas F.1-F.4) on tau_max, and the closed form of the deterministic cyclic
pattern, are here for comparison with simulated traces; :func:`markov_bound` is ours (the same
union bound as Lemma F.2, for the AoI paper's age-chain policies, which the paper does not treat).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from aoi_fl.core.delays import sampler_metrics
from aoi_fl.core.selection import Sampler
from aoi_fl.core.validation import check_chain, require_int, require_n_s, require_real


def delay_table(
    builders: Mapping[str, Callable[[int], Sampler]], rounds: int, seeds: Sequence[int]
) -> pd.DataFrame:
    """tau_max, tau_avg (mean, min, max over ``seeds``) and the mean |S_t| of ``rounds`` rounds
    of every pattern; ``builders[name](seed)`` builds the pattern's sampler."""
    rows = []
    for name, build in builders.items():
        runs = [sampler_metrics(build(seed), rounds) for seed in seeds]
        row: dict[str, object] = {"pattern": name}
        for field in ("tau_max", "tau_avg"):
            values = np.array([getattr(m, field) for m in runs], dtype=float)
            row.update(
                {field: values.mean(), f"{field} min": values.min(), f"{field} max": values.max()}
            )
        row["mean |S_t|"] = float(np.mean([m.mean_active for m in runs]))
        rows.append(row)
    return pd.DataFrame(rows).set_index("pattern")


# ---------------------------------------------------------------------------------------------
# Closed forms and the bounds of App. F


def _rounds_per_epoch(n: int, s: int) -> int:
    n, s = require_n_s(n, s)
    if n % s:
        raise ValueError(f"the cyclic closed forms need s to divide n, got n={n}, s={s}")
    return n // s


def deterministic_cyclic_delays(n: int, s: int, rounds: int) -> np.ndarray:
    """tau_t = min(t + 1, n/s - 1) of the deterministic cyclic pattern (s divides n).

    Until round n/s - 2 some client has not been seen (tau_t = t + 1); from then on the
    oldest last participation is n/s - 1 rounds back.
    """
    m = _rounds_per_epoch(n, s)
    rounds = require_int("rounds", rounds, minimum=0)
    return np.minimum(np.arange(1, rounds + 1), m - 1)


def reshuffled_cyclic_delay_range(n: int, s: int, t: int) -> tuple[int, int]:
    """[lower, upper] for tau_t of the reshuffled cyclic pattern (s divides n), m = n/s.

    Round t = e m + r of epoch e: every client was active in epoch e - 1, so tau_t <= m + r
    (<= 2m - 2, since r <= m - 2 outside an epoch's last round); the clients still to come in
    epoch e were last active in epoch e - 1 or never, so tau_t >= r + 1; in the last round of
    an epoch tau_t = m - 1 exactly. In epoch 0 tau_t = min(t + 1, m - 1), as for the fixed
    order.
    """
    m = _rounds_per_epoch(n, s)
    t = require_int("t", t, minimum=0)
    e, r = divmod(t, m)
    if r == m - 1:
        return m - 1, m - 1
    return r + 1, (r + 1 if e == 0 else m + r)


def uniform_bound(n: int, s: int, rounds: int) -> float:
    """Lemma F.1: E[tau_max] <= (4N/S) ln(NT) for S of N uniformly at random (Case 1)."""
    n, s = require_n_s(n, s)
    rounds = require_int("rounds", rounds, minimum=1)
    return 4 * n / s * math.log(n * rounds)


def bernoulli_bound(delta: float, n: int, rounds: int) -> float:
    """Lemma F.2: E[tau_max] <= (4/delta) max{ln(NT), ln(1/delta)} when every p_i^t >= delta.

    The proof uses only that a client's activity is independent across rounds with probability
    at least delta each round, so it also covers P3 (delta = min_t p^t) and biased sampling.
    """
    delta = require_real("delta", delta, minimum=0.0, maximum=1.0, strict_minimum=True)
    n = require_int("n", n, minimum=1)
    rounds = require_int("rounds", rounds, minimum=1)
    return 4 / delta * max(math.log(n * rounds), math.log(1 / delta))


def reshuffled_cyclic_bound(n: int, s: int) -> float:
    """Lemma F.3: E[tau_max] <= 4N/S for the reshuffled cyclic pattern."""
    n, s = require_n_s(n, s)
    return 4 * n / s


def reshuffled_cyclic_proof_bound(n: int, s: int) -> int:
    """2 floor(N/S), the sure bound on tau_max inside the proof of Lemma F.3 (a client's two
    consecutive selections lie at most from the start of one epoch to the end of the next),
    tighter than the lemma's statement (:func:`reshuffled_cyclic_bound`)."""
    n, s = require_n_s(n, s)
    return 2 * (n // s)


def deterministic_cyclic_bound(n: int, s: int) -> float:
    """Lemma F.4: tau_max <= 2N/S for the deterministic cyclic pattern."""
    n, s = require_n_s(n, s)
    return 2 * n / s


def markov_bound(p: object, n: int, rounds: int) -> float:
    """Ours: E[tau_max] for the AoI age-chain policies (selection probability p_a at age a).

    During a run of l consecutive absences a client's age rises by one per round up to m', so
    at least l - m' of those rounds are at age m', each an independent "no" with probability
    q = 1 - p_{m'} (a forced selection only shortens the run). The union bound of Lemma F.2
    then gives E[tau_max] <= m' + log_q((1 - q)/(N T q)) + 2. If p_a = 1 at some age, the
    first such a bounds tau_max surely (no client is absent more than a rounds in a row).
    """
    p = check_chain(p)
    n = require_int("n", n, minimum=1)
    rounds = require_int("rounds", rounds, minimum=1)
    if (p == 1.0).any():
        return float(np.flatnonzero(p == 1.0)[0])
    m_prime, q = p.size - 1, 1.0 - float(p[-1])
    return m_prime + math.log((1 - q) / (n * rounds * q)) / math.log(q) + 2
