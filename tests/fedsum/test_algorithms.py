"""The FedSUM family and the six baselines: the paper's identities on random traces (eqs 7, 8, 9,
79-80), convergence to a stationary point with exact gradients under every participation pattern,
checkpoint/resume on the common trainer and error messages.

The algorithms are driven through the trainer's interface (client_start, local_step, aggregate)
by :func:`drive`, in float64, with gradients given by the test: random vectors for the
identities, exact least-squares gradients for the convergence test.
"""

import dataclasses
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from aoi_fl.aoi.samplers import make_sampler
from aoi_fl.core.algorithms import ClientUpdates, FedAvg
from aoi_fl.core.seeding import generator
from aoi_fl.core.train import InverseSqrtDecay
from aoi_fl.fedsum.algorithms import FedSUM, FedSUMB, FedSUMCR
from aoi_fl.fedsum.baselines import MIFA, FedAU, FedAWE, FedVARP, Scaffold
from aoi_fl.fedsum.patterns import (
    Bernoulli,
    BiasedBernoulli,
    DeterministicCyclic,
    ReshuffledCyclic,
    SineBernoulli,
    UniformSubset,
)
from aoi_fl.pipeline import runs

SHAPES = {"w": (3,), "m": (2, 2)}  # two parameters of different ranks


def zeros(shapes=SHAPES, dtype=torch.float64):
    return {k: torch.zeros(s, dtype=dtype) for k, s in shapes.items()}


def drive(alg, n, trace, grad_fn, steps, lr_fn, x0, record=None):
    """Run ``alg`` over ``trace`` the way the trainer does; ``grad_fn(t, ids, params)``."""
    alg.setup(n, x0)
    x = x0
    for t, ids in enumerate(trace):
        ids = np.asarray(sorted(ids), dtype=np.int64)
        lr = lr_fn(t)
        start, state = alg.client_start(t, ids, x, lr)
        params = {k: v.clone() for k, v in start.items()}
        grads_seen = []
        for _ in range(steps):
            g = grad_fn(t, ids, params)
            grads_seen.append(g)
            alg.local_step(params, g, lr, state)
        weights = np.full(ids.size, 1.0 / max(ids.size, 1))
        steps_arr = np.full(ids.size, steps, dtype=np.int64)
        upd = ClientUpdates(t, lr, ids, weights, start, params, state, steps_arr)
        new = alg.aggregate(x, upd)
        if record is not None:
            record(t, ids, lr, x, start, state, params, grads_seen, new)
        x = new
    return x


def random_grads(seed):
    rng = generator(seed, "test_grads")

    def fn(t, ids, params):
        return {k: torch.from_numpy(rng.standard_normal(v.shape)) for k, v in params.items()}

    return fn


traces = st.integers(2, 7).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.lists(st.sets(st.integers(0, n - 1), max_size=n), min_size=1, max_size=12),
    )
)


def _stacked_mean(grads):
    return {k: sum(g[k] for g in grads) / len(grads) for k in grads[0]}


# ---------------------------------------------------------------------------------------------
# Identities on random traces


@pytest.mark.slow
@pytest.mark.parametrize("cls", [FedSUMB, FedSUM, FedSUMCR])
@given(trace=traces, steps=st.integers(1, 4), seed=st.integers(0, 2**16))
@settings(max_examples=25, deadline=None)
def test_eq7_y_is_the_sum_of_the_latest_mean_gradients(cls, trace, steps, seed):
    n, sets = trace
    alg = cls(local_steps=steps, server_lr=0.7)
    latest = {}
    lr_fn = InverseSqrtDecay(0.05, 10.0)

    def record(t, ids, lr, x, start, state, params, grads, new):
        for j, i in enumerate(ids):  # eq. 8: h_i is the mean of i's gradients this round
            latest[int(i)] = {k: _stacked_mean(grads)[k][j] for k in SHAPES}
        for k in SHAPES:
            expected = sum((v[k] for v in latest.values()), torch.zeros(SHAPES[k], dtype=float))
            # eq. 7: y^{(t)} = sum_{i in A_t} h_i^{(t+1)}, never-seen clients count zero
            assert torch.allclose(alg.y[k], expected, rtol=0, atol=1e-12)
            assert torch.allclose(alg.y[k], alg.clients.rows[f"h.{k}"].sum(0), rtol=0, atol=1e-12)
            for i in range(n):
                want = latest[i][k] if i in latest else torch.zeros(SHAPES[k], dtype=float)
                assert torch.allclose(alg.clients.rows[f"h.{k}"][i], want, rtol=0, atol=1e-12)
            # line 14, every round (also when S_t is empty)
            step = 0.7 * lr * steps / n
            assert torch.allclose(new[k], x[k] - step * alg.y[k], rtol=0, atol=1e-12)

    drive(alg, n, sets, random_grads(seed), steps, lr_fn, zeros(), record)


