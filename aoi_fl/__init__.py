"""aoi-fl: client selection policies for federated learning, reproduced from their papers.

Layout (each paper's method in a subpackage that needs only ``core``; its reproduction in
``aoi_fl.evidence``, over the shared layers ``core`` <- ``data`` <- ``pipeline`` <- ``flower``,
which import no paper; ``make lint`` enforces it):

- :mod:`aoi_fl.core`: the selection interface and registry, participation statistics and
  delays, engines, aggregation protocol, trainer and models;
- :mod:`aoi_fl.data`: datasets, client partitions, synthetic tasks;
- :mod:`aoi_fl.pipeline`: configurations and cached runs, the plugins
  (:mod:`~aoi_fl.pipeline.plugins`: the entry points of ``aoi_fl/entry_points.txt`` and of
  installed packages, the evidence packages of :data:`aoi_fl.papers.PAPERS`), profiles,
  plotting, notebook setup;
- :mod:`aoi_fl.flower`: the samplers and algorithms inside Flower (optional extra);
- :mod:`aoi_fl.aoi`: Javani & Wang (the AoI policies, the age chain, Theorems 1-5);
- :mod:`aoi_fl.agnostic`: "Convergence of Agnostic Federated Averaging" (participation
  processes, aggregation rules);
- :mod:`aoi_fl.kvib`: Zeng et al. (K-Vib and the unbiased samplers it is compared with);
- :mod:`aoi_fl.fedsum`: You & Pu (the FedSUM family, its baselines and participation patterns);
- :mod:`aoi_fl.arena`: the field's policies the selection arena adds (Power-of-d-Choice,
  Clustered Sampling, Oort);
- :mod:`aoi_fl.evidence`: each paper's reproduction (configurations, results, claims, checks,
  figures: Figs 5-7 and Table II in :mod:`aoi_fl.evidence.aoi`, and so on).

``docs/equations.md`` maps every equation, theorem and algorithm of the four papers to its
function. Importing ``aoi_fl`` loads only the selection interface (NumPy); each subpackage is
imported where it is used (the training side imports PyTorch).
"""

from aoi_fl.core.selection import Sampler, SeededSampler, Selection

__version__ = "0.1.0"

__all__ = ["Sampler", "SeededSampler", "Selection", "__version__"]
