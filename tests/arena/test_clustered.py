"""Clustered Sampling (Fraboni et al., ICML 2021), Algorithms 1 and 2.

The defining constraints of the m distributions (rows sum to 1, client i's column to m p_i), on
hand cases and under hypothesis, for Algorithm 1 (sample size) and Algorithm 2 (update
similarity, including clients with m p_i > 1); the similarity measures against hand
computations; the groups as the largest subtrees of weight <= 1/m; the sampler's draws (Monte
Carlo of the hits against m p_i); reclustering, availability, checkpoints; and the paper's claim
that the aggregation weights vary less than under multinomial sampling.
"""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.cluster.hierarchy import linkage

from aoi_fl.aoi.samplers import Probabilistic
from aoi_fl.arena import clustered
from aoi_fl.arena.clustered import (
    SIMILARITIES,
    ClusteredBySimilarity,
    ClusteredBySize,
    group_distributions,
    similarity_distributions,
    similarity_matrix,
    size_distributions,
    weight_groups,
)
from aoi_fl.core.registry import AVAILABILITY_AWARE, SAMPLERS
from aoi_fl.core.seeding import generator
from aoi_fl.core.selection import check_available_selection

# Algorithm 2 hands the square similarity matrix to Ward's linkage as observations, on purpose
# (module docstring), which scipy warns about on every call
pytestmark = pytest.mark.filterwarnings(
    "ignore:The symmetric non-negative hollow observation matrix"
)

SIZES = np.array([100.0, 80.0, 60.0, 50.0, 40.0, 30.0, 20.0, 10.0, 5.0, 5.0])
N = SIZES.size
P = SIZES / SIZES.sum()
#: float round-off allowed in the row and column sums (sums of at most ~n + m terms <= m)
EXACT = 1e-12


def check_distributions(r, p, m):
    """The constraints of both algorithms: r >= 0, rows sum to 1, column i sums to m p_i; and
    no sliver: every positive entry is a real share of a client's mass, not the round-off of
    the cumulative sums (the shares here are multiples of m / (total size) >= 6e-7)."""
    assert r.shape == (m, p.size)
    assert (r >= 0).all()
    assert not ((r > 0) & (r < 1e-9)).any(), r[(r > 0) & (r < 1e-9)]
    np.testing.assert_allclose(r.sum(axis=1), 1.0, rtol=0, atol=EXACT * max(m, p.size))
    np.testing.assert_allclose(r.sum(axis=0), m * p, rtol=0, atol=EXACT * max(m, p.size))


@st.composite
def shares(draw, max_n=25, heavy=False):
    """Data shares p of random integer sizes and an m; ``heavy`` adds a few large clients, so
    that m p_i > 1 happens often."""
    n = draw(st.integers(1, max_n))
    sizes = np.array(draw(st.lists(st.integers(1, 1000), min_size=n, max_size=n)), dtype=float)
    if heavy:
        big = draw(st.lists(st.integers(0, n - 1), max_size=3))
        sizes[big] *= draw(st.integers(5, 60))
    m = draw(st.integers(1, n))
    return sizes / sizes.sum(), m


# --- Algorithm 1 --------------------------------------------------------------------------------


def test_size_distributions_on_hand_cases():
    np.testing.assert_allclose(  # m p = (1, 0.6, 0.4): the first client fills distribution 0
        size_distributions(np.array([0.5, 0.3, 0.2]), 2), [[1, 0, 0], [0, 0.6, 0.4]], atol=1e-15
    )
    np.testing.assert_allclose(  # m p = (0.8, 0.7, 0.5): client 1 overflows into distribution 1
        size_distributions(np.array([0.4, 0.35, 0.25]), 2),
        [[0.8, 0.2, 0], [0, 0.5, 0.5]],
        atol=1e-15,
    )
    np.testing.assert_allclose(  # by decreasing p; m p = 1.4 > 1 spreads over two
        size_distributions(np.array([0.1, 0.7, 0.2]), 2), [[0, 1, 0], [0.2, 0.4, 0.4]], atol=1e-15
    )
    np.testing.assert_allclose(  # ties: the smaller id first
        size_distributions(np.full(4, 0.25), 2), [[0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5]]
    )
    np.testing.assert_array_equal(size_distributions(np.array([1.0]), 1), [[1.0]])


