"""The Flower App (``flower-app/``): its run configuration, one ``flwr run`` of it against the
in-process trainer (its processes listening on loopback only), and a failed run reported."""

import contextlib
import importlib.util
import json
import os
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("flwr")

from flwr.common.config import flatten_dict  # noqa: E402

from aoi_fl.core import availability, registry  # noqa: E402
from aoi_fl.flower import app, simulation, superlink  # noqa: E402
from aoi_fl.flower.app import flwr_run  # noqa: E402
from aoi_fl.pipeline import plugins, resolve, runs  # noqa: E402
from tests.flower.test_quickstart_example import DATA, EXAMPLE, N, selections  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

spec = importlib.util.spec_from_file_location(
    "busy_machine", Path(__file__).parents[1] / "test_busy_machine.py"
)
busy_machine = importlib.util.module_from_spec(spec)
spec.loader.exec_module(busy_machine)

#: the run configuration of flower-app/pyproject.toml: 10 clients, 3 rounds
CONFIG = {
    "dataset": {"name": "mnist"},
    "partition": {"name": "iid", "n_clients": 10, "seed": 0},
    "model": {"name": "logistic_regression", "in_features": 784, "num_classes": 10, "seed": 0},
    "sampler": {"name": "markov_optimal", "m": 3, "m_prime": 2, "seed": 0},
    "training": {
        "rounds": 3,
        "local_steps": 2,
        "batch_size": 16,
        "eval_every": 1,
        "lr": {"name": "constant", "lr": 0.05},
        "algorithm": {"name": "fedavg"},
        "client_chunk": 1,  # one client per step, as a Flower client trains: same bits
    },
}


def pyproject_run_config() -> dict:
    """The app's run configuration as Flower hands it to the apps: TOML tables flattened."""
    with (app.APP_DIR / "pyproject.toml").open("rb") as f:
        return flatten_dict(tomllib.load(f)["tool"]["flwr"]["app"]["config"])


def test_the_apps_run_config_is_the_smoke_configuration(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative paths start from the working directory
    parsed = app.parse_run_config(pyproject_run_config())
    assert parsed.config == runs.resolve_config(CONFIG)
    assert parsed.data_root == str(tmp_path / "data")
    # an ignored folder (.gitignore), never the repository's root
    assert parsed.output == tmp_path / "flower-runs" / "history.json"
    assert parsed.model_output is None
    assert (parsed.on_failure, parsed.timeout) == ("renormalise", 600.0)
    assert app.SECTIONS == resolve._SECTIONS


def test_the_app_is_no_package_of_the_project():
    from setuptools import find_packages

    with (ROOT / "pyproject.toml").open("rb") as f:
        include = tomllib.load(f)["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = find_packages(str(ROOT), include=include)
    assert "aoi_fl.flower" in packages
    assert all(p == "aoi_fl" or p.startswith("aoi_fl.") for p in packages)


def test_a_config_file_is_the_whole_configuration(tmp_path):
    other = {**CONFIG, "sampler": {"name": "uniform", "s": 2, "seed": 1}}
    (tmp_path / "run.json").write_text(json.dumps(other))
    run_config = {**pyproject_run_config(), "config-file": str(tmp_path / "run.json")}
    # the pyproject's inline sections are not used, the file's sampler has no m_prime
    parsed = app.parse_run_config(run_config, overrides=["config-file"])
    assert parsed.config == runs.resolve_config(other)


def test_an_inline_option_given_with_a_config_file_is_refused(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps(CONFIG))
    run_config = {
        **pyproject_run_config(),
        "config-file": str(tmp_path / "run.json"),
        "training.rounds": 5,
    }
    with pytest.raises(ValueError, match=r"training.rounds=5 given with config-file="):
        app.parse_run_config(run_config, overrides=["config-file", "training.rounds"])


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"datset.name": "mnist"}, r"'datset.name' \(= 'mnist'\) is not an option.*allowed"),
        ({"rounds": 5}, r"'rounds' \(= 5\) is not an option.*'<section>.<option>'"),
        ({"sampler": "uniform"}, r"'sampler' \(= 'uniform'\) must be given option by option"),
        ({"training.lr": 0.1}, r"'training.lr' \(= 0.1\) is also a table of options"),
        (
            {"training.lr.lr": 0.1, "training.lr.lr.x": 1},
            r"'training.lr.lr.x' \(= 1\) needs 'training.lr.lr' to be a table",
        ),
    ],
)
def test_an_unknown_key_is_named_with_its_value_and_what_is_allowed(keys, message):
    with pytest.raises(ValueError, match=message):
        app.parse_run_config({**pyproject_run_config(), **keys})


