"""One session on a lent GPU: the CUDA tests, the GPU benchmark, then the most valuable missing
paper-profile runs until the time is up.

A machine with a GPU is lent to the project now and then for about 15 minutes (Python 3.12, torch,
no package registry, the project not installed). There, from the repository root::

    PYTHONPATH=. python3 scripts/gpu_session.py --minutes 8

and where the virtual environment exists (``make`` builds it)::

    make gpu-session MINUTES=8

Nothing beyond torch, NumPy, SciPy, tqdm and the project's own code is needed (pytest for step 2,
which is skipped with a message without it). Everything happens within ``--minutes`` of wall clock
from the start:

1. Without CUDA (``torch.cuda.is_available()`` false) it refuses: one message, exit code 2.
2. The CUDA tests, ``python -m pytest -q -x`` on :data:`TESTS` with ``AOI_FL_DEVICE=cuda``,
   capped at ``--tests-cap`` seconds: the ``grouped`` engine against the reference engines and a
   client's bits alone, with partners and in another order on CUDA (``test_engine_grouped.py``);
   the device names and records (``test_device.py``); and ``run_grid`` batching runs on the
   device ``$AOI_FL_DEVICE`` names and storing the bytes of the runs trained one at a time
   (``test_run_batch.py``, that test only). The other tests of ``test_run_batch.py`` (among them
   ``every_method``) and ``test_device_numbers.py`` train on an explicit ``"cpu"``, so they say
   nothing about CUDA and are left to ``make test``. Without pytest the step is skipped with a
   message; without hypothesis (which ``tests/conftest.py`` imports) the files run with
   ``--noconftest`` and ``test_run_batch.py`` (which imports it too) is left out. A failed test
   stops the session before any run is trained (``--train-anyway`` trains all the same).
3. The GPU part of ``benchmarks/bench_batch.py`` (``--gpu-only``), capped at ``--bench-cap``.
4. The runs of :data:`ORDER`, in that order, until ``--margin`` seconds before the end:
   (a) the AoI paper's Fig. 5 pair in its regime (the paper profile's main MNIST panel, Markov
   optimal and random on IID and Dirichlet(0.3)) at seeds 0-29 (``regime_grid``), which
   notebook 05 and the ledger's speed-up rows read; (b) the AoI power panel in the paper profile
   (the small CNN, Markov optimal against random, 30 paired seeds); (c) Fig. 5's other two
   policies in the paper profile (its 5 seeds); (d) the Fashion-MNIST panel with the paper's CNN
   (paper profile); (e) FedSUM's long-horizon panel in the paper profile (the small CNN, 9
   methods x P1-P3 x 3 seeds, T = 2000), whose full runs go to ``<cache>/full`` as notebook 17
   keeps them, with the summaries notebook 17 reads written to the cache when there is time for
   them. ``--plan`` prints what the queue still holds in the cache, with the time expected at
   :data:`ROUND_SECONDS` per round, and exits (no GPU needed). Runs already in
   the cache are skipped (``run_grid``). Before a panel trains, every kind of batch it will form
   (:func:`aoi_fl.pipeline.batching.batch_key`) is checked on this GPU: three of its runs, cut to
   two rounds, trained one at a time and together in the reverse order must give the same bits
   (histories and final models); the runs of a kind that fails train one at a time
   (``batch=1``) and the summary says so. Training is ``run_grid(..., device="cuda",
   deadline=...)``: at the deadline the running batches stop after their round, every
   unfinished run is checkpointed under ``<cache>/checkpoints`` (the next session resumes it
   when that folder is carried over), and the finished runs are in the cache.
5. A JSON summary goes to ``--summary`` (default ``build/gpu-session.json``): the tests' outcome,
   the benchmark's lines, the bit checks, and per panel the runs trained and left; the same is
   printed at the end. Exit code 0, or 1 when the CUDA tests failed.

With the default 8 minutes: the tests at most 96 s (``min(120 s, 20%)``), the benchmark at most
144 s (``min(180 s, 30%)``), training until 30 s before the end (at least 3.5 min).

``--copy-to DIR`` copies every file the session wrote or changed under the cache into DIR (same
relative paths), for a machine from which only one folder comes back. ``--batch`` caps the runs
per batch (default: ``run_grid``'s memory rule; a smaller batch finishes its first runs sooner
in a short session), ``--workers`` trains that many batches at once in processes of their own.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
#: the CUDA-relevant tests (step 2; the module docstring says why these)
TESTS = (
    "tests/core/test_engine_grouped.py",
    "tests/core/test_device.py",
    "tests/pipeline/test_run_batch.py::"
    "test_run_grid_batches_missing_runs_and_stores_the_bytes_of_runs_alone",
)
#: the test files that need hypothesis (besides tests/conftest.py)
NEEDS_HYPOTHESIS = ("tests/pipeline/test_run_batch.py",)
#: the profile of the panels trained
PROFILE = "paper"
#: the AoI paper's two compared policies (the samplers' names in the configurations)
PAIR = ("markov_optimal", "random")
#: where the runs train (the tests try the session's steps on the CPU)
DEVICE = "cuda"
#: the bit check: runs per kind of batch, and the rounds they are cut to
CHECK_RUNS, CHECK_ROUNDS = 3, 2
NO_CUDA = (
    "gpu_session: no CUDA device: torch.cuda.is_available() is False. This session runs on a "
    "machine with a GPU (PYTHONPATH=. python3 scripts/gpu_session.py --minutes 8)."
)


#: seconds a round of one run takes on the H200 the project was lent (torch 2.11), by model:
#: McMahan's CNN 0.086 s all in (32 runs of Fig. 5's pair, 98-210 rounds with their
#: evaluations, 406 s; one run alone trains a round in 72 ms, benchmarks/bench_devices.py);
#: FedSUM's long CNN 0.1675 s (33.5 s per 200 rounds, evaluations every 20 rounds with every
#: client's loss). The small CNN was not timed there: taken as McMahan's CNN, whose round is as
#: bound by kernel launches (an assumption, said so in the plan)
ROUND_SECONDS = {"mcmahan_cnn": 0.086, "fedsum_long": 0.1675, "small_cnn": 0.086}
#: Fig. 5's pair in the paper's regime: the seeds a GPU session completes (notebook 05 reads up
#: to aoi_fl.evidence.aoi.experiments.REGIME_SEEDS): 30 paired seeds bring the non-IID minimum
#: detectable effect from 3.9 rounds (7 seeds) to about 1.8
REGIME_GPU_SEEDS = 30


class Entry(NamedTuple):
    """A panel of :data:`ORDER`: its name, what it is, the folder under the cache its runs go to
    ("": the cache itself), its configurations, and the key of :data:`ROUND_SECONDS` that times a
    round of its runs."""

    name: str
    what: str
    folder: str
    configs: Callable[[], list[dict[str, Any]]]
    timing: str = "mcmahan_cnn"


def _aoi_main_mnist() -> list[dict[str, Any]]:
    from aoi_fl.evidence.aoi.experiments import regime_grid

    return regime_grid("main_mnist", seeds=REGIME_GPU_SEEDS)


def _aoi_main_mnist_others() -> list[dict[str, Any]]:
    from aoi_fl.evidence.aoi.experiments import panel_grid

    return [c for c in panel_grid("main_mnist", PROFILE) if c["sampler"]["name"] not in PAIR]


def _aoi_fashion() -> list[dict[str, Any]]:
    from aoi_fl.evidence.aoi.experiments import panel_grid

    return panel_grid("fashion", PROFILE)


def _aoi_power() -> list[dict[str, Any]]:
    from aoi_fl.evidence.aoi.experiments import panel_grid

    return [c for c in panel_grid("power", PROFILE) if c["sampler"]["name"] in PAIR]


def _fedsum_long() -> list[dict[str, Any]]:
    from aoi_fl.evidence.fedsum.experiments import plan

    return [p.config for p in plan("long", PROFILE)]


#: the missing runs worth a GPU most, most valuable first (module docstring, step 4)
ORDER: list[Entry] = [
    Entry(
        "aoi_main_mnist",
        "AoI paper Fig. 5 in the paper's regime (paper profile): McMahan's CNN, Markov optimal and "
        f"random, IID and Dirichlet(0.3), seeds 0-{REGIME_GPU_SEEDS - 1}",
        "",
        _aoi_main_mnist,
    ),
    Entry(
        "aoi_power",
        "AoI power panel (paper profile): small CNN, Markov optimal and random, IID and "
        "Dirichlet(0.3), 30 paired seeds",
        "",
        _aoi_power,
        "small_cnn",
    ),
    Entry(
        "aoi_main_mnist_others",
        "AoI paper Fig. 5's other policies (paper profile): McMahan's CNN, probabilistic and "
        "Markov non-optimal, IID and Dirichlet(0.3), the profile's 5 seeds",
        "",
        _aoi_main_mnist_others,
    ),
    Entry(
        "aoi_fashion",
        "AoI Fashion-MNIST panel with the paper's CNN (paper profile, the substitute for Figs "
        "6-7): the four policies, IID and Dirichlet(0.3), 5 seeds",
        "",
        _aoi_fashion,
    ),
    Entry(
        "fedsum_long",
        "FedSUM long-horizon panel (paper profile): small CNN, 9 methods x P1-P3 x 3 seeds, "
        "T = 2000",
        "full",
        _fedsum_long,
        "fedsum_long",
    ),
]


def plan(results_dir: str) -> list[dict[str, Any]]:
    """What :data:`ORDER` still holds in ``results_dir``: per panel the runs, the missing ones,
    their rounds and the expected GPU time at :data:`ROUND_SECONDS` (one run at a time; batches
    should do better, unmeasured). Reads the cache only."""
    from aoi_fl.pipeline.cache import ResultStore
    from aoi_fl.pipeline.runs import resolve_config

    rows = []
    for entry in ORDER:
        configs = [resolve_config(c) for c in entry.configs()]
        store = ResultStore(Path(results_dir) / entry.folder if entry.folder else results_dir)
        missing = [c for c in configs if not store.result_file(store.folder(c), c).exists()]
        rounds = sum(c["training"]["rounds"] for c in missing)
        seconds = rounds * ROUND_SECONDS[entry.timing]
        rows.append(
            {
                "name": entry.name,
                "runs": len(configs),
                "missing": len(missing),
                "rounds": rounds,
                "minutes": round(seconds / 60, 1),
                "timing": entry.timing,
            }
        )
    return rows


def print_plan(rows: list[dict[str, Any]]) -> None:
    print("the GPU queue (ORDER), expected time one run at a time on the H200 at ROUND_SECONDS:")
    for r in rows:
        assumed = " (round time assumed)" if r["timing"] == "small_cnn" else ""
        print(
            f"  {r['name']:22s} {r['missing']:4d} of {r['runs']:4d} runs missing, "
            f"{r['rounds']:7d} rounds, about {r['minutes']:6.1f} min{assumed}"
        )
    print(f"  in all about {sum(r['minutes'] for r in rows):.0f} min")


# ---------------------------------------------------------------------------------------------
# arguments


def _real(unit: str, name: str = "", *, positive: bool = False):
    """An argparse type: a finite number of ``unit``, at least 0 (``positive``: above 0)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{name}must be a number of {unit}, got {text!r}"
            ) from None
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            what = f"a positive number of {unit}" if positive else f"a number of {unit} >= 0"
            raise argparse.ArgumentTypeError(f"{name}must be {what}, got {text!r}")
        return value

    return parse


