"""The settings the Figs 2-4 notebooks share (:data:`SELECTION_SETTINGS`, opened by
:func:`selection_setup`): the paper's n = 100 clients, m = 15 a round, m' = 10, 1000 rounds and
Zipf(a = 2) dataset sizes, and what the four policies are under them (Javani & Wang, Sec. III).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from aoi_fl.aoi import markov, memoryless, samplers
from aoi_fl.core.validation import require_choice
from aoi_fl.data import partition
from aoi_fl.pipeline import notebook
from aoi_fl.pipeline.notebook import NotebookSetup
from aoi_fl.pipeline.profiles import resolve_profile, settings

POLICIES = samplers.POLICIES
MEMORYLESS_POLICIES, MARKOV_POLICIES = POLICIES[:2], POLICIES[2:]

_PAPER_SETTINGS = {"n": 100, "m": 15, "m_prime": 10, "rounds": 1000, "zipf_a": 2.0, "size_seed": 0}
#: the Figs 2-4 notebooks' settings per profile. The selection statistics are cheap: cpu and paper
#: use the paper's exact parameters; smoke only has fewer traces, Monte Carlo rounds and draws
SELECTION_SETTINGS = {
    "smoke": {**_PAPER_SETTINGS, "trace_seeds": 2, "mc_rounds": 20_000, "zipf_seeds": 10},
    "cpu": {**_PAPER_SETTINGS, "trace_seeds": 20, "mc_rounds": 400_000, "zipf_seeds": 200},
    "paper": {**_PAPER_SETTINGS, "trace_seeds": 20, "mc_rounds": 400_000, "zipf_seeds": 200},
}


@dataclass(frozen=True)
class SelectionSettings:
    """One profile's row of :data:`SELECTION_SETTINGS`, and what the four policies are under it.

    ``trace_seeds`` traces of ``rounds`` rounds each (Figs 2 and 4), ``mc_rounds`` rounds of
    Monte Carlo (Fig. 2), ``zipf_seeds`` independent Zipf(``zipf_a``) size draws for the spread
    of Policies 1-2's Sigma; the figures use the draw of seed ``size_seed``.
    """

    n: int
    m: int
    m_prime: int
    rounds: int
    zipf_a: float
    size_seed: int
    trace_seeds: int
    mc_rounds: int
    zipf_seeds: int

    def sizes(self, seed: int | None = None) -> np.ndarray:
        """The n dataset sizes, NumPy's Zipf(a) law P(d = k) ~ k^-a, of draw ``seed``
        (default ``size_seed``)."""
        seed = self.size_seed if seed is None else seed
        return partition.zipf_sizes(self.n, self.zipf_a, seed=seed).astype(float)

    def sampler(self, policy: str, sizes: np.ndarray, seed: int, start: str = "stationary"):
        """The policy's sampler (Markov policies from ``start``: stationary or eq. 4's zero)."""
        return samplers.make_sampler(
            policy, n=self.n, m=self.m, sizes=sizes, m_prime=self.m_prime, seed=seed, start=start
        )

    def chain(self, policy: str) -> np.ndarray:
        """p of a Markov policy: Theorem 1's (Policy 3) or the linear family's (Policy 4)."""
        if require_choice("policy", policy, MARKOV_POLICIES) == "markov_optimal":
            return markov.optimal_p(self.n, self.m, self.m_prime)
        return markov.calibrate_family("linear", self.n, self.m, self.m_prime)

    def trace_options(self) -> dict[str, int]:
        """The keywords of :func:`traces.simulate_traces` for ``trace_seeds`` traces of ``rounds``
        rounds."""
        return {
            "n": self.n,
            "m": self.m,
            "m_prime": self.m_prime,
            "seeds": self.trace_seeds,
            "rounds": self.rounds,
        }

    def rates(self, policy: str, sizes: np.ndarray) -> np.ndarray:
        """Per-round selection probabilities r_i of a memoryless policy (Policies 1-2)."""
        if require_choice("policy", policy, MEMORYLESS_POLICIES) == "random":
            return memoryless.random_rates(self.n, self.m)
        return memoryless.probabilistic_rates(sizes, self.m)


def selection_setup(profile: str) -> tuple[str, SelectionSettings, NotebookSetup]:
    """The opening of the Figs 2-4 notebooks: (resolved profile, its settings, notebook setup);
    prints the profile and every setting."""
    profile = resolve_profile(profile)
    cfg = SelectionSettings(**settings(profile, SELECTION_SETTINGS))
    env = notebook.setup(profile, ", ".join(f"{k}={v}" for k, v in asdict(cfg).items()))
    return profile, cfg, env
