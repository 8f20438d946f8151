"""The size limits of the library's layout (docs/layout.md): no module over 600 lines and no
function over 80, so that a module or function is split when it grows past them, not later."""

import ast
from pathlib import Path

import pytest

LIBRARY = Path(__file__).resolve().parents[1] / "aoi_fl"
MODULE_LINES, FUNCTION_LINES = 600, 80
MODULES = sorted(LIBRARY.rglob("*.py"))


def long_functions(text: str) -> list[tuple[str, int, int]]:
    """(name, first line, lines) of each function of ``text`` over the limit, counted from the
    ``def`` (decorators not counted) to the last line of the body; two functions of one name
    (methods ``__init__`` of two classes) each count."""
    functions = [
        n
        for n in ast.walk(ast.parse(text))
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    sizes = [(f.name, f.lineno, f.end_lineno - f.lineno + 1) for f in functions]
    return [size for size in sizes if size[2] > FUNCTION_LINES]


def test_the_library_is_found():
    assert len(MODULES) > 100


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(LIBRARY)))
def test_module_and_function_sizes(path):
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MODULE_LINES, f"{path.name}: over {MODULE_LINES} lines"
    long = long_functions(text)
    assert not long, f"{path.name}: functions over {FUNCTION_LINES} lines: {long}"


@pytest.mark.parametrize("statements, flagged", [(78, False), (79, True)])
def test_a_function_one_line_over_is_flagged(statements, flagged):
    """A docstring and 78 statements make 80 lines with the ``def``: allowed; 79 make 81."""
    body = "\n".join(f"    x{i} = {i}" for i in range(statements))
    text = f'class C:\n    @staticmethod\n    def f():\n        """doc"""\n{body}\n'.replace(
        "\n    x", "\n        x"
    )
    assert bool(long_functions(text)) is flagged


def test_a_long_function_is_flagged_beside_a_short_one_of_its_name():
    body = "\n".join(f"        x{i} = {i}" for i in range(90))
    short = "class B:\n    def __init__(self):\n        pass\n"
    text = f"class A:\n    def __init__(self):\n{body}\n\n{short}"
    assert long_functions(text) == [("__init__", 2, 91)]
