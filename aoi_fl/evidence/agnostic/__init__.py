"""The reproduction of "Convergence of Agnostic Federated Averaging": Figs 1-2 and the claims.

Configurations (:mod:`~aoi_fl.evidence.agnostic.experiments`), tables
(:mod:`~aoi_fl.evidence.agnostic.results`), figures, the ledger rows (``claims.toml``,
:mod:`~aoi_fl.evidence.agnostic.claims`) and the notebooks' checks.
"""

#: read by :mod:`aoi_fl.pipeline.plugins`: the ledger key and title, the modules whose import
#: registers plot styles and families, and the module of the ledger rows
KEY = "agnostic"
TITLE = "agnostic FedAvg under unknown participation"
REGISTERS: tuple[str, ...] = ("experiments",)
CLAIMS = "claims"
