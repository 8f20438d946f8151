"""Zeng et al., "Enhanced Federated Optimization: Adaptive Unbiased Client Sampling with Reduced
Variance" (K-Vib).

Theory: sampling procedures, the unbiased estimator, its variance and the optimal probabilities
(:mod:`~aoi_fl.kvib.estimators`). Samplers: K-Vib and its baselines
(:mod:`~aoi_fl.kvib.samplers`). Experiments (Figs 2-4, 6-7): configurations
(:mod:`~aoi_fl.kvib.experiments`), tables (:mod:`~aoi_fl.kvib.results`).
"""

#: read by :mod:`aoi_fl.pipeline.plugins`: the paper's key and title in the ledger, the modules
#: whose import registers its samplers, algorithms and styles, and the module of its ledger rows
KEY = "kvib"
TITLE = "K-Vib sampler"
REGISTERS = ("samplers", "estimators", "experiments")
CLAIMS = "claims"
