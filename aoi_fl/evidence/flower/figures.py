"""What the Flower simulation notebook shows of Flower runs beside in-process runs of the same
configurations (:func:`flower_pairs`, cached; computed by ``flwr run`` of the project's app and the
trainer): the record-by-record agreement, the clients both sides select, the participation
statistics of the Flower trace beside a long trace of the same sampler and the policy's theory,
every algorithm of the project in Flower (on the in-process grid,
:func:`aoi_fl.flower.inprocess.run_in_process`), and the checks of what it prints.

The participation statistics are a paper's (the notebook passes the AoI paper's
``results.participation_table``): the Flower layer sits beside the papers and imports none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from aoi_fl.core.train import FederatedTrainer
from aoi_fl.flower.simulation import FlowerRun, agreement, one_thread
from aoi_fl.pipeline.cache import ResultStore
from aoi_fl.pipeline.plotting import plot_selections, style
from aoi_fl.pipeline.profiles import traits
from aoi_fl.pipeline.runs import ExperimentResult, build_trainer, resolve_config, run_experiment

#: one Flower run and the in-process run of the same configuration (a trainer that has run, or
#: its record), per policy
Pairs = Mapping[str, tuple[FlowerRun, FederatedTrainer | ExperimentResult]]
#: the version of the Flower records :func:`flower_pairs` stores (part of their key): bump it
#: when a code change alters what a Flower run of a configuration records
FLOWER_RECORDS_VERSION = 1


def flower_pairs(
    configs: Mapping[str, dict[str, Any]],
    results_dir: str,
    data_root: str,
    *,
    rerun: bool = False,
) -> dict[str, tuple[FlowerRun, ExperimentResult]]:
    """Per policy, ``configs[policy]`` run twice with one torch thread: by ``flwr run`` of the
    project's Flower App (:func:`aoi_fl.flower.app.run_flower_app`, one Ray node of 2 CPUs)
    and by the in-process trainer (:func:`aoi_fl.pipeline.runs.run_experiment` on the CPU),
    read back from the cache in ``results_dir`` where both are there.

    The Flower run's history and final model are stored like a run's, in
    :class:`~aoi_fl.pipeline.cache.ResultStore` under the key of its configuration marked as
    a ``flwr run`` of it (:data:`FLOWER_RECORDS_VERSION`); the in-process run is the cached run
    of the configuration. A pair with either side missing, or every pair with ``rerun``, is
    computed again whole, both sides on this machine: a pair compares runs of one machine's
    kernels. Re-plotting from the cache starts neither Flower nor Ray.
    """
    from aoi_fl.flower.app import run_flower_app

    store = ResultStore(results_dir)
    pairs = {}
    for policy, config in configs.items():
        resolved = resolve_config(config)
        key = {"flower_records": FLOWER_RECORDS_VERSION, "by": "flwr run", "run": resolved}
        hit = None if rerun or store.load(resolved) is None else store.load(key)
        with one_thread():
            trainer = run_experiment(
                config,
                results_dir=results_dir,
                rerun=hit is None,
                data_root=data_root,
                device="cpu",
                progress=False,
            )
            if hit is None:
                run = run_flower_app(config, data_root=data_root, num_cpus=2)
                store.save(key, {"history": run.history}, run.final_params)
            else:
                run = FlowerRun(hit[0]["history"], hit[1])
        pairs[policy] = (run, trainer)
    return pairs


def agreement_table(pairs: Pairs) -> pd.DataFrame:
    """:func:`simulation.agreement` per policy (rows, by the policy's display name): True where
    the Flower run's records equal the in-process run's bit for bit."""
    return pd.DataFrame(
        {style(p).label: agreement(flower, trainer) for p, (flower, trainer) in pairs.items()}
    ).T


def print_agreement(pairs: Pairs, n: int, m: int, rounds: int) -> pd.DataFrame:
    """Print and return :func:`agreement_table` of ``n`` clients, ``m`` per round, ``rounds``
    rounds."""
    table = agreement_table(pairs)
    print(
        f"{n} clients, m = {m}, {rounds} rounds: the Flower run against the in-process run, "
        "record by record (True: bit for bit)"
    )
    print(table.to_string())
    return table


def plot_selections_side_by_side(pairs: Pairs, n: int, m: int) -> Figure:
    """One panel per policy: the clients (y) each round (x) the in-process trainer selects
    (rings) and the Flower run selects (crosses); where they agree every ring holds a cross."""
    fig, axes = plt.subplots(
        1, len(pairs), figsize=(3 * len(pairs) + 1, 3.2), sharey=True, squeeze=False
    )
    for ax, (policy, (flower, trainer)) in zip(axes[0], pairs.items(), strict=True):
        st = style(policy)
        traces = {"in process": trainer.history["selected"], "Flower": flower.history["selected"]}
        plot_selections(ax, traces, n, st.color)
        ax.set_title(st.label, fontsize="small")
    axes[0][0].legend(fontsize="x-small", loc="upper right")
    fig.suptitle(
        f"MNIST, {n} clients, m = {m}: the clients Flower and the in-process trainer select"
    )
    fig.tight_layout()
    return fig


def algorithms_base(n: int, rounds: int, seed: int = 0) -> dict[str, Any]:
    """The configuration :func:`algorithms_in_flower` varies: MNIST, IID over ``n`` clients,
    logistic regression (a check of the machinery: the convolution's cost adds nothing to it),
    each client taking part with probability 0.3 per round (as FedSUM's P2, Case 2: clients
    miss rounds, some rounds are empty, so every method's state must persist), K = 5 local steps
    of batch 50, one client at a time."""
    from aoi_fl.flower.simulation import mnist_config

    config = mnist_config({"name": "bernoulli", "p": 0.3, "seed": seed}, n, rounds, seed)
    config["model"] = {
        "name": "logistic_regression",
        "in_features": 784,
        "num_classes": 10,
        "seed": seed,
    }
    return config


def every_algorithm(n: int, local_steps: int) -> dict[str, dict[str, Any]]:
    """A configuration of every registered algorithm (by a label), with the options that give
    it state to keep: the projected and averaged FedAvg variants, the weighted FedAvg of eq. 10
    with unequal p over ``n`` clients, and the FedSUM family with ``local_steps`` = K."""
    p = np.arange(1, n + 1, dtype=float)
    return {
        "FedAvg (eq. 15)": {"name": "fedavg"},
        "FedAvg, weighted_delta": {"name": "fedavg", "aggregation": "weighted_delta"},
        "FedAvg, projected, averaged": {"name": "fedavg", "radius": 5.0, "average": True},
        "agnostic FedAvg": {"name": "agnostic"},
        "agnostic FedAvg, averaged": {"name": "agnostic", "average": True},
        "weighted FedAvg (eq. 10)": {"name": "weighted", "p": (p / p.sum()).tolist()},
        "SCAFFOLD": {"name": "scaffold"},
        "MIFA": {"name": "mifa"},
        "FedVARP": {"name": "fedvarp"},
        "FedAU": {"name": "fedau", "cutoff": 3},
        "FedAWE": {"name": "fedawe"},
        "FedSUM-B": {"name": "fedsum_b", "local_steps": local_steps},
        "FedSUM": {"name": "fedsum", "local_steps": local_steps},
        "FedSUM-CR": {"name": "fedsum_cr", "local_steps": local_steps},
    }


def algorithms_in_flower(
    base: dict[str, Any], algorithms: Mapping[str, dict[str, Any]], data_root: str
) -> pd.DataFrame:
    """Per algorithm (rows, by label): ``base`` with ``training.algorithm`` replaced, run on
    the in-process grid (the strategy with the algorithm's server side, the ClientApp with its
    client side and the node's state) and by the in-process trainer, both with one thread;
    :func:`simulation.agreement` of the two, and how many rounds each client trained."""
    from aoi_fl.flower.inprocess import run_in_process

    rows = {}
    with one_thread():
        for label, spec in algorithms.items():
            config = {**base, "training": {**base["training"], "algorithm": spec}}
            flower = run_in_process(config, data_root=data_root)
            trainer = build_trainer(config, data_root, device="cpu")
            trainer.run()
            counts = np.bincount(
                [i for ids in trainer.history["selected"] for i in ids], minlength=trainer.sampler.n
            )
            rows[label] = {
                **agreement(flower, trainer),
                "rounds trained per client": f"{counts.min()}..{counts.max()}",
            }
    return pd.DataFrame(rows).T


#: a paper's participation statistics of a trace: (sampler, selected, weights) -> a table with
#: one row per statistic and the columns ``trace``, ``theory`` and ``intervals``
Statistics = Callable[[Any, Any, Any], pd.DataFrame]


def participation_beside_theory(
    pairs: Pairs,
    configs: Mapping[str, dict[str, Any]],
    data_root: str,
    long: int,
    statistics: Statistics,
) -> pd.DataFrame:
    """Per policy and statistic: ``statistics`` of the Flower run's trace, of the same sampler
    continued to ``long`` rounds from its start (its first rounds are the Flower run's: the
    estimates of a few rounds are rough, a long trace shows where they converge) and the
    policy's theory, with how many intervals each trace ended."""

    tables = []
    for policy, (flower, _) in pairs.items():
        sampler = build_trainer(configs[policy], data_root, device="cpu").sampler
        trace = [sampler.sample() for _ in range(long)]
        fresh = build_trainer(configs[policy], data_root, device="cpu").sampler
        history = flower.history
        short = statistics(fresh, history["selected"], history["weights"])
        continued = statistics(
            sampler, [s.ids.tolist() for s in trace], [s.weights.tolist() for s in trace]
        )
        table = pd.DataFrame(
            {
                "Flower run": short["trace"],
                f"{long} rounds": continued["trace"],
                "theory": short["theory"],
            }
        )
        table.index = pd.MultiIndex.from_product([[style(policy).label], table.index])
        counts = f"{short['intervals'].iloc[0]}, {continued['intervals'].iloc[0]}"
        table["intervals (Flower, long)"] = [counts] * len(table)
        tables.append(table)
    return pd.concat(tables)


#: the long trace's Var[X] and Sigma agree with the theory within this relative error
LONG_TRACE_TOLERANCE = 0.1


def check_notebook(
    agreed: pd.DataFrame,
    participation: pd.DataFrame,
    long: int,
    profile: str,
    algorithms: pd.DataFrame | None = None,
) -> str:
    """What the Flower simulation notebook prints, asserted; returns the line it prints.

    Bit for bit, for every policy: the same selections, weights, update norms, model and test
    accuracy (``agreed``: :func:`agreement_table`), and so for every algorithm
    (``algorithms``: :func:`algorithms_in_flower`). The long trace of
    :func:`participation_beside_theory` never has an interval above the largest possible one,
    and outside ``smoke`` (a long trace of several thousand intervals) its Var[X] is the
    theory's within :data:`LONG_TRACE_TOLERANCE` (relative, or absolute below 1), and so is
    Sigma except for a deterministic chain (the theory's Var[X] = 0): its clients keep the
    phases they started with, so one trace does not average over the stationary law that the
    theory's Sigma is an expectation over.
    """
    assert agreed.all(axis=None), agreed
    if algorithms is not None:
        assert algorithms.drop(columns="rounds trained per client").all(axis=None), algorithms
    trace, tol = f"{long} rounds", LONG_TRACE_TOLERANCE
    for label in participation.index.unique(level=0):
        t = participation.loc[label]
        if not traits(profile).quick:
            var, theory = t.loc["Var[X]", trace], t.loc["Var[X]", "theory"]
            assert abs(var - theory) <= tol * max(1.0, theory), t
            if theory > 0:
                assert abs(t.loc["Sigma", trace] / t.loc["Sigma", "theory"] - 1) <= tol, t
        assert t.loc["largest interval", trace] <= t.loc["largest interval", "theory"], t
    if traits(profile).quick:
        print(
            "skipped in smoke: the long-trace tolerances (2,000 rounds of 10 clients are too few)"
        )
    return "checks passed"
