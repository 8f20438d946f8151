"""The agnostic-FedAvg experiments: induced weights p (estimated, cached in memory and on disk),
the configurations and their descriptions, the schedules, and the tables read off the runs."""

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from aoi_fl.agnostic import algorithms as agnostic
from aoi_fl.agnostic import samplers as participation
from aoi_fl.core.registry import SAMPLERS
from aoi_fl.evidence.agnostic import experiments as ax
from aoi_fl.evidence.agnostic import results as ar
from aoi_fl.pipeline.cache import ResultStore, config_key

N = ax.N_CLIENTS
INF = float("inf")


def brute_force_p(sampler, draws):
    """p_i = mean over draws of 1[i in S] / |S|, counted here draw by draw (eq. 2)."""
    shares = np.zeros(N)
    for _ in range(draws):
        ids = sampler.sample().ids
        for i in ids:
            shares[i] += 1.0 / len(ids)
    return shares / draws


@pytest.fixture
def estimator_calls(monkeypatch):
    """Every call of the estimator behind induced_p, as (sampler, draws); starts from an empty
    in-memory cache (another test may have filled it) and leaves an empty one behind."""
    calls = []
    real = agnostic.induced_weights

    def counted(sampler, draws):
        calls.append((sampler, draws))
        return real(sampler, draws)

    monkeypatch.setattr(agnostic, "induced_weights", counted)
    ax._induced_p.cache_clear()
    yield calls
    ax._induced_p.cache_clear()


# ---------------------------------------------------------------------------------------------
# induced_p: what it estimates


def test_induced_p_is_eq2_on_an_independent_copy_of_the_process(estimator_calls):
    p = ax.induced_p("exp_prior", 0, "smoke", 10.0)
    # oracle: the paper's prior exp(-i/10), M = 10 of 100, seeded with the independent stream
    # (bug: the training seed 0 reused, so p would be estimated on the very trace it weights)
    sampler = participation.prior_sampler(N, None, m=ax.M_AVAILABLE, tau=10.0, seed=10_000)
    expected = brute_force_p(sampler, ax.schedule("smoke")["p_draws"])
    np.testing.assert_allclose(p, expected, rtol=0, atol=1e-12)
    assert p.sum() == pytest.approx(1.0)  # Lemma 1
    # the estimate saw exactly the smoke profile's number of draws
    assert [draws for _, draws in estimator_calls] == [2_000]
    # tau = 10 concentrates participation on the first clients (bug: prior reversed or flat)
    assert p[:10].sum() > 0.5 and p[50:].sum() < 0.01
    # the seed picks another copy: a different estimate, the same law
    other = ax.induced_p("exp_prior", 1, "smoke", 10.0)
    assert not np.array_equal(other, p)
    assert np.abs(other - p).max() < 0.02


def test_tau_infinity_stands_for_the_uniform_prior(estimator_calls):
    p = ax.induced_p("exp_prior", 0, "smoke", INF)
    draws = ax.schedule("smoke")["p_draws"]
    # every draw gives M clients 1/M each: p * M * draws counts the inclusions (integers)
    counts = p * ax.M_AVAILABLE * draws
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-6)
    assert counts.sum() == pytest.approx(ax.M_AVAILABLE * draws)
    # uniform: each count is Binomial(2000, 0.1), sd 13.4 (bug: inf mapped to a skewed prior,
    # e.g. tau = 1 or the huge temperature underflowing to a single client)
    assert np.abs(counts - draws * ax.M_AVAILABLE / N).max() < 5 * 13.42
    assert (
        agnostic.l1_skew(p) < 0.15 < agnostic.l1_skew(ax.induced_p("exp_prior", 0, "smoke", 10.0))
    )
    # JSON has no infinity: the sampler spec spells it with a huge, finite temperature that
    # describe() reads back as inf (bug: float('inf') in a config breaks strict JSON keys)
    cfg = ax.config("linear_regression", "agnostic", 0, "smoke", tau=INF)
    assert cfg["sampler"]["tau"] == 1e300
    json.dumps(cfg, allow_nan=False)
    assert ax.describe(cfg)["tau"] == INF
    # the uniform prior itself: exp(-i / 1e300) is 1 for every client
    np.testing.assert_array_equal(participation.exponential_prior(N, 1e300), np.full(N, 1 / N))


