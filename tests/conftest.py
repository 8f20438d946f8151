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
    from aoi_fl import train

    calls: list[int] = []
    original = train.FederatedTrainer.run_round

    def counted(self):
        calls.append(self.round)
        original(self)

    monkeypatch.setattr(train.FederatedTrainer, "run_round", counted)
    return calls
