"""The federated-learning machinery every paper shares, and which imports none of them.

The client-selection interface and its registry (:mod:`~aoi_fl.core.selection`,
:mod:`~aoi_fl.core.registry`), participation statistics (:mod:`~aoi_fl.core.stats`),
parameter-dict helpers (:mod:`~aoi_fl.core.tensors`), the aggregation protocol
(:mod:`~aoi_fl.core.algorithms`), local training engines
(:mod:`~aoi_fl.core.engines`, with :mod:`~aoi_fl.core.local_steps`,
:mod:`~aoi_fl.core.gradients`, :mod:`~aoi_fl.core.stacked_layers`,
:mod:`~aoi_fl.core.minibatches`, :mod:`~aoi_fl.core.losses`,
:mod:`~aoi_fl.core.model_support`), the trainer (:mod:`~aoi_fl.core.train`, with
:mod:`~aoi_fl.core.train_settings`, :mod:`~aoi_fl.core.trainer_evaluation`,
:mod:`~aoi_fl.core.evaluation`, :mod:`~aoi_fl.core.lr_schedules`), client availability
(:mod:`~aoi_fl.core.availability`: the models and their registry, with
:mod:`~aoi_fl.core.availability_base` and :mod:`~aoi_fl.core.availability_trace`) and the
models (:mod:`~aoi_fl.core.models`).
"""
