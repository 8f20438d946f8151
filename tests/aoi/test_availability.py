"""The age chain under Bernoulli availability (:mod:`aoi_fl.aoi.availability`) and the Markov
samplers under availability masks and rates (:class:`MarkovSampler`, ``markov_available``).

Exact checks compare with small chains solved by hand (fractions) and with an independent
computation (a generic solve of pi P = pi, the interval law summed term by term). Statistical
checks use seeded generators only (``generator(seed, label)``), so they are deterministic; each
allows Z = 5 standard errors, derived next to the check, which a correct implementation passes
with probability about 1 - 6e-7 per check (normal approximation):

* pooled inter-selection intervals: each client's intervals after its first selection are iid
  copies of X' (a selection resets the age: regeneration), and clients are independent (own
  masks, own coins). We take the first k intervals of every client (k fixed in advance, the run
  goes on until every client has them), so the pooled sample of N = n k intervals is iid X':
  SE(mean) = sqrt(Var X' / N), SE(sample variance) = sqrt((mu_4 - Var^2) / N), with mu_4 the
  fourth central moment of X' from its exact law. (Intervals completed before a fixed horizon
  would be biased towards short ones by O(Var/T), several SEs at these sample sizes.)
* counts over a window of T rounds (selection rates, E|S|) from a stationary start: the count of
  a stationary renewal process has mean T / mu and variance T sigma^2 / mu^3 + C with a bounded
  C (0 for a Bernoulli process; between 0 and 0.17 for every chain here, computed exactly from
  the age chain's autocovariances), so SE(count / T) = sqrt(sigma^2 / (mu^3 T) + 1 / T^2) per
  client, C <= 1 allowed for; sums over independent clients add variances.
  Runs that do not start stationary (a mask switches a sampler started in the law of p, not of
  r p) are burnt in for BURN = 400 rounds first; the effective chains' second eigenvalue
  modulus is at most 0.971 there (asserted), so the start's trace is below 0.971^400 ~ 1e-5.

Forced selection (one available client when nobody selects itself) is outside the closed forms.
At n = 100 with every client's rate near m/n = 0.15 a round has nobody selecting itself with
probability prod_i (1 - 1/mu_i), below 1e-4 in every configuration here (asserted), so fewer
than 0.4 forced rounds are expected per run of at most ~4000 rounds; one forced round moves one
client's count by 1 and shortens one of its intervals: negligible against the tolerances (a
count SE is >= 1.5 selections per client, and a pooled interval sample has 30000 intervals).
(At n = 10, m = 2 it would be 0.1 per round.)
"""

import json
import math
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aoi_fl.aoi import availability as av
from aoi_fl.aoi import markov as mk
from aoi_fl.aoi.samplers import (
    CalibratedMarkovSampler,
    MarkovSampler,
    make_sampler,
    markov_available,
    markov_optimal,
)
from aoi_fl.core.seeding import generator

Z = 5.0  # tolerance in standard errors
N, M, MP = 100, 15, 10  # the paper's n, m, m'
RATIO = N / M
LINEAR = mk.calibrate_family("linear", N, M, MP)  # Policy 4's p at the paper's setting
SMALL = np.array([0.2, 0.5, 0.1, 0.7])  # m' = 3, non-monotone
BURN = 400
POLICIES = ("markov_optimal", "markov_nonoptimal", "markov_available")


# --- helpers ----------------------------------------------------------------------------------


def build(policy, n=N, m=M, m_prime=MP, seed=0, start="stationary"):
    if policy == "markov_available":
        return markov_available(n, m, m_prime, seed=seed, start=start)
    return make_sampler(policy, n=n, m=m, m_prime=m_prime, seed=seed, start=start)


def interval_law(p, r):
    """x and P(X' = x) for the effective chain r p, up to a tail below 1e-18."""
    q = av.effective_p(p, r)
    tail = float(q[-1])
    extra = 0 if tail >= 1.0 else math.ceil(math.log(1e-18) / math.log1p(-tail))
    x = np.arange(1, q.size + extra + 1)
    return x, mk.interval_pmf(q, x.size)


def moments(p, r):
    """E[X'], Var[X'] (the functions under test) and the fourth central moment of X'."""
    mean, var = av.interval_mean_under(p, r), av.interval_variance_under(p, r)
    x, pmf = interval_law(p, r)
    return mean, var, float(pmf @ (x - mean) ** 4)


def series_moments(p, r, x_max=20_000):
    """E[X'], Var[X'] summed term by term: P(X' = x) = q_{x-1} prod_{j < x-1} (1 - q_j), with
    q = r p and q_j = q_{m'} for j >= m' (independent of aoi_fl.aoi.markov)."""
    q = r * np.asarray(p, dtype=float)
    qa = q[np.minimum(np.arange(x_max), q.size - 1)]  # the selection probability at age x - 1
    survive = np.concatenate(([1.0], np.cumprod(1.0 - qa)[:-1]))
    pmf = qa * survive
    x = np.arange(1, x_max + 1, dtype=float)
    assert abs(pmf.sum() - 1.0) < 1e-12  # the truncation is negligible
    mean = pmf @ x
    return mean, pmf @ (x - mean) ** 2


def transition_under(p, r):
    """The chain of a client available with probability r, built from the rule itself."""
    k = len(p)
    P = np.zeros((k, k))
    for a in range(k):
        hit = r * p[a]  # available (r) and its coin comes up (p_a), independently
        P[a, 0] += hit
        P[a, min(a + 1, k - 1)] += 1.0 - hit
    return P


def second_eigenvalue(P):
    return sorted(np.abs(np.linalg.eigvals(P)))[-2]


