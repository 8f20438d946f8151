"""The notebook runner saves only what a rerun reproduces: merged streams, no progress bars."""

import hashlib
import importlib.util
import io
import json
import sys
from pathlib import Path

import pytest
from tqdm import tqdm

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "run_notebooks.py"
spec = importlib.util.spec_from_file_location("run_notebooks", SCRIPT)
runner = importlib.util.module_from_spec(spec)
spec.loader.exec_module(runner)


def stream(text, name="stderr"):
    return {"output_type": "stream", "name": name, "text": text.splitlines(keepends=True)}


def bar_text(total, **kw):
    # what aoi_fl.pipeline.runs._progress writes: a plain tqdm bar, redrawn on every update
    buf = io.StringIO()
    for _ in tqdm(range(total), file=buf, mininterval=0, unit="runs", **kw):
        pass
    return buf.getvalue()


def test_merge_streams_joins_consecutive_chunks_of_one_stream():
    chunks = [stream("a\nb"), stream("c\n"), stream("x\n", "stdout"), stream("d\n")]
    merged = runner.merge_streams(chunks)
    assert [("".join(o["text"]), o["name"]) for o in merged] == [
        ("a\nbc\n", "stderr"),
        ("x\n", "stdout"),
        ("d\n", "stderr"),
    ]


def test_progress_bars_are_dropped_and_everything_else_kept():
    bars = bar_text(3) + bar_text(2, desc="random", postfix={"acc": 0.5})
    assert bars.count("\r") >= 5 and "3/3 [" in bars and "acc=0.5" in bars
    figure = {"output_type": "display_data", "data": {"text/plain": "<Figure>"}}
    outputs = [stream(bars), figure, stream("UserWarning: keep me\n" + bar_text(4) + "and me\n")]
    kept = runner.drop_progress_bars(outputs)
    assert kept[0] == figure
    assert "".join(kept[1]["text"]) == "UserWarning: keep me\nand me\n"
    assert len(kept) == 2
    # as papermill saves it: the bar's closing newline arrives after some other output
    open_bar = bar_text(2)[:-1]
    outputs = [stream("a\n", "stdout"), stream(open_bar), stream("b\n", "stdout")]
    outputs.append(stream("\nUserWarning: keep me\n"))
    kept = runner.drop_progress_bars(outputs)
    assert [("".join(o["text"]), o["name"]) for o in kept] == [
        ("a\nb\n", "stdout"),
        ("UserWarning: keep me\n", "stderr"),
    ]
    # text that merely contains a fraction and brackets is no bar
    plain = [stream("rounds 3/4 [IID]\n", "stdout")]
    assert runner.drop_progress_bars(plain) == plain


def test_numeric_code_paths_are_pinned_for_the_kernels_unless_set(monkeypatch):
    from numpy._core._multiarray_umath import __cpu_features__ as cpu

    # set, then removed: monkeypatch then restores the original state of both after the test
    monkeypatch.setenv("NPY_DISABLE_CPU_FEATURES", "")
    monkeypatch.delenv("NPY_DISABLE_CPU_FEATURES")
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Sandybridge")  # a user's choice is kept
    pinned = runner.pin_numeric_code_paths()
    assert pinned == {
        "NPY_DISABLE_CPU_FEATURES": runner.NUMPY_DISABLED,
        "OPENBLAS_CORETYPE": "Sandybridge",
    }
    monkeypatch.delenv("OPENBLAS_CORETYPE")
    pinned = runner.pin_numeric_code_paths()
    has_avx2 = bool(cpu.get("AVX2") and cpu.get("FMA3"))
    assert ("OPENBLAS_CORETYPE" in pinned) == has_avx2
    if has_avx2:
        assert pinned["OPENBLAS_CORETYPE"] == "Haswell"


# ---------------------------------------------------------------------------------------------
# The entry point: which notebooks run, with which parameters, and where their copies go


