"""aoi_fl.evidence.aoi.traces: the simulated traces behind Figs 2 and 4, shared by notebooks 02-04
and the ledger."""

import numpy as np
import pytest

from aoi_fl.aoi import samplers
from aoi_fl.core import stats
from aoi_fl.data import partition
from aoi_fl.evidence.aoi import traces

N, M, M_PRIME = 100, 15, 10
WINDOWS = (1, 2, 5, 10)
OPTIONS = {"n": N, "m": M, "m_prime": M_PRIME, "seeds": 2, "rounds": 100}


@pytest.fixture(scope="module")
def sizes():
    return partition.zipf_sizes(N, 2.0, seed=0).astype(float)


@pytest.mark.parametrize("start", ["stationary", "zero"])
def test_traces_are_the_samplers_of_seeds_0_1_(sizes, start):
    got = traces.simulate_traces("markov_optimal", sizes, **OPTIONS, start=start)
    for seed, trace in enumerate(got):
        sampler = samplers.make_sampler(
            "markov_optimal", n=N, m=M, sizes=sizes, m_prime=M_PRIME, seed=seed, start=start
        )
        assert trace.sigma() == stats.simulate(sampler, OPTIONS["rounds"]).sigma()
    assert got[0].sigma() != got[1].sigma()


@pytest.mark.parametrize("policy", samplers.POLICIES)
def test_window_std_ratios_per_trace_and_window(sizes, policy):
    ratios = traces.window_std_ratios(
        traces.window_traces(policy, sizes, WINDOWS, **OPTIONS), WINDOWS
    )
    assert ratios.shape == (OPTIONS["seeds"], len(WINDOWS))
    assert np.isfinite(ratios).all() and (ratios > 0).all()


def test_policy_2_windows_count_its_draws(sizes):
    # a client drawn l times in a round adds l to Y (Sec. III-B): with counts per draw, Y's
    # total over the clients is m per round, T m per window
    (trace,) = traces.window_traces("probabilistic", sizes, (1,), **{**OPTIONS, "seeds": 1})
    sampler = samplers.make_sampler("probabilistic", n=N, m=M, sizes=sizes, m_prime=M_PRIME)
    once = stats.simulate(sampler, OPTIONS["rounds"], windows=(1,))
    assert trace.window_std_ratio(1) > once.window_std_ratio(1)
