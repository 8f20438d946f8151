"""Runs per hour of many runs trained together (``run_grid(batch=R)``) against one at a time.

Batching (:class:`aoi_fl.core.batch.RunBatch`, cut by :mod:`aoi_fl.pipeline.batching`) trains R
runs as one computation: every round, all runs' selected clients go through one engine call, and
each run keeps the numbers it has alone. Measured here, in one process, with ratios between
measurements of the same run (never absolute assertions):

- CPU, the arena's screen
  (``aoi_fl.evidence.arena.experiments.config("uniform", "bernoulli", seed)``: softmax regression on
  Fashion-MNIST, 100 clients, 10 per round, the full 200 rounds): one at a time,
  ``run_grid(configs, batch=1)`` on ``--alone`` runs (seeds 0, 1, ...), against
  ``run_grid(configs, batch=R)`` on R = ``--runs`` runs (seeds 0 to R - 1), each call in a fresh
  temporary cache, so that everything a user's grid does is timed: building the trainers, training,
  the evaluations, storing the results. The one-at-a-time runs are split around the batched call
  (half before, half after), so that a load swing of the shared machine hits both sides alike.
  Reported: runs per hour of each and the ratio. Target (issue 39): >= 10x.
- CPU, the arena's small CNN (confirm tier, uniform under Bernoulli availability) and the AoI
  paper's CNN (McMahan's, ``aoi_fl.evidence.aoi.experiments.panel_grid("main_mnist", "cpu")``): the
  same comparison with the rounds cut to ``--cnn-rounds`` for both sides alike, reported as
  run-rounds per hour (runs x rounds / seconds). The fixed costs of a run (building it, the
  evaluation of the initial model, the final evaluation, the clients' accuracies or losses at the
  end) are included on both sides, so with few rounds they weigh more than in a full run.
- GPU (only when ``torch.cuda.is_available()``; otherwise one line says it was skipped and why):
  the paper CNN in the ``paper`` profile (``panel_grid("main_mnist", "paper")``, further seeds
  beyond its 40 runs) at R = 1, 8, 40 (``--gpu-runs``), ``--gpu-rounds`` rounds each, the engine
  ``auto`` (``grouped`` on CUDA), after an untimed warm-up run: run-rounds per hour and the ratio
  to R = 1. Then one batched round of the largest R (selection, the local training of all runs'
  clients, aggregation; evaluations off) as a share of the device's float32 peak: its FLOPs
  (``torch.utils.flop_counter`` as in ``benchmarks/flops.py``: the forward + backward FLOPs of one
  training sample times the samples the round trained; the padding of the grouped engine's
  chunks is not counted) over its seconds, against a large float32 matmul on the same device in
  the same run (``flops.matmul_flops_per_s``'s measure with a CUDA synchronisation; TF32 is off,
  as in training). Then FedSUM's long-horizon CNN (``aoi_fl.evidence.fedsum.experiments.plan("long",
  "paper")``: the paper's small CNN, T = 2000 rounds, 20 of 100 clients, K = 10 steps of batch 128,
  evaluation with every client's loss every 20 rounds): (i) one batch of R = ``--fedsum-runs``
  (54) FedSUM runs (P1-P3, further seeds; halved until it fits): seconds per round, seconds per
  evaluation, FLOP share; (ii) the panel's first two seeds, 54 runs (9 methods x P1-P3 x seeds
  0-1; the paper profile has a third seed, 81 runs in all), as ``run_grid`` cuts them (runs of
  one method share a batch: 9 batches of 6), every batch timed, and the projection of these 54
  runs x 2000 rounds: sum over the batches of 2000 x seconds per
  round + 101 x seconds per evaluation. Target: < 30 min on an H100-class GPU.

Every measurement prints the engine its runs used (the ``engine`` each cached result records, or
``trainer.local.engine``) and the device.

Measured on the idle 2-core machine (AMD EPYC, two torch threads, load average 0.5-1.9; no
GPU here, so the GPU part is unmeasured), ``--cpu-only``, 127 s in all:

- the screen: one at a time 1,287 runs/h, batched R = 32 2,673 runs/h: 2.1x, the 10x target NOT
  met. An earlier quiet run measured 3.5x with evaluation groups of 8 runs (``EVAL_GROUP``),
  which made a run alone slower (3.6 s against 2.6 s before batching); groups of 4 keep a run
  alone as fast as before (2.8 s).
- small CNN (R = 4, 2 rounds) 1.0x; McMahan's CNN (R = 2, 2 rounds) 1.0x: on a CPU their
  convolutions fill the cores one client at a time already.
- Where a batched screen run's time goes (R = 32, phases timed inside ``RunBatch``, 0.95 s a
  run): the clients' local steps 0.40 s (2,000 clients of 5 steps; per-client products of 32 x
  784 by 784 x 10, unchanged so that results keep their bits), the test evaluations 0.34 s (201
  of 10,000 images, 31.6 GFLOP a run, about half of the 180 GFLOP/s a large matmul reaches
  here), the clients' mini-batch schedules 0.09 s (a NumPy generator per client and round),
  aggregation and records 0.05 s, the clients' accuracies at the end 0.04 s. The evaluation at
  the matmul's peak alone would take 0.18 s, a tenth of a run trained alone: 10x is out of reach
  on this CPU for this configuration, whatever the batching.

Run: ``.venv/bin/python benchmarks/bench_batch.py [--runs 32] [--alone 2] [--cnn-runs 4]
[--paper-runs 2] [--cnn-alone 1] [--cnn-rounds 2] [--threads N] [--cpu-only | --gpu-only]
[--gpu-runs 1 8 40] [--gpu-rounds 5] [--fedsum-runs 54]`` (about 2.5 min on the 2-core machine
at load average 1.5; the CPU part is skipped with ``--gpu-only``, which ``scripts/gpu_session.py``
runs, time capped; ``--device cpu`` tries the GPU part's code on the CPU). ``--threads`` sets
torch's thread count (default: as the user has it). The load average is printed.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import torch
from flops import matmul_flops_per_s, step_flops, timed, timed_value

from aoi_fl.core.batch import RunBatch
from aoi_fl.core.device import describe, resolve_device
from aoi_fl.core.models import build_model
from aoi_fl.evidence.aoi.experiments import panel_grid
from aoi_fl.evidence.arena import experiments as arena
from aoi_fl.evidence.fedsum import experiments as fx
from aoi_fl.pipeline import runs
from aoi_fl.pipeline.cache import ResultStore

#: issue 39's target for the arena screen on the CPU: batched runs per hour over one at a time
SCREEN_TARGET = 10.0
#: FedSUM's long panel: its 54 runs (9 methods x P1-P3 x 2 seeds) at T = 2000, in minutes
FEDSUM_TARGET_MIN = 30.0
FEDSUM_SEEDS = 2


# ---------------------------------------------------------------------------------------------
# configurations


def with_rounds(configs: Sequence[dict], rounds: int | None) -> list[dict]:
    """Copies of ``configs`` cut to ``rounds`` rounds (None: as they are)."""
    out = [copy.deepcopy(c) for c in configs]
    if rounds is not None:
        for c in out:
            c["training"]["rounds"] = rounds
    return out


def reseeded(config: dict, seed: int) -> dict:
    """``config`` with another seed in every stream (partition, model, sampler, training, and
    availability if any), as the experiment modules build a further seed."""
    out = copy.deepcopy(config)
    for section in ("partition", "model", "sampler", "training", "availability"):
        if section in out and "seed" in out[section]:
            out[section]["seed"] = seed
    return out


def screen_configs(count: int) -> list[dict]:
    return [arena.config("uniform", "bernoulli", s) for s in range(count)]


def small_cnn_configs(count: int) -> list[dict]:
    first = arena.CONFIRM_SEED0
    return [arena.config("uniform", "bernoulli", first + s, tier="confirm") for s in range(count)]


def paper_cnn_configs(count: int, profile: str) -> list[dict]:
    """The first ``count`` runs of the main MNIST panel, further seeds where it has too few."""
    per_seed = len(panel_grid("main_mnist", profile, seeds=[0]))
    return panel_grid("main_mnist", profile, seeds=range(-(-count // per_seed)))[:count]


# ---------------------------------------------------------------------------------------------
# measurements through run_grid


def grid_seconds(
    configs: list[dict], batch: int, device: str | None, data: str
) -> tuple[float, str]:
    """(seconds of ``run_grid(configs, batch=batch)`` in a fresh cache, the engine recorded)."""
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as cache:
        seconds, results = timed_value(
            lambda: runs.run_grid(
                configs,
                results_dir=cache,
                batch=batch,
                device=device,
                data_root=data,
                progress=False,
            )
        )
        hit = ResultStore(cache).load(results[0].config)
    engine = "?" if hit is None else str(hit[0].get("engine", "not recorded"))
    return seconds, f"engine {engine}, {results[0].device}"


def compare(
    label: str,
    alone: list[dict],
    batched: list[dict],
    unit: str,
    rounds: int,
    device: str | None,
    data: str,
) -> float:
    """One at a time (split around the batched call) against one batched call; prints the
    table, returns the ratio of the rates. ``unit`` "runs" or "run-rounds" (x ``rounds``)."""
    runs.client_sizes(batched[0], data)  # the dataset read before anything is timed
    half = (len(alone) + 1) // 2
    before, after = alone[:half], alone[half:]
    alone_s = 0.0
    for c in before:
        seconds, alone_engine = grid_seconds([c], 1, device, data)
        alone_s += seconds
    batched_s, batched_engine = grid_seconds(batched, len(batched), device, data)
    for c in after:
        alone_s += grid_seconds([c], 1, device, data)[0]
    per = rounds if unit == "run-rounds" else 1
    alone_rate = len(alone) * per / alone_s * 3600
    batched_rate = len(batched) * per / batched_s * 3600
    print(f"{label}")
    print(
        f"  one at a time  {len(alone):3d} runs {alone_s:8.1f} s  {alone_rate:10.0f} {unit}/h  "
        f"({alone_engine})"
    )
    print(
        f"  batched R={len(batched):<3d} {len(batched):3d} runs {batched_s:8.1f} s  "
        f"{batched_rate:10.0f} {unit}/h  ({batched_engine})"
    )
    ratio = batched_rate / alone_rate
    print(f"  ratio {ratio:.1f}x", flush=True)
    return ratio


def cpu_part(args: argparse.Namespace) -> None:
    print(f"\nCPU: {torch.get_num_threads()} torch threads, load average {os.getloadavg()}")
    configs = screen_configs(max(args.runs, args.alone))
    ratio = compare(
        f"arena screen: softmax regression, Fashion-MNIST, uniform under bernoulli, "
        f"{configs[0]['training']['rounds']} rounds",
        configs[: args.alone],
        configs[: args.runs],
        "runs",
        configs[0]["training"]["rounds"],
        "cpu",
        args.data,
    )
    verdict = "met" if ratio >= SCREEN_TARGET else "NOT met"
    print(f"  target >= {SCREEN_TARGET:.0f}x (issue 39): {verdict}")
    rounds = args.cnn_rounds
    for label, configs in (
        ("arena confirm tier: small CNN, Fashion-MNIST", small_cnn_configs(args.cnn_runs)),
        (
            "AoI main MNIST panel (cpu profile): McMahan's CNN",
            paper_cnn_configs(args.paper_runs, "cpu"),
        ),
    ):
        short = with_rounds(configs, rounds)
        compare(
            f"{label}, {rounds} rounds (fixed per-run costs on both sides)",
            short[: args.cnn_alone],
            short,
            "run-rounds",
            rounds,
            "cpu",
            args.data,
        )
    print(f"load average {os.getloadavg()}")


# ---------------------------------------------------------------------------------------------
# the GPU part: batches built by hand, rounds timed without evaluations


def synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_rate(device: torch.device, n: int = 8192, repeats: int = 5) -> float:
    """FLOP/s of an (n x n) @ (n x n) float32 matmul on ``device``, best of ``repeats`` after a
    warm-up (``flops.matmul_flops_per_s`` on the CPU)."""
    if device.type == "cpu":
        return matmul_flops_per_s()
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, generator=gen, device=device)
    b = torch.randn(n, n, generator=gen, device=device)

    def product() -> None:
        a @ b
        synchronise(device)

    product()
    best = min(timed(product) for _ in range(repeats))
    return 2 * n**3 / best


def built_batch(configs: Sequence[dict], data: str, device: torch.device) -> RunBatch:
    """A :class:`RunBatch` of ``configs`` whose trainers skip the initial evaluation; each shares
    the first one's samples as soon as it is built (one copy of the dataset on the device)."""
    trainers = []
    for c in configs:
        trainer = runs.build_trainer(c, data, str(device))
        if trainers:
            lead = trainers[0].data
            trainer.data = dataclasses.replace(trainer.data, train=lead.train, test=lead.test)
        trainer._evaluate_initial_model = lambda: None  # the timed rounds train only
        trainers.append(trainer)
    return RunBatch(trainers)


