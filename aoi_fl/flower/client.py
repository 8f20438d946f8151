"""A Flower ``ClientApp`` that trains with this project's models, partitions and batches.

Every node reads its client index from its node configuration (``partition-id``, which Flower's
simulation sets to 0..n-1) and answers :class:`~aoi_fl.flower.strategy.SamplerStrategy`'s index
query with it. A training message carries the global parameters, the round index t, the
learning rate and what the run's algorithm sends besides the model; the client runs the
client side of the algorithm (:class:`aoi_fl.core.algorithms.Algorithm`): it begins from what
it was sent and its own persistent state, runs exactly the local steps the in-process trainer
would run for it in round t (:meth:`~aoi_fl.core.train.FederatedTrainer.client_schedule`:
mini-batches drawn from a generator derived from (seed, t, client), never from global random
state, since Flower reuses one process for many virtual clients), and replies with its
parameters, its upload, its steps and its data size.

**The node's state.** What the algorithm keeps on a client between its rounds (FedSUM's h_i,
FedSUM-CR's z_i and a_i) lives in the node's ``context.state``, which Flower keeps from round to
round; a client not selected for a while keeps it unchanged, as the algorithm defines. Every
training message says which round of this client's the server last used (``accepted``): the
node keeps the state it began its last round from and the one that round produced, and takes
the second only if the server used that reply, so a reply lost on its way leaves node and
server in step. A node started with ``--node-config "state-dir='<dir>'"`` also writes both to
``<dir>/run-<run id>/client-<i>.npz`` after every round it trains, so a node that restarts (a
fresh ``context.state``) resumes from it. A restarted node without that copy cannot rebuild a
state only it held: its reply is an error naming what it lost (the strategy's ``on_failure``
decides), never a silent reset to the initial state.

**Availability.** Asked whether it takes part in round t, the node answers from the run's
availability model (:mod:`aoi_fl.core.availability`, built from the same configuration and
seed): an unavailable node declines with an error reply.

**Losses.** Asked for its losses of a model (a loss-probing sampler's candidate:
Power-of-d-Choice, Oort), the node answers the mean and root mean square of its per-sample
losses on the samples the in-process trainer's probe would take
(:meth:`~aoi_fl.core.train.FederatedTrainer.probe_losses`), and how many.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from flwr.app import (
    Array,
    ArrayRecord,
    ConfigRecord,
    Context,
    Error,
    Message,
    MetricRecord,
    RecordDict,
)
from flwr.clientapp import ClientApp

from aoi_fl.core.algorithms import ClientUpdates
from aoi_fl.core.train import FederatedTrainer
from aoi_fl.core.validation import require_int
from aoi_fl.flower.strategy import (
    ARRAYS,
    AVAILABILITY_QUERY,
    CONFIG,
    EXTRA,
    INDEX_QUERY,
    LOSS_QUERY,
    METRICS,
)
from aoi_fl.pipeline import plugins
from aoi_fl.pipeline.runs import build_trainer

#: the node's persistent state in ``context.state``
STATE = "aoi_fl_client_state"


@functools.lru_cache(maxsize=2)
def _trainer(config_json: str, data_root: str) -> FederatedTrainer:
    # one per process and configuration: the data, partition, model and algorithm are built
    # once per Ray actor, which then trains many virtual clients. Its algorithm object is used
    # for its client-side methods only, which read no table of the trainer: a client's state
    # comes from its node (module docstring).

    return build_trainer(json.loads(config_json), data_root, device="cpu")


def client_index(context: Context) -> int:
    """This node's client index: its ``partition-id``."""
    if "partition-id" not in context.node_config:
        raise ValueError(
            "the node configuration has no 'partition-id': start the nodes with "
            "--node-config 'partition-id=<i>' (Flower's simulation sets it)"
        )
    return int(context.node_config["partition-id"])


def _state_file(context: Context, client: int) -> Path | None:
    folder = context.node_config.get("state-dir")
    if not folder:
        return None
    return Path(str(folder)) / f"run-{context.run_id}" / f"client-{client}.npz"


def _saved(context: Context, client: int) -> dict[str, np.ndarray] | None:
    """What the node kept: from ``context.state``, else from its copy on disk, else None."""
    if STATE in context.state:
        return {k: v.numpy() for k, v in context.state[STATE].items()}
    path = _state_file(context, client)
    if path is None or not path.exists():
        return None
    with np.load(path) as saved:
        return {k: saved[k].copy() for k in saved.files}


