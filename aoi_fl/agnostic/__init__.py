""" "Convergence of Agnostic Federated Averaging": agnostic (1/|S|) vs weighted FedAvg under
unknown, skewed participation.

Samplers: the participation processes with a skewed prior (:mod:`~aoi_fl.agnostic.samplers`).
Algorithms and theory: the two aggregation rules of Algorithm 1, the induced weights and the
objectives they minimise (:mod:`~aoi_fl.agnostic.algorithms`). Experiments (Figs 1-2):
configurations (:mod:`~aoi_fl.agnostic.experiments`), tables (:mod:`~aoi_fl.agnostic.results`).
"""

#: read by :mod:`aoi_fl.pipeline.plugins`: the paper's key and title in the ledger, the modules
#: whose import registers its samplers, algorithms and styles, and the module of its ledger rows
KEY = "agnostic"
TITLE = "agnostic FedAvg under unknown participation"
REGISTERS = ("algorithms", "samplers", "experiments")
CLAIMS = "claims"
