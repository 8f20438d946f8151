"""The notebook runner saves only what a rerun reproduces (merged streams, no progress bars),
refuses unusable variables before any notebook runs, and runs every notebook whatever fails."""

import hashlib
import importlib.util
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import papermill
import pytest
import torch
from papermill.exceptions import PapermillExecutionError
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

    monkeypatch.setattr(papermill, "execute_notebook", fake)
    return calls


def test_only_with_a_prefix_matching_nothing_fails_naming_it(monkeypatch, capsys, kernel_env):
    def never(*args, **kwargs):
        raise AssertionError("no notebook should run")

    monkeypatch.setattr(papermill, "execute_notebook", never)
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
        papermill, "execute_notebook", lambda i, o, **kw: calls.append((i, o, kw["parameters"]))
    )
    monkeypatch.setattr(runner, "strip_volatile", lambda path: calls.append(("strip", path)))
    monkeypatch.setattr(sys, "argv", ["run_notebooks.py", "--only", "05", "--rerun", "1"])
    assert runner.main() == 0
    nb = runner.NOTEBOOKS / "05_mnist_accuracy.ipynb"
    # the committed notebook is the output (bug: cpu outputs lost in a scratch folder)
    assert calls == [(str(nb), str(nb), {"profile": "cpu", "rerun": True}), ("strip", nb)]


# ---------------------------------------------------------------------------------------------
# A failed notebook does not stop the others; every failure is named at the end


def test_every_notebook_runs_and_each_failure_is_named_at_the_end(
    monkeypatch, capsys, kernel_env, tmp_path
):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the smoke run's scratch goes
    ran = []

    def fake(input_path, output_path, **kwargs):
        name = Path(input_path).name
        ran.append(name)
        if name.startswith("02_"):  # papermill saves the partial output, then raises
            Path(output_path).write_text(Path(input_path).read_text())
            raise PapermillExecutionError(3, 3, "src", "ValueError", "bad\nlast words", [])
        if name.startswith("04_"):  # a kernel that never started: nothing written
            raise RuntimeError("Kernel died before replying to kernel_info")

    monkeypatch.setattr(papermill, "execute_notebook", fake)
    monkeypatch.setattr(sys, "argv", ["run_notebooks.py", "--profile", "smoke", "--only", "0"])
    # bug: the first failure stopped make figures; the notebooks after it never ran
    assert runner.main() == 1
    selected = [p.name for p in runner.select("0")]
    assert ran == selected and ran[-1] == "00_claims.ipynb"  # the ledger still runs, last
    captured = capsys.readouterr()
    assert "[smoke] 02_total_variance.ipynb FAILED (ValueError: last words) in" in captured.out
    assert "[smoke] 05_mnist_accuracy.ipynb done in" in captured.out
    err = captured.err.splitlines()
    start = err.index("make figures: 2 of 10 notebooks failed:")
    (scratch,) = tmp_path.glob("aoi-fl-smoke-*")
    assert err[start + 1 :] == [
        "  02_total_variance.ipynb: ValueError: last words",
        f"    partial output: {scratch / '02_total_variance.ipynb'}",
        "  04_window_variance.ipynb: RuntimeError: Kernel died before replying to kernel_info",
        "    partial output: none written",
    ]
    # a failed smoke run keeps its scratch folder: the partial output is where to look
    assert json.loads((scratch / "02_total_variance.ipynb").read_text())["cells"]


def test_a_failed_notebook_is_saved_in_place_without_volatile_metadata(monkeypatch, kernel_env):
    calls = []

    def fail(input_path, output_path, **kwargs):
        calls.append(("execute", output_path))
        raise PapermillExecutionError(0, 1, "src", "KeyError", "'x'", [])

    monkeypatch.setattr(papermill, "execute_notebook", fail)
    monkeypatch.setattr(runner, "strip_volatile", lambda path: calls.append(("strip", path)))
    monkeypatch.setattr(sys, "argv", ["run_notebooks.py", "--only", "05"])
    assert runner.main() == 1
    nb = runner.NOTEBOOKS / "05_mnist_accuracy.ipynb"
    # the partial output is stripped like a complete one (bug: timestamps left in the diff)
    assert calls == [("execute", str(nb)), ("strip", nb)]


def test_the_error_line_is_the_last_line_of_the_traceback():
    error = PapermillExecutionError(1, 2, "x", "AssertionError", "first\nsecond\n\n", ["tb"])
    assert runner.last_error_line(error) == "AssertionError: second"
    assert runner.last_error_line(PapermillExecutionError(1, 2, "x", "SystemExit", "", [])) == (
        "SystemExit"
    )
    assert runner.last_error_line(TimeoutError("cell timed out")) == "TimeoutError: cell timed out"


# ---------------------------------------------------------------------------------------------
# The variables of make figures are checked before the first notebook


@pytest.fixture
def nothing_runs(monkeypatch, kernel_env):
    """Fails the test if a notebook would be executed."""

    def never(*args, **kwargs):
        raise AssertionError("no notebook should run")

    monkeypatch.setattr(papermill, "execute_notebook", never)
    monkeypatch.setattr(runner, "execute", never)
    # make test exports AOI_FL_PROFILE=smoke; the user's shell may export any of them
    for name in (runner.DEVICE_VAR, runner.EXECUTOR_VAR, runner.PROFILE_VAR, runner.BATCH_VAR):
        monkeypatch.delenv(name, raising=False)


MPS = (
    "device 'mps' is not supported: the aggregations accumulate in float64, which Apple's MPS "
    "backend does not provide; use device 'cpu'"
)