def load_state(
    trainer: FederatedTrainer, context: Context, client: int, accepted: int
) -> dict[str, torch.Tensor]:
    """The client's persistent state as of round ``accepted``, the last round whose reply the
    server used (-1: none, the algorithm's initial state). The node keeps two states: the one
    it began its last round from (committed, as of the round before) and the one that round
    produced (pending, until the server says it used the reply); a reply that was lost leaves
    the server at the committed state, and so the node."""
    initial = trainer.algorithm.client_state(trainer.params)
    if not initial or accepted < 0:
        return initial
    saved = _saved(context, client)
    name = trainer.algorithm.name
    if saved is None:
        raise RuntimeError(
            f"client {client} has trained before (the server used its reply of round "
            f"{accepted}) but its node lost its state ({', '.join(sorted(initial))}) and has no "
            f"copy on disk: {name} cannot rebuild it (start the node with "
            "--node-config \"state-dir='<dir>'\" to keep it across restarts)"
        )
    committed, pending = (int(r) for r in saved["rounds"])
    which = {pending: "pending", committed: "committed"}.get(accepted)
    expected = {
        f"{w}.{k}": tuple(v.shape) for w in ("committed", "pending") for k, v in initial.items()
    }
    found = {k: tuple(v.shape) for k, v in saved.items() if k != "rounds"}
    if which is None or found != expected:
        raise RuntimeError(
            f"client {client}'s node holds {name} states of rounds {committed} and {pending} "
            f"with tensors {found}, but the server used its reply of round {accepted} and "
            f"{name} keeps {expected}"
        )
    return {k: torch.from_numpy(saved[f"{which}.{k}"].copy()) for k in initial}


def save_state(
    context: Context,
    client: int,
    committed: dict[str, torch.Tensor],
    accepted: int,
    pending: dict[str, torch.Tensor],
    t: int,
) -> None:
    """Keep the state the client began round t from (``committed``, as of round
    ``accepted``) and the one round t produced (``pending``) in the node's state, and on disk
    when the node has a state folder (written whole, then renamed: a node killed while writing
    keeps its previous copy)."""
    if not pending:
        return
    arrays = {
        **{f"committed.{k}": v.detach().cpu().numpy() for k, v in committed.items()},
        **{f"pending.{k}": v.detach().cpu().numpy() for k, v in pending.items()},
        "rounds": np.array([accepted, t], dtype=np.int64),
    }
    context.state[STATE] = ArrayRecord({k: Array(v) for k, v in arrays.items()})
    path = _state_file(context, client)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial.npz")
        np.savez(partial, **arrays)
        os.replace(partial, path)


@dataclass(frozen=True)
class ClientRound:
    """One client's round: its parameters, upload and persistent state after its local
    steps (without client axis), its step count and data size."""

    params: dict[str, torch.Tensor]
    upload: dict[str, torch.Tensor]
    own: dict[str, torch.Tensor]
    steps: int
    size: int


def train_client(
    config: dict[str, Any],
    data_root: str,
    client: int,
    t: int,
    lr: float,
    arrays: ArrayRecord,
    sent: dict[str, torch.Tensor] | None = None,
    own: dict[str, torch.Tensor] | None = None,
) -> ClientRound:
    """Client ``client``'s round t from the global model ``arrays``, what the server ``sent``
    besides it and the client's persistent state ``own`` (None: its initial state): what the
    in-process trainer computes for it."""
    trainer = _trainer(json.dumps(config, sort_keys=True), data_root)
    algorithm = trainer.algorithm
    params = {k: torch.from_numpy(v.numpy().copy()) for k, v in arrays.items()}
    own = algorithm.client_state(trainer.params) if own is None else own
    one = {k: v[None] for k, v in own.items()}
    start, state = algorithm.client_begin(
        t, lr, 1, params, {k: v[None] for k, v in (sent or {}).items()}, one
    )
    schedule = trainer.client_schedule(t, client)
    out = trainer.local(start, trainer.data.train, [schedule], lr, algorithm.local_step, state)
    ids = np.array([client], dtype=np.int64)
    steps = np.array([len(schedule)], dtype=np.int64)
    updates = ClientUpdates(t, lr, ids, np.ones(1), start, out, state, steps)
    upload, new = algorithm.client_end(updates, one)
    return ClientRound(
        {k: v[0] for k, v in out.items()},
        {k: v[0] for k, v in upload.items()},
        {k: v[0] for k, v in new.items()},
        int(steps[0]),
        len(trainer.data.partition[client]),
    )


