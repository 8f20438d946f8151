"""The selection arena's evidence (ours): the screen, the confirm tier, the findings.

Configurations (:mod:`~aoi_fl.evidence.arena.experiments`), tables
(:mod:`~aoi_fl.evidence.arena.results`), figures, the ledger rows (``claims.toml``,
:mod:`~aoi_fl.evidence.arena.claims`).
"""

#: read by :mod:`aoi_fl.pipeline.plugins`: the ledger key and title, the modules whose import
#: registers plot styles and families, and the module of the ledger rows
KEY = "arena"
TITLE = "Selection arena (ours, not the papers')"
REGISTERS: tuple[str, ...] = ("experiments",)
CLAIMS = "claims"
#: no paper of its own: no statements to sweep for the ledger's untested list
SWEPT = False
