"""Time Sigma of Policy 1 (Theorem 3): exact Laplace method vs enumeration over all subsets.

Run: ``python benchmarks/bench_sigma.py``. Sizes are Zipf(a=2) from a fixed seed; each timing is
the best of a few repeats. Enumeration at n = 14 is the reference timed in the same run. The
target is sigma_random < 0.2 s at n = 100, m = 15.
"""

from __future__ import annotations

import math
import time

from aoi_fl.aoi.sigma import sigma_random, sigma_random_enumeration
from aoi_fl.core.seeding import generator

SEED = 0
TARGET_S = 0.2


def best_time(func, *args, repeats: int) -> tuple[float, float]:
    """(best wall time in seconds, value) over ``repeats`` calls."""
    best, value = float("inf"), float("nan")
    for _ in range(repeats):
        start = time.perf_counter()
        value = func(*args)
        best = min(best, time.perf_counter() - start)
    return best, value


def main() -> None:
    rows = []
    for name, func, n, m, repeats in [
        ("enumeration", sigma_random_enumeration, 14, 7, 3),
        ("sigma_random", sigma_random, 14, 7, 5),
        ("sigma_random", sigma_random, 100, 15, 5),
        ("sigma_random", sigma_random, 1000, 150, 3),
    ]:
        sizes = generator(SEED, "bench-sigma-sizes", n).zipf(2.0, n).astype(float)
        seconds, value = best_time(func, sizes, m, repeats=repeats)
        rows.append((name, n, m, seconds, value))
    reference = rows[0][3]
    print(f"{'method':<14}{'n':>6}{'m':>6}{'best s':>12}{'vs enum n=14':>14}{'Sigma':>14}")
    for name, n, m, seconds, value in rows:
        print(f"{name:<14}{n:>6}{m:>6}{seconds:>12.4f}{seconds / reference:>14.3f}{value:>14.8f}")
    agreement = abs(rows[1][4] / rows[0][4] - 1.0)
    n100 = rows[2][3]
    print(f"n=14 exact vs enumeration relative difference: {agreement:.1e}")
    per_subset = reference / math.comb(14, 7)
    subsets = math.comb(100, 15)
    years = per_subset * subsets / 3.15e7
    print(f"enumeration at n=100, m=15 ({subsets:.2e} subsets) would take ~{years:.1e} years")
    verdict = "OK" if n100 < TARGET_S else "MISSED"
    print(f"n=100, m=15: {n100:.4f} s (target < {TARGET_S} s: {verdict})")


if __name__ == "__main__":
    main()
