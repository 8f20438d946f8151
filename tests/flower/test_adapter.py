"""The selection adapter (issue 41): a registered policy choosing the training nodes of Flower's
own FedAvg, with a ClientApp that knows nothing of aoi_fl, selects what the in-process sampler
selects for the same seed, aggregates K-Vib's unbiased estimate, never selects a node that is
gone, and refuses a bad policy before any message."""

import numpy as np
import pytest

pytest.importorskip("flwr")

from flwr.app import (  # noqa: E402
    Array,
    ArrayRecord,
    ConfigRecord,
    Context,
    Message,
    MetricRecord,
    RecordDict,
)
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp.strategy import (  # noqa: E402
    DifferentialPrivacyServerSideFixedClipping,
    FedAdam,
    FedAvg,
    FedProx,
)

from aoi_fl.flower.adapter import with_policy  # noqa: E402
from aoi_fl.flower.inprocess import InProcessGrid, node_ids, task_identity  # noqa: E402
from aoi_fl.flower.simulation import flower_logs  # noqa: E402
from aoi_fl.pipeline import plugins  # noqa: E402

N, ROUNDS, DIM = 6, 5, 4
#: each partition's optimum: a client's loss is the squared distance of the model to it
TARGETS = np.random.default_rng(41).normal(size=(N, DIM)).astype(np.float32)
W0 = np.zeros(DIM, dtype=np.float32)

plain = ClientApp()  # the quickstart shape: no aoi_fl keys, queries or state


def _step(w: np.ndarray, partition: int) -> np.ndarray:
    return w + np.float32(0.5) * (TARGETS[partition] - w)


def _losses(w: np.ndarray, partition: int) -> tuple[float, float]:
    per_sample = (w.astype(np.float64) - TARGETS[partition]) ** 2
    return float(per_sample.mean()), float(np.sqrt((per_sample**2).mean()))


@plain.train()
def _train(msg: Message, context: Context) -> Message:
    partition = int(context.node_config["partition-id"])
    w = _step(msg.content["arrays"]["w"].numpy(), partition)
    metrics = MetricRecord({"num-examples": 10 + partition, "train_loss": 0.0})
    return Message(
        RecordDict({"arrays": ArrayRecord({"w": Array(w)}), "metrics": metrics}), reply_to=msg
    )


@plain.evaluate()
def _evaluate(msg: Message, context: Context) -> Message:
    mean, rms = _losses(
        msg.content["arrays"]["w"].numpy(), int(context.node_config["partition-id"])
    )
    metrics = MetricRecord({"eval_loss": mean, "eval_loss_rms": rms, "num-examples": DIM})
    return Message(RecordDict({"metrics": metrics}), reply_to=msg)


NODES = node_ids(N)  # node id -> partition, ids unrelated to the partitions
#: the adapter's rule: client j is the node of the j-th smallest id
PARTITION_OF = [NODES[node] for node in sorted(NODES)]

POLICIES = {
    "uniform": {"s": 2, "seed": 3},
    "markov_optimal": {"m": 2, "m_prime": 2, "seed": 3},
    "kvib": {"k": 2, "rounds": ROUNDS, "seed": 3},
    "power_of_choice": {"m": 2, "d": 4, "seed": 3},
    "oort": {"m": 2, "seed": 3},
}


def run(strategy, grid=None):
    grid = grid or InProcessGrid(plain, NODES)
    with task_identity(), flower_logs(True):
        result = strategy.start(
            grid=grid, initial_arrays=ArrayRecord({"w": Array(W0)}), num_rounds=ROUNDS, timeout=5
        )
    return result, grid