class Intervals:
    """The first k inter-selection intervals of every client (after its first selection)."""

    def __init__(self, n, k):
        self.k = k
        self.times = np.zeros((n, k + 1), dtype=np.int64)
        self.count = np.zeros(n, dtype=np.int64)

    def add(self, t, ids):
        ids = ids[self.count[ids] <= self.k]
        self.times[ids, self.count[ids]] = t
        self.count[ids] += 1

    @property
    def done(self):
        return bool(self.count.min() > self.k)

    def values(self):
        assert self.done
        return np.diff(self.times, axis=1)


def drive(sampler, rates, *, k, rounds, burn=0, seed=0, mask=True):
    """Run ``sampler`` with Bernoulli(rates) masks drawn per round (``mask=False``: sample()).

    Returns every client's first k intervals (n x k), its selection count over the rounds
    [burn, rounds) and the number of such rounds. Goes on past ``rounds`` until every client
    has k intervals; checks that only available clients are ever selected.
    """
    rng = generator(seed, "test_availability_masks")
    n = sampler.n
    intervals = Intervals(n, k)
    counts = np.zeros(n, dtype=np.int64)
    t = 0
    while t < rounds or not intervals.done:
        available = rng.random(n) < rates if mask else None
        ids = sampler.sample(available).ids if mask else sampler.sample().ids
        if mask:
            assert available[ids].all(), "an unavailable client was selected"
        intervals.add(t, ids)
        if burn <= t < rounds:
            counts[ids] += 1
        t += 1
        assert t < 50 * rounds, "a client stopped being selected"
    return intervals.values(), counts, rounds - burn


def check_intervals(x, p, r, what):
    """The pooled iid intervals x against E[X'], Var[X'] of chain p under availability r."""
    mean, var, mu4 = moments(p, r)
    size = x.size
    se_mean = math.sqrt(var / size)
    se_var = math.sqrt(max(mu4 - var**2, 0.0) / size)
    assert abs(x.mean() - mean) <= Z * se_mean, f"{what}: mean {x.mean()} vs E[X'] = {mean}"
    assert abs(x.var() - var) <= Z * se_var + var / size, f"{what}: var {x.var()} vs {var}"


def count_se(p, r, rounds):
    """SE of one client's count / rounds from a stationary start (module docstring)."""
    mean, var, _ = moments(p, r)
    return math.sqrt(var / (mean**3 * rounds) + 1.0 / rounds**2)


# --- exact small cases, by hand ---------------------------------------------------------------

# (p, r, stationary law, E[X'], Var[X']) with p' = r p; derivations:
# * m' = 1, p = (1/2, 1), r = 1/2: p' = (1/4, 1/2). pi ~ (1, (3/4)/(1/2)) = (1, 3/2) -> (2/5, 3/5).
#   X' = 1 w.p. 1/4, else 1 + G, G geometric on {1, 2, ..} of success 1/2 (E G = 2, E G^2 = 6):
#   E = 1 + (3/4) 2 = 5/2; Var = (3/4) 6 - (3/2)^2 = 9/4.
# * m' = 1, p = (0, 1/3) (Theorem 1's first case at rho = 4), r = 1/2: p' = (0, 1/6).
#   pi ~ (1, 1/(1/6)) -> (1/7, 6/7); X' = 1 + G, G of success 1/6: E = 7, Var = (5/6)/(1/36) = 30.
# * m' = 2, p = (0, 1/2, 1) (Theorem 1's second case at rho = 5/2), r = 1/2: p' = (0, 1/4, 1/2).
#   pi ~ (1, 1, 3/4 / (1/2)) = (1, 1, 3/2) -> (2/7, 2/7, 3/7). X' = 2 w.p. 1/4, else 2 + G with
#   success 1/2: E = 2 + (3/4) 2 = 7/2, Var = (3/4) 6 - (3/2)^2 = 9/4.
# * m' = 2, p = (1/4, 1/2, 1/2), r = 2/3: p' = (1/6, 1/3, 1/3). pi ~ (1, 5/6, (5/6)(2/3)/(1/3))
#   = (1, 5/6, 5/3) -> (2/7, 5/21, 10/21). X' = 1 w.p. 1/6, 2 w.p. (5/6)(1/3) = 5/18, else
#   (5/9) 2 + G with success 1/3 (E G = 3, E G^2 = 15): E = 1/6 + 10/18 + (5/9) 5 = 7/2,
#   E X'^2 = 1/6 + 20/18 + (5/9)(4 + 12 + 15) = 37/2, Var = 37/2 - 49/4 = 25/4.
HAND = [
    ((F(1, 2), F(1)), F(1, 2), (F(2, 5), F(3, 5)), F(5, 2), F(9, 4)),
    ((F(0), F(1, 3)), F(1, 2), (F(1, 7), F(6, 7)), F(7), F(30)),
    ((F(0), F(1, 2), F(1)), F(1, 2), (F(2, 7), F(2, 7), F(3, 7)), F(7, 2), F(9, 4)),
    ((F(1, 4), F(1, 2), F(1, 2)), F(2, 3), (F(2, 7), F(5, 21), F(10, 21)), F(7, 2), F(25, 4)),
]