@pytest.mark.parametrize(
    ("key", "value", "error", "message"),
    [
        ("timeout", -1.0, ValueError, r"run config timeout must be > 0.0, got -1.0"),
        ("timeout", "10", TypeError, r"run config timeout must be a real number, got '10'"),
        ("on-failure", "retry", ValueError, r"on-failure 'retry'; valid: drop, error"),
        ("output", "", TypeError, r"output='' must be a non-empty string"),
        ("data-root", 3, TypeError, r"data-root=3 must be a non-empty string"),
        ("config-file", 1, TypeError, r"config-file=1 must be a string"),
        ("config-file", "missing.json", ValueError, r"config-file='missing.json' .* readable"),
        ("sampler.m", 0, ValueError, r"sampler"),
        ("sampler.mm", 3, ValueError, r"unknown options \['mm'\]"),
        ("training.rounds", "3", TypeError, r"training.rounds='3' must be a number"),
    ],
)
def test_a_bad_value_is_refused_before_anything_trains(key, value, error, message):
    with pytest.raises(error, match=message):
        app.parse_run_config({**pyproject_run_config(), key: value})


def test_a_config_file_must_hold_a_configuration(tmp_path):
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "broken.json").write_text("{")
    for name, message in [("list.json", "holds a list"), ("broken.json", "readable JSON")]:
        with pytest.raises(ValueError, match=message):
            app.parse_run_config({"config-file": str(tmp_path / name)})


def test_the_nodes_read_their_configuration_from_the_run_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    context = SimpleNamespace(run_config=pyproject_run_config())
    assert app.node_config(context) == runs.resolve_config(CONFIG)
    assert app.node_data_root(context) == str(tmp_path / "data")


def test_one_node_per_client():
    app.check_nodes(10, 10)
    with pytest.raises(ValueError, match=r"num-supernodes=2 .* partition.n_clients=10") as err:
        app.check_nodes(2, 10)
    assert "--federation-config num-supernodes=10" in str(err.value)


def test_a_result_that_cannot_be_written_fails_before_the_run(tmp_path):
    (tmp_path / "file").write_text("")
    app._require_writable({"output": tmp_path / "new" / "history.json", "model-output": None})
    with pytest.raises(ValueError, match=r"run config output='.*/file/h.json': cannot create"):
        app._require_writable({"output": tmp_path / "file" / "h.json"})


def test_flowers_processes_reach_no_network(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "auto")
    monkeypatch.setenv("FLWR_TELEMETRY_ENABLED", "1")
    env = app.flower_environment(tmp_path, "127.0.0.1:6379")
    assert env["FLWR_TELEMETRY_ENABLED"] == "0" and env["RAY_USAGE_STATS_ENABLED"] == "0"
    assert env["FLWR_DISABLE_UPDATE_CHECK"] == "1"
    assert env["FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION"] == "1"
    assert env["FLWR_HOME"] == str(tmp_path) and env["PYTHONPATH"].split(":")[0] == str(ROOT)
    # the simulation joins the caller's local node, on loopback, rather than start Ray itself
    assert env["RAY_ADDRESS"] == "127.0.0.1:6379"
    assert env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"