@pytest.mark.slow
def test_aoi_policy_p_uses_the_policys_parameters_and_the_sizes(estimator_calls):
    sizes = np.arange(1, N + 1, dtype=float)
    p = ax.induced_p("probabilistic", 2, "smoke", sizes=sizes)
    # oracle: Policy 2 (m = 15 draws with replacement, P(i) = d_i / sum d) on these sizes,
    # independent stream of seed 2
    sampler = SAMPLERS["probabilistic"](N, sizes, m=ax.AOI_M, m_prime=ax.AOI_M_PRIME, seed=10_002)
    np.testing.assert_allclose(p, brute_force_p(sampler, 2_000), rtol=0, atol=1e-12)
    # the largest clients take part most (bug: sizes dropped on the way to the sampler)
    assert p[-10:].sum() > 3 * p[:10].sum()
    # bug: sizes left out of the key, so equal-size and size-weighted p would be confused
    flat = ax.induced_p("probabilistic", 2, "smoke")
    assert flat[-10:].sum() < 2 * flat[:10].sum()
    # Policy 1 selects uniformly (the sizes only weight its aggregation), so p ignores them
    np.testing.assert_array_equal(
        ax.induced_p("random", 2, "smoke", sizes=sizes), ax.induced_p("random", 2, "smoke")
    )
    assert len(estimator_calls) == 4
    with pytest.raises(ValueError, match="unknown process 'fifo'"):
        ax.induced_p("fifo", 0, "smoke")
    with pytest.raises(ValueError, match="seed must be"):
        ax.induced_p("exp_prior", -1, "smoke", 10.0)


# ---------------------------------------------------------------------------------------------
# induced_p: the caches


def test_induced_p_is_computed_once_per_process_and_kept_on_disk(estimator_calls, tmp_path):
    cache = str(tmp_path)
    first = ax.induced_p("exp_prior", 0, "smoke", 20.0, results_dir=cache)
    assert len(estimator_calls) == 1
    # the on-disk entry is a ResultStore entry under the key that induced_p documents
    key = {
        "induced_p": {"name": "exp_prior", "m": 10, "tau": 20.0, "seed": 10_000},
        "draws": 2_000,
        "sizes": [1.0] * N,
    }
    assert (tmp_path / "runs" / config_key(key) / "result.json").exists()
    result, arrays = ResultStore(cache).load(key)
    assert result == {"kind": "induced_p"}
    np.testing.assert_array_equal(arrays["p"], first)
    # in memory: the second call does not estimate again (bug: no memoisation)
    second = ax.induced_p("exp_prior", 0, "smoke", 20.0, results_dir=cache)
    assert len(estimator_calls) == 1
    np.testing.assert_array_equal(second, first)
    # a cleared in-memory cache (as in a fresh process) reads the disk: no estimate, same bits
    ax._induced_p.cache_clear()
    third = ax.induced_p("exp_prior", 0, "smoke", 20.0, results_dir=cache)
    assert len(estimator_calls) == 1
    np.testing.assert_array_equal(third, first)
    # every part of the key matters: another seed, tau, or sizes is estimated afresh
    ax.induced_p("exp_prior", 1, "smoke", 20.0, results_dir=cache)
    ax.induced_p("exp_prior", 0, "smoke", 21.0, results_dir=cache)
    ax.induced_p("exp_prior", 0, "smoke", 20.0, sizes=np.full(N, 2.0), results_dir=cache)
    assert len(estimator_calls) == 4
    assert len(list((tmp_path / "runs").iterdir())) == 4


def test_a_corrupt_disk_entry_is_recomputed(estimator_calls, tmp_path):
    cache = str(tmp_path)
    first = ax.induced_p("exp_prior", 0, "smoke", 5.0, results_dir=cache)
    (npz,) = (tmp_path / "runs").glob("*/arrays.npz")
    npz.write_bytes(npz.read_bytes()[:-10])  # truncated
    ax._induced_p.cache_clear()
    # bug: a damaged entry served (or crashing) instead of being estimated again
    with pytest.warns(UserWarning, match="corrupt cached result"):
        again = ax.induced_p("exp_prior", 0, "smoke", 5.0, results_dir=cache)
    assert len(estimator_calls) == 2
    np.testing.assert_array_equal(again, first)
    ax._induced_p.cache_clear()
    ax.induced_p("exp_prior", 0, "smoke", 5.0, results_dir=cache)  # repaired on disk
    assert len(estimator_calls) == 2


