"""A user's installed package adds samplers and availability models by entry point, and a user's
availability model is one file of their own; both train in this process, in spawned workers and
in Ray tasks.

The installed package is a module and its ``.dist-info`` folder (its ``entry_points.txt`` is
what ``pip install`` writes from ``[project.entry-points]``) on ``sys.path``: what
``importlib.metadata`` reads is the same as for a package installed into the environment.
"""

import importlib
import importlib.metadata
import pkgutil
import subprocess
import sys

import numpy as np
import pytest

from aoi_fl.core import availability, registry
from aoi_fl.pipeline import plugins, runs

IMPORTS = """
import numpy as np

from aoi_fl.core.availability import Availability, register_availability
from aoi_fl.core.registry import Style
from aoi_fl.core.selection import SeededSampler, Selection
"""

#: an availability-aware sampler that takes everyone available
SAMPLER = """

class EveryAvailable(SeededSampler):
    availability_aware = True

    def sample(self, available=None):
        ids = np.arange(self.n) if available is None else np.flatnonzero(available)
        self.round += 1
        return Selection(ids, np.full(ids.size, 1.0 / max(ids.size, 1)))


def every_available(n, sizes, seed=0):
    return EveryAvailable(n, seed)


every_available.availability_aware = True
every_available.style = Style("every available", "#654321", "P")
"""

#: client i is available in round t iff (i + t) % period == 0
MODEL = """

class Alternate(Availability):
    name = "{model}"

    def __init__(self, n, sizes=None, seed=0, **options):
        super().__init__(n, seed, self.check(n, **options))

    @staticmethod
    def check(n, *, period=2):
        if not isinstance(period, int) or period < 1:
            raise ValueError(f"period must be an int >= 1, got {{period!r}}")
        return {{"period": period}}

    def mask(self, t):
        return (np.arange(self.n) + t) % self.options["period"] == 0

    def rates(self, t):
        return self.mask(t).astype(float)

    def long_run_rates(self):
        return np.full(self.n, 1.0 / self.options["period"])
"""

#: a user's package: both declared by entry point, neither registered by a call
PACKAGE = IMPORTS + SAMPLER + MODEL
#: a user's availability model as one file of their own, registered by a call on import
ONE_FILE = IMPORTS + "\n\n@register_availability\n" + MODEL.lstrip()

ENTRY_POINTS = """[aoi_fl.samplers]
{sampler} = {module}:every_available

[aoi_fl.availability]
{model} = {module}:Alternate
"""


def config(sampler, model, seed=0):
    return {
        "dataset": {"name": "fedprox_synthetic", "n_clients": 4, "seed": 0},
        "partition": {"name": "natural", "n_clients": 4},
        "model": {"name": "logistic_regression", "in_features": 60, "num_classes": 10},
        "sampler": {"name": sampler, "seed": seed},
        "training": {"rounds": 3, "local_steps": 2, "batch_size": 10, "eval_every": 3},
        "availability": {"name": model, "period": 2},
    }


#: the clients available (and so selected) in rounds 0, 1, 2 under period 2 with 4 clients
EXPECTED = [[0, 2], [1, 3], [0, 2]]


def _forget(kind, name):
    table = {
        "sampler": registry.SAMPLERS,
        "algorithm": registry.ALGORITHMS,
        "availability": availability.MODELS,
    }[kind]
    table.pop(name, None)
    registry.REGISTRARS.pop((kind, name), None)
    registry.STYLES.pop(name, None)
    registry.AVAILABILITY_AWARE.discard(name)
    availability.AVAILABILITY.pop(name, None)


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """A user's package with a sampler and an availability model declared by entry point."""
    tag = tmp_path.name
    module, sampler, model = f"user_pkg_{tag}", f"every_available_{tag}", f"alternate_{tag}"
    site = tmp_path / "site"
    site.mkdir()
    (site / f"{module}.py").write_text(PACKAGE.format(model=model))
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        ENTRY_POINTS.format(sampler=sampler, model=model, module=module)
    )
    monkeypatch.syspath_prepend(str(site))  # spawned workers inherit sys.path
    yield sampler, model
    _forget("sampler", sampler)
    _forget("availability", model)
    sys.modules.pop(module, None)
    plugins._entry_points.cache_clear()


