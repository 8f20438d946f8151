"""The four selection policies (Sec. III-B): weights, marginal rates, the renewal Markov sampler
against the per-round age chain (eq. 4), determinism, checkpoints and input validation.

Statistical checks use fixed seeds, so they are deterministic; their tolerances (5 standard
errors, or a chi-square p-value above 1e-4) are what a correct sampler passes with probability
> 0.999 per check, stated next to each.
"""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from aoi_fl.aoi import markov as mk
from aoi_fl.aoi.samplers import (
    POLICIES,
    MarkovSampler,
    Probabilistic,
    RandomWeighted,
    _IntervalTable,
    make_sampler,
    markov_nonoptimal,
    markov_optimal,
)
from aoi_fl.core.seeding import generator
from aoi_fl.core.selection import Selection

# p vectors whose chain keeps selecting (p_{m'} > 0)
chains = st.integers(1, 6).flatmap(
    lambda mp: st.tuples(
        st.lists(st.floats(0.0, 1.0), min_size=mp, max_size=mp),
        st.floats(0.02, 1.0),
    ).map(lambda t: np.array([*t[0], t[1]]))
)
sizes_st = st.integers(1, 40).flatmap(
    lambda n: st.lists(st.floats(0.5, 1000.0), min_size=n, max_size=n).map(np.array)
)
LINEAR = mk.calibrate_family("linear", 100, 15, 10)  # Policy 4's p at the paper's n/m, m'
SMALL = np.array([0.2, 0.5, 0.1, 0.7])  # m' = 3, non-monotone, geometric tail


def trace(sampler, rounds):
    return [sampler.sample() for _ in range(rounds)]


def same_trace(a, b):
    return len(a) == len(b) and all(
        np.array_equal(x.ids, y.ids) and np.array_equal(x.weights, y.weights)
        for x, y in zip(a, b, strict=True)
    )


def indicator(selections, n):
    sel = np.zeros((len(selections), n), dtype=bool)
    for t, s in enumerate(selections):
        sel[t, s.ids] = True
    return sel


def chain_indicator(p, n, rounds, seed, start):
    """The reference: the per-round chain of eq. 4, one uniform per client per round."""
    rng = generator(seed, "test_reference_chain")
    m_prime = p.size - 1
    if start == "zero":
        ages = np.zeros(n, dtype=int)
    else:
        ages = rng.choice(m_prime + 1, size=n, p=mk.stationary_distribution(p))
    sel = np.zeros((rounds, n), dtype=bool)
    for t in range(rounds):
        s = rng.random(n) < p[ages]
        if not s.any():
            s[rng.integers(n)] = True
        sel[t] = s
        ages = np.where(s, 0, np.minimum(ages + 1, m_prime))
    return sel


def pattern_probabilities(p, rounds, age_law):
    """Exact law of one client's selection pattern in rounds 0..rounds-1 (bit k = round k)."""
    m_prime = p.size - 1
    probs = np.zeros(2**rounds)
    for code in range(2**rounds):
        for a0, weight in enumerate(age_law):
            a, pr = a0, weight
            for k in range(rounds):
                hit = (code >> k) & 1
                pr *= p[a] if hit else 1.0 - p[a]
                a = 0 if hit else min(a + 1, m_prime)
            probs[code] += pr
    return probs


def chi2_pvalue(observed, probs):
    """Chi-square goodness of fit, lumping the cells with expected count < 5 together."""
    observed = np.asarray(observed, dtype=float)
    if observed[probs == 0].sum() > 0:
        return 0.0  # an impossible outcome happened
    expected = probs * observed.sum()
    small = expected < 5
    obs, exp = observed[~small], expected[~small]
    if expected[small].sum() > 0:
        obs = np.append(obs, observed[small].sum())
        exp = np.append(exp, expected[small].sum())
    return sps.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue


def first_intervals(sel, horizon):
    """Each client's interval between its 1st and 2nd selection, for the clients first
    selected by round ``rounds - 1 - horizon``: the 2nd selection then falls inside the trace
    unless X > horizon. The interval after a selection is a fresh draw of X (renewal), whatever
    the round of that selection."""
    rounds = sel.shape[0]
    first = np.where(sel.any(axis=0), np.argmax(sel, axis=0), rounds)
    cols = np.flatnonzero(first <= rounds - 1 - horizon)
    later = sel[:, cols] & (np.arange(rounds)[:, None] > first[cols])
    assert later.any(axis=0).all()
    return np.argmax(later, axis=0) - first[cols]