@settings(max_examples=150, deadline=None)
@given(shares(heavy=True))
def test_size_distributions_rows_sum_to_one_and_columns_to_m_p(case):
    p, m = case
    r = size_distributions(p, m)
    check_distributions(r, p, m)
    # the pouring order: by decreasing p, each client over consecutive distributions, each
    # distribution over consecutive clients, so at most n + m - 1 entries are non-zero
    order = np.argsort(-p, kind="stable")
    nonzero = r[:, order] > 0
    for line in (*nonzero, *nonzero.T):
        where = np.flatnonzero(line)
        assert where.size == 0 or where[-1] - where[0] + 1 == where.size
    assert nonzero.sum() <= p.size + m - 1


def expected_hits_check(hits, rounds, mean, variance):
    """Mean hits per round against their expectation, within 5 standard deviations of a mean of
    ``rounds`` independent rounds, sqrt(variance / rounds) (a client with variance 0 is drawn a
    fixed number of times: exact up to float round-off)."""
    tol = 5 * np.sqrt(variance / rounds) + 1e-9
    assert np.all(np.abs(hits / rounds - mean) <= tol), (hits / rounds, mean, tol)


def test_size_sampler_draws_each_client_m_p_times_on_average():
    """Each cluster draws one client, so client i's hits are a sum of independent Bernoulli
    (r_{k,i}): mean sum_k r_{k,i} = m p_i, variance sum_k r_{k,i} (1 - r_{k,i})."""
    m, rounds = 4, 4000
    sampler = ClusteredBySize(SIZES, m=m, seed=1)
    r = size_distributions(P, m)
    np.testing.assert_array_equal(sampler.distributions(), r)
    hits = np.zeros(N)
    for _ in range(rounds):
        sel = sampler.sample()
        assert sel.hits.sum() == m  # every cluster draws under full availability
        np.testing.assert_array_equal(sel.weights, sel.hits / m)  # w_i = l_i / m
        assert math.isclose(sel.weights.sum(), 1.0, rel_tol=1e-15)
        hits[sel.ids] += sel.hits
    expected_hits_check(hits, rounds, m * P, (r * (1 - r)).sum(axis=0))
    assert hits[0] == rounds  # m p_0 = 1 in one distribution of its own: drawn every round


# --- similarity ---------------------------------------------------------------------------------


def test_similarity_matrix_against_hand_computations():
    u = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0], [-2.0, 0.0]])
    pi = math.pi
    arccos = np.array(  # the angle between the updates; 0 with the zero update (client 3)
        [
            [0, pi / 2, pi / 4, 0, pi],
            [pi / 2, 0, pi / 4, 0, pi / 2],
            [pi / 4, pi / 4, 0, 0, 3 * pi / 4],
            [0, 0, 0, 0, 0],
            [pi, pi / 2, 3 * pi / 4, 0, 0],
        ]
    )
    l2 = np.array(  # squared Euclidean distances
        [[0, 2, 1, 1, 9], [2, 0, 1, 1, 5], [1, 1, 0, 2, 10], [1, 1, 2, 0, 4], [9, 5, 10, 4, 0]]
    )
    l1 = np.array(
        [[0, 2, 1, 1, 3], [2, 0, 1, 1, 3], [1, 1, 0, 2, 4], [1, 1, 2, 0, 2], [3, 3, 4, 2, 0]]
    )
    np.testing.assert_allclose(similarity_matrix(u), arccos, atol=1e-7)
    np.testing.assert_allclose(similarity_matrix(u, "arccos"), arccos, atol=1e-7)
    np.testing.assert_allclose(similarity_matrix(u, "L2"), l2, atol=1e-12)
    np.testing.assert_array_equal(similarity_matrix(u, "L1"), l1)
    with pytest.raises(ValueError, match="unknown similarity 'cosine'; valid: L1, L2, arccos"):
        similarity_matrix(u, "cosine")


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(1, 6), st.integers(0, 2**16))
def test_similarity_matrix_agrees_with_a_direct_computation(n, dim, seed):
    u = generator(seed, "test updates").normal(size=(n, dim))
    u[generator(seed, "test zeros").random(n) < 0.2] = 0.0  # some clients never sampled
    norms = np.linalg.norm(u, axis=1)
    for name in SIMILARITIES:
        d = similarity_matrix(u, name)
        assert d.shape == (n, n) and np.all(np.diag(d) == 0) and (d >= 0).all()
        np.testing.assert_allclose(d, d.T, atol=1e-12)
        for i in range(n):
            for j in range(n):
                if name == "L1":
                    want = np.abs(u[i] - u[j]).sum()
                elif name == "L2":
                    want = ((u[i] - u[j]) ** 2).sum()
                elif i == j or norms[i] == 0 or norms[j] == 0:
                    want = 0.0
                else:
                    cos = u[i] @ u[j] / (norms[i] * norms[j])
                    want = math.acos(min(1.0, max(-1.0, cos)))
                assert d[i, j] == pytest.approx(want, abs=1e-7), (name, i, j)


