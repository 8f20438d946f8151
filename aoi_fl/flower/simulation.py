"""One Flower simulation from one run configuration (:mod:`aoi_fl.pipeline.runs`).

The server side builds the configuration's sampler, learning-rate schedule, model and test set
exactly as the in-process trainer does (:func:`aoi_fl.pipeline.runs.build_trainer`), so for the
same seed the Flower run selects the same clients and starts from the same model; the clients
are :func:`aoi_fl.flower.client.client_app` nodes, one per client, run by Flower's simulation
runtime on a Ray node of this machine alone, started and ended for the run
(:func:`aoi_fl.pipeline.ray_grid.local_ray`: it comes up on a busy machine, and listens on
127.0.0.1 only). The model is evaluated centrally on the test set every ``eval_every`` rounds,
as the trainer does.

Every algorithm of the project runs: the strategy holds the server's side and state, each node
the client's (:mod:`aoi_fl.flower.strategy`, :mod:`aoi_fl.flower.client`). :func:`run_flower`
uses Flower's ``run_simulation``, deprecated in Flower 1.41 for ``flwr run`` of a Flower App
(:func:`aoi_fl.flower.app.run_flower_app`, the project's app); it stays for what only it does:
a sampler or algorithm registered in the calling process (a notebook cell) travels by value to
the simulation's Ray actors, which ``flwr run``'s separate processes cannot receive.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.simulation import run_simulation

from aoi_fl.core.train import FederatedTrainer
from aoi_fl.flower.client import client_app
from aoi_fl.flower.strategy import SamplerStrategy, require_cpu
from aoi_fl.pipeline import plugins, ray_grid
from aoi_fl.pipeline.runs import ExperimentResult, build_trainer, resolve_config


@dataclass(frozen=True)
class FlowerRun:
    """A finished Flower run: the strategy's per-round records plus the central evaluations
    (``eval_round``, ``test_loss``, ``test_accuracy``; the trainer's keys) and the final model."""

    history: dict[str, list]
    final_params: dict[str, np.ndarray]


def _arrays(params: dict[str, torch.Tensor]) -> ArrayRecord:
    return ArrayRecord({k: Array(v.detach().cpu().numpy()) for k, v in params.items()})


def serve(
    grid: Grid,
    server: FederatedTrainer,
    *,
    on_failure: str = "renormalise",
    timeout: float = 600.0,
) -> FlowerRun:
    """A ServerApp's whole job for the run of ``server`` (an in-process trainer built from the
    run's configuration, :func:`aoi_fl.pipeline.runs.build_trainer`, whose rounds are not run):
    :class:`SamplerStrategy` over the ``grid``'s nodes for ``training.rounds`` rounds, the
    reported model evaluated centrally every ``eval_every`` rounds and after the last one.
    ``timeout``: the seconds the start waits for its nodes and a round for its replies (and,
    with an availability model, for the nodes' answers before it selects)."""
    if server.round:
        raise ValueError(
            f"serve runs a trainer's rounds from the start; this one has run {server.round} "
            "(build a fresh one with aoi_fl.pipeline.runs.build_trainer)"
        )
    strategy = SamplerStrategy.from_trainer(server, on_failure)
    rounds, every = server.settings.rounds, server.settings.eval_every
    evaluations: dict[str, list] = {"eval_round": [], "test_loss": [], "test_accuracy": []}

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        if server_round % every and server_round != rounds:
            return None
        server.params = {k: torch.from_numpy(v.numpy().copy()) for k, v in arrays.items()}
        loss, accuracy = server.evaluate()
        evaluations["eval_round"].append(server_round)
        evaluations["test_loss"].append(loss)
        evaluations["test_accuracy"].append(accuracy)
        return MetricRecord({"test_loss": loss, "test_accuracy": accuracy or 0.0})

    initial = _arrays(server.params)
    result = strategy.start(
        grid=grid,
        initial_arrays=initial,
        num_rounds=rounds,
        timeout=timeout,
        train_config=ConfigRecord(),
        evaluate_fn=evaluate,
    )
    # Flower keeps the last aggregated model: none if no round aggregated anything
    server.params = {
        k: torch.from_numpy(v.numpy().copy()) for k, v in (result.arrays or initial).items()
    }
    final = {k: v.detach().cpu().numpy().copy() for k, v in server.reported_params().items()}
    return FlowerRun({**copy.deepcopy(strategy.history), **evaluations}, final)


@contextlib.contextmanager
def flower_logs(quiet: bool) -> Iterator[None]:
    """Flower's log kept to errors for the block when ``quiet``: its progress lines carry
    timings and each round's accuracy, whose last digits depend on the CPU (a notebook's output
    must not)."""
    # importing Flower's logger module sets the level to DEBUG: it must not come after ours
    import flwr.supercore.logger  # noqa: F401

    logger = logging.getLogger("flwr")
    level = logger.level
    if quiet:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def run_flower(
    config: dict[str, Any],
    *,
    data_root: str = "data",
    num_cpus: int = 2,
    on_failure: str = "renormalise",
    timeout: float = 600.0,
    quiet: bool = True,
    threads: int = 1,
) -> FlowerRun:
    """Train ``config`` for its ``training.rounds`` rounds in a Flower simulation.

    ``num_cpus`` is the size of the local Ray node (:func:`aoi_fl.pipeline.ray_grid.connected`:
    none is started when this process is connected to Ray already); each virtual client takes
    one CPU and trains with ``threads`` torch threads (:func:`aoi_fl.flower.client.client_app`).
    ``quiet`` keeps Flower's and Ray's progress logs (timings, addresses) to warnings and
    errors, so that a notebook's output is the same from run to run.
    """

    require_cpu(config)  # before resolving, which drops the device (not part of a run's key)
    resolved = resolve_config(config)
    # the clients run in Ray actors: the user's sampler or algorithm goes with them (or is
    # refused here, before anything starts, when it cannot)
    shipped = plugins.shipped([resolved], by_value=True)
    server = build_trainer(resolved, data_root, device="cpu")
    SamplerStrategy.from_trainer(server, on_failure)  # refuses what cannot run before Ray starts
    done: list[FlowerRun] = []

    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        done.append(serve(grid, server, on_failure=on_failure, timeout=timeout))

    init_args = {"logging_level": logging.ERROR, "log_to_driver": False} if quiet else {}
    # Flower's backend uses the Ray this process is connected to rather than start its own
    with flower_logs(quiet), ray_grid.connected("local", num_cpus=num_cpus, **init_args):
        run_simulation(
            server_app=app,
            client_app=client_app(resolved, data_root, threads, shipped),
            num_supernodes=server.sampler.n,
            backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}},
        )
    if not done:
        raise RuntimeError("the Flower simulation ended without a result (see its log above)")
    return done[0]


