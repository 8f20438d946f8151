"""``flwr run`` from Python (:func:`flwr_run`): a Flower App run by the ``flwr`` CLI on a local
SuperLink of its own, on a local Ray node, in an environment that reaches no network.
:func:`aoi_fl.flower.app.run_flower_app` and ``python -m aoi_fl.flower run`` run through it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from aoi_fl.core.validation import require_int
from aoi_fl.pipeline import ray_grid

#: environment variables that make the CLI colour its output (which a Jupyter kernel sets)
COLOUR_FORCING = ("FORCE_COLOR", "CLICOLOR_FORCE", "PY_COLORS")
#: how many times ``flwr ls`` is asked for a finished run's status
LS_ATTEMPTS = 5
#: the name of the SuperLink connection :func:`flwr_run` runs the app on
CONNECTION = "aoi-fl"
#: the environment of every Flower process the project starts: no telemetry, no update check
#: (both reach the network), and no ``uv sync`` of the app's dependencies at run time (it would
#: look for ``aoi-fl`` on a package index; the app runs in the environment that has it)
FLOWER_ENV = {
    "FLWR_TELEMETRY_ENABLED": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "FLWR_DISABLE_UPDATE_CHECK": "1",
    "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
}


def app_pythonpath() -> str:
    """``PYTHONPATH`` of Flower's processes: this checkout's ``aoi_fl`` first, then this
    process's ``$PYTHONPATH``."""
    root = str(Path(__file__).resolve().parents[2])
    return os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)


def flower_environment(flwr_home: str | os.PathLike, ray_address: str) -> dict[str, str]:
    """This process's environment for Flower's processes: :data:`FLOWER_ENV`, Flower's files
    under ``flwr_home``, this interpreter's scripts first on the path (the SuperLink starts the
    others by name) and this checkout's ``aoi_fl`` first on the Python path; no colours
    (:data:`COLOUR_FORCING`: the CLI's JSON must parse); ``RAY_ADDRESS`` set to
    ``ray_address``, a node of :func:`aoi_fl.pipeline.ray_grid.local_ray`, which the simulation
    joins rather than start Ray itself (with :data:`~aoi_fl.pipeline.ray_grid.LOCAL_ENV`, so
    that it reaches the node on 127.0.0.1)."""
    # a Jupyter kernel sets FORCE_COLOR and CLICOLOR_FORCE, and the CLI then colours its JSON
    env = {k: v for k, v in os.environ.items() if k not in COLOUR_FORCING}
    env.update(FLOWER_ENV)
    env.update(ray_grid.LOCAL_ENV)
    env["RAY_ADDRESS"] = ray_address
    env["NO_COLOR"] = "1"
    env["FLWR_HOME"] = str(flwr_home)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = app_pythonpath()
    # the CLI reaches the SuperLink over HTTP on this machine, never through a proxy
    env["NO_PROXY"] = ",".join(p for p in ("127.0.0.1,localhost", env.get("NO_PROXY")) if p)
    env.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    return env


def _wait_healthy(process: subprocess.Popen, port: int, log: Path, timeout: float) -> None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"flower-superlink exited with code {process.returncode} before it was ready:\n"
                + log.read_text()[-3000:]
            )
        try:
            with opener.open(f"http://127.0.0.1:{port}/health", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(
        f"flower-superlink was not ready after {timeout:.0f} s:\n" + log.read_text()[-3000:]
    )


@contextlib.contextmanager
def _local_superlink(home: Path, env: dict[str, str]) -> Iterator[str]:
    """A SuperLink in simulation mode on a free port of this machine, as the connection
    :data:`CONNECTION` of the Flower home ``home``; stopped on exit. Its SuperExec and a
    simulation still running (an interrupted call) watch their parent's pid and end within
    seconds of it, the simulation with its Ray instance."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "{CONNECTION}"\n\n[superlink.{CONNECTION}]\n'
        f'address = "127.0.0.1:{port}"\ninsecure = true\n'
    )
    log = home / "superlink.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            ["flower-superlink", "--insecure", "--simulation"]
            + ["--host", "127.0.0.1", "--port", str(port)],
            env=env,
            cwd=home,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_healthy(process, port, log, timeout=120)
        yield CONNECTION
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _flwr(env: dict[str, str], *args: str, echo: bool = False) -> tuple[int, str]:
    """``flwr args...``: its exit code and output (printed line by line with ``echo``)."""
    flwr = str(Path(sys.executable).parent / "flwr")
    lines = []
    with subprocess.Popen(
        [flwr, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as process:
        try:
            for line in process.stdout:
                lines.append(line)
                if echo:
                    print(line, end="")
        except BaseException:
            process.kill()  # interrupted: the CLI would stream the run's log to its end
            raise
    return process.returncode, "".join(lines)


def _run_app(app_dir: Path, overrides: Path, federation: str, env: dict, quiet: bool) -> None:
    """``flwr run`` of the app on a local SuperLink of its own, to the run's end; raises
    RuntimeError with the run's log unless it completed."""
    with _local_superlink(Path(env["FLWR_HOME"]), env) as connection:
        code, log = _flwr(
            env,
            "run",
            str(app_dir),
            connection,
            "--stream",
            "--run-config",
            str(overrides),
            "--federation-config",
            federation,
            echo=not quiet,
        )
        started = re.search(r"Successfully started run (\d+)", log)
        if code or started is None:
            raise RuntimeError(f"`flwr run` did not start the run:\n{log[-3000:]}")
        # --stream ends with the run's log whether the run completed or failed; the CLI's
        # warnings share its output with the JSON, and a busy SuperLink may answer late
        for attempt in range(LS_ATTEMPTS):
            _, listed = _flwr(
                env, "ls", connection, "--run-id", started.group(1), "--format", "json"
            )
            try:
                (row,) = json.loads(listed[listed.find("{") :])["runs"]
                status, details = row["status"], row["status-details"]
                break
            except (ValueError, KeyError, TypeError) as exc:
                if attempt == LS_ATTEMPTS - 1:
                    raise RuntimeError(f"`flwr ls` did not describe the run: {listed}") from exc
                time.sleep(2.0)
    if status != "finished:completed":
        raise RuntimeError(f"the Flower run ended {status}: {details}\n{log[-3000:]}")


def flwr_run(
    app_dir: str | os.PathLike,
    run_config: Mapping[str, Any],
    *,
    nodes: int,
    num_cpus: int = 2,
    quiet: bool = True,
    home: str | os.PathLike,
) -> None:
    """``flwr run`` of the Flower App in ``app_dir``, ``run_config`` overriding its run config,
    on a local simulation of ``nodes`` nodes (one CPU each) on a Ray node of ``num_cpus`` CPUs
    (:func:`aoi_fl.pipeline.ray_grid.local_ray`), with a SuperLink of its own whose files go to
    ``home``; returns when the run completed and raises RuntimeError with its status and log
    otherwise (``flwr run --stream`` itself exits 0 after a failed run)."""
    home = Path(home)
    overrides = home / "overrides.toml"  # JSON's strings, numbers and booleans are TOML's
    overrides.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in run_config.items()))
    # no init-args: ray.init refuses num_cpus when it joins a node that is up already
    federation = (
        f"num-supernodes={require_int('nodes', nodes, minimum=1)} client-resources-num-cpus=1"
    )
    with ray_grid.local_ray(require_int("num_cpus", num_cpus, minimum=1)) as address:
        _run_app(
            Path(app_dir).resolve(), overrides, federation, flower_environment(home, address), quiet
        )
