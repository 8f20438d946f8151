"""A Flower strategy driven by an ``aoi_fl`` sampler.

Flower's own strategies draw clients with Python's global ``random`` over node ids that change
from run to run. :class:`SamplerStrategy` instead

1. maps node ids to client indices once, by asking every node for its ``partition-id`` (a
   query message, answered by :func:`aoi_fl.flower.client.client_app`), and checks that the
   map is a bijection onto 0..n-1;
2. each round asks the sampler for a :class:`~aoi_fl.core.selection.Selection` and sends
   training messages to exactly the selected clients' nodes, with the round index t and the
   learning rate eta_t;
3. runs the server's side of the run's algorithm (:class:`aoi_fl.core.algorithms.Algorithm`):
   what it sends each selected client besides the model (FedSUM's y, SCAFFOLD's c, FedAWE's
   stale model) and, on the replies sorted by client index (Flower delivers them in completion
   order), its server update: FedAvg's weighted sums (eq. 15 of the AoI paper, or the
   unbiased estimators' ``weighted_delta``), the agnostic and weighted FedAvg, the averaged
   iterate, MIFA's and FedVARP's tables, FedAU's weights, FedSUM's y; the algorithm object
   holds the server's state. The nodes keep their own persistent state (FedSUM's h_i, SCAFFOLD's
   c_i, :mod:`aoi_fl.flower.client`); given the same client models the update is the
   trainer's bit for bit;
4. passes the update norms ||theta_i - theta||_2 back to the sampler, as the in-process
   trainer does, and records ``selected``, ``weights``, ``update_norms`` and ``lr`` per round in
   the trainer's form (:data:`aoi_fl.core.train.HISTORY_KEYS`), so the participation
   statistics, delays and skews of the project apply to a Flower run unchanged.

**Loss probes.** A sampler that ranks clients by their loss (Power-of-d-Choice, Oort:
``wants_losses``) asks, while it draws, each candidate's node for its losses of the current
global model (a loss query, answered by :func:`aoi_fl.flower.client.client_app` with the
in-process trainer's probe on the same samples; :mod:`aoi_fl.flower.probes`); the round records
``probed`` (the samples evaluated beyond the participants' own), as the trainer does.

An empty selection sends nothing; the server's update still runs (FedSUM and MIFA step with
their aggregates in every round, FedAU counts the absence), as in the trainer. A failed reply
(an error message, or no reply before the timeout) is handled by ``on_failure``:
``"renormalise"`` scales the surviving weights to the selection's total, ``"drop"`` keeps the
weights and counts the failed client's update as zero (the model it was sent) under
``weighted_sum``, ``"error"`` raises naming how many clients were expected and how many
answered. The methods that do not aggregate with the selection's weights (SCAFFOLD, MIFA, ...)
treat a failed client as one that was not selected. Failed clients are recorded per round
(``failed``) and get no feedback.

Nothing waits for ever: the node map waits at most ``timeout`` seconds for the n nodes to
connect and then fails naming how many were expected and how many came; every round waits at
most ``timeout`` seconds for its replies.

**Availability as node behaviour.** With an availability model
(:mod:`aoi_fl.core.availability`), each round starts by asking every node whether it can take
part; a node that is unavailable in round t (by the model, from the run's configuration)
declines, and one that does not answer before the timeout counts as unavailable too. The
sampler (availability aware, as in the trainer) draws among those that accepted, and the round
records ``available``: the in-process trainer's mask, when the nodes follow the same model.
"""

from __future__ import annotations

import time
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

from aoi_fl.core.algorithms import Algorithm, ClientUpdates, FedAvg, merged_sides, update_norms
from aoi_fl.core.selection import LossProbe, Sampler, check_available_selection
from aoi_fl.core.train import AVAILABILITY_KEY, PROBE_KEY, FederatedTrainer
from aoi_fl.core.validation import require_choice, require_real
from aoi_fl.flower.probes import loss_probe