_minutes = _real("minutes", "--minutes ", positive=True)
_seconds = _real("seconds")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="gpu_session.py", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument(
        "--minutes", type=_minutes, default=8.0, help="the whole session's wall clock (default 8)"
    )
    parser.add_argument(
        "--margin",
        type=_seconds,
        default=30.0,
        help="seconds before the end at which training stops (default 30)",
    )
    parser.add_argument(
        "--results-dir",
        "--cache-dir",
        default="results",
        help="the results folder (default results)",
    )
    parser.add_argument("--data", default="data", help="the datasets' folder (default data)")
    parser.add_argument("--summary", default="build/gpu-session.json")
    parser.add_argument("--tests-cap", type=_seconds, default=None, help="default: min(120, 20%%)")
    parser.add_argument("--bench-cap", type=_seconds, default=None, help="default: min(180, 30%%)")
    parser.add_argument("--skip-tests", action="store_true")
    parser.add_argument("--skip-bench", action="store_true")
    parser.add_argument("--skip-check", action="store_true", help="no bit check before training")
    parser.add_argument("--train-anyway", action="store_true", help="train after failed tests")
    parser.add_argument("--batch", type=_positive, default=None, help="most runs per batch")
    parser.add_argument("--workers", type=_positive, default=1)
    parser.add_argument("--copy-to", default=None, help="copy what the session wrote here")
    parser.add_argument(
        "--plan", action="store_true", help="print what the queue holds and exit (no GPU needed)"
    )
    args = parser.parse_args(argv)
    total = args.minutes * 60
    if args.margin >= total:
        parser.error(
            f"--minutes {args.minutes:g} leaves no time for training before the --margin of "
            f"{args.margin:g} s"
        )
    args.tests_cap = min(120.0, 0.2 * total) if args.tests_cap is None else args.tests_cap
    args.bench_cap = min(180.0, 0.3 * total) if args.bench_cap is None else args.bench_cap
    return args