# --- Algorithm 2 --------------------------------------------------------------------------------


def leaves_below(tree, n):
    """The clients under every node of a scipy linkage matrix (leaves 0..n-1, then merges)."""
    leaves = [{i} for i in range(n)]
    for a, b in tree[:, :2].astype(int):
        leaves.append(leaves[a] | leaves[b])
    return leaves


@settings(max_examples=60, deadline=None)
@given(shares(max_n=16, heavy=True), st.integers(0, 2**16), st.sampled_from(SIMILARITIES))
def test_groups_are_the_largest_subtrees_of_weight_at_most_one_over_m(case, seed, similarity):
    p, m = case
    n = p.size
    if n < 2:
        return
    u = generator(seed, "test updates").normal(size=(n, 3))
    tree = linkage(similarity_matrix(u, similarity), method="ward")
    labels = weight_groups(tree, p, m)
    assert labels.shape == (n,) and set(labels.tolist()) == set(range(labels.max() + 1))
    leaves = leaves_below(tree, n)
    weight = [p[list(node)].sum() for node in leaves]
    fits = [m * w <= 1 + 1e-12 for w in weight]
    for node, members in enumerate(leaves):  # a subtree that fits lies in one group
        if fits[node]:
            assert len({labels[i] for i in members}) == 1
    for g in range(labels.max() + 1):  # and each group is a fitting subtree or a heavy client
        members = set(np.flatnonzero(labels == g).tolist())
        assert members in [leaves[k] for k in range(2 * n - 1) if fits[k]] or (
            len(members) == 1 and not fits[next(iter(members))]
        )


@settings(max_examples=80, deadline=None)
@given(shares(max_n=20, heavy=True), st.integers(0, 2**16), st.sampled_from(SIMILARITIES))
def test_similarity_distributions_rows_sum_to_one_and_columns_to_m_p(case, seed, similarity):
    p, m = case
    n = p.size
    u = generator(seed, "test updates").normal(size=(n, 4))
    u[generator(seed, "test zeros").random(n) < 0.3] = 0.0
    r = similarity_distributions(u, p, m, generator(seed, "test alloc"), similarity)
    check_distributions(r, p, m)


@settings(max_examples=60, deadline=None)
@given(shares(max_n=14, heavy=True), st.integers(0, 2**16))
def test_group_distributions_for_any_grouping_including_m_p_above_one(case, seed):
    """Whatever the groups (here random labels), the allocation keeps both sums, and every kept
    group's clients fill whole distributions of their own (m p of a group <= its rows)."""
    p, m = case
    groups = generator(seed, "test groups").integers(0, 4, p.size)
    groups = np.unique(groups, return_inverse=True)[1]
    r = group_distributions(groups, p, m, generator(seed, "test alloc"))
    check_distributions(r, p, m)
    heavy = np.flatnonzero(m * p > 1)
    assert heavy.size == 0 or (r[:, heavy] > 0).sum(axis=0).min() >= 2  # spread over >= 2 rows


