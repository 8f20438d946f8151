"""Simulated selection traces of the four policies (Sec. III-B), shared by the Figs 2-4
notebooks (:mod:`aoi_fl.evidence.aoi.theory_figures`) and the ledger
(:mod:`aoi_fl.evidence.aoi.claims`): Fig. 2's Sigma traces and Fig. 4's window variance
sqrt(Var(Y))/T.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from aoi_fl.aoi import samplers
from aoi_fl.core import stats
from aoi_fl.core.stats import SelectionStats


def simulate_traces(
    policy: str,
    sizes: np.ndarray,
    *,
    n: int,
    m: int,
    m_prime: int,
    seeds: int,
    rounds: int,
    start: str = "stationary",
    **options,
) -> list[SelectionStats]:
    """``seeds`` traces of ``rounds`` rounds of ``policy`` (sampler seeds 0, 1, ...; the Markov
    policies from ``start``), with :func:`aoi_fl.core.stats.simulate`'s ``options``."""
    return [
        stats.simulate(
            samplers.make_sampler(
                policy, n=n, m=m, sizes=sizes, m_prime=m_prime, seed=seed, start=start
            ),
            rounds,
            **options,
        )
        for seed in range(seeds)
    ]


def window_traces(
    policy: str, sizes: np.ndarray, windows: Sequence[int], **trace_options
) -> list[SelectionStats]:
    """Fig. 4's traces (:func:`simulate_traces`) counting Y in the ``windows``: Policy 2's Y
    counts its draws, as its client "is selected l times out of m total selections"
    (Sec. III-B)."""
    return simulate_traces(
        policy, sizes, windows=windows, count_hits=policy == "probabilistic", **trace_options
    )


def window_std_ratios(traces: Sequence[SelectionStats], windows: Sequence[int]) -> np.ndarray:
    """Fig. 4's sqrt(Var(Y))/T, an array (traces, windows): Y is a client's count in
    consecutive, non-overlapping windows of T rounds."""
    return np.array([[trace.window_std_ratio(t) for t in windows] for trace in traces])
