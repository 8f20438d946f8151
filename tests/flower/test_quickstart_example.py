"""The example app (``examples/flower-quickstart``, issue 41): Flower's quickstart shape (its
own model, MNIST loading and FedAvg) with an aoi_fl policy choosing the training nodes. In
process its ClientApp answers the adapter's loss probes through its own evaluate function;
under ``flwr run`` (tests/flower/test_app.py, beside the App's own run) its selections are the
in-process sampler's for the same seed."""

import importlib
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")

from flwr.app import ArrayRecord  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402

from aoi_fl.flower.adapter import policy_options, with_policy  # noqa: E402
from aoi_fl.flower.inprocess import InProcessGrid, node_ids, task_identity  # noqa: E402
from aoi_fl.flower.simulation import flower_logs  # noqa: E402
from aoi_fl.pipeline import plugins  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

EXAMPLE = ROOT / "examples" / "flower-quickstart"
DATA = str(ROOT / "data")
N = 4


@pytest.fixture
def quickstart(monkeypatch):
    """The example's package, imported from its folder."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    return importlib.import_module("quickstart.client_app"), importlib.import_module(
        "quickstart.task"
    )


def selections(policy, options, rounds):
    sampler = plugins.samplers()[policy](N, np.ones(N), **options)
    return [sampler.sample().ids.tolist() for _ in range(rounds)]


def test_the_examples_clientapp_answers_power_of_choice_probes_in_process(quickstart):
    client, task = quickstart
    run_config = {"data-root": DATA, "local-steps": 2, "batch-size": 16, "lr": 0.1}
    grid = InProcessGrid(client.app, node_ids(N), node_config={"num-partitions": N})
    for context in grid.contexts.values():
        context.run_config = run_config
    strategy = with_policy(FedAvg(fraction_evaluate=0.0), "power_of_choice", n=N, m=2, d=3)
    with task_identity(), flower_logs(True):
        result = strategy.start(
            grid=grid,
            initial_arrays=ArrayRecord(task.initial_model().state_dict()),
            num_rounds=2,
            timeout=60,
        )
    assert [len(s) for s in strategy.history["selected"]] == [2, 2]
    # d = 3 candidates probed through the app's own evaluate, 2 of them trained, per round
    kinds = [kind for kind, _ in grid.sent]
    assert kinds == ["evaluate"] * 3 + ["train"] * 2 + ["evaluate"] * 3 + ["train"] * 2
    assert set(result.train_metrics_clientapp) == {1, 2}


def test_the_run_config_names_the_missing_policy_keys():
    with pytest.raises(ValueError, match=r"lacks \['policy.n'\]"):
        policy_options({"policy.name": "uniform", "policy.s": 2})
