"""The registry (aoi_fl.core.registry): every paper registers its samplers, algorithms and styles
where it defines them, names never collide, families tell their members apart, and a sampler
defined in a user's own file trains through a configuration with no other edit."""

import inspect

import numpy as np
import pytest

from aoi_fl.agnostic import samplers as participation
from aoi_fl.core import registry
from aoi_fl.core.registry import Style
from aoi_fl.core.selection import SeededSampler, Selection
from aoi_fl.pipeline import plugins, runs

# the papers register when loaded (importing the pipeline registers nothing): every test below
# reads the registries as a user after a lookup by name would
plugins.load()


def test_every_paper_registers_its_samplers_and_algorithms():
    from aoi_fl.aoi.samplers import POLICIES
    from aoi_fl.arena.policies import FIELD_POLICIES
    from aoi_fl.fedsum.patterns import PATTERNS
    from aoi_fl.kvib.samplers import UNBIASED_SAMPLERS

    # markov_available is the AoI paper's Policy 3 under availability, registered by aoi
    parts = [POLICIES, ["exp_prior"], UNBIASED_SAMPLERS, PATTERNS, FIELD_POLICIES]
    assert sorted(runs.SAMPLERS) == sorted(name for part in parts for name in part)
    assert runs.SAMPLERS["exp_prior"] is participation.prior_sampler
    assert sorted(runs.ALGORITHMS) == sorted(
        ["fedavg", "agnostic", "weighted", "fedsum_b", "fedsum", "fedsum_cr"]
        + ["scaffold", "mifa", "fedvarp", "fedau", "fedawe"]
    )


def test_families_are_the_names_the_experiments_plot_together():
    from aoi_fl.arena.policies import ARENA_FAMILY
    from aoi_fl.evidence.agnostic import experiments as ax
    from aoi_fl.evidence.aoi import experiments
    from aoi_fl.evidence.fedsum import experiments as fx
    from aoi_fl.evidence.kvib import experiments as kx

    families = {k: set(v) for k, v in registry.FAMILIES.items()}
    assert families == {
        "AoI policies": set(experiments.POLICIES),
        "agnostic-FedAvg aggregation rules": {*ax.AGGREGATIONS, "aoi"},
        "K-Vib samplers": set(kx.FIG2_SAMPLERS),
        "FedSUM methods": {*fx.MAIN_ALGORITHMS, *fx.FAMILY},
        "FedSUM patterns": {*fx.MAIN_PATTERNS, *fx.CASES},
        "the arena's policies": set(ARENA_FAMILY),
    }
    assert set(kx.GRID_SAMPLERS) <= families["K-Vib samplers"]


def test_names_that_share_a_figure_have_distinct_styles():
    members = [name for family in registry.FAMILIES.values() for name in family]
    assert sorted(members) == sorted(registry.STYLES)  # every style in exactly one family
    for family in registry.FAMILIES.values():
        styles = [registry.style(name) for name in family]
        assert len({s.color for s in styles}) == len(styles)
        assert len({s.marker for s in styles}) == len(styles)
    assert len({s.label for s in registry.STYLES.values()}) == len(registry.STYLES)


def test_a_name_registered_twice_is_refused_naming_it():
    from aoi_fl.fedsum.patterns import UniformSubset
    from aoi_fl.kvib.samplers import KVib

    with pytest.raises(ValueError, match="sampler 'uniform' is registered twice"):
        registry.register_sampler("uniform", KVib)
    registry.register_sampler("uniform", registry.SAMPLERS["uniform"])  # the same: harmless
    assert registry.SAMPLERS["uniform"](5, None, s=2).config()["name"] == UniformSubset.name
    with pytest.raises(ValueError, match="style 'kvib' is registered twice"):
        registry.register_style("kvib", Style("other", "#000000", "o"))
    with pytest.raises(ValueError, match="sampler name must be a non-empty string"):
        registry.register_sampler("", KVib)
    with pytest.raises(TypeError, match="style of 'x' must be a Style"):
        registry.register_style("x", {"label": "x"})


class EveryOther(SeededSampler):
    """A user's policy: clients 0, 2, 4, ... in even rounds, the others in odd rounds."""

    name = "every_other"

    def sample(self) -> Selection:
        ids = np.arange(self.round % 2, self.n, 2)
        self.round += 1
        return Selection(ids, np.full(ids.size, 1.0 / ids.size))


def every_other(n, sizes, seed=0):
    return EveryOther(n, seed)


@pytest.fixture
def user_sampler():
    registry.register_sampler("every_other", every_other, Style("every other", "#123456", "o"))
    yield
    del registry.SAMPLERS["every_other"], registry.STYLES["every_other"]


@pytest.mark.slow
def test_a_sampler_from_a_users_file_trains_with_no_other_edit(user_sampler):
    config = {
        "dataset": {"name": "fedprox_synthetic", "n_clients": 4, "seed": 0},
        "partition": {"name": "natural", "n_clients": 4},
        "model": {"name": "logistic_regression", "in_features": 60, "num_classes": 10},
        "sampler": {"name": "every_other", "seed": 0},
        "training": {"rounds": 3, "local_steps": 2, "batch_size": 10, "eval_every": 3},
    }
    trainer = runs.build_trainer(config)
    trainer.run(progress=False)
    assert trainer.history["selected"] == [[0, 2], [1, 3], [0, 2]]
    from aoi_fl.pipeline import plotting

    assert plotting.style("every_other").label == "every other"


@pytest.mark.slow
def test_the_core_and_the_data_import_no_paper():
    import subprocess
    import sys

    code = (
        "import importlib, pkgutil, sys\n"
        "import aoi_fl.core, aoi_fl.data\n"
        "for pkg in (aoi_fl.core, aoi_fl.data):\n"
        "    for m in pkgutil.iter_modules(pkg.__path__):\n"
        "        if m.name != '__main__':\n"
        "            importlib.import_module(f'{pkg.__name__}.{m.name}')\n"
        "above = ('aoi', 'agnostic', 'kvib', 'fedsum', 'arena', 'evidence', 'flower', 'pipeline')\n"
        "print(sorted(n for n in sys.modules if n.split('.')[:2][-1] in above"
        " and n.startswith('aoi_fl.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_m_names_every_samplers_clients_per_round_and_the_papers_spelling_is_kept():
    spelled = {name: registry.clients_option(name) for name in registry.SAMPLERS}
    assert spelled["kvib"] == spelled["vrb"] == "k" and spelled["uniform"] == "s"
    assert spelled["markov_optimal"] == spelled["oort"] == "m" and spelled["bernoulli"] is None
    for name in registry.SAMPLERS:  # one count per sampler: the table is unambiguous
        parameters = inspect.signature(registry.SAMPLERS[name]).parameters
        assert sum(o in parameters for o in registry.CLIENT_COUNT_NAMES) <= 1, name
    assert registry.with_clients("kvib", {"m": 5, "rounds": 9}) == {"k": 5, "rounds": 9}
    assert registry.with_clients("kvib", {"k": 5}) == {"k": 5}
    assert registry.with_clients("uniform", {"m": 3}) == {"s": 3}
    assert registry.with_clients("random", {"m": 3}) == {"m": 3}
    with pytest.raises(ValueError, match=r"sampler 'kvib': m=5 and k=4 both give the clients"):
        registry.with_clients("kvib", {"m": 5, "k": 4})
