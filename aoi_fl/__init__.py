"""aoi-fl: client selection policies for federated learning, reproduced from their papers.

The selection side is plain NumPy/SciPy and imported here:

- :mod:`aoi_fl.markov`: the age chain, the law of the inter-selection interval X, Theorem 1;
- :mod:`aoi_fl.sigma`: Sigma = sum_i Var[w_i] of the four policies (Theorems 3-5);
- :mod:`aoi_fl.samplers`: the four policies behind one :class:`~aoi_fl.selection.Sampler` interface;
- :mod:`aoi_fl.stats`: streaming selection statistics (intervals, window counts, empirical Sigma);
- :mod:`aoi_fl.memoryless`: closed forms for the memoryless Policies 1-2.

The training side imports PyTorch and is loaded on demand: ``aoi_fl.data``, ``aoi_fl.partition``,
``aoi_fl.models``, ``aoi_fl.engines``, ``aoi_fl.algorithms``, ``aoi_fl.train``, ``aoi_fl.runs``
(configurations, registries, cached runs), ``aoi_fl.cache``. The compared methods: agnostic
FedAvg (``aoi_fl.agnostic``), the FedSUM family and its baselines (``aoi_fl.fedsum``,
``aoi_fl.baselines``, ``aoi_fl.patterns``, ``aoi_fl.delays``) and K-Vib with its baselines
(``aoi_fl.unbiased``, ``aoi_fl.unbiased_samplers``).
"""

from . import markov, memoryless, profiles, samplers, seeding, selection, sigma, stats
from .samplers import POLICIES, make_sampler
from .selection import Sampler, Selection

__version__ = "0.1.0"

__all__ = [
    "POLICIES",
    "Sampler",
    "Selection",
    "__version__",
    "make_sampler",
    "markov",
    "memoryless",
    "profiles",
    "samplers",
    "seeding",
    "selection",
    "sigma",
    "stats",
]
