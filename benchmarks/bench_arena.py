"""Selection overhead of the arena's client-selection policies, per round, against uniform's.

Every policy of ``aoi_fl.evidence.arena.experiments.POLICIES`` is built as the arena builds it
(``SAMPLERS[name](n, sizes, seed=0, **sampler_spec(...))``, Zipf(a=2) data sizes from a fixed
seed) at n = 100 clients, m = 10 (the arena's setting) and at n = 10,000, m = 100. One round is
what the trainer asks of the sampler (``aoi_fl.core.train.Trainer.run_round``): ``sample()``,
then ``feedback_updates(ids, updates)`` for the samplers that want updates (Clustered Sampling
Alg. 2; 7,850-dim float64 rows, a 784 x 10 softmax regression's update, precomputed) and
``feedback(ids, norms)`` (precomputed norms). Two modes:

- ``everyone``: no availability model, ``sample()``;
- ``bernoulli``: the arena's ``"bernoulli"`` availability (mean rate 0.33, Beta rates of
  concentration 4), ``sample(mask)`` with the masks precomputed; every sampler first gets
  ``set_availability_rates`` (as the trainer does; it switches the Markov policies to their
  per-round chain and calibrates ``markov_available``), counted in the setup column, not per
  round.

The samplers that want losses (``power_of_choice``, ``power_of_choice_stale``, ``oort``) get a
fake loss probe that reads precomputed arrays: the times are their selection logic only, not the
model evaluations that the trainer's probe runs (pow-d evaluates its d = 2m candidates every
round; rpow-d and Oort only the participants, whose losses the trainer counts as free).

Timed, interleaved (policy after policy within each repeat, so that load swings on the shared
machine hit them alike), after two warm-up rounds per sampler, in blocks of about 0.05 s of the
policy's rounds (the fastest of three rounds timed one by one sizes them; the count is printed):
a block of uniform's 30 us rounds must outlast the scheduler's time slices on a loaded machine.
The state carries on from block to block, as in a run. Reported per policy: the setup
(construction plus availability rates), the median over the repeats of the seconds per round
and its ratio to uniform's median in the same (n, mode) table, and the same for the best block
(the other benchmarks' measure: other processes only ever slow a block down).

``clustered_similarity`` reclusters every round: the n x n arccos similarity matrix of the
clients' last updates (an n x n x dim Gram product) and Ward's linkage over its rows (scipy
computes the distances between the n rows of n features: O(n^3)). One round at n = 10,000 does
not fit in a benchmark, so the last table times it at n = 1,000 and 2,000 (m = n / 100, every
client's update set), its two parts there, the similarity matrix alone once at n = 10,000 (with
the NumPy arrays' peak memory), and estimates the n = 10,000 round as that matrix plus the
linkage extrapolated as n^3 from n = 2,000. ``--full-similarity`` times one such round too.

Measured (2-core machine shared with background training, load average 5-6, numpy 2.4 with
OpenBLAS; seconds per round, median, and the ratio to uniform's):

- n = 100, m = 10: uniform 27-49 us; the AoI policies 0.5-1.9x (the Markov samplers are the
  cheapest, 22-33 us); vrb, mabs, pow-d and rpow-d 0.08-0.24 ms (3-5.5x); kvib 0.23-0.61 ms
  (9-12.5x); clustered_size 0.31-0.48 ms (7-12x); oort 0.63-0.77 ms (15-25x);
  clustered_similarity 0.18-0.26 s (4,400-6,700x) with OpenBLAS's default two threads, 8-10 ms
  (200-270x) with ``OPENBLAS_NUM_THREADS=1``: its small Gram product (100 x 7,850) is 20x
  slower with two threads on the loaded machine.
- n = 10,000, m = 100: uniform 43-71 us; random, probabilistic 1-2.6x; the Markov samplers
  0.14-0.28 ms (3-4x; under availability their per-round chain, one uniform per client, and a
  0.3-0.5 s setup: the stationary age law per client, and markov_available's calibration per
  distinct rate); vrb, mabs, pow-d, rpow-d 0.4-0.75 ms (7-17x); kvib 1.8-2.8 ms (38-48x:
  sorted water-filling, O(n log n)); oort 1.8-3.9 ms (27-90x; about 70% of it in
  ``np.setdiff1d(pool, chosen)``, which hashes the whole pool every round: 1.0-2.6 ms alone,
  against 0.01-0.03 ms for a boolean mask); clustered_size 6-10 ms (130-145x: every round it
  scans its dense m x n distributions row by row, O(m n), where only n + m - 1 entries are
  non-zero; a prototype over the precomputed supports, with the same draws, took 1.0-1.8 ms).
- clustered_similarity: 0.76-1.4 s per round at n = 1,000 (similarity 0.3-0.7 s, linkage
  0.4-0.7 s), 5-7.6 s at n = 2,000 (1.0-1.7 s, 4.1-5.5 s); at n = 10,000 the similarity matrix
  took 26-40 s with 4.0 GB of NumPy arrays (each n x n float64 matrix is 0.8 GB), the estimate
  was 535-726 s, and one round measured with ``--full-similarity`` took 501 s (0.70x the
  estimate of the same run; peak resident memory 5.5 GB): about 28 h for the arena's 200
  rounds, against 10 ms for 200 uniform rounds.

Run: ``.venv/bin/python benchmarks/bench_arena.py [--repeats 7] [--quick] [--full-similarity]``
(about 1.5 min on the shared 2-core machine; ``--quick``: 3 repeats and the n = 10,000
similarity matrix extrapolated as n^2, about 45 s; ``--full-similarity``: 8-12 min more and 6
GB). The load average is printed.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
import tracemalloc
import warnings
from collections.abc import Callable

import numpy as np
from scipy.cluster.hierarchy import ClusterWarning, linkage

from aoi_fl.arena.clustered import ClusteredBySimilarity, similarity_matrix
from aoi_fl.core.availability import build_availability
from aoi_fl.core.seeding import generator
from aoi_fl.evidence.arena.experiments import AVAILABILITY, POLICIES, sampler_spec, tier_settings
from aoi_fl.pipeline import plugins

SEED = 0
#: (n, m) of the tables
SETTINGS = ((100, 10), (10_000, 100))
SLOW = "clustered_similarity"
#: untimed rounds per sampler, then rounds timed one by one that size its blocks (the fastest)
WARMUP, CALIBRATION = 2, 3
#: each policy's block has the rounds that take about BLOCK_S (from its calibration rounds),
#: within [1, MAX_BLOCK]: a block of the 30 us uniform rounds must outlast the scheduler's
#: time slices on the loaded machine, one of clustered_similarity's need not
BLOCK_S = 0.05
MAX_BLOCK = 2000
#: the availability masks, precomputed, used in turn
MASK_ROUNDS = 256
#: one client's model update: a 784 x 10 softmax regression's weights and biases
DIM = 7850
#: the arena's rounds (K-Vib's, VRB's and MABS's theta and gamma depend on them)
ROUNDS = tier_settings("screen", "cpu")["rounds"]
MODES = ("everyone", "bernoulli")
#: clustered_similarity's n of the last table (m = n / 100), and the n it is estimated at
LADDER = (1_000, 2_000)
LARGE_N = 10_000


class FakeProbe:
    """A loss probe that reads precomputed losses (no model evaluation): each call returns the
    next of a few per-client loss vectors, so that rankings change from call to call."""

    def __init__(self, n: int, seed: int) -> None:
        rng = generator(seed, "bench-arena-losses", n)
        self.mean = rng.gamma(2.0, 0.5, size=(8, n))
        self.rms = self.mean * 1.2
        self.calls = 0

    def __call__(
        self, ids: np.ndarray, samples: int | None = None, *, free: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        row = self.calls % self.mean.shape[0]
        self.calls += 1
        return self.mean[row, ids], self.rms[row, ids]


def sizes_of(n: int) -> np.ndarray:
    return generator(SEED, "bench-arena-sizes", n).zipf(2.0, n).astype(float)


def build(policy: str, n: int, m: int, sizes: np.ndarray, rates: np.ndarray | None):
    """(sampler, setup seconds): built as the arena does, with the availability rates set."""
    options = sampler_spec(policy, n, m, ROUNDS, "screen")
    options.pop("name")
    start = time.perf_counter()
    sampler = plugins.samplers()[policy](n, sizes, seed=SEED, **options)
    if rates is not None:
        sampler.set_availability_rates(rates)
    setup = time.perf_counter() - start
    if sampler.wants_losses:
        sampler.loss_probe = FakeProbe(n, SEED)
    return sampler, setup


def rounds_of(
    sampler, masks: np.ndarray | None, updates: np.ndarray, norms: np.ndarray
) -> Callable[[int], None]:
    """``run(k)``: the sampler's next k rounds as the trainer drives it (masks in turn)."""
    t = 0

    def run(k: int) -> None:
        nonlocal t
        for _ in range(k):
            if masks is None:
                selection = sampler.sample()
            else:
                selection = sampler.sample(masks[t % len(masks)])
            t += 1
            if sampler.wants_updates:
                sampler.feedback_updates(selection.ids, updates[: selection.ids.size])
            sampler.feedback(selection.ids, norms[selection.ids])

    return run


