"""SamplerStrategy driven through an in-process grid: the real ClientApp, no Ray (issue 17)."""

import os

import numpy as np
import pytest
import torch

pytest.importorskip("flwr")

from flwr.app import Array, ArrayRecord  # noqa: E402
from flwr.supercore.task_identity import TaskIdentity  # noqa: E402

import aoi_fl.flower  # noqa: E402, F401  (telemetry switches)
from aoi_fl.core.algorithms import FedAvg  # noqa: E402
from aoi_fl.core.selection import Sampler, Selection  # noqa: E402
from aoi_fl.flower.client import client_app  # noqa: E402
from aoi_fl.flower.inprocess import InProcessGrid  # noqa: E402
from aoi_fl.flower.strategy import LOSS_QUERY, SamplerStrategy, node_map  # noqa: E402
from aoi_fl.pipeline import runs  # noqa: E402

DATA = "data"
N = 8


def config(sampler=None, rounds=3, aggregation="weighted_sum"):
    return {
        "dataset": {"name": "mnist"},
        "partition": {"name": "dirichlet", "n_clients": N, "seed": 1, "alpha": 0.5},
        "model": {"name": "logistic_regression", "in_features": 784, "num_classes": 10, "seed": 1},
        "sampler": sampler or {"name": "markov_optimal", "m": 3, "m_prime": 2, "seed": 1},
        "training": {
            "rounds": rounds,
            "local_steps": 2,
            "batch_size": 16,
            "eval_every": 1,
            "lr": {"name": "constant", "lr": 0.1},
            "algorithm": {"name": "fedavg", "aggregation": aggregation},
            "client_chunk": 1,  # one client per step, as a Flower client trains: same bits
        },
    }


@pytest.fixture(autouse=True)
def task_identity():
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 1
    yield
    TaskIdentity.task_id = TaskIdentity.run_id = TaskIdentity.node_id = None


def nodes(n=N):
    return {1000 + 37 * i: int(p) for i, p in enumerate(np.random.default_rng(5).permutation(n))}


def in_process(cfg):
    torch.set_num_threads(1)  # as client_app's clients train (the conftest restores it)
    trainer = runs.build_trainer(cfg, DATA, device="cpu")
    trainer.run()
    return trainer


def flower(cfg, grid_nodes=None, fail=(), on_failure="renormalise"):
    server = runs.build_trainer(cfg, DATA, device="cpu")
    strategy = SamplerStrategy.from_trainer(server, on_failure)
    grid = InProcessGrid(client_app(runs.resolve_config(cfg), DATA), grid_nodes or nodes(), fail)
    start = ArrayRecord({k: Array(v.numpy()) for k, v in server.params.items()})
    result = strategy.start(grid=grid, initial_arrays=start, num_rounds=cfg["training"]["rounds"])
    final = {k: torch.from_numpy(v.numpy().copy()) for k, v in result.arrays.items()}
    return strategy, grid, final


@pytest.mark.parametrize("aggregation", ["weighted_sum", "weighted_delta"])
def test_flower_selects_and_aggregates_as_the_in_process_trainer(aggregation):
    cfg = config(aggregation=aggregation)
    trainer = in_process(cfg)
    strategy, grid, final = flower(cfg)
    h = trainer.history
    assert strategy.history["selected"] == h["selected"]
    assert strategy.history["weights"] == h["weights"]
    assert strategy.history["lr"] == h["lr"]
    assert strategy.history["update_norms"] == h["update_norms"]
    assert all(torch.equal(final[k], v) for k, v in trainer.params.items())
    # each round's messages went to exactly the selected clients' nodes
    client_of = {node: i for node, i in grid.partition_ids.items()}
    trained = [client_of[node] for kind, node in grid.sent if kind == "train"]
    assert trained == [i for ids in h["selected"] for i in ids]


@pytest.mark.parametrize(
    "sampler",
    [
        {"name": "power_of_choice", "m": 2, "d": 4, "seed": 1, "probe_samples": 20},
        {"name": "oort", "m": 3, "seed": 1, "trained_samples": 32},
    ],
)
def test_loss_probing_samplers_select_as_the_in_process_trainer(sampler):
    cfg = config(sampler=sampler)
    trainer = in_process(cfg)
    strategy, grid, final = flower(cfg)
    h = trainer.history
    assert strategy.history["selected"] == h["selected"]
    assert strategy.history["weights"] == h["weights"]
    assert strategy.history["probed"] == h["probed"]
    assert all(torch.equal(final[k], v) for k, v in trainer.params.items())
    # the candidates' (and, for Oort, the participants') nodes were asked for their losses
    asked = [node for kind, node in grid.sent if kind.endswith(LOSS_QUERY)]
    assert len(asked) == (4 if sampler["name"] == "power_of_choice" else 3) * 3


def test_the_index_query_goes_to_every_node_once():
    _, grid, _ = flower(config(rounds=2))
    queries = [node for kind, node in grid.sent if kind.startswith("query")]
    assert sorted(queries) == sorted(grid.partition_ids)