def client_losses(
    config: dict[str, Any], data_root: str, client: int, arrays: ArrayRecord, samples: int | None
) -> tuple[float, float, int]:
    """Client ``client``'s mean and root-mean-square loss of the model ``arrays`` on (up to)
    ``samples`` of its training samples, as the in-process trainer's loss probe computes them,
    and how many samples that took."""
    trainer = _trainer(json.dumps(config, sort_keys=True), data_root)
    # the probe reads trainer.params, which is also the template of a client's initial state
    # (train_client): lent for the probe only
    kept = trainer.params
    trainer.params = {k: torch.from_numpy(v.numpy().copy()) for k, v in arrays.items()}
    try:
        mean, rms = trainer.probe_losses(np.array([client]), samples, free=True)
    finally:
        trainer.params = kept
    taken = len(trainer.data.partition[client])
    return float(mean[0]), float(rms[0]), taken if samples is None else min(samples, taken)


def train_reply(
    config: dict[str, Any], data_root: str, message: Message, context: Context
) -> RecordDict:
    """The reply to a training message: this node's client's round (:func:`train_client`)
    from the state of the round the server last used, the state it produced kept by the node,
    and the client's parameters, upload, steps and data size as the reply's records."""
    sent = message.content[CONFIG]
    client = client_index(context)
    trainer = _trainer(json.dumps(config, sort_keys=True), data_root)
    accepted = int(sent["accepted"])
    own = load_state(trainer, context, client, accepted)
    extra = message.content[EXTRA] if EXTRA in message.content else None
    result = train_client(
        config,
        data_root,
        client,
        int(sent["round"]),
        float(sent["lr"]),
        message.content[ARRAYS],
        None
        if extra is None
        else {k: torch.from_numpy(v.numpy().copy()) for k, v in extra.items()},
        own,
    )
    save_state(context, client, own, accepted, result.own, int(sent["round"]))
    content = RecordDict(
        {
            ARRAYS: ArrayRecord({k: Array(v.numpy()) for k, v in result.params.items()}),
            METRICS: MetricRecord(
                {"num-examples": result.size, "client": client, "steps": result.steps}
            ),
        }
    )
    if result.upload:
        content[EXTRA] = ArrayRecord({k: Array(v.numpy()) for k, v in result.upload.items()})
    return content


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

    def settings(context: Context) -> tuple[dict[str, Any], str]:
        plugins.install(shipped)
        return (
            config(context) if callable(config) else config,
            data_root(context) if callable(data_root) else data_root,
        )

    @app.query(INDEX_QUERY)
    def index(message: Message, context: Context) -> Message:
        answer = ConfigRecord({"partition-id": client_index(context)})
        return Message(RecordDict({CONFIG: answer}), reply_to=message)

    @app.query(AVAILABILITY_QUERY)
    def available(message: Message, context: Context) -> Message:
        run_config, root = settings(context)
        trainer = _trainer(json.dumps(run_config, sort_keys=True), root)
        client, t = client_index(context), int(message.content[CONFIG]["round"])
        model = trainer.availability
        if model is not None and not bool(model.mask(t)[client]):
            return Message(
                Error(code=0, reason=f"client {client} is unavailable in round {t}"),
                reply_to=message,
            )
        return Message(RecordDict({CONFIG: ConfigRecord({"available": True})}), reply_to=message)

    @app.query(LOSS_QUERY)
    def losses(message: Message, context: Context) -> Message:
        run_config, root = settings(context)
        torch.set_num_threads(threads)
        samples = int(message.content[CONFIG]["samples"]) or None
        mean, rms, taken = client_losses(
            run_config, root, client_index(context), message.content[ARRAYS], samples
        )
        answer = ConfigRecord({"mean": mean, "rms": rms, "samples": taken})
        return Message(RecordDict({CONFIG: answer}), reply_to=message)

    @app.train()
    def train(message: Message, context: Context) -> Message:
        run_config, root = settings(context)
        torch.set_num_threads(threads)
        return Message(train_reply(run_config, root, message, context), reply_to=message)

    return app