def per_round(run: Callable[[int], None], rounds: int) -> float:
    """Seconds per round of one block of ``rounds`` rounds."""
    start = time.perf_counter()
    run(rounds)
    return (time.perf_counter() - start) / rounds


def table(n: int, m: int, mode: str, repeats: int) -> dict[str, float]:
    """Time every policy at (n, m) in ``mode``; print the table; returns the medians."""
    sizes = sizes_of(n)
    policies = [p for p in POLICIES if not (p == SLOW and n > LADDER[-1])]
    masks = rates = None
    if mode == "bernoulli":
        model = build_availability({**AVAILABILITY["bernoulli"], "seed": SEED}, n, sizes)
        masks = model.trace(MASK_ROUNDS)
        rates = model.long_run_rates()
    updates = generator(SEED, "bench-arena-updates", n).standard_normal((m, DIM))
    norms = generator(SEED, "bench-arena-norms", n).gamma(2.0, 0.5, size=n)
    runs, setup, block = {}, {}, {}
    for policy in policies:
        sampler, setup[policy] = build(policy, n, m, sizes, rates)
        runs[policy] = rounds_of(sampler, masks, updates, norms)
        runs[policy](WARMUP)
        estimate = min(per_round(runs[policy], 1) for _ in range(CALIBRATION))
        block[policy] = max(1, min(MAX_BLOCK, round(BLOCK_S / estimate)))
    times: dict[str, list[float]] = {p: [] for p in policies}
    for _ in range(repeats):
        for policy in policies:
            times[policy].append(per_round(runs[policy], block[policy]))
    median = {p: statistics.median(t) for p, t in times.items()}
    best = {p: min(t) for p, t in times.items()}
    label = "everyone available, sample()"
    if masks is not None:
        rate = AVAILABILITY["bernoulli"]["mean"]
        label = (
            f"Bernoulli availability (mean rate {rate}), sample(mask), "
            f"{masks.sum(axis=1).mean():.1f} available on average"
        )
    print(f"\nn = {n:,}, m = {m}: {label}; median of {repeats} blocks")
    print(
        f"{'policy':<24}{'rounds':>7}{'setup s':>9}{'s / round':>11}{'x uniform':>11}"
        f"{'best s':>11}{'x uniform':>11}"
    )
    for policy in policies:
        print(
            f"{policy:<24}{block[policy]:>7}{setup[policy]:>9.4f}{median[policy]:>11.3e}"
            f"{median[policy] / median['uniform']:>11.1f}{best[policy]:>11.3e}"
            f"{best[policy] / best['uniform']:>11.1f}"
        )
    if SLOW not in policies:
        print(f"{SLOW:<24}{'not run: see the last table':>38}")
    return median