def test_what_cannot_run_is_refused_before_flower_starts(tmp_path, user_module):
    with pytest.raises(ValueError, match=rf"sampler '{user_module}' \(registered by user_"):
        app.run_flower_app({**CONFIG, "sampler": {"name": user_module, "seed": 0}})
    with pytest.raises(ValueError, match="must be a Flower App's folder"):
        app.run_flower_app(CONFIG, app_dir=tmp_path)
    with pytest.raises(ValueError, match="timeout must be > 0.0"):
        app.run_flower_app(CONFIG, timeout=0)


def test_what_the_apps_processes_have_is_not_refused_as_registered_here(
    user_module, every_other_source, tmp_path, monkeypatch
):
    # a package declaring a sampler by entry point, put on sys.path at run time
    name, module, site = f"declared_{tmp_path.name}", f"declaring_{tmp_path.name}", tmp_path / "s"
    (site / f"{module}-0.1.dist-info").mkdir(parents=True)
    (site / f"{module}.py").write_text(every_other_source.format(name=name))
    (site / f"{module}-0.1.dist-info" / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n"
    )
    (site / f"{module}-0.1.dist-info" / "entry_points.txt").write_text(
        f"[aoi_fl.samplers]\n{name} = {module}:every_other\n"
    )
    monkeypatch.syspath_prepend(str(site))
    try:
        samplers = ({"name": user_module}, {"name": name}, {"name": "kvib", "k": 2, "rounds": 3})
        resolved = [resolve.resolve_config({**CONFIG, "sampler": s}) for s in samplers]
        registered = user_module.replace("every_other_", "user_policies_")
        off_path = f"sampler {name!r} (declared by an entry point of a package in {site}, which"
        found = [app._registered_here(c) for c in resolved]
        assert found[0] == [f"sampler {user_module!r} (registered by {registered})"]
        assert len(found[1]) == 1 and found[1][0].startswith(off_path)
        assert found[2] == []  # aoi_fl's own
        # installed where the app's processes look (here: their PYTHONPATH), it is theirs too
        monkeypatch.setenv("PYTHONPATH", str(site))
        assert [app._registered_here(c) for c in resolved[1:]] == [[], []]
    finally:
        del registry.SAMPLERS[name], registry.REGISTRARS[("sampler", name)]
        del plugins.FROM_ENTRY_POINTS[("sampler", name)]
        sys.modules.pop(module, None)
        plugins._entry_points.cache_clear()


def test_an_availability_model_registered_by_a_call_is_refused_before_flower_starts(tmp_path):
    name = f"always_{tmp_path.name}"
    availability.register_availability(type(name, (availability.Always,), {"name": name}))
    try:
        config = {**CONFIG, "sampler": {"name": "all_available"}, "availability": {"name": name}}
        resolved = resolve.resolve_config(config)
        assert app._registered_here(resolved) == [
            f"availability {name!r} (registered by tests.flower.test_app)"
        ]
        with pytest.raises(ValueError, match=rf"availability {name!r} \(registered by tests"):
            app.run_flower_app(config)
    finally:
        del availability.MODELS[name], availability.AVAILABILITY[name]
        del registry.REGISTRARS[("availability", name)]


@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_a_device_other_than_the_cpu_is_refused_by_every_flower_path(device):
    on_device = json.loads(json.dumps(CONFIG))
    on_device["training"]["device"] = device
    message = rf"training.device='{device}': Flower runs train on the CPU"
    with pytest.raises(ValueError, match=message):
        app.run_flower_app(on_device)
    with pytest.raises(ValueError, match=message):
        simulation.run_flower(on_device)
    with pytest.raises(ValueError, match=message):
        app.parse_run_config({**pyproject_run_config(), "training.device": device})
    app.parse_run_config({**pyproject_run_config(), "training.device": "cpu"})


