"""Every notebook can be driven by papermill: a parsable cell tagged `parameters`.

papermill silently ignores a parameter line it cannot parse (an "=" inside the comment is
enough), and `make figures PROFILE=... RERUN=1` would then not reach the notebook.
"""

from pathlib import Path

import papermill as pm
import pytest

NOTEBOOKS = sorted(
    (Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb")
)


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 9


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_parameters_cell_declares_every_parameter(path):
    import nbformat

    nb = nbformat.read(path, as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    names = {line.split("=")[0].strip() for line in tagged[0].source.splitlines() if "=" in line}
    declared = set(pm.inspect_notebook(str(path)))
    assert "profile" in declared
    assert names == declared, f"papermill cannot parse {sorted(names - declared)}"
