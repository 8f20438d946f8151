"""Round time of the AoI paper's MNIST setting on every device this machine has (issue 16).

The setting is the first configuration of the main MNIST panel (as in ``bench_round.py``):
McMahan's CNN, 100 IID clients, 15 selected per round, K = 5 local SGD steps of batch 50. Per
device (the CPU always, then every CUDA device PyTorch sees), the trainer is built with
``device=...``; one warm-up round is not timed, then ``--rounds`` training rounds (evaluation
switched off) and one evaluation of the 10,000 test images are. Reported: seconds per round,
seconds per evaluation, and both as a speed-up over the CPU measured in the same run.

Run: ``.venv/bin/python benchmarks/bench_devices.py [--rounds 3]`` (about 40 s on the 2-core
CPU machine, which has no GPU: then only the CPU line is printed).
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from aoi_fl.core.device import describe
from aoi_fl.evidence.aoi.experiments import panel_grid
from aoi_fl.pipeline.runs import build_trainer


def devices() -> list[str]:
    return ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]


def synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(name: str, rounds: int, data: str) -> tuple[str, float, float]:
    trainer = build_trainer(panel_grid("main_mnist", "cpu")[0], data, device=name)
    trainer._evaluate_initial_model = trainer._evaluate_after_round = lambda: None
    trainer.run_round()  # warm-up: first-touch allocations, kernel selection
    synchronise(trainer.device)
    start = time.perf_counter()
    for _ in range(rounds):
        trainer.run_round()
    synchronise(trainer.device)
    per_round = (time.perf_counter() - start) / rounds
    start = time.perf_counter()
    trainer.evaluate()
    synchronise(trainer.device)
    return describe(trainer.device), per_round, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", default="data")
    args = parser.parse_args()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, load {os.getloadavg()}"
    )
    rows = [measure(name, args.rounds, args.data) for name in devices()]
    _, cpu_round, cpu_eval = rows[0]
    for label, per_round, per_eval in rows:
        print(
            f"{label:40s} round {per_round:7.3f} s ({cpu_round / per_round:5.1f}x the CPU), "
            f"test evaluation {per_eval:6.3f} s ({cpu_eval / per_eval:5.1f}x)"
        )
    if len(rows) == 1:
        print("no GPU found: the CPU line is the only one")


if __name__ == "__main__":
    main()
