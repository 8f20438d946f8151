"""The federated-learning machinery every paper shares, and which imports none of them.

The client-selection interface and its registry (:mod:`~aoi_fl.core.selection`,
:mod:`~aoi_fl.core.registry`), participation statistics (:mod:`~aoi_fl.core.stats`),
parameter-dict helpers (:mod:`~aoi_fl.core.tensors`), the aggregation protocol
(:mod:`~aoi_fl.core.algorithms`, :mod:`~aoi_fl.core.stateful`), local training engines
(:mod:`~aoi_fl.core.engines`), the trainer (:mod:`~aoi_fl.core.train`) and the models
(:mod:`~aoi_fl.core.models`).
"""
