"""One federated round on the CPU: aoi_fl's batched local training vs a per-client loop.

The round: 15 clients with 600 MNIST-shaped samples each (synthetic tensors), 5 local epochs
of mini-batch SGD with batch 50 (900 client steps, 45,000 samples). Compared, in one process:

- ``loop``: a plain sequential per-client PyTorch loop, as FL simulators train clients (load
  the global weights, ``torch.optim.SGD``, forward/backward/step per mini-batch), fed with
  tensor-indexed batches (the fastest such loop);
- ``loop+DataLoader``: the same loop fed by ``torch.utils.data.DataLoader`` over a
  ``TensorDataset`` (per-sample indexing and collation, the usual simulator data path);
- aoi_fl's engines (``aoi_fl.train.LocalTraining``): ``stacked`` with the automatic chunk
  (the default, ``"auto"``), ``stacked`` with all 15 clients in one chunk, ``vmap``
  (torch.func) with all 15 clients, and ``sequential`` (the reference path).

Reported: samples/s, the ratio to ``loop``, and achieved FLOP/s (forward + backward FLOPs of
the round counted by ``torch.utils.flop_counter``) as a fraction of a 4096^3 float32 matmul's
FLOP/s measured in the same run. The first two rows of each model run the full round; the
other rows run ``--extra-epochs`` epochs (rates are per sample, so they compare directly).

Run: ``.venv/bin/python benchmarks/bench_train.py [--threads 2] [--quick]`` (< 2 min on an
idle 2-core machine). Timings on a shared machine are noisy: the load average is printed.
"""

from __future__ import annotations

import argparse
import copy
import os
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.flop_counter import FlopCounterMode

from aoi_fl.data import TensorSplit
from aoi_fl.models import build_model
from aoi_fl.seeding import derived_seed
from aoi_fl.train import LocalSolver, LocalTraining, local_batches

CLIENTS, PER_CLIENT, BATCH, LR = 15, 600, 50, 0.05


