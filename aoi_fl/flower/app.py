"""The project's Flower App (``flower-app/`` in the repository, run with ``flwr run``): its run
configuration, the work of its ServerApp and ClientApp, and :func:`run_flower_app`, which runs
one configuration through ``flwr run`` from Python (:mod:`aoi_fl.flower.superlink`).

The run configuration (``[tool.flwr.app.config]`` of ``flower-app/pyproject.toml``; ``flwr run
flower-app --run-config 'key=value ...'`` overrides keys it has) holds

- the app's options (:data:`APP_OPTIONS`, with their defaults): ``config-file``, ``data-root``,
  ``output`` (where the history is written, as JSON; by default in ``flower-runs/``, a folder
  the repository ignores), ``model-output`` (where the final model is
  written, as ``.npz``; empty: nowhere), ``on-failure`` (:data:`aoi_fl.flower.strategy.ON_FAILURE`)
  and ``timeout`` (the seconds a round waits for its replies);
- a run configuration of :mod:`aoi_fl.pipeline.runs` (:func:`~aoi_fl.pipeline.runs.resolve_config`),
  either from the JSON file ``config-file`` names or, when ``config-file`` is empty, inline: one
  key per option, ``<section>.<option>`` with the sections of :data:`SECTIONS`, nested as the
  configuration is (``training.lr.name``). These are the keys Flower makes of TOML tables
  (``[tool.flwr.app.config.sampler]`` with ``name = "markov_optimal"`` is ``sampler.name``).

Flower's run configuration holds strings, numbers and booleans only: an option that is a list
or None goes through ``config-file`` (or is left out, for its default). With ``config-file`` set,
the inline sections of the app's ``pyproject.toml`` are not used, and overriding one of their keys
on the command line is an error (a value that would be ignored). Any other key is an error that
names it, its value and the keys allowed; every check runs before anything trains
(``python -m aoi_fl.flower check``, :mod:`aoi_fl.flower.cli`, runs them in seconds, before any
simulation starts).

A ``name`` set on the command line (``sampler.name``, ``training.lr.name``,
``training.algorithm.name``: :data:`NAMED_TABLES`) leaves out the options of the app's table that
the named factory does not take, and keeps the others: the shipped options of the default
sampler do not break another one, and an option the new one needs but the table lacks is an
error that says so (``--run-config`` sets only keys the app's ``pyproject.toml`` has). The nodes,
which do not know what the command line set, leave out the same options (the ServerApp has
refused any other unknown one). An algorithm that takes ``local_steps`` (FedSUM's K) gets
``training.local_steps`` unless its table names its own.

Relative paths are taken from the working directory of the process that reads them: with
``flwr run``, the SuperLink's (the directory of the ``flwr run`` that started the local
SuperLink). :func:`run_flower_app` passes absolute paths.

The clients train with one torch thread each (:func:`aoi_fl.flower.client.client_app`) and the
server evaluates with one: the in-process trainer run with one thread gives the same bits.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from flwr.app import Context
from flwr.serverapp import Grid

from aoi_fl.core import registry
from aoi_fl.core.train import LR_SCHEDULES
from aoi_fl.core.validation import require_choice, require_int, require_real
from aoi_fl.flower.simulation import FlowerRun, serve
from aoi_fl.flower.strategy import ON_FAILURE, SamplerStrategy, require_cpu

# re-exported: cli.py, the tests and users import flwr run's names from the app
from aoi_fl.flower.superlink import (  # noqa: F401
    COLOUR_FORCING,
    CONNECTION,
    FLOWER_ENV,
    LS_ATTEMPTS,
    app_pythonpath,
    flower_environment,
    flwr_run,
)
from aoi_fl.pipeline import plugins
from aoi_fl.pipeline.cache import arrays_bytes, atomic_write_bytes
from aoi_fl.pipeline.runs import build_trainer, resolve_config

#: the app's own options and their defaults (the rest of a run configuration is the run's)
APP_OPTIONS: dict[str, Any] = {
    "config-file": "",
    "data-root": "data",
    "output": "flower-runs/history.json",
    "model-output": "",
    "on-failure": "renormalise",
    "timeout": 600.0,
}
#: the sections of a run configuration (:func:`aoi_fl.pipeline.runs.resolve_config`)
SECTIONS = ("dataset", "partition", "model", "sampler", "training", "availability")
#: the tables whose ``name`` picks a factory (each read through a function that loads the
#: papers' registrations first), the arguments its options are not (``n``, ``sizes``)
NAMED_TABLES: dict[str, tuple[Callable[[], dict[str, Any]], int]] = {
    "sampler": (plugins.samplers, 2),
    "training.lr": (lambda: LR_SCHEDULES, 0),
    "training.algorithm": (plugins.algorithms, 0),
}
#: the app's directory in a checkout of the repository (:func:`run_flower_app`'s default)
APP_DIR = Path(__file__).resolve().parents[2] / "flower-app"


@dataclass(frozen=True)
class AppConfig:
    """A checked run configuration of the app: the run's resolved configuration
    (:func:`aoi_fl.pipeline.runs.resolve_config`) and the app's options, paths absolute."""

    config: dict[str, Any]
    data_root: str
    output: Path
    model_output: Path | None
    on_failure: str
    timeout: float