def reference(policy, options):
    """The in-process sampler of the same seed on the same clients: its selections and the
    final model (weights summing to one averaged, an unbiased estimator's as a delta)."""
    sampler = plugins.samplers()[policy](N, np.ones(N), **options)
    w, selected = W0, []
    for _ in range(ROUNDS):
        if sampler.wants_losses:
            sampler.loss_probe = lambda ids, samples=None, *, free=False, w=w: tuple(
                np.array(x) for x in zip(*(_losses(w, PARTITION_OF[i]) for i in ids), strict=True)
            )
        selection = sampler.sample()
        new = {int(i): _step(w, PARTITION_OF[i]) for i in selection.ids}
        deltas = {i: v.astype(np.float64) - w.astype(np.float64) for i, v in new.items()}
        weights = dict(zip(selection.ids.tolist(), selection.weights.tolist(), strict=True))
        if selection.procedure is None:
            total = sum(weights.values())
            w = sum(weights[i] / total * new[i] for i in new).astype(np.float32)
        else:
            step = sum((weights[i] * deltas[i] for i in sorted(new)), np.zeros(DIM))
            w = (w.astype(np.float64) + step).astype(np.float32)
        sampler.feedback(selection.ids, np.array([np.linalg.norm(deltas[i]) for i in sorted(new)]))
        selected.append(selection.ids.tolist())
    return selected, w


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_selections_equal_the_in_process_sampler_for_the_same_seed(policy):
    strategy = with_policy(FedAvg(fraction_evaluate=0.0), policy, n=N, **POLICIES[policy])
    result, grid = run(strategy)
    selected, w = reference(policy, POLICIES[policy])
    assert strategy.history["selected"] == selected
    assert len({tuple(s) for s in selected}) > 1  # the policy draws, not a fixed set
    # exactly the selected clients' nodes got training messages, round after round
    trained = [node for kind, node in grid.sent if kind == "train"]
    assert trained == [strategy.nodes[i] for ids in selected for i in ids]
    np.testing.assert_allclose(result.arrays["w"].numpy(), w, rtol=1e-6, atol=1e-7)
    probed = [node for kind, node in grid.sent if kind == "evaluate"]
    assert bool(probed) == (policy in ("power_of_choice", "oort"))


def test_kvib_is_aggregated_as_its_unbiased_estimate_not_renormalised():
    strategy = with_policy(FedAvg(fraction_evaluate=0.0), "kvib", n=N, **POLICIES["kvib"])
    result, _ = run(strategy)
    sums = [sum(w) for w in strategy.history["weights"]]
    assert not np.allclose(sums, 1.0)  # FedAvg's average would differ from the estimate
    _, w = reference("kvib", POLICIES["kvib"])
    np.testing.assert_array_equal(result.arrays["w"].numpy(), w)


def test_the_users_evaluation_stays_the_users():
    strategy = with_policy(FedAvg(fraction_evaluate=1.0), "uniform", n=N, s=2, seed=0)
    result, grid = run(strategy)
    evaluated = [node for kind, node in grid.sent if kind == "evaluate"]
    assert len(evaluated) == ROUNDS * N  # FedAvg's own federated evaluation of every node
    assert set(result.evaluate_metrics_clientapp) == set(range(1, ROUNDS + 1))


class LeavingGrid(InProcessGrid):
    """A node that disconnects once the first training message has gone out."""

    def __init__(self, leaves: int) -> None:
        super().__init__(plain, NODES)
        self.leaves = leaves

    def get_node_ids(self):
        gone = any(kind == "train" for kind, _ in self.sent)
        return [node for node in super().get_node_ids() if not (gone and node == self.leaves)]


def test_a_disconnected_node_is_never_selected():
    leaves = sorted(NODES)[2]  # client 2
    strategy = with_policy(FedAvg(fraction_evaluate=0.0), "uniform", n=N, s=N - 1, seed=1)
    _, grid = run(strategy, LeavingGrid(leaves))
    later = strategy.history["selected"][1:]
    # every other client is selected (s = N - 1 of the N - 1 connected), never client 2
    assert later == [[0, 1, 3, 4, 5]] * (ROUNDS - 1)
    trains_after_first = [node for kind, node in grid.sent if kind == "train"][N - 1 :]
    assert leaves not in trains_after_first


def test_a_policy_blind_to_availability_sends_nothing_to_a_gone_node():
    leaves = sorted(NODES)[2]  # client 2: cyclic's second group, {2, 3}, comes every third round
    strategy = with_policy(FedAvg(fraction_evaluate=0.0), "cyclic", n=N, s=2, seed=1)
    _, grid = run(strategy, LeavingGrid(leaves))
    assert strategy.history["selected"] == [[0, 1], [2, 3], [4, 5], [0, 1], [2, 3]]
    assert strategy.history["failed"] == [[], [2], [], [], [2]]
    assert [node for kind, node in grid.sent if kind == "train"].count(leaves) == 0


