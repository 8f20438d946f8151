"""The README's Python examples run against the library as it is.

Each runs in a fresh interpreter from the repository root, so that what an example registers
stays there. The training example's ``run_experiment`` parses its configuration
(:meth:`RunConfig.parse`: every check a run makes before it loads data or trains) instead of
training; the others run as written. Left out: the Flower example (``run_flower`` trains a
federation; ``tests/flower`` runs it) and the fragment of a Flower ``server_app.py``, which needs
a Flower ``context``.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)

#: the training example, its configuration parsed instead of trained
PARSED_NOT_TRAINED = textwrap.dedent(
    """
    from aoi_fl.pipeline import runs
    from aoi_fl.pipeline.resolve import RunConfig

    class Parsed:
        def __init__(self, config):
            self.run = RunConfig.parse(config)
            self.history = {"test_accuracy": []}

        def rounds_to_target(self, target):
            return None

    runs.run_experiment = Parsed
    """
)


def example(first_line: str) -> str:
    """The README's Python block that starts with ``first_line``."""
    found = [block for block in BLOCKS if block.splitlines()[0].startswith(first_line)]
    assert len(found) == 1, f"{len(found)} README Python blocks start with {first_line!r}"
    return found[0]


def run_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{code}\n---\n{done.stderr[-3000:]}"
    return done.stdout


def test_the_readme_shows_the_examples_run_here():
    assert len(BLOCKS) == 8


@pytest.mark.slow
def test_the_training_example_and_its_availability_sections_are_valid_configurations():
    sections = [
        line
        for line in example('config["availability"]').splitlines()
        if line.strip() and '"trace"' not in line  # a trace names a CSV file of the user's
    ]
    assert len(sections) == 3
    checked = "".join(f"{line}\nRunConfig.parse(config)\n" for line in sections)
    code = PARSED_NOT_TRAINED + example("import copy") + checked + "print(result.run.canonical())"
    assert "markov_optimal" in run_python(code)


def test_the_theory_example_runs():
    run_python(example("import numpy as np"))


def test_the_make_policy_example_runs():
    # K-Vib's draws are independent, m in expectation: 400 rounds' mean within 5 standard errors
    check = textwrap.dedent(
        """
        import numpy as np
        mean = np.mean([len(kvib.sample().ids) for _ in range(400)])
        assert abs(mean - 10) < 5 * np.sqrt(10 / 400), mean
        assert oort.availability_aware and oort.wants_losses
        """
    )
    run_python(example("from aoi_fl.pipeline.policies import make_policy") + check)


def test_the_policy_and_availability_examples_register_what_a_configuration_names():
    check = textwrap.dedent(
        """
        from aoi_fl.core.availability import AVAILABILITY
        from aoi_fl.pipeline import plugins
        sampler = plugins.samplers()["every_other"](10, None, seed=0)
        assert sampler.sample().ids.tolist() == [0, 2, 4, 6, 8]
        model = AVAILABILITY["alternate"](4, None, period=2)
        assert model.mask(1).tolist() == [False, True, False, True]
        """
    )
    run_python(example("# my_policies.py") + example("# my_availability.py") + check)
