"""Tests of aoi_fl.agnostic.algorithms: participation processes, induced weights (eq. 2, Lemma 1),
the agnostic and weighted aggregation rules (Algorithm 1, eq. 10), and what agnostic FedAvg
solves."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from aoi_fl.agnostic import algorithms as agnostic
from aoi_fl.agnostic import samplers as participation
from aoi_fl.aoi.samplers import make_sampler
from aoi_fl.core.algorithms import ClientUpdates, project_onto_ball
from aoi_fl.core.models import build_model
from aoi_fl.core.train import ConstantLR, FederatedData, FederatedTrainer, TrainSettings
from aoi_fl.data import synthetic
from aoi_fl.evidence.agnostic import experiments as ax
from aoi_fl.evidence.agnostic import results as ar


def test_exponential_prior():
    w = participation.exponential_prior(4, 2.0)
    np.testing.assert_allclose(w, np.exp(-np.arange(1, 5) / 2) / np.exp(-np.arange(1, 5) / 2).sum())
    np.testing.assert_allclose(participation.exponential_prior(5, float("inf")), np.full(5, 0.2))
    with pytest.raises(ValueError, match="tau must be > 0"):
        participation.exponential_prior(5, 0.0)


def test_exact_prior_weights_small_cases():
    # m = 1: one draw from the prior itself
    w = np.array([0.5, 0.3, 0.2])
    inclusion, p = agnostic.exact_prior_weights(w, 1)
    np.testing.assert_allclose(inclusion, w)
    np.testing.assert_allclose(p, w)
    # n = 3, m = 2: client 0 is left out only when 1 and 2 are drawn
    inclusion, p = agnostic.exact_prior_weights(w, 2)
    out0 = 0.3 * 0.2 / 0.7 + 0.2 * 0.3 / 0.8
    assert inclusion[0] == pytest.approx(1 - out0)
    # catches a wrong draw probability for any client (a sum-to-one check cannot: the
    # enumeration adds each sequence's probability to m entries, so it sums to m by construction)
    hand = [1 - (0.3 * 0.2 / 0.7 + 0.2 * 0.3 / 0.8), 1 - (0.5 * 0.2 / 0.5 + 0.2 * 0.5 / 0.8)]
    hand.append(1 - (0.5 * 0.3 / 0.5 + 0.3 * 0.5 / 0.7))  # P(i in S) = 1 - P(the other two)
    np.testing.assert_allclose(inclusion, hand, rtol=1e-12)
    np.testing.assert_allclose(p, np.array(hand) / 2, rtol=1e-12)  # p_i = P(i in S) / m
    # m = n: everybody, always
    np.testing.assert_allclose(agnostic.exact_prior_weights(w, 3)[0], np.ones(3))
    with pytest.raises(ValueError, match="n <= 10"):
        agnostic.exact_prior_weights(np.ones(11), 2)


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(n=st.integers(2, 7), data=st.data())
def test_prior_sampler_marginals_match_enumeration(n, data):
    m = data.draw(st.integers(1, n))
    tau = data.draw(st.floats(0.5, 5.0))
    w = participation.exponential_prior(n, tau)
    inclusion, p = agnostic.exact_prior_weights(w, m)
    draws = 20_000
    got_inclusion, got_p = agnostic.inclusion_and_induced(
        participation.PriorSampler(w, m, seed=data.draw(st.integers(0, 99))), draws
    )
    # binomial standard error of a frequency <= 0.5 / sqrt(draws); 5 sigma
    tol = 5 * 0.5 / np.sqrt(draws)
    np.testing.assert_allclose(got_inclusion, inclusion, atol=tol)
    np.testing.assert_allclose(got_p, p, atol=tol / m)
    assert got_p.sum() == pytest.approx(1.0)


def test_prior_sampler_selections_and_checks():
    s = participation.prior_sampler(100, m=10, tau=10.0, seed=3)
    sel = [s.sample() for _ in range(50)]
    assert all(len(x) == 10 and np.all(np.diff(x.ids) > 0) for x in sel)
    assert all(np.allclose(x.weights, 0.1) for x in sel)
    # deterministic and resumable
    t = participation.prior_sampler(100, m=10, tau=10.0, seed=3)
    assert all(np.array_equal(a.ids, t.sample().ids) for a in sel)
    state = t.state_dict()
    u = participation.prior_sampler(100, m=10, tau=10.0, seed=3)
    u.load_state_dict(state)
    assert np.array_equal(u.sample().ids, t.sample().ids)
    # the low indices dominate
    counts = np.bincount(np.concatenate([x.ids for x in sel]), minlength=100)
    assert counts[:10].sum() > counts[50:].sum()
    with pytest.raises(ValueError, match="only 2 have a positive weight"):
        participation.PriorSampler([1.0, 1.0, 0.0], 3)
    with pytest.raises(ValueError, match="m must be <= n"):
        participation.PriorSampler([1.0, 1.0], 3)


def _successive_pairs(w):
    """P(i in S) for 2 successive draws from prior w, in closed form (independent of the
    enumeration): drawn first (w_i), or second after some j (w_j w_i / (1 - w_j))."""
    w = np.asarray(w, dtype=float) / np.sum(w)
    second = np.array(
        [sum(w[j] * w[i] / (1 - w[j]) for j in range(w.size) if j != i) for i in range(w.size)]
    )
    return w + second


def test_exact_prior_weights_match_the_closed_form_for_two_draws():
    # catches an enumeration that mis-weights a sequence (wrong renormalisation after a draw)
    for w in (participation.exponential_prior(6, 1.5), [0.05, 0.1, 0.15, 0.2, 0.5]):
        inclusion, p = agnostic.exact_prior_weights(w, 2)
        np.testing.assert_allclose(inclusion, _successive_pairs(w), rtol=1e-12)
        np.testing.assert_allclose(p, _successive_pairs(w) / 2, rtol=1e-12)


# Independent oracles of p_i = E[1(i in S) / |S|] (eq. 2) for tiny cases:
# - prior, 2 draws: P(i in S) / 2 with the closed form above;
# - probabilistic (2 draws with replacement, q = d / sum d): S = {i} w.p. q_i^2 (share 1),
#   S = {i, j} w.p. 2 q_i q_j (share 1/2), so p_i = q_i^2 + q_i (1 - q_i) = q_i exactly.
ORACLES = {
    "prior": (
        lambda: participation.PriorSampler(participation.exponential_prior(5, 1.5), 2, seed=1),
        _successive_pairs(participation.exponential_prior(5, 1.5)) / 2,
    ),
    "probabilistic": (
        lambda: make_sampler("probabilistic", n=4, m=2, sizes=np.array([1, 2, 3, 4]), seed=1),
        np.array([0.1, 0.2, 0.3, 0.4]),
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ORACLES))
def test_induced_weights_match_an_exact_oracle(name):
    # catches p estimated with the wrong share (1/m instead of 1/|S|, hits instead of shares,
    # the wrong denominator): a sum-to-one check passes for shares / nonempty by construction
    build, exact = ORACLES[name]
    rounds = 40_000
    p = agnostic.induced_weights(build(), rounds)
    # per round the share 1(i in S)/|S| lies in [0, 1], so its variance is <= p_i (1 - p_i)
    tol = 5 * np.sqrt(exact * (1 - exact) / rounds)
    np.testing.assert_array_less(np.abs(p - exact), tol)


def test_induced_weights_of_a_deterministic_cycle_are_exact():
    # S_t cycles through {0}, {0, 1}, {1, 2, 3}: over whole cycles p is exact, with
    # p_0 = (1 + 1/2) / 3, p_1 = (1/2 + 1/3) / 3, p_2 = p_3 = (1/3) / 3
    cycle = [[0], [0, 1], [1, 2, 3]]
    sampler = participation.ProcessSampler(4, lambda t, rng: cycle[t % 3])
    inclusion, p = agnostic.inclusion_and_induced(sampler, 300)
    # catches a p that weights every selected client alike (hits / total hits gives 1/3, 1/3,
    # 1/6, 1/6) or divides by a fixed m instead of |S_t|
    np.testing.assert_allclose(p, [1.5 / 3, (1 / 2 + 1 / 3) / 3, 1 / 9, 1 / 9], rtol=1e-12)
    np.testing.assert_allclose(inclusion, [2 / 3, 2 / 3, 1 / 3, 1 / 3], rtol=1e-12)


@pytest.mark.slow
def test_induced_weights_of_symmetric_policies_are_uniform():
    # n/m = 6.67 is not an integer: the optimal chain is random and mixes, so over many rounds
    # every client gets the same share (with an integer n/m it is a deterministic cycle whose
    # phase groups, drawn once, keep their unequal sizes)
    p = agnostic.induced_weights(make_sampler("markov_optimal", n=20, m=3, seed=0), 20_000)
    # catches a chain that favours some clients: measured over seeds 0-11 the skew of this
    # estimate is 0.0150 on average (sd 0.0025, max 0.0206; seed 0: 0.0139), pure sampling
    # noise; the bound is that mean + 4 sd. A chain that does not mix (n/m = 7, an integer)
    # gives 0.19-0.67, and one client chosen 50% more often than the others adds ~0.046.
    assert agnostic.l1_skew(p) < 0.025
    assert agnostic.l1_skew(np.full(20, 0.05)) == 0.0
    assert agnostic.l1_skew(np.eye(4)[0]) == pytest.approx(1.5)  # 2 - 2/N


def test_process_sampler_and_empty_rounds():
    s = participation.ProcessSampler(5, lambda t, rng: [] if t % 2 else [t % 5, 4])
    inclusion, p = agnostic.inclusion_and_induced(s, 10)
    np.testing.assert_allclose(
        inclusion.sum(), np.mean([0 if t % 2 else 2 - (t % 5 == 4) for t in range(10)])
    )
    # conditioned on the 5 non-empty rounds: S = {0, 4}, {2, 4}, {4}, {1, 4}, {3, 4}; catches
    # dividing by all 10 rounds (p would sum to 1/2) or counting empty rounds as |S| = 1
    np.testing.assert_allclose(p, [0.1, 0.1, 0.1, 0.1, 0.6], rtol=1e-12)
    bad = participation.ProcessSampler(3, lambda t, rng: [3])
    with pytest.raises(ValueError, match=r"outside \[0, 3\)"):
        bad.sample()
    with pytest.raises(ValueError, match="selected nobody"):
        agnostic.induced_weights(participation.ProcessSampler(3, lambda t, rng: []), 5)


def updates(ids, params):
    stacked = {"w": torch.tensor(params, dtype=torch.float32)[:, None]}
    start = {"w": torch.zeros_like(stacked["w"])}
    n = len(ids)
    ids = np.asarray(ids)
    return ClientUpdates(0, 0.1, ids, np.full(n, 0.123), start, stacked, {}, np.ones(n))


def test_agnostic_aggregation_is_the_plain_mean():
    glob = {"w": torch.tensor([[5.0]])}
    new = agnostic.AgnosticFedAvg().aggregate(glob, updates([1, 4, 6], [1.0, 2.0, 6.0]))
    assert new["w"].item() == pytest.approx(3.0)  # the sampler's weights are ignored
    empty = agnostic.AgnosticFedAvg().aggregate(glob, updates([], np.zeros((0, 1))))
    assert empty is glob


def test_weighted_aggregation_is_eq10_and_reduces_to_agnostic_for_uniform_p():
    p = np.array([0.1, 0.2, 0.3, 0.4])
    glob = {"w": torch.tensor([[1.0]])}
    u = updates([1, 3], [2.0, -1.0])
    new = agnostic.WeightedFedAvg(p).aggregate(glob, u)
    expected = 4 / 2 * (0.2 * 2.0 + 0.4 * -1.0)  # (N/|S|) sum p_i theta_i
    assert new["w"].item() == pytest.approx(expected)
    delta = agnostic.WeightedFedAvg(p, "weighted_delta").aggregate(glob, u)
    assert delta["w"].item() == pytest.approx(1.0 + 4 / 2 * (0.2 * 1.0 + 0.4 * -2.0))
    uniform = agnostic.WeightedFedAvg(np.full(4, 0.25)).aggregate(glob, u)
    plain = agnostic.AgnosticFedAvg().aggregate(glob, u)
    torch.testing.assert_close(uniform["w"], plain["w"])
    with pytest.raises(ValueError, match="probability vector"):
        agnostic.WeightedFedAvg([0.5, 0.6])
    with pytest.raises(ValueError, match="4 weights but there are 5 clients"):
        agnostic.WeightedFedAvg(p).setup(5, glob)


def test_objective_weights_client_losses():
    losses = np.array([[1.0, 3.0], [2.0, 4.0]])
    np.testing.assert_allclose(agnostic.objective(losses), [2.0, 3.0])
    np.testing.assert_allclose(agnostic.objective(losses, [0.25, 0.75]), [2.5, 3.5])
    with pytest.raises(ValueError, match="one weight per client"):
        agnostic.objective(losses, [1.0])


def test_least_squares_optimum_is_the_minimiser():
    bundle = synthetic.linear_regression(n_clients=5, samples=30, features=3, seed=2)
    p = np.array([0.5, 0.2, 0.1, 0.1, 0.1])
    theta, minimum = agnostic.least_squares_optimum(bundle, p)

    def value(t):
        x, y = bundle.train.x.double().numpy(), bundle.train.y.double().numpy()
        losses = [np.mean((x[idx] @ t[:-1] + t[-1] - y[idx]) ** 2) for idx in bundle.partition]
        return agnostic.objective(np.array(losses), p)

    assert value(theta) == pytest.approx(minimum, rel=1e-10)
    rng = np.random.default_rng(0)
    assert all(value(theta + 1e-3 * rng.standard_normal(4)) > minimum for _ in range(20))


@pytest.mark.slow
def test_agnostic_fedavg_averaged_iterate_solves_problem_3():
    """The average of agnostic FedAvg's global models approaches argmin sum_i p_i f_i (problem
    (3), with p the induced weights of the skewed participation), not the uniform minimiser."""
    n, m = 6, 2
    bundle = synthetic.linear_regression(
        n_clients=n, samples=40, features=2, heterogeneity=2.0, noise=0.0, seed=5
    )
    prior = participation.exponential_prior(n, 1.0)
    _, p = agnostic.exact_prior_weights(prior, m)
    theta_p, _ = agnostic.least_squares_optimum(bundle, p)
    theta_u, _ = agnostic.least_squares_optimum(bundle)
    gap = np.linalg.norm(theta_p - theta_u)
    assert gap > 0.5  # the two problems have clearly different solutions
    data = FederatedData(bundle.train, bundle.test, list(bundle.partition))
    trainer = FederatedTrainer(
        build_model("linear_regression", in_features=2, seed=0),
        data,
        participation.PriorSampler(prior, m, seed=0),
        TrainSettings(rounds=3000, local_steps=1, batch_size=40, loss="mse", eval_every=3000),
        lr_schedule=ConstantLR(0.01),
        algorithm=agnostic.AgnosticFedAvg(),
    )
    iterates = []
    trainer.run(
        on_round=lambda tr: iterates.append(
            np.concatenate(
                [
                    tr.params["1.weight"].double().cpu().numpy().ravel(),
                    tr.params["1.bias"].double().cpu().numpy(),
                ]
            )
        )
    )
    average = np.mean(iterates[1000:], axis=0)
    assert np.linalg.norm(average - theta_p) < 0.1 * gap
    assert np.linalg.norm(average - theta_u) > 0.5 * gap


# ---------------------------------------------------------------------------------------------
# Weighted rules without the step-size confound (self-normalised, rescaled to mean total 1)


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 30), data=st.data())
def test_self_normalised_weights_sum_to_one_every_round(n, data):
    m = data.draw(st.integers(1, n))
    tau = data.draw(st.floats(0.3, 50.0))
    seed = data.draw(st.integers(0, 999))
    p = np.random.default_rng(seed).dirichlet(np.ones(n))  # any p with p_i > 0
    rule = agnostic.WeightedFedAvg(p, normalise="round")
    sampler = participation.prior_sampler(n, m=m, tau=tau, seed=seed)
    for _ in range(50):
        ids = sampler.sample().ids
        w = rule.aggregation_weights(updates(ids, np.zeros(ids.size)))
        assert w.sum() == pytest.approx(1.0, abs=1e-12)
        np.testing.assert_allclose(w, p[ids] / p[ids].sum(), rtol=1e-12)


def test_self_normalised_rule_averages_the_models():
    p = np.array([0.1, 0.2, 0.3, 0.4])
    glob = {"w": torch.tensor([[1.0]])}
    u = updates([1, 3], [2.0, -1.0])
    for form in ("weighted_sum", "weighted_delta"):  # the same when the weights sum to one
        new = agnostic.WeightedFedAvg(p, form, normalise="round").aggregate(glob, u)
        assert new["w"].item() == pytest.approx((0.2 * 2.0 + 0.4 * -1.0) / 0.6)
    with pytest.raises(ValueError, match=r"all have p_i = 0"):
        agnostic.WeightedFedAvg([0.0, 0.5, 0.5], normalise="round").aggregation_weights(
            updates([0], [1.0])
        )
    with pytest.raises(ValueError, match="unknown normalise 'sum'; valid: mean, none, round"):
        agnostic.WeightedFedAvg(p, normalise="sum")


@pytest.mark.slow
def test_rescaled_rule_has_mean_total_weight_one():
    """Monte Carlo over the participation law with the exact induced p: the mean over R rounds
    of the total weight sum_{i in S} w_i is 1 for the rescaled rule (eq. 10's weights / N sum
    p^2), and N sum p^2 for eq. 10 itself. Tolerance: 5 standard errors of the mean, the
    standard error estimated from the R totals."""
    n, m, rounds = 8, 3, 20_000
    prior = participation.exponential_prior(n, 2.0)
    _, p = agnostic.exact_prior_weights(prior, m)
    rescaled = agnostic.WeightedFedAvg(p, "weighted_delta", normalise="mean")
    plain = agnostic.WeightedFedAvg(p, "weighted_delta")
    assert rescaled.mean_total_weight == pytest.approx(n * (p**2).sum())
    assert rescaled.mean_total_weight > 1.3  # skewed enough for eq. 10's step to be larger
    sampler = participation.PriorSampler(prior, m, seed=7)
    totals = np.empty((rounds, 2))
    for r in range(rounds):
        u = SimpleNamespace(ids=sampler.sample().ids)  # the rules read only the ids
        totals[r] = rescaled.aggregation_weights(u).sum(), plain.aggregation_weights(u).sum()
    mean, se = totals.mean(axis=0), totals.std(axis=0, ddof=1) / np.sqrt(rounds)
    assert abs(mean[0] - 1.0) < 5 * se[0]
    assert abs(mean[1] - n * (p**2).sum()) < 5 * se[1]
    assert se[0] < 0.01  # the test can tell 1 from N sum p^2


# ---------------------------------------------------------------------------------------------
# Algorithm 1 as written: theta_0 = 0, projected local steps, the averaged iterate


@settings(max_examples=40, deadline=None)
@given(
    clients=st.integers(1, 5),
    radius=st.floats(0.01, 20.0),
    scale=st.floats(0.0, 50.0),
    seed=st.integers(0, 999),
)
def test_projection_keeps_every_client_in_the_ball(clients, radius, scale, seed):
    gen = torch.Generator().manual_seed(seed)
    params = {
        "w": scale * torch.randn(clients, 3, 4, generator=gen),
        "b": scale * torch.randn(clients, 3, generator=gen),
    }
    before = {k: v.clone() for k, v in params.items()}
    project_onto_ball(params, radius)
    norm = lambda ps: torch.sqrt(sum(v.flatten(1).double().square().sum(1) for v in ps.values()))  # noqa: E731
    old, new = norm(before), norm(params)
    assert (new <= radius * (1 + 1e-6)).all()  # in C up to float32 rounding
    inside = old <= radius
    for k in params:  # clients already in C are untouched, the others land on the sphere
        assert torch.equal(params[k][inside], before[k][inside])
        # the projection of a point outside the ball is the point scaled onto the sphere
        ratio = (radius / old[~inside]).float().view(-1, *([1] * (params[k].dim() - 1)))
        torch.testing.assert_close(params[k][~inside], before[k][~inside] * ratio)
    np.testing.assert_allclose(new[~inside].numpy(), radius, rtol=1e-6)


def small_trainer(algorithm, rounds=6, lr=0.05, init="zeros"):
    bundle = synthetic.linear_regression(n_clients=5, samples=12, features=3, seed=1)
    data = FederatedData(bundle.train, bundle.test, list(bundle.partition))
    return FederatedTrainer(
        build_model("linear_regression", in_features=3, seed=0, init=init),
        data,
        participation.prior_sampler(5, m=2, tau=2.0, seed=0),
        TrainSettings(
            rounds=rounds,
            local_steps=3,
            batch_size=4,
            loss="mse",
            eval_every=1,
            client_loss_samples=100,
        ),
        lr_schedule=ConstantLR(lr),
        algorithm=algorithm,
    )


def test_projected_local_iterates_stay_in_the_ball():
    radius = 0.3  # well inside the distance to the optimum: the projection is active
    seen = []

    class Spy(agnostic.AgnosticFedAvg):
        def local_step(self, params, grads, lr, state):
            super().local_step(params, grads, lr, state)
            seen.append(
                torch.sqrt(sum(v.flatten(1).double().square().sum(1) for v in params.values()))
            )

    trainer = small_trainer(Spy(radius=radius), lr=0.2)
    trainer.run()
    norms = torch.cat(seen)
    assert norms.numel() == 6 * 2 * 3  # rounds x clients x local steps
    assert (norms <= radius * (1 + 1e-6)).all()
    assert (norms >= radius * (1 - 1e-6)).any()  # some iterate was projected
    # the aggregate of iterates in C is in C (C is convex)
    assert torch.sqrt(sum(v.double().square().sum() for v in trainer.params.values())) <= radius * (
        1 + 1e-6
    )


def test_zero_start_and_averaged_iterate_is_the_mean_of_the_global_models():
    alg = agnostic.WeightedFedAvg(
        np.full(5, 0.2), "weighted_delta", normalise="round", average=True
    )
    trainer = small_trainer(alg)
    assert all(torch.count_nonzero(v) == 0 for v in trainer.params.values())  # theta_0 = 0
    iterates = []
    trainer.run(on_round=lambda tr: iterates.append({k: v.clone() for k, v in tr.params.items()}))
    reported = trainer.reported_params()
    for k, v in reported.items():
        total = torch.zeros(v.shape, dtype=torch.float64, device=v.device)
        for it in iterates:  # the same float64 sum, in the same order: exact
            total += it[k].to(torch.float64)
        assert torch.equal(v, (total / len(iterates)).to(v.dtype))
        assert not torch.equal(v, trainer.params[k])  # it is not the last iterate
    # the trainer evaluates the reported model: the last record is the averaged iterate's loss
    assert trainer.history["client_losses"][-1] == trainer.client_losses(reported)
    # before the first round the reported model is theta_0
    fresh = small_trainer(agnostic.AgnosticFedAvg(average=True))
    assert fresh.reported_params() is fresh.params


def test_averaged_iterate_survives_a_checkpoint():
    full = small_trainer(agnostic.AgnosticFedAvg(radius=1.0, average=True))
    full.run()
    half = small_trainer(agnostic.AgnosticFedAvg(radius=1.0, average=True), rounds=6)
    for _ in range(3):
        half.run_round()
    tensors, state = half.state_dict()
    assert {"algorithm.average_count", "algorithm.average_sum.1.weight"} <= set(tensors)
    resumed = small_trainer(agnostic.AgnosticFedAvg(radius=1.0, average=True))
    resumed.load_state_dict(tensors, state)
    resumed.run()
    for k, v in full.reported_params().items():
        assert torch.equal(resumed.reported_params()[k], v)
    assert resumed.history == full.history


# ---------------------------------------------------------------------------------------------
# The experiments' configurations and the trend statistic of Fig. 2


def test_rules_and_protocols_round_trip_through_configurations():
    from aoi_fl.pipeline.runs import build_trainer

    p = np.full(ax.N_CLIENTS, 1.0 / ax.N_CLIENTS)
    for protocol in ax.PROTOCOLS:
        for rule in ax.AGGREGATIONS:
            cfg = ax.config("linear_regression", rule, 1, "smoke", p=p, protocol=protocol)
            d = ax.describe(cfg)
            assert (d["aggregation"], d["protocol"], d["seed"]) == (rule, protocol, 1)
    cfg = ax.config(
        "linear_regression", "weighted_normalised", 0, "smoke", p=p, protocol="algorithm1"
    )
    trainer = build_trainer(cfg)
    alg = trainer.algorithm
    assert (alg.normalise, alg.radius, alg.average) == ("round", ax.BALL_RADIUS, True)
    assert all(torch.count_nonzero(v) == 0 for v in trainer.params.values())
    with pytest.raises(
        ValueError,
        match=r"protocol='algorithm1' is defined for task in "
        r"\['linear_regression'\].*got task='mnist'",
    ):
        ax.config("mnist", "agnostic", 0, "smoke", protocol="algorithm1")
    with pytest.raises(ValueError, match="unknown protocol 'average'"):
        ax.config("linear_regression", "agnostic", 0, "smoke", protocol="average")


@pytest.mark.slow
def test_trend_over_seeds_and_verdict():

    rng = np.random.default_rng(0)
    skew = np.tile(np.linspace(0.0, 1.5, 6), 5)
    seeds = np.repeat(np.arange(5), 6)
    rising = ar.trend_over_seeds(skew, 2 * skew + 0.1 * rng.standard_normal(30), seeds)
    assert rising["rho_low"] > 0.5 and rising["slope_low"] > 1.5 and rising["points"] == 30
    assert rising["rho_low"] <= rising["rho"] <= rising["rho_high"]
    assert ar.trend_verdict(rising["rho_low"], rising["rho_high"]) == "held"
    noise = ar.trend_over_seeds(skew, rng.standard_normal(30), seeds)
    assert noise["rho_low"] < 0 < noise["rho_high"]
    assert ar.trend_verdict(noise["rho_low"], noise["rho_high"]) == "inconclusive at this budget"
    assert ar.trend_verdict(-0.5, -0.1) == "not held"
    with pytest.raises(ValueError, match=">= 2 seeds"):
        ar.trend_over_seeds(skew[:6], skew[:6], np.zeros(6))


def test_gaps_pair_runs_by_seed():
    import pandas as pd

    rows = [
        {
            "task": t,
            "protocol": "last_iterate",
            "process": "exp_prior",
            "tau": 10.0,
            "seed": s,
            "aggregation": a,
            "skew": 1.0,
            "loss_p": base + s,
            "loss_uniform": 2 * (base + s),
            "horizon_p": 3 * (base + s),
            "diverged_at": 10 if (a, s) == ("weighted_updates", 1) else None,
            "model": ax.TASKS[t]["model"]["name"],
        }
        for t in ("linear_regression", "mnist")
        for a, base in (("weighted_normalised", 1.5), ("agnostic", 1.0), ("weighted_updates", 3.0))
        for s in (0, 1)
    ]
    g = ar.gaps(pd.DataFrame(rows), ("weighted_updates", "weighted_normalised"))
    assert (
        list(zip(g.task, g.rule, strict=True))
        == [("mnist", "weighted_updates")] * 2
        + [("mnist", "weighted_normalised")] * 2
        + [("linear_regression", "weighted_updates")] * 2
        + [("linear_regression", "weighted_normalised")] * 2
    )
    np.testing.assert_allclose(g.gap_p, [2.0, 2.0, 0.5, 0.5] * 2)
    np.testing.assert_allclose(g.gap_uniform, [4.0, 4.0, 1.0, 1.0] * 2)
    np.testing.assert_allclose(g.agnostic_p, [1.0, 2.0] * 4)
    np.testing.assert_allclose(g.gap_horizon, [6.0, 6.0, 1.5, 1.5] * 2)
    # a pair is flagged when either of its runs diverged (here: eq. 10 on the updates, seed 1)
    assert g.diverged.tolist() == [False, True, False, False] * 2
    # each pair keeps its runs' model: the conditions of a claim about them
    assert g.model.tolist() == ["logistic_regression"] * 4 + ["linear_regression"] * 4
    with pytest.raises(ValueError, match="unknown rule 'agnostic'"):
        ar.gaps(pd.DataFrame(rows), ("agnostic",))
