"""Javani & Wang, "Balancing Client Participation in Federated Learning Using AoI".

Theory: the age chain and Theorem 1 (:mod:`~aoi_fl.aoi.markov`), the memoryless Policies 1-2
(:mod:`~aoi_fl.aoi.memoryless`), Sigma (Theorems 3-5, :mod:`~aoi_fl.aoi.sigma`) and the
selection skew rho (eq. 24, :mod:`~aoi_fl.aoi.skew`). Samplers: the four policies
(:mod:`~aoi_fl.aoi.samplers`). Experiments (Figs 5-7, Table II): configurations
(:mod:`~aoi_fl.aoi.experiments`), tables (:mod:`~aoi_fl.aoi.results`), figures
(:mod:`~aoi_fl.aoi.figures`).
"""

#: read by :mod:`aoi_fl.pipeline.plugins`: the paper's key and title in the ledger, the modules
#: whose import registers its samplers, algorithms and styles, and the module of its ledger rows
KEY = "aoi"
TITLE = "Javani & Wang, Balancing Client Participation in FL Using AoI"
REGISTERS = ("samplers",)
CLAIMS = "claims"