# ---------------------------------------------------------------------------------------------
# steps 2 and 3: commands with a time cap


def capped(command: list[str], cap: float, env: dict[str, str]) -> tuple[int | None, list[str]]:
    """(exit code, or None if it ran past ``cap`` seconds and was stopped; its output lines),
    the output echoed as it comes."""
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: stopped with everything it started
    )
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            print(line, end="", flush=True)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        rc: int | None = proc.wait(timeout=max(cap, 1.0))
    except subprocess.TimeoutExpired:
        rc = None
        for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
    reader.join(timeout=10)
    return rc, lines


def child_env(**extra: str) -> dict[str, str]:
    """This environment with the repository on PYTHONPATH (the project is not installed)."""
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), **extra}


def run_tests(cap: float) -> dict[str, Any]:
    if importlib.util.find_spec("pytest") is None:
        message = "pytest is not installed here: the CUDA tests are skipped"
        print(message)
        return {"status": "skipped", "why": message}
    tests, options, note = list(TESTS), ["-q", "-x", "-p", "no:cacheprovider"], None
    if importlib.util.find_spec("hypothesis") is None:
        tests = [t for t in tests if not t.startswith(NEEDS_HYPOTHESIS)]
        options.append("--noconftest")
        note = "hypothesis is not installed: --noconftest, test_run_batch.py left out"
        print(note)
    tests = [t for t in tests if (ROOT / t.split("::")[0]).exists()]
    command = [sys.executable, "-m", "pytest", *options, *tests]
    print(f"$ AOI_FL_DEVICE=cuda python {' '.join(command[1:])}  (cap {cap:.0f} s)", flush=True)
    start = time.monotonic()
    rc, lines = capped(command, cap, child_env(AOI_FL_DEVICE="cuda"))
    status = "timed out" if rc is None else {0: "passed", 5: "none collected"}.get(rc, "failed")
    out = {"status": status, "rc": rc, "seconds": round(time.monotonic() - start, 1)}
    out.update(tests=tests, tail=lines[-30:])
    if note:
        out["note"] = note
    return out


