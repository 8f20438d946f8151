"""Closed forms for memoryless policies against exact small cases and simulation."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aoi_fl.aoi import memoryless as ml
from aoi_fl.core import seeding


def test_random_rates_and_geometric_pmf():
    r = ml.random_rates(100, 15)
    assert np.all(r == 0.15)
    pmf = ml.pooled_interval_pmf(r, 5)
    np.testing.assert_allclose(pmf, 0.15 * 0.85 ** np.arange(5))


def test_probabilistic_rates_match_simulation():
    rng = seeding.generator(0, "test")
    sizes = rng.zipf(2.0, 20).astype(float)
    m = 15
    rates = ml.probabilistic_rates(sizes, m)
    draws = rng.choice(20, size=(40000, m), p=sizes / sizes.sum())
    hit = np.zeros((40000, 20), dtype=bool)
    hit[np.arange(40000)[:, None], draws] = True
    # 40000 rounds: binomial proportion sd <= 0.0025; 5 sd
    assert np.abs(hit.mean(axis=0) - rates).max() < 0.0125


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0.01, 1.0), min_size=1, max_size=30))
def test_pooled_pmf_sums_to_one(rates):
    pmf = ml.pooled_interval_pmf(rates, 3000)
    assert pmf.sum() == pytest.approx(1.0, abs=1e-9)
    assert np.all(pmf >= 0)


def test_window_ratio_equal_rates_is_binomial():
    for t in (1, 10, 100):
        assert ml.window_std_ratio(np.full(7, 0.15), t) == pytest.approx(
            np.sqrt(t * 0.15 * 0.85) / t
        )


def test_window_ratio_against_simulation():
    rng = seeding.generator(1, "test")
    rates = rng.uniform(0.05, 0.6, 50)
    t, windows = 20, 2000
    y = rng.binomial(t, rates, size=(windows, 50))
    emp = np.sqrt(y.var()) / t
    assert emp == pytest.approx(ml.window_std_ratio(rates, t), rel=0.02)


def test_pooled_moments_equal_rates_are_geometric():
    mean, var = ml.pooled_interval_moments(ml.random_rates(100, 15))
    assert mean == pytest.approx(100 / 15, rel=1e-14)
    assert var == pytest.approx(100 * 85 / 15**2, rel=1e-13)  # n(n - m)/m^2


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0.05, 1.0), min_size=1, max_size=30))
def test_pooled_moments_match_the_pmf(rates):
    # the pmf up to 2000 rounds: the geometric tails beyond hold < 0.95^2000 ~ 1e-44
    pmf = ml.pooled_interval_pmf(rates, 2000)
    x = np.arange(1, pmf.size + 1)
    mean, var = ml.pooled_interval_moments(rates)
    assert mean == pytest.approx(pmf @ x, rel=1e-9)
    assert var == pytest.approx(pmf @ x**2 - (pmf @ x) ** 2, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: ml.pooled_interval_pmf([0.0, 0.5], 3), "rates must be"),
        (lambda: ml.pooled_interval_moments([0.5, 1.5]), "rates must be"),
        (lambda: ml.window_std_ratio([0.5], 0), "window must be >= 1"),
        (lambda: ml.probabilistic_rates([1.0, -2.0], 3), "dataset size"),
        (lambda: ml.random_rates(10, 11), "m must be <= n"),
    ],
)
def test_bad_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()