def matmul_flops_per_s(n: int = 4096, repeats: int = 3) -> float:
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=gen), torch.randn(n, n, generator=gen)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n**3 / best


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def step_flops(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> int:
    """Forward + backward FLOPs of one mini-batch step of ``model``."""
    counter = FlopCounterMode(display=False)
    with counter:
        F.cross_entropy(model(x), y).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def loop_tensor_batches(model, split, schedules):
    """Per-client loop on the same mini-batches as aoi_fl; returns the clients' final params."""
    global_state = copy.deepcopy(model.state_dict())
    local = copy.deepcopy(model)
    finals = []
    for rows in schedules:
        local.load_state_dict(global_state)
        opt = torch.optim.SGD(local.parameters(), lr=LR)
        for row in rows:
            batch = torch.from_numpy(row)
            opt.zero_grad()
            F.cross_entropy(local(split.x[batch]), split.y[batch]).backward()
            opt.step()
        finals.append({k: v.detach().clone() for k, v in local.named_parameters()})
    return finals


def loop_dataloader(model, split, epochs):
    global_state = copy.deepcopy(model.state_dict())
    local = copy.deepcopy(model)
    for c in range(CLIENTS):
        part = slice(c * PER_CLIENT, (c + 1) * PER_CLIENT)
        gen = torch.Generator().manual_seed(derived_seed(0, "bench_loader", c))
        loader = DataLoader(
            TensorDataset(split.x[part], split.y[part]),
            batch_size=BATCH,
            shuffle=True,
            generator=gen,
        )
        local.load_state_dict(global_state)
        opt = torch.optim.SGD(local.parameters(), lr=LR)
        for _ in range(epochs):
            for x, y in loader:
                opt.zero_grad()
                F.cross_entropy(local(x), y).backward()
                opt.step()


def bench_model(name: str, epochs: int, extra_epochs: int, peak: float) -> dict[str, float]:
    model = build_model(name, seed=0)
    gen = torch.Generator().manual_seed(derived_seed(0, "bench_data"))
    x = torch.randn(CLIENTS * PER_CLIENT, 1, 28, 28, generator=gen)
    y = torch.randint(0, 10, (CLIENTS * PER_CLIENT,), generator=gen)
    split = TensorSplit(x, y)

    def schedules(e: int) -> list[np.ndarray]:
        return [
            c * PER_CLIENT + local_batches(0, 0, c, PER_CLIENT, e, BATCH) for c in range(CLIENTS)
        ]

    flops_per_step = step_flops(copy.deepcopy(model), x[:BATCH], y[:BATCH])
    global_params = {k: v.detach().clone() for k, v in model.named_parameters()}

    def engine(kind: str, chunk: int | None):
        local = LocalTraining(model, engine=kind, chunk=chunk)
        return lambda e: local(global_params, split, schedules(e), LR, LocalSolver(), {})

    auto = LocalTraining(model).chunk_size(split, BATCH)
    methods = [
        ("loop", epochs, lambda e: loop_tensor_batches(model, split, schedules(e))),
        (f"aoi_fl stacked, auto chunk={auto}", epochs, engine("stacked", None)),
        ("loop+DataLoader", extra_epochs, lambda e: loop_dataloader(model, split, e)),
        (f"aoi_fl stacked, chunk={CLIENTS}", extra_epochs, engine("stacked", CLIENTS)),
        (f"aoi_fl vmap, chunk={CLIENTS}", extra_epochs, engine("vmap", CLIENTS)),
        ("aoi_fl sequential", extra_epochs, engine("sequential", None)),
    ]
    # warm-up (one client step per path), then check that aoi_fl trains what the loop trains
    ref = loop_tensor_batches(model, split, [s[:2] for s in schedules(1)[:2]])
    got = LocalTraining(model)(
        global_params, split, [s[:2] for s in schedules(1)[:2]], LR, LocalSolver(), {}
    )
    diff = max(float((got[k][i] - ref[i][k]).abs().max()) for i in range(2) for k in got)
    print(
        f"\n{name}: {flops_per_step / BATCH / 1e6:.1f} MFLOP per "
        f"training sample; aoi_fl vs loop max |diff| after 2 steps = {diff:.1e}"
    )
    print(
        f"{'method':34s} {'epochs':>6s} {'seconds':>8s} {'samples/s':>10s} {'vs loop':>8s} "
        f"{'GFLOP/s':>8s} {'of matmul':>9s}"
    )
    rates = {}
    for label, e, fn in methods:
        seconds = _timed(lambda fn=fn, e=e: fn(e))
        samples = CLIENTS * PER_CLIENT * e
        rates[label] = samples / seconds
        flops = flops_per_step * CLIENTS * (PER_CLIENT // BATCH) * e / seconds
        print(
            f"{label:34s} {e:6d} {seconds:8.2f} {rates[label]:10.0f} "
            f"{rates[label] / rates['loop']:7.2f}x {flops / 1e9:8.1f} {flops / peak:8.0%}"
        )
    rates["_auto"] = rates[methods[1][0]]
    rates["_fraction"] = rates["_auto"] * flops_per_step / BATCH / peak
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--quick", action="store_true", help="1 epoch everywhere")
    parser.add_argument("--extra-epochs", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)  # an entry point: the only place threads are set
    epochs = 1 if args.quick else 5
    start = time.perf_counter()
    print(f"torch {torch.__version__}, {args.threads} threads, load average {os.getloadavg()}")
    peak = matmul_flops_per_s()
    print(f"4096^3 float32 matmul: {peak / 1e9:.1f} GFLOP/s")
    small = bench_model("small_cnn", epochs, args.extra_epochs, peak)
    big = bench_model("mcmahan_cnn", epochs, args.extra_epochs, peak)
    print("\nTargets (aoi_fl default engine vs loop):")
    ratio = small["_auto"] / small["loop"]
    print(f"  SmallCNN >= 3x the loop: {ratio:.2f}x -> {'met' if ratio >= 3 else 'NOT met'}")
    ratio = big["_auto"] / big["loop"]
    print(
        f"  McMahanCNN no slower than the loop: {ratio:.2f}x -> "
        f"{'met' if ratio >= 1 else 'NOT met'}"
    )
    frac = big["_fraction"]
    print(
        f"  McMahanCNN >= 70% of matmul FLOP/s: {frac:.0%} -> {'met' if frac >= 0.7 else 'NOT met'}"
    )
    print(f"load average {os.getloadavg()}; total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
