"""The foreign-CPU settings (``scripts/foreign_cpu.py``) really take other kernels here, so that
``make foreign-cpu`` passing says something about a stranger's CPU (issue 26)."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "foreign_cpu.py"
spec = importlib.util.spec_from_file_location("foreign_cpu", SCRIPT)
foreign_cpu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(foreign_cpu)

# a few results of each library's CPU-dispatched kernels, as exact bit patterns (hex floats)
PROBE = """
import json
import numpy as np, torch
torch.set_num_threads(1)
rng = np.random.default_rng(0)
a = rng.standard_normal(4096)
b = rng.standard_normal((64, 64))
g = torch.Generator().manual_seed(0)
x, w = torch.randn(8, 1, 28, 28, generator=g), torch.randn(4, 1, 5, 5, generator=g)
m1, m2 = torch.randn(64, 784, generator=g), torch.randn(784, 32, generator=g)
out = {
    "numpy loops (tanh)": np.tanh(a),
    "OpenBLAS (matmul)": b @ b,
    "torch (conv2d)": torch.nn.functional.conv2d(x, w, padding=2).double().numpy(),
    "torch (log_softmax of a matmul)": torch.log_softmax(m1 @ m2, 1).double().numpy(),
}
print(json.dumps({k: [float(v).hex() for v in np.ravel(arr)] for k, arr in out.items()}))
"""


def _probe(env: dict[str, str]) -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def _native_environ() -> dict[str, str]:
    # make figures' own pins (scripts/run_notebooks.py) are left out too: the CPU's defaults
    unset = set(foreign_cpu.SETTINGS)
    return {k: v for k, v in os.environ.items() if k not in unset}


def test_the_foreign_settings_change_the_last_bits_of_torch_and_numpy():
    native, foreign = _probe(_native_environ()), _probe(foreign_cpu.foreign_environ())
    changed = {k for k in native if native[k] != foreign[k]}
    assert {"torch (conv2d)", "torch (log_softmax of a matmul)"} <= changed, changed
    from numpy._core._multiarray_umath import __cpu_features__ as cpu

    if not cpu.get("AVX2"):
        pytest.skip("without AVX2 NumPy and OpenBLAS already run the kernels the settings name")
    assert {"numpy loops (tanh)", "OpenBLAS (matmul)"} <= changed, changed


def test_the_settings_are_environment_variables_of_the_libraries():
    assert set(foreign_cpu.SETTINGS) == {
        "ATEN_CPU_CAPABILITY",
        "ONEDNN_MAX_CPU_ISA",
        "MKL_ENABLE_INSTRUCTIONS",
        "NPY_DISABLE_CPU_FEATURES",
        "OPENBLAS_CORETYPE",
    }
    env = foreign_cpu.foreign_environ({"PATH": "/bin"})
    assert env["PATH"] == "/bin" and env["ATEN_CPU_CAPABILITY"] == "default"


def test_make_test_runs_the_cpu_sensitive_tests_under_the_foreign_settings():
    makefile = (ROOT / "Makefile").read_text()
    target = re.search(r"^foreign-cpu:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert target, "the Makefile has no foreign-cpu target"
    assert "scripts/foreign_cpu.py" in target.group(1)
    assert "-m cpu_sensitive" in target.group(1)
    test = re.search(r"^test:(.*)$", makefile, re.M)
    assert "foreign-cpu" in test.group(1).split()


def test_the_reproduction_tests_are_marked_cpu_sensitive():
    for path in ("tests/test_reproducible_notebooks.py", "tests/core/test_device_numbers.py"):
        assert "pytest.mark.cpu_sensitive" in (ROOT / path).read_text(), path
