"""Execute the notebooks in order with papermill (the engine behind ``make figures``).

Outputs of the ``cpu`` and ``paper`` profiles are written back into ``notebooks/`` (committed, so a
reader sees every figure without running anything); a ``smoke`` run writes its executed copies to a
temporary folder. Papermill's timestamps and durations and the progress bars of training runs
are stripped afterwards, so re-running on unchanged code leaves every tracked file
byte-identical, whether the results were recomputed or read from the cache.

The kernels run with NumPy's and SciPy's CPU-dependent code paths pinned
(:func:`pin_numeric_code_paths`), so that another x86-64 machine computes the same last bits.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import papermill as pm

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
    pin_numeric_code_paths()
    declared = pm.inspect_notebook(str(nb))
    offered = {"profile": profile, "rerun": rerun}
    pm.execute_notebook(
        str(nb),
        str(out),
        parameters={k: v for k, v in offered.items() if k in declared},
        cwd=str(NOTEBOOKS),
        progress_bar=sys.stderr.isatty(),  # cells done, in the terminal only
        kernel_name="python3",
    )
    strip_volatile(out)


#: the claims ledger reads what the other notebooks' runs left in the cache: it runs last
LAST = "00_claims.ipynb"


def in_run_order(paths) -> list[Path]:
    """Notebooks by number, the claims ledger (00, listed first to readers) last."""
    return sorted(paths, key=lambda p: (p.name == LAST, p.name))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--profile", default="cpu", choices=("smoke", "cpu", "paper"))
    parser.add_argument(
        "--rerun", default="0", choices=("0", "1"), help="recompute cached training results"
    )
    parser.add_argument("--only", default="", help="run the notebooks whose name starts with this")
    args = parser.parse_args()

    notebooks = in_run_order(
        p for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb") if p.name.startswith(args.only)
    )
    if not notebooks:
        print(f"no notebook in {NOTEBOOKS} starts with {args.only!r}", file=sys.stderr)
        return 2
    # smoke runs only check that the notebooks run: their executed copies go to a temporary
    # folder that is removed at the end (the notebooks' own smoke results: aoi_fl.pipeline.notebook)
    smoke = args.profile == "smoke"
    with tempfile.TemporaryDirectory(prefix="aoi-fl-smoke-") if smoke else nullcontext() as tmp:
        run_all(notebooks, args, Path(tmp) if tmp else None)
    return 0


def run_all(notebooks: list[Path], args: argparse.Namespace, scratch: Path | None) -> None:
    """Execute ``notebooks`` in order; write into ``scratch`` if given, else in place."""
    for nb in notebooks:
        start = time.perf_counter()
        print(f"[{args.profile}] {nb.name} ...", flush=True)
        execute(nb, (scratch / nb.name) if scratch else nb, args.profile, args.rerun == "1")
        print(f"[{args.profile}] {nb.name} done in {time.perf_counter() - start:.1f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