def notebooks_snapshot():
    """Every file under notebooks/ with its content digest and modification time."""
    return {
        str(p.relative_to(runner.NOTEBOOKS)): (
            hashlib.sha256(p.read_bytes()).hexdigest(),
            p.stat().st_mtime_ns,
        )
        for p in sorted(runner.NOTEBOOKS.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def kernel_env(monkeypatch):
    """The environment the runner pins for its kernels is restored after the test."""
    for name in ("NPY_DISABLE_CPU_FEATURES", "OPENBLAS_CORETYPE"):
        monkeypatch.setenv(name, "")  # records the original value (or its absence) ...
        monkeypatch.delenv(name)  # ... which monkeypatch restores at teardown


@pytest.fixture
def papermill_calls(monkeypatch, kernel_env):
    """papermill.execute_notebook faked: records each call and writes the notebook unexecuted,
    with the volatile metadata papermill would add."""
    calls = []

    def fake(input_path, output_path, **kwargs):
        calls.append({"input": Path(input_path), "output": Path(output_path), **kwargs})
        # where a smoke run writes: never into notebooks/ (checked here, while the file is new)
        assert Path(output_path).parent != runner.NOTEBOOKS
        nb = json.loads(Path(input_path).read_text())
        nb["metadata"]["papermill"] = {"start_time": "2024-01-01T00:00:00"}
        for cell in nb["cells"]:
            cell.setdefault("metadata", {})["execution"] = {"iopub.status.busy": "now"}
        Path(output_path).write_text(json.dumps(nb))

    monkeypatch.setattr(runner.pm, "execute_notebook", fake)
    return calls


def test_only_with_a_prefix_matching_nothing_fails_naming_it(monkeypatch, capsys, kernel_env):
    def never(*args, **kwargs):
        raise AssertionError("no notebook should run")

    monkeypatch.setattr(runner.pm, "execute_notebook", never)
    monkeypatch.setattr(sys, "argv", ["run_notebooks.py", "--only", "99_missing"])
    # bug: an empty selection reported as success (make figures would do nothing, silently)
    assert runner.main() != 0
    err = capsys.readouterr().err
    assert "'99_missing'" in err and str(runner.NOTEBOOKS) in err


def test_smoke_profile_runs_the_selection_in_a_scratch_folder(monkeypatch, capsys, papermill_calls):
    stripped = []
    real_strip = runner.strip_volatile

    def strip(path):
        real_strip(path)
        stripped.append(json.loads(path.read_text()))

    monkeypatch.setattr(runner, "strip_volatile", strip)
    before = notebooks_snapshot()
    monkeypatch.setattr(sys, "argv", ["run_notebooks.py", "--profile", "smoke", "--only", "0"])
    assert runner.main() == 0
    # bug: a smoke run overwrote the committed notebooks with its cheap outputs
    assert notebooks_snapshot() == before
    selected = sorted(p.name for p in runner.NOTEBOOKS.glob("0*.ipynb"))
    # the claims ledger reads what the others computed: it runs last
    selected = [*selected[1:], selected[0]]
    assert selected[0] == "01_markov_chain.ipynb" and len(selected) == 10
    assert selected[-1] == "00_claims.ipynb"
    # in order, each from notebooks/ into one temporary folder, under its own name
    assert [c["input"] for c in papermill_calls] == [runner.NOTEBOOKS / n for n in selected]
    assert [c["output"].name for c in papermill_calls] == selected
    (scratch,) = {c["output"].parent for c in papermill_calls}
    assert scratch.name.startswith("aoi-fl-smoke-") and runner.NOTEBOOKS not in scratch.parents
    assert not scratch.exists()  # removed at the end
    for c in papermill_calls:
        assert c["cwd"] == str(runner.NOTEBOOKS) and c["kernel_name"] == "python3"
    # the profile reaches every notebook; rerun only those that declare it
    params = {c["input"].name: c["parameters"] for c in papermill_calls}
    assert params["01_markov_chain.ipynb"] == {"profile": "smoke"}
    assert params["09_agnostic_vs_weighted.ipynb"] == {"profile": "smoke", "rerun": False}
    # each executed copy was stripped of papermill's run-dependent metadata
    assert len(stripped) == 10
    assert all("papermill" not in nb["metadata"] for nb in stripped)
    assert all("execution" not in cell["metadata"] for nb in stripped for cell in nb["cells"])
    out = capsys.readouterr().out
    assert all(f"[smoke] {n} done in" in out for n in selected)


def test_cpu_profile_writes_back_in_place(monkeypatch, kernel_env):
    calls = []
    monkeypatch.setattr(  # records only: nothing is written into notebooks/
        runner.pm, "execute_notebook", lambda i, o, **kw: calls.append((i, o, kw["parameters"]))
    )
    monkeypatch.setattr(runner, "strip_volatile", lambda path: calls.append(("strip", path)))
    monkeypatch.setattr(sys, "argv", ["run_notebooks.py", "--only", "05", "--rerun", "1"])
    assert runner.main() == 0
    nb = runner.NOTEBOOKS / "05_mnist_accuracy.ipynb"
    # the committed notebook is the output (bug: cpu outputs lost in a scratch folder)
    assert calls == [(str(nb), str(nb), {"profile": "cpu", "rerun": True}), ("strip", nb)]
