"""Javani & Wang, "Balancing Client Participation in Federated Learning Using AoI".

Theory: the age chain and Theorem 1 (:mod:`~aoi_fl.aoi.markov`), the memoryless Policies 1-2
(:mod:`~aoi_fl.aoi.memoryless`), Sigma (Theorems 3-5, :mod:`~aoi_fl.aoi.sigma`) and the
selection skew rho (eq. 24, :mod:`~aoi_fl.aoi.skew`). Samplers: the four policies
(:mod:`~aoi_fl.aoi.samplers`).
Its reproduction (configurations, results, claims, checks, figures) is
:mod:`aoi_fl.evidence.aoi`, which depends on this package, never the reverse.
"""