def test_group_distributions_on_a_hand_case():
    """m = 2, masses m p = (0.6, 0.4, 0.3, 0.3, 0.2, 0.2) in groups {0} {1} {2} {3} {4, 5}: the
    two heaviest groups {0} and {1} (0.4 tied with {4, 5}: smaller id) keep a distribution, the
    lighter in distribution 0; the others, lightest first ({3}, {2}, {4, 5}), fill the room left
    (0.6, then 0.4) in order, whatever the random order within {4, 5}."""
    p = np.array([0.3, 0.2, 0.15, 0.15, 0.1, 0.1])
    groups = np.array([0, 1, 2, 3, 4, 4])
    want = [[0, 0.4, 0.3, 0.3, 0, 0], [0.6, 0, 0, 0, 0.2, 0.2]]
    for seed in range(3):
        r = group_distributions(groups, p, 2, generator(seed, "test alloc"))
        np.testing.assert_allclose(r, want, atol=1e-15)


def test_heavy_client_in_algorithm_2_takes_consecutive_distributions():
    p = np.array([0.6, 0.1, 0.1, 0.1, 0.1])  # m p_0 = 1.8 > 1: two distributions
    u = np.eye(5)
    r = similarity_distributions(u, p, 3, generator(0, "test alloc"))
    check_distributions(r, p, 3)
    rows = np.flatnonzero(r[:, 0] > 0)
    assert rows.size == 2 and rows[1] == rows[0] + 1
    assert sorted(r[rows, 0].tolist()) == pytest.approx([0.8, 1.0])


def test_identical_updates_land_in_the_same_group_when_the_weights_allow():
    """Four directions, two clients each (the second a scaled copy, the same under arccos):
    with m = 3 a pair weighs 1/4 <= 1/3 and two pairs 1/2 > 1/3, so the groups are the pairs."""
    rng = generator(3, "test updates")
    directions = rng.normal(size=(4, 6))
    u = np.repeat(directions, 2, axis=0) * np.tile([1.0, 3.0], 4)[:, None]
    p = np.full(8, 1 / 8)
    pairs = np.repeat(np.arange(4), 2)
    tree = linkage(similarity_matrix(u), method="ward")
    labels = weight_groups(tree, p, 3)
    assert np.unique(labels).size == 4
    for k in range(4):
        assert np.unique(labels[pairs == k]).size == 1
    for similarity in ("L2", "L1"):  # exact copies are identical under every measure
        same = np.repeat(directions, 2, axis=0)
        labels = weight_groups(linkage(similarity_matrix(same, similarity), "ward"), p, 3)
        assert all(np.unique(labels[pairs == k]).size == 1 for k in range(4))
    # the 3 heaviest (tied: smallest ids first) pairs keep a distribution each, the last pair
    # fills the room of 1/4 left in each
    r = similarity_distributions(u, p, 3, generator(0, "test alloc"))
    check_distributions(r, p, 3)
    for k in range(3):
        row = np.flatnonzero(r[:, 2 * k] > 0)
        assert row.size == 1 and np.all(r[row[0], 2 * k : 2 * k + 2] == 3 / 8)
    # when the weights do not allow (a pair of 1/4 > 1/m = 1/5), the pair is split
    labels = weight_groups(tree, p, 5)
    assert np.unique(labels).size == 8


def test_clustered_by_similarity_groups_clients_by_their_fed_back_updates():
    rng = generator(4, "test updates")
    directions = rng.normal(size=(4, 6))
    sampler = ClusteredBySimilarity(np.ones(8), m=3, seed=2)
    sampler.sample()  # round 0: nobody has an update yet (all zero)
    u = np.repeat(directions, 2, axis=0) * np.tile([1.0, 2.0], 4)[:, None]
    sampler.feedback_updates(np.arange(8), u)
    sampler.sample()
    r = sampler.distributions()
    check_distributions(r, np.full(8, 1 / 8), 3)
    kept = [k for k in range(4) if (r[:, 2 * k] > 0).sum() == 1]
    assert len(kept) == 3  # three pairs in a distribution of their own, each pair together
    for k in kept:
        assert np.array_equal(r[:, 2 * k] > 0, r[:, 2 * k + 1] > 0)


