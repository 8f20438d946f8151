"""Execute the notebooks in order with papermill (the engine behind ``make figures``).

Outputs of the ``cpu`` and ``paper`` profiles are written back into ``notebooks/`` (committed, so a
reader sees every figure without running anything); a ``smoke`` run writes its executed copies to a
temporary folder. Papermill's timestamps and durations and the progress bars of training runs
are stripped afterwards, so re-running on unchanged code leaves every tracked file
byte-identical, whether the results were recomputed or read from the cache.

The kernels run with NumPy's and SciPy's CPU-dependent code paths pinned
(:func:`pin_numeric_code_paths`), so that another x86-64 machine computes the same last bits.

The variables of ``make figures`` (``PROFILE``, ``NB``, ``RERUN``, ``DEVICE``, ``EXECUTOR``) and
the environment's overrides every notebook reads (``$AOI_FL_PROFILE``, ``$AOI_FL_BATCH``) are
checked before any notebook runs (:func:`variable_problems`); a notebook that fails does not stop
the others, and the run ends with every failure named (exit status 1).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from aoi_fl.core.validation import require_choice
from aoi_fl.pipeline.executors import EXECUTOR_VAR, EXECUTORS
from aoi_fl.pipeline.profiles import ENV_VAR as PROFILE_VAR
from aoi_fl.pipeline.profiles import PROFILES, traits

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
VOLATILE_CELL_KEYS = ("papermill", "execution")


def merge_streams(outputs: list[dict]) -> list[dict]:
    """One output per run of stdout (or stderr) text: how the kernel chunks a stream depends on
    timing, so unmerged chunks would make the saved notebook differ from run to run."""
    merged: list[dict] = []
    for out in outputs:
        last = merged[-1] if merged else None
        if (
            last is not None
            and out.get("output_type") == "stream" == last.get("output_type")
            and out.get("name") == last.get("name")
        ):
            text = "".join(last["text"]) + "".join(out["text"])
            last["text"] = text.splitlines(keepends=True)
        else:
            merged.append(out)
    return merged


# redraws of a tqdm bar, "\r<description>: 40%|####  | 2/5 [00:03<00:04, 1.5s/runs, ...]" (padded
# with spaces when shorter than the previous one), then the newline that closes the bar, unless
# the bar is the end of the text (its newline comes in a later output of the same stream)
_PROGRESS_BAR = re.compile(r"(?:\r[^\r\n]*?\| *\d+/\d+ \[[^\]\r\n]*\] *)+(\n|$)")


def drop_progress_bars(outputs: list[dict]) -> list[dict]:
    """Stream outputs without tqdm progress bars: a bar is for the person watching the run; it
    shows timings and appears only when something is computed, so a saved notebook that kept it
    would differ between a recomputation and a re-plot from the cache."""
    kept: list[dict] = []
    unclosed: set[str] = set()  # streams whose last bar's newline is still to come
    for out in outputs:
        if out.get("output_type") != "stream":
            kept.append(out)
            continue
        name, text = out["name"], "".join(out["text"])
        if name in unclosed and text.startswith("\n"):
            text = text[1:]
        unclosed.discard(name)

        def drop(match: re.Match, name: str = name) -> str:
            if not match.group(1):
                unclosed.add(name)
            return ""

        text = _PROGRESS_BAR.sub(drop, text)
        if text.strip():
            kept.append({**out, "text": text.splitlines(keepends=True)})
    return merge_streams(kept)


def strip_volatile(path: Path) -> None:
    """Drop run-dependent metadata (timestamps, durations, ids) from an executed notebook."""
    nb = json.loads(path.read_text())
    nb["metadata"].pop("papermill", None)
    for cell in nb["cells"]:
        for key in VOLATILE_CELL_KEYS:
            cell.get("metadata", {}).pop(key, None)
        if "injected-parameters" in cell.get("metadata", {}).get("tags", []):
            cell["id"] = "injected-parameters"  # papermill draws a random id on every run
        if "outputs" in cell:
            cell["outputs"] = drop_progress_bars(merge_streams(cell["outputs"]))
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n")


# NumPy's AVX-512 loops (exp, log, log10, ... through Intel's SVML) round differently from the
# loops every other x86-64 CPU runs; disabled, every machine takes the same loops. Naming a
# feature the CPU lacks is harmless.
NUMPY_DISABLED = "X86_V4 AVX512_ICL AVX512_SPR"
# OpenBLAS (bundled with NumPy and SciPy) picks its kernels by CPU at load time, and kernels for
# different CPUs round differently: an AVX-512 machine gets SkylakeX kernels, the machine that
# made the committed outputs Haswell ones. Pinned to Haswell wherever the CPU can run them (AVX2
# and FMA; elsewhere OpenBLAS would stop on an illegal instruction).
OPENBLAS_CORE = "Haswell"


def pin_numeric_code_paths() -> dict[str, str]:
    """Set (unless already set) the environment that the notebook kernels inherit, so that NumPy
    and SciPy take the same code paths on any x86-64 CPU with AVX2; returns what is in force.

    PyTorch's kernels are not pinned: training is recomputed only with ``RERUN=1`` and otherwise
    read from the committed cache.
    """
    try:  # the CPU features NumPy detected (NumPy's own table, also used by np.show_runtime)
        from numpy._core._multiarray_umath import __cpu_features__ as cpu
    except ImportError:
        cpu = {}
    os.environ.setdefault("NPY_DISABLE_CPU_FEATURES", NUMPY_DISABLED)
    if cpu.get("AVX2") and cpu.get("FMA3"):
        os.environ.setdefault("OPENBLAS_CORETYPE", OPENBLAS_CORE)
    names = ("NPY_DISABLE_CPU_FEATURES", "OPENBLAS_CORETYPE")
    return {k: os.environ[k] for k in names if k in os.environ}


def execute(nb: Path, out: Path, profile: str, rerun: bool = False) -> None:
    """Execute notebook ``nb`` in ``profile`` into ``out`` (may be ``nb``), without the
    run-dependent metadata (:func:`strip_volatile`)."""
    # seconds to import on a busy machine: not before the variables are checked
    import papermill as pm

    pin_numeric_code_paths()
    declared = pm.inspect_notebook(str(nb))
    offered = {"profile": profile, "rerun": rerun}
    try:
        pm.execute_notebook(
            str(nb),
            str(out),
            parameters={k: v for k, v in offered.items() if k in declared},
            cwd=str(NOTEBOOKS),
            progress_bar=sys.stderr.isatty(),  # cells done, in the terminal only
            kernel_name="python3",
        )
    finally:
        # papermill saves a failed run's partial output too: stripped like a complete one, its
        # diff against the committed notebook shows what the run changed, not its timestamps
        if out.exists():
            strip_volatile(out)


#: the claims ledger reads what the other notebooks' runs left in the cache: it runs last
LAST = "00_claims.ipynb"


def in_run_order(paths) -> list[Path]:
    """Notebooks by number, the claims ledger (00, listed first to readers) last."""
    return sorted(paths, key=lambda p: (p.name == LAST, p.name))


def select(only: str) -> list[Path]:
    """The notebooks whose name starts with ``only``, in run order."""
    return in_run_order(p for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb") if p.name.startswith(only))


# what the Makefile exports for DEVICE (and EXECUTOR, EXECUTOR_VAR); the kernels read it as
# aoi_fl.core.device.DEVICE_VAR, a module that imports PyTorch: named here so that an unset
# DEVICE is checked without loading it
DEVICE_VAR = "AOI_FL_DEVICE"
#: likewise aoi_fl.pipeline.batching.BATCH_VAR, the batch cap every notebook's grids read
BATCH_VAR = "AOI_FL_BATCH"


def check_selection(only: str) -> None:
    if not select(only):
        names = ", ".join(sorted(p.stem for p in select("")))
        raise ValueError(
            f"no notebook in {NOTEBOOKS} starts with {only!r}; valid: a prefix of {names}"
        )


def check_executor(name: str) -> None:
    require_choice("executor", name, EXECUTORS)


def check_batch(value: str) -> None:
    """run_grid's own reading of ``$AOI_FL_BATCH`` (``batching.batch_cap``), run here."""
    # the batching module loads PyTorch: only when the variable is set
    from aoi_fl.pipeline.batching import batch_cap

    batch_cap(None)