# --- weights ------------------------------------------------------------------------------
@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(st.sampled_from(POLICIES), sizes_st, st.data(), st.integers(0, 2**32 - 1))
def test_weights_nonnegative_sum_to_one_and_ids_valid(policy, sizes, data, seed):
    n = sizes.size
    m = data.draw(st.integers(1, n))
    sampler = make_sampler(policy, n=n, m=m, sizes=sizes, m_prime=3, seed=seed)
    for sel in trace(sampler, 25):
        assert isinstance(sel, Selection) and len(sel) >= 1
        assert np.all(np.diff(sel.ids) > 0) and sel.ids[0] >= 0 and sel.ids[-1] < n
        assert np.all(sel.weights > 0)
        assert sel.weights.sum() == pytest.approx(1.0, abs=1e-12)
        if policy == "random":
            assert len(sel) == m
            np.testing.assert_allclose(sel.weights, sizes[sel.ids] / sizes[sel.ids].sum())
        elif policy == "probabilistic":
            hits = sel.weights * m
            np.testing.assert_allclose(hits, np.round(hits), atol=1e-9)
            assert np.round(hits).sum() == m and len(sel) <= m
        else:
            np.testing.assert_allclose(sel.weights, 1.0 / len(sel))


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(
    chains, st.integers(1, 30), st.integers(0, 2**32 - 1), st.sampled_from(["zero", "stationary"])
)
def test_markov_weights_are_uniform_for_any_chain(p, n, seed, start):
    sampler = MarkovSampler(p, n, seed, start)
    for sel in trace(sampler, 30):
        assert len(sel) >= 1 and np.all(np.diff(sel.ids) > 0)
        np.testing.assert_allclose(sel.weights, 1.0 / len(sel))


# --- marginal selection rates -------------------------------------------------------------
def test_random_rate_is_m_over_n_for_every_client():
    n, m, rounds = 20, 5, 2000
    sel = indicator(trace(make_sampler("random", n=n, m=m, seed=1), rounds), n)
    assert np.all(sel.sum(axis=1) == m)
    counts = sel.sum(axis=0)
    sd = np.sqrt(rounds * m / n * (1 - m / n))  # Binomial(rounds, m/n) per client
    assert np.all(np.abs(counts - rounds * m / n) < 5 * sd)


def test_probabilistic_expected_hits_and_inclusion_probability():
    sizes = np.array([1.0, 2, 3, 5, 8, 13, 21, 34, 55, 89])
    n, m, rounds = sizes.size, 4, 3000
    q = sizes / sizes.sum()
    selections = trace(Probabilistic(sizes, m, seed=2), rounds)
    hits = np.zeros(n)
    for s in selections:
        hits[s.ids] += np.round(s.weights * m)
    # m * rounds iid draws: hits_i ~ Binomial(m * rounds, q_i), E[l_i] = m q_i per round
    sd = np.sqrt(m * rounds * q * (1 - q))
    assert np.all(np.abs(hits - m * rounds * q) < 5 * sd)
    # a client is in S with probability 1 - (1 - q_i)^m, independently over rounds
    incl = 1 - (1 - q) ** m
    counts = indicator(selections, n).sum(axis=0)
    assert np.all(np.abs(counts - rounds * incl) < 5 * np.sqrt(rounds * incl * (1 - incl)))


@pytest.mark.parametrize("policy", ["markov_optimal", "markov_nonoptimal"])
def test_markov_stationary_rate_is_m_over_n_from_round_zero(policy):
    n, m, rounds = 2000, 300, 200  # n/m = 100/15
    sel = indicator(trace(make_sampler(policy, n=n, m=m, seed=3), rounds), n)
    # stationary start: each client is selected in each round with probability pi_0 = m/n,
    # independently across clients, so |S_t| ~ Binomial(n, m/n) in every round
    sd_round = np.sqrt(n * m / n * (1 - m / n))
    assert np.all(np.abs(sel.sum(axis=1) - m) < 5 * sd_round)
    # overall rate; clients are independent, so the SE is the spread of per-client rates
    rates = sel.mean(axis=0)
    assert abs(rates.mean() - m / n) < 5 * rates.std() / np.sqrt(n) + 1e-12


