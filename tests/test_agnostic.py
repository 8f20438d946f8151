"""Tests of aoi_fl.agnostic: participation processes, induced weights (eq. 2, Lemma 1), the
agnostic and weighted aggregation rules (Algorithm 1, eq. 10), and what agnostic FedAvg solves."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from aoi_fl import agnostic, synthetic
from aoi_fl.algorithms import ClientUpdates
from aoi_fl.models import build_model
from aoi_fl.samplers import make_sampler
from aoi_fl.train import ConstantLR, FederatedData, FederatedTrainer, TrainSettings


def test_exponential_prior():
    w = agnostic.exponential_prior(4, 2.0)
    np.testing.assert_allclose(w, np.exp(-np.arange(1, 5) / 2) / np.exp(-np.arange(1, 5) / 2).sum())
    np.testing.assert_allclose(agnostic.exponential_prior(5, float("inf")), np.full(5, 0.2))
    with pytest.raises(ValueError, match="tau must be > 0"):
        agnostic.exponential_prior(5, 0.0)


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
    assert inclusion.sum() == pytest.approx(2)  # E|S| = m
    assert p.sum() == pytest.approx(1)  # Lemma 1
    # m = n: everybody, always
    np.testing.assert_allclose(agnostic.exact_prior_weights(w, 3)[0], np.ones(3))
    with pytest.raises(ValueError, match="n <= 10"):
        agnostic.exact_prior_weights(np.ones(11), 2)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(2, 7), data=st.data())
def test_prior_sampler_marginals_match_enumeration(n, data):
    m = data.draw(st.integers(1, n))
    tau = data.draw(st.floats(0.5, 5.0))
    w = agnostic.exponential_prior(n, tau)
    inclusion, p = agnostic.exact_prior_weights(w, m)
    draws = 20_000
    got_inclusion, got_p = agnostic.inclusion_and_induced(
        agnostic.PriorSampler(w, m, seed=data.draw(st.integers(0, 99))), draws
    )
    # binomial standard error of a frequency <= 0.5 / sqrt(draws); 5 sigma
    tol = 5 * 0.5 / np.sqrt(draws)
    np.testing.assert_allclose(got_inclusion, inclusion, atol=tol)
    np.testing.assert_allclose(got_p, p, atol=tol / m)
    assert got_p.sum() == pytest.approx(1.0)


def test_prior_sampler_selections_and_checks():
    s = agnostic.prior_sampler(100, m=10, tau=10.0, seed=3)
    sel = [s.sample() for _ in range(50)]
    assert all(len(x) == 10 and np.all(np.diff(x.ids) > 0) for x in sel)
    assert all(np.allclose(x.weights, 0.1) for x in sel)
    # deterministic and resumable
    t = agnostic.prior_sampler(100, m=10, tau=10.0, seed=3)
    assert all(np.array_equal(a.ids, t.sample().ids) for a in sel)
    state = t.state_dict()
    u = agnostic.prior_sampler(100, m=10, tau=10.0, seed=3)
    u.load_state_dict(state)
    assert np.array_equal(u.sample().ids, t.sample().ids)
    # the low indices dominate
    counts = np.bincount(np.concatenate([x.ids for x in sel]), minlength=100)
    assert counts[:10].sum() > counts[50:].sum()
    with pytest.raises(ValueError, match="only 2 have a positive weight"):
        agnostic.PriorSampler([1.0, 1.0, 0.0], 3)
    with pytest.raises(ValueError, match="m must be <= n"):
        agnostic.PriorSampler([1.0, 1.0], 3)


@pytest.mark.parametrize(
    "sampler",
    [
        lambda: agnostic.prior_sampler(30, m=4, tau=5.0, seed=1),
        lambda: make_sampler("markov_optimal", n=30, m=4, m_prime=10, seed=1),
        lambda: make_sampler("probabilistic", n=30, m=4, sizes=np.arange(1, 31), seed=1),
        lambda: agnostic.ProcessSampler(30, lambda t, rng: rng.choice(30, 1 + t % 5, False), 1),
    ],
)
def test_induced_weights_sum_to_one_for_any_sampler(sampler):
    p = agnostic.induced_weights(sampler(), 2000)
    assert p.shape == (30,) and (p >= 0).all()
    assert p.sum() == pytest.approx(1.0, abs=1e-12)  # Lemma 1, exactly for every draw set


def test_induced_weights_of_symmetric_policies_are_uniform():
    # n/m = 6.67 is not an integer: the optimal chain is random and mixes, so over many rounds
    # every client gets the same share (with an integer n/m it is a deterministic cycle whose
    # phase groups, drawn once, keep their unequal sizes)
    p = agnostic.induced_weights(make_sampler("markov_optimal", n=20, m=3, seed=0), 20_000)
    assert agnostic.skew(p) < 0.1
    assert agnostic.skew(np.full(20, 0.05)) == 0.0
    assert agnostic.skew(np.eye(4)[0]) == pytest.approx(1.5)  # 2 - 2/N


def test_process_sampler_and_empty_rounds():
    s = agnostic.ProcessSampler(5, lambda t, rng: [] if t % 2 else [t % 5, 4])
    inclusion, p = agnostic.inclusion_and_induced(s, 10)
    np.testing.assert_allclose(
        inclusion.sum(), np.mean([0 if t % 2 else 2 - (t % 5 == 4) for t in range(10)])
    )
    assert p.sum() == pytest.approx(1.0)  # conditioned on non-empty rounds
    bad = agnostic.ProcessSampler(3, lambda t, rng: [3])
    with pytest.raises(ValueError, match=r"outside \[0, 3\)"):
        bad.sample()
    with pytest.raises(ValueError, match="selected nobody"):
        agnostic.induced_weights(agnostic.ProcessSampler(3, lambda t, rng: []), 5)


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


def test_agnostic_fedavg_averaged_iterate_solves_problem_3():
    """The average of agnostic FedAvg's global models approaches argmin sum_i p_i f_i (problem
    (3), with p the induced weights of the skewed participation), not the uniform minimiser."""
    n, m = 6, 2
    bundle = synthetic.linear_regression(
        n_clients=n, samples=40, features=2, heterogeneity=2.0, noise=0.0, seed=5
    )
    prior = agnostic.exponential_prior(n, 1.0)
    _, p = agnostic.exact_prior_weights(prior, m)
    theta_p, _ = agnostic.least_squares_optimum(bundle, p)
    theta_u, _ = agnostic.least_squares_optimum(bundle)
    gap = np.linalg.norm(theta_p - theta_u)
    assert gap > 0.5  # the two problems have clearly different solutions
    data = FederatedData(bundle.train, bundle.test, list(bundle.partition))
    trainer = FederatedTrainer(
        build_model("linear_regression", in_features=2, seed=0),
        data,
        agnostic.PriorSampler(prior, m, seed=0),
        TrainSettings(rounds=3000, local_steps=1, batch_size=40, loss="mse", eval_every=3000),
        lr_schedule=ConstantLR(0.01),
        algorithm=agnostic.AgnosticFedAvg(),
    )
    iterates = []
    trainer.run(
        on_round=lambda tr: iterates.append(
            np.concatenate(
                [
                    tr.params["1.weight"].double().numpy().ravel(),
                    tr.params["1.bias"].double().numpy(),
                ]
            )
        )
    )
    average = np.mean(iterates[1000:], axis=0)
    assert np.linalg.norm(average - theta_p) < 0.1 * gap
    assert np.linalg.norm(average - theta_u) > 0.5 * gap
