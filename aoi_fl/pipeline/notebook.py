"""The setup block every notebook runs first: one call instead of a copied block.

``setup(profile)`` applies the plotting style, prints the profile and returns the folders and the
parallelism the notebook uses. In the ``smoke`` profile (the tests) training results go to a
throw-away folder that is removed when the kernel ends, so that test runs leave nothing behind
in the system's temporary directory::

    profile = resolve_profile(profile)
    env = notebook.setup(profile, f"rounds {rounds}", display_width=140)
    runs.run_grid(configs, results_dir=env.RESULTS, data_root=env.DATA, workers=env.WORKERS, ...)

Paths are relative to ``notebooks/``, where every notebook runs (papermill, nbval, Jupyter).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from functools import cached_property

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from aoi_fl.core.device import describe, requested_device, resolve_device
from aoi_fl.pipeline import plotting
from aoi_fl.pipeline.profiles import ENV_VAR, resolve_profile, traits

SMOKE_PREFIX = "aoi-fl-smoke-"
#: where figures go instead of ``../figures`` (the reproducibility test writes to a temporary
#: folder and compares with the committed figures)
FIGURES_VAR = "AOI_FL_FIGURES"

# Removes a folder once every write end of the pipe on file descriptor argv[1] is closed, that
# is once the process that made the folder has ended, however it ended. Run with -I -S: it needs
# the standard library only and must not depend on the notebook's environment.
_WATCHER = """\
import os, shutil, sys
fd = int(sys.argv[1])
while os.read(fd, 4096):
    pass
shutil.rmtree(sys.argv[2], ignore_errors=True)
"""

# (watcher process, write end) per folder: kept open for as long as this process lives
_WATCHERS: list[tuple[subprocess.Popen, int]] = []


def throwaway_folder(prefix: str = SMOKE_PREFIX) -> str:
    """A new temporary folder (under ``$TMPDIR``) that is removed when this process ends.

    Two mechanisms, because a notebook kernel ends in two ways. papermill asks the kernel to shut
    down, so the interpreter exits normally and the ``atexit`` handler removes the folder. nbval
    kills the kernel (SIGKILL to its process group, ``shutdown_kernel(now=True)``), which runs no
    handler; for that case a small watcher process in its own session holds the read end of a
    pipe whose only write end this process keeps: when this process dies, the kernel closes the
    write end, the watcher reads end-of-file and removes the folder.
    """
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    read_end, write_end = os.pipe()
    try:
        watcher = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHER, str(read_end), path],
            pass_fds=(read_end,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # outside the kernel's process group, which nbval kills
        )
    finally:
        os.close(read_end)
    _WATCHERS.append((watcher, write_end))
    return path


@dataclass(frozen=True)
class NotebookSetup:
    """What :func:`setup` returns: the resolved profile, folders and parallelism of a notebook.

    ``FIGURES`` is ``../figures`` unless ``$AOI_FL_FIGURES`` names another folder.

    ``RESULTS`` is the result cache: ``../results`` (committed) in the ``cpu`` and ``paper``
    profiles; in ``smoke`` a throw-away folder, made on first use only (theory notebooks never
    touch it). ``WORKERS`` worker processes of ``THREADS`` threads each train the runs: two
    single-threaded workers train small models faster than one two-threaded process on a 2-core
    machine; smoke runs use one worker and leave the thread setting alone.
    """

    profile: str
    #: the device name training runs use (``$AOI_FL_DEVICE`` or ``auto``), for a notebook that
    #: trains (``setup(..., training=True)``); None otherwise
    DEVICE: str | None = None
    FIGURES: str = field(default_factory=lambda: os.environ.get(FIGURES_VAR) or "../figures")
    DATA: str = "../data"

    @property
    def WORKERS(self) -> int:
        return traits(self.profile).workers

    @property
    def THREADS(self) -> int | None:
        return None if self.WORKERS == 1 else 1

    @property
    def PROGRESS(self) -> bool:
        """Whether training shows progress bars (the profile's ``progress`` trait)."""
        return traits(self.profile).progress

    def show(self, fig: Figure, name: str) -> None:
        """Save ``fig`` as ``name`` under :attr:`FIGURES` (PDF and PNG stamped with the profile;
        nothing in ``smoke``: :func:`~aoi_fl.pipeline.plotting.save_figure`) and display it."""
        plotting.save_figure(fig, name, self.profile, self.FIGURES)
        plt.show()

    @cached_property
    def RESULTS(self) -> str:
        # a profile that keeps no outputs (smoke: the tests) never writes into results/
        return "../results" if traits(self.profile).keeps_outputs else throwaway_folder()


def setup(
    profile: str,
    details: str = "",
    *,
    display_width: int | None = None,
    training: bool = False,
) -> NotebookSetup:
    """Apply the plotting style, print ``profile: <profile>[; details]`` and return the setup.

    A notebook that trains passes ``training=True``: it also prints the device its missing runs
    would train on (:mod:`aoi_fl.core.device`; results read from the cache keep the device
    that computed them, :attr:`ExperimentResult.device`).

    ``profile`` must already be resolved (``profile = resolve_profile(profile)``): the notebook
    keeps using its own ``profile`` variable, and an unresolved one would let a ``cpu`` notebook
    under ``AOI_FL_PROFILE=smoke`` write figures. ``display_width`` sets pandas' line width.
    """
    resolved = resolve_profile(profile)
    if resolved != profile:
        raise ValueError(
            f"profile must be the resolved profile, got {profile!r} while ${ENV_VAR} selects "
            f"{resolved!r}; call profile = resolve_profile(profile) first"
        )
    plotting.apply_style()
    if display_width is not None:
        pd.set_option("display.width", display_width)
    print(f"profile: {profile}" + (f"; {details}" if details else ""))
    if not training:
        return NotebookSetup(profile)
    device = requested_device()
    print(f"device: {describe(resolve_device(device))}" + ("" if device != "auto" else " (auto)"))
    return NotebookSetup(profile, DEVICE=device)


def print_table(table: pd.DataFrame, fmt: str = "{:.4f}", *, index: bool = True) -> None:
    """Print ``table`` with its floats as ``fmt`` (a ``str.format`` pattern): how every notebook
    shows a table in plain text, so that the saved outputs are diffable."""
    print(table.to_string(index=index, float_format=fmt.format))