@pytest.fixture
def one_file(tmp_path, monkeypatch):
    """A user's availability model: one file, imported as the user would."""
    model, module = f"alternate_{tmp_path.name}", f"my_availability_{tmp_path.name}"
    (tmp_path / f"{module}.py").write_text(ONE_FILE.format(model=model))
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module(module)
    yield model
    _forget("availability", model)
    sys.modules.pop(module, None)


def selections(results):
    return [r.history["selected"] for r in results]


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_an_installed_packages_sampler_and_model_train_in_workers(installed, tmp_path, workers):
    sampler, model = installed
    assert sampler not in registry.SAMPLERS  # nothing imported the package
    configs = [config(sampler, model, seed) for seed in (0, 1)]
    results = runs.run_grid(
        configs, results_dir=str(tmp_path / "cache"), workers=workers, threads=1, progress=False
    )
    assert selections(results) == [EXPECTED] * 2
    assert registry.style(sampler).label == "every available"  # the factory's attribute
    assert sampler in registry.AVAILABILITY_AWARE


@pytest.mark.slow
def test_an_installed_packages_sampler_and_model_train_in_ray_tasks(installed, tmp_path):
    pytest.importorskip("ray")
    sampler, model = installed
    results = runs.run_grid(
        [config(sampler, model)], results_dir=str(tmp_path / "cache"), executor="ray", workers=1,
        progress=False,
    )  # fmt: skip
    assert selections(results) == [EXPECTED]


@pytest.mark.slow
@pytest.mark.parametrize("executor, workers", [("local", 2), ("ray", 1)])
def test_an_availability_model_in_one_file_of_the_users_trains(
    one_file, tmp_path, executor, workers
):
    if executor == "ray":
        pytest.importorskip("ray")
    results = runs.run_grid(
        [config("all_available", one_file)], results_dir=str(tmp_path / "cache"),
        executor=executor, workers=workers, threads=1, progress=False,
    )  # fmt: skip
    assert selections(results) == [EXPECTED]
    assert np.array_equal(results[0].history["available"], [2, 2, 2])


def test_a_user_model_is_checked_as_the_built_in_ones_are(one_file):
    spec = {"name": one_file, "period": 3}
    assert availability.check_availability_spec(spec) == {"name": one_file, "seed": 0, "period": 3}
    with pytest.raises(ValueError, match=rf"availability {one_file!r}: unknown options \['days'\]"):
        availability.check_availability_spec({"name": one_file, "days": 3})
    with pytest.raises(ValueError, match="period must be an int >= 1, got 0"):
        availability.check_availability_spec({"name": one_file, "period": 0})
    with pytest.raises(ValueError, match=rf"availability {one_file!r} is registered twice"):
        availability.register_availability(
            type(one_file, (availability.Always,), {"name": one_file})
        )


def test_register_availability_refuses_what_is_not_a_model():
    with pytest.raises(TypeError, match="must be a subclass of Availability, got <class 'int'>"):
        availability.register_availability(int)


def test_an_entry_point_whose_name_is_not_its_models_is_refused_by_name(installed, tmp_path):
    sampler, model = installed
    info = next((tmp_path / "site").glob("*.dist-info"))
    text = (info / "entry_points.txt").read_text().replace(f"{model} =", "weekly =")
    (info / "entry_points.txt").write_text(text)
    with pytest.raises(ValueError, match=rf"entry point weekly = .*'aoi_fl.availability'.*"
                       rf"name is {model!r}, but its entry point is named 'weekly'"):  # fmt: skip
        plugins.load()


def test_an_entry_point_that_cannot_be_loaded_is_named(installed, tmp_path):
    info = next((tmp_path / "site").glob("*.dist-info"))
    (info / "entry_points.txt").write_text("[aoi_fl.samplers]\nbroken = no_such_module:f\n")
    with pytest.raises(ValueError, match=r"entry point broken = 'no_such_module:f' in group "
                       r"'aoi_fl.samplers'.*ModuleNotFoundError"):  # fmt: skip
        plugins.load()


#: aoi_fl's own entry points, as its file declares them
OWN = plugins.own_entry_points()
TABLES = {
    "sampler": registry.SAMPLERS,
    "algorithm": registry.ALGORITHMS,
    "recorder": registry.RECORDERS,
}


