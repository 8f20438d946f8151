"""Screening for a target accuracy finds the same first crossing as evaluating every round.

Evaluation never changes training (mini-batches depend only on (seed, round, client)), so a
screened run and a run evaluated on the whole test set every round follow the same trajectory;
the screen may only decide *where* the full test set is evaluated.
"""

from pathlib import Path

import numpy as np
import pytest

from aoi_fl.core.train import TrainSettings, rounds_to_target, screen_gaps
from aoi_fl.pipeline.runs import build_trainer

DATA = str(Path(__file__).resolve().parents[2] / "data")
ROUNDS, TARGET = 12, 0.79


def _config(**training):
    return {
        "dataset": {"name": "mnist", "n_train": 3000, "n_test": 2000},
        "partition": {"name": "iid", "n_clients": 20, "seed": 3},
        "model": {"name": "logistic_regression", "in_features": 784, "num_classes": 10, "seed": 3},
        "sampler": {"name": "random", "m": 5, "m_prime": 10, "seed": 3},
        "training": {
            "rounds": ROUNDS,
            "local_steps": 3,
            "batch_size": 20,
            "seed": 3,
            "lr": {"name": "constant", "lr": 0.05},
            **training,
        },
    }


@pytest.fixture(scope="module")
def every_round():
    """The reference: the whole test set evaluated after every round."""
    trainer = build_trainer(_config(eval_every=1), DATA)
    return trainer.run()


def _screened(**options):
    screen = {"screen_samples": 300, "screen_target": TARGET, "eval_every": 4, **options}
    return build_trainer(_config(**screen), DATA).run()


@pytest.mark.slow
def test_reference_crosses_the_target_inside_the_run(every_round):
    reached = rounds_to_target(every_round["test_accuracy"], TARGET, every_round["eval_round"])
    assert reached is not None and 2 < reached < ROUNDS  # the test below has a crossing to find


@pytest.mark.slow
@pytest.mark.parametrize("margin", [0.06, 1.0])
def test_screened_run_finds_the_same_first_crossing(every_round, margin):
    """With a margin of about 3 sd of the subset's error (300 of 2,000 images at 0.8: sd 0.021)
    or more, the screened run stops at the same round as the exhaustive one."""
    h = _screened(screen_margin=margin)
    # the trajectory is the same: identical selections and accuracies wherever both evaluated
    assert h["selected"] == every_round["selected"]
    full = dict(zip(every_round["eval_round"], every_round["test_accuracy"], strict=True))
    assert all(full[t] == a for t, a in zip(h["eval_round"], h["test_accuracy"], strict=True))
    reference = rounds_to_target(every_round["test_accuracy"], TARGET, every_round["eval_round"])
    assert rounds_to_target(h["test_accuracy"], TARGET, h["eval_round"]) == reference
    assert np.abs(screen_gaps(h)).max() < margin


@pytest.mark.slow
def test_a_margin_below_the_subsets_error_can_miss_the_crossing(every_round):
    """Why the margin matters: at 0.015 (under 1 sd here) this run's crossing is found late."""
    h = _screened(screen_margin=0.015)
    reference = rounds_to_target(every_round["test_accuracy"], TARGET, every_round["eval_round"])
    assert rounds_to_target(h["test_accuracy"], TARGET, h["eval_round"]) > reference


@pytest.mark.slow
def test_screen_stops_once_the_target_is_reached_and_losses_follow_the_schedule(every_round):
    h = _screened(screen_margin=0.03, client_loss_samples=5)
    reached = rounds_to_target(h["test_accuracy"], TARGET, h["eval_round"])
    screen = h["screen_accuracy"]
    assert len(screen) == ROUNDS
    assert all(a is not None for a in screen[:reached])  # entry t - 1 is round t
    assert all(a is None for a in screen[reached:])
    assert h["client_loss_round"] == [0, 4, 8, 12]
    assert len(h["client_losses"]) == 4
    # scheduled evaluations are always there; extra ones only where the screen came close
    assert {0, 4, 8, 12} <= set(h["eval_round"])
    extra = set(h["eval_round"]) - {0, 4, 8, 12}
    assert all(screen[t - 1] >= TARGET - 0.03 for t in extra)


def test_screen_gaps_pair_each_round_with_its_full_evaluation():
    history = {
        "screen_accuracy": [0.5, 0.8, 0.9, None],
        "eval_round": [0, 2, 3, 4],
        "test_accuracy": [0.1, 0.82, 0.95, 0.97],
    }
    np.testing.assert_allclose(screen_gaps(history), [0.02, 0.05])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"screen_samples": -1}, "screen_samples"),
        ({"screen_samples": 10, "screen_target": 1.5}, "screen_target"),
        ({"screen_samples": 10, "screen_margin": -0.1}, "screen_margin"),
        ({"screen_samples": 10, "loss": "mse"}, "screen_samples needs an accuracy"),
    ],
)
def test_bad_screening_options_name_the_setting(options, message):
    with pytest.raises(ValueError, match=message):
        TrainSettings(rounds=1, **options)


def test_screening_check_separates_the_rounds_near_the_target():
    from types import SimpleNamespace

    from aoi_fl.evidence.aoi.results import screening_check

    history = {
        "screen_accuracy": [0.5, 0.93, 0.955, None],
        "eval_round": [0, 1, 2, 3, 4],
        "test_accuracy": [0.1, 0.55, 0.94, 0.962, 0.971],
    }
    run = SimpleNamespace(
        config={
            "partition": {"name": "iid"},
            "sampler": {"name": "random"},
            "training": {"seed": 0, "screen_target": 0.97},
        },
        history=history,
    )
    row = screening_check([run], 0.015).loc[("iid", "random")]
    # gaps 0.05 (round 1, far below the target), 0.01 and 0.007 (within 0.03 of it)
    assert row["rounds compared"] == 3 and row["max gap"] == pytest.approx(0.05)
    assert row["rounds near target"] == 2 and row["max gap near target"] == pytest.approx(0.01)
