"""The Makefile's entry points a newcomer meets first: the interpreter check and `make lab`."""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="make is not installed")


def make(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [MAKE, "--no-print-directory", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        **kwargs,
    )


def fake_python(tmp_path: Path, version: str) -> Path:
    # answers --version like that interpreter and fails everything else, as 3.12 fails the check
    path = tmp_path / "python3"
    path.write_text(
        f'#!/bin/sh\n[ "$1" = "--version" ] && echo "Python {version}" && exit 0\nexit 1\n'
    )
    path.chmod(0o755)
    return path


def test_the_running_interpreter_passes_the_check():
    done = make("check-python", f"PYTHON3={sys.executable}")
    assert done.returncode == 0, done.stderr


def test_another_python_stops_with_what_to_do(tmp_path):
    fake = fake_python(tmp_path, "3.12.3")
    done = make("check-python", f"PYTHON3={fake}")
    assert done.returncode != 0
    assert f"aoi-fl needs Python 3.11, but PYTHON3={fake} is: Python 3.12.3." in done.stderr
    for advice in ("apt install python3.11", "PYTHON3=/path/to/python3.11", "environment.yml"):
        assert advice in done.stderr


def test_the_venv_is_built_only_after_the_check():
    # a dry run of the venv's recipe from scratch: the check comes before `python -m venv`
    done = make("-n", "-W", "pyproject.toml", "venv", f"PYTHON3={sys.executable}")
    lines = done.stdout.splitlines()
    check = next(i for i, line in enumerate(lines) if "check-python" in line)
    build = next(i for i, line in enumerate(lines) if "-m venv" in line)
    assert check < build


def test_lab_adds_allow_root_exactly_when_run_as_root():
    command = make("-n", "lab").stdout.splitlines()[-1]
    assert "jupyter lab" in command
    assert ("--allow-root" in command) == (os.geteuid() == 0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_make_lab_serves_and_stops():
    port, token = free_port(), "aoi-fl-test-token"
    proc = subprocess.Popen(
        [
            MAKE,
            "--no-print-directory",
            "lab",
            f"LAB_PORT={port}",
            f"LAB_ARGS=--IdentityProvider.token={token}",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # the whole group (make, jupyter) is stopped below
    )
    url = f"http://127.0.0.1:{port}/api/status?token={token}"
    status, deadline = None, time.monotonic() + 90
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(url, timeout=2) as reply:
                    status = reply.status
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            output = proc.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output = proc.communicate()[0]
    assert status == 200, output[-3000:]
    # the line the Makefile prints, and JupyterLab's own URL to open (it masks a given token)
    assert f"open the http://127.0.0.1:{port}/lab?token=" in output
    assert re.search(rf"ServerApp\] http://127\.0\.0\.1:{port}/lab\?token=", output), output[-3000:]


# -o: the venv as it is (a pyproject.toml newer than the venv would reinstall it first)
AS_BUILT = ("-o", ".venv/.installed")


def test_figures_checks_its_variables_before_the_data_step():
    lines = make("-n", *AS_BUILT, "figures", "NB=03", "DEVICE=cpu").stdout.splitlines()
    check, run = (i for i, line in enumerate(lines) if "scripts/run_notebooks.py" in line)
    data = next(i for i, line in enumerate(lines) if "fetch-mnist" in line)
    assert check < data < run
    assert lines[check].endswith("run_notebooks.py --check --profile=cpu --rerun=0 --only=03")
    assert lines[run].endswith("run_notebooks.py --profile=cpu --rerun=0 --only=03")


def test_figures_refuses_a_bad_variable_before_fetching_anything():
    done = make(*AS_BUILT, "figures", "EXECUTOR=bogus", "RERUN=2")
    assert done.returncode == 2
    assert done.stderr.splitlines()[:3] == [
        "make figures: no notebook was run; fix these first:",
        "  RERUN='2' (--rerun): unknown RERUN '2'; valid: 0, 1",
        "  EXECUTOR='bogus' ($AOI_FL_EXECUTOR): unknown executor 'bogus'; valid: local, ray",
    ]
    # bug: the data step (seconds) and notebooks 01-04 ran before a bad EXECUTOR was reported
    assert "fetch-mnist" not in done.stdout + done.stderr


def _fake_fetcher(tmp_path: Path, failure: int) -> Path:
    # fetches MNIST; fails Fashion-MNIST with ``failure`` until the package lists are updated
    path = tmp_path / "python"
    path.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {tmp_path}/calls\n'
        'case "$*" in *fetch-fashion-mnist*)\n'
        f"  [ -e {tmp_path}/updated ] && exit 0; echo 'fetch failed' >&2; exit {failure};;\n"
        "esac\n"
    )
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(
    "failure, can_root, updated",
    [(3, True, True), (3, False, False), (1, True, False)],
    ids=["unlisted-as-root", "unlisted-no-root", "another-failure"],
)
def test_data_updates_the_package_lists_only_where_apt_does_not_list_the_package(
    tmp_path, failure, can_root, updated
):
    # exit status 3: apt-get does not list the package (a fresh machine's empty lists), which
    # `apt-get update` as root mends; any other failure, or no root, stands with its status
    as_root = tmp_path / "as_root"
    as_root.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/root\ntouch {tmp_path}/updated\n')
    as_root.chmod(0o755)
    done = make(
        *AS_BUILT,
        "data",
        f"PY={_fake_fetcher(tmp_path, failure)}",
        f"AS_ROOT={as_root if can_root else ''}",
    )
    fetches = (tmp_path / "calls").read_text().splitlines()
    assert fetches[:2] == [
        "-m aoi_fl.data fetch-mnist --root data",
        "-m aoi_fl.data fetch-fashion-mnist --root data",
    ]
    if updated:
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "root").read_text() == "apt-get update -q\n"
        assert fetches[2:] == ["-m aoi_fl.data fetch-fashion-mnist --root data"]
    else:
        assert done.returncode != 0
        assert f"data] Error {failure}" in done.stderr  # the fetcher's own status
        assert not (tmp_path / "root").exists() and len(fetches) == 2


def test_as_root_is_nothing_added_for_root_else_sudo():
    done = make("--eval", 'print-as-root: ; @echo "[$(AS_ROOT)]"', "print-as-root")
    expected = "env" if os.getuid() == 0 else (shutil.which("sudo") or "")
    assert done.stdout == f"[{expected}]\n", done.stderr