@pytest.mark.parametrize("cls", [FedSUM, FedSUMCR])
@given(trace=traces, steps=st.integers(1, 4), seed=st.integers(0, 2**16))
@settings(max_examples=25, deadline=None)
def test_eq8_transmitted_quantity_is_the_mean_local_gradient(cls, trace, steps, seed):
    """N (x - x^{(t,K)}) / (eta_l K) - y_i, the paper's u_i, equals (1/K) sum_k g_k (eq. 8)."""
    n, sets = trace
    alg = cls(local_steps=steps)

    def record(t, ids, lr, x, start, state, params, grads, new):
        mean = _stacked_mean(grads)
        for k in SHAPES:
            y_i = n * state[f"correction.{k}"]
            u = n * (start[k] - params[k]) / (lr * steps) - y_i
            assert torch.allclose(u, mean[k], rtol=0, atol=1e-9)
            assert torch.allclose(alg.clients.rows[f"h.{k}"][ids], mean[k], rtol=0, atol=1e-12)

    drive(alg, n, sets, random_grads(seed), steps, InverseSqrtDecay(0.05, 10.0), zeros(), record)


@given(trace=traces, seed=st.integers(0, 2**16))
@settings(max_examples=25, deadline=None)
def test_eq9_fedsum_correction_is_the_other_clients_latest_gradients(trace, seed):
    n, sets = trace
    alg = FedSUM(local_steps=2)
    before = {}

    def record(t, ids, lr, x, start, state, params, grads, new):
        for j, i in enumerate(ids):
            others = [h for c, h in before.items() if c != i]
            for k in SHAPES:
                want = sum((h[k] for h in others), torch.zeros(SHAPES[k], dtype=float))
                assert torch.allclose(n * state[f"correction.{k}"][j], want, atol=1e-12)
        for i in ids:
            before[int(i)] = {k: alg.clients.rows[f"h.{k}"][i].clone() for k in SHAPES}

    drive(alg, n, sets, random_grads(seed), 2, lambda t: 0.1, zeros(), record)


@pytest.mark.parametrize("decaying", [False, True])
@given(trace=traces, steps=st.integers(1, 3), seed=st.integers(0, 2**16))
@settings(max_examples=25, deadline=None)
def test_eqs79_80_fedsum_cr_correction_is_the_mean_server_aggregate_since_last_visit(
    decaying, trace, steps, seed
):
    """y_i^{(t)} = (1/(t - a_i)) sum_{p=a_i}^{t-1} w_p y^{(p)} - h_i, y^{(-1)} = 0.

    w_p = 1 for a constant eta_l (eqs 79-80); line 6 taken literally under a schedule gives
    w_p = eta_l^{(p)} / eta_l^{(t)} (the documented bias of the literal choice).
    """
    n, sets = trace
    lr_fn = InverseSqrtDecay(0.05, 3.0) if decaying else (lambda t: 0.05)
    alg = FedSUMCR(local_steps=steps, server_lr=0.5)
    aggregates = {-1: zeros()}  # y^{(p)} and eta_l^{(p)}, p = -1..t-1
    lrs = {-1: lr_fn(0)}
    last = np.full(n, -1)

    def record(t, ids, lr, x, start, state, params, grads, new):
        for j, i in enumerate(ids):
            a = last[i]
            for k in SHAPES:
                ps = range(a, t)
                ws = [lrs[p] / lr for p in ps] if decaying else [1.0] * len(ps)
                mean = sum(w * aggregates[p][k] for w, p in zip(ws, ps, strict=True)) / (t - a)
                want = mean - h_before[int(i)][k]
                assert torch.allclose(n * state[f"correction.{k}"][j], want, atol=1e-9)
        for i in ids:
            last[i] = t
            h_before[int(i)] = {k: alg.clients.rows[f"h.{k}"][i].clone() for k in SHAPES}
        aggregates[t] = {k: alg.y[k].clone() for k in SHAPES}
        lrs[t] = lr

    h_before = {i: zeros() for i in range(n)}
    drive(alg, n, sets, random_grads(seed), steps, lr_fn, zeros(), record)