@pytest.mark.parametrize(("p", "r", "law", "mean", "var"), HAND)
def test_small_chains_by_hand(p, r, law, mean, var):
    p_float, r_float = np.array([float(x) for x in p]), float(r)
    np.testing.assert_array_equal(av.effective_p(p_float, r_float), r_float * p_float)
    pi = av.stationary_distribution_under(p_float, r_float)
    np.testing.assert_allclose(pi, [float(x) for x in law], rtol=1e-12, atol=0)
    assert av.interval_mean_under(p_float, r_float) == pytest.approx(float(mean), rel=1e-12)
    assert av.interval_variance_under(p_float, r_float) == pytest.approx(float(var), rel=1e-12)
    # the renewal identity: the rate is pi'_0 = 1 / E[X'] = sum_a pi'_a r p_a
    assert av.selection_rate_under(p_float, r_float) == pytest.approx(float(1 / mean), rel=1e-12)
    assert float(law[0]) == pytest.approx(float(1 / mean), rel=1e-15)
    assert pi @ (r_float * p_float) == pytest.approx(float(1 / mean), rel=1e-12)


def test_theorem1_family_by_hand():
    # the hand chains above are Theorem 1's family: theorem1_p(4, 1) = (0, 1/3) and
    # theorem1_p(5/2, 2) = (0, 1/2, 1)
    np.testing.assert_allclose(av.theorem1_p(4.0, 1), [0.0, 1 / 3], rtol=1e-15, atol=0)
    np.testing.assert_array_equal(av.theorem1_p(2.5, 2), [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(av.theorem1_p(1.0, 3), np.ones(4))


# p vectors with p_{m'} >= 0.05 and rates >= 0.1: q_{m'} >= 0.005, so the term-by-term sums to
# x = 20000 leave a tail below (0.995)^19990 ~ 1e-44.
chains = st.integers(1, 8).flatmap(
    lambda mp: st.tuples(
        st.lists(st.floats(0.0, 1.0), min_size=mp, max_size=mp),
        st.floats(0.05, 1.0),
    ).map(lambda t: np.array([*t[0], t[1]]))
)
rates = st.floats(0.1, 1.0)


@settings(deadline=None, max_examples=60)
@given(p=chains, r=rates)
def test_closed_forms_match_an_independent_computation(p, r):
    pi = av.stationary_distribution_under(p, r)
    P = transition_under(p, r)
    k = len(p)
    # the generic solve of pi P = pi, sum pi = 1
    A = np.vstack([P.T - np.eye(k), np.ones(k)])
    b = np.concatenate([np.zeros(k), [1.0]])
    generic = np.linalg.lstsq(A, b, rcond=None)[0]
    np.testing.assert_allclose(pi, generic, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(pi @ P, pi, rtol=0, atol=1e-12)
    mean, var = series_moments(p, r)
    assert av.interval_mean_under(p, r) == pytest.approx(mean, rel=1e-9)
    assert av.interval_variance_under(p, r) == pytest.approx(var, rel=1e-8, abs=1e-9)
    rate = av.selection_rate_under(p, r)
    assert rate == pytest.approx(1.0 / mean, rel=1e-9)
    assert rate == pytest.approx(pi @ (r * p), rel=1e-9)
    # r = 1 is the paper's chain
    assert av.interval_mean_under(p, 1.0) == mk.interval_mean(p)


@pytest.mark.parametrize(
    ("p", "r"),
    [(SMALL, 0.6), (av.theorem1_p(2.5, 2), 0.5), (LINEAR, 0.8)],
    ids=["small", "theorem1", "linear"],
)
def test_closed_forms_match_a_simulated_chain_with_bernoulli_masks(p, r):
    """C independent copies of the per-client chain, each with its own Bernoulli(r) mask.

    Started at age 0 and burnt in for 300 rounds (asserted: |lambda_2|^300 < 1e-9). Then the
    ages in that round are C iid draws of pi' (per age: 5 binomial SEs sqrt(C pi_a (1 -
    pi_a))), the selections over the next T rounds give the rate (renewal SE, module
    docstring) and the first k intervals of every chain give E[X'] and Var[X'].
    """
    chains_, burn, window, k = 20_000, 300, 100, 10
    assert second_eigenvalue(transition_under(p, r)) ** burn < 1e-9
    rng = generator(0, "test_availability_chain")
    ages = np.zeros(chains_, dtype=np.int64)
    m_prime = len(p) - 1
    intervals = Intervals(chains_, k)
    selected = 0
    t = 0
    while t < burn + window or not intervals.done:
        if t == burn:
            law = av.stationary_distribution_under(p, r)
            counts = np.bincount(ages, minlength=m_prime + 1)
            se = np.sqrt(chains_ * law * (1 - law))
            assert (np.abs(counts - chains_ * law) <= Z * se).all(), (counts, chains_ * law)
        available = rng.random(chains_) < r
        hit = available & (rng.random(chains_) < p[ages])
        if t >= burn:
            ids = np.flatnonzero(hit)
            intervals.add(t, ids)
            if t < burn + window:
                selected += ids.size
        ages = np.where(hit, 0, np.minimum(ages + 1, m_prime))
        t += 1
    check_intervals(intervals.values(), p, r, "simulated chain")
    rate = selected / (chains_ * window)
    se = count_se(p, r, window) / math.sqrt(chains_)
    assert abs(rate - av.selection_rate_under(p, r)) <= Z * se


# --- the samplers under Bernoulli masks --------------------------------------------------------


def sampler_chain(policy, r):
    """The p each client of ``policy`` runs at availability r (the sampler's own choice)."""
    if policy == "markov_optimal":
        return mk.optimal_p(N, M, MP)
    if policy == "markov_nonoptimal":
        return LINEAR
    return av.calibrated_p(N, M, MP, r)


@pytest.mark.parametrize("r", [1.0, 0.8, 0.5])
@pytest.mark.parametrize("policy", POLICIES)
def test_sampler_under_bernoulli_masks_matches_the_closed_forms(policy, r):
    """n = 100, m = 15 (forced rounds negligible: module docstring). markov_optimal and the
    linear family get masks only (the first mask switches them to the per-round mode from ages
    in the law of p, hence the burn-in); markov_available needs the rates to calibrate
    (``set_availability_rates``, which also starts it in the law of r p)."""
    sampler = build(policy, seed=1)
    if policy == "markov_available":
        sampler.set_availability_rates(np.full(N, r))
    p = sampler_chain(policy, r)
    if policy != "markov_available" and r < 1:  # started in the law of p, not of r p: burn-in
        assert second_eigenvalue(transition_under(p, r)) ** BURN < 1e-5
    mean, var, _ = moments(p, r)
    assert (1 - 1 / mean) ** N < 1e-4  # P(nobody selects itself in a round)
    x, counts, window = drive(sampler, np.full(N, r), k=300, rounds=BURN + 2000, burn=BURN)
    check_intervals(x, p, r, f"{policy} at r = {r}")
    if policy != "markov_nonoptimal" and r == 1.0:
        # Theorem 1 at r = 1: X' in {floor(n/m), floor(n/m) + 1} only
        assert set(np.unique(x)) <= {6, 7}
    # E|S| = n / E[X'] (= m for the calibrated sampler)
    size = counts.sum() / window
    se = math.sqrt(N) * count_se(p, r, window)
    expected = N * av.selection_rate_under(p, r)
    assert abs(size - expected) <= Z * se, (size, expected, se)
    if policy == "markov_available" or r == 1.0:
        assert expected == pytest.approx(M, rel=1e-12)


HETEROGENEOUS = np.repeat([1.0, 0.8, 0.5, 0.3, 0.1], 20)


@pytest.mark.parametrize("policy", POLICIES)
def test_heterogeneous_rates_give_each_client_its_own_rate(policy):
    """Rates set before round 0 (stationary start in each client's effective law, so no
    burn-in): each client's count over T rounds against T / E[X'_i] (5 renewal SEs per client,
    100 clients), each group of 20 pooled, and E|S| = sum_i 1 / E[X'_i]. The calibrated sampler
    keeps m/n wherever r_i >= m/n = 0.15 and reaches r_i = 0.1 below it."""
    rounds = 3000
    sampler = build(policy, seed=2)
    sampler.set_availability_rates(HETEROGENEOUS)
    chains_ = sampler.client_chains(HETEROGENEOUS)
    expected = np.array(
        [av.selection_rate_under(c, r) for c, r in zip(chains_, HETEROGENEOUS, strict=True)]
    )
    se = np.array([count_se(c, r, rounds) for c, r in zip(chains_, HETEROGENEOUS, strict=True)])
    assert np.prod(1 - expected) < 1e-4  # forced rounds negligible
    _, counts, window = drive(sampler, HETEROGENEOUS, k=0, rounds=rounds, seed=3)
    rate = counts / window
    assert (np.abs(rate - expected) <= Z * se).all(), np.c_[rate, expected, se]
    for g in range(5):
        group = slice(20 * g, 20 * g + 20)
        pooled_se = math.sqrt((se[group] ** 2).sum()) / 20
        assert abs(rate[group].mean() - expected[group].mean()) <= Z * pooled_se
    assert abs(rate.sum() - expected.sum()) <= Z * math.sqrt((se**2).sum())
    for c, r in zip(chains_, HETEROGENEOUS, strict=True):
        np.testing.assert_array_equal(c, sampler_chain(policy, r))
    if policy == "markov_available":
        assert isinstance(sampler, CalibratedMarkovSampler)
        np.testing.assert_allclose(expected[:80], M / N, rtol=1e-12)
        np.testing.assert_allclose(expected[80:], 0.1, rtol=1e-12)
    if policy == "markov_optimal":  # E[X'] = n/m - 1 + 1/r (Theorem 1's second case)
        np.testing.assert_allclose(1 / expected, RATIO - 1 + 1 / HETEROGENEOUS, rtol=1e-12)


def test_all_true_mask_has_the_law_of_the_renewal_mode():
    """The linear family (Var X = 11.6) run by sample() (renewal mode) and by sample(all True)
    (per-round mode): both against the closed forms and against each other (two-sample, 5
    SEs: sqrt(SE_a^2 + SE_b^2))."""
    results = {}
    for mask, seed in ((False, 4), (True, 5)):
        sampler = make_sampler("markov_nonoptimal", n=N, m=M, m_prime=MP, seed=seed)
        x, counts, window = drive(sampler, np.ones(N), k=300, rounds=2000, seed=seed, mask=mask)
        assert (sampler.state_dict()["chains"] is None) is not mask  # the mode each one ran in
        check_intervals(x, LINEAR, 1.0, f"mask={mask}")
        results[mask] = x, counts.sum() / window
    mean, var, mu4 = moments(LINEAR, 1.0)
    size = 300 * N
    (xa, sa), (xb, sb) = results[False], results[True]
    assert abs(xa.mean() - xb.mean()) <= Z * math.sqrt(2 * var / size)
    assert abs(xa.var() - xb.var()) <= Z * math.sqrt(2 * (mu4 - var**2) / size)
    se = math.sqrt(N) * count_se(LINEAR, 1.0, 2000)
    assert abs(sa - sb) <= Z * math.sqrt(2) * se
    assert abs(sa - M) <= Z * se and abs(sb - M) <= Z * se


def test_sample_without_mask_is_sample_none():
    a, b = markov_optimal(N, M, MP, seed=3), markov_optimal(N, M, MP, seed=3)
    for _ in range(50):
        sa, sb = a.sample(), b.sample(None)
        np.testing.assert_array_equal(sa.ids, sb.ids)
        np.testing.assert_array_equal(sa.weights, sb.weights)
    assert a.state_dict()["chains"] is None  # the renewal mode
    assert b.state_dict()["chains"] is None


def test_nobody_available_selects_nobody_and_a_lone_available_client_is_always_selected():
    """The forced selection picks among the available clients only: none when nobody is
    available (and every age grows), the lone available one otherwise (it selects itself or
    is forced)."""
    sampler = markov_available(N, M, MP, seed=12)
    sampler.set_availability_rates(np.full(N, 0.5))
    before = sampler.ages()
    assert sampler.sample(np.zeros(N, dtype=bool)).ids.size == 0
    np.testing.assert_array_equal(sampler.ages(), np.minimum(before + 1, MP))
    lone = np.zeros(N, dtype=bool)
    for i in (7, 42, 99):
        lone[:] = False
        lone[i] = True
        assert sampler.sample(lone).ids.tolist() == [i]
        assert sampler.ages()[i] == 0


# --- round 0 under availability rates ----------------------------------------------------------


@pytest.mark.parametrize("policy", ["markov_optimal", "markov_available"])
def test_rates_before_round_zero_start_in_the_effective_stationary_law(policy):
    """n = 12000 clients in groups of 3000 at r = 1, 0.8, 0.3 (and 0: never available). The
    round-0 ages of a group are iid draws of the stationary law of its effective chain r p:
    per age, 5 binomial SEs sqrt(N pi_a (1 - pi_a)) (an age of probability 0 never occurs). A
    client never available starts at age m'."""
    n, group = 12_000, 3000
    m = 1800  # n/m = 20/3, the paper's ratio
    rates_ = np.repeat([1.0, 0.8, 0.3, 0.0], group)
    sampler = build(policy, n=n, m=m, seed=6)
    sampler.set_availability_rates(rates_)
    ages = sampler.ages()
    for g, r in enumerate((1.0, 0.8, 0.3)):
        p = mk.optimal_p(n, m, MP) if policy == "markov_optimal" else av.calibrated_p(n, m, MP, r)
        law = av.stationary_distribution_under(p, r)
        counts = np.bincount(ages[g * group : (g + 1) * group], minlength=MP + 1)
        se = np.sqrt(group * law * (1 - law))
        assert (np.abs(counts - group * law) <= Z * se).all(), (r, counts, group * law)
    assert (ages[3 * group :] == MP).all()
    # and the rounds after that are the per-round chain: nobody unavailable is ever selected
    sel = sampler.sample(rates_ > 0)
    assert (rates_[sel.ids] > 0).all()


def test_zero_start_under_rates_starts_at_age_zero():
    sampler = markov_available(N, M, MP, seed=0, start="zero")
    sampler.set_availability_rates(np.full(N, 0.5))
    assert (sampler.ages() == 0).all()


# --- calibration ------------------------------------------------------------------------------

n_m = st.integers(1, 400).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n)))


