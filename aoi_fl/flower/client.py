"""A Flower ``ClientApp`` that trains with this project's models, partitions and batches.

Every node reads its client index from its node configuration (``partition-id``, which Flower's
simulation sets to 0..n-1) and answers :class:`~aoi_fl.flower.strategy.SamplerStrategy`'s index
query with it. A training message carries the global parameters, the round index t and the
learning rate; the client runs exactly the local steps the in-process trainer would run for it
in round t (:meth:`~aoi_fl.core.train.FederatedTrainer.client_schedule`: mini-batches drawn from
a generator derived from (seed, t, client), never from global random state, since Flower reuses
one process for many virtual clients) and replies with its parameters and its data size.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from aoi_fl.core.tensors import stack
from aoi_fl.core.train import FederatedTrainer
from aoi_fl.core.validation import require_int
from aoi_fl.flower.strategy import ARRAYS, CONFIG, INDEX_QUERY, METRICS
from aoi_fl.pipeline import plugins


@functools.lru_cache(maxsize=2)
def _trainer(config_json: str, data_root: str) -> FederatedTrainer:
    # one per process and configuration: the data, partition and model are built once per
    # Ray actor, which then trains many virtual clients
    from aoi_fl.pipeline.runs import build_trainer

    return build_trainer(json.loads(config_json), data_root, device="cpu")


def client_index(context: Context) -> int:
    """This node's client index: its ``partition-id``."""
    if "partition-id" not in context.node_config:
        raise ValueError(
            "the node configuration has no 'partition-id': start the nodes with "
            "--node-config 'partition-id=<i>' (Flower's simulation sets it)"
        )
    return int(context.node_config["partition-id"])


def train_client(
    config: dict[str, Any], data_root: str, client: int, t: int, lr: float, arrays: ArrayRecord
) -> tuple[dict[str, torch.Tensor], int]:
    """Client ``client``'s parameters after its local steps of round t from ``arrays``, and its
    data size (what the in-process trainer computes for it)."""
    trainer = _trainer(json.dumps(config, sort_keys=True), data_root)
    params = {k: torch.from_numpy(v.numpy().copy()) for k, v in arrays.items()}
    schedule = trainer.client_schedule(t, client)
    out = trainer.local(stack(params, 1), trainer.data.train, [schedule], lr)
    return {k: v[0] for k, v in out.items()}, len(trainer.data.partition[client])


def client_app(
    config: dict[str, Any] | Callable[[Context], dict[str, Any]],
    data_root: str | Callable[[Context], str] = "data",
    threads: int = 1,
    shipped: tuple = (),
) -> ClientApp:
    """A ClientApp for ``config`` (a run configuration of :mod:`aoi_fl.pipeline.runs`).

    ``config`` and ``data_root`` may instead be functions of the node's ``Context`` (a Flower
    App reads them from its run configuration, which reaches the node with every message).

    Each client trains with ``threads`` torch threads (set on every training message: Flower
    reuses processes): a convolution's sums are split by thread, so the in-process trainer
    gives the same bits only with the same thread count (the grids' workers use 1).
    ``shipped``: the user's registrations the configuration needs
    (:func:`aoi_fl.pipeline.plugins.shipped`), registered in the client's process first.
    """
    threads = require_int("threads", threads, minimum=1)
    app = ClientApp()

    @app.query(INDEX_QUERY)
    def index(message: Message, context: Context) -> Message:
        answer = ConfigRecord({"partition-id": client_index(context)})
        return Message(RecordDict({CONFIG: answer}), reply_to=message)

    @app.train()
    def train(message: Message, context: Context) -> Message:
        plugins.install(shipped)
        torch.set_num_threads(threads)
        sent = message.content[CONFIG]
        client = client_index(context)
        params, size = train_client(
            config(context) if callable(config) else config,
            data_root(context) if callable(data_root) else data_root,
            client,
            int(sent["round"]),
            float(sent["lr"]),
            message.content[ARRAYS],
        )
        arrays = ArrayRecord({k: Array(v.numpy()) for k, v in params.items()})
        metrics = MetricRecord({"num-examples": size, "client": client})
        return Message(RecordDict({ARRAYS: arrays, METRICS: metrics}), reply_to=message)

    return app
