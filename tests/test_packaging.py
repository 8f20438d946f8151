"""Packaging (issue 41): the sources make an sdist, the sdist a wheel, and the wheel, installed in
a fresh virtual environment (no editable install, no repository on the path), runs the
selection adapter with the example app's ClientApp and satisfies the Flower Apps' dependency
line.

The build calls setuptools' PEP 517 hooks (what ``python -m build --no-isolation`` calls) on a
copy of the sources, so nothing is written into the checkout and no package index is needed
(the environment's setuptools is at least what ``[build-system]`` asks for: torch requires
setuptools>=77.0.3).
The fresh environment gets the wheel alone; the heavy dependencies it declares (torch, Flower,
Ray, ...) are the test environment's, seen through a path file appended after the fresh
environment's own site-packages: the wheel's ``aoi_fl`` comes first, and the environment's
``.pth`` files (its editable ``aoi_fl`` among them) are not run.
"""

import json
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")

from aoi_fl.core import registry  # noqa: E402
from aoi_fl.pipeline import plugins  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: what the sdist is built from
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "aoi_fl")
N, ROUNDS = 4, 2
OPTIONS = {"m": 2, "m_prime": 2, "seed": 7}

#: run in the fresh environment: the example's ClientApp on the in-process grid, FedAvg wrapped
SCRIPT = """
import json, sys
sys.path.insert(0, {example!r})
from flwr.app import ArrayRecord
from flwr.serverapp.strategy import FedAvg
import aoi_fl
from aoi_fl.flower.adapter import with_policy
from aoi_fl.flower.inprocess import InProcessGrid, node_ids, task_identity
from quickstart import client_app, task
grid = InProcessGrid(client_app.app, node_ids({n}), node_config={{"num-partitions": {n}}})
for context in grid.contexts.values():
    context.run_config = {{"data-root": {data!r}, "local-steps": 1, "batch-size": 8, "lr": 0.1}}
strategy = with_policy(FedAvg(fraction_evaluate=0.0), "markov_optimal", n={n}, **{options!r})
with task_identity():
    strategy.start(grid=grid, initial_arrays=ArrayRecord(task.initial_model().state_dict()),
                   num_rounds={rounds}, timeout=60)
print(json.dumps({{"aoi_fl": aoi_fl.__file__, "selected": strategy.history["selected"]}}))
"""


def run(*args, cwd, env=None):
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def hook(name, source, out):
    """setuptools' PEP 517 hook ``name`` run in ``source``: the file it made in ``out``."""
    code = f"from setuptools import build_meta; print(build_meta.{name}({str(out)!r}))"
    return out / run(sys.executable, "-c", code, cwd=source).strip().splitlines()[-1]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("packaging")
    source = tmp / "source"
    source.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, source / name)
    sdist = hook("build_sdist", source, tmp / "dist")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp / "unpacked", filter="data")
    (unpacked,) = (tmp / "unpacked").iterdir()
    wheel = hook("build_wheel", unpacked, tmp / "dist")  # the wheel of the sdist alone
    return tmp, sdist, wheel


@pytest.fixture(scope="module")
def fresh(built):
    tmp, _, wheel = built
    venv = tmp / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp)
    python = venv / "bin" / "python"
    pip = (sys.executable, "-m", "pip", "--python", python)
    # the wheel alone, before the test environment is visible: nothing else to resolve
    run(*pip, "install", "--no-deps", "--no-index", "--quiet", wheel, cwd=tmp)
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=tmp)
    Path(site.strip(), "test_environment.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return python, pip


@pytest.mark.slow
def test_the_sdist_holds_the_package_and_its_metadata(built):
    _, sdist, wheel = built
    with tarfile.open(sdist) as archive:
        names = {Path(*Path(n).parts[1:]).as_posix() for n in archive.getnames()}
    assert {"pyproject.toml", "README.md", "LICENSE", "aoi_fl/flower/adapter.py"} <= names
    assert sdist.name == "aoi_fl-0.1.0.tar.gz" and wheel.name == "aoi_fl-0.1.0-py3-none-any.whl"
    # the papers' entry points: the package's own file, and the metadata built from it
    with zipfile.ZipFile(wheel) as archive:
        own = archive.read("aoi_fl/entry_points.txt").decode()
        metadata = archive.read("aoi_fl-0.1.0.dist-info/entry_points.txt").decode()
    assert own == plugins.OWN_ENTRY_POINTS.read_text()
    declared = {(p.group, p.name, p.value) for p in plugins.own_entry_points()}
    assert len(declared) == 36 and declared == {
        (p.group, p.name, p.value) for p in plugins.entry_points_in(metadata)
    }


@pytest.mark.slow
def test_the_installed_wheel_runs_the_adapter_with_the_example_clientapp(fresh, tmp_path):
    python, _ = fresh
    script = SCRIPT.format(
        example=str(ROOT / "examples" / "flower-quickstart"),
        data=str(ROOT / "data"),
        n=N,
        options=OPTIONS,
        rounds=ROUNDS,
    )
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "HOME": str(tmp_path)}
    out = json.loads(run(python, "-c", script, cwd=tmp_path, env=env).splitlines()[-1])
    assert Path(out["aoi_fl"]).is_relative_to(python.parents[1])  # the wheel's, not the checkout's
    plugins.load()
    sampler = registry.SAMPLERS["markov_optimal"](N, np.ones(N), **OPTIONS)
    assert out["selected"] == [sampler.sample().ids.tolist() for _ in range(ROUNDS)]


@pytest.mark.slow
@pytest.mark.parametrize("app", ["flower-app", "examples/flower-quickstart"])
def test_the_apps_dependency_line_is_satisfied_by_the_wheel(fresh, app):
    _, pip = fresh
    with (ROOT / app / "pyproject.toml").open("rb") as f:
        dependencies = tomllib.load(f)["project"]["dependencies"]
    said = run(*pip, "install", "--dry-run", "--no-index", *dependencies, cwd=ROOT)
    assert "Would install" not in said  # everything it names is installed: the wheel's extra