def test_similarity_sampler_draws_each_client_m_p_times_on_average():
    """Reclustered every round (a fresh random allocation of the light groups each time): the
    column sums stay m p_i, so E[hits_i] = m p_i; the per-round variance sum_k r_{k,i}
    (1 - r_{k,i}) is at most m p_i (1 - p_i) (Cauchy-Schwarz: sum_k r_{k,i}^2 >= (m p_i)^2 / m),
    which bounds the tolerance."""
    m, rounds = 4, 800
    sampler = ClusteredBySimilarity(SIZES, m=m, seed=5)
    u = generator(5, "test updates").normal(size=(N, 5))
    sampler.feedback_updates(np.arange(N), u)
    hits = np.zeros(N)
    for _ in range(rounds):
        sel = sampler.sample()
        assert sel.hits.sum() == m
        np.testing.assert_array_equal(sel.weights, sel.hits / m)
        hits[sel.ids] += sel.hits
    expected_hits_check(hits, rounds, m * P, m * P * (1 - P))


@pytest.mark.parametrize("every", [1, 3])
def test_reclusters_every_recluster_every_rounds(monkeypatch, every):
    calls = []
    original = clustered.similarity_distributions

    def counted(updates, p, m, rng, similarity="arccos"):
        calls.append((sampler.round, updates.copy()))
        return original(updates, p, m, rng, similarity)

    monkeypatch.setattr(clustered, "similarity_distributions", counted)
    sampler = ClusteredBySimilarity(SIZES, m=3, seed=1, recluster_every=every)
    rng = generator(1, "test updates")
    for _ in range(10):
        sel = sampler.sample()
        sampler.feedback_updates(sel.ids, rng.normal(size=(len(sel), 4)))
    assert [t for t, _ in calls] == list(range(0, 10, every))
    np.testing.assert_array_equal(calls[0][1], np.zeros((N, 1)))  # no update yet: all zero
    # each reclustering sees the updates fed back so far
    assert all(u.shape == (N, 4) for _, u in calls[1:])


# --- the paper's claim --------------------------------------------------------------------------


def test_weights_vary_less_than_under_multinomial_sampling():
    """sum_i Var(w_i): multinomial sampling (m draws from p, w_i = l_i / m) has p_i (1 - p_i) / m
    per client; clustered sampling sum_k r_{k,i} (1 - r_{k,i}) / m^2, here 0.104 against 0.210.
    Monte Carlo of both over B = 10 batches of 400 rounds (sample variances, ddof 1: each batch
    estimate unbiased); each mean within 5 standard errors (std of the batch estimates / sqrt(B))
    of its closed form, and the gap more than 20 standard errors of the difference."""
    m, batches, per_batch = 4, 10, 400
    r = size_distributions(P, m)
    exact = {
        "multinomial": (P * (1 - P)).sum() / m,
        "clustered": (r * (1 - r)).sum() / m**2,
    }
    assert exact["clustered"] < 0.5 * exact["multinomial"]
    samplers = {
        "multinomial": Probabilistic(SIZES, m=m, seed=7),
        "clustered": ClusteredBySize(SIZES, m=m, seed=7),
    }
    estimates = {}
    for name, sampler in samplers.items():
        stats = []
        for _ in range(batches):
            w = np.array([sampler.sample().dense(N) for _ in range(per_batch)])
            assert np.allclose(w.sum(axis=1), 1.0)
            stats.append(w.var(axis=0, ddof=1).sum())
        estimates[name] = (np.mean(stats), np.std(stats, ddof=1) / math.sqrt(batches))
    for name, (mean, se) in estimates.items():
        assert abs(mean - exact[name]) <= 5 * se, (name, mean, exact[name], se)
    (mm, sm), (mc, sc) = estimates["multinomial"], estimates["clustered"]
    assert mm - mc > 20 * math.hypot(sm, sc)