def similarity_sampler(n: int) -> tuple[Callable[[int], None], ClusteredBySimilarity]:
    """``run(k)`` of clustered_similarity at n clients (m = n / 100) once every client has sent
    an update (its cost does not depend on their values), and the sampler."""
    m = n // 100
    sampler, _ = build(SLOW, n, m, sizes_of(n), None)
    everyone = generator(SEED, "bench-arena-updates", n).standard_normal((n, DIM))
    sampler.feedback_updates(np.arange(n), everyone)
    updates = everyone[:m].copy()
    del everyone
    return rounds_of(sampler, None, updates, np.ones(n)), sampler


def similarity_at_scale(
    repeats: int, quick: bool, full: bool, uniform_large: dict[str, float]
) -> None:
    """clustered_similarity's round at the LADDER sizes, its parts, and the LARGE_N estimate
    (with ``full``, one LARGE_N round timed as well)."""
    print(
        f"\n{SLOW} at scale (everyone available, m = n / 100, {DIM}-dim updates, every client "
        f"fed one first): median of {repeats} rounds"
    )
    print(f"{'n':>7}{'m':>5}{'s / round':>12}{'similarity s':>14}{'Ward linkage s':>16}")
    link = sim = 0.0
    for n in LADDER:
        run, sampler = similarity_sampler(n)
        seconds = statistics.median(per_round(run, 1) for _ in range(repeats))
        start = time.perf_counter()
        d = similarity_matrix(sampler.updates)
        sim = time.perf_counter() - start
        start = time.perf_counter()
        linkage(d, method="ward")
        link = time.perf_counter() - start
        print(f"{n:>7,}{n // 100:>5}{seconds:>12.3f}{sim:>14.3f}{link:>16.3f}")
        del run, sampler, d
    n0 = LADDER[-1]
    scale = LARGE_N / n0
    link_large = link * scale**3
    if quick:
        sim_large = sim * scale**2
        how = f"extrapolated as n^2 from n = {n0:,} (--quick)"
    else:
        u = generator(SEED, "bench-arena-updates", LARGE_N).standard_normal((LARGE_N, DIM))
        tracemalloc.start()
        start = time.perf_counter()
        similarity_matrix(u)
        sim_large = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        how = f"measured once, NumPy arrays' peak {peak / 1e9:.1f} GB besides the updates"
        del u
    n_by_n = LARGE_N**2 * 8 / 1e9
    print(
        f"{LARGE_N:>7,}{LARGE_N // 100:>5}{'not run':>12}{sim_large:>14.1f}{link_large:>16.0f}"
        f"   similarity: {how}; linkage: extrapolated as n^3 from n = {n0:,}"
    )
    estimate = sim_large + link_large
    print(
        f"estimated {SLOW} round at n = {LARGE_N:,}: {estimate:.0f} s "
        f"({estimate / 60:.1f} min, {estimate / uniform_large['everyone']:.1e} x uniform); "
        f"{ROUNDS} rounds: {ROUNDS * estimate / 3600:.0f} h. Each n x n float64 matrix is "
        f"{n_by_n:.1f} GB, the updates {LARGE_N * DIM * 8 / 1e9:.2f} GB; Ward's linkage over "
        f"the rows computes {math.comb(LARGE_N, 2):.1e} distances of {LARGE_N:,} features"
    )
    if full:
        run, _ = similarity_sampler(LARGE_N)
        seconds = per_round(run, 1)
        print(
            f"measured {SLOW} round at n = {LARGE_N:,} (--full-similarity, one round): "
            f"{seconds:.0f} s ({seconds / 60:.1f} min, {seconds / estimate:.2f} x the estimate)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed blocks per policy")
    parser.add_argument(
        "--quick", action="store_true", help="3 repeats, no n = 10,000 similarity matrix"
    )
    parser.add_argument(
        "--full-similarity",
        action="store_true",
        help=f"also time one {SLOW} round at n = {LARGE_N:,} (8-12 min and 6 GB here)",
    )
    args = parser.parse_args()
    repeats = 3 if args.quick else args.repeats
    start = time.perf_counter()
    print(
        f"numpy {np.__version__} (OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}),"
        f" load average {os.getloadavg()}; Zipf(2) sizes, seed {SEED}, "
        f"{WARMUP} warm-up rounds per sampler, blocks of about {BLOCK_S} s; losses from a fake "
        "probe (precomputed arrays, no model evaluation)"
    )
    uniform: dict[int, dict[str, float]] = {}
    with warnings.catch_warnings():
        # Alg. 2 hands its square similarity matrix to linkage as observations, on purpose (the
        # authors' code does the same; aoi_fl.arena.clustered), and scipy warns about it
        warnings.simplefilter("ignore", ClusterWarning)
        for n, m in SETTINGS:
            uniform[n] = {}
            for mode in MODES:
                uniform[n][mode] = table(n, m, mode, repeats)["uniform"]
        similarity_at_scale(3, args.quick, args.full_similarity, uniform[LARGE_N])
    print(f"\nload average {os.getloadavg()}; total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
