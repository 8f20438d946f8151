"""The notebooks' setup call: printed profile, folders, and smoke folders that do not outlive the
kernel, whether it exits (papermill) or is killed (nbval)."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from aoi_fl.core.device import DEVICE_VAR
from aoi_fl.pipeline import notebook
from aoi_fl.pipeline.profiles import ENV_VAR

ROOT = Path(__file__).resolve().parents[2]


def leftovers(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.glob(f"{notebook.SMOKE_PREFIX}*"))


def wait_until_clean(tmp: Path, seconds: float = 15.0) -> list[str]:
    """The smoke folders still in ``tmp`` after waiting up to ``seconds`` (the watcher removes
    a killed process's folder a moment after the kill)."""
    deadline = time.monotonic() + seconds
    while leftovers(tmp) and time.monotonic() < deadline:
        time.sleep(0.1)
    return leftovers(tmp)


def child_env(tmp: Path) -> dict[str, str]:
    # this checkout's aoi_fl first, whatever the virtual environment was installed from
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": path, "MPLBACKEND": "agg"}


def test_setup_prints_the_profile_and_returns_the_folders(monkeypatch, capsys):
    monkeypatch.delenv(ENV_VAR, raising=False)
    env = notebook.setup("cpu", "n=100, m=15")
    assert capsys.readouterr().out == "profile: cpu; n=100, m=15\n"
    assert (env.profile, env.FIGURES, env.DATA, env.RESULTS) == (
        "cpu",
        "../figures",
        "../data",
        "../results",
    )
    assert (env.WORKERS, env.THREADS) == (2, 1)
    notebook.setup("paper")
    assert capsys.readouterr().out == "profile: paper\n"


@pytest.mark.skipif(torch.cuda.is_available(), reason="prints the CPU")
def test_a_training_notebook_prints_its_device(monkeypatch, capsys):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.delenv(DEVICE_VAR, raising=False)
    env = notebook.setup("cpu", training=True)
    assert capsys.readouterr().out == "profile: cpu\ndevice: cpu (auto)\n"
    assert env.DEVICE == "auto"
    monkeypatch.setenv(DEVICE_VAR, "cpu")
    assert notebook.setup("cpu", training=True).DEVICE == "cpu"
    assert capsys.readouterr().out == "profile: cpu\ndevice: cpu\n"
    monkeypatch.setenv(DEVICE_VAR, "cuda")
    with pytest.raises(ValueError, match="device 'cuda' was requested"):
        notebook.setup("cpu", training=True)


def test_setup_refuses_a_profile_the_environment_overrides(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "smoke")
    with pytest.raises(ValueError, match=r"got 'cpu' while \$AOI_FL_PROFILE selects 'smoke'"):
        notebook.setup("cpu")


@pytest.mark.slow
@pytest.mark.parametrize("ending", ["exit", "kill"])
def test_smoke_results_folder_is_made_on_use_and_removed_however_the_process_ends(tmp_path, ending):
    # "exit" is how papermill ends a kernel (atexit runs), "kill" how nbval does (SIGKILL)
    code = textwrap.dedent(
        f"""
        import os, signal, sys
        from aoi_fl.pipeline import notebook
        env = notebook.setup("smoke")
        print(len(os.listdir({str(tmp_path)!r})), flush=True)  # nothing made before use
        print(env.RESULTS, os.path.isdir(env.RESULTS), env.WORKERS, env.THREADS, flush=True)
        if {ending!r} == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    env = {**child_env(tmp_path), ENV_VAR: "smoke"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    lines = out.stdout.splitlines()
    assert lines[0] == "profile: smoke" and lines[1] == "0", out.stderr
    path, exists, workers, threads = lines[2].split()
    assert Path(path).parent == tmp_path and Path(path).name.startswith(notebook.SMOKE_PREFIX)
    assert (exists, workers, threads) == ("True", "1", "None")
    assert wait_until_clean(tmp_path) == []


@pytest.mark.slow
def test_a_smoke_notebook_under_nbval_leaves_no_temporary_folder(tmp_path):
    # 09 is the cheapest notebook that writes training results (about 35 s on 2 cores)
    env = {**child_env(tmp_path), ENV_VAR: "smoke", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax"]
    out = subprocess.run(
        [*cmd, "09_agnostic_vs_weighted.ipynb"],
        cwd=ROOT / "notebooks",
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stdout[-3000:]
    assert wait_until_clean(tmp_path) == []


def test_show_saves_outside_smoke_only_and_displays(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    shown = []
    monkeypatch.setattr(notebook.plt, "show", lambda: shown.append(True))
    notebook.NotebookSetup("smoke", FIGURES=str(tmp_path)).show(plt.figure(), "smoke_figure")
    assert shown == [True] and list(tmp_path.iterdir()) == []  # bug: smoke runs write figures
    notebook.NotebookSetup("cpu", FIGURES=str(tmp_path)).show(plt.figure(), "cpu_figure")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cpu_figure.pdf", "cpu_figure.png"]
    assert shown == [True, True]
    plt.close("all")


def test_print_table_formats_the_floats(capsys):
    import pandas as pd

    notebook.print_table(pd.DataFrame({"a": [0.123456]}), "{:.2f}", index=False)
    assert capsys.readouterr().out == "   a\n0.12\n"