# --- availability -------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [ClusteredBySize, ClusteredBySimilarity])
def test_availability_restricts_the_clusters_to_the_available_clients(cls):
    m = 4
    sampler = cls(SIZES, m=m, seed=3)
    used = []  # the distributions of each round
    distributions = sampler.distributions
    sampler.distributions = lambda: used.append(distributions()) or used[-1]
    rng = generator(3, "test masks")
    for _ in range(40):
        available = rng.random(N) < 0.5
        sel = check_available_selection(sampler.sample(available), available)
        r = used[-1]
        drawing = int(((r * available) > 0).any(axis=1).sum())  # clusters with a member left
        assert sel.hits.sum() == drawing
        if drawing:
            np.testing.assert_allclose(sel.weights, sel.hits / drawing)
            assert math.isclose(sel.weights.sum(), 1.0)
        if cls is ClusteredBySimilarity:
            sampler.feedback_updates(sel.ids, rng.normal(size=(len(sel), 3)))
    sel = sampler.sample(np.zeros(N, dtype=bool))
    assert len(sel) == 0 and sel.weights.size == 0
    with pytest.raises(ValueError, match="available must be a boolean mask"):
        sampler.sample(np.ones(N))


@pytest.mark.parametrize(("n", "m"), [(30, 3), (12, 4), (100, 10)])
def test_a_cluster_whose_members_are_all_away_draws_nothing_with_equal_sizes(n, m):
    """Equal sizes: m p_i = m / n, and 10 (or 3) clients fill a distribution exactly. The
    cumulative sums of m / n round (0.1 * 10 = 0.9999999999999999), which must not leave a
    sliver of the next client in the distribution: with all its real members away, a cluster
    draws nothing (a sliver would be drawn for certain after renormalisation)."""
    r = size_distributions(np.full(n, 1 / n), m)
    check_distributions(r, np.full(n, 1 / n), m)
    per = n // m
    for k in range(m):  # distribution k: exactly the clients k * per, ..., (k + 1) * per - 1
        np.testing.assert_array_equal(np.flatnonzero(r[k]), np.arange(k * per, (k + 1) * per))
    sampler = ClusteredBySize(np.ones(n), m=m, seed=0)
    available = np.ones(n, dtype=bool)
    available[:per] = False  # every member of cluster 0
    for _ in range(200):
        sel = check_available_selection(sampler.sample(available), available)
        assert sel.hits.sum() == m - 1
        np.testing.assert_allclose(sel.weights, sel.hits / (m - 1))


def test_under_availability_each_cluster_draws_among_its_available_members():
    """E[hits_i] = sum_k r_{k,i} a_i / sum_j r_{k,j} a_j (each cluster renormalised over its
    available members); Monte Carlo within 5 standard deviations as above."""
    m, rounds = 4, 3000
    available = np.ones(N, dtype=bool)
    available[[1, 4, 7]] = False
    r = size_distributions(P, m) * available
    q = r / r.sum(axis=1, keepdims=True)
    sampler = ClusteredBySize(SIZES, m=m, seed=8)
    everyone = ClusteredBySize(SIZES, m=m, seed=8)
    hits = np.zeros(N)
    for _ in range(rounds):
        sel = sampler.sample(available)
        hits[sel.ids] += sel.hits
    expected_hits_check(hits, rounds, q.sum(axis=0), (q * (1 - q)).sum(axis=0))
    # an all-true mask is no mask: the same draws
    a, b = ClusteredBySize(SIZES, m=m, seed=8), everyone
    for _ in range(50):
        sa, sb = a.sample(np.ones(N, dtype=bool)), b.sample()
        np.testing.assert_array_equal(sa.ids, sb.ids)
        np.testing.assert_array_equal(sa.hits, sb.hits)


