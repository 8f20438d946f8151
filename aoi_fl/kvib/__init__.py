"""Zeng et al., "Enhanced Federated Optimization: Adaptive Unbiased Client Sampling with Reduced
Variance" (K-Vib).

Theory: sampling procedures, the unbiased estimator, its variance and the optimal probabilities
(:mod:`~aoi_fl.kvib.estimators`). Samplers: K-Vib and its baselines
(:mod:`~aoi_fl.kvib.samplers`).
Its reproduction (configurations, results, claims, checks, figures) is
:mod:`aoi_fl.evidence.kvib`, which depends on this package, never the reverse.
"""