@pytest.mark.parametrize("status", ["finished:failed", "finished:stopped"])
def test_a_run_that_did_not_complete_raises(tmp_path, monkeypatch, status):
    # `flwr run --stream` exits 0 whatever the run's end: the status comes from `flwr ls`
    @contextlib.contextmanager
    def local_superlink(home, env):
        yield superlink.CONNECTION

    def flwr(env, *args, echo=False):
        if args[0] == "run":
            return 0, "Successfully started run 7\nthe run's log\n"
        row = {"run-id": 7, "status": status, "status-details": "Simulation Runtime crashed"}
        return 0, "a warning of the CLI\n" + json.dumps({"success": True, "runs": [row]})

    monkeypatch.setattr(superlink, "_local_superlink", local_superlink)
    monkeypatch.setattr(superlink, "_flwr", flwr)
    env = app.flower_environment(tmp_path, "127.0.0.1:6379")
    message = rf"(?s)the Flower run ended {status}: Simulation Runtime crashed.*the run's log"
    with pytest.raises(RuntimeError, match=message):
        superlink._run_app(app.APP_DIR, tmp_path / "o.toml", "num-supernodes=10", env, quiet=True)


@pytest.mark.slow
def test_flwr_run_of_the_app_reproduces_the_in_process_run():
    # both sides with one torch thread (run_both; the app's clients and server use one)
    with busy_machine.watch() as seen:
        flower, trainer = simulation.run_both(CONFIG, "data", num_cpus=2, flower=app.run_flower_app)
    # the SuperLink, its SuperExec, the simulation, the Ray node: all on loopback, all ended
    assert seen and not busy_machine.beyond_loopback(seen)
    assert not busy_machine.listening(busy_machine.descendants(os.getpid()))
    history = trainer.history
    for key in ("lr", "selected", "weights", "update_norms", "test_loss", "test_accuracy"):
        assert flower.history[key] == history[key], key
    assert flower.history["eval_round"] == history["eval_round"] == [0, 1, 2, 3]
    assert flower.history["failed"] == [[], [], []]
    for k, v in trainer.reported_params().items():
        np.testing.assert_array_equal(flower.final_params[k], v.numpy())
    assert all(simulation.agreement(flower, trainer).values())


def test_the_clis_environment_has_no_colours_a_kernel_forces(monkeypatch, tmp_path):
    # a Jupyter kernel sets these, and the CLI then colours the JSON that `flwr ls` returns
    for name in app.COLOUR_FORCING:
        monkeypatch.setenv(name, "1")
    env = app.flower_environment(tmp_path, "127.0.0.1:6379")
    assert not set(app.COLOUR_FORCING) & set(env)
    assert env["NO_COLOR"] == "1" and env["FLWR_HOME"] == str(tmp_path)


# The example app's `flwr run` lives in this file so that it never runs beside this file's own
# `flwr run` (make test spreads test files over two workers): run together, the example's run
# was twice failed by its SuperLink with "No heartbeat received from the task" (issue 41's
# closing note), alone it passes.
@pytest.mark.slow
def test_the_example_app_runs_under_flwr_run(tmp_path):
    options = {"m": 2, "m_prime": 2, "seed": 5}
    run_config = {
        "num-server-rounds": 3,
        "local-steps": 2,
        "data-root": DATA,
        "output": str(tmp_path / "history.json"),
        "policy.name": "markov_optimal",
        "policy.n": N,
        **{f"policy.{k}": v for k, v in options.items()},
    }
    with busy_machine.watch() as seen:
        flwr_run(EXAMPLE, run_config, nodes=N, num_cpus=2, home=tmp_path)
    # the SuperLink, its SuperExec, the simulation, the Ray node: all on loopback, all ended
    assert seen and not busy_machine.beyond_loopback(seen)
    assert not busy_machine.listening(busy_machine.descendants(os.getpid()))
    history = json.loads((tmp_path / "history.json").read_text())
    assert history["selected"] == selections("markov_optimal", options, 3)
    assert history["failed"] == [[], [], []]
    # FedAvg's own aggregation of the ClientApp's metrics, every round
    assert sorted(history["train_metrics"]) == ["1", "2", "3"]
    assert all(np.isfinite(m["train_loss"]) for m in history["train_metrics"].values())
