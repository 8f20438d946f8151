"""Any registered ``aoi_fl`` policy inside a Flower user's own strategy.

:func:`with_policy` wraps a Message-API strategy (``flwr.serverapp.strategy``: FedAvg, FedProx,
FedAdam, ..., or Flower's server-side DP wrappers around them) so that a seeded ``aoi_fl``
sampler decides which nodes get the training messages. Everything else stays the user's
strategy's: the content of the training messages (its ``configure_train`` builds them; the
adapter sends the first one's content to the selected nodes), its aggregation, its federated
evaluation and its summary. The ClientApp needs nothing of this project:

- **Clients.** At the first round the adapter waits (up to the run's ``timeout``) for ``n``
  nodes and numbers them by node id: the smallest id is client 0, the largest client n-1. A
  policy's selections, as client indices, depend on the seed and the run configuration only;
  which node is behind an index is Flower's (a simulation draws its node ids at random), so
  ``sizes`` (per client index) matter only when they are equal or the ids are known.
- **Availability.** A node that is not connected in a round is unavailable to the policy: an
  availability-aware policy (:data:`aoi_fl.core.registry.AVAILABILITY_AWARE`) draws among the
  connected ones and never selects it; any other policy's selection of it sends nothing and the
  round goes on without it (recorded in ``history["failed"]``).
- **Aggregation weights.** A policy whose weights are self-normalised (they sum to one, e.g.
  markov_optimal, uniform, power_of_choice, oort) has them written into each reply's weighting
  metric (the strategy's ``weighted_by_key``, ``num-examples`` by default) before the user's
  ``aggregate_train`` averages: FedAvg's weighted average is then the policy's eq. 15, for any
  strategy that aggregates by that key (FedAvg, FedProx, the FedOpt family, Flower's DP
  wrappers around them, wrapped by the adapter and without a privacy accountant: accounting
  assumes Flower's own uniform sampling, and is refused). An unbiased estimator (K-Vib, VRB,
  MABS, uniform_unbiased, ...: the policies whose samplers declare a ``procedure``) has
  weights that need not sum to one, which FedAvg's renormalisation would bias: the adapter
  aggregates it itself as a delta, theta + sum_i w_i (theta_i - theta) (a failed client's
  update counts as zero), and the metrics with the strategy's ``train_metrics_aggr_fn``. That
  holds for strategies whose ``aggregate_train`` is FedAvg's (FedAvg, FedProx); any other is
  refused when wrapped.
- **Update norms.** The adaptive policies (K-Vib, VRB, MABS, ...) get ||theta_i - theta||_2
  over all arrays of each reply, computed on the server from the returned arrays and those
  sent; policies that cluster updates get the updates themselves.
- **Loss probes** (Power-of-d-Choice, Oort). Before a policy draws, the candidates it asks for
  get an *evaluate* message with the current arrays (under the strategy's ``arrayrecord_key``)
  and a config with ``server-round``, ``aoi-fl-probe`` = True and ``probe-samples`` (how many
  samples the policy wants the loss on; 0: all). The ClientApp's own ``@app.evaluate()``
  answers, and its reply's MetricRecord must hold ``loss_key`` (default ``"eval_loss"``: the
  mean loss of the received model) and, for Oort, ``rms_key`` (default ``"eval_loss_rms"``:
  the root mean square of the per-sample losses). Power-of-d-Choice ranks on the loss of the
  client's training data in the paper: an evaluate function that scores a validation split
  gives a proxy of it. A probe that fails or is not answered within the run's timeout raises.

Everything is checked when the strategy is wrapped, before any message: the policy's name, its
options (names, types, values, with a dry draw), the strategy's aggregation.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from logging import INFO
from typing import Any

import numpy as np
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
from flwr.serverapp.strategy import FedAvg, Strategy
from flwr.supercore import log

from aoi_fl.core.selection import (
    LossProbe,
    Sampler,
    check_available_selection,
    check_selection_ids,
)
from aoi_fl.flower.probes import loss_probe
from aoi_fl.flower.strategy import refuse_full_information
from aoi_fl.pipeline.policies import make_policy

#: the metrics a probed node's evaluate reply carries by default (mean and RMS loss)
LOSS_KEY, RMS_KEY = "eval_loss", "eval_loss_rms"
#: what the probe's evaluate config holds besides ``server-round``
PROBE_FLAG, PROBE_SAMPLES = "aoi-fl-probe", "probe-samples"


def build_policy(policy: str, n: int, sizes: Sequence[float] | None, options: dict) -> Sampler:
    """Registered sampler ``policy`` for ``n`` clients of data sizes ``sizes`` (None: equal),
    its options checked as a configuration's ``sampler`` section is (:func:`make_policy`), and
    refused if it needs what a Flower run cannot give it (every client's loss each round)."""
    sampler = make_policy(policy, n, sizes, **options)
    refuse_full_information(sampler)
    return sampler


def _arrays(record: ArrayRecord) -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in record.items()}


