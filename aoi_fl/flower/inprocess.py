"""A Flower grid in this process: a ClientApp answers every node's messages, no Ray, no network.

:class:`InProcessGrid` is what a strategy talks to in Flower (``get_node_ids`` and
``send_and_receive``), with each node's ``Context`` kept for the whole run as Flower keeps it.
It runs a federation deterministically and in seconds, which makes it the place to check that
a strategy and a ClientApp agree with the in-process trainer before a Ray simulation or a
deployment; its failure switches (errors, silence, restarts) are the events a federation must
survive.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import torch
from flwr.app import Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.constant import ErrorCode
from flwr.supercore.task_identity import TaskIdentity

from aoi_fl.flower.client import client_app
from aoi_fl.flower.simulation import FlowerRun, flower_logs, serve
from aoi_fl.flower.strategy import AVAILABILITY_QUERY, CONFIG
from aoi_fl.pipeline.runs import build_trainer, resolve_config


class InProcessGrid:
    """The two Grid calls a strategy makes, answered by a ClientApp per node in this process.

    Node ids are scrambled (as Flower's are); ``partition_ids`` maps them to what each node
    answers. Each node keeps one ``Context`` for the whole run, as Flower keeps a node's state
    from round to round. ``fail`` names nodes whose training replies are errors; ``silent``
    nodes never answer a training message (a reply that does not come before the timeout);
    ``lost`` nodes train (their state moves on) but their training replies never arrive;
    ``restart`` holds (node, round t) pairs: the node restarts before its message of round t,
    with a fresh ``context.state``; ``away`` nodes never answer the availability query (a node
    that does not answer in time); ``node_config`` is added to every node's configuration.
    ``record``: a list to which every training message's arrays and its reply's are appended
    (:func:`train_messages`).
    """

    def __init__(
        self,
        app: ClientApp,
        partition_ids: Mapping[int, int],
        fail: Iterable[int] = (),
        silent: Iterable[int] = (),
        lost: Iterable[int] = (),
        away: Iterable[int] = (),
        restart: Iterable[tuple[int, int]] = (),
        node_config: Mapping[str, Any] | None = None,
        record: list | None = None,
    ) -> None:
        self.app, self.partition_ids = app, partition_ids
        self.record = record
        self.fail, self.silent, self.restart = set(fail), set(silent), set(restart)
        self.lost, self.away = set(lost), set(away)
        self.timeouts: list[float | None] = []  # the timeout of every send_and_receive
        self.sent: list[tuple[str, int]] = []  # (message type, node) of every message
        self.contexts = {
            node: Context(
                run_id=1,
                node_id=node,
                node_config={"partition-id": index, **(node_config or {})},
                state=RecordDict(),
                run_config={},
            )
            for node, index in partition_ids.items()
        }

    def get_node_ids(self) -> list[int]:
        return list(self.partition_ids)

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> list[Message]:
        """Each message answered by its node's ClientApp, in reverse order (Flower delivers
        replies in completion order, not in the order sent); nothing for a silent node. An
        exception in the ClientApp is an error reply, as in Flower's runtime."""
        self.timeouts.append(timeout)
        replies = []
        for message in messages:
            node, kind = message.metadata.dst_node_id, message.metadata.message_type
            self.sent.append((kind, node))
            reply = self._answer(message, node, kind)
            if reply is not None:
                replies.append(reply)
            if kind == "train" and self.record is not None:
                answered = reply is not None and not reply.has_error()
                self.record.append((arrays(message), arrays(reply) if answered else None))
        return replies[::-1]

    def _answer(self, message: Message, node: int, kind: str) -> Message | None:
        """``node``'s reply to ``message`` as the failure switches make it (None: none comes)."""
        if kind.endswith(AVAILABILITY_QUERY) and node in self.away:
            return None
        if kind == "train":
            if node in self.silent:
                return None
            if node in self.fail:
                return Message(Error(code=1, reason="node lost"), reply_to=message)
            # a plain ClientApp's messages carry no round: only the restart switch reads it
            if self.restart and (node, int(message.content[CONFIG]["round"])) in self.restart:
                self.contexts[node].state = RecordDict()
        try:
            reply = self.app(message, self.contexts[node])
        except Exception as error:  # noqa: BLE001  (as Flower's runtime: an error reply)
            reason = f"{type(error)}:<'{error}'>"
            return Message(
                Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=reason),
                reply_to=message,
            )
        return None if kind == "train" and node in self.lost else reply


def arrays(message: Message) -> dict[str, dict[str, tuple[int, ...]]]:
    """The arrays a message carries: record -> array -> shape."""
    return {
        name: {k: tuple(a.shape) for k, a in record.items()}
        for name, record in message.content.array_records.items()
    }


def node_ids(n: int) -> dict[int, int]:
    """Node id -> client index of :func:`run_in_process`'s n nodes: ids unrelated to the
    indices (a seeded permutation), as Flower's are."""
    order = np.random.default_rng(n).permutation(n)
    return {1_000 + 7 * j: int(i) for j, i in enumerate(order)}


def run_in_process(
    config: dict[str, Any],
    *,
    data_root: str = "data",
    on_failure: str = "renormalise",
    timeout: float = 600.0,
    threads: int = 1,
    quiet: bool = True,
    **grid: Any,
) -> FlowerRun:
    """``config`` trained by Flower's strategy and ClientApp on an :class:`InProcessGrid` (a
    node per client, :func:`node_ids`; ``grid``: its failure switches, by node id): what
    :func:`aoi_fl.flower.simulation.run_flower` does on Ray, the same records, in seconds.
    ``quiet`` keeps Flower's log to errors (:func:`aoi_fl.flower.simulation.flower_logs`)."""

    resolved = resolve_config(config)
    server = build_trainer(resolved, data_root, device="cpu")
    nodes = node_ids(server.sampler.n)
    nodes_grid = InProcessGrid(client_app(resolved, data_root, threads), nodes, **grid)
    before = torch.get_num_threads()  # the ClientApp sets the clients' count in this process
    try:
        with task_identity(), flower_logs(quiet):
            return serve(nodes_grid, server, on_failure=on_failure, timeout=timeout)
    finally:
        torch.set_num_threads(before)


def train_messages(
    config: dict[str, Any], *, data_root: str = "data", threads: int = 1
) -> list[tuple[dict, dict | None]]:
    """The arrays of every training message of ``config``'s run by :func:`run_in_process` and
    of its reply (record -> array -> shape; None: no reply), in the order sent: what the
    strategy and the ClientApp send each other, for counting
    (:mod:`aoi_fl.evidence.fedsum.costs`)."""
    record: list[tuple[dict, dict | None]] = []
    run_in_process(config, data_root=data_root, threads=threads, record=record)
    return record


@contextlib.contextmanager
def task_identity() -> Iterator[None]:
    """Flower's task identity (run, task and node ids), which every ``Message`` reads and
    Flower's runtime sets, set to 1 where unset for the block (then restored)."""
    names = ("_task_id", "_run_id", "_node_id")
    before = {name: getattr(TaskIdentity, name) for name in names}
    for name, value in before.items():
        if value is None:
            setattr(TaskIdentity, name, 1)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(TaskIdentity, name, value)
