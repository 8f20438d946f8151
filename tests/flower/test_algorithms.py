"""Every algorithm of the project in Flower (issue 30): the nodes run the client side with their
own state, the strategy the server side; on the in-process grid (the real ClientApp, no Ray)
a run equals the trainer's, record by record and bit for bit, also when nodes miss rounds,
restart, are unavailable or stay silent."""

import dataclasses
import logging

import numpy as np
import pytest
import torch

pytest.importorskip("flwr")

from flwr.supercore.task_identity import TaskIdentity  # noqa: E402

from aoi_fl.flower.client import client_app  # noqa: E402
from aoi_fl.flower.inprocess import InProcessGrid, node_ids, run_in_process  # noqa: E402
from aoi_fl.flower.simulation import serve  # noqa: E402
from aoi_fl.flower.strategy import SamplerStrategy  # noqa: E402
from aoi_fl.pipeline import runs  # noqa: E402

N, K = 6, 3
#: what a Flower run records, in the trainer's form
RECORDS = ("lr", "selected", "weights", "update_norms", "eval_round", "test_loss", "test_accuracy")
#: every registered method, with options that exercise its state (projection, averaging, ...)
ALGORITHMS = {
    "fedavg": {"name": "fedavg"},
    "fedavg_delta": {"name": "fedavg", "aggregation": "weighted_delta", "server_lr": 0.7},
    "fedavg_projected_averaged": {"name": "fedavg", "radius": 0.8, "average": True},
    "agnostic": {"name": "agnostic"},
    "agnostic_averaged": {"name": "agnostic", "average": True, "radius": 2.0},
    "weighted": {"name": "weighted", "p": [0.1, 0.3, 0.1, 0.2, 0.2, 0.1]},
    "scaffold": {"name": "scaffold", "server_lr": 0.9},
    "mifa": {"name": "mifa"},
    "fedvarp": {"name": "fedvarp"},
    "fedau": {"name": "fedau", "cutoff": 2},
    "fedawe": {"name": "fedawe"},
    "fedsum_b": {"name": "fedsum_b", "local_steps": K},
    "fedsum": {"name": "fedsum", "local_steps": K},
    "fedsum_cr": {"name": "fedsum_cr", "local_steps": K},
}


def config(algorithm, rounds=7, sampler=None, availability=None):
    """Least squares on 6 clients; Bernoulli participation leaves clients out for several
    rounds and some rounds empty, so every state must persist across missed rounds."""
    out = {
        "dataset": {"name": "linear_regression", "n_clients": N, "samples": 12, "features": 3},
        "partition": {"name": "natural", "n_clients": N},
        "model": {"name": "linear_regression", "in_features": 3, "seed": 0},
        "sampler": sampler or {"name": "bernoulli", "p": 0.35, "seed": 5},
        "training": {
            "rounds": rounds,
            "local_steps": K,
            "batch_size": 5,
            "loss": "mse",
            "eval_every": 2,
            "lr": {"name": "inverse_sqrt", "lr0": 0.05, "period": 10.0},
            "algorithm": ALGORITHMS[algorithm],
            "client_chunk": 1,  # one client per step, as a Flower client trains: same bits
        },
    }
    if availability:
        out["availability"] = availability
    return out


@pytest.fixture(autouse=True)
def task_identity():
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 1
    yield
    TaskIdentity.task_id = TaskIdentity.run_id = TaskIdentity.node_id = None


def nodes():
    return node_ids(N)


def in_process(cfg):
    torch.set_num_threads(1)  # as client_app's clients train (the conftest restores it)
    trainer = runs.build_trainer(cfg, "data", device="cpu")
    trainer.run()
    return trainer


def flower(cfg, on_failure="renormalise", timeout=60.0, **grid):
    return run_in_process(cfg, on_failure=on_failure, timeout=timeout, **grid)


def assert_same_run(run, trainer):
    h = trainer.history
    for key in (*RECORDS, *(k for k in ("available",) if k in h)):
        assert run.history[key] == h[key], key
    for k, v in trainer.reported_params().items():
        np.testing.assert_array_equal(run.final_params[k], v.numpy(), err_msg=k)


