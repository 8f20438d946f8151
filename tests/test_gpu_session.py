"""``scripts/gpu_session.py`` (make gpu-session): its refusal without CUDA, its arguments, its
list of panels, and its training step, tried on the CPU with the smoke profile's runs."""

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aoi_fl.evidence.aoi.experiments import REGIME_SEEDS, SPLITS, panel, panel_grid
from aoi_fl.pipeline import parts, runs

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_session.py"
DATA = ROOT / "data"
spec = importlib.util.spec_from_file_location("gpu_session", SCRIPT)
gpu_session = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_session)


def test_without_cuda_it_refuses_with_one_message_and_exit_code_2(tmp_path):
    summary = tmp_path / "summary.json"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--minutes", "1", "--summary", str(summary)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip() == gpu_session.NO_CUDA
    assert "torch.cuda.is_available() is False" in done.stderr
    assert not summary.exists()


@pytest.mark.parametrize("value", ["0", "-2", "-0.5", "eight", "nan", "inf", ""])
def test_a_bad_number_of_minutes_is_refused_by_name(value, capsys):
    with pytest.raises(SystemExit) as stop:
        gpu_session.parse_args(["--minutes", value])
    assert stop.value.code == 2
    assert "--minutes" in capsys.readouterr().err


def test_minutes_that_leave_no_time_after_the_margin_are_refused(capsys):
    with pytest.raises(SystemExit):
        gpu_session.parse_args(["--minutes", "0.4", "--margin", "30"])
    assert "--minutes" in capsys.readouterr().err
    args = gpu_session.parse_args(["--minutes", "8"])
    assert (args.minutes, args.tests_cap, args.bench_cap) == (8.0, 96.0, 144.0)


def test_the_order_is_well_formed_and_resolves_without_loading_data(monkeypatch):
    def no_data(*args, **kwargs):
        raise AssertionError("the order's configurations must not need the data")

    monkeypatch.setattr(parts, "load_bundle", no_data)
    monkeypatch.setattr(runs, "load_bundle", no_data)
    order = gpu_session.ORDER
    assert [e.name for e in order] == [
        "aoi_main_mnist",
        "aoi_power",
        "aoi_main_mnist_others",
        "aoi_fashion",
        "fedsum_long",
    ]
    for entry in order:
        configs = entry.configs()
        assert configs and entry.what, entry.name
        assert entry.timing in gpu_session.ROUND_SECONDS, entry.name
        keys = {runs.config_key(runs.resolve_config(c)) for c in configs}
        assert len(keys) == len(configs), f"{entry.name}: a run listed twice"
    main, power, others, fashion, fedsum = (e.configs() for e in order)
    # (a) Fig. 5's pair in the paper's regime, the seeds notebook 05 reads
    assert {c["sampler"]["name"] for c in main} == set(gpu_session.PAIR)
    assert {c["partition"]["name"] for c in main} == {"iid", "dirichlet"}
    assert len(main) == 2 * len(SPLITS) * gpu_session.REGIME_GPU_SEEDS
    assert gpu_session.REGIME_GPU_SEEDS <= REGIME_SEEDS
    assert all(c in panel_grid("main_mnist", "paper", seeds=range(30)) for c in main)
    # (b) the power panel: the paper profile's 30 paired seeds of the small CNN
    assert {c["model"]["name"] for c in power} == {"small_cnn"}
    assert {c["training"]["seed"] for c in power} == set(range(30))
    # (c) Fig. 5's other policies and (d) Fashion-MNIST, both with the paper's CNN
    assert not {c["sampler"]["name"] for c in others} & set(gpu_session.PAIR)
    assert len(others) == 2 * len(SPLITS) * panel("main_mnist", "paper")["seeds"]
    assert {c["dataset"]["name"] for c in fashion} == {"fashion_mnist"}
    assert {c["model"]["name"] for c in others + fashion} == {"mcmahan_cnn"}
    # (e) FedSUM's long panel at T = 2000 with the CNN, in the folder notebook 17 reads
    assert {c["training"]["rounds"] for c in fedsum} == {2000}
    assert {c["model"]["name"] for c in fedsum} == {"small_cnn"}
    assert order[4].folder == "full" and {e.folder for e in order[:4]} == {""}


def test_the_plan_counts_the_missing_runs_and_their_expected_time(tmp_path, capsys):
    rows = gpu_session.plan(str(tmp_path))  # an empty cache: every run missing
    for row, entry in zip(rows, gpu_session.ORDER, strict=True):
        configs = entry.configs()
        assert row["missing"] == row["runs"] == len(configs)
        assert row["rounds"] == sum(c["training"]["rounds"] for c in configs)
        seconds = row["rounds"] * gpu_session.ROUND_SECONDS[entry.timing]
        assert row["minutes"] == pytest.approx(seconds / 60, abs=0.051)  # rounded to 0.1
    assert gpu_session.main(["--plan", "--results-dir", str(tmp_path)]) == 0
    assert "aoi_fashion" in capsys.readouterr().out


def smoke_entry() -> "gpu_session.Entry":
    return gpu_session.Entry(
        "smoke", "the smoke power panel", "", lambda: panel_grid("power", "smoke")
    )


def session_args(tmp_path):
    return gpu_session.parse_args(["--results-dir", str(tmp_path / "cache"), "--data", str(DATA)])


def test_a_kind_of_batch_whose_bits_differ_trains_one_run_at_a_time(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(gpu_session, "bit_check", lambda configs, data: "history differs")
    monkeypatch.setattr(runs, "run_grid", lambda configs, **kw: calls.append((len(configs), kw)))
    checks = {}
    entry = smoke_entry()
    report = gpu_session.train_entry(entry, session_args(tmp_path), time.time() + 60, checks)
    assert [(n, kw["batch"], kw["device"]) for n, kw in calls] == [(8, 1, "cuda")]
    assert [result for _, result in checks.values()] == ["DIFFERENT: history differs"]
    assert report["trained_alone"] and report["left"] == 8


@pytest.mark.skipif(not (DATA / "MNIST").exists(), reason="no MNIST under data/ (make data)")
def test_the_training_step_checks_the_bits_and_trains_until_the_deadline(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_session, "DEVICE", "cpu")  # the session's steps, tried on the CPU
    args, entry, checks = session_args(tmp_path), smoke_entry(), {}
    late = gpu_session.train_entry(entry, args, time.time() - 1, checks)
    assert (late["trained"], late["left"], late["status"], checks) == (0, 8, "deadline", {})
    done = gpu_session.train_entry(entry, args, time.time() + 300, checks)
    assert (done["trained"], done["left"], done["status"]) == (8, 0, "complete")
    assert [result for _, result in checks.values()] == ["same bits"]
    again = gpu_session.train_entry(entry, args, time.time() + 300, checks)
    assert (again["cached_before"], again["trained"], again["status"]) == (8, 0, "complete")