def test_transmitting_the_summed_gradients_avoids_float32_amplification():
    """Pitfall 4: at eta_l = 7e-4, N = 100, K = 10 the recovery from the model loses digits."""
    n, steps, lr, d = 100, 10, 7e-4, 4096
    alg = FedSUM(local_steps=steps)
    x0 = {"w": torch.from_numpy(generator(0, "x0").standard_normal(d)).float()}
    grads = []

    def grad_fn(t, ids, params):
        g = torch.from_numpy(generator(1, "g", len(grads)).standard_normal((ids.size, d)))
        grads.append(g)
        return {"w": g.float()}

    errors = {}

    def record(t, ids, lr_, x, start, state, params, seen, new):
        exact = sum(g.double() for g in grads[-steps:]) / steps
        ours = alg.clients.rows["h.w"][ids]
        y_i = n * state["correction.w"].double()
        recovered = n * (start["w"].double() - params["w"].double()) / (lr * steps) - y_i
        errors["ours"] = float((ours - exact).norm() / exact.norm())
        errors["recovered"] = float((recovered - exact).norm() / exact.norm())

    trace = [[0, 1, 2], [3, 4], [0, 5, 6]]
    drive(alg, n, trace, grad_fn, steps, lambda t: lr, x0, record)
    assert errors["ours"] < 1e-6  # float32 gradients, summed in float64
    assert errors["recovered"] > 1e-3  # what line 11 would transmit from the float32 model


# ---------------------------------------------------------------------------------------------
# Exact gradients on heterogeneous least squares: control variates reach a stationary point


N_LS, D_LS, M_LS, K_LS, LR_LS, T_LS = 10, 4, 8, 5, 0.05, 400


def least_squares():
    """f_i(x) = |A_i x - b_i|^2 / (2m) with client optima w_i ~ N(0, I): heterogeneous."""
    rng = generator(0, "test_least_squares")
    a = torch.from_numpy(rng.standard_normal((N_LS, M_LS, D_LS)))
    b = torch.einsum("nmd,nd->nm", a, torch.from_numpy(rng.standard_normal((N_LS, D_LS))))

    def grad_fn(t, ids, params):
        idx = torch.as_tensor(ids)
        residual = torch.einsum("nmd,nd->nm", a[idx], params["w"]) - b[idx]
        return {"w": torch.einsum("nmd,nm->nd", a[idx], residual) / M_LS}

    def full_gradient(x):  # grad f, f = (1/N) sum_i f_i (the paper's objective, eq. 1)
        residual = torch.einsum("nmd,d->nm", a, x) - b
        return torch.einsum("nmd,nm->nd", a, residual).mean(0) / M_LS

    return grad_fn, full_gradient


PATTERN_SAMPLERS = {
    "uniform": lambda: UniformSubset(N_LS, 3, seed=1),
    "bernoulli": lambda: Bernoulli(N_LS, 0.3, seed=1),
    "sine_bernoulli": lambda: SineBernoulli(N_LS, 0.3, seed=1),
    "cyclic": lambda: DeterministicCyclic(N_LS, 2),
    "reshuffled_cyclic": lambda: ReshuffledCyclic(N_LS, 2, seed=1),
    "biased": lambda: BiasedBernoulli(N_LS, seed=1, group=2),
    "markov_nonoptimal": lambda: make_sampler("markov_nonoptimal", n=N_LS, m=3, seed=1),
}