def test_markov_selection_rate_property():
    assert markov_optimal(100, 15).selection_rate == pytest.approx(0.15)
    assert markov_nonoptimal(100, 15).selection_rate == pytest.approx(0.15)


# --- renewal sampler == per-round chain in distribution -----------------------------------
@pytest.mark.parametrize(
    "p, start",
    [
        (LINEAR, "zero"),
        (LINEAR, "stationary"),
        (SMALL, "zero"),
        (SMALL, "stationary"),
        (mk.optimal_p(100, 15, 10), "stationary"),
        (mk.optimal_p(10, 3, 2), "stationary"),
    ],
)
def test_first_rounds_joint_law_matches_the_chain(p, start):
    """Per client, the pattern of selections in rounds 0..4 has the exact law of the chain
    (started at age 0, or at an age drawn from pi); both simulators pass a chi-square test
    against it (p-value > 1e-4), on 20,000 clients."""
    n, rounds = 20_000, 5
    age_law = np.eye(p.size)[0] if start == "zero" else mk.stationary_distribution(p)
    probs = pattern_probabilities(p, rounds, age_law)
    codes = 1 << np.arange(rounds)
    renewal = indicator(trace(MarkovSampler(p, n, seed=4, start=start), rounds), n)
    chain = chain_indicator(p, n, rounds, seed=4, start=start)
    for sel in (renewal, chain):
        observed = np.bincount(codes @ sel, minlength=2**rounds)
        assert chi2_pvalue(observed, probs) > 1e-4


@pytest.mark.parametrize("p", [LINEAR, SMALL, mk.optimal_p(100, 15, 10)])
def test_interval_law_matches_interval_pmf_and_the_chain(p):
    """The interval after a client's first selection is distributed as X (markov.interval_pmf):
    chi-square p-value > 1e-4 for the renewal sampler and the per-round chain alike."""
    n = 20_000
    horizon = int(np.argmax(mk.interval_survival(p, np.arange(400)) < 1e-8))
    rounds = horizon + 20
    pmf = mk.interval_pmf(p, horizon)
    renewal = indicator(trace(MarkovSampler(p, n, seed=5, start="zero"), rounds), n)
    chain = chain_indicator(p, n, rounds, seed=5, start="zero")
    for sel in (renewal, chain):
        gaps = first_intervals(sel, horizon)
        assert gaps.size > n // 2
        observed = np.bincount(gaps, minlength=horizon + 1)[1:]
        assert chi2_pvalue(observed, pmf / pmf.sum()) > 1e-4
    # marginal rate over the whole trace: the two simulators agree within 5 standard errors
    rate_r, rate_c = renewal.mean(axis=0), chain.mean(axis=0)
    se = np.hypot(rate_r.std(), rate_c.std()) / np.sqrt(n)
    assert abs(rate_r.mean() - rate_c.mean()) < 5 * se


def test_zero_start_with_p0_zero_forces_one_client_per_round():
    """Optimal p for n/m = 100/15: p_0..p_4 = 0, p_5 = 1/3, p_6.. = 1. From all ages 0 (eq. 4)
    nobody selects itself in rounds 0-4, so one random client is forced each round (weight 1).
    In round 5 only never-forced clients (age 5) can select themselves; in round 6 every
    never-forced client not selected in round 5 has age 6 and p_6 = 1."""
    n = 100
    sampler = markov_optimal(n, 15, 10, seed=6, start="zero")
    sel = trace(sampler, 7)
    forced = set()
    for s in sel[:5]:
        assert len(s) == 1 and s.weights[0] == 1.0
        forced.add(int(s.ids[0]))
    fresh = set(range(n)) - forced
    s5, s6 = set(sel[5].ids.tolist()), set(sel[6].ids.tolist())
    assert s5 and s5 <= fresh
    assert fresh - s5 <= s6
    np.testing.assert_allclose(sel[5].weights, 1 / len(s5))