@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        (
            ["--profile", "bogus"],
            {},
            "PROFILE='bogus' (--profile): unknown profile 'bogus'; valid: cpu, paper, smoke",
        ),
        (
            ["--profile", ""],
            {},
            "PROFILE='' (--profile): unknown profile ''; valid: cpu, paper, smoke",
        ),
        (
            ["--only", "99"],
            {},
            "NB='99' (--only): no notebook in {notebooks} starts with '99'; valid: a prefix of "
            "{names}",
        ),
        (["--rerun", "2"], {}, "RERUN='2' (--rerun): unknown RERUN '2'; valid: 0, 1"),
        (
            [],
            {"AOI_FL_EXECUTOR": "bogus"},
            "EXECUTOR='bogus' ($AOI_FL_EXECUTOR): unknown executor 'bogus'; valid: local, ray",
        ),
        (
            [],
            {"AOI_FL_DEVICE": "bogus"},
            "DEVICE='bogus' ($AOI_FL_DEVICE): device must be 'auto', 'cpu', 'cuda', 'cuda:N' or "
            "'mps', got 'bogus'; valid here: auto, cpu",
        ),
        (
            [],
            {"AOI_FL_DEVICE": "cuda"},
            "DEVICE='cuda' ($AOI_FL_DEVICE): device 'cuda' was requested but this machine has no "
            "CUDA device (torch.cuda.is_available() is False); valid here: auto, cpu",
        ),
        (
            [],
            {"AOI_FL_DEVICE": "mps"},
            f"DEVICE='mps' ($AOI_FL_DEVICE): {MPS}; valid here: auto, cpu",
        ),
    ],
)
def test_an_unusable_variable_is_refused_before_any_notebook_runs(
    monkeypatch, capsys, nothing_runs, args, env, line
):
    # the check runs on this machine: here, one without a GPU, wherever the test runs
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["run_notebooks.py", *args])
    # bug: a bad DEVICE or EXECUTOR surfaced 40 s in, in a traceback, after notebooks 01-04 ran
    assert runner.main() == 2
    names = sorted(p.stem for p in runner.NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    line = line.format(notebooks=runner.NOTEBOOKS, names=", ".join(names))
    assert capsys.readouterr().err.splitlines() == [
        "make figures: no notebook was run; fix these first:",
        f"  {line}",
    ]


def test_a_gpu_the_machine_lacks_is_refused_naming_those_it_has(monkeypatch, capsys, nothing_runs):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("AOI_FL_DEVICE", "cuda:2")
    monkeypatch.setattr(sys, "argv", ["run_notebooks.py", "--check"])
    assert runner.main() == 2
    assert capsys.readouterr().err.splitlines()[1] == (
        "  DEVICE='cuda:2' ($AOI_FL_DEVICE): device 'cuda:2' was requested but this machine has "
        "2 CUDA device(s); valid here: auto, cpu, cuda, cuda:0, cuda:1"
    )


def test_every_unusable_variable_is_named_at_once(monkeypatch, capsys, nothing_runs):
    monkeypatch.setenv("AOI_FL_EXECUTOR", "dask")
    monkeypatch.setenv("AOI_FL_DEVICE", "gpu")
    # the overrides every notebook reads: each would fail every notebook, writing their
    # partial outputs into notebooks/ (found by a probe: --check used to pass them)
    monkeypatch.setenv("AOI_FL_PROFILE", "bogus")
    monkeypatch.setenv("AOI_FL_BATCH", "abc")
    argv = ["run_notebooks.py", "--profile", "fast", "--only", "x", "--rerun", "yes"]
    monkeypatch.setattr(sys, "argv", argv)
    assert runner.main() == 2
    lines = capsys.readouterr().err.splitlines()[1:]
    named = [line.split("=")[0].strip() for line in lines]
    assert named == [
        "PROFILE",
        "NB",
        "RERUN",
        "EXECUTOR",
        "DEVICE",
        "AOI_FL_PROFILE",
        "AOI_FL_BATCH",
    ]
    assert lines[5].endswith("unknown AOI_FL_PROFILE 'bogus'; valid: cpu, paper, smoke")
    assert "AOI_FL_BATCH='abc': must be a whole number of runs per batch" in lines[6]


def test_usable_variables_pass_the_check_and_nothing_runs(monkeypatch, capsys, nothing_runs):
    monkeypatch.setenv("AOI_FL_EXECUTOR", "ray")
    monkeypatch.setenv("AOI_FL_DEVICE", "cpu")
    argv = ["run_notebooks.py", "--check", "--profile", "paper", "--only", "0", "--rerun", "1"]
    monkeypatch.setattr(sys, "argv", argv)
    assert runner.main() == 0
    assert capsys.readouterr().err == ""


def test_the_check_reads_what_the_library_accepts():
    # the runner reads run_grid's executors from the source, without importing it (seconds):
    # the two must agree, as must the variables the kernels read
    from aoi_fl.core import device
    from aoi_fl.pipeline import batching, runs

    assert runner.EXECUTORS == runs.EXECUTORS
    assert (runner.DEVICE_VAR, runner.EXECUTOR_VAR) == (device.DEVICE_VAR, runs.EXECUTOR_VAR)
    assert runner.BATCH_VAR == batching.BATCH_VAR


def test_refusing_a_variable_loads_neither_papermill_nor_pytorch():
    # each takes seconds to import on a busy machine; a typo is refused in well under one
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('r', {str(runner.__file__)!r})\n"
        "r = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(r)\n"
        "sys.argv = ['run_notebooks.py', '--check', '--profile', 'bogus']\n"
        "rc = r.main()\n"
        "print(rc, [m for m in ('papermill', 'torch', 'aoi_fl.pipeline.runs') if m in sys.modules])"
    )
    env = {"AOI_FL_EXECUTOR": "bogus", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.stdout.strip() == "2 []", done.stderr
    assert "EXECUTOR='bogus'" in done.stderr and "PROFILE='bogus'" in done.stderr