def _base(strategy: Strategy) -> Strategy:
    """The strategy that aggregates: Flower's DP wrappers hold it as ``strategy``."""
    while not hasattr(strategy, "weighted_by_key") and hasattr(strategy, "strategy"):
        strategy = strategy.strategy
    return strategy


class PolicyStrategy(Strategy):
    """``strategy`` with ``sampler`` choosing its training nodes (see the module docstring;
    built by :func:`with_policy`)."""

    def __init__(
        self,
        strategy: Strategy,
        sampler: Sampler,
        *,
        loss_key: str = LOSS_KEY,
        rms_key: str = RMS_KEY,
    ) -> None:
        if not isinstance(strategy, Strategy):
            raise TypeError(
                "strategy must be a Flower Message-API strategy "
                f"(flwr.serverapp.strategy.Strategy), got {type(strategy).__name__}"
            )
        base = _base(strategy)
        if not hasattr(base, "weighted_by_key"):
            raise ValueError(
                f"strategy {type(strategy).__name__} has no weighted_by_key (the metric its "
                "aggregation weights by): the policy's weights have nowhere to go; wrap a "
                "FedAvg-based strategy"
            )
        if getattr(strategy, "accountant", None) is not None:
            raise ValueError(
                f"strategy {type(strategy).__name__} accounts privacy for Flower's own uniform "
                "sampling of nodes, which a policy replaces: wrap it without an accountant"
            )
        self.delta = getattr(sampler, "procedure", None) is not None
        if self.delta and not (
            isinstance(strategy, FedAvg)
            and type(strategy).aggregate_train is FedAvg.aggregate_train
        ):
            raise ValueError(
                f"policy {sampler.name!r} is an unbiased estimator whose weights need not sum "
                f"to one: the adapter aggregates it as a delta, in place of FedAvg's "
                f"aggregate_train, which {type(strategy).__name__} replaces; wrap FedAvg or "
                "FedProx, or use a self-normalised policy"
            )
        self.strategy, self.sampler, self.base = strategy, sampler, base
        self.loss_key, self.rms_key = loss_key, rms_key
        self.nodes: list[int] | None = None  # client index -> node id
        self.history: dict[str, list] = {
            key: [] for key in ("selected", "weights", "update_norms", "failed")
        }
        self._round: dict | None = None
        self._timeout = 3600.0  # Flower's default; start() sets the run's

    def start(
        self,
        grid: Grid,
        initial_arrays: ArrayRecord,
        num_rounds: int = 3,
        timeout: float = 3600,
        **kwargs,
    ):
        """Flower's loop; ``timeout`` also bounds the wait for the n nodes and each probe."""
        self._timeout = float(timeout)
        return super().start(grid, initial_arrays, num_rounds, timeout, **kwargs)

    # -- clients ------------------------------------------------------------------------------

    def map_nodes(self, grid: Grid) -> list[int]:
        """Client index -> node id: the first ``n`` nodes to connect, by increasing node id."""
        if self.nodes is None:
            n, deadline = self.sampler.n, time.monotonic() + self._timeout
            while len(ids := sorted(grid.get_node_ids())) < n:
                if time.monotonic() >= deadline:
                    raise RuntimeError(
                        f"policy {self.sampler.name!r} has n={n} clients, {len(ids)} nodes "
                        f"connected within {self._timeout} s (timeout)"
                    )
                time.sleep(0.5)
            if len(ids) > n:
                raise RuntimeError(
                    f"policy {self.sampler.name!r} has n={n} clients but {len(ids)} nodes are "
                    "connected: give with_policy n equal to the number of nodes"
                )
            self.nodes = ids
        return self.nodes

    def _probe(self, grid: Grid, arrays: ArrayRecord, server_round: int) -> LossProbe:
        """The sampler's loss probe: evaluate messages to the candidates' nodes."""
        arrays_key = getattr(self.base, "arrayrecord_key", "arrays")
        config_key = getattr(self.base, "configrecord_key", "config")

        def ask(client: int, samples: int | None) -> Message:
            config = {"server-round": server_round, PROBE_FLAG: True, PROBE_SAMPLES: samples or 0}
            return Message(
                RecordDict({arrays_key: arrays, config_key: ConfigRecord(config)}),
                message_type=MessageType.EVALUATE,
                dst_node_id=self.nodes[client],
            )

        def read(reply: Message) -> tuple[float, float, int]:
            metrics = {
                k: v for record in reply.content.metric_records.values() for k, v in record.items()
            }
            if self.loss_key not in metrics:
                raise RuntimeError(
                    f"node {reply.metadata.src_node_id}'s evaluate reply has no metric "
                    f"{self.loss_key!r} (the mean loss policy {self.sampler.name!r} ranks by); "
                    f"it has {sorted(metrics)}"
                )
            # a policy that needs the RMS (Oort) refuses NaN, naming the keys (configure_train);
            # the samples a user's evaluation took are its own: not counted
            rms = float(metrics.get(self.rms_key, np.nan))
            return float(metrics[self.loss_key]), rms, 0

        return loss_probe(grid, ask, read, self._timeout, self.sampler.name)

    # -- training -----------------------------------------------------------------------------

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        nodes = self.map_nodes(grid)
        proposed = list(self.strategy.configure_train(server_round, arrays, config, grid))
        if not proposed:  # the user's strategy trains nobody this round (fraction_train=0)
            self._round = None
            return []
        template = proposed[0]
        connected = set(grid.get_node_ids())
        mask = np.array([node in connected for node in nodes])
        everyone = bool(mask.all())
        if self.sampler.wants_losses:
            self.sampler.loss_probe = self._probe(grid, arrays, server_round)
        try:
            if self.sampler.availability_aware:
                drawn = self.sampler.sample(None if everyone else mask)
            else:
                drawn = self.sampler.sample()
        except ValueError as exc:
            if not self.sampler.wants_losses:
                raise
            raise ValueError(
                f"{exc} (policy {self.sampler.name!r} reads the evaluate replies' metrics "
                f"{self.loss_key!r}, the mean loss, and {self.rms_key!r}, its root mean square)"
            ) from exc
        selection = check_selection_ids(drawn, self.sampler.n, self.sampler.name)
        if self.sampler.availability_aware:
            check_available_selection(selection, None if everyone else mask)
        ids = selection.ids
        sent = ids[mask[ids]]
        # a selected client whose node is gone gets nothing: it counts as failed
        self._round = {"selection": selection, "global": _arrays(arrays)}
        log(INFO, "configure_train: policy %s selected clients %s", self.sampler.name, ids.tolist())
        return [
            Message(
                template.content,
                message_type=template.metadata.message_type,
                dst_node_id=nodes[int(i)],
            )
            for i in sent
        ]

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        r, self._round = self._round, None
        if r is None:
            return self.strategy.aggregate_train(server_round, replies)
        replies = list(replies)
        selection, g = r["selection"], r["global"]
        client_of = {node: i for i, node in enumerate(self.nodes)}
        weight_of = dict(zip(selection.ids.tolist(), selection.weights.tolist(), strict=True))
        ok: dict[int, dict[str, np.ndarray]] = {}
        for reply in replies:
            if reply.has_error():
                continue
            i = client_of[reply.metadata.src_node_id]
            returned = {
                k: v.numpy()
                for record in reply.content.array_records.values()
                for k, v in record.items()
            }
            if set(returned) != set(g):
                raise RuntimeError(
                    f"client {i} (node {reply.metadata.src_node_id}) returned arrays "
                    f"{sorted(returned)}, not the model's {sorted(g)}"
                )
            ok[i] = returned
            for record in reply.content.metric_records.values():
                if self.base.weighted_by_key in record:
                    record[self.base.weighted_by_key] = float(weight_of[i])
                    break
        ids = np.array(sorted(ok), dtype=np.int64)
        deltas = {
            int(i): {k: ok[i][k].astype(np.float64) - g[k].astype(np.float64) for k in g}
            for i in ids
        }
        norms = np.array(
            [np.sqrt(sum(np.square(d).sum() for d in deltas[int(i)].values())) for i in ids]
        )
        if self.delta:
            arrays, metrics = self._delta(ids, weight_of, deltas, g, replies)
        else:
            arrays, metrics = self.strategy.aggregate_train(server_round, replies)
        if self.sampler.wants_updates and ids.size:
            flat = np.stack(
                [np.concatenate([d.ravel() for d in deltas[int(i)].values()]) for i in ids]
            )
            self.sampler.feedback_updates(ids, flat)
        self.sampler.feedback(ids, norms)
        h = self.history
        h["selected"].append(selection.ids.tolist())
        h["weights"].append(selection.weights.tolist())
        h["update_norms"].append(norms.tolist())
        h["failed"].append(sorted(set(selection.ids.tolist()) - set(ids.tolist())))
        return arrays, metrics

    def _delta(self, ids, weight_of, deltas, g, replies):
        """theta + sum_i w_i (theta_i - theta) over the clients that replied."""
        new = {}
        for k, v in g.items():
            step = sum((weight_of[int(i)] * deltas[int(i)][k] for i in ids), np.zeros(v.shape))
            new[k] = (v.astype(np.float64) + step).astype(v.dtype)
        contents = [reply.content for reply in replies if not reply.has_error()]
        metrics = (
            self.base.train_metrics_aggr_fn(contents, self.base.weighted_by_key)
            if contents
            else None
        )
        return ArrayRecord({k: Array(v) for k, v in new.items()}), metrics

    # -- the rest is the user's strategy's ----------------------------------------------------

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        return self.strategy.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(
        self, server_round: int, replies: Iterable[Message]
    ) -> MetricRecord | None:
        return self.strategy.aggregate_evaluate(server_round, replies)

    def summary(self) -> None:
        self.strategy.summary()
        log(INFO, "\t└──> training nodes chosen by aoi_fl policy %s", self.sampler.config())


