"""``python -m aoi_fl.flower``: the project's Flower App checked in seconds, and run to an exit
status that says whether the run completed.

``flwr run`` checks a run configuration only once the simulation has started (its ServerApp
does, tens of seconds in), and ``flwr run --stream`` exits 0 after a failed run. Here

- ``check [APP] [--run-config '...'] [--num-supernodes N]`` fuses the app's run config with the
  overrides as Flower does (a key the app's ``pyproject.toml`` lacks is refused, as Flower
  refuses it), checks it as the ServerApp will (:func:`aoi_fl.flower.app.parse_run_config`:
  the key, its value and what is allowed) and, with ``--num-supernodes``, the number of nodes
  against ``partition.n_clients``; loads no data and starts nothing;
- ``run`` checks the same way, then runs the app with ``flwr run`` on a local simulation of its
  own (:func:`aoi_fl.flower.app.flwr_run`; paths relative to the working directory) and exits 1,
  with the run's status and log, unless the run completed.

Exit status: 0 done, 1 the run failed, 2 the configuration was refused.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flwr.common.config import get_fused_config_from_dir, parse_config_args

from aoi_fl.flower.app import APP_DIR, AppConfig, check_nodes, flwr_run, parse_run_config

#: the app's options that are paths, made absolute before the SuperLink (elsewhere) reads them
PATH_OPTIONS = ("config-file", "data-root", "output", "model-output")


def checked(
    app_dir: Path, run_config: Sequence[str], nodes: int | None
) -> tuple[AppConfig, dict[str, Any]]:
    """The app's checked configuration and the command line's overrides, paths absolute."""
    overrides = parse_config_args(list(run_config))
    try:
        fused = get_fused_config_from_dir(app_dir, overrides)
    except ValueError as exc:
        raise ValueError(f"--run-config: {exc} (the keys of {app_dir / 'pyproject.toml'})") from exc
    app = parse_run_config(fused, overrides=overrides)
    if nodes is not None:
        check_nodes(nodes, app.config["partition"]["n_clients"])
    for key in PATH_OPTIONS:
        if fused.get(key):
            overrides[key] = str(Path(str(fused[key])).expanduser().resolve())
    return app, overrides


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aoi_fl.flower", description=__doc__)
    parser.add_argument("command", choices=("check", "run"))
    parser.add_argument("app", nargs="?", type=Path, default=APP_DIR, help="the App's folder")
    parser.add_argument("--run-config", action="append", default=[], help="as flwr run's")
    parser.add_argument("--num-supernodes", type=int, help="default: partition.n_clients")
    parser.add_argument("--num-cpus", type=int, default=2, help="the local Ray node's CPUs")
    args = parser.parse_args(argv)
    try:
        app, overrides = checked(args.app, args.run_config, args.num_supernodes)
    except (ValueError, TypeError) as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    print(f"checked: {app.config['sampler']['name']} on {app.config['dataset']['name']}")
    if args.command == "check":
        return 0
    nodes = args.num_supernodes or app.config["partition"]["n_clients"]
    with tempfile.TemporaryDirectory(prefix="aoi_fl_flwr_") as home:
        try:
            flwr_run(args.app, overrides, nodes=nodes, num_cpus=args.num_cpus, home=home)
        except RuntimeError as exc:
            print(f"failed: {exc}", file=sys.stderr)
            return 1
    print(f"completed: the history is in {app.output}")
    return 0