def relative_gradient_norm(make_alg, pattern):
    grad_fn, full_gradient = least_squares()
    sampler = PATTERN_SAMPLERS[pattern]()
    trace = [sampler.sample().ids for _ in range(T_LS)]
    x0 = {"w": torch.zeros(D_LS, dtype=torch.float64)}
    x = drive(make_alg(), N_LS, trace, grad_fn, K_LS, lambda t: LR_LS, x0)
    return float(full_gradient(x["w"]).norm() / full_gradient(x0["w"]).norm())


CONTROL_VARIATES = {
    "fedsum_b": lambda: FedSUMB(K_LS),
    "fedsum": lambda: FedSUM(K_LS),
    "fedsum_cr": lambda: FedSUMCR(K_LS),
    "scaffold": Scaffold,
}


@pytest.mark.slow
@pytest.mark.parametrize("pattern", sorted(PATTERN_SAMPLERS))
def test_control_variate_methods_reach_a_stationary_point_fedavg_stalls(pattern):
    """Numerical zero: |grad f(x_T)| <= 1e-10 |grad f(x_0)| (float64 round-off is ~1e-16)."""
    for name, make in CONTROL_VARIATES.items():
        assert relative_gradient_norm(make, pattern) < 1e-10, name
    assert relative_gradient_norm(lambda: FedAvg("weighted_delta"), pattern) > 1e-2


@pytest.mark.slow
@pytest.mark.parametrize("make", [MIFA, FedVARP, FedAU], ids=["mifa", "fedvarp", "fedau"])
def test_methods_without_control_variates_keep_the_client_drift(make):
    assert relative_gradient_norm(make, "uniform") > 1e-2


# ---------------------------------------------------------------------------------------------
# The baselines' update rules on small exact cases


def test_scaffold_single_upload_equals_the_original_two_vector_form():
    n, steps = 5, 3
    alg = Scaffold(server_lr=0.8)
    controls = {i: zeros() for i in range(n)}

    def record(t, ids, lr, x, start, state, params, grads, new):
        mean = _stacked_mean(grads)
        c = {k: sum(controls[i][k] for i in range(n)) / n for k in SHAPES}
        for k in SHAPES:  # x + eta_g * mean Delta x_i, Delta x_i from the local models
            want = x[k] + 0.8 * (params[k] - start[k]).mean(0) if ids.size else x[k]
            assert torch.allclose(new[k], want, atol=1e-12)
            for j, i in enumerate(ids):  # local steps used c - c_i
                assert torch.allclose(state[f"correction.{k}"][j], c[k] - controls[int(i)][k])
        for j, i in enumerate(ids):
            controls[int(i)] = {k: mean[k][j] for k in SHAPES}  # c_i <- mean gradient
        for k in SHAPES:
            want_c = sum(controls[i][k] for i in range(n)) / n
            assert torch.allclose(alg.controls.mean()[k], want_c, atol=1e-12)

    trace = [[0, 2], [], [1, 2, 3], [4], [0, 1, 2, 3, 4]]
    drive(alg, n, trace, random_grads(3), steps, lambda t: 0.1 / (t + 1), zeros(), record)


def latest_updates_check(alg, step_fn):
    """Drive ``alg`` and compare each new model with ``step_fn(x, latest, deltas, ids)``."""
    n = 4
    latest = {i: zeros() for i in range(n)}

    def record(t, ids, lr, x, start, state, params, grads, new):
        deltas = {k: params[k] - start[k] for k in SHAPES}
        want = step_fn(x, latest, deltas, ids, n)
        for k in SHAPES:
            assert torch.allclose(new[k], want[k], atol=1e-12), (t, k)
        for j, i in enumerate(ids):
            latest[int(i)] = {k: deltas[k][j] for k in SHAPES}

    trace = [[0], [], [1, 3], [0, 3], [2]]
    drive(alg, n, trace, random_grads(4), 2, lambda t: 0.1, zeros(), record)