def check_device(name: str) -> None:
    """The project's own device check (``resolve_device``), run here: a GPU this machine lacks
    is refused now rather than in the first notebook that trains."""
    # PyTorch takes seconds to load: only when DEVICE is set
    import torch

    from aoi_fl.core.device import resolve_device

    try:
        # on a GPU it also applies make_deterministic here, where nothing trains: harmless, and
        # the CUBLAS_WORKSPACE_CONFIG the kernels inherit is the one they would set themselves
        resolve_device(name)
    except ValueError as exc:
        usable = ["auto", "cpu"]
        if torch.cuda.is_available():
            usable += ["cuda", *(f"cuda:{i}" for i in range(torch.cuda.device_count()))]
        raise ValueError(f"{exc}; valid here: {', '.join(usable)}") from exc


def variable_problems(args: argparse.Namespace) -> list[str]:
    """One line per unusable variable of ``make figures`` (none: all usable). Checked before the
    first notebook: a bad DEVICE or EXECUTOR would otherwise surface only in the traceback of
    the first notebook that trains, after the ones before it had run."""
    checks: list[tuple[str, str, str, Callable[[str], object]]] = [
        ("PROFILE", "--profile", args.profile, lambda v: require_choice("profile", v, PROFILES)),
        ("NB", "--only", args.only, check_selection),
        ("RERUN", "--rerun", args.rerun, lambda v: require_choice("RERUN", v, ("0", "1"))),
    ]
    for name, env, check in (
        ("EXECUTOR", EXECUTOR_VAR, check_executor),
        ("DEVICE", DEVICE_VAR, check_device),
        # the environment's overrides every notebook reads: a bad one would fail each notebook
        (PROFILE_VAR, PROFILE_VAR, lambda v: require_choice(PROFILE_VAR, v, PROFILES)),
        (BATCH_VAR, BATCH_VAR, check_batch),
    ):
        # unset or empty: the default (local, auto, the notebook's profile, the memory rule)
        if os.environ.get(env):
            checks.append((name, f"${env}", os.environ[env], check))
    problems = []
    for name, source, value, check in checks:
        try:
            check(value)
        except ValueError as exc:
            problems.append(f"{name}={value!r} ({source}): {exc}")
    return problems


