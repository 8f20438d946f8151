"""Notebooks stay thin (issue 28): parameters, calls into aoi_fl, a plot, an explanation.

Logic, tables, plots and checks belong in the library, where unit tests reach them; a notebook
that grows past the limit, defines its own helpers or keeps its own verdicts fails here.
"""

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
#: non-blank code lines a notebook may hold, the parameters cells included
MAX_CODE_LINES = 80


def code_lines(path: Path) -> list[str]:
    cells = json.loads(path.read_text())["cells"]
    return [
        line
        for cell in cells
        if cell["cell_type"] == "code"
        for line in "".join(cell["source"]).splitlines()
        if line.strip()
    ]


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 20


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_is_thin(path):
    lines = code_lines(path)
    assert len(lines) <= MAX_CODE_LINES, f"{path.name}: {len(lines)} non-blank code lines"
    defined = [line for line in lines if re.match(r"\s*(def|class) ", line)]
    assert not defined, f"{path.name} defines {defined}: move them into aoi_fl"
    verdicts = [line for line in lines if re.match(r"\s*stated\w* *(=|\|=|\[)", line)]
    assert not verdicts, f"{path.name} keeps verdicts of its own {verdicts}: the ledger has them"


def test_the_count_is_of_non_blank_code_lines(tmp_path):
    nb = {
        "cells": [
            {"cell_type": "markdown", "source": ["# title\n", "text\n"]},
            {"cell_type": "code", "source": ["a = 1\n", "\n", "  \n", "b = 2"]},
            {"cell_type": "code", "source": "c = 3\n"},
        ]
    }
    path = tmp_path / "x.ipynb"
    path.write_text(json.dumps(nb))
    assert code_lines(path) == ["a = 1", "b = 2", "c = 3"]
