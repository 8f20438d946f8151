"""Test-wide settings.

Hypothesis runs derandomised: the same examples on every machine and every run, so a CI result
is reproducible (a new counterexample is found by changing code, never by chance).
"""

import importlib
import sys

import pytest
from hypothesis import settings

from aoi_fl.core import registry
from aoi_fl.pipeline import plugins

settings.register_profile("aoi-fl", derandomize=True, print_blob=True)
settings.load_profile("aoi-fl")

# Importing a method registers nothing (its policies are entry points), so a test that reads
# the registries needs them loaded, whichever test file runs first or alone; loading is what a
# user's program does too (plugins.load, or the pipeline's first lookup).
plugins.load()


@pytest.fixture
def rounds_run(monkeypatch):
    """The rounds the trainer runs from now on, in order (to see where a resumed run starts)."""
    from aoi_fl.core import train

    calls: list[int] = []
    original = train.FederatedTrainer.run_round

    def counted(self):
        calls.append(self.round)
        original(self)

    monkeypatch.setattr(train.FederatedTrainer, "run_round", counted)
    return calls


@pytest.fixture(autouse=True)
def _torch_threads_restored():
    """Every test finds PyTorch's thread count as the session started: a test that trains
    single-threaded (as the grid workers do) must not change the last bits of a later test's
    run, which subprocesses started with the default count would not reproduce."""
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


#: a user's policy module's sampler and factory: clients 0, 2, 4, ... then the others ({name})
EVERY_OTHER = '''
import numpy as np

from aoi_fl.core.registry import Style, register_sampler
from aoi_fl.core.selection import SeededSampler, Selection


class EveryOther(SeededSampler):
    """Clients 0, 2, 4, ... in even rounds, the others in odd rounds."""

    name = "{name}"

    def sample(self):
        ids = np.arange(self.round % 2, self.n, 2)
        self.round += 1
        return Selection(ids, np.full(ids.size, 1.0 / ids.size))


def every_other(n, sizes, seed=0):
    return EveryOther(n, seed)
'''
#: a user's policy module: the every-other-client sampler registered as {name} on import
USER_POLICY = EVERY_OTHER + (
    '\n\nregister_sampler("{name}", every_other, Style("every other", "#123456", "o"))\n'
)


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """A sampler registered on import of an importable module (a user's .py file)."""
    name = f"every_other_{tmp_path.name}"
    module = f"user_policies_{tmp_path.name}"
    (tmp_path / f"{module}.py").write_text(USER_POLICY.format(name=name))
    monkeypatch.syspath_prepend(str(tmp_path))  # spawned workers inherit sys.path
    importlib.import_module(module)
    yield name
    del registry.SAMPLERS[name], registry.STYLES[name], sys.modules[module]


@pytest.fixture
def every_other_source():
    """The source of :data:`EVERY_OTHER`: the sampler and factory, registered by nothing."""
    return EVERY_OTHER


@pytest.fixture
def user_policy():
    """The source of :data:`USER_POLICY`, to define the same policy elsewhere (a notebook cell)."""
    return USER_POLICY