@settings(deadline=None)
@given(nm=n_m, m_prime=st.integers(1, 40))
def test_calibrated_p_at_r_one_is_theorem_1_exactly(nm, m_prime):
    n, m = nm
    np.testing.assert_array_equal(av.calibrated_p(n, m, m_prime, 1.0), mk.optimal_p(n, m, m_prime))
    assert av.calibrated_ratio(n, m, m_prime, 1.0) == n / m


@settings(deadline=None)
@given(nm=n_m, m_prime=st.integers(1, 40), u=st.floats(0.0, 1.0))
def test_calibrated_chain_keeps_the_rate_for_r_in_m_over_n_to_one(nm, m_prime, u):
    n, m = nm
    r = m / n + u * (1 - m / n)
    p = av.calibrated_p(n, m, m_prime, r)
    assert av.interval_mean_under(p, r) == pytest.approx(n / m, rel=1e-12, abs=0)
    assert av.selection_rate_under(p, r) == pytest.approx(m / n, rel=1e-12, abs=0)
    rho = av.calibrated_ratio(n, m, m_prime, r)
    np.testing.assert_allclose(p, av.theorem1_p(rho, m_prime), rtol=0, atol=1e-12)
    assert 1.0 <= rho <= n / m + 1e-12


@settings(deadline=None)
@given(
    m=st.integers(1, 20),
    m_prime=st.integers(1, 15),
    extra=st.integers(1, 200),
    u=st.floats(1e-9, 1.0),
)
def test_first_case_is_reached_and_keeps_the_rate(m, m_prime, extra, u):
    """n/m - m' = 1 + extra/m > 1: for r >= r* = 1 / (n/m - m') rho = m' + r (n/m - m') is in
    Theorem 1's first case (floor(rho) >= m' + 1, p = (0, .., 0, 1/(rho - m'))). (u >= 1e-9
    keeps r clear of r* itself, where rounding may pick either case: both are p = (0, .., 0, 1).)"""
    n = m * (m_prime + 1) + extra
    ratio = n / m
    r_star = 1 / (ratio - m_prime)
    r = r_star + u * (1 - r_star)
    rho = av.calibrated_ratio(n, m, m_prime, r)
    assert rho >= m_prime + 1 - 1e-12
    assert rho == pytest.approx(m_prime + r * (ratio - m_prime), rel=1e-12)
    p = av.calibrated_p(n, m, m_prime, r)
    assert (p[:-1] == 0).all()
    assert av.interval_mean_under(p, r) == pytest.approx(ratio, rel=1e-12, abs=0)
    # the first case's variance: X' = m' + G, G geometric of success q = r / (rho - m')
    q = r / (rho - m_prime)
    assert av.interval_variance_under(p, r) == pytest.approx((1 - q) / q**2, rel=1e-9, abs=1e-9)