def run_bench(cap: float, data: str) -> dict[str, Any]:
    command = [sys.executable, "benchmarks/bench_batch.py", "--gpu-only", "--data", data]
    print(f"$ python {' '.join(command[1:])}  (cap {cap:.0f} s)", flush=True)
    start = time.monotonic()
    rc, lines = capped(command, cap, child_env())
    status = "timed out" if rc is None else ("done" if rc == 0 else "failed")
    return {
        "status": status,
        "rc": rc,
        "seconds": round(time.monotonic() - start, 1),
        "lines": lines,
    }


# ---------------------------------------------------------------------------------------------
# step 4: the bit check and the training


def _short(config: dict[str, Any], rounds: int) -> dict[str, Any]:
    out = copy.deepcopy(config)
    out["training"]["rounds"] = rounds
    return out


def same_bits(a: Any, b: Any) -> str | None:
    """None if trainers ``a`` and ``b`` hold the same run bit for bit, else what differs."""
    import torch

    if json.dumps(a.history, sort_keys=True) != json.dumps(b.history, sort_keys=True):
        keys = [k for k in a.history if a.history[k] != b.history.get(k)]
        return f"history differs in {keys}"
    pa, pb = a.reported_params(), b.reported_params()
    for k in pa:
        if not torch.equal(pa[k], pb[k]):
            return f"final model differs in {k}"
    return None


def bit_check(configs: list[dict[str, Any]], data: str) -> str | None:
    """Runs of one kind of batch on CUDA: each alone and all together (reversed order), cut to
    :data:`CHECK_ROUNDS` rounds; None if every run has the same bits both ways, else what
    differs."""
    from aoi_fl.core.batch import RunBatch
    from aoi_fl.pipeline.runs import build_trainer

    sample = [_short(c, CHECK_ROUNDS) for c in configs[:CHECK_RUNS]]
    alone = []
    for c in sample:
        trainer = build_trainer(c, data, DEVICE)
        trainer.run()
        alone.append(trainer)
    together = [build_trainer(c, data, DEVICE) for c in reversed(sample)]
    RunBatch(together).run()
    together.reverse()
    for i, (a, b) in enumerate(zip(alone, together, strict=True)):
        if (why := same_bits(a, b)) is not None:
            return f"run {i}: {why}"
    return None