def test_the_messages_content_stays_the_users_strategys():
    strategy = with_policy(FedProx(proximal_mu=0.3), "uniform", n=N, s=2, seed=0)
    arrays, config = ArrayRecord({"w": Array(W0)}), ConfigRecord({"lr": 0.1})
    with task_identity(), flower_logs(True):
        messages = list(strategy.configure_train(1, arrays, config, InProcessGrid(plain, NODES)))
    # FedProx's own config (its mu, Flower's round) to the nodes of the policy's first draw
    first = plugins.samplers()["uniform"](N, np.ones(N), s=2, seed=0).sample().ids
    assert [m.metadata.dst_node_id for m in messages] == [strategy.nodes[i] for i in first]
    for message in messages:
        assert message.content["arrays"] is arrays
        assert dict(message.content["config"]) == {
            "lr": 0.1,
            "proximal-mu": 0.3,
            "server-round": 1,
        }


@pytest.mark.parametrize(
    ("policy", "options", "message"),
    [
        ("no_such_policy", {}, "policy='no_such_policy' is not a registered aoi_fl policy"),
        ("power_of_choice", {"m": 2}, "missing options ['d']"),
        ("markov_optimal", {"m": 2, "d": 3}, "unknown options ['d']"),
        ("uniform", {"s": N + 1}, "s"),
    ],
)
def test_a_bad_policy_or_option_is_refused_before_any_message(policy, options, message):
    grid = InProcessGrid(plain, NODES)
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        with_policy(FedAvg(), policy, n=N, **options)
    assert grid.sent == []


def test_an_unbiased_estimator_needs_fedavgs_aggregation():
    with pytest.raises(ValueError, match="unbiased estimator.*FedAdam"):
        with_policy(FedAdam(), "kvib", n=N, **POLICIES["kvib"])


def test_a_probe_reply_without_the_loss_names_the_metric():
    strategy = with_policy(
        FedAvg(fraction_evaluate=0.0), "power_of_choice", n=N, loss_key="loss", m=2, d=4
    )
    with pytest.raises(RuntimeError, match="no metric 'loss'.*'eval_loss'"):
        run(strategy)


def test_flowers_dp_wrapper_composes_and_its_accounting_is_refused():
    # no noise and a clipping norm no update reaches: the policy's FedAvg, through the wrapper
    dp = DifferentialPrivacyServerSideFixedClipping(
        FedAvg(fraction_evaluate=0.0),
        noise_multiplier=0.0,
        clipping_norm=1e6,
        num_sampled_clients=2,
    )
    strategy = with_policy(dp, "markov_optimal", n=N, **POLICIES["markov_optimal"])
    result, _ = run(strategy)
    selected, w = reference("markov_optimal", POLICIES["markov_optimal"])
    assert strategy.history["selected"] == selected
    np.testing.assert_allclose(result.arrays["w"].numpy(), w, rtol=1e-6, atol=1e-7)
    dp.accountant = object()  # any accountant: it assumes Flower's uniform sampling
    with pytest.raises(ValueError, match="accounts privacy"):
        with_policy(dp, "uniform", n=N, s=2)


def test_oort_without_the_rms_metric_names_it():
    strategy = with_policy(
        FedAvg(fraction_evaluate=0.0), "oort", n=N, rms_key="loss_rms", **POLICIES["oort"]
    )
    with pytest.raises(ValueError, match="root-mean-square.*'loss_rms'"):
        run(strategy)


def test_m_gives_any_policys_clients_per_round():
    # K-Vib's paper calls it K and FedSUM's S: with_policy takes m for every policy
    options = {k: v for k, v in POLICIES["kvib"].items() if k != "k"}
    by_m = with_policy(FedAvg(fraction_evaluate=0.0), "kvib", n=N, m=2, **options)
    by_k = with_policy(FedAvg(fraction_evaluate=0.0), "kvib", n=N, **POLICIES["kvib"])
    assert by_m.sampler.config() == by_k.sampler.config()
