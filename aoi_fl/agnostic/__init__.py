""" "Convergence of Agnostic Federated Averaging": agnostic (1/|S|) vs weighted FedAvg under
unknown, skewed participation.

Samplers: the participation processes with a skewed prior (:mod:`~aoi_fl.agnostic.samplers`).
Algorithms and theory: the two aggregation rules of Algorithm 1, the induced weights and the
objectives they minimise (:mod:`~aoi_fl.agnostic.algorithms`).
Its reproduction (configurations, results, claims, checks, figures) is
:mod:`aoi_fl.evidence.agnostic`, which depends on this package, never the reverse.
"""
