"""Notebooks re-executed in their committed profile as ``make figures`` runs them print the
committed text and save the committed figures (README, "What reproducible promises"): the theory
notebooks 01-04 and 11, and 10, which re-plots from the committed cache.

PNG files must be identical byte for byte. A PDF writes each coordinate with 10 decimals, so a
plotted value that another CPU computes one unit in the last place away can flip the last decimal
of one coordinate (measured under ``scripts/foreign_cpu.py``: one coordinate in each of
``agnostic_fig2_skew.pdf`` and ``kvib_fig1a_isp_vs_rsp.pdf``, at the 10th decimal); a PDF must
therefore draw the same thing with every number equal to :data:`PDF_RTOL`, which is still far
below anything visible (a point is 1/72 inch; a real change moves a mark by much more than
1e-6 points).
"""

import importlib.util
import json
import math
import os
import re
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the theory notebooks, and one that re-plots from the committed cache
REEXECUTED_NUMBERS = ("01", "02", "03", "04", "10", "11")
#: coordinates of a re-executed PDF against the committed one (module docstring)
PDF_RTOL = 1e-9
REEXECUTED = sorted(
    p for p in (ROOT / "notebooks").glob("[01][0-9]_*.ipynb") if p.name[:2] in REEXECUTED_NUMBERS
)

SCRIPT = ROOT / "scripts" / "run_notebooks.py"
spec = importlib.util.spec_from_file_location("run_notebooks", SCRIPT)
runner = importlib.util.module_from_spec(spec)
spec.loader.exec_module(runner)


def committed_profile(nb: dict) -> str:
    """The profile papermill injected into the committed run."""
    for cell in nb["cells"]:
        if "injected-parameters" in cell["metadata"].get("tags", []):
            found = re.search(r'^profile = "(\w+)"', "".join(cell["source"]), re.M)
            if found:
                return found.group(1)
    raise AssertionError("the committed notebook carries no injected profile: run make figures")


def text_outputs(nb: dict) -> list[tuple[str, list[str]]]:
    """Per code cell, its id and the text of its outputs: streams, plain-text results, errors.
    Images are left out (the saved figure files are compared instead)."""
    cells = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        texts = []
        for out in cell["outputs"]:
            if out["output_type"] == "stream":
                texts.append(f"{out['name']}: " + "".join(out["text"]))
            elif out["output_type"] == "error":
                texts.append(f"error: {out['ename']}: {out['evalue']}")
            elif "text/plain" in out.get("data", {}) and "image/png" not in out["data"]:
                texts.append("".join(out["data"]["text/plain"]))
        cells.append((cell["id"], texts))
    return cells


def first_difference(committed: dict, rerun: dict) -> str | None:
    """A description of the first code cell whose text output differs, or None."""
    old, new = text_outputs(committed), text_outputs(rerun)
    if [i for i, _ in old] != [i for i, _ in new]:
        return f"the code cells differ: {[i for i, _ in old]} vs {[i for i, _ in new]}"
    for (cell_id, a), (_, b) in zip(old, new, strict=True):
        if a != b:
            return f"cell {cell_id}:\n--- committed\n{''.join(a)}\n--- re-executed\n{''.join(b)}"
    return None


_STREAM = re.compile(rb"stream\r?\n(.*?)endstream", re.S)
_TOKEN = re.compile(rb"[^\s\[\]<>()/]+|[\[\]<>()/]")


def pdf_drawing(data: bytes) -> list[list[bytes]]:
    """The tokens of every content stream of a PDF (decompressed where compressed)."""
    streams = []
    for raw in _STREAM.findall(data):
        try:
            raw = zlib.decompress(raw)
        except zlib.error:
            pass
        streams.append(_TOKEN.findall(raw))
    return streams


def _number(token: bytes) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def figure_difference(saved: bytes, committed: bytes, pdf: bool) -> str | None:
    """None when a re-executed figure equals the committed one (PNG: the same bytes; PDF: the
    same drawing, numbers to :data:`PDF_RTOL`), else what differs."""
    if saved == committed:
        return None
    if not pdf:
        return "the bytes differ"
    ours, theirs = pdf_drawing(saved), pdf_drawing(committed)
    if len(ours) != len(theirs):
        return f"{len(ours)} streams against {len(theirs)}"
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        if len(a) != len(b):
            return f"stream {i}: {len(a)} tokens against {len(b)}"
        for x, y in zip(a, b, strict=True):
            u, v = _number(x), _number(y)
            same = x == y or (
                u is not None
                and v is not None
                and math.isclose(u, v, rel_tol=PDF_RTOL, abs_tol=PDF_RTOL)
            )
            if not same:
                return f"stream {i}: {x!r} against {y!r}"
    return None


def test_a_pdf_coordinate_in_its_last_decimal_is_the_same_figure_a_moved_mark_is_not():
    committed = b"stream\n1 0 0 1 0.0404760061 52.7232135199 cm /P4 Do\nendstream"
    rounded = b"stream\n1 0 0 1 0.0404760061 52.72321352 cm /P4 Do\nendstream"
    moved = b"stream\n1 0 0 1 0.0404760061 52.7242135199 cm /P4 Do\nendstream"
    other = b"stream\n1 0 0 1 0.0404760061 52.7232135199 cm /P5 Do\nendstream"
    assert figure_difference(rounded, committed, pdf=True) is None
    assert "52.7242135199" in figure_difference(moved, committed, pdf=True)
    assert "P5" in figure_difference(other, committed, pdf=True)
    assert figure_difference(rounded, committed, pdf=False) == "the bytes differ"
    packed = b"stream\n" + zlib.compress(rounded[7:-9]) + b"endstream"
    assert figure_difference(packed, committed, pdf=True) is None


@pytest.fixture
def restored_environ():
    """``runner.execute`` pins code paths in ``os.environ`` for the kernels it starts, as ``make
    figures`` does; the rest of the session gets the environment back as it was."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.mark.slow
@pytest.mark.cpu_sensitive
@pytest.mark.parametrize("path", REEXECUTED, ids=lambda p: p.name)
def test_a_notebook_reexecutes_to_its_committed_text_and_figures(path, tmp_path, restored_environ):
    committed = json.loads(path.read_text())
    figures = tmp_path / "figures"
    os.environ["AOI_FL_FIGURES"] = str(figures)  # aoi_fl.pipeline.notebook.setup writes them there
    os.environ.pop("AOI_FL_PROFILE", None)
    # the kernel imports this checkout's aoi_fl, whatever the environment was installed from
    path_var = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    os.environ["PYTHONPATH"] = path_var
    out = tmp_path / path.name
    runner.execute(path, out, committed_profile(committed))
    difference = first_difference(committed, json.loads(out.read_text()))
    assert difference is None, f"{path.name}: first differing {difference}"
    saved = sorted(figures.iterdir())
    assert saved, f"{path.name} saved no figure"
    for fig in saved:
        reference = ROOT / "figures" / fig.name
        assert reference.exists(), f"{fig.name} is not committed"
        difference = figure_difference(
            fig.read_bytes(), reference.read_bytes(), pdf=fig.suffix == ".pdf"
        )
        assert difference is None, f"{path.name}: {fig.name} differs: {difference}"
