"""make lint's import contracts (pyproject's tool.importlinter) hold, and fail when broken.

The contracts are checked on a copy of the package, once as it is and once with one added import
that runs up a layer (core importing a paper) or across (one paper importing another), so a test
shows that the contracts can fail and not only that they pass.
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
    assert "2 kept, 0 broken" in done.stdout


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
    ],
)
def test_an_import_up_a_layer_across_papers_or_round_a_circle_fails(tmp_path, added, broken):
    done = lint(tmp_path, added)
    assert done.returncode != 0
    assert broken in done.stdout, done.stdout
