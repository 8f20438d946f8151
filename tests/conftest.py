"""Test-wide settings.

Hypothesis runs derandomised: the same examples on every machine and every run, so a CI result
is reproducible (a new counterexample is found by changing code, never by chance).
"""

import pytest
from hypothesis import settings

settings.register_profile("aoi-fl", derandomize=True, print_blob=True)
settings.load_profile("aoi-fl")


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