#: what a failed reply does to the round (module docstring)
ON_FAILURE = ("renormalise", "drop", "error")
#: the query actions a node answers: its client index (``partition-id``), whether it can take
#: part in a round, and its losses of the global model (a loss-probing sampler's candidates)
INDEX_QUERY, AVAILABILITY_QUERY = "aoi_fl_index", "aoi_fl_available"
LOSS_QUERY = "aoi_fl_losses"
#: a message's records: the model, what the algorithm adds to it (both ways), the settings
ARRAYS, EXTRA, CONFIG, METRICS = "arrays", "extra", "config", "metrics"


def require_cpu(config: Mapping[str, object]) -> None:
    """Flower runs train on the CPU: the server and every node build their trainers there, and
    Ray is asked for no GPU (a node's model and data would have to move to the device and its
    reply back every round, untested without a GPU). A configuration that names another device
    is refused, naming it, before anything starts; ``auto`` means the CPU here."""
    training = config.get("training")
    device = training.get("device", "auto") if isinstance(training, Mapping) else "auto"
    if device not in ("auto", "cpu"):
        raise ValueError(
            f"training.device={device!r}: Flower runs train on the CPU; set it to 'cpu' or "
            "leave it out, or train the configuration on the device with runs.run_grid"
        )


def refuse_full_information(sampler: Sampler) -> None:
    """A sampler that reads every client's update before it draws (full information) cannot
    run in Flower, where only the selected clients train: refused, naming it."""
    if type(sampler).inform is not Sampler.inform:
        raise ValueError(
            f"sampler {sampler.name!r} needs every client's update before it draws "
            "(full information), which a Flower round does not provide"
        )


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
    """Select with ``sampler``, run ``algorithm``'s server side (module docstring).

    ``lr_schedule`` maps the round index t = 0, 1, ... to the clients' learning rate, sent with
    every training message (``config["lr"]``, with ``config["round"]`` = t). ``algorithm``
    (default FedAvg's eq. 15) is set up from the initial model when the run starts; the
    clients must run the same algorithm (:func:`aoi_fl.flower.client.client_app` builds it
    from the same configuration). ``availability``: whether the nodes follow an availability
    model (each round then starts with an availability query, which waits up to ``timeout``
    too, so such a round may take twice ``timeout``), or every node takes part in every round.
    """

    def __init__(
        self,
        sampler: Sampler,
        lr_schedule: Callable[[int], float],
        algorithm: Algorithm | None = None,
        *,
        on_failure: str = "renormalise",
        availability: bool = False,
    ) -> None:
        if not isinstance(sampler, Sampler):
            raise TypeError(f"sampler must be an aoi_fl Sampler, got {type(sampler).__name__}")
        refuse_full_information(sampler)
        algorithm = FedAvg() if algorithm is None else algorithm
        if not isinstance(algorithm, Algorithm):
            raise TypeError(
                f"algorithm must be an aoi_fl Algorithm, got {type(algorithm).__name__}"
            )
        # the in-process drivers run both sides at once: Flower runs the sides apart
        merged = merged_sides(algorithm)
        if merged:
            raise ValueError(
                f"algorithm {algorithm.name!r} overrides {merged}, which run the client and the "
                "server in one process: Flower needs its two sides (implement client_begin, "
                "client_end, server_message and server_update instead)"
            )
        if availability and not sampler.availability_aware:
            raise ValueError(
                f"sampler {sampler.name!r} cannot select under an availability model "
                "(it is not availability aware)"
            )
        self.sampler, self.lr_schedule, self.algorithm = sampler, lr_schedule, algorithm
        self.on_failure = require_choice("on_failure", on_failure, ON_FAILURE)
        self.availability = bool(availability)
        self.nodes: dict[int, int] | None = None  # client index -> node id
        self.history: dict[str, list] = {
            key: [] for key in ("lr", "selected", "weights", "update_norms", "failed")
        }
        if self.availability:
            self.history[AVAILABILITY_KEY] = []
        if sampler.wants_losses:
            self.history[PROBE_KEY] = []
        #: client -> the last round whose training reply the server used (the node commits
        #: the state it kept from that round, and drops one from a round whose reply was lost)
        self.accepted: dict[int, int] = {}
        self._round: dict | None = None
        # Flower's own default; start() sets the run's
        self._timeout = 3600.0

    @classmethod
    def from_trainer(cls, trainer: FederatedTrainer, on_failure: str = "renormalise"):
        """The strategy of an in-process trainer's run: its sampler, learning-rate schedule,
        algorithm (the same object: it holds the server's state) and availability."""
        if trainer.settings.full_information:
            raise ValueError("the full_information mode trains every client: not in Flower")
        return cls(
            trainer.sampler,
            trainer.lr_schedule,
            trainer.algorithm,
            on_failure=on_failure,
            availability=trainer.availability is not None,
        )

    def start(
        self,
        grid: Grid,
        initial_arrays: ArrayRecord,
        num_rounds: int = 3,
        timeout: float = 3600,
        **kwargs,
    ):
        """Flower's loop (:meth:`flwr.serverapp.strategy.Strategy.start`), after setting the
        algorithm up from the initial model; ``timeout`` also bounds the wait for the nodes."""
        self._timeout = require_real("timeout", timeout, minimum=0.0, strict_minimum=True)
        self.algorithm.setup(self.sampler.n, _tensors(initial_arrays))
        return super().start(
            grid=grid,
            initial_arrays=initial_arrays,
            num_rounds=num_rounds,
            timeout=timeout,
            **kwargs,
        )

    # -- the node map ------------------------------------------------------------------------

    def _connected(self, grid: Grid, timeout: float | None) -> list[int]:
        """The node ids, once n have connected; an error after ``timeout`` seconds otherwise."""
        n = self.sampler.n
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            node_ids = sorted(grid.get_node_ids())
            if len(node_ids) >= n:
                return node_ids
            if deadline is None or time.monotonic() >= deadline:
                raise RuntimeError(
                    f"expected {n} nodes (one per client), {len(node_ids)} connected within "
                    f"{timeout} s (timeout)"
                )
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))

    def map_nodes(self, grid: Grid, timeout: float | None = None) -> dict[int, int]:
        """Ask every node for its client index (once per strategy) and check the map."""
        if self.nodes is None:
            timeout = self._timeout if timeout is None else timeout
            node_ids = self._connected(grid, timeout)
            query = [
                self._query(node, INDEX_QUERY, ConfigRecord({"ask": "partition-id"}))
                for node in node_ids
            ]
            answers = {}
            for reply in grid.send_and_receive(query, timeout=timeout):
                node = reply.metadata.src_node_id
                if reply.has_error():
                    raise RuntimeError(f"node {node} did not answer the index query: {reply.error}")
                answers[node] = reply.content[CONFIG]["partition-id"]
            if silent := sorted(set(node_ids) - set(answers)):
                raise RuntimeError(
                    f"expected {len(node_ids)} nodes to answer the index query, {len(answers)} "
                    f"did within {timeout} s; silent: {silent}"
                )
            self.nodes = node_map(answers, self.sampler.n)
        return self.nodes

    @staticmethod
    def _query(node: int, action: str, config: ConfigRecord) -> Message:
        return Message(
            content=RecordDict({CONFIG: config}),
            message_type=f"{MessageType.QUERY}.{action}",
            dst_node_id=node,
        )

    def available(self, grid: Grid, t: int) -> np.ndarray:
        """Round t's availability mask: the clients whose nodes accepted the round in time."""
        nodes = self.map_nodes(grid)
        asked = [
            self._query(nodes[i], AVAILABILITY_QUERY, ConfigRecord({"round": t}))
            for i in range(self.sampler.n)
        ]
        client_of = {v: k for k, v in nodes.items()}
        mask = np.zeros(self.sampler.n, dtype=bool)
        for reply in grid.send_and_receive(asked, timeout=self._timeout):
            if not reply.has_error() and bool(reply.content[CONFIG]["available"]):
                mask[client_of[reply.metadata.src_node_id]] = True
        return mask

    def _loss_probe(self, grid: Grid, arrays: ArrayRecord) -> LossProbe:
        """The sampler's loss probe: a loss query to each candidate's node, which answers its
        losses of ``arrays`` as the trainer's probe computes them (the round's ``probed``
        counts the samples, as the trainer does)."""

        def ask(client: int, samples: int | None) -> Message:
            return Message(
                content=RecordDict(
                    {ARRAYS: arrays, CONFIG: ConfigRecord({"samples": samples or 0})}
                ),
                message_type=f"{MessageType.QUERY}.{LOSS_QUERY}",
                dst_node_id=self.nodes[client],
            )

        def read(reply: Message) -> tuple[float, float, int]:
            answer = reply.content[CONFIG]
            return float(answer["mean"]), float(answer["rms"]), int(answer["samples"])

        def count(samples: int) -> None:
            self.history[PROBE_KEY][-1] += samples

        return loss_probe(grid, ask, read, self._timeout, self.sampler.name, count)

    # -- training ----------------------------------------------------------------------------

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        nodes = self.map_nodes(grid)
        t = server_round - 1
        if self.sampler.wants_losses:
            self.history[PROBE_KEY].append(0)
            self.sampler.loss_probe = self._loss_probe(grid, arrays)
        if self.availability:
            mask = self.available(grid, t)
            selection = check_available_selection(self.sampler.sample(mask), mask)
            self.history[AVAILABILITY_KEY].append(int(mask.sum()))
        else:
            selection = self.sampler.sample()
        lr = float(self.lr_schedule(t))
        extra = self.algorithm.server_message(t, selection.ids, _tensors(arrays), lr)
        self._round = {"t": t, "lr": lr, "selection": selection, "global": arrays, "sent": extra}
        messages = []
        for j, i in enumerate(selection.ids):
            accepted = self.accepted.get(int(i), -1)
            sent = ConfigRecord({**dict(config), "round": t, "lr": lr, "accepted": accepted})
            content = RecordDict({ARRAYS: arrays, CONFIG: sent})
            if extra:
                content[EXTRA] = ArrayRecord({k: Array(v[j].numpy()) for k, v in extra.items()})
            messages.append(
                Message(content=content, message_type=MessageType.TRAIN, dst_node_id=nodes[int(i)])
            )
        return messages

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        if self._round is None or self._round["t"] != server_round - 1:
            raise RuntimeError(f"aggregate_train for round {server_round} was not configured")
        r, self._round = self._round, None
        selection = r["selection"]
        received, errors = self._replies_by_client(replies)
        ids = selection.ids.astype(np.int64)
        weights = selection.weights.astype(np.float64)
        ok = np.array([int(i) in received for i in ids], dtype=bool)
        failed = [int(i) for i in ids[~ok]]
        used = self._surviving_weights(server_round, ids, weights, ok, failed, errors)
        global_params = _tensors(r["global"])
        kept = ids[ok]
        replied = {int(i): _tensors(received[int(i)][ARRAYS]) for i in kept}
        uploads = {
            int(i): _tensors(received[int(i)][EXTRA]) if EXTRA in received[int(i)] else {}
            for i in kept
        }
        steps = {int(i): int(received[int(i)][METRICS]["steps"]) for i in kept}
        drop_as_zero = (
            failed
            and self.on_failure == "drop"
            and ok.any()
            and isinstance(self.algorithm, FedAvg)
            and self.algorithm.aggregation == "weighted_sum"
        )
        if drop_as_zero:
            # a failed client's update counts as zero: it returns the model it was sent
            kept, used = ids, weights
            replied.update({int(i): global_params for i in ids[~ok]})
            steps.update({int(i): 0 for i in ids[~ok]})
        # the clients' nodes commit the state of this round when told it was accepted
        self.accepted.update({int(i): r["t"] for i in ids[ok]})
        rows = torch.as_tensor(np.searchsorted(ids, kept), dtype=torch.int64)
        sent = {k: v.index_select(0, rows) for k, v in r["sent"].items()}
        updates = ClientUpdates(
            t=r["t"],
            lr=r["lr"],
            ids=kept,
            weights=used,
            start=self.algorithm.start_models(kept.size, global_params, sent),
            params={
                k: torch.stack([replied[int(i)][k] for i in kept]) if kept.size else v[None][:0]
                for k, v in global_params.items()
            },
            state={},
            steps=np.array([steps[int(i)] for i in kept], dtype=np.int64),
        )
        norms_all = update_norms(global_params, updates)
        norms = norms_all[np.isin(kept, ids[ok])]
        if self.sampler.wants_updates and ok.any():
            mine = np.isin(kept, ids[ok])
            deltas = torch.cat([v[mine].flatten(1) for v in updates.deltas().values()], dim=1)
            self.sampler.feedback_updates(ids[ok], deltas.double().cpu().numpy())
        upload = {
            k: torch.stack([uploads[int(i)][k] for i in ids[ok]])
            for k in (uploads[int(ids[ok][0])] if ok.any() else {})
        }
        new = self.algorithm.server_update(global_params, updates, upload)
        self.sampler.feedback(ids[ok], norms)
        self._record(r["lr"], ids, selection.weights, norms, failed)
        log(INFO, "aggregate_train: %d of %d selected clients replied", ok.sum(), ids.size)
        out = ArrayRecord({k: Array(v.detach().cpu().numpy()) for k, v in new.items()})
        return out, MetricRecord({"clients": int(ok.sum()), "failed": len(failed)})

    def _replies_by_client(
        self, replies: Iterable[Message]
    ) -> tuple[dict[int, RecordDict], dict[int, str]]:
        """The training replies' contents and the errors' reasons, by client index."""
        client_of = {v: k for k, v in self.nodes.items()}
        received: dict[int, RecordDict] = {}
        errors: dict[int, str] = {}
        for reply in replies:
            i = client_of[reply.metadata.src_node_id]
            if reply.has_error():
                errors[i] = str(reply.error.reason)
            else:
                received[i] = reply.content
        return received, errors

    def _surviving_weights(
        self,
        server_round: int,
        ids: np.ndarray,
        weights: np.ndarray,
        ok: np.ndarray,
        failed: list[int],
        errors: Mapping[int, str],
    ) -> np.ndarray:
        """The weights of the selected clients that replied (``ok``), as ``on_failure`` has
        them; with ``"error"``, a ``failed`` client raises, naming each and why it failed."""
        if failed and self.on_failure == "error":
            reasons = "; ".join(
                f"client {i}: {errors.get(i, 'no reply before the timeout')}" for i in failed
            )
            raise RuntimeError(
                f"round {server_round}: expected {ids.size} clients to reply, "
                f"{int(ok.sum())} did; failed: {reasons}"
            )
        used = weights[ok]
        if failed and self.on_failure == "renormalise" and used.size:
            used = used * (weights.sum() / used.sum())
        return used

    def _record(
        self,
        lr: float,
        ids: np.ndarray,
        weights: np.ndarray,
        norms: np.ndarray,
        failed: list[int],
    ) -> None:
        """The round's entries of the history, in the trainer's form: the selection's ``ids``
        and ``weights``, the norms of the updates used, the clients that failed."""
        h = self.history
        h["lr"].append(lr)
        h["selected"].append(ids.tolist())
        h["weights"].append(weights.tolist())
        h["update_norms"].append(norms.tolist())
        h["failed"].append(failed)

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
            "\t├──> sampler %s (n = %d), algorithm %s, on failure: %s",
            self.sampler.name,
            self.sampler.n,
            self.algorithm.config(),
            self.on_failure,
        )