def with_policy(
    strategy: Strategy,
    policy: str,
    *,
    n: int,
    sizes: Sequence[float] | None = None,
    loss_key: str = LOSS_KEY,
    rms_key: str = RMS_KEY,
    **options: Any,
) -> PolicyStrategy:
    """``strategy`` whose training nodes registered policy ``policy`` chooses among ``n``
    clients (the nodes; ``sizes``: their data sizes by client index, None: equal), built with
    ``options`` (``m``, ``seed``, ...; the policy's own; ``seed`` is its random stream's).
    See the module docstring; every check runs here, before any message."""
    sampler = build_policy(policy, n, sizes, options)
    return PolicyStrategy(strategy, sampler, loss_key=loss_key, rms_key=rms_key)


def policy_options(run_config: Mapping[str, Any], section: str = "policy") -> dict[str, Any]:
    """:func:`with_policy`'s arguments from a Flower run config's ``<section>.*`` keys (a TOML
    table ``[tool.flwr.app.config.policy]``): ``name`` is the policy, ``n`` the number of
    clients, the rest its options. Raises ValueError naming the key that is missing."""
    prefix = f"{section}."
    given = {k[len(prefix) :]: v for k, v in run_config.items() if k.startswith(prefix)}
    missing = [f"{prefix}{k}" for k in ("name", "n") if k not in given]
    if missing:
        raise ValueError(
            f"the run config lacks {missing}: {prefix}name names the aoi_fl policy, {prefix}n "
            f"the number of clients (one per node); its options follow as {prefix}<option>; "
            f"given: {sorted(prefix + k for k in given) or 'none'}"
        )
    return {"policy": given.pop("name"), **given}
