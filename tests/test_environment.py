"""The conda environment, the pip project and the profiles agree."""

import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from aoi_fl.core import seeding
from aoi_fl.pipeline import profiles

ROOT = Path(__file__).resolve().parent.parent


def pins_from_pyproject() -> dict[str, str]:
    """The library's pins and the dev extra's (what environment.yml lists one by one)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["dev"]
    pins = {}
    for dep in deps:
        name, version = dep.split("==")
        pins[name.lower()] = version
    return pins


def pins_from_environment_yml() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "environment.yml").read_text().splitlines():
        match = re.fullmatch(r"\s*-\s+([A-Za-z0-9_.\-]+)==([^\s#]+)\s*", line)
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def test_every_dependency_is_pinned_exactly():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + [
        d for ds in project["optional-dependencies"].values() for d in ds
    ]
    assert all("==" in d for d in deps), deps


def test_the_library_needs_none_of_the_artifacts_tools():
    # a Flower user's `pip install aoi-fl[flower]` must not pull in JupyterLab, the test runners
    # or the linters: those are the dev extra's
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {Requirement(d).name for d in project["dependencies"]}
    tools = {"jupyterlab", "pytest", "ruff", "selenium", "papermill", "import-linter"}
    assert not runtime & tools
    assert tools <= {Requirement(d).name for d in project["optional-dependencies"]["dev"]}


def test_environment_yml_matches_pyproject():
    assert pins_from_environment_yml() == pins_from_pyproject()


def test_installed_distributions_are_the_pinned_versions():
    # catches a drift between the declared pins and what the tests actually run against (a
    # pin edited without reinstalling, or a package upgraded in the venv): every pin of
    # pyproject.toml (= environment.yml, above) must be the installed distribution's version
    pins = pins_from_pyproject()
    assert {"torch", "torchvision", "numpy"} <= set(pins)
    for name, pinned in pins.items():
        installed = importlib.metadata.version(name)
        # "==2.14.1" admits a local build "2.14.1+cpu" (PEP 440), nothing else
        assert Requirement(f"{name}=={pinned}").specifier.contains(installed), (
            f"{name}: pinned {pinned}, installed {installed}"
        )
        assert Version(installed).public == Version(pinned).public


def pins_from_constraints() -> dict[str, str]:
    """constraints.txt: every distribution of the built .venv, ``name==version`` a line."""
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            assert spec.operator == "==", line
            pins[canonicalize_name(requirement.name)] = spec.version
    return pins


def test_constraints_hold_every_pin_at_its_version():
    # a pin edited in pyproject.toml without the constraints regenerated would make pip refuse
    # the install (two versions asked for), or leave the old one in force
    constraints = pins_from_constraints()
    for name, pinned in pins_from_pyproject().items():
        assert constraints.get(canonicalize_name(name)) == pinned, name
    for extra in ("flower", "ray"):
        for dep in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
            "optional-dependencies"
        ][extra]:
            requirement = Requirement(dep)
            assert constraints[canonicalize_name(requirement.name)] in requirement.specifier


def test_make_and_conda_both_install_with_the_constraints():
    makefile = (ROOT / "Makefile").read_text()
    installs = [line for line in makefile.splitlines() if "pip install" in line]
    assert installs and all("-c constraints.txt" in line for line in installs), installs
    environment = (ROOT / "environment.yml").read_text().splitlines()
    assert "- -c constraints.txt" in [line.strip() for line in environment]


def installed_closure(project: str, extras: set[str]) -> dict[str, str]:
    """Name -> installed version of every distribution ``project[extras]`` requires, directly
    or through another (markers evaluated here): what its install resolved, and nothing else
    of the environment (a conda base's own tools, setuptools' vendored packages)."""
    found: dict[str, str] = {}
    todo = [(project, frozenset(extras))]
    seen = set()
    while todo:
        name, wanted = todo.pop()
        if (name := canonicalize_name(name), wanted) in seen:
            continue
        seen.add((name, wanted))
        dist = importlib.metadata.distribution(name)
        found[name] = dist.version
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or any(
                requirement.marker.evaluate({"extra": extra}) for extra in {"", *wanted}
            ):
                todo.append((requirement.name, frozenset(requirement.extras)))
    return found


def test_installed_distributions_are_the_constrained_versions():
    # the install honoured constraints.txt (make passes it to pip) and the constraints are not
    # stale: everything aoi-fl[flower,ray,dev] pulls in is listed, at the installed version
    # ("==2.14.1" admits a local build "2.14.1+cpu"), and nothing else is listed but pip
    constraints = pins_from_constraints()
    installed = installed_closure("aoi-fl", {"flower", "ray", "dev"})
    del installed["aoi-fl"]
    off = {
        name: (version, constraints.get(name))
        for name, version in installed.items()
        if name not in constraints
        or not Requirement(f"{name}=={constraints[name]}").specifier.contains(version)
    }
    assert off == {}, "installed version, constraint"
    assert set(constraints) - set(installed) == {"pip"}


def test_installed_project_metadata_matches_pyproject():
    # catches a stale install: pyproject.toml changed (a pin, the Python range) but the
    # environment still holds the metadata of an older version of the project
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    meta = importlib.metadata.metadata(project["name"])
    assert meta["Version"] == project["version"]
    assert SpecifierSet(meta["Requires-Python"]) == SpecifierSet(project["requires-python"])
    installed = sorted(
        str(Requirement(r)) for r in importlib.metadata.requires(project["name"]) or []
    )
    extras = [
        f'{d}; extra == "{extra}"'
        for extra, deps in project.get("optional-dependencies", {}).items()
        for d in deps
    ]
    assert installed == sorted(str(Requirement(d)) for d in project["dependencies"] + extras)


def test_the_optional_extras_are_pinned_and_installed_by_make_and_conda():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert set(extras) == {"flower", "ray", "dev"}
    for deps in extras.values():
        for dep in deps:
            req = Requirement(dep)
            assert "==" in dep and importlib.metadata.version(req.name) == str(
                next(iter(req.specifier)).version
            ), dep
    assert "-e '.[flower,ray,dev]'" in (ROOT / "Makefile").read_text()
    assert "- -e .[flower,ray,dev]" in (ROOT / "environment.yml").read_text()


def test_python_version_agrees():
    # catches the conda file, pyproject.toml and the running interpreter disagreeing on Python
    text = (ROOT / "environment.yml").read_text()
    (conda,) = re.findall(r"^\s*-\s+python=(\d+\.\d+)\s*$", text, flags=re.MULTILINE)
    requires = SpecifierSet(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    )
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert conda == running, f"environment.yml has python={conda}, tests run on {running}"
    assert requires.contains(f"{conda}.0") and requires.contains(
        f"{running}.{sys.version_info.micro}"
    )
    # the range admits exactly that minor version (pins are only tested on one Python)
    major, minor = map(int, conda.split("."))
    assert not requires.contains(f"{major}.{minor + 1}.0")
    assert not requires.contains(f"{major}.{minor - 1}.99")


def test_profile_resolution(monkeypatch):
    monkeypatch.delenv(profiles.ENV_VAR, raising=False)
    assert profiles.resolve_profile("cpu") == "cpu"
    monkeypatch.setenv(profiles.ENV_VAR, "smoke")
    assert profiles.resolve_profile("paper") == "smoke"
    monkeypatch.setenv(profiles.ENV_VAR, "fast")
    with pytest.raises(ValueError, match="unknown profile 'fast'; valid: cpu, paper, smoke"):
        profiles.resolve_profile("cpu")


def test_profile_settings_must_cover_every_profile_alike():
    table = {"smoke": {"T": 10}, "cpu": {"T": 100}, "paper": {"T": 1000}}
    assert profiles.settings("cpu", table) == {"T": 100}
    with pytest.raises(ValueError, match="lacks profiles"):
        profiles.settings("cpu", {"cpu": {"T": 1}})
    with pytest.raises(ValueError, match="same settings"):
        profiles.settings("cpu", {"smoke": {"T": 1}, "cpu": {"T": 1, "x": 2}, "paper": {"T": 1}})


def test_streams_are_reproducible_and_independent():
    a = seeding.generator(3, "sampler").random(5)
    assert np.array_equal(a, seeding.generator(3, "sampler").random(5))
    assert not np.array_equal(a, seeding.generator(4, "sampler").random(5))
    assert not np.array_equal(a, seeding.generator(3, "partition").random(5))
    assert not np.array_equal(a, seeding.generator(3, "sampler", 1).random(5))
    assert seeding.derived_seed(3, "model_init") == seeding.derived_seed(3, "model_init")
    assert 0 <= seeding.derived_seed(3, "model_init") < 2**63
    with pytest.raises(ValueError, match="seed must be >= 0"):
        seeding.generator(-1, "sampler")
    with pytest.raises(ValueError, match="stream must be a non-empty string"):
        seeding.generator(0, "")