def test_the_number_of_draws_follows_the_profile(monkeypatch, tmp_path):
    calls = []

    def fake(sampler, draws):  # no estimate: only the draws asked for
        calls.append(draws)
        return np.full(N, 1.0 / N)

    monkeypatch.setattr(agnostic, "induced_weights", fake)
    ax._induced_p.cache_clear()
    try:
        for profile in ("smoke", "cpu", "paper"):
            ax.induced_p("exp_prior", 0, profile, 10.0, results_dir=str(tmp_path))
    finally:
        ax._induced_p.cache_clear()
    # bug: a smoke estimate (2,000 draws) served to the cpu profile from the shared disk cache;
    # cpu and paper ask for the same draws, so the cpu entry serves the paper profile
    assert calls == [2_000, 100_000]


# ---------------------------------------------------------------------------------------------
# Schedules, configurations and their descriptions


def test_schedule_per_profile():
    smoke, cpu, paper = (ax.schedule(p) for p in ("smoke", "cpu", "paper"))
    assert smoke["rounds"] == {"mnist": 2, "linear_regression": 3}
    assert (smoke["seeds"], smoke["taus"], smoke["p_draws"]) == (1, (10.0,), 2_000)
    # Sec. 4: five seeds; Fig. 1's tau = 10 is among Fig. 2's temperatures; tau = inf (uniform,
    # skew 0) anchors Fig. 2; p from 100,000 draws outside smoke
    for s in (cpu, paper):
        assert s["seeds"] == 5 and s["p_draws"] == 100_000
        assert ax.TAU in s["taus"] and s["taus"][-1] == INF
        assert list(s["taus"]) == sorted(s["taus"])
        assert set(s["rounds"]) == set(ax.TASKS)
    assert set(cpu["taus"]) < set(paper["taus"])
    assert all(paper["rounds"][t] > cpu["rounds"][t] > smoke["rounds"][t] for t in ax.TASKS)
    # a copy: a notebook that edits its schedule cannot change the next caller's
    smoke["rounds"]["mnist"] = 999
    smoke["taus"] = ()
    assert ax.schedule("smoke")["rounds"]["mnist"] == 2 and ax.schedule("smoke")["taus"] == (10.0,)
    with pytest.raises(ValueError, match="unknown profile 'gpu'; valid: cpu, paper, smoke"):
        ax.schedule("gpu")


