"""What the FedSUM training notebooks share: their setup and the runs of a panel.

:func:`setup` prints the profile, the device and the MNIST check, keeps torch single-threaded
and returns a :class:`Session`, which reads each panel's runs from the result cache (training
what is missing: :func:`aoi_fl.evidence.fedsum.experiments.run_planned`), saves and shows figures,
and runs the CIFAR-10 panels where the data and the profile allow::

    profile = resolve_profile(profile)
    nb = session.setup(profile, rerun)
    summaries = nb.panel("main")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aoi_fl.evidence.fedsum import experiments as fx
from aoi_fl.evidence.fedsum import results as fr
from aoi_fl.pipeline import notebook
from aoi_fl.pipeline.data_status import data_status
from aoi_fl.pipeline.notebook import print_table
from aoi_fl.pipeline.profiles import traits


def describe(figure: str, planned: Sequence[fx.Planned], profile: str) -> str:
    """The line a notebook prints before it runs ``figure``'s ``planned`` runs: Fig. 1's panel
    by its methods, patterns and seeds; a panel of the pattern notebook by its learning rate
    (Figs 10 and 11 keep eta_l constant); a long-horizon panel by its evaluation cadence."""
    s = fx.profile_settings(profile)
    if figure in fx.LONG_FIGURES:
        long = s["long"]
        return (
            f"{figure}: {len(planned)} runs, {long['rounds']} rounds, {long['seeds']} seeds, "
            f"evaluation every {long['eval_every']} rounds"
        )
    if figure == "main":
        return (
            f"{len(planned)} runs: {len(fx.MAIN_ALGORITHMS)} methods x {len(fx.MAIN_PATTERNS)} "
            f"patterns x {s['seeds']['main']} seeds, {s['rounds']['main']} rounds, evaluation "
            f"every {s['eval_every']} rounds"
        )
    return (
        f"{figure}: {len(planned)} runs, {s['rounds'][figure]} rounds, {s['seeds'][figure]} "
        f"seed(s); learning rate {planned[0].config['training']['lr']}"
    )


@dataclass(frozen=True)
class Session:
    """A notebook's profile, folders (:class:`aoi_fl.pipeline.notebook.NotebookSetup`), whether
    it recomputes the cache (``rerun``) and its panels' kind: ``"cnn"`` (the MNIST and pattern
    notebooks) or ``"long"`` (the long-horizon notebook), which sets :attr:`last`."""

    profile: str
    env: notebook.NotebookSetup
    rerun: bool = False
    kind: str = "cnn"

    @property
    def last(self) -> int:
        """The evaluations averaged into a final value (as the claims ledger)."""
        return fx.LAST[self.kind][self.profile]

    @property
    def threshold(self) -> float:
        """The test accuracy whose first reach the tables report (:data:`~aoi_fl.fedsum.
        results.THRESHOLD`)."""
        return fr.THRESHOLD[self.profile]

    def run(self, planned: Sequence[fx.Planned]) -> list[fx.RunSummary]:
        """The summaries of ``planned``: cached, or trained by two single-threaded workers
        (one in ``smoke``), full histories and checkpoints under ``<results>/full``."""
        return fx.run_planned(
            planned,
            results_dir=self.env.RESULTS,
            work_dir=f"{self.env.RESULTS}/full",
            rerun=self.rerun,
            data_root=self.env.DATA,
            workers=self.env.WORKERS,
            threads=1,
            progress=traits(self.profile).progress,
        )

    def panel(self, figure: str) -> list[fx.RunSummary]:
        """The MNIST runs of ``figure`` (:func:`aoi_fl.evidence.fedsum.experiments.plan`), said
        first (:func:`describe`)."""
        planned = fx.plan(figure, self.profile)
        print(describe(figure, planned, self.profile))
        return self.run(planned)

    def show(self, fig: Any, name: str) -> None:
        """Save ``fig`` under the figures folder as ``name`` and display it
        (:meth:`aoi_fl.pipeline.notebook.NotebookSetup.show`)."""
        self.env.show(fig, name)

    def cifar10(
        self, panels: Sequence[str], notebook_number: int, *, exercise: bool = False
    ) -> None:
        """The CIFAR-10 runs of ``panels``: says why SVHN is left out and whether CIFAR-10 is
        here; runs the panels in the ``paper`` profile, and with ``exercise`` in ``smoke`` too
        (on synthetic CIFAR-shaped data when CIFAR-10 is absent: FedSUM and FedAvg under P1
        only, to exercise the CIFAR-10 CNN's code path), printing their final metrics; else
        says that they run in ``paper`` only (the CIFAR-10 CNN is 10x larger than MNIST's)."""
        print(fx.SVHN_MESSAGE)
        found, synthetic, message = data_status("cifar10", self.profile, self.env.DATA)
        print(message)
        runs = traits(self.profile).papers_settings or (traits(self.profile).quick and exercise)
        if not found or (synthetic and not runs):
            return
        if not runs:
            print(
                "CIFAR-10 was found, but its panels run in the paper profile only (make figures "
                f"PROFILE=paper NB={notebook_number}): the CIFAR-10 CNN is 10x larger than "
                "MNIST's."
            )
            return
        for figure in panels:
            planned = fx.plan(figure, self.profile, "cifar10", synthetic=synthetic)
            if synthetic:
                planned = [
                    p for p in planned if p.pattern == "P1" and p.algorithm in ("fedsum", "fedavg")
                ]
            table = fr.final_table(self.run(planned), last=self.last)
            print(f"CIFAR-10, {figure}:")
            print_table(table[["train_loss", "test_accuracy"]], "{:.4f}")


def setup(profile: str, rerun: bool = False, kind: str = "cnn") -> Session:
    """The FedSUM training notebooks' setup: the plotting style and pandas' width, ``profile: ...``,
    the device missing runs would train on, single-threaded torch, and whether MNIST is verified.

    ``profile`` must be resolved (:func:`aoi_fl.pipeline.profiles.resolve_profile`).
    """
    import torch

    env = notebook.setup(profile, display_width=170, training=True)
    # on a shared 2-core machine two threads per process only contend; the cpu and paper grids
    # run two single-threaded worker processes
    torch.set_num_threads(1)
    print(data_status("mnist", profile, env.DATA)[2])
    return Session(profile, env, rerun, kind)
