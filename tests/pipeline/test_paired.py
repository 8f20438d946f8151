"""Paired comparisons over seeds (aoi_fl.pipeline.paired): t and bootstrap intervals, the minimum
detectable effect and the verdict rule."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aoi_fl.pipeline.paired import (
    PairedInterval,
    minimum_detectable_effect,
    paired_interval,
    seeds_needed,
    verdict,
)


def test_t_interval_matches_hand_computation():
    # mean 2.5, sd sqrt(5/3) = 1.2910, t_{0.975, 3} = 3.1824: 2.5 -+ 3.1824 * 1.2910 / 2
    ci = paired_interval([1, 2, 3, 4])
    assert (ci.n, ci.method, ci.level) == (4, "t", 0.95)
    assert ci.mean == pytest.approx(2.5)
    assert ci.sd == pytest.approx(1.2910, abs=1e-4)
    assert (ci.low, ci.high) == (pytest.approx(0.4458, abs=1e-3), pytest.approx(4.5542, abs=1e-3))


def test_bootstrap_of_a_large_normal_sample_is_close_to_t():
    # n = 500: the t quantile is ~1.965, so both intervals estimate the same normal interval;
    # each endpoint is asked to agree within 10% of the t half-width (~0.088 here)
    x = np.random.default_rng(1).normal(0.3, 1.0, size=500)
    t = paired_interval(x, method="t")
    boot = paired_interval(x, method="bootstrap", seed=2)
    half = (t.high - t.low) / 2
    assert boot.low == pytest.approx(t.low, abs=0.1 * half)
    assert boot.high == pytest.approx(t.high, abs=0.1 * half)
    assert (boot.mean, boot.sd, boot.method) == (t.mean, t.sd, "bootstrap")


def test_bootstrap_is_reproducible_from_its_seed_only():
    x = np.random.default_rng(3).normal(size=12)
    state = np.random.get_state()[1].copy()  # noqa: NPY002 (checking it is left alone)
    a = paired_interval(x, method="bootstrap", seed=7)
    assert np.array_equal(np.random.get_state()[1], state)  # noqa: NPY002
    assert paired_interval(x, method="bootstrap", seed=7) == a
    other = paired_interval(x, method="bootstrap", seed=8)
    assert (other.low, other.high) != (a.low, a.high)


def test_t_interval_covers_the_true_mean_at_its_level():
    # 400 samples: the binomial sd of the coverage is ~1.1 points around 95%
    rng = np.random.default_rng(2024)
    covered = [(ci := paired_interval(rng.normal(size=10))).low <= 0 <= ci.high for _ in range(400)]
    assert 0.93 <= np.mean(covered) <= 0.975


@pytest.mark.slow
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=2, max_size=40))
def test_t_interval_contains_the_mean(values):
    ci = paired_interval(values)
    assert ci.low <= ci.mean <= ci.high
    assert ci.n == len(values)


def test_minimum_detectable_effect_formula_and_sqrt_n_scaling():
    # t_{0.975, 9} = 2.26216, t_{0.8, 9} = 0.88340
    assert minimum_detectable_effect(1.0, 10) == pytest.approx(
        (2.26216 + 0.88340) / np.sqrt(10), rel=1e-5
    )
    assert minimum_detectable_effect(3.0, 10) == pytest.approx(3 * minimum_detectable_effect(1, 10))
    # four times the seeds: half the effect, once the t quantiles have settled
    assert minimum_detectable_effect(1.0, 400) / minimum_detectable_effect(1.0, 100) == (
        pytest.approx(0.5, rel=0.01)
    )
    # sqrt(n) * MDE falls (t quantiles shrink) towards the normal z_0.975 + z_0.8 = 2.8016
    scaled = [minimum_detectable_effect(1.0, n) * np.sqrt(n) for n in (3, 5, 10, 30, 100, 10_000)]
    assert np.all(np.diff(scaled) < 0)
    assert scaled[-1] == pytest.approx(1.95996 + 0.84162, abs=1e-3)


def interval(low, high):
    return PairedInterval(10, (low + high) / 2, 1.0, low, high, "t", 0.95)


@pytest.mark.parametrize(
    "low, high, label",
    [
        (-10, -2, "held"),  # a speed-up, the claimed -6 inside
        (-12, -8, "held"),  # a larger speed-up than claimed
        (-4, -1, "held (smaller effect than claimed)"),
        (-4, 1, "not held"),  # smaller than claimed, no speed-up not excluded
        (-3, 0, "not held"),  # high = 0 does not exclude no speed-up
        (1, 3, "not held"),  # a slow-down
        (-9, 2, "inconclusive at this power"),
        (-6, 0, "inconclusive at this power"),  # both end points are included
    ],
)
def test_verdict_branches(low, high, label):
    v = verdict(interval(low, high), 6)
    assert v.label == label
    assert f"[{low:.3g}, {high:.3g}]" in v.reason and "-6" in v.reason


def test_verdict_relative_claim_is_scaled_to_our_rounds():
    # the paper's 45 -> 39 is a 13.3% speed-up; at our R_slow = 15 that is 2 rounds
    ci = interval(-4, -1)
    assert verdict(ci, 6).label == "held (smaller effect than claimed)"
    assert verdict(ci, 6 / 45, relative_to=15).label == "held"
    assert "-2 (the claimed speed-up)" in verdict(ci, 6 / 45, relative_to=15).reason


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: paired_interval([1.0]), "differences"),
        (lambda: paired_interval([1.0, np.nan, 3.0]), "differences"),
        (lambda: paired_interval([1.0, np.inf]), "differences"),
        (lambda: paired_interval([[1.0, 2.0]]), "differences"),
        (lambda: paired_interval([1, 2], level=1.0), "level"),
        (lambda: paired_interval([1, 2], level=0.0), "level"),
        (lambda: paired_interval([1, 2], method="z"), "method"),
        (lambda: paired_interval([1, 2], method="bootstrap", resamples=0), "resamples"),
        (lambda: minimum_detectable_effect(-1.0, 10), "sd"),
        (lambda: minimum_detectable_effect(1.0, 1), "n"),
        (lambda: minimum_detectable_effect(1.0, 10, level=1.5), "level"),
        (lambda: minimum_detectable_effect(1.0, 10, power=0.0), "power"),
        (lambda: verdict(interval(-1, 1), -6), "claimed"),
        (lambda: verdict(interval(-1, 1), 0.1, relative_to=0), "relative_to"),
    ],
)
def test_errors_name_the_parameter(call, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        call()


def test_nan_difference_is_refused_with_the_remedy():
    with pytest.raises(ValueError, match="1 of 3 are NaN.*did not reach the target"):
        paired_interval([1.0, np.nan, 3.0])


# ---------------------------------------------------------------------------------------------
# a family of comparisons: the paired t-test's p-value and Holm's adjustment


def test_holm_by_hand():
    from aoi_fl.pipeline.paired import holm

    # sorted 0.01, 0.02, 0.04, 0.3 times 4, 3, 2, 1: 0.04, 0.06, 0.08, 0.3 (already monotone)
    adjusted = holm([0.04, 0.01, 0.3, 0.02])
    assert adjusted == pytest.approx([0.08, 0.04, 0.3, 0.06])
    # monotone: a later step never has a smaller adjusted p than an earlier one
    assert holm([0.01, 0.011, 0.5]) == pytest.approx([0.03, 0.03, 0.5])
    assert holm([0.2, 0.3]) == pytest.approx([0.4, 0.4])  # 0.3 steps up to 0.4
    assert holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])
    with pytest.raises(ValueError, match="p_values must be probabilities"):
        holm([0.5, 1.5])


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_holm_is_between_the_raw_and_bonferroni_p_values(p):
    from aoi_fl.pipeline.paired import holm

    p = np.asarray(p)
    adjusted = holm(p)
    assert (adjusted >= p - 1e-15).all()
    assert (adjusted <= np.minimum(p * p.size, 1) + 1e-12).all()
    # the order of the tests is kept
    assert (np.diff(adjusted[np.argsort(p, kind="stable")]) >= -1e-15).all()


def test_the_p_value_is_the_paired_t_tests():
    from scipy import stats

    from aoi_fl.pipeline.paired import paired_p_value

    d = [1.0, 2.5, -0.5, 3.0, 1.5]
    assert paired_p_value(d) == pytest.approx(stats.ttest_1samp(d, 0).pvalue, rel=1e-12)
    assert paired_p_value([2.0, 2.0, 2.0]) == 0.0  # a constant shift: certain
    assert paired_p_value([0.0, 0.0]) == 1.0
    with pytest.raises(ValueError, match="at least 2 finite values"):
        paired_p_value([1.0])


@given(st.lists(st.floats(-50, 50), min_size=2, max_size=20))
def test_the_p_value_is_below_alpha_exactly_when_the_interval_excludes_zero(d):
    from aoi_fl.pipeline.paired import paired_p_value

    ci = paired_interval(d, 0.95)
    from hypothesis import assume

    assume(ci.sd > 1e-6 and min(abs(ci.low), abs(ci.high)) > 1e-6 * (1 + abs(ci.mean)))
    assert (paired_p_value(d) < 0.05) == (ci.low > 0 or ci.high < 0)


@pytest.mark.parametrize("sd", [0.5, 1.0, 4.3, 8.0])
@pytest.mark.parametrize("effect", [0.5, 1.0, 3.0])
def test_seeds_needed_is_the_fewest_whose_mde_is_at_most_the_effect(sd, effect):
    n = seeds_needed(sd, effect)
    assert minimum_detectable_effect(sd, n) <= effect
    assert n == 2 or minimum_detectable_effect(sd, n - 1) > effect


def test_seeds_needed_by_hand():
    # an effect equal to the MDE of 50 seeds needs exactly 50; no spread needs the fewest, 2
    assert seeds_needed(3.0, minimum_detectable_effect(3.0, 50)) == 50
    assert seeds_needed(0.0, 1.0) == 2
    # the normal approximation: (1.96 + 0.84)^2 sd^2 / effect^2, for large n
    assert seeds_needed(4.3, 1.0) == pytest.approx((1.96 + 0.8416) ** 2 * 4.3**2, rel=0.02)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: seeds_needed(1.0, 0.0), "effect must be a positive number, got 0.0"),
        (lambda: seeds_needed(1.0, float("nan")), "effect must be a positive number"),
        (lambda: seeds_needed(100.0, 0.01, most=1000), "needs more than most=1000 seeds"),
        (lambda: seeds_needed(-1.0, 1.0), "sd must be finite and non-negative"),
    ],
)
def test_seeds_needed_refuses_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