def test_every_registered_method_is_checked_here():
    assert {spec["name"] for spec in ALGORITHMS.values()} == set(runs.ALGORITHMS)


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_a_flower_run_of_every_method_is_the_trainers(algorithm):
    cfg = config(algorithm)
    trainer = in_process(cfg)
    assert [] in trainer.history["selected"]  # an empty round: the server still steps
    assert len({i for ids in trainer.history["selected"] for i in ids}) == N
    assert_same_run(flower(cfg), trainer)


@pytest.mark.parametrize("algorithm", ["fedsum_cr", "fedsum_b", "fedsum"])
def test_a_restarted_node_resumes_from_its_copy_on_disk(algorithm, tmp_path):
    cfg = config(algorithm)
    trainer = in_process(cfg)
    # every node restarts in every round after its first (a fresh context.state)
    restarts = [(node, t) for node in nodes() for t in range(1, 7)]
    run = flower(cfg, restart=restarts, node_config={"state-dir": str(tmp_path)})
    assert_same_run(run, trainer)
    files = sorted(p.name for p in (tmp_path / "run-1").iterdir())
    assert files == [f"client-{i}.npz" for i in range(N)]
    # a second run in the same folder starts its clients afresh: the same run again
    assert_same_run(
        flower(cfg, restart=restarts, node_config={"state-dir": str(tmp_path)}), trainer
    )


def test_a_restarted_node_that_lost_its_state_fails_and_says_what_it_lost():
    cfg = config("fedsum_cr")
    selected = in_process(cfg).history["selected"]
    client = selected[0][0]  # trained in round 0, selected again later
    again = next(t for t in range(1, 7) if client in selected[t])
    node = {i: n for n, i in nodes().items()}[client]
    with pytest.raises(RuntimeError) as lost:
        flower(cfg, on_failure="error", restart=[(node, again)])
    message = str(lost.value)
    assert message.startswith(f"round {again + 1}: expected {len(selected[again])} clients")
    assert f"failed: client {client}: " in message
    assert f"client {client} has trained before (the server used its reply of round " in message
    assert "(h.1.bias, h.1.weight, last, z.1.bias, z.1.weight)" in message
    assert "fedsum_cr cannot rebuild it" in message


@pytest.mark.parametrize("algorithm", ["fedsum", "fedsum_cr", "scaffold", "fedawe"])
@pytest.mark.parametrize("switch", ["lost", "fail"])
def test_a_failed_client_leaves_server_and_nodes_in_step(algorithm, switch):
    # a client whose replies are lost (after it trained) or errors counts as not selected in
    # those rounds: the run equals the trainer's with that client's selections removed
    cfg = config(algorithm)
    selected = in_process(cfg).history["selected"]
    client = max(range(N), key=lambda i: sum(i in ids for ids in selected))
    node = {i: n for n, i in nodes().items()}[client]
    run = flower(cfg, **{switch: [node]})
    assert run.history["failed"] == [[client] if client in ids else [] for ids in selected]
    torch.set_num_threads(1)
    trainer = runs.build_trainer(cfg, "data", device="cpu")
    drop = type(trainer.sampler).sample

    def without(sampler, *args):
        s = drop(sampler, *args)
        keep = s.ids != client
        return dataclasses.replace(s, ids=s.ids[keep], weights=s.weights[keep])

    trainer.sampler.sample = without.__get__(trainer.sampler)
    trainer.run()
    assert trainer.history["selected"] == [[i for i in ids if i != client] for ids in selected]
    for k, v in trainer.reported_params().items():
        np.testing.assert_array_equal(run.final_params[k], v.numpy(), err_msg=k)


def test_a_stateless_client_restarts_without_a_copy():
    cfg = config("mifa")
    restarts = [(node, t) for node in nodes() for t in range(1, 7)]
    assert_same_run(flower(cfg, restart=restarts), in_process(cfg))


@pytest.mark.parametrize("algorithm", ["fedavg", "fedsum"])
def test_unavailable_nodes_decline_and_the_participation_is_the_trainers(algorithm):
    availability = {"name": "bernoulli", "mean": 0.5, "seed": 4}
    sampler = {"name": "uniform", "s": 2, "seed": 1}
    cfg = config(algorithm, sampler=sampler, availability=availability)
    trainer = in_process(cfg)
    assert min(trainer.history["available"]) < N  # the model removes clients
    run = flower(cfg)
    assert_same_run(run, trainer)
    assert run.history["failed"] == [[]] * 7  # an unavailable node is never asked to train


