"""You & Pu, "FedSUM Family: Efficient Federated Learning Methods under Arbitrary Client
Participation".

Theory: participation delays tau_t, tau_max, tau_avg (eqs 2-4, :mod:`~aoi_fl.fedsum.delays`).
Samplers: the participation patterns P1-P3 and Cases 1-4 (:mod:`~aoi_fl.fedsum.patterns`).
Algorithms: FedSUM-B, FedSUM, FedSUM-CR (Algorithms 1-3, :mod:`~aoi_fl.fedsum.algorithms`) and
the compared methods (:mod:`~aoi_fl.fedsum.baselines`).
Its reproduction (configurations, results, claims, checks, figures) is
:mod:`aoi_fl.evidence.fedsum`, which depends on this package, never the reverse.
"""
