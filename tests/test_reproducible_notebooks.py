"""The theory notebooks (01-04), re-executed in their committed profile as ``make figures`` runs
them, print the committed text and save the committed figures byte for byte (README, "What
reproducible means")."""

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
THEORY = sorted((ROOT / "notebooks").glob("0[1-4]_*.ipynb"))

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
@pytest.mark.parametrize("path", THEORY, ids=lambda p: p.name)
def test_theory_notebook_reexecutes_to_its_committed_text_and_figures(
    path, tmp_path, restored_environ
):
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
        assert fig.read_bytes() == reference.read_bytes(), f"{path.name}: {fig.name} differs"