@settings(deadline=None)
@given(nm=n_m, m_prime=st.integers(1, 40), u=st.floats(0.0, 0.999))
def test_second_case_is_reached_and_keeps_the_rate(nm, m_prime, u):
    """For r in [m/n, min(1, r*)) rho = n/m + 1 - 1/r < m' + 1: Theorem 1's second case."""
    n, m = nm
    ratio = n / m
    hi = 1.0 if ratio - m_prime <= 1 else 1 / (ratio - m_prime)
    r = m / n + u * (hi - m / n)
    rho = av.calibrated_ratio(n, m, m_prime, r)
    assert rho < m_prime + 1
    assert rho == pytest.approx(max(ratio + 1 - 1 / r, 1.0), rel=1e-12, abs=1e-12)
    p = av.calibrated_p(n, m, m_prime, r)
    assert p[-1] == 1.0
    assert av.interval_mean_under(p, r) == pytest.approx(ratio, rel=1e-12, abs=0)


@pytest.mark.parametrize(
    ("n", "m", "m_prime", "r", "first"),
    [
        (100, 15, 10, 0.8, False),  # n/m = 6.67 <= m' + 1: always the second case
        (100, 15, 4, 0.3, False),  # rho = 6.67 + 1 - 3.33 = 4.33 < 5
        (100, 15, 4, 0.9, True),  # rho = 4 + 0.9 * 2.67 = 6.4 >= 5
        (100, 10, 3, 0.6, True),  # rho = 3 + 0.6 * 7 = 7.2
    ],
)
def test_both_cases_at_named_points(n, m, m_prime, r, first):
    rho = av.calibrated_ratio(n, m, m_prime, r)
    assert (rho >= m_prime + 1) is first
    p = av.calibrated_p(n, m, m_prime, r)
    assert abs(av.interval_mean_under(p, r) - n / m) <= 1e-12 * n / m


