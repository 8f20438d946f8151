"""The selection skew rho of eq. 24 on hand-made cases."""

import numpy as np
import pytest

from aoi_fl.skew import skew, skew_of_run


def test_full_participation_with_data_weights_has_skew_one():
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 50, 8).astype(float)
    f, f_star = rng.uniform(1, 2, 8), rng.uniform(0, 1, 8)
    q = sizes / sizes.sum()
    assert skew(f, np.arange(8), q, sizes, f_star) == pytest.approx(1.0)


def test_hand_computed_case():
    sizes = np.array([1.0, 1.0, 2.0])  # q = 1/4, 1/4, 1/2
    f = np.array([3.0, 1.0, 2.0])
    f_star = np.array([1.0, 0.0, 1.0])  # gaps 2, 1, 1; global gap = 0.5 + 0.25 + 0.5 = 1.25
    assert skew(f, [0], [1.0], sizes, f_star) == pytest.approx(2 / 1.25)
    assert skew(f, [1, 2], [0.5, 0.5], sizes, f_star) == pytest.approx(1 / 1.25)


def test_skew_of_run_uses_current_and_final_models():
    sizes = np.ones(2)
    history = {
        "selected": [[0], [1]],
        "weights": [[1.0], [1.0]],
        "eval_round": [0, 1, 2],
        "client_losses": [[2.0, 1.0], [1.0, 3.0], [1.0, 1.0]],
    }
    s = skew_of_run(history, sizes, np.zeros(2))
    # round 0: gap (2, 1), global 1.5 -> rho = 2/1.5; round 1: gap (1, 3), global 2 -> 3/2
    np.testing.assert_allclose(s.rho_current, [2 / 1.5, 1.5])
    np.testing.assert_allclose(s.rho_final, [1.0, 1.0])
    assert s.mean == pytest.approx((2 / 1.5 + 1.5) / 2)
    assert s.lower == pytest.approx(4 / 3) and s.upper == pytest.approx(1.0)


def test_missing_evaluations_are_refused():
    history = {"selected": [[0]], "weights": [[1.0]], "eval_round": [1], "client_losses": [[1.0]]}
    with pytest.raises(ValueError, match="client_losses at every round"):
        skew_of_run(history, np.ones(1), np.zeros(1))
    with pytest.raises(ValueError, match="one entry per client"):
        skew([1.0, 2.0], [0], [1.0], np.ones(3), np.zeros(2))