def test_a_node_that_does_not_answer_the_availability_query_is_away():
    availability = {"name": "bernoulli", "mean": 0.5, "seed": 4}
    cfg = config(
        "fedsum", sampler={"name": "uniform", "s": 2, "seed": 1}, availability=availability
    )
    trainer = in_process(cfg)
    client = max(range(N), key=lambda i: sum(i in ids for ids in trainer.history["selected"]))
    node = {i: n for n, i in nodes().items()}[client]
    run = flower(cfg, away=[node])
    assert all(client not in ids for ids in run.history["selected"])
    masks = trainer.availability
    want = [int(masks.mask(t).sum()) - bool(masks.mask(t)[client]) for t in range(7)]
    assert run.history["available"] == want
    assert run.history["failed"] == [[]] * 7


def test_a_silent_node_fails_its_round_after_the_timeout_with_the_counts():
    cfg = config("fedavg")
    first = in_process(cfg).history["selected"][0]
    node = {i: n for n, i in nodes().items()}[first[0]]
    expected = rf"round 1: expected {len(first)} clients to reply, {len(first) - 1} did"
    with pytest.raises(RuntimeError, match=expected + ".*no reply before the timeout"):
        flower(cfg, on_failure="error", silent=[node], timeout=7.5)
    run = flower(cfg, silent=[node])  # renormalise: the round goes on without it
    assert run.history["failed"][0] == [first[0]]


def test_too_few_nodes_is_an_error_after_the_timeout_not_a_wait_for_ever():
    cfg = config("fedavg", rounds=1)
    server = runs.build_trainer(cfg, "data", device="cpu")
    few = dict(list(nodes().items())[:4])
    grid = InProcessGrid(client_app(runs.resolve_config(cfg), "data"), few)
    expected = r"expected 6 nodes \(one per client\), 4 connected within 0.3 s"
    with pytest.raises(RuntimeError, match=expected):
        serve(grid, server, timeout=0.3)
    assert grid.sent == []  # nothing was asked of the nodes that came


def test_every_wait_of_a_round_is_bounded_by_the_timeout():
    availability = {"name": "bernoulli", "mean": 0.5, "seed": 4}
    cfg = config(
        "fedavg", sampler={"name": "uniform", "s": 2, "seed": 1}, availability=availability
    )
    server = runs.build_trainer(cfg, "data", device="cpu")
    grid = InProcessGrid(client_app(runs.resolve_config(cfg), "data"), nodes())
    serve(grid, server, timeout=4.5)
    # the index query, then per round the availability query, training (and no evaluation)
    assert grid.timeouts and set(grid.timeouts) == {4.5}


def test_a_trainer_that_has_run_rounds_is_refused():
    cfg = config("fedsum", rounds=2)
    server = runs.build_trainer(cfg, "data", device="cpu")
    server.run_round()
    grid = InProcessGrid(client_app(runs.resolve_config(cfg), "data"), nodes())
    with pytest.raises(ValueError, match="this one has run 1"):
        serve(grid, server)


def test_an_algorithm_written_as_one_side_is_refused():
    from aoi_fl.core.algorithms import FedAvg

    class Merged(FedAvg):
        name = "merged"

        def aggregate(self, global_params, updates):
            return global_params

    trainer = runs.build_trainer(config("fedavg"), "data", device="cpu")
    with pytest.raises(ValueError, match=r"overrides \['aggregate'\].*implement client_begin"):
        SamplerStrategy(trainer.sampler, trainer.lr_schedule, Merged())


def test_a_quiet_run_logs_nothing_below_errors_and_restores_the_threads(caplog):
    # Flower's progress lines carry each round's accuracy, which notebooks must not print
    torch.set_num_threads(2)
    with caplog.at_level(logging.INFO, logger="flwr"):
        flower(config("fedavg", rounds=2))
    assert not [r for r in caplog.records if r.name == "flwr" and r.levelno < logging.ERROR]
    assert torch.get_num_threads() == 2
