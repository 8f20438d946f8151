"""The FedSUM reproduction: Figs 1-4 and 13-14, the delay bounds, the claims.

Configurations (:mod:`~aoi_fl.evidence.fedsum.experiments`), tables
(:mod:`~aoi_fl.evidence.fedsum.results`), figures (:mod:`~aoi_fl.evidence.fedsum.figures`),
the ledger rows (``claims.toml``, :mod:`~aoi_fl.evidence.fedsum.claims`) and the notebooks'
checks.
"""

#: read by :mod:`aoi_fl.pipeline.plugins`: the ledger key and title, the modules whose import
#: registers plot styles and families, and the module of the ledger rows
KEY = "fedsum"
TITLE = "FedSUM family"
REGISTERS: tuple[str, ...] = ("experiments",)
CLAIMS = "claims"