def kinds(configs: list[dict[str, Any]]) -> dict[str, list[int]]:
    """The positions of ``configs`` per kind of batch (:func:`batching.batch_key` on CUDA)."""
    from aoi_fl.pipeline import batching
    from aoi_fl.pipeline.runs import resolve_config

    out: dict[str, list[int]] = {}
    for i, c in enumerate(configs):
        out.setdefault(batching.batch_key(resolve_config(c), DEVICE), []).append(i)
    return out


def _label(config: dict[str, Any]) -> str:
    t = config["training"]
    return f"{config['model']['name']}, {t.get('algorithm', {'name': 'fedavg'})['name']}"


def train_entry(
    entry: Entry,
    args: argparse.Namespace,
    deadline: float,
    checks: dict[str, tuple[str, str]],
) -> dict[str, Any]:
    """Train ``entry``'s missing runs until ``deadline`` (each kind of batch bit-checked
    first); what was done."""
    from aoi_fl.pipeline.runs import DeadlineReached, cached_results, run_grid

    start = time.time()
    configs = entry.configs()
    cache = str(Path(args.results_dir) / entry.folder) if entry.folder else args.results_dir
    missing = cached_results(configs, results_dir=cache)[1]
    report: dict[str, Any] = {"name": entry.name, "what": entry.what, "cache": cache}
    report.update(runs=len(configs), cached_before=len(configs) - missing, trained=0)
    print(f"\n== {entry.name}: {entry.what}\n   {len(configs)} runs, {missing} missing", flush=True)
    if not missing:
        return {**report, "left": 0, "status": "complete", "seconds": 0.0}
    alone: list[int] = []
    for key, members in kinds(configs).items():
        if args.skip_check:
            break
        if key not in checks:
            if time.time() >= deadline:
                break
            label = _label(configs[members[0]])
            try:
                why = bit_check([configs[i] for i in members], args.data)
            except Exception as exc:  # reported, and its runs train one at a time
                why = f"the check itself failed: {exc!r}"
            checks[key] = (label, "same bits" if why is None else f"DIFFERENT: {why}")
            print(f"   bit check, {label}: {checks[key][1]}", flush=True)
        if checks[key][1] != "same bits":
            alone.extend(members)
    trained = 0

    def count(i: int, result: Any) -> None:
        nonlocal trained
        trained += not result.cached

    status = "complete"
    parts = [(sorted(set(range(len(configs))) - set(alone)), args.batch), (sorted(alone), 1)]
    for members, batch in parts:
        if not members:
            continue
        if time.time() >= deadline:
            status = "deadline"
            break
        try:
            run_grid(
                [configs[i] for i in members],
                results_dir=cache,
                data_root=args.data,
                device=DEVICE,
                batch=batch,
                workers=args.workers,
                deadline=deadline,
                on_result=count,
            )
        except DeadlineReached as exc:
            print(f"   {exc}", flush=True)
            status = "deadline"
            break
    left = missing - trained
    if left and status == "complete":
        status = "deadline"
    report.update(trained=trained, left=left, status=status)
    report["seconds"] = round(time.time() - start, 1)
    if alone:
        report["trained_alone"] = "bit check failed: those runs trained one at a time"
    print(f"   trained {trained}, left {left} ({report['seconds']:.0f} s)", flush=True)
    return report


def fedsum_summaries(args: argparse.Namespace, end: float) -> str:
    """Notebook 17's summaries of the FedSUM long runs whose full runs are in the cache (about a
    second each), if the time left allows them."""
    from aoi_fl.evidence.fedsum import experiments as fx
    from aoi_fl.pipeline.cache import ResultStore
    from aoi_fl.pipeline.runs import resolve_config

    work = str(Path(args.results_dir) / "full")
    store = ResultStore(work)
    planned = [
        p for p in fx.plan("long", PROFILE) if store.load(resolve_config(p.config)) is not None
    ]
    todo = fx.cached_summaries(planned, args.results_dir)[1]
    if not todo:
        return "no new summaries to write"
    if time.time() + 2.0 * todo + 5 > end:
        return f"{todo} summaries not written (no time left): notebook 17 writes them from {work}"
    fx.run_planned(
        planned, results_dir=args.results_dir, work_dir=work, data_root=args.data, progress=False
    )
    return f"{todo} summaries written to {args.results_dir}"


