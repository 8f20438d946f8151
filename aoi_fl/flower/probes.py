"""The loss probes of Power-of-d-Choice and Oort over Flower messages.

A policy with ``wants_losses`` calls its loss probe (:class:`aoi_fl.core.selection.LossProbe`)
while it draws: the candidates' losses of the current global model. In Flower that is one
message to each candidate's node and a reply carrying its mean and root-mean-square loss;
:func:`loss_probe` makes such a probe from how a strategy asks (``ask``: the message to a
client's node) and how it reads a reply (``read``), the same for the project's strategy
(a query its ClientApp answers) and for the selection adapter (the user's evaluate messages).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from flwr.app import Message
from flwr.serverapp import Grid

from aoi_fl.core.selection import LossProbe


def loss_probe(
    grid: Grid,
    ask: Callable[[int, int | None], Message],
    read: Callable[[Message], tuple[float, float, int]],
    timeout: float,
    policy: str,
    count: Callable[[int], None] | None = None,
) -> LossProbe:
    """A :class:`~aoi_fl.core.selection.LossProbe` that sends ``ask(client, samples)`` to each
    client of ``ids`` and reads (mean, rms, samples evaluated) from each reply with ``read``,
    waiting at most ``timeout`` seconds. A node that fails, or does not answer in time, is an
    error naming the client and policy ``policy``. ``count`` hears how many samples a probe
    that is not ``free`` evaluated (the trainer's ``probed``)."""

    def probe(
        ids: np.ndarray, samples: int | None = None, *, free: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        ids = np.asarray(ids, dtype=np.int64)
        messages = {int(i): ask(int(i), samples) for i in ids}
        client_of = {m.metadata.dst_node_id: i for i, m in messages.items()}
        answers: dict[int, tuple[float, float, int]] = {}
        for reply in grid.send_and_receive(list(messages.values()), timeout=timeout):
            i = client_of[reply.metadata.src_node_id]
            if reply.has_error():
                raise RuntimeError(
                    f"client {i} (node {reply.metadata.src_node_id}) failed the loss probe of "
                    f"policy {policy!r}: {reply.error.reason}"
                )
            answers[i] = read(reply)
        if silent := sorted(set(messages) - set(answers)):
            raise RuntimeError(
                f"clients {silent} did not answer the loss probe of policy {policy!r} within "
                f"{timeout} s (timeout)"
            )
        if count is not None and not free:
            count(sum(answers[int(i)][2] for i in ids))
        mean = np.array([answers[int(i)][0] for i in ids], dtype=np.float64)
        rms = np.array([answers[int(i)][1] for i in ids], dtype=np.float64)
        return mean, rms

    return probe