CASES = [
    # (task, process, tau, aggregation, seed, protocol)
    ("mnist", "exp_prior", 10.0, "agnostic", 0, "last_iterate"),
    ("mnist", "exp_prior", INF, "weighted", 2, "last_iterate"),
    ("mnist", "markov_optimal", None, "aoi", 1, "last_iterate"),
    ("linear_regression", "exp_prior", 5.0, "weighted_rescaled", 3, "algorithm1"),
    ("linear_regression", "exp_prior", INF, "weighted_normalised", 0, "last_iterate"),
    ("linear_regression", "probabilistic", None, "weighted_updates", 4, "algorithm1"),
    ("linear_regression", "random", None, "aoi", 0, "algorithm1"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_describe_inverts_config(case):
    task, process, tau, agg, seed, protocol = case
    p = np.linspace(1.0, 2.0, N) / np.linspace(1.0, 2.0, N).sum()
    cfg = ax.config(task, agg, seed, "smoke", process=process, tau=tau, p=p, protocol=protocol)
    json.dumps(cfg, allow_nan=False)  # a cache key: strict JSON
    # bug: a field lost or mixed up on the way (e.g. the rescaled rule read as the updates one,
    # the averaged protocol not recognised, a policy's tau invented)
    assert ax.describe(cfg) == dict(
        zip(("task", "process", "tau", "aggregation", "seed", "protocol"), case, strict=True)
    )
    # one seed drives the data (or the partition), the model, the sampler and the batches
    seeded = [cfg["model"], cfg["sampler"], cfg["training"]]
    seeded.append(cfg["partition"] if task == "mnist" else cfg["dataset"])
    assert all(part["seed"] == seed for part in seeded)
    assert cfg["training"]["rounds"] == ax.schedule("smoke")["rounds"][task]
    algorithm = cfg["training"]["algorithm"]
    if algorithm["name"] == "weighted":  # the weights passed, bit for bit
        assert algorithm["p"] == p.tolist()
    if protocol == "algorithm1":  # theta_0 = 0, projection on the ball, averaged iterate
        assert cfg["model"]["init"] == "zeros"
        assert (algorithm["radius"], algorithm["average"]) == (ax.BALL_RADIUS, True)
    if process != "exp_prior":  # the AoI paper's m = 15, m' = 10
        assert cfg["sampler"] == {"name": process, "m": 15, "m_prime": 10, "seed": seed}


def test_ball_radius_is_twice_the_expected_client_model_norm():
    # d = 20 features, heterogeneity 0.5: 2 sqrt(20 * 1.25) = 10
    assert ax.BALL_RADIUS == pytest.approx(10.0)


def test_config_estimates_p_of_its_own_process_when_not_given(estimator_calls, tmp_path):
    cfg = ax.config(
        "linear_regression", "weighted_updates", 0, "smoke", tau=20.0, results_dir=str(tmp_path)
    )
    expected = ax.induced_p("exp_prior", 0, "smoke", 20.0, results_dir=str(tmp_path))
    # bug: the weights of tau = 10 (the default) or of another seed used for tau = 20
    assert cfg["training"]["algorithm"]["p"] == expected.tolist()
    assert len(estimator_calls) == 1  # the config's estimate was cached and reused
    # the agnostic rule and the policy's own weights need no p: nothing is estimated
    ax.config("linear_regression", "agnostic", 5, "smoke", tau=3.0)
    ax.config("mnist", "aoi", 5, "smoke", process="random", tau=None)
    assert len(estimator_calls) == 1


def test_process_p_is_the_p_of_the_runs_process(estimator_calls, tmp_path):
    cache = str(tmp_path)
    for tau in (10.0, INF):
        cfg = ax.config("linear_regression", "agnostic", 1, "smoke", tau=tau)
        np.testing.assert_array_equal(
            ax.process_p(cfg, "smoke", results_dir=cache),
            ax.induced_p("exp_prior", 1, "smoke", tau, results_dir=cache),
        )
    # an AoI policy: p on the task's data sizes (100 samples per synthetic client)
    cfg = ax.config("linear_regression", "agnostic", 0, "smoke", process="markov_optimal", tau=None)
    got = ax.process_p(cfg, "smoke", results_dir=cache)
    sampler = SAMPLERS["markov_optimal"](N, np.full(N, 100.0), m=15, m_prime=10, seed=10_000)
    np.testing.assert_allclose(got, brute_force_p(sampler, 2_000), rtol=0, atol=1e-12)
    assert len(estimator_calls) == 3


def test_figure_grids_cover_every_cell_once(estimator_calls, tmp_path):
    fig1 = [ax.describe(c) for c in ax.figure1_grid("smoke", str(tmp_path))]
    cells = {tuple(d.values()) for d in fig1}
    assert len(cells) == len(fig1) == (1 + 2) * len(ax.AGGREGATIONS)
    assert {(d["task"], d["protocol"]) for d in fig1} == {
        ("mnist", "last_iterate"),
        ("linear_regression", "last_iterate"),
        ("linear_regression", "algorithm1"),
    }
    assert {d["tau"] for d in fig1} == {ax.TAU}
    fig2 = [ax.describe(c) for c in ax.figure2_grid("smoke", str(tmp_path))]
    assert len({tuple(d.values()) for d in fig2}) == len(fig2) == 2 * (1 + len(ax.FIG2_RULES))
    assert {d["aggregation"] for d in fig2} == {"agnostic", *ax.FIG2_RULES}
    # one estimate of p per (seed, tau) of the process, shared by every rule and task
    assert len(estimator_calls) == 1


def test_theorem4s_step_is_c_over_sqrt_th():
    assert ax.rate_step(0.2, 80, 5) == pytest.approx(0.2 / 20)
    for bad, match in (
        (dict(c=0.0, rounds=80, local_steps=5), "c must be > 0"),
        (dict(c=0.2, rounds=0, local_steps=5), "rounds"),
        (dict(c=0.2, rounds=80, local_steps=0), "local_steps"),
    ):
        with pytest.raises(ValueError, match=match):
            ax.rate_step(**bad)


def test_the_rate_grids_planned_runs():
    sched = ax.schedule("cpu")
    # T over at least a 30x span (the slope's lever arm), at least 3 seeds
    assert sched["rate_horizons"][-1] / sched["rate_horizons"][0] >= 30 and sched["seeds"] >= 3
    grid = ax.rate_grid("cpu", 0.2)
    assert len(grid) == len(sched["rate_horizons"]) * sched["seeds"]
    cells = set()
    for cfg in grid:
        d, t = ax.describe(cfg), cfg["training"]
        # Algorithm 1 as analysed, agnostic aggregation, tau = 10, the convex task
        assert (d["task"], d["protocol"], d["aggregation"], d["tau"]) == (
            ax.RATE_TASK, "algorithm1", "agnostic", ax.TAU
        )  # fmt: skip
        assert cfg["model"]["init"] == "zeros"
        # eta = c / sqrt(TH) at T, evaluated at the start and at T only, stored compressed
        assert t["lr"] == {"name": "constant", "lr": ax.rate_step(0.2, t["rounds"], 5)}
        assert t["eval_every"] == t["rounds"] and t["compress"] is True
        assert ar.step_constant(cfg) == 0.2
        cells.add((t["rounds"], d["seed"]))
    assert len(cells) == len(grid)
    # the constant is tuned on other seeds (another data set, trace and batches), at the middle
    # horizon, over every constant of the schedule
    tuning = ax.rate_tuning_grid("cpu")
    assert ax.rate_tuning_horizon("cpu") == 160
    assert {(ar.step_constant(c), c["training"]["rounds"]) for c in tuning} == {
        (c, 160) for c in sched["rate_steps"]
    }
    tuning_seeds = {ax.describe(c)["seed"] for c in tuning}
    assert len(tuning_seeds) == sched["rate_tune_seeds"]
    assert not tuning_seeds & {ax.describe(c)["seed"] for c in grid}
    assert all(c["dataset"]["seed"] >= ax.TUNE_SEED_STREAM for c in tuning)
    # a step that is not constant has no constant c
    other = {**grid[0], "training": {**grid[0]["training"], "lr": {"name": "exponential"}}}
    assert np.isnan(ar.step_constant(other))


# ---------------------------------------------------------------------------------------------
# Reading the results


def fake_run(eval_round, client_losses):
    return SimpleNamespace(history={"eval_round": eval_round, "client_losses": client_losses})


def test_objective_curves_by_hand():
    p = [0.1, 0.2, 0.3, 0.4]
    losses = [[1.0, 2.0, 3.0, 4.0], [4.0, 0.0, 0.0, 1.0], [2.0, 2.0, 2.0, 2.0]]
    rounds, obj_p, obj_u = ar.objective_curves(fake_run([0, 5, 10], losses), p)
    np.testing.assert_array_equal(rounds, [0, 5, 10])
    # sum_i p_i f_i: 0.1 + 0.4 + 0.9 + 1.6 = 3.0; 0.4 + 0.4 = 0.8; 2 (bug: p on the wrong axis,
    # or the two objectives swapped)
    np.testing.assert_allclose(obj_p, [3.0, 0.8, 2.0])
    # (1/N) sum_i f_i: 10 / 4, 5 / 4, 2
    np.testing.assert_allclose(obj_u, [2.5, 1.25, 2.0])
    with pytest.raises(ValueError, match="one weight per client"):
        ar.objective_curves(fake_run([0], [[1.0, 2.0]]), p)


def test_converged_value_is_the_mean_of_the_last_evaluations():
    curve = np.array([9.0, 7.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    assert ar.converged_value(curve) == pytest.approx(3.0)  # (1 + 2 + 3 + 4 + 5) / 5
    assert ar.converged_value(curve, last=2) == pytest.approx(4.5)
    assert ar.converged_value(curve, last=1) == 5.0
    assert ar.converged_value(curve[:3], last=5) == pytest.approx(17 / 3)  # all there is


def test_run_table_and_gaps_by_hand(estimator_calls, tmp_path):
    cache = str(tmp_path)
    rules = ("agnostic", "weighted_updates")
    configs = [
        ax.config("linear_regression", r, s, "smoke", results_dir=cache)
        for s in (0, 1)
        for r in rules
    ]
    i = np.arange(N, dtype=float)
    rounds = [0, 1, 2, 3]
    results = [
        # client i's loss (i + 1) * c_t: agnostic runs level, weighted ones worse by 1
        fake_run(rounds, [list((i + 1) * c) for c in (4.0, 3.0, 2.0, 1.0)]),
        fake_run(rounds, [list((i + 1) * c + 1) for c in (4.0, 3.0, 2.0, 1.0)]),
        # a bump to 4x the initial loss is not divergence (the ledger's rule: above 5x)
        fake_run(rounds, [list(np.full(N, c)) for c in (1.0, 4.0, 1.0, 1.0)]),
        # diverges at round 2: above 5x the initial loss, then not a number
        fake_run(rounds, [list(np.full(N, c)) for c in (1.0, 0.5, 6.0, np.nan)]),
    ]
    table = ar.run_table(configs, results, "smoke", results_dir=cache, last=2)
    assert list(table.aggregation) == ["agnostic", "weighted_updates"] * 2
    assert list(table.seed) == [0, 0, 1, 1]
    for row, seed in zip(table.itertuples(), (0, 0, 1, 1), strict=True):
        p = ax.induced_p("exp_prior", seed, "smoke", 10.0, results_dir=cache)
        weighted = sum(p[k] * (k + 1) for k in range(N))  # sum_i p_i (i + 1)
        assert row.skew == pytest.approx(sum(abs(p[k] - 1 / N) for k in range(N)))
        if row.Index == 0:  # mean of the last 2 evaluations: c = 2 and 1
            assert row.loss_p == pytest.approx(1.5 * weighted)
            assert row.loss_uniform == pytest.approx(1.5 * (N + 1) / 2)
            # the mean over the run (trapezoids over rounds 0-3): (3.5 + 2.5 + 1.5) / 3 = 2.5
            assert row.horizon_p == pytest.approx(2.5 * weighted)
        if row.Index == 1:
            assert row.loss_p == pytest.approx(1.5 * weighted + 1)
            assert row.loss_uniform == pytest.approx(1.5 * (N + 1) / 2 + 1)
    # bug: divergence missed (nan compares False) or reported at the wrong evaluation
    # (None in the rows; pandas holds a column of ints and Nones as floats with NaN)
    assert table.diverged_at[:3].isna().all()
    assert table.diverged_at[3] == 2
    assert np.isnan(table.loss_p[3])
    assert table.loss_p[2] == pytest.approx(1.0)
    g = ar.gaps(table, ("weighted_updates",))
    assert g.seed.tolist() == [0, 1]
    assert g.gap_p[0] == pytest.approx(1.0) and g.gap_uniform[0] == pytest.approx(1.0)
    assert g.gap_horizon[0] == pytest.approx(1.0) and g.agnostic_horizon[0] == pytest.approx(
        table.horizon_p[0]
    )
    assert np.isnan(g.gap_p[1])
    assert g.diverged.tolist() == [False, True]  # seed 1's weighted run
    assert isinstance(g, pd.DataFrame) and len(estimator_calls) == 2  # seeds 0 and 1


def test_a_caller_changing_p_in_place_does_not_change_the_next_call():
    # the estimate is memoised per process: handing out the memoised array itself would let
    # one notebook cell's in-place edit change the p of every later configuration
    first = ax.induced_p("exp_prior", 0, "smoke", tau=10.0)
    expected = first.copy()
    first *= 0.0
    np.testing.assert_array_equal(ax.induced_p("exp_prior", 0, "smoke", tau=10.0), expected)


def test_the_participation_processes_are_the_aoi_policies():
    from aoi_fl.aoi.samplers import POLICIES as AOI_POLICIES

    assert ax.POLICIES == AOI_POLICIES