def test_zero_start_lockstep_round_counts_match_the_chain():
    """All clients start in lockstep: |S_t| over the first rounds has the same law under the
    renewal sampler and the per-round chain (both ~ n * P(selected in round t | age 0 start))."""
    n, rounds = 5000, 12
    p = LINEAR
    probs = pattern_probabilities(p, rounds, np.eye(p.size)[0])
    codes = np.arange(2**rounds)
    per_round = np.array([probs[(codes >> t) & 1 == 1].sum() for t in range(rounds)])
    sd = np.sqrt(n * per_round * (1 - per_round))
    renewal = indicator(trace(MarkovSampler(p, n, seed=7, start="zero"), rounds), n)
    chain = chain_indicator(p, n, rounds, seed=7, start="zero")
    for sel in (renewal, chain):
        assert np.all(np.abs(sel.sum(axis=1) - n * per_round) < 5 * sd)


@settings(max_examples=60, deadline=None)
@given(chains, st.integers(0, 2**32 - 1))
def test_interval_table_equals_interval_quantile(p, seed):
    table = _IntervalTable(p)
    rng = np.random.default_rng(seed)
    edges = np.arange(table._BINS) / table._BINS
    u = np.concatenate(
        [rng.random(2000), edges, np.nextafter(edges[1:], 0.0), [np.nextafter(1.0, 0.0)]]
    )
    np.testing.assert_array_equal(table.quantile(u), mk.interval_quantile(p, u))


# --- Sigma against the closed forms (aoi_fl.aoi.sigma) ----------------------------------------
def _sigma_run(sampler, rounds):
    """Empirical Sigma over ``rounds`` and a standard error from 20 batch means of the
    per-round sum_i w_i(t)^2 (the term that carries the fluctuation)."""
    from aoi_fl.core.stats import SelectionStats

    stats = SelectionStats(sampler.n)
    per_round = np.empty(rounds)
    for t in range(rounds):
        sel = sampler.sample()
        stats.update(sel)
        per_round[t] = np.sum(sel.weights**2)
    batches = per_round.reshape(20, -1).mean(axis=1)
    return stats.sigma(), batches.std(ddof=1) / np.sqrt(20)


@pytest.mark.slow
def test_empirical_sigma_matches_theorems_3_to_5():
    from aoi_fl.aoi.sigma import sigma_markov, sigma_probabilistic, sigma_random

    n, m, rounds = 100, 15, 4000
    sizes = generator(0, "test_sizes").zipf(2.0, n).astype(float)
    expected = {
        "random": sigma_random(sizes, m),
        "probabilistic": sigma_probabilistic(sizes, m),
        "markov_optimal": sigma_markov(n, m / n, empty="forced"),
        "markov_nonoptimal": sigma_markov(n, m / n, empty="forced"),
    }
    for policy, value in expected.items():
        sampler = make_sampler(policy, n=n, m=m, sizes=sizes, seed=8)
        sigma, se = _sigma_run(sampler, rounds)
        # 5 standard errors plus the O(1/rounds) bias of the empirical variance
        assert abs(sigma - value) < 5 * se + 2 * value / rounds, policy


# --- determinism and checkpoints ----------------------------------------------------------
@pytest.mark.parametrize("policy", POLICIES)
def test_same_seed_same_trace_different_seed_different_trace(policy):
    sizes = np.arange(1.0, 51.0)

    def build(seed):
        return make_sampler(policy, n=50, m=10, sizes=sizes, seed=seed)

    assert same_trace(trace(build(11), 30), trace(build(11), 30))
    assert not same_trace(trace(build(11), 30), trace(build(12), 30))


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(POLICIES),
    st.integers(0, 25),
    st.integers(0, 2**32 - 1),
    st.sampled_from(["zero", "stationary"]),
)
def test_state_dict_round_trip_continues_identically(policy, split, seed, start):
    def build():
        return make_sampler(policy, n=40, m=6, sizes=np.arange(1.0, 41.0), seed=seed, start=start)

    original = build()
    trace(original, split)
    state = json.loads(json.dumps(original.state_dict()))
    expected = trace(original, 20)
    resumed = build()
    resumed.load_state_dict(state)
    assert resumed.round == split
    assert same_trace(trace(resumed, 20), expected)