# ---------------------------------------------------------------------------------------------


def files_under(folder: Path) -> dict[str, tuple[int, int]]:
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.stat().st_size)
        for p in folder.rglob("*")
        if p.is_file()
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for name in ("results_dir", "data", "summary", "copy_to"):  # the tests run from the root
        if getattr(args, name) is not None:
            setattr(args, name, os.path.abspath(getattr(args, name)))
    start = time.time()
    end = start + args.minutes * 60
    deadline = end - args.margin
    if args.plan:
        print_plan(plan(args.results_dir))
        return 0
    import torch

    if not torch.cuda.is_available():
        print(NO_CUDA, file=sys.stderr)
        return 2
    from aoi_fl.core.device import describe, resolve_device
    from aoi_fl.pipeline.runs import cached_results

    device = resolve_device("cuda")
    summary: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(start)),
        "minutes": args.minutes,
        "device": describe(device),
        "torch": torch.__version__,
        "python": sys.version.split()[0],
    }
    print(f"GPU session: {summary['device']}, torch {torch.__version__}, {args.minutes:g} min")

    def remaining() -> float:
        return deadline - time.time()

    if args.skip_tests:
        summary["tests"] = {"status": "skipped", "why": "--skip-tests"}
    else:
        summary["tests"] = run_tests(min(args.tests_cap, max(remaining(), 1.0)))
    if args.skip_bench:
        summary["benchmark"] = {"status": "skipped", "why": "--skip-bench"}
    elif remaining() > 10:
        summary["benchmark"] = run_bench(min(args.bench_cap, remaining()), args.data)
    else:
        summary["benchmark"] = {"status": "skipped", "why": "no time left"}

    failed = summary["tests"]["status"] == "failed"
    if failed and not args.train_anyway:
        print("\nthe CUDA tests failed: no run is trained (--train-anyway trains all the same)")
    cache = Path(args.results_dir)
    before = files_under(cache) if args.copy_to else {}
    entries: list[dict[str, Any]] = []
    checks: dict[str, tuple[str, str]] = {}
    for entry in ORDER:
        if failed and not args.train_anyway:
            status = "not trained: the CUDA tests failed"
        elif time.time() >= deadline:
            status = "not started: deadline"
        else:
            try:
                entries.append(train_entry(entry, args, deadline, checks))
                continue
            except Exception as exc:  # in the summary; the next panel may still train
                print(f"   {entry.name} stopped by an error: {exc!r}", flush=True)
                status = f"error: {exc!r}"
        configs = entry.configs()
        sub = str(cache / entry.folder) if entry.folder else args.results_dir
        missing = cached_results(configs, results_dir=sub)[1]
        entries.append(
            {"name": entry.name, "runs": len(configs), "trained": 0, "left": missing}
            | {"status": status}
        )
    if any(e["name"] == "fedsum_long" and e["trained"] for e in entries):
        summary["fedsum_summaries"] = fedsum_summaries(args, end)
    summary["bit_checks"] = [f"{label}: {result}" for label, result in checks.values()]
    summary["entries"] = entries
    summary["trained"] = sum(e["trained"] for e in entries)
    summary["left"] = sum(e["left"] for e in entries)
    summary["seconds"] = round(time.time() - start, 1)
    if args.copy_to:
        after = files_under(cache)
        changed = [p for p, stamp in after.items() if before.get(p) != stamp]
        for rel in changed:
            target = Path(args.copy_to) / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(cache / rel, target)
        summary["copied"] = f"{len(changed)} files to {args.copy_to}"
    path = Path(args.summary)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=1, default=str) + "\n")

    print(
        f"\nsession done in {summary['seconds']:.0f} s: tests {summary['tests']['status']}, "
        f"benchmark {summary['benchmark']['status']}, runs trained {summary['trained']}, "
        f"left {summary['left']} (of the panels in ORDER)"
    )
    for e in entries:
        print(f"  {e['name']:16s} trained {e['trained']:4d}, left {e['left']:4d}  {e['status']}")
    print(f"summary: {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