@settings(deadline=None)
@given(nm=n_m, m_prime=st.integers(1, 40), u=st.floats(1e-6, 1.0))
def test_below_m_over_n_calibration_selects_whenever_available(nm, m_prime, u):
    n, m = nm
    r = u * m / n
    if r >= m / n:  # rounding at u ~ 1
        return
    np.testing.assert_array_equal(av.calibrated_p(n, m, m_prime, r), np.ones(m_prime + 1))
    assert av.calibrated_ratio(n, m, m_prime, r) == 1.0
    assert av.selection_rate_under(np.ones(m_prime + 1), r) == pytest.approx(r, rel=1e-12)


@settings(deadline=None)
@given(
    nm=n_m,
    m_prime=st.integers(1, 40),
    r1=st.floats(1e-3, 1.0),
    dr=st.floats(0.0, 1e-2),
)
def test_calibrated_ratio_is_continuous_and_increasing_in_r(nm, m_prime, r1, dr):
    """rho(r) is non-decreasing, and Lipschitz on [r1, r2] with L = max(1/max(r1, m/n)^2, n/m):
    the second case's slope is 1/r^2 (r >= m/n there), the first case's n/m - m', and rho = 1
    (slope 0) below m/n. The vector p follows: theorem1_p is 1-Lipschitz in rho (sup norm)."""
    n, m = nm
    r2 = min(r1 + dr, 1.0)
    a, b = av.calibrated_ratio(n, m, m_prime, r1), av.calibrated_ratio(n, m, m_prime, r2)
    lipschitz = max(1 / max(r1, m / n) ** 2, n / m)
    assert a <= b + 1e-12 * b
    assert b - a <= lipschitz * (r2 - r1) + 1e-12 * b
    pa, pb = av.calibrated_p(n, m, m_prime, r1), av.calibrated_p(n, m, m_prime, r2)
    assert np.abs(pa - pb).max() <= b - a + 1e-12 * b
    assert (pb <= pa + 1e-12).all()  # every p_a non-increasing in r (rho grows with r)


@settings(deadline=None)
@given(nm=n_m, m_prime=st.integers(1, 40))
def test_calibration_is_continuous_at_r_one_and_at_the_case_boundary(nm, m_prime):
    n, m = nm
    ratio = n / m
    eps = 1e-9
    lipschitz = max(1 / (m / n) ** 2, ratio)
    near = av.calibrated_ratio(n, m, m_prime, 1 - eps)
    assert abs(near - ratio) <= lipschitz * eps + 1e-12 * ratio
    assert np.abs(av.calibrated_p(n, m, m_prime, 1 - eps) - mk.optimal_p(n, m, m_prime)).max() <= (
        lipschitz * eps + 1e-12 * ratio
    )
    if ratio - m_prime > 1:  # the boundary r* = 1/(n/m - m') lies in (m/n, 1)
        r_star = 1 / (ratio - m_prime)
        below = av.calibrated_ratio(n, m, m_prime, r_star * (1 - eps))
        above = av.calibrated_ratio(n, m, m_prime, r_star * (1 + eps))
        assert below <= m_prime + 1 <= above + 1e-12
        assert above - below <= lipschitz * 2 * eps * r_star + 1e-12 * ratio