def timed_rounds(batch: RunBatch, rounds: int) -> tuple[float, float]:
    """(seconds per round, training samples per round) of ``rounds`` rounds of ``batch``: every
    run's selection, local training (one engine call) and aggregation, no evaluation."""
    synchronise(batch.device)
    samples = 0
    start = time.perf_counter()
    for _ in range(rounds):
        works = {i: t.begin_round() for i, t in enumerate(batch.trainers)}
        samples += sum(int((s >= 0).sum()) for w in works.values() for s in w.schedules)
        for i, (params, state) in batch._train_together(works).items():
            batch.trainers[i].end_round(works[i], params, state)
    synchronise(batch.device)
    return (time.perf_counter() - start) / rounds, samples / rounds


def timed_evaluation(batch: RunBatch) -> float:
    """Seconds of one scheduled evaluation of every run of ``batch`` (the test set, read once for
    all, and each run's client losses), after an untimed one."""

    def evaluation() -> None:
        batch._evaluate(list(range(len(batch.trainers))))
        for trainer in batch.trainers:
            if trainer.settings.client_loss_samples:
                trainer.client_losses()
        synchronise(batch.device)

    evaluation()
    return timed(evaluation)


def flops_per_sample(config: dict, trainer: Any) -> float:
    """Forward + backward FLOPs of one training sample of ``config``'s model (on the CPU)."""
    spec = dict(config["model"])
    model = build_model(spec.pop("name"), **spec)
    batch = trainer.settings.batch_size
    x = torch.zeros(batch, *trainer.data.train.x.shape[1:])
    y = torch.zeros(batch, dtype=torch.long)
    return step_flops(model, x, y) / batch


