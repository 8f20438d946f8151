"""Time one update of the live explorer (aoi_fl.evidence.aoi.explorer) at n = 1,000 clients, per
policy.

Run: ``python benchmarks/bench_explorer.py``. n = 1000, m = 150, m' = 10 (the paper's n/m),
Zipf(a=2) sizes from seed 0, a 1000-round simulation. For each policy it reports the best of a
few repeats of

- ``explore``: the numbers (theory, simulation, Sigma of all four policies);
- ``plot + png``: drawing them into the widget's reused figure and encoding the PNG it shows;
- ``update``: the two together, what the widget does on a change; "cold" recomputes Theorem 3's
  Sigma of Policy 1 (cached per sizes and m, so it is paid when n, m, the sizes or their seed
  change, not on the other controls), "warm" reads it from the cache.

The reference, timed in the same run, is a plain per-round NumPy simulation of the same chain for
as many rounds (one uniform per client per round). The target is an update well under a second:
below TARGET_S. A last table shows how the cold cost grows with m (Theorem 3 is O(n m) per
quadrature node).
"""

from __future__ import annotations

import time

import numpy as np

from aoi_fl.aoi.markov import optimal_p, stationary_distribution
from aoi_fl.core.seeding import generator
from aoi_fl.evidence.aoi import explorer

N, M, M_PRIME, ROUNDS, SEED = 1000, 150, 10, 1000, 0
TARGET_S = 0.5


def best_time(func, repeats: int) -> float:
    """Best wall time in seconds of ``repeats`` calls (others on the machine only slow one down)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
    return best


def per_round_chain() -> None:
    """The reference: every client draws a uniform every round (eq. 4, ages capped at m')."""
    p = optimal_p(N, M, M_PRIME)
    rng = generator(SEED, "bench_explorer_reference")
    ages = rng.choice(M_PRIME + 1, size=N, p=stationary_distribution(p))
    for _ in range(ROUNDS):
        selected = rng.random(N) < p[ages]
        if not selected.any():
            selected[rng.integers(N)] = True
        ages = np.where(selected, 0, np.minimum(ages + 1, M_PRIME))


def main() -> None:
    reference = best_time(per_round_chain, repeats=5)
    kw = dict(sizes="zipf", seed=SEED, sim_rounds=ROUNDS)
    figure = explorer.plot(explorer.explore(N, M, M_PRIME, **kw))  # the widget's reused figure
    print(f"n = {N}, m = {M}, m' = {M_PRIME}, Zipf(2) sizes, {ROUNDS} simulated rounds")
    print(f"reference: plain per-round chain, {ROUNDS} rounds: {reference:.4f} s")
    header = f"{'policy':<19}{'explore s':>11}{'plot+png s':>12}{'update warm':>13}"
    print(header + f"{'update cold':>13}{'warm/ref':>10}{'cold/ref':>10}")
    worst = 0.0
    for policy in explorer.POLICIES:

        def explore(policy: str = policy) -> explorer.Exploration:
            return explorer.explore(N, M, M_PRIME, policy=policy, **kw)

        def draw(ex: explorer.Exploration) -> None:
            explorer._png(explorer.plot(ex, figure))

        def cold(explore=explore, draw=draw) -> None:
            explorer._sigma_random.cache_clear()
            draw(explore())

        shown = explore()
        t_explore = best_time(explore, repeats=5)
        t_draw = best_time(lambda shown=shown, draw=draw: draw(shown), repeats=5)
        t_warm = best_time(lambda explore=explore, draw=draw: draw(explore()), repeats=5)
        t_cold = best_time(cold, repeats=3)
        worst = max(worst, t_cold)
        print(
            f"{policy:<19}{t_explore:>11.4f}{t_draw:>12.4f}{t_warm:>13.4f}{t_cold:>13.4f}"
            f"{t_warm / reference:>10.2f}{t_cold / reference:>10.2f}"
        )
    verdict = "OK" if worst < TARGET_S else "MISSED"
    print(f"slowest update at n = {N}: {worst:.3f} s (target < {TARGET_S} s: {verdict})")

    print(f"\ncold explore (Policy 3 simulated) against m at n = {N}, Zipf(2) sizes:")
    print(f"{'m':>6}{'explore cold s':>16}{'warm s':>10}")
    for m in (15, 150, 300, 500):

        def run(m: int = m) -> None:
            explorer.explore(N, m, M_PRIME, **kw)

        def run_cold(m: int = m) -> None:
            explorer._sigma_random.cache_clear()
            run(m)

        print(f"{m:>6}{best_time(run_cold, repeats=2):>16.4f}{best_time(run, repeats=2):>10.4f}")


if __name__ == "__main__":
    main()