def test_mifa_steps_every_round_with_the_mean_of_the_latest_updates():
    def step(x, latest, deltas, ids, n):
        now = dict(latest)
        for j, i in enumerate(ids):
            now[int(i)] = {k: deltas[k][j] for k in SHAPES}
        return {k: x[k] + 0.5 * sum(v[k] for v in now.values()) / n for k in SHAPES}

    latest_updates_check(MIFA(server_lr=0.5), step)


def test_fedvarp_corrects_the_table_mean_with_the_fresh_updates():
    def step(x, latest, deltas, ids, n):
        if ids.size == 0:
            return x
        out = {}
        for k in SHAPES:
            table_mean = sum(latest[i][k] for i in range(n)) / n
            fresh = (deltas[k] - torch.stack([latest[int(i)][k] for i in ids])).mean(0)
            out[k] = x[k] + 0.5 * (table_mean + fresh)
        return out

    latest_updates_check(FedVARP(server_lr=0.5), step)


def test_fedau_weights_are_mean_participation_intervals_with_cutoff():
    alg = FedAU(cutoff=3)
    alg.setup(3, zeros())
    # client 0 active every 2nd round; client 1 never; client 2 in rounds 0 and 4
    trace = [[0, 2], [], [0], [], [0, 2], []]
    for ids in trace:
        active = torch.zeros(3, dtype=torch.bool)
        active[ids] = True
        alg._record(active)
    # intervals recorded: client 0: 1, 2, 2; client 1: 3, 3 (each 3 rounds absent hit the
    # cutoff); client 2: 1, 3 (cutoff in round 3), 1 (active in round 4)
    assert torch.allclose(alg.omega(), torch.tensor([5 / 3, 3.0, 5 / 3], dtype=torch.float64))
    fresh = FedAU()
    fresh.setup(2, zeros())
    assert torch.equal(fresh.omega(), torch.ones(2, dtype=torch.float64))


def test_fedau_server_divides_by_n_with_the_weights():
    alg = FedAU(cutoff=50, server_lr=1.0)
    n = 4

    def record(t, ids, lr, x, start, state, params, grads, new):
        if t == 0:  # omega = 1 for everybody before any interval is recorded
            for k in SHAPES:
                want = x[k] + (params[k] - start[k]).sum(0) / n
                assert torch.allclose(new[k], want, atol=1e-12)

    drive(alg, n, [[0, 1], [2]], random_grads(5), 2, lambda t: 0.1, zeros(), record)


def test_fedau_weights_use_only_the_participation_before_the_round():
    # catches recording round t's participation before weighting round t's updates (or any
    # other mix-up of the two): FedAU's omega_i^t must depend on rounds < t only. The weights
    # below are computed by hand from the definition (baselines.FedAU): a participation
    # records (rounds absent + 1), `cutoff` rounds absent in a row record `cutoff`, omega is
    # the mean recorded interval (1 before any), and x <- x + eta_g (1/N) sum omega_i Delta_i.
    n, cutoff, server_lr = 3, 3, 0.5
    trace = [[0, 2], [], [0], [1], [0, 1, 2], [2], [0, 1], [0, 1, 2]]
    # intervals recorded before each round (client: list), and the weights they give
    #   t=0: -              -> omega 1, 1, 1
    #   t=1: 0: [1], 2: [1] (both active in round 0)
    #   t=2: same (client 1 absent 2 rounds, below the cutoff)
    #   t=3: 0: [1, 2], 1: [3] (absent rounds 0-2: the cutoff), 2: [1]   -> 1.5, 3, 1
    #   t=4: 0: [1, 2], 1: [3, 1], 2: [1, 3] (cutoff in round 3)          -> 1.5, 2, 2
    #   t=5: 0: [1, 2, 2], 1: [3, 1, 1], 2: [1, 3, 1]                     -> 5/3 each
    #   t=6: 2 adds 1 (round 5)                                            -> 5/3, 5/3, 3/2
    #   t=7: 0 and 1 add 2 (absent in round 5)                             -> 7/4, 7/4, 3/2
    hand = [
        {0: 1.0, 2: 1.0},
        {},
        {0: 1.0},  # recording round 2 first would give 1.5
        {1: 3.0},  # ... 2.0
        {0: 1.5, 1: 2.0, 2: 2.0},  # ... 5/3 each
        {2: 5 / 3},  # ... 3/2
        {0: 5 / 3, 1: 5 / 3},  # ... 7/4
        {0: 7 / 4, 1: 7 / 4, 2: 3 / 2},  # ... 8/5 each
    ]
    alg = FedAU(cutoff=cutoff, server_lr=server_lr)
    steps = []

    def record(t, ids, lr, x, start, state, params, grads, new):
        deltas = {k: params[k] - start[k] for k in SHAPES}
        for k in SHAPES:
            want = (
                x[k]
                + server_lr * sum(hand[t][int(i)] * deltas[k][j] for j, i in enumerate(ids)) / n
                if ids.size
                else x[k]
            )
            torch.testing.assert_close(new[k], want, rtol=0, atol=1e-12)
        assert sorted(hand[t]) == ids.tolist()
        steps.append(t)

    drive(alg, n, trace, random_grads(6), 2, lambda t: 0.1, zeros(), record)
    assert steps == list(range(len(trace)))
    # after the last round (all active: 0 and 1 add 1, 2 adds 2) every client's mean is 8/5
    torch.testing.assert_close(alg.omega(), torch.full((3,), 8 / 5, dtype=torch.float64))