def test_the_papers_register_through_their_own_entry_points_only():
    plugins.load()
    assert {point.group for point in OWN} == {
        "aoi_fl.samplers",
        "aoi_fl.algorithms",
        "aoi_fl.recorders",
    }
    for point in OWN:
        kind, obj = plugins.GROUPS[point.group], point.load()
        assert TABLES[kind][point.name] is obj
        assert registry.REGISTRARS[(kind, point.name)] == point.module
        if point.attr.startswith("PLUGINS."):
            assert point.attr == f"PLUGINS.{point.name}"
        if (style := getattr(obj, "style", None)) is not None:
            assert registry.style(point.name) == style
    # nothing of aoi_fl registers a sampler, an algorithm or a recorder by a call, except core's
    # fedavg (core registers its own)
    by_call = {
        (kind, name)
        for (kind, name), module in registry.REGISTRARS.items()
        if kind in TABLES and module.startswith("aoi_fl.")
    } - {(plugins.GROUPS[p.group], p.name) for p in OWN}
    assert by_call == {("algorithm", "fedavg")}
    assert [p.name for p in OWN if p.group == "aoi_fl.samplers"][:5] == [
        "random",
        "probabilistic",
        "markov_optimal",
        "markov_nonoptimal",
        "markov_available",
    ]


def test_the_installed_metadata_is_built_from_the_same_file():
    installed = importlib.metadata.distribution("aoi-fl").entry_points
    assert sorted((p.group, p.name, p.value) for p in installed) == sorted(
        (p.group, p.name, p.value) for p in OWN
    )
    assert {"kvib", "oort"} <= set(importlib.metadata.entry_points(group="aoi_fl.samplers").names)


def test_importing_a_method_registers_nothing_and_the_papers_need_no_metadata(tmp_path):
    # a fresh interpreter, as a tree run by PYTHONPATH: no distribution's metadata at all
    code = (
        "from aoi_fl.core import registry\n"
        "import aoi_fl.kvib.samplers, aoi_fl.fedsum.algorithms, aoi_fl.kvib.estimators\n"
        "assert 'kvib' not in registry.SAMPLERS and 'fedsum' not in registry.ALGORITHMS\n"
        "assert not registry.RECORDERS\n"
        "from aoi_fl.pipeline import plugins\n"
        "plugins.entry_points = lambda **kw: []\n"
        "plugins.load()\n"
        "print(len(registry.SAMPLERS), len(registry.ALGORITHMS), sorted(registry.RECORDERS))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout
    assert out.split() == ["25", "11", "['full_information']"]


def test_a_stale_installed_entry_point_of_aoi_fl_is_ignored(tmp_path, monkeypatch):
    # the metadata of an older install names a factory the package no longer has: aoi_fl's own
    # come from its file, whatever its metadata says
    info = tmp_path / "aoi_fl-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: aoi-fl\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text("[aoi_fl.samplers]\nghost = aoi_fl.nowhere:GHOST\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins.load()
    assert "ghost" not in registry.SAMPLERS
    assert "ghost" in importlib.metadata.entry_points(group="aoi_fl.samplers").names


def test_a_subclass_of_a_papers_algorithm_does_not_take_its_style():
    from aoi_fl.fedsum.algorithms import FedSUM

    subclass = type("MyFedSUM", (FedSUM,), {"name": "my_fedsum"})
    plugins._register("algorithm", "my_fedsum", subclass)
    try:
        assert registry.ALGORITHMS["my_fedsum"] is subclass
        assert "my_fedsum" not in registry.STYLES  # FedSUM's label would draw it as FedSUM
    finally:
        _forget("algorithm", "my_fedsum")


def test_every_factory_a_method_offers_is_declared():
    # a method's PLUGINS namespace and its styled algorithms are what its entry points name: one
    # added to the code but not to aoi_fl/entry_points.txt would never register
    declared = {point.value for point in OWN}
    offered = set()
    for method in ("aoi", "agnostic", "kvib", "fedsum", "arena"):
        package = importlib.import_module(f"aoi_fl.{method}")
        for info in pkgutil.iter_modules(package.__path__, f"{package.__name__}."):
            module = importlib.import_module(info.name)
            if (plugins_of := getattr(module, "PLUGINS", None)) is not None:
                offered |= {f"{info.name}:PLUGINS.{name}" for name in vars(plugins_of)}
            offered |= {
                f"{info.name}:{name}"
                for name, obj in vars(module).items()
                if isinstance(obj, type) and obj.__module__ == info.name and "style" in vars(obj)
            }
    # 24 samplers' factories (exp_prior is a plain function) and FedSUM's 8 styled algorithms
    # (agnostic's two have no style): each declared
    assert len(offered) == 32 and offered <= declared
