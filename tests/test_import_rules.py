"""make lint's import contracts (pyproject's tool.importlinter) hold, and fail when broken.

The contracts are checked on a copy of the package, once as it is and once with one added import
that runs up a layer (core importing a paper), across (one paper importing another), or from a
paper's method to its evidence or the pipeline, so a test shows that the contracts can fail and
not only that they pass.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).with_name("lint-imports")


def lint(tmp_path: Path, added: tuple[str, str] | None = None) -> subprocess.CompletedProcess:
    shutil.copytree(ROOT / "aoi_fl", tmp_path / "aoi_fl", ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    if added is not None:
        module, line = added
        path = tmp_path / "aoi_fl" / module
        path.write_text(path.read_text() + f"\n{line}\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run(
        [str(LINT), "--no-logo", "--no-cache"], cwd=tmp_path, env=env, capture_output=True,
        text=True,
    )  # fmt: skip


@pytest.mark.slow
def test_the_import_contracts_hold(tmp_path):
    done = lint(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 kept, 0 broken" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "added, broken",
    [
        (("core/stats.py", "import aoi_fl.aoi.markov"), "aoi_fl.core is not allowed to import"),
        (("data/partition.py", "import aoi_fl.pipeline.cache"), "aoi_fl.data is not allowed"),
        (("pipeline/cache.py", "import aoi_fl.kvib.samplers"), "aoi_fl.pipeline is not allowed"),
        (("fedsum/delays.py", "import aoi_fl.aoi.markov"), "aoi_fl.fedsum is not allowed"),
        (("flower/client.py", "import aoi_fl.aoi.samplers"), "aoi_fl.flower is not allowed"),
        (("aoi/experiments.py", "import aoi_fl.aoi.results"), "No cycles are allowed in aoi_fl"),
        # a method that needs its evidence, the pipeline, or another paper's evidence
        (("aoi/sigma.py", "import aoi_fl.aoi.results"), "aoi_fl.aoi.sigma is not allowed"),
        (("kvib/samplers.py", "import aoi_fl.pipeline.cache"), "aoi_fl.kvib.samplers is not al"),
        (("arena/oort.py", "import aoi_fl.arena.claims"), "aoi_fl.arena.oort is not allowed"),
    ],
)
def test_an_import_up_a_layer_across_papers_or_round_a_circle_fails(tmp_path, added, broken):
    done = lint(tmp_path, added)
    assert done.returncode != 0
    assert broken in done.stdout, done.stdout


def test_every_module_of_a_paper_is_method_or_evidence():
    # the method contract lists modules by name: a new module must take a side, or an import
    # from a method into it would go unchecked
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (apart,) = [c for c in contracts["contracts"] if c["id"] == "method-apart"]
    method, evidence = set(apart["source_modules"]), set(apart["forbidden_modules"])
    assert not method & evidence
    for paper in ("aoi", "agnostic", "kvib", "fedsum", "arena"):
        for path in (ROOT / "aoi_fl" / paper).glob("*.py"):
            if path.stem != "__init__":
                name = f"aoi_fl.{paper}.{path.stem}"
                assert name in method | evidence, f"{name}: add it to a side of method-apart"