# --- checkpoints --------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [ClusteredBySize, ClusteredBySimilarity])
@pytest.mark.parametrize("before", [0, 1, 4])
def test_state_round_trip_through_json_continues_the_same_sequence(cls, before):
    options = {"recluster_every": 3, "similarity": "L2"} if cls is ClusteredBySimilarity else {}
    table = generator(2, "test updates").normal(size=(30, N, 5))
    masks = generator(2, "test masks").random((30, N)) < 0.7

    def step(sampler, t):
        sel = sampler.sample(masks[t])
        if cls is ClusteredBySimilarity:
            sampler.feedback_updates(sel.ids, table[t][sel.ids])
        return sel

    a = cls(SIZES, m=3, seed=2, **options)
    for t in range(before):
        step(a, t)
    state = json.loads(json.dumps(a.state_dict(), allow_nan=False))
    b = cls(SIZES, m=3, seed=2, **options)
    b.load_state_dict(state)
    for t in range(before, 30):
        sa, sb = step(a, t), step(b, t)
        np.testing.assert_array_equal(sa.ids, sb.ids)
        np.testing.assert_array_equal(sa.weights, sb.weights)
    assert a.state_dict() == b.state_dict()


def test_bad_states_are_refused():
    a = ClusteredBySimilarity(SIZES, m=3, seed=2)
    sel = a.sample()
    a.feedback_updates(sel.ids, np.ones((len(sel), 2)))
    good = a.state_dict()
    for change, message in (
        ({"seen": good["seen"][:-1]}, "state\\['seen'\\]"),
        ({"seen": [N] * len(good["seen"])}, "state\\['seen'\\]"),
        ({"distributions": [[1.0] * N]}, "state\\['distributions'\\] must be 3 x 10"),
        ({"dim": 0}, "state\\['dim'\\] must be >= 1"),
    ):
        with pytest.raises(ValueError, match=message):
            a.load_state_dict({**good, **change})
    with pytest.raises(ValueError, match="lacks the entries \\['distributions'\\]"):
        a.load_state_dict({k: v for k, v in good.items() if k != "distributions"})
    with pytest.raises(ValueError, match="cannot be loaded"):
        ClusteredBySize(SIZES, m=3, seed=2).load_state_dict(good)
    assert a.state_dict() == good


# --- parameters ---------------------------------------------------------------------------------


def test_bad_parameters_raise_naming_the_parameter():
    with pytest.raises(ValueError, match="unknown similarity"):
        ClusteredBySimilarity(SIZES, m=3, similarity="cos")
    with pytest.raises(ValueError, match="recluster_every must be >= 1"):
        ClusteredBySimilarity(SIZES, m=3, recluster_every=0)
    for cls in (ClusteredBySize, ClusteredBySimilarity):
        with pytest.raises(ValueError, match="m must be <= n"):
            cls(SIZES, m=N + 1)
        with pytest.raises(ValueError, match="sizes"):
            cls([1.0, -2.0], m=1)
    with pytest.raises(ValueError, match="m must be <= n"):
        size_distributions(P, N + 1)
    sampler = ClusteredBySimilarity(SIZES, m=3)
    with pytest.raises(ValueError, match="one row per id"):
        sampler.feedback_updates(np.arange(3), np.ones((2, 4)))
    with pytest.raises(ValueError, match="ids must be client indices"):
        sampler.feedback_updates(np.array([0, N]), np.ones((2, 4)))
    sampler.feedback_updates(np.arange(2), np.ones((2, 4)))
    with pytest.raises(ValueError, match="must have 4 entries per client"):
        sampler.feedback_updates(np.arange(2), np.ones((2, 5)))


@pytest.mark.parametrize("cls", [ClusteredBySize, ClusteredBySimilarity])
def test_registered_availability_aware_and_built_from_a_configuration(cls):
    assert cls.name in AVAILABILITY_AWARE and cls.availability_aware
    assert cls.wants_updates == (cls is ClusteredBySimilarity) and not cls.wants_losses
    sampler = SAMPLERS[cls.name](N, SIZES, m=3, seed=2)
    assert type(sampler) is cls and sampler.config()["m"] == 3
    with pytest.raises(ValueError, match="one size per client"):
        SAMPLERS[cls.name](N + 1, SIZES, m=3)