def _allowed() -> str:
    return (
        f"allowed: the app's options {', '.join(APP_OPTIONS)}, and the options of a run "
        f"configuration as '<section>.<option>' with a section of {', '.join(SECTIONS)} "
        "(e.g. 'sampler.name', 'training.lr.lr0')"
    )


def _string(key: str, value: Any, *, empty: bool) -> str:
    if not isinstance(value, str) or (not empty and not value):
        wanted = "a string" if empty else "a non-empty string"
        raise TypeError(f"run config {key}={value!r} must be {wanted} (a path)")
    return value


def _path(text: str) -> Path:
    return Path(text).expanduser().resolve()


def _inline(run_config: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration of the run config's ``<section>.<option>`` keys, nested."""
    config: dict[str, Any] = {}
    for key, value in run_config.items():
        if key in APP_OPTIONS:
            continue
        section, _, rest = key.partition(".")
        if section in SECTIONS and not rest:
            raise ValueError(
                f"run config key {key!r} (= {value!r}) must be given option by option, as "
                f"'{key}.<option>' keys (a TOML table [tool.flwr.app.config.{key}]); lists "
                "and None only through config-file"
            )
        if section not in SECTIONS:
            raise ValueError(
                f"run config key {key!r} (= {value!r}) is not an option of the aoi-fl app; "
                + _allowed()
            )
        node = config.setdefault(section, {})
        *parents, leaf = rest.split(".")
        for depth, part in enumerate(parents):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                above = ".".join([section, *parents[: depth + 1]])
                raise ValueError(
                    f"run config key {key!r} (= {value!r}) needs {above!r} to be a table of "
                    f"options, but {above} = {node!r}; give one of the two"
                )
        if isinstance(node.get(leaf), dict):
            raise ValueError(
                f"run config key {key!r} (= {value!r}) is also a table of options "
                f"({key}.{next(iter(node[leaf]))}, ...); give one of the two"
            )
        node[leaf] = value
    return config


def _from_file(text: str, path: Path) -> dict[str, Any]:
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(
            f"run config config-file={text!r} ({path}) must be a readable JSON file holding "
            f"a run configuration: {exc}"
        ) from exc
    if not isinstance(loaded, dict):
        raise ValueError(
            f"run config config-file={text!r} ({path}) holds a {type(loaded).__name__}, not a "
            f"run configuration (a JSON object with the sections {', '.join(SECTIONS)})"
        )
    return loaded


def _taken(table: str, name: Any) -> set[str] | None:
    """The options the factory ``name`` of ``table`` takes (None: any, or no such factory)."""
    table_of, leading = NAMED_TABLES[table]
    factories = table_of()
    if not isinstance(name, str) or name not in factories:
        return None
    params = list(inspect.signature(factories[name]).parameters.values())[leading:]
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params} | {"name"}


