"""The K-Vib reproduction: Figs 2-4 and 6-7, Example 3.2, the claims.

Configurations (:mod:`~aoi_fl.evidence.kvib.experiments`), tables
(:mod:`~aoi_fl.evidence.kvib.results`), figures, the ledger rows (``claims.toml``,
:mod:`~aoi_fl.evidence.kvib.claims`) and the notebooks' checks.
"""

#: read by :mod:`aoi_fl.pipeline.plugins`: the ledger key and title, the modules whose import
#: registers plot styles and families, and the module of the ledger rows
KEY = "kvib"
TITLE = "K-Vib sampler"
REGISTERS: tuple[str, ...] = ("experiments",)
CLAIMS = "claims"