def test_fedawe_gossip_echo_and_reported_model():
    n = 3
    alg = FedAWE(server_lr=1.0, clip=None)
    trace = [[0], [1], [], [0, 1]]
    seen = {}

    def record(t, ids, lr, x, start, state, params, grads, new):
        seen[t] = {k: v.clone() for k, v in alg.local.rows.items()}
        if t == 3:  # client 0 starts from the model of round 0, client 1 from round 1's
            echo = torch.tensor([3.0, 2.0], dtype=torch.float64)  # rounds since last visit
            for k in SHAPES:
                assert torch.allclose(start[k][0], seen[0][k][0])
                assert torch.allclose(start[k][1], seen[1][k][1])
                innovation = echo.view(-1, *[1] * len(SHAPES[k])) * (params[k] - start[k])
                server = start[k].mean(0) + innovation.mean(0)
                assert torch.allclose(alg.local.rows[k][0], server, atol=1e-12)
                assert torch.allclose(alg.local.rows[k][1], server, atol=1e-12)
        for k in SHAPES:  # the reported model is the mean of the N local models
            assert torch.allclose(new[k], alg.local.rows[k].mean(0), atol=1e-12)

    drive(alg, n, trace, random_grads(6), 2, lambda t: 0.1, zeros(), record)
    assert alg.echo.tolist() == [1.0, 1.0, 5.0]  # e_i = t - a_{i,t-1}: 4 - (-1) for client 2


def test_fedawe_clips_the_echoed_innovation():
    alg = FedAWE(clip=1e-3)

    def record(t, ids, lr, x, start, state, params, grads, new):
        norm = math.sqrt(
            sum(float((alg.local.rows[k][0] - start[k][0]).square().sum()) for k in SHAPES)
        )
        assert norm == pytest.approx(1e-3, rel=1e-9)  # a lone client: server = x_0 + clip

    drive(alg, 2, [[0]], random_grads(7), 3, lambda t: 1.0, zeros(), record)


# ---------------------------------------------------------------------------------------------
# On the common trainer: registered, checkpointed, resumed exactly


ALGORITHM_SPECS = {
    "fedavg": {"name": "fedavg", "aggregation": "weighted_delta", "server_lr": 1.0},
    "fedsum_b": {"name": "fedsum_b", "local_steps": 3},
    "fedsum": {"name": "fedsum", "local_steps": 3},
    "fedsum_cr": {"name": "fedsum_cr", "local_steps": 3},
    "scaffold": {"name": "scaffold"},
    "mifa": {"name": "mifa"},
    "fedvarp": {"name": "fedvarp"},
    "fedau": {"name": "fedau", "cutoff": 2},
    "fedawe": {"name": "fedawe"},
    "agnostic": {"name": "agnostic"},
    "weighted": {"name": "weighted", "p": [1 / 6] * 6, "aggregation": "weighted_delta"},
}


