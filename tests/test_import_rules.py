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
    assert "6 kept, 0 broken" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "added, broken",
    [
        (
            ("core/stats.py", "import aoi_fl.aoi.markov"),
            "aoi_fl.core is not allowed to import aoi_fl.aoi",
        ),
        (
            ("data/partition.py", "import aoi_fl.pipeline.cache"),
            "aoi_fl.data is not allowed to import aoi_fl.pipeline",
        ),
        (
            ("pipeline/cache.py", "import aoi_fl.kvib.samplers"),
            "aoi_fl.pipeline is not allowed to import aoi_fl.kvib",
        ),
        (
            ("pipeline/cache.py", "import aoi_fl.evidence.kvib.claims"),
            "aoi_fl.pipeline is not allowed to import aoi_fl.evidence",
        ),
        (
            ("flower/client.py", "import aoi_fl.aoi.samplers"),
            "aoi_fl.flower is not allowed to import aoi_fl.aoi",
        ),
        (
            ("evidence/aoi/experiments.py", "import aoi_fl.evidence.aoi.results"),
            "No cycles are allowed in aoi_fl",
        ),
        # one paper's method or evidence using another's
        (
            ("fedsum/delays.py", "import aoi_fl.aoi.markov"),
            "aoi_fl.fedsum is not allowed to import aoi_fl.aoi",
        ),
        (
            ("evidence/arena/results.py", "import aoi_fl.evidence.aoi.results"),
            "aoi_fl.evidence.arena is not allowed to import aoi_fl.evidence.aoi",
        ),
        # a method that needs its evidence, the pipeline, or any evidence
        (
            ("aoi/sigma.py", "import aoi_fl.evidence.aoi.results"),
            "aoi_fl.aoi is not allowed to import aoi_fl.evidence",
        ),
        (
            ("kvib/samplers.py", "import aoi_fl.pipeline.cache"),
            "aoi_fl.kvib is not allowed to import aoi_fl.pipeline",
        ),
        (
            ("arena/oort.py", "import aoi_fl.evidence.arena.claims"),
            "aoi_fl.arena is not allowed to import aoi_fl.evidence",
        ),
    ],
)
def test_an_import_up_a_layer_across_papers_or_round_a_circle_fails(tmp_path, added, broken):
    done = lint(tmp_path, added)
    assert done.returncode != 0
    assert broken in done.stdout, done.stdout


def test_every_package_of_aoi_fl_is_under_a_contract():
    # the contracts name packages, not modules: a new package (a paper's method, its evidence)
    # must be named in them, or an import into it or out of it would go unchecked
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    named = " ".join(
        " ".join(c.get(field, []))
        for c in contracts["contracts"]
        for field in ("layers", "modules", "source_modules", "forbidden_modules")
    )
    packages = [p for p in (ROOT / "aoi_fl").iterdir() if (p / "__init__.py").exists()]
    packages += [
        p for p in (ROOT / "aoi_fl" / "evidence").iterdir() if (p / "__init__.py").exists()
    ]
    for path in packages:
        name = "aoi_fl." + ".".join(path.relative_to(ROOT / "aoi_fl").parts)
        assert name in named.split(), f"{name}: name it in a contract"