def test_node_map_accepts_a_permutation_and_names_duplicates_gaps_and_strangers():
    assert node_map({11: 1, 7: 0, 9: 2}, 3) == {0: 7, 1: 11, 2: 9}
    with pytest.raises(ValueError, match=r"duplicated: \{1: \[11, 9\]\}"):
        node_map({11: 1, 7: 0, 9: 1}, 3)
    with pytest.raises(ValueError, match=r"missing: \[2\]"):
        node_map({11: 1, 7: 0}, 3)
    with pytest.raises(ValueError, match=r"outside the range: \[5\]"):
        node_map({11: 1, 7: 0, 9: 2, 4: 5}, 3)
    with pytest.raises(ValueError, match="not an integer"):
        node_map({11: "1", 7: 0, 9: 2}, 3)


def test_a_grid_whose_nodes_do_not_cover_the_clients_is_refused():
    doubled = dict(nodes())
    first, second = list(doubled)[:2]
    doubled[second] = doubled[first]
    with pytest.raises(ValueError, match="duplicated"):
        flower(config(rounds=1), grid_nodes=doubled)


class Scripted(Sampler):
    """Selections given in advance (round by round)."""

    name = "scripted"

    def __init__(self, n, rounds):
        self.n, self.rounds = n, list(rounds)

    def sample(self):
        ids, weights = self.rounds.pop(0)
        return Selection(np.array(ids, dtype=np.int64), np.array(weights, dtype=float))

    def state_dict(self):
        return {"rounds": self.rounds}

    def load_state_dict(self, state):
        self.rounds = list(state["rounds"])


def drive(selection_rounds, fail=(), on_failure="renormalise"):
    cfg = config(rounds=len(selection_rounds))
    server = runs.build_trainer(cfg, DATA, device="cpu")
    strategy = SamplerStrategy(
        Scripted(N, selection_rounds), lambda t: 0.1, FedAvg(), on_failure=on_failure
    )
    grid_nodes = {100 + i: i for i in range(N)}
    fail_nodes = [100 + i for i in fail]
    grid = InProcessGrid(client_app(runs.resolve_config(cfg), DATA), grid_nodes, fail_nodes)
    start = ArrayRecord({k: Array(v.numpy()) for k, v in server.params.items()})
    result = strategy.start(grid=grid, initial_arrays=start, num_rounds=len(selection_rounds))
    # Flower's result holds the last aggregated model: none if no round aggregated anything
    final = {k: v.numpy().astype(np.float64) for k, v in (result.arrays or start).items()}
    initial = {k: v.numpy().astype(np.float64) for k, v in server.params.items()}
    return strategy, initial, final


def solo(client, initial):
    from aoi_fl.flower.client import train_client

    arrays = ArrayRecord({k: Array(v.astype(np.float32)) for k, v in initial.items()})
    done = train_client(runs.resolve_config(config(rounds=1)), DATA, client, 0, 0.1, arrays)
    return {k: v.numpy().astype(np.float64) for k, v in done.params.items()}


def test_an_empty_selection_keeps_fedavgs_model_and_is_recorded():
    strategy, initial, final = drive([([], [])])
    assert strategy.history["selected"] == [[]] and strategy.history["update_norms"] == [[]]
    for k in initial:
        np.testing.assert_array_equal(final[k], initial[k])


@pytest.mark.parametrize("policy", ["renormalise", "drop"])
def test_a_failed_reply_is_renormalised_or_dropped(policy):
    strategy, initial, final = drive([([1, 4, 6], [0.5, 0.3, 0.2])], fail=[4], on_failure=policy)
    assert strategy.history["failed"] == [[4]]
    a, b = solo(1, initial), solo(6, initial)
    if policy == "renormalise":  # surviving weights scaled to the selection's total, 1
        wa, wb = 0.5 / 0.7, 0.2 / 0.7
        expected = {k: wa * a[k] + wb * b[k] for k in a}
    else:  # the failed client's update counts as zero: it returns the model it was sent
        expected = {k: 0.5 * a[k] + 0.3 * initial[k] + 0.2 * b[k] for k in a}
    for k in expected:
        np.testing.assert_allclose(final[k], expected[k], rtol=0, atol=1e-6)


def test_a_failed_reply_is_an_error_when_asked():
    with pytest.raises(
        RuntimeError, match=r"expected 2 clients to reply, 1 did; failed: client 4: node lost$"
    ):
        drive([([1, 4], [0.5, 0.5])], fail=[4], on_failure="error")


def test_a_full_information_sampler_and_bad_options_are_refused():
    full = runs.SAMPLERS["optimal"](N, np.ones(N), k=2, seed=0)
    with pytest.raises(ValueError, match="full information"):
        SamplerStrategy(full, lambda t: 0.1)
    sampler = Scripted(N, [])
    with pytest.raises(ValueError, match="on_failure"):
        SamplerStrategy(sampler, lambda t: 0.1, on_failure="retry")
    with pytest.raises(TypeError, match="algorithm must be an aoi_fl Algorithm, got dict"):
        SamplerStrategy(sampler, lambda t: 0.1, {"name": "fedavg"})
    with pytest.raises(ValueError, match="not availability aware"):
        SamplerStrategy(Scripted(N, []), lambda t: 0.1, availability=True)


def test_importing_the_flower_package_turns_telemetry_off():
    assert os.environ["FLWR_TELEMETRY_ENABLED"] == "0"
    assert os.environ["RAY_USAGE_STATS_ENABLED"] == "0"
