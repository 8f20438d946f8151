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
    # what aoi_fl.runs._progress writes: a plain tqdm bar, redrawn on every update
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