def test_load_state_dict_rejects_foreign_or_broken_states():
    a = markov_optimal(30, 5, seed=1)
    good = a.state_dict()
    with pytest.raises(ValueError, match="cannot be loaded"):
        markov_nonoptimal(30, 5).load_state_dict(good)
    with pytest.raises(ValueError, match="cannot be loaded"):
        markov_optimal(40, 5).load_state_dict(good)
    with pytest.raises(ValueError, match="next_round"):
        a.load_state_dict({**good, "next_round": good["next_round"][:-1]})
    with pytest.raises(ValueError, match="next_round"):
        a.load_state_dict({**good, "round": 10**6})
    with pytest.raises(ValueError, match="lacks"):
        RandomWeighted(np.ones(5), 2).load_state_dict({"name": "random"})
    with pytest.raises(TypeError):
        RandomWeighted(np.ones(5), 2).load_state_dict([1, 2])
    broken = {**RandomWeighted(np.ones(5), 2).state_dict(), "rng": {"bit_generator": "MT19937"}}
    with pytest.raises((ValueError, KeyError, TypeError)):
        RandomWeighted(np.ones(5), 2).load_state_dict(broken)


# --- configuration and construction -------------------------------------------------------
def test_config_describes_the_sampler():
    sizes = np.array([1.0, 2.0, 3.0, 4.0])
    assert make_sampler("random", n=4, m=2).config() == {
        "name": "random",
        "n": 4,
        "seed": 0,
        "m": 2,
        "sizes": "equal",
    }
    cfg = make_sampler("probabilistic", n=4, m=2, sizes=sizes, seed=3).config()
    assert (
        cfg["name"] == "probabilistic" and cfg["seed"] == 3 and cfg["sizes"].startswith("sha256:")
    )
    cfg = make_sampler("markov_optimal", n=100, m=15, start="zero").config()
    assert cfg["p"] == mk.optimal_p(100, 15, 10).tolist()
    assert (cfg["name"], cfg["m"], cfg["m_prime"], cfg["start"]) == (
        "markov_optimal",
        15,
        10,
        "zero",
    )
    cfg = make_sampler("markov_nonoptimal", n=100, m=15, m_prime=4, family="quadratic").config()
    assert cfg["family"] == "quadratic" and len(cfg["p"]) == 5
    assert json.loads(json.dumps(cfg)) == cfg


def test_make_sampler_builds_each_policy():
    kinds = {
        "random": RandomWeighted,
        "probabilistic": Probabilistic,
        "markov_optimal": MarkovSampler,
        "markov_nonoptimal": MarkovSampler,
    }
    for policy, cls in kinds.items():
        sampler = make_sampler(policy, n=100, m=15)
        assert isinstance(sampler, cls) and sampler.name == policy and sampler.n == 100
    assert np.all(make_sampler("random", n=5, m=2).sizes == 1.0)  # equal sizes by default


def test_policy4_rejects_a_p_that_decreases_with_age():
    # a decreasing p that does satisfy pi_0 = m/n: only the order is wrong
    p = mk.calibrate_shape(np.array([4.0, 3.0, 1.0, 1.0]), 100, 15)
    with pytest.raises(ValueError, match=r"p must be non-decreasing .* got p\[0\] = "):
        make_sampler("markov_nonoptimal", n=100, m=15, m_prime=3, p=p)
    # the same values in increasing order are accepted
    p_up = mk.calibrate_shape(np.array([1.0, 1.0, 3.0, 4.0]), 100, 15)
    assert make_sampler("markov_nonoptimal", n=100, m=15, m_prime=3, p=p_up).p[-1] == p_up[-1]


def test_make_sampler_accepts_a_calibrated_custom_p():
    p = mk.calibrate_shape(np.array([1.0, 1.0, 3.0, 4.0]), 100, 15)
    sampler = make_sampler("markov_nonoptimal", n=100, m=15, m_prime=3, p=p)
    assert sampler.config()["family"] == "custom"
    np.testing.assert_array_equal(sampler.p, p)