def _renamed(run_config: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``run_config`` without the options of a named table that its ``name`` does not take
    (the shipped options of another sampler, after ``sampler.name`` changed on the command
    line), and the keys left out."""
    dropped = []
    for table in NAMED_TABLES:
        taken = _taken(table, run_config.get(f"{table}.name"))
        if taken is None:
            continue
        prefix = f"{table}."
        dropped += [
            k
            for k in run_config
            if k.startswith(prefix)
            and "." not in k[len(prefix) :]
            and k[len(prefix) :] not in taken
        ]
    return {k: v for k, v in run_config.items() if k not in dropped}, dropped


def _local_steps(config: dict[str, Any]) -> None:
    """An algorithm that takes ``local_steps`` (FedSUM: its K) gets ``training.local_steps``,
    the one place a run configuration of the app says it, unless it names its own."""
    training = config.get("training", {})
    algorithm = training.get("algorithm")
    if not isinstance(algorithm, dict) or "local_steps" in algorithm:
        return
    taken = _taken("training.algorithm", algorithm.get("name"))
    if taken is not None and "local_steps" in taken and "local_steps" in training:
        algorithm["local_steps"] = training["local_steps"]


def parse_run_config(
    run_config: Mapping[str, Any],
    *,
    overrides: Iterable[str] = (),
    node: bool = False,
) -> AppConfig:
    """The app's options and the run's configuration, checked (see the module docstring).

    ``overrides``: the keys set on the command line (a run's ``override_config``), refused
    where ``config-file`` makes them ineffective. Relative paths start from the working
    directory. Raises ValueError or TypeError naming the key, its value and what is allowed;
    resolving the configuration loads no data.
    """
    overrides = set(overrides)
    options = {**APP_OPTIONS, **{k: v for k, v in run_config.items() if k in APP_OPTIONS}}
    renamed = [f"{table}.name" for table in NAMED_TABLES if f"{table}.name" in overrides]
    dropped: list[str] = []
    if renamed or node:
        # a node does not know what the command line set: it leaves out what the ServerApp
        # left out, having checked the rest (the ServerApp refuses any other unknown option)
        run_config, dropped = _renamed(run_config)
    inline = _inline(run_config)  # every key is checked, whichever source the run uses
    _local_steps(inline)
    config_file = _string("config-file", options["config-file"], empty=True)
    if config_file:
        ignored = sorted(k for k in overrides if k not in APP_OPTIONS)
        if ignored:
            shown = ", ".join(f"{k}={run_config.get(k)!r}" for k in ignored)
            raise ValueError(
                f"run config {shown} given with config-file={config_file!r}: the "
                "configuration is the file's; put these options in the file, or set "
                "config-file='' to use the inline options"
            )
        config = _from_file(config_file, _path(config_file))
    else:
        config = inline
    model_output = _string("model-output", options["model-output"], empty=True)
    on_failure = options["on-failure"]
    require_cpu(config)  # before resolving, which drops the device (not part of a run's key)
    try:
        resolved = resolve_config(config)
    except (ValueError, TypeError) as exc:
        if not renamed or config_file:
            raise
        raise type(exc)(
            f"{exc}. With {', '.join(renamed)} set on the command line, the options of the "
            f"app's table that it does not take are left out ({', '.join(dropped) or 'none'}) "
            "and the others are the table's or the command line's; `--run-config` can set only "
            "keys the app's pyproject.toml has, so add a missing option to its table there, or "
            "give the whole configuration in config-file"
        ) from exc
    return AppConfig(
        config=resolved,
        data_root=str(_path(_string("data-root", options["data-root"], empty=False))),
        output=_path(_string("output", options["output"], empty=False)),
        model_output=_path(model_output) if model_output else None,
        on_failure=require_choice("run config on-failure", on_failure, ON_FAILURE),
        timeout=require_real(
            "run config timeout", options["timeout"], minimum=0.0, strict_minimum=True
        ),
    )


@functools.lru_cache(maxsize=4)
def _node_app_config(items: tuple[tuple[str, Any], ...]) -> AppConfig:
    # a node parses its run configuration once, not once per training message
    return parse_run_config(dict(items), node=True)


def node_config(context: Context) -> dict[str, Any]:
    """A ClientApp node's run configuration (the ``config`` of
    :func:`aoi_fl.flower.client.client_app`)."""
    return _node_app_config(tuple(sorted(context.run_config.items()))).config


def node_data_root(context: Context) -> str:
    """A ClientApp node's data root (the ``data_root`` of
    :func:`aoi_fl.flower.client.client_app`)."""
    return _node_app_config(tuple(sorted(context.run_config.items()))).data_root


def check_nodes(nodes: int, n_clients: int) -> None:
    """One node per client: raise ValueError, with the ways to resize the federation, unless
    the federation's ``nodes`` equal the configuration's ``n_clients``."""
    if nodes != n_clients:
        raise ValueError(
            f"the federation has num-supernodes={nodes} nodes but the configuration has "
            f"partition.n_clients={n_clients} clients, and every client is one node: run "
            f"`flwr run <app> --federation-config num-supernodes={n_clients}`, or set it once "
            f"with `flwr federation simulation-config --num-supernodes {n_clients}`"
        )


def _require_writable(paths: Mapping[str, Path | None]) -> None:
    # a run whose result cannot be written fails before it trains, not after
    for key, path in paths.items():
        if path is None:
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(
                f"run config {key}={str(path)!r}: cannot create its folder: {exc}"
            ) from exc
        if not os.access(path.parent, os.W_OK):
            raise ValueError(f"run config {key}={str(path)!r}: its folder is not writable")


def serve_run(grid: Grid, context: Context) -> FlowerRun:
    """The app's ServerApp: checks the run configuration and the number of nodes, trains the
    configuration (:func:`aoi_fl.flower.simulation.serve` on the trainer
    :func:`aoi_fl.pipeline.runs.build_trainer` builds), writes its history to ``output`` and its
    final model to ``model-output``, each through a temporary file and a rename."""
    app = parse_run_config(context.run_config, overrides=grid.run.override_config)
    # a simulation's nodes all exist when its ServerApp starts: a count short now stays short
    check_nodes(len(list(grid.get_node_ids())), app.config["partition"]["n_clients"])
    _require_writable({"output": app.output, "model-output": app.model_output})
    torch.set_num_threads(1)  # evaluates as the in-process trainer with one thread
    trainer = build_trainer(app.config, app.data_root, device="cpu")
    run = serve(grid, trainer, on_failure=app.on_failure, timeout=app.timeout)
    atomic_write_bytes(app.output, json.dumps(run.history).encode())
    if app.model_output is not None:
        atomic_write_bytes(app.model_output, arrays_bytes(run.final_params))
    return run


def _registered_here(config: Mapping[str, Any]) -> list[str]:
    """The sampler, algorithm and availability model of a resolved ``config`` that the app's
    processes would not have: registered by a call of a module outside aoi_fl and the paper
    packages (a user's file, a notebook cell), or declared by an entry point of a package off
    their import path (one put on ``sys.path`` at run time)."""
    plugins.load()
    named = [
        ("sampler", config["sampler"]["name"]),
        ("algorithm", config["training"]["algorithm"]["name"]),
    ]
    if "availability" in config:
        named.append(("availability", config["availability"]["name"]))
    folders = {plugins.FROM_ENTRY_POINTS.get(key) for key in named} - {None}
    path = _app_import_path() if folders else set()
    missing = []
    for kind, name in named:
        if (kind, name) in plugins.FROM_ENTRY_POINTS:
            folder = plugins.FROM_ENTRY_POINTS[(kind, name)]
            if folder is not None and folder not in path:
                missing.append(
                    f"{kind} {name!r} (declared by an entry point of a package in {folder}, "
                    "which is not on the app's import path)"
                )
        elif not plugins.registered_by_aoi_fl(kind, name):
            registrar = registry.REGISTRARS.get((kind, name))
            missing.append(f"{kind} {name!r} (registered by {registrar or 'an unknown module'})")
    return missing


def _app_import_path() -> set[str]:
    """The folders on the import path of the app's processes: this interpreter started with
    their ``PYTHONPATH``, not this process's ``sys.path`` as it has grown since."""
    done = subprocess.run(
        [sys.executable, "-c", "import json, sys; print(json.dumps(sys.path))"],
        env={**os.environ, "PYTHONPATH": app_pythonpath()},
        capture_output=True,
        text=True,
        check=True,
    )
    return {str(Path(p).resolve()) for p in json.loads(done.stdout) if p}


def run_flower_app(
    config: Mapping[str, Any],
    *,
    data_root: str = "data",
    num_cpus: int = 2,
    on_failure: str = "renormalise",
    timeout: float = 600.0,
    quiet: bool = True,
    app_dir: str | os.PathLike = APP_DIR,
) -> FlowerRun:
    """Train ``config`` (a run configuration of :mod:`aoi_fl.pipeline.runs`) with ``flwr run``
    of the app in ``app_dir`` on a local simulation, as
    :func:`aoi_fl.flower.simulation.run_flower` does in process: the ServerApp's history and
    final model, read back.

    The configuration goes to the app as a temporary file (``config-file``), run by a SuperLink
    of this call's own (a free port, a temporary Flower home, the environment of
    :func:`flower_environment`) that is stopped when the run ends: one node per client, one
    CPU per node, on a Ray node of ``num_cpus`` CPUs started for the run
    (:func:`aoi_fl.pipeline.ray_grid.local_ray`: it comes up on a busy machine, where Flower's
    own start of Ray fails now and then, and listens on 127.0.0.1 only). What cannot run (a
    configuration, a sampler the strategy refuses, a sampler or algorithm only this process has
    registered) is refused before anything starts; a run that does not complete raises
    RuntimeError with its status and log (``flwr run --stream`` itself exits 0 after a failed
    run). ``quiet=False`` prints the run's log as it streams.
    """
    require_cpu(config)
    resolved = resolve_config(config)
    timeout = require_real("timeout", timeout, minimum=0.0, strict_minimum=True)
    num_cpus = require_int("num_cpus", num_cpus, minimum=1)
    app_dir = Path(app_dir).resolve()
    if not (app_dir / "pyproject.toml").is_file():
        raise ValueError(
            f"app_dir={str(app_dir)!r} must be a Flower App's folder (no pyproject.toml)"
        )
    if local := _registered_here(resolved):
        raise ValueError(
            f"{', '.join(local)}: the app's processes have aoi_fl and what packages installed "
            "in this environment declare as entry points (aoi_fl.samplers, aoi_fl.algorithms, "
            "aoi_fl.availability), "
            "not this process's registrations; declare the factory as such an entry point of "
            "an installed package, or use aoi_fl.flower.simulation.run_flower, which ships the "
            "factory to its clients"
        )
    # the algorithm and on_failure as the ServerApp will check them, before anything starts
    SamplerStrategy.from_trainer(build_trainer(resolved, data_root, device="cpu"), on_failure)
    with tempfile.TemporaryDirectory(prefix="aoi_fl_app_") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "config.json").write_text(json.dumps(resolved))
        run_config = {
            "config-file": str(tmp / "config.json"),
            "data-root": str(Path(data_root).resolve()),
            "output": str(tmp / "history.json"),
            "model-output": str(tmp / "model.npz"),
            "on-failure": on_failure,
            "timeout": timeout,
        }
        flwr_run(
            app_dir,
            run_config,
            nodes=resolved["partition"]["n_clients"],
            num_cpus=num_cpus,
            quiet=quiet,
            home=tmp,
        )
        history = json.loads((tmp / "history.json").read_text())
        with np.load(tmp / "model.npz") as arrays:
            final = {k: arrays[k] for k in arrays.files}
    return FlowerRun(history, final)