class Failure(NamedTuple):
    """A notebook that raised: its last error line and where papermill left its output."""

    notebook: Path
    error: str
    output: Path


def last_error_line(exc: Exception) -> str:
    """``ValueError: ...``: the last line of a notebook's traceback, or of papermill's own error
    (a kernel that died or never started)."""
    from papermill.exceptions import PapermillExecutionError

    if isinstance(exc, PapermillExecutionError):
        name, value = exc.ename, exc.evalue
    else:
        name, value = type(exc).__name__, str(exc)
    lines = [line for line in value.splitlines() if line.strip()]
    return f"{name}: {lines[-1]}" if lines else name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--profile", default="cpu", help=f"one of {', '.join(PROFILES)}")
    parser.add_argument("--rerun", default="0", help="1: recompute cached training results")
    parser.add_argument("--only", default="", help="run the notebooks whose name starts with this")
    parser.add_argument(
        "--check", action="store_true", help="check the variables, run nothing (make figures)"
    )
    args = parser.parse_args()

    problems = variable_problems(args)
    if problems:
        print("make figures: no notebook was run; fix these first:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 2
    if args.check:
        return 0
    # smoke runs only check that the notebooks run: their executed copies go to a temporary
    # folder, removed at the end unless a notebook failed there (its partial output is the
    # place to look); the notebooks' own smoke results: aoi_fl.pipeline.notebook
    keeps = traits(args.profile).keeps_outputs
    scratch = None if keeps else Path(tempfile.mkdtemp(prefix="aoi-fl-smoke-"))
    notebooks = select(args.only)
    failures: list[Failure] = []
    try:
        failures = run_all(notebooks, args, scratch)
    finally:
        if scratch is not None and not failures:
            shutil.rmtree(scratch)
    if failures:
        print(
            f"make figures: {len(failures)} of {len(notebooks)} notebooks failed:",
            file=sys.stderr,
        )
        for failure in failures:
            print(f"  {failure.notebook.name}: {failure.error}", file=sys.stderr)
            written = failure.output if failure.output.exists() else "none written"
            print(f"    partial output: {written}", file=sys.stderr)
        return 1
    return 0


def run_all(notebooks: list[Path], args: argparse.Namespace, scratch: Path | None) -> list[Failure]:
    """Execute ``notebooks`` in order, into ``scratch`` if given, else in place; a failed one
    does not stop the rest (the ledger, last, still reports what the others produced).
    Returns the failures."""
    failures = []
    for nb in notebooks:
        start = time.perf_counter()
        out = (scratch / nb.name) if scratch else nb
        print(f"[{args.profile}] {nb.name} ...", flush=True)
        try:
            execute(nb, out, args.profile, args.rerun == "1")
        except Exception as exc:  # whatever stopped it, the next notebook runs
            failures.append(Failure(nb, last_error_line(exc), out))
            status = f"FAILED ({failures[-1].error})"
        else:
            status = "done"
        print(
            f"[{args.profile}] {nb.name} {status} in {time.perf_counter() - start:.1f} s",
            flush=True,
        )
    return failures


if __name__ == "__main__":
    sys.exit(main())