def test_the_docstring_table():
    """n = 100, m = 15, m' = 10: E[X'] / Var[X'] of Theorem 1's p, rho / Var[X'] of the
    calibrated chain (whose E[X'] is n/m), and the memoryless n(n - m)/m^2, to the printed
    digits."""
    table = {  # r: (E[X'] of Theorem 1's p, its Var, calibrated rho, its Var)
        1.0: ("6.67", "0.222", "6.67", "0.222"),
        0.8: ("6.92", "0.535", "6.42", "0.556"),
        0.5: ("7.67", "2.22", "5.67", "2.22"),
        0.2: ("10.67", "20.2", "2.67", "20.2"),
    }
    p3 = mk.optimal_p(N, M, MP)
    for r, (mean, var, rho, cal_var) in table.items():
        assert f"{av.interval_mean_under(p3, r):.2f}" == mean
        assert f"{av.interval_variance_under(p3, r):.3g}" == var
        assert f"{av.calibrated_ratio(N, M, MP, r):.2f}" == rho
        assert f"{av.calibrated_variance(N, M, MP, r):.3g}" == cal_var
        cal = av.calibrated_p(N, M, MP, r)
        assert av.interval_mean_under(cal, r) == pytest.approx(RATIO, rel=1e-12)
    assert f"{mk.random_interval_variance(N, M):.3g}" == "37.8"
    # rho shifts by 1 - 1/r, an integer at r = 1/2 and 1/5: equal variances there
    for r in (0.5, 0.2):
        assert av.calibrated_variance(N, M, MP, r) == pytest.approx(
            av.interval_variance_under(p3, r), rel=1e-9
        )
    # at r = m/n the calibrated chain is memoryless with rate m/n: Var = n(n - m)/m^2
    assert av.calibrated_variance(N, M, MP, M / N) == pytest.approx(
        mk.random_interval_variance(N, M), rel=1e-9
    )


@settings(deadline=None)
@given(m_prime=st.integers(1, 40), v=st.floats(0.0, 1.0, exclude_max=True), r=st.floats(0.01, 1.0))
def test_second_case_variance_and_its_lower_bound(m_prime, v, r):
    """rho in [1, m' + 1): X' = i w.p. s = r (i + 1 - rho), else i + G (G geometric of success
    r on {1, 2, ..}), so E[X'] = rho - 1 + 1/r and Var[X'] = (1 - s)(1 - r + s)/r^2 >=
    (1 - r)/r^2 (concave in s, equal at s = 0 and s = r)."""
    rho = 1 + v * m_prime
    i = math.floor(rho)
    if i > m_prime:  # rounding at v ~ 1
        return
    p = av.theorem1_p(rho, m_prime)
    s = r * (i + 1 - rho)
    var = av.interval_variance_under(p, r)
    assert av.interval_mean_under(p, r) == pytest.approx(rho - 1 + 1 / r, rel=1e-12)
    assert var == pytest.approx((1 - s) * (1 - r + s) / r**2, rel=1e-9, abs=1e-9)
    assert var >= (1 - r) / r**2 - 1e-9 * (1 + var)


@settings(deadline=None)
@given(m_prime=st.integers(1, 40), extra=st.floats(1.0, 60.0), r=st.floats(0.01, 1.0))
def test_the_lower_bound_holds_in_the_first_case_too(m_prime, extra, r):
    """First case: q = r/(rho - m') <= r and (1 - q)/q^2 decreases in q: Var >= (1 - r)/r^2."""
    rho = m_prime + extra
    p = av.theorem1_p(rho, m_prime)
    var = av.interval_variance_under(p, r)
    assert var >= (1 - r) / r**2 - 1e-9 * (1 + var)


# --- theorem1_p ---------------------------------------------------------------------------------


@settings(deadline=None)
@given(rho=st.floats(1.0, 80.0), m_prime=st.integers(1, 40))
def test_theorem1_p_has_interval_mean_rho_and_theorem_1_variance(rho, m_prime):
    p = av.theorem1_p(rho, m_prime)
    assert mk.interval_mean(p) == pytest.approx(rho, rel=1e-12)
    i = math.floor(rho)
    if m_prime <= i - 1:  # first case
        assert (p[:-1] == 0).all() and p[-1] == pytest.approx(1 / (rho - m_prime), rel=1e-15)
        expected = (rho - m_prime) * (rho - m_prime - 1)
    else:
        c = rho - i
        expected = c * (1 - c)
    assert mk.interval_variance(p) == pytest.approx(expected, rel=1e-9, abs=1e-9)


@settings(deadline=None)
@given(nm=n_m, m_prime=st.integers(1, 40))
def test_theorem1_p_at_n_over_m_is_optimal_p(nm, m_prime):
    n, m = nm
    np.testing.assert_allclose(
        av.theorem1_p(n / m, m_prime), mk.optimal_p(n, m, m_prime), rtol=0, atol=1e-12
    )


@settings(deadline=None)
@given(rho=st.floats(1.0, 80.0), delta=st.floats(0.0, 1e-3), m_prime=st.integers(1, 40))
def test_theorem1_p_is_continuous_in_rho(rho, delta, m_prime):
    """Every entry is 1-Lipschitz in rho: i + 1 - rho has slope -1, 1/(rho - m') slope
    -1/(rho - m')^2 >= -1 (rho - m' >= 1), and the pieces meet at integer rho and at m' + 1."""
    a, b = av.theorem1_p(rho, m_prime), av.theorem1_p(rho + delta, m_prime)
    assert np.abs(a - b).max() <= delta + 1e-12


@pytest.mark.parametrize("m_prime", [1, 3, 10])
def test_theorem1_p_is_continuous_across_each_integer_and_the_case_boundary(m_prime):
    for k in range(2, m_prime + 4):
        below = av.theorem1_p(np.nextafter(float(k), 0.0), m_prime)
        at = av.theorem1_p(float(k), m_prime)
        assert np.abs(below - at).max() <= 1e-14


@settings(deadline=None)
@given(rho=st.floats(1.0, 80.0), delta=st.floats(0.0, 20.0), m_prime=st.integers(1, 40))
def test_theorem1_p_entries_do_not_increase_with_rho(rho, delta, m_prime):
    a, b = av.theorem1_p(rho, m_prime), av.theorem1_p(rho + delta, m_prime)
    assert (b <= a).all()