@pytest.mark.parametrize(
    "build, error, match",
    [
        (lambda: make_sampler("greedy", n=10, m=2), ValueError, "valid: markov_nonoptimal"),
        (lambda: make_sampler("random", n=10, m=0), ValueError, "m must be >= 1"),
        (lambda: make_sampler("random", n=10, m=11), ValueError, "m must be <= n"),
        (lambda: make_sampler("random", n=0, m=1), ValueError, "n must be >= 1"),
        (lambda: make_sampler("random", n=10, m=2.5), TypeError, "m must be an integer"),
        (lambda: make_sampler("markov_optimal", n=10, m=2, m_prime=0), ValueError, "m_prime"),
        (lambda: make_sampler("random", n=3, m=1, sizes=[1, 2]), ValueError, "one entry"),
        (lambda: make_sampler("random", n=3, m=1, sizes=[1, -2, 3]), ValueError, "sizes"),
        (lambda: make_sampler("probabilistic", n=2, m=1, sizes=[1, np.nan]), ValueError, "sizes"),
        (lambda: make_sampler("markov_optimal", n=10, m=2, start="warm"), ValueError, "start"),
        (lambda: make_sampler("random", n=10, m=2, start="warm"), ValueError, "start"),
        (
            lambda: make_sampler("markov_nonoptimal", n=10, m=2, family="cubic"),
            ValueError,
            "family",
        ),
        (lambda: make_sampler("random", n=10, m=2, p=[0.5, 0.5]), ValueError, "only be given"),
        (
            lambda: make_sampler("markov_optimal", n=10, m=2, p=[0.5, 0.5]),
            ValueError,
            "only be given",
        ),
        (lambda: make_sampler("markov_nonoptimal", n=10, m=2, p=[0.2, 0.2]), ValueError, "m_prime"),
        (
            lambda: make_sampler("markov_nonoptimal", n=10, m=2, m_prime=1, p=[0.9, 0.9]),
            ValueError,
            "constraint",
        ),
        (lambda: make_sampler("random", n=10, m=2, seed=-1), ValueError, "seed"),
        (lambda: RandomWeighted([1.0, 0.0], 1), ValueError, "sizes"),
        (lambda: RandomWeighted([[1.0, 2.0]], 1), ValueError, "sizes"),
        (lambda: Probabilistic([1.0, 2.0], 3), ValueError, "m must be <= n"),
        (lambda: MarkovSampler([0.5, 1.5], 10), ValueError, "outside"),
        (lambda: MarkovSampler([0.5, -0.1], 10), ValueError, "outside"),
        (lambda: MarkovSampler([0.5], 10), ValueError, "m' >= 1"),
        (lambda: MarkovSampler([0.5, 0.0], 10), ValueError, "reachable"),
        (lambda: MarkovSampler([0.5, 0.5], 0), ValueError, "n must be >= 1"),
        (lambda: MarkovSampler([0.5, 0.5], 10, start="cold"), ValueError, "valid: stationary"),
        (lambda: MarkovSampler([0.5, 0.5], 10, name=""), ValueError, "name"),
        (lambda: MarkovSampler([0.5, 0.5], 10, seed=1.5), TypeError, "seed"),
    ],
)
def test_bad_inputs_raise(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_unreachable_max_age_may_have_p_zero():
    # p_1 = 1: age 2 = m' is never reached, so p_2 = 0 is harmless
    sampler = MarkovSampler([0.3, 1.0, 0.0], 50, seed=1)
    for sel in trace(sampler, 20):
        assert len(sel) >= 1


def test_large_n_runs():
    n = 200_000
    sampler = make_sampler("markov_optimal", n=n, m=n * 15 // 100, seed=9)
    sizes = [len(sampler.sample()) for _ in range(10)]
    assert all(abs(s - 30_000) < 5 * np.sqrt(n * 0.15 * 0.85) for s in sizes)


@pytest.mark.parametrize("policy", POLICIES)
def test_an_unknown_family_is_refused_for_every_policy(policy):
    # only Policy 4 reads it, but a configuration may name it for any policy (it is part of the
    # cache key): a typo must not pass as a different run
    with pytest.raises(ValueError, match=r"unknown family 'bogus'; valid: "):
        make_sampler(policy, n=10, m=2, m_prime=3, family="bogus")
