"""make_policy: any registered policy by name, its options checked before it is built."""

import numpy as np
import pytest

from aoi_fl.pipeline import plugins
from aoi_fl.pipeline.policies import make_policy


def test_the_papers_own_name_for_the_clients_per_round_still_works():
    by_m = make_policy("kvib", 12, m=3, rounds=20, seed=1)
    by_k = make_policy("kvib", 12, k=3, rounds=20, seed=1)
    assert np.array_equal(by_m.sample().ids, by_k.sample().ids)
    with pytest.raises(ValueError, match=r"m=3 and k=4 both give the clients per round"):
        make_policy("kvib", 12, m=3, k=4, rounds=20)


def test_equal_sizes_by_default():
    default = make_policy("probabilistic", 10, m=3, m_prime=2, seed=0)
    equal = make_policy("probabilistic", 10, np.ones(10), m=3, m_prime=2, seed=0)
    assert [default.sample().ids.tolist() for _ in range(5)] == [
        equal.sample().ids.tolist() for _ in range(5)
    ]


@pytest.mark.parametrize(
    ("args", "options", "error", "message"),
    [
        (("no_such", 10), {}, ValueError, r"policy='no_such' is not a registered aoi_fl policy"),
        ((None, 10), {}, ValueError, r"policy=None is not a registered aoi_fl policy; allowed: "),
        (("random", 0), {"m": 2}, ValueError, r"n must be >= 1, got 0"),
        (("random", "10"), {"m": 2}, TypeError, r"n must be an integer, got '10'"),
        (("random", 10), {"m": 2, "foo": 1}, ValueError, r"unknown options \['foo'\]; valid: m"),
        (("power_of_choice", 10), {"m": 2}, ValueError, r"missing options \['d'\]"),
        (("random", 10), {"m": 11}, ValueError, r"m must be <= n .*got m=11, n=10"),
        (("random", 10, [1.0, 2.0]), {"m": 2}, ValueError, r"one data size per client \(n=10\)"),
    ],
)
def test_bad_input_is_refused_naming_what_is_allowed(args, options, error, message):
    with pytest.raises(error, match=message):
        make_policy(*args, **options)


def test_every_registered_policy_is_offered():
    with pytest.raises(ValueError) as refused:
        make_policy("no_such", 10)
    assert all(name in str(refused.value) for name in plugins.samplers())