def ls_config(algorithm, rounds=8):
    return {
        "dataset": {"name": "linear_regression", "n_clients": 6, "samples": 12, "features": 3},
        "partition": {"name": "natural", "n_clients": 6},
        "model": {"name": "linear_regression", "in_features": 3, "seed": 0},
        "sampler": {"name": "bernoulli", "p": 0.3, "seed": 2},  # some rounds are empty
        "training": {
            "rounds": rounds,
            "local_steps": 3,
            "batch_size": 5,
            "loss": "mse",
            "eval_every": 2,
            "lr": {"name": "inverse_sqrt", "lr0": 0.05, "period": 10.0},
            "algorithm": ALGORITHM_SPECS[algorithm],
        },
    }


def test_every_registered_method_has_a_spec_here():
    assert set(ALGORITHM_SPECS) == set(runs.ALGORITHMS)


@pytest.mark.parametrize("algorithm", sorted(ALGORITHM_SPECS))
def test_interrupted_run_resumes_from_its_checkpoint_to_the_same_numbers(
    algorithm, tmp_path, request
):
    from aoi_fl.pipeline.cache import CheckpointStore

    config = ls_config(algorithm)
    resolved = runs.resolve_config(config)
    trainer = runs.build_trainer(resolved)
    for _ in range(3):
        trainer.run_round()
    CheckpointStore(tmp_path / "resumed", resolved).save(3, *trainer.state_dict())
    calls = request.getfixturevalue("rounds_run")
    resumed = runs.run_experiment(config, results_dir=str(tmp_path / "resumed"), progress=False)
    assert calls == list(range(3, 8))  # continued from the checkpoint
    clean = runs.run_experiment(config, results_dir=str(tmp_path / "clean"), progress=False)
    assert resumed.history == clean.history
    for k, v in clean.final_params.items():
        np.testing.assert_array_equal(resumed.final_params[k], v)
    assert any(len(s) == 0 for s in clean.history["selected"])  # the empty-round path ran
    assert np.isfinite(clean.history["test_loss"]).all()


def test_fedsum_family_rejects_a_different_number_of_local_steps():
    config = ls_config("fedsum")
    config["training"]["local_steps"] = 2
    # a configuration says so before any data is loaded
    with pytest.raises(
        ValueError, match="training.algorithm.local_steps=3 differs from training.local_steps=2"
    ):
        runs.build_trainer(config)
    # the algorithm itself, in a trainer built by hand, when the clients take other steps
    trainer = runs.build_trainer(ls_config("fedsum"))
    trainer.settings = dataclasses.replace(trainer.settings, local_steps=2)
    with pytest.raises(ValueError, match="built with local_steps=3, but the clients took"):
        trainer.run()


# ---------------------------------------------------------------------------------------------
# Configuration (what each method sends and keeps: tests/fedsum/test_costs.py)


@pytest.mark.parametrize(
    "build, error, match",
    [
        (lambda: FedSUM(0), ValueError, "local_steps must be >= 1"),
        (lambda: FedSUMCR(2, server_lr=0.0), ValueError, "server_lr must be > 0"),
        (lambda: FedSUMB(1.5), TypeError, "local_steps must be an integer"),
        (lambda: Scaffold(server_lr=-1), ValueError, "server_lr must be > 0"),
        (lambda: FedAU(cutoff=0), ValueError, "cutoff must be >= 1"),
        (lambda: FedAWE(clip=-0.1), ValueError, "clip must be >= 0"),
        (lambda: MIFA(server_lr=float("nan")), ValueError, "server_lr must be finite"),
    ],
)
def test_bad_arguments_name_the_parameter(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_state_dict_rejects_a_foreign_state():
    alg = FedSUMCR(2)
    alg.setup(3, zeros())
    with pytest.raises(ValueError, match="state must have the keys"):
        alg.load_state_dict({"clients.h.w": torch.zeros(3, 3)})
    assert set(alg.state_dict()) == {
        "clients.h.w",
        "clients.h.m",
        "clients.z.w",
        "clients.z.m",
        "clients.last",
        "y.w",
        "y.m",
    }
