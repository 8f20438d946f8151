"""A Flower strategy driven by an ``aoi_fl`` sampler (issue 17).

Flower's own strategies draw clients with Python's global ``random`` over node ids that change
from run to run. :class:`SamplerStrategy` instead

1. maps node ids to client indices once, by asking every node for its ``partition-id`` (a
   query message, answered by :func:`aoi_fl.flower.client.client_app`), and checks that the
   map is a bijection onto 0..n-1;
2. each round asks the sampler for a :class:`~aoi_fl.core.selection.Selection` and sends
   training messages to exactly the selected clients' nodes, with the round index t and the
   learning rate eta_t;
3. aggregates the replies sorted by client index (Flower delivers them in completion order),
   in float64, with the selection's weights, through the in-process trainer's own FedAvg
   (:class:`aoi_fl.core.algorithms.FedAvg`): ``weighted_sum`` theta = sum_i w_i theta_i (eq. 15
   of the AoI paper), or ``weighted_delta`` theta = theta + eta_g sum_i w_i (theta_i - theta)
   (unbiased estimators whose weights do not sum to one); given the same client models, the
   aggregate is the trainer's bit for bit;
4. passes the update norms ||theta_i - theta||_2 back to the sampler, as the in-process
   trainer does, and records ``selected``, ``weights``, ``update_norms`` and ``lr`` per round in
   the trainer's form (:data:`aoi_fl.core.train.HISTORY_KEYS`), so the participation
   statistics, delays and skews of the project apply to a Flower run unchanged.

An empty selection sends nothing and keeps the model. A failed reply (an error message, or no
reply before the timeout) is handled by ``on_failure``: ``"renormalise"`` scales the surviving
weights to the selection's total, ``"drop"`` keeps the weights and counts the failed client's
update as zero (the model it was sent), ``"error"`` raises. Failed clients are recorded per round
(``failed``) and get no feedback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from logging import INFO

import numpy as np
import torch
from flwr.app import (
    Array,
    ArrayRecord,
    ConfigRecord,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy
from flwr.supercore import log

from aoi_fl.core.algorithms import ClientUpdates, FedAvg, update_norms
from aoi_fl.core.selection import Sampler
from aoi_fl.core.tensors import stack
from aoi_fl.core.train import FederatedTrainer
from aoi_fl.core.validation import require_choice

#: what a failed reply does to the round (module docstring)
ON_FAILURE = ("renormalise", "drop", "error")
#: the query action a node answers with its client index (``partition-id``)
INDEX_QUERY = "aoi_fl_index"
ARRAYS, CONFIG, METRICS = "arrays", "config", "metrics"


def node_map(answers: Mapping[int, object], n: int) -> dict[int, int]:
    """Client index -> node id from each node's answered ``partition-id`` (node id -> answer).

    Raises an error naming the offending nodes unless the answers are exactly 0..n-1, once each.
    """
    by_index: dict[int, list[int]] = {}
    for node, answer in answers.items():
        if isinstance(answer, bool) or not isinstance(answer, int | np.integer):
            raise ValueError(f"node {node} answered partition-id {answer!r}, not an integer")
        by_index.setdefault(int(answer), []).append(node)
    duplicates = {i: nodes for i, nodes in by_index.items() if len(nodes) > 1}
    outside = sorted(i for i in by_index if not 0 <= i < n)
    missing = sorted(set(range(n)) - set(by_index))
    if duplicates or outside or missing:
        raise ValueError(
            f"the nodes' partition-ids must be 0..{n - 1} (the sampler's clients), once each; "
            f"duplicated: {duplicates or 'none'}, outside the range: {outside or 'none'}, "
            f"missing: {missing or 'none'}"
        )
    return {i: nodes[0] for i, nodes in sorted(by_index.items())}


def _tensors(record: ArrayRecord) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(v.numpy().copy()) for k, v in record.items()}


class SamplerStrategy(Strategy):
    """Select with ``sampler``, aggregate with the selection's weights (module docstring).

    ``lr_schedule`` maps the round index t = 0, 1, ... to the clients' learning rate, sent with
    every training message (``config["lr"]``, with ``config["round"]`` = t).
    """

    def __init__(
        self,
        sampler: Sampler,
        lr_schedule: Callable[[int], float],
        *,
        aggregation: str = "weighted_sum",
        server_lr: float = 1.0,
        on_failure: str = "renormalise",
    ) -> None:
        if not isinstance(sampler, Sampler):
            raise TypeError(f"sampler must be an aoi_fl Sampler, got {type(sampler).__name__}")
        if type(sampler).inform is not Sampler.inform:  # it reads every client's update
            raise ValueError(
                f"sampler {sampler.name!r} needs every client's update before it draws "
                "(full information), which a Flower round does not provide"
            )
        self.sampler = sampler
        self.lr_schedule = lr_schedule
        # FedAvg's two rules, as the in-process trainer aggregates (it checks the options)
        self.rule = FedAvg(aggregation=aggregation, server_lr=server_lr)
        self.aggregation, self.server_lr = self.rule.aggregation, self.rule.server_lr
        self.on_failure = require_choice("on_failure", on_failure, ON_FAILURE)
        self.nodes: dict[int, int] | None = None  # client index -> node id
        self.history: dict[str, list] = {
            key: [] for key in ("lr", "selected", "weights", "update_norms", "failed")
        }
        self._round: dict | None = None

    @classmethod
    def from_trainer(cls, trainer: FederatedTrainer, on_failure: str = "renormalise"):
        """The strategy of an in-process trainer's run: its sampler, learning-rate schedule and
        FedAvg rule. Other algorithms (client state, averaged iterates, projections) are refused."""
        rule = trainer.algorithm
        if type(rule) is not FedAvg or rule.options():
            raise ValueError(
                f"training.algorithm {rule.config()} does not run in Flower: only 'fedavg' with "
                "an aggregation ('weighted_sum' or 'weighted_delta') and a server_lr"
            )
        return cls(
            trainer.sampler,
            trainer.lr_schedule,
            aggregation=rule.aggregation,
            server_lr=rule.server_lr,
            on_failure=on_failure,
        )

    # -- the node map ------------------------------------------------------------------------

    def map_nodes(self, grid: Grid, timeout: float | None = None) -> dict[int, int]:
        """Ask every node for its client index (once per strategy) and check the map."""
        if self.nodes is None:
            node_ids = sorted(grid.get_node_ids())
            query = [
                Message(
                    content=RecordDict({CONFIG: ConfigRecord({"ask": "partition-id"})}),
                    message_type=f"{MessageType.QUERY}.{INDEX_QUERY}",
                    dst_node_id=node,
                )
                for node in node_ids
            ]
            answers = {}
            for reply in grid.send_and_receive(query, timeout=timeout):
                node = reply.metadata.src_node_id
                if reply.has_error():
                    raise RuntimeError(f"node {node} did not answer the index query: {reply.error}")
                answers[node] = reply.content[CONFIG]["partition-id"]
            if silent := sorted(set(node_ids) - set(answers)):
                raise RuntimeError(f"nodes {silent} did not answer the index query")
            self.nodes = node_map(answers, self.sampler.n)
        return self.nodes

    # -- training ----------------------------------------------------------------------------

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        nodes = self.map_nodes(grid)
        t = server_round - 1
        selection = self.sampler.sample()
        lr = float(self.lr_schedule(t))
        self._round = {"t": t, "lr": lr, "selection": selection, "global": arrays}
        sent = ConfigRecord({**dict(config), "round": t, "lr": lr})
        return [
            Message(
                content=RecordDict({ARRAYS: arrays, CONFIG: sent}),
                message_type=MessageType.TRAIN,
                dst_node_id=nodes[int(i)],
            )
            for i in selection.ids
        ]

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        if self._round is None or self._round["t"] != server_round - 1:
            raise RuntimeError(f"aggregate_train for round {server_round} was not configured")
        r, self._round = self._round, None
        selection, client_of = r["selection"], {v: k for k, v in self.nodes.items()}
        received: dict[int, ArrayRecord] = {}
        errors: dict[int, str] = {}
        for reply in replies:
            i = client_of[reply.metadata.src_node_id]
            if reply.has_error():
                errors[i] = str(reply.error.reason)
            else:
                received[i] = reply.content[ARRAYS]
        ids = selection.ids.astype(np.int64)
        weights = selection.weights.astype(np.float64)
        ok = np.array([int(i) in received for i in ids], dtype=bool)
        failed = [int(i) for i in ids[~ok]]
        if failed and self.on_failure == "error":
            reasons = {i: errors.get(i, "no reply before the timeout") for i in failed}
            raise RuntimeError(f"round {server_round}: clients failed: {reasons}")
        used = weights[ok]
        if failed and self.on_failure == "renormalise" and used.size:
            used = used * (weights.sum() / used.sum())
        global_params = _tensors(r["global"])
        kept = ids[ok]
        replied = {i: _tensors(received[int(i)]) for i in kept}
        if failed and self.on_failure == "drop" and self.aggregation == "weighted_sum" and ok.any():
            # a failed client's update counts as zero: it returns the model it was sent
            kept, used = ids, weights
            replied.update({int(i): global_params for i in ids[~ok]})
        # the trainer's own aggregation and feedback, on the replies in client-index order
        updates = ClientUpdates(
            t=r["t"],
            lr=r["lr"],
            ids=kept,
            weights=used,
            start=stack(global_params, kept.size),
            params={
                k: torch.stack([replied[int(i)][k] for i in kept]) if kept.size else v[None][:0]
                for k, v in global_params.items()
            },
            state={},
            steps=np.zeros(kept.size, dtype=np.int64),
        )
        norms_all = update_norms(global_params, updates)
        norms = norms_all[np.isin(kept, ids[ok])]
        self.sampler.feedback(ids[ok], norms)
        h = self.history
        h["lr"].append(r["lr"])
        h["selected"].append(ids.tolist())
        h["weights"].append(selection.weights.tolist())
        h["update_norms"].append(norms.tolist())
        h["failed"].append(failed)
        log(INFO, "aggregate_train: %d of %d selected clients replied", ok.sum(), ids.size)
        if not ok.any():
            return None, None  # nothing arrived (or nothing was selected): the model is kept
        new = self.rule.aggregate(global_params, updates)
        out = ArrayRecord({k: Array(v.numpy()) for k, v in new.items()})
        return out, MetricRecord({"clients": int(ok.sum()), "failed": len(failed)})

    # -- no federated evaluation: the model is evaluated centrally (``evaluate_fn``) ---------

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        return []

    def aggregate_evaluate(
        self, server_round: int, replies: Iterable[Message]
    ) -> MetricRecord | None:
        return None

    def summary(self) -> None:
        log(
            INFO,
            "\t├──> sampler %s (n = %d), aggregation %s, on failure: %s",
            self.sampler.name,
            self.sampler.n,
            self.aggregation,
            self.on_failure,
        )