def agreement(run: FlowerRun, trainer: FederatedTrainer | ExperimentResult) -> dict[str, bool]:
    """Whether a Flower run and an in-process run of the same configuration (a trainer that has
    run, or its record) agree, record by record: facts that hold bit for bit on any CPU when
    both sides train with the same kernels and thread count (the numbers themselves move from
    CPU to CPU; these answers do not)."""
    fl, h = run.history, trainer.history
    if isinstance(trainer, ExperimentResult):
        model = trainer.final_params
    else:
        model = {k: v.detach().cpu().numpy() for k, v in trainer.reported_params().items()}
    return {
        "same selections": fl["selected"] == h["selected"],
        "same weights": fl["weights"] == h["weights"],
        "same update norms": fl["update_norms"] == h["update_norms"],
        "same model": model.keys() == run.final_params.keys()
        and all(np.array_equal(run.final_params[k], v) for k, v in model.items()),
        "same test accuracy": fl["eval_round"] == h["eval_round"]
        and fl["test_accuracy"] == h["test_accuracy"],
    }


def mnist_config(sampler: dict[str, Any], n_clients: int, rounds: int, seed: int = 0) -> dict:
    """The AoI paper's MNIST setting at a small size, for a check of the machinery rather than
    a training experiment: IID partition of ``n_clients``, the small CNN, K = 5 local steps of
    batch 50, lr 0.1 * 0.998^t, FedAvg with the selection's weights (eq. 15), the test set
    evaluated every round. ``sampler``: the sampler's configuration (name and options).

    The trainer trains one client at a time (``client_chunk = 1``), as a Flower client does:
    batching several clients in one step can round differently."""
    return {
        "dataset": {"name": "mnist"},
        "partition": {"name": "iid", "n_clients": n_clients, "seed": seed},
        "model": {"name": "small_cnn", "seed": seed},
        "sampler": sampler,
        "training": {
            "rounds": rounds,
            "local_steps": 5,
            "batch_size": 50,
            "seed": seed,
            "eval_every": 1,
            "lr": {"name": "exponential", "lr0": 0.1, "decay": 0.998},
            "algorithm": {"name": "fedavg"},
            "client_chunk": 1,
        },
    }


def run_both(
    config: dict[str, Any],
    data_root: str = "data",
    num_cpus: int = 2,
    flower: Callable[..., FlowerRun] | None = None,
) -> tuple[FlowerRun, FederatedTrainer]:
    """``config`` run twice: in a Flower simulation, ``flower(config, data_root=...,
    num_cpus=...)`` (default :func:`run_flower` with one torch thread per client; or
    :func:`aoi_fl.flower.app.run_flower_app`, ``flwr run`` of the project's Flower App, whose
    clients train with one thread), and by the project's trainer, which has run all its rounds
    when returned.

    Both sides train, and the server evaluates, with one torch thread: a convolution's sums
    are split by thread, so another thread count differs in the last float32 bits, which a few
    rounds of SGD amplify (:func:`agreement` then fails). The caller's thread count is restored.
    """

    with one_thread():
        flower = flower or functools.partial(run_flower, threads=1)
        run = flower(config, data_root=data_root, num_cpus=num_cpus)
        trainer = build_trainer(config, data_root, device="cpu")
        trainer.run()
    return run, trainer


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """One torch thread for the block, the caller's count restored after: the thread count
    under which Flower clients and the in-process trainer give the same bits."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
