"""Notebooks 15-17's session (aoi_fl.evidence.fedsum.session): what it prints before a panel runs,
where its runs go, and when the CIFAR-10 panels run (nothing is trained here)."""

import numpy as np
import pytest

from aoi_fl.evidence.fedsum import experiments as fx
from aoi_fl.evidence.fedsum import session
from aoi_fl.pipeline.notebook import NotebookSetup


def test_describe_each_kind_of_panel():
    smoke = {f: fx.plan(f, "smoke") for f in ("main", "p_grid", "long_cases")}
    assert session.describe("main", smoke["main"], "smoke") == (
        "24 runs: 8 methods x 3 patterns x 1 seeds, 2 rounds, evaluation every 1 rounds"
    )
    assert session.describe("p_grid", smoke["p_grid"], "smoke") == (
        "p_grid: 2 runs, 2 rounds, 1 seed(s); learning rate {'name': 'constant', 'lr': 0.01}"
    )
    assert session.describe("long_cases", smoke["long_cases"], "smoke") == (
        "long_cases: 8 runs, 4 rounds, 2 seeds, evaluation every 2 rounds"
    )


@pytest.fixture
def trained(monkeypatch):
    """Records what :func:`aoi_fl.evidence.fedsum.experiments.run_planned` is asked, and returns a
    summary per planned run without training."""
    calls = []

    def run_planned(planned, **options):
        calls.append((list(planned), options))
        ones = np.ones(3)
        return [
            fx.RunSummary(p, np.arange(3), ones, ones, ones, ones, np.ones(2), 1, 0.5, (1, 1))
            for p in planned
        ]

    monkeypatch.setattr(session.fx, "run_planned", run_planned)
    return calls


def test_a_panel_is_said_then_run_from_the_notebooks_folders(trained, capsys):
    nb = session.Session("cpu", NotebookSetup("cpu"), rerun=True)
    summaries = nb.panel("family")
    assert capsys.readouterr().out.startswith("family: 9 runs, 20 rounds, 1 seed(s);")
    ((planned, options),) = trained
    assert planned == fx.plan("family", "cpu") and len(summaries) == 9
    assert options == {
        "results_dir": "../results",
        "work_dir": "../results/full",
        "rerun": True,
        "data_root": "../data",
        "workers": 2,
        "threads": 1,
        "progress": True,
    }
    assert (nb.last, nb.threshold) == (fx.LAST["cnn"]["cpu"], 0.7)
    assert session.Session("cpu", NotebookSetup("cpu"), kind="long").last == 5


@pytest.mark.parametrize(
    ("profile", "status", "exercise", "ran", "said"),
    [
        ("cpu", (False, False, "absent"), True, None, None),
        ("cpu", (True, False, "found"), True, None, "NB=15): the CIFAR-10 CNN is 10x larger"),
        ("smoke", (True, True, "synthetic"), False, None, None),
        ("smoke", (True, True, "synthetic"), True, {("P1", "fedsum"), ("P1", "fedavg")}, None),
        ("paper", (True, False, "found"), False, "every", None),
    ],
)
def test_the_cifar10_panels_run_where_profile_and_data_allow(
    trained, monkeypatch, capsys, profile, status, exercise, ran, said
):
    monkeypatch.setattr(session, "data_status", lambda *args: status)
    session.Session(profile, NotebookSetup(profile)).cifar10(["main"], 15, exercise=exercise)
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [fx.SVHN_MESSAGE, status[2]]
    if ran is None:
        assert trained == [] and len(out) == 2 + (said is not None)
        assert said is None or said in out[2]
        return
    ((planned, _),) = trained
    expected = fx.plan("main", profile, "cifar10", synthetic=status[1])
    if ran == "every":
        assert planned == expected
    else:  # the smoke exercise of the CIFAR-10 CNN on synthetic data: two runs
        assert {(p.pattern, p.algorithm) for p in planned} == ran
        assert all(p.config["dataset"]["name"] == "synthetic_cifar" for p in planned)
    assert out[2] == "CIFAR-10, main:"


def test_setup_prints_the_profile_device_and_mnist_and_single_threads(monkeypatch, capsys):
    monkeypatch.delenv("AOI_FL_PROFILE", raising=False)
    threads = []
    monkeypatch.setattr("torch.set_num_threads", threads.append)
    monkeypatch.setattr(session, "data_status", lambda *args: (True, False, "MNIST verified"))
    nb = session.setup("smoke", rerun=True, kind="long")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "profile: smoke" and out[1].startswith("device: ")
    assert out[2] == "MNIST verified" and threads == [1]
    assert (nb.profile, nb.rerun, nb.kind, nb.env.profile) == ("smoke", True, "long", "smoke")
