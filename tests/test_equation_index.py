"""docs/equations.md stays true to the code: every name it points to exists.

The page is read by people looking for where an equation lives; a rename in the library that
forgets the page would send them nowhere, so each `where` entry is imported here.
"""

import importlib
import re
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "equations.md"

#: a distinctive piece of each paper's title, one section each
PAPERS = {
    "AoI": "Balancing Client Participation in Federated Learning Using AoI",
    "Agnostic FedAvg": "Convergence of Agnostic Federated Averaging",
    "FedSUM": "FedSUM Family",
    "K-Vib": "Adaptive Unbiased Client Sampling with Reduced Variance",
}
FIGURES_HEADING = "Figures and tables -> notebooks"
#: a little below the rows written, so that trimming a few rows is not a failure but losing a
#: table (a broken heading or separator) is
MIN_ROWS = 150
MIN_ROWS_PER_PAPER = 20

# Escaped pipes (\|) occur inside cells (|S|, norms) and must not split them.
CELL_SPLIT = re.compile(r"(?<!\\)\|")
DOTTED = re.compile(r"^aoi_fl(\.[A-Za-z_][A-Za-z0-9_]*)+$")


def sections() -> dict[str, str]:
    """Heading text of every '## ' section -> its body."""
    parts = re.split(r"^## +(.+)$", PAGE.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {heading.strip(): body for heading, body in zip(parts[1::2], parts[2::2], strict=True)}


def table_rows(body: str) -> list[dict[str, str]]:
    """Rows of the Markdown tables in ``body`` as {column: cell}."""
    rows: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in body.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in CELL_SPLIT.split(line.strip("|"))]
        if header is None:
            header = cells
        elif not all(set(c) <= set("-: ") for c in cells):
            assert len(cells) == len(header), f"row has {len(cells)} cells, header {header}"
            rows.append(dict(zip(header, cells, strict=True)))
    return rows


def paper_sections() -> dict[str, str]:
    found = {}
    for heading, body in sections().items():
        for short, title in PAPERS.items():
            if title in heading:
                found[short] = body
    return found


def where_entries() -> list[str]:
    entries = []
    for body in paper_sections().values():
        for row in table_rows(body):
            names = re.findall(r"`([^`]*)`", row["where"])
            assert len(names) == 1, f"exactly one backticked path per row, got {row['where']!r}"
            entries.append(names[0])
    return entries


def resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            # Only "this prefix is not a module" means try a shorter one; a module that fails
            # on one of its own imports is a real error.
            if error.name is None or not module_name.startswith(error.name):
                raise
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def test_one_section_per_paper_and_the_figure_section():
    found = paper_sections()
    assert set(found) == set(PAPERS), f"paper sections found: {sorted(found)}"
    headings = list(sections())
    assert sum(any(t in h for t in PAPERS.values()) for h in headings) == len(PAPERS)
    assert headings[-1] == FIGURES_HEADING


def test_paper_tables_have_the_three_columns_and_enough_rows():
    total = 0
    for short, body in paper_sections().items():
        rows = table_rows(body)
        assert rows, f"no table in the {short} section"
        assert list(rows[0]) == ["paper ref", "what", "where"], short
        assert all(row["paper ref"] and row["what"] for row in rows), short
        assert len(rows) >= MIN_ROWS_PER_PAPER, f"{short}: {len(rows)} rows"
        total += len(rows)
    assert total >= MIN_ROWS


@pytest.mark.parametrize("dotted", sorted(set(where_entries())))
def test_where_entry_resolves(dotted):
    assert DOTTED.match(dotted), f"not a dotted aoi_fl path: {dotted!r}"
    obj = resolve(dotted)
    # the module that implements it, not one that re-exports it: a function or class is
    # defined in the module the entry names (a method, in the class named before it)
    defined = getattr(obj, "__module__", None)
    if isinstance(obj, (type, types.FunctionType)) and defined is not None:
        owner = dotted.rsplit(".", 1)[0]
        assert owner == defined or owner.startswith(defined + "."), (
            f"{dotted} is defined in {defined}: name that module"
        )


def test_listed_notebooks_exist():
    body = sections()[FIGURES_HEADING]
    names = re.findall(r"notebooks/([\w.-]+\.ipynb)", body)
    assert names, "the figure section lists no notebook"
    missing = [n for n in names if not (ROOT / "notebooks" / n).is_file()]
    assert not missing, f"listed but not in notebooks/: {missing}"
