"""Javani & Wang's reproduction: Figs 5-7 and Table II, the theory figures, the claims.

Configurations (:mod:`~aoi_fl.evidence.aoi.experiments`), tables
(:mod:`~aoi_fl.evidence.aoi.results`), figures (:mod:`~aoi_fl.evidence.aoi.figures`,
:mod:`~aoi_fl.evidence.aoi.theory_figures`), the ledger rows (``claims.toml``,
:mod:`~aoi_fl.evidence.aoi.claims`) and the notebooks' checks
(:mod:`~aoi_fl.evidence.aoi.checks`).
"""

#: read by :mod:`aoi_fl.pipeline.plugins`: the ledger key and title, the modules whose import
#: registers plot styles and families, and the module of the ledger rows
KEY = "aoi"
TITLE = "Javani & Wang, Balancing Client Participation in FL Using AoI"
REGISTERS: tuple[str, ...] = ("experiments",)
CLAIMS = "claims"
