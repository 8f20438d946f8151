"""The notebook runner saves only what a rerun reproduces: merged streams, no progress bars."""

import importlib.util
import io
from pathlib import Path

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
