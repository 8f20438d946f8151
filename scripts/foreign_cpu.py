"""Run a command as if on another x86-64 CPU: every numeric library takes other kernels.

    python scripts/foreign_cpu.py COMMAND [ARGS...]

A stranger's CPU rounds float32 and float64 kernels differently from the machine that computed the
committed results (issue 26). This machine can imitate one: the environment below makes PyTorch's
own loops, oneDNN's convolutions, MKL, NumPy's SIMD loops and the OpenBLAS inside NumPy and SciPy
take other code paths than their defaults here. ``make foreign-cpu`` (part of ``make test``) runs
the CPU-sensitive tests this way; ``tests/test_foreign_cpu.py`` checks that these settings do
change torch's and NumPy's last bits, so that a pass means something.

The settings only name features to leave out or older kernels to use, so they run on any x86-64
CPU with AVX2 (OpenBLAS's Sandybridge kernels need AVX, which every such CPU has).
"""

from __future__ import annotations

import os
import sys

#: the environment of an imagined other CPU
SETTINGS: dict[str, str] = {
    # PyTorch's vectorised ATen loops (AVX2 / AVX-512 here) replaced by the portable ones
    "ATEN_CPU_CAPABILITY": "default",
    # oneDNN (convolutions): SSE4.1 kernels instead of AVX-512
    "ONEDNN_MAX_CPU_ISA": "SSE41",
    # MKL (PyTorch's BLAS): its SSE4.2 code path (no measurable change on this AMD machine, where
    # MKL already avoids its AVX-512 path; it matters on Intel CPUs)
    "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
    # NumPy's dispatched SIMD loops above its x86-64-v2 baseline (AVX2, FMA3, AVX-512) turned off
    "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
    # OpenBLAS (NumPy, SciPy): Sandybridge kernels, what a CPU without AVX2 gets
    "OPENBLAS_CORETYPE": "Sandybridge",
}


def foreign_environ(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with :data:`SETTINGS` in force."""
    return {**(os.environ if base is None else base), **SETTINGS}


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    os.execvpe(argv[0], argv, foreign_environ())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
