"""You & Pu, "FedSUM Family: Efficient Federated Learning Methods under Arbitrary Client
Participation".

Theory: participation delays tau_t, tau_max, tau_avg (eqs 2-4, :mod:`~aoi_fl.fedsum.delays`).
Samplers: the participation patterns P1-P3 and Cases 1-4 (:mod:`~aoi_fl.fedsum.patterns`).
Algorithms: FedSUM-B, FedSUM, FedSUM-CR (Algorithms 1-3, :mod:`~aoi_fl.fedsum.algorithms`) and
the compared methods (:mod:`~aoi_fl.fedsum.baselines`). Experiments (Figs 1-4, 13-14):
configurations (:mod:`~aoi_fl.fedsum.experiments`), tables (:mod:`~aoi_fl.fedsum.results`),
figures (:mod:`~aoi_fl.fedsum.figures`).
"""

#: read by :mod:`aoi_fl.pipeline.plugins`: the paper's key and title in the ledger, the modules
#: whose import registers its samplers, algorithms and styles, and the module of its ledger rows
KEY = "fedsum"
TITLE = "FedSUM family"
REGISTERS = ("patterns", "algorithms", "baselines", "experiments")
CLAIMS = "claims"