# --- errors -------------------------------------------------------------------------------------


def test_effective_p_refuses_p_m_prime_zero_under_r_below_one():
    p = np.array([0.5, 1.0, 0.0])  # a valid chain without availability: age 2 is unreachable
    np.testing.assert_array_equal(av.effective_p(p, 1.0), p)
    with pytest.raises(ValueError, match=r"p\[m'\] = p\[2\] = 0: under availability r = 0.5"):
        av.effective_p(p, 0.5)
    for f in (av.stationary_distribution_under, av.interval_mean_under, av.selection_rate_under):
        with pytest.raises(ValueError, match=r"p\[m'\] must be > 0"):
            f(p, 0.9)


@pytest.mark.parametrize(
    ("r", "error", "match"),
    [
        (0.0, ValueError, "r must be > 0"),
        (-0.5, ValueError, "r must be > 0"),
        (1.5, ValueError, "r must be <= 1"),
        (float("nan"), ValueError, "r must be finite"),
        ("0.5", TypeError, "r must be a real number"),
    ],
)
def test_bad_availability_rate_raises(r, error, match):
    with pytest.raises(error, match=match):
        av.effective_p(SMALL, r)
    with pytest.raises(error, match=match):
        av.calibrated_p(N, M, MP, r)


def test_theorem1_p_rejects_bad_arguments():
    with pytest.raises(ValueError, match="rho must be >= 1"):
        av.theorem1_p(0.9, 3)
    with pytest.raises(ValueError, match="m_prime"):
        av.theorem1_p(2.0, 0)


@pytest.mark.parametrize("policy", POLICIES)
def test_set_availability_rates_after_round_zero_raises(policy):
    sampler = build(policy)
    sampler.sample()
    with pytest.raises(RuntimeError, match="before the first round"):
        sampler.set_availability_rates(np.ones(N))


@pytest.mark.parametrize(
    "bad",
    [np.ones(N - 1), np.ones((N, 1)), np.full(N, 1.5), np.full(N, -0.1), np.full(N, np.nan)],
    ids=["short", "2d", "above_one", "negative", "nan"],
)
@pytest.mark.parametrize("policy", POLICIES)
def test_bad_rates_raise(policy, bad):
    sampler = build(policy)
    with pytest.raises(ValueError, match=r"rates must be 100 availability rates in \[0, 1\]"):
        sampler.set_availability_rates(bad)


def test_rates_that_would_strand_a_client_raise_and_change_nothing():
    """p = (1/2, 1, 0) is a chain without availability (age 2 is unreachable), but a client
    available with r < 1 can reach age 2 and stay there: refused, naming the client and its
    rate, and the refused call leaves the sampler as it was (the same state, the same draws)."""
    p = [0.5, 1.0, 0.0]
    sampler, fresh = MarkovSampler(p, 10, seed=11), MarkovSampler(p, 10, seed=11)
    before = json.dumps(sampler.state_dict())
    rates_ = np.r_[np.ones(3), 0.5, np.ones(6)]
    with pytest.raises(ValueError, match=r"client 3 runs p with p\[m'\] = p\[2\] = 0: .* r = 0.5"):
        sampler.set_availability_rates(rates_)
    assert json.dumps(sampler.state_dict()) == before
    for _ in range(20):
        np.testing.assert_array_equal(sampler.sample().ids, fresh.sample().ids)
    # r = 1 (age 2 unreachable) and r = 0 (never available: parked at age m') are fine
    ok = MarkovSampler(p, 10, seed=11)
    ok.set_availability_rates(np.r_[np.ones(5), np.zeros(5)])
    assert (ok.ages()[5:] == 2).all() and (ok.ages()[:5] <= 1).all()


def test_bad_masks_raise():
    sampler = markov_optimal(N, M, MP)
    with pytest.raises(ValueError, match="boolean mask"):
        sampler.sample(np.ones(N, dtype=int))
    with pytest.raises(ValueError, match="boolean mask"):
        sampler.sample(np.ones(N - 1, dtype=bool))


# --- checkpoints in the per-round mode ------------------------------------------------------------


def _masks(n, rounds, r, seed):
    rng = generator(seed, "test_availability_checkpoint")
    return [rng.random(n) < r for _ in range(rounds)]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("with_rates", [True, False], ids=["rates", "mask_switch"])
def test_state_round_trip_in_the_per_round_mode_continues_exactly(policy, with_rates):
    masks = _masks(N, 90, 0.6, 7)
    original = build(policy, seed=8)
    if with_rates:
        original.set_availability_rates(np.full(N, 0.6))
    for mask in masks[:40]:
        original.sample(mask)
    state = json.loads(json.dumps(original.state_dict()))
    assert state["chains"] is not None  # the per-round mode is part of the state
    after = [original.sample(mask).ids for mask in masks[40:]]
    restored = build(policy, seed=8)
    restored.load_state_dict(state)
    again = [restored.sample(mask).ids for mask in masks[40:]]
    assert all(np.array_equal(a, b) for a, b in zip(after, again, strict=True))
    np.testing.assert_array_equal(restored.ages(), original.ages())


def test_a_renewal_state_switches_the_same_way_after_loading():
    masks = _masks(N, 60, 0.5, 9)
    original = markov_optimal(N, M, MP, seed=10)
    for _ in range(20):
        original.sample()
    state = json.loads(json.dumps(original.state_dict()))
    assert state["chains"] is None
    restored = markov_optimal(N, M, MP, seed=10)
    restored.load_state_dict(state)
    for mask in masks:
        np.testing.assert_array_equal(original.sample(mask).ids, restored.sample(mask).ids)
