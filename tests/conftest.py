"""Test-wide settings.

Hypothesis runs derandomised: the same examples on every machine and every run, so a CI result
is reproducible (a new counterexample is found by changing code, never by chance).
"""

from hypothesis import settings

settings.register_profile("aoi-fl", derandomize=True, print_blob=True)
settings.load_profile("aoi-fl")