def evaluations_per_run(settings: Any) -> int:
    """Scheduled evaluations of a run: the initial model, every ``eval_every`` rounds, the end."""
    rounds, every = settings.rounds, settings.eval_every
    return 1 + rounds // every + (rounds % every != 0)


def measured_batch(
    configs: Sequence[dict], data: str, device: torch.device, rounds: int
) -> dict[str, Any]:
    """Seconds per round and per evaluation of ``configs`` as one batch, and what the round
    trained (after one untimed round)."""
    batch = built_batch(configs, data, device)
    try:
        timed_rounds(batch, 1)
        per_round, samples = timed_rounds(batch, rounds)
        per_eval = timed_evaluation(batch)
        lead = batch.trainers[0]
        return {
            "runs": len(configs),
            "round_s": per_round,
            "eval_s": per_eval,
            "samples": samples,
            "flops": flops_per_sample(configs[0], lead) * samples,
            "engine": lead.local.engine,
            "settings": lead.settings,
        }
    finally:
        del batch
        if device.type == "cuda":
            torch.cuda.empty_cache()


def largest_fitting(
    configs: list[dict], data: str, device: torch.device, rounds: int
) -> dict[str, Any]:
    """:func:`measured_batch` of ``configs``, halved until the batch fits in memory."""
    while True:
        try:
            return measured_batch(configs, data, device, rounds)
        except torch.OutOfMemoryError:
            if len(configs) == 1:
                raise
            print(f"  R = {len(configs)} does not fit; halving", flush=True)
            configs = configs[: len(configs) // 2]
            if device.type == "cuda":
                torch.cuda.empty_cache()


def gpu_part(args: argparse.Namespace) -> None:
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(
            "\nGPU part skipped: torch.cuda.is_available() is False (no CUDA device visible to "
            f"torch {torch.__version__}); it runs on a machine with one"
        )
        return
    device = resolve_device(args.device)  # on CUDA: the deterministic settings of training
    peak = matmul_rate(device)
    print(
        f"\nGPU part on {describe(device)}, torch {torch.__version__}: float32 matmul "
        f"{peak / 1e12:.2f} TFLOP/s (TF32 off, as in training)",
        flush=True,
    )

    # the paper CNN: R = 1, 8, 40 through run_grid
    rounds = args.gpu_rounds
    configs = with_rounds(paper_cnn_configs(max(args.gpu_runs), "paper"), rounds)
    grid_seconds(with_rounds(configs[:1], 1), 1, str(device), args.data)  # warm-up
    print(f"AoI main MNIST panel (paper profile), McMahan's CNN, {rounds} rounds per run:")
    base = None
    for r in args.gpu_runs:
        seconds, engine = grid_seconds(configs[:r], r, str(device), args.data)
        rate = r * rounds / seconds * 3600
        base = rate if base is None else base
        print(
            f"  R = {r:3d}: {seconds:7.2f} s, {rate:10.0f} run-rounds/h, "
            f"{rate / base:5.1f}x R = {args.gpu_runs[0]} ({engine})",
            flush=True,
        )
    top = measured_batch(configs[: max(args.gpu_runs)], args.data, device, rounds)
    share = top["flops"] / top["round_s"] / peak
    print(
        f"  one batched round, R = {top['runs']}: {top['round_s']:.3f} s, "
        f"{top['flops'] / top['round_s'] / 1e12:.2f} TFLOP/s = {share:.0%} of the matmul "
        f"({top['engine']})",
        flush=True,
    )

    # FedSUM's long CNN panel
    long = fx.plan("long", "paper")
    templates = [p.config for p in long if p.algorithm == "fedsum" and p.seed == 0]
    single = [reseeded(templates[i % len(templates)], i // len(templates)) for i in range(54)]
    single = single[: args.fedsum_runs]
    horizon = long[0].config["training"]["rounds"]
    print(
        f"FedSUM long panel (paper profile): small CNN, T = {horizon}, evaluation every "
        f"{long[0].config['training']['eval_every']} rounds with every client's loss:"
    )
    one = largest_fitting(single, args.data, device, rounds)
    evals = evaluations_per_run(one["settings"])
    share = one["flops"] / one["round_s"] / peak
    project = (horizon * one["round_s"] + evals * one["eval_s"]) / 60
    print(
        f"  (i) one batch of R = {one['runs']} FedSUM runs: {one['round_s']:.3f} s per round, "
        f"{one['eval_s']:.2f} s per evaluation, {share:.0%} of the matmul ({one['engine']}); "
        f"{one['runs']} runs x {horizon} rounds: {project:.1f} min",
        flush=True,
    )
    panel = [p.config for p in long if p.seed < FEDSUM_SEEDS]
    resolved = [runs.resolve_config(c) for c in panel]
    groups = runs._batches(list(range(len(panel))), resolved, [str(device)] * len(panel), None)
    total = 0.0
    for group in groups:
        m = measured_batch([panel[i] for i in group], args.data, device, rounds)
        minutes = (horizon * m["round_s"] + evaluations_per_run(m["settings"]) * m["eval_s"]) / 60
        total += minutes
        method = panel[group[0]]["training"]["algorithm"]["name"]
        print(
            f"  (ii) {method:10s} R = {m['runs']:2d}: {m['round_s']:.3f} s per round, "
            f"{m['eval_s']:.2f} s per evaluation ({m['engine']}): {minutes:.1f} min",
            flush=True,
        )
    verdict = "met" if total < FEDSUM_TARGET_MIN else "NOT met"
    print(
        f"  projection, the panel's {len(panel)} runs x {horizon} rounds in {len(groups)} "
        f"batches one after another: {total:.1f} min (target < {FEDSUM_TARGET_MIN:.0f} min on an "
        f"H100-class GPU, here {describe(device)}: {verdict})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=32, help="R of the batched arena screen")
    parser.add_argument("--alone", type=int, default=2, help="screen runs trained one at a time")
    parser.add_argument("--cnn-runs", type=int, default=4, help="R of the batched small CNN")
    parser.add_argument("--paper-runs", type=int, default=2, help="R of the batched paper CNN")
    parser.add_argument("--cnn-alone", type=int, default=1, help="CNN runs one at a time")
    parser.add_argument("--cnn-rounds", type=int, default=2, help="rounds of each CNN run")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: as is)")
    parser.add_argument("--gpu-runs", type=int, nargs="+", default=[1, 8, 40])
    parser.add_argument("--gpu-rounds", type=int, default=5, help="timed rounds on the GPU")
    parser.add_argument("--fedsum-runs", type=int, default=54, help="R of FedSUM's one batch")
    parser.add_argument(
        "--device", default="cuda", help="the GPU part's device (cpu: try its code path here)"
    )
    parser.add_argument("--data", default="data")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--cpu-only", action="store_true")
    only.add_argument("--gpu-only", action="store_true")
    args = parser.parse_args()
    for name in (
        "runs",
        "alone",
        "cnn_runs",
        "paper_runs",
        "cnn_alone",
        "cnn_rounds",
        "gpu_rounds",
    ):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if min(args.gpu_runs) < 1 or args.fedsum_runs < 1:
        parser.error("--gpu-runs and --fedsum-runs must be at least 1")
    if args.threads is not None:
        torch.set_num_threads(args.threads)  # an entry point: the only place threads are set
    start = time.perf_counter()
    print(f"torch {torch.__version__}, load average {os.getloadavg()}")
    if not args.gpu_only:
        cpu_part(args)
    if not args.cpu_only:
        gpu_part(args)
    print(f"total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
