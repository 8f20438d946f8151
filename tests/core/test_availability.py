"""Client availability models (:mod:`aoi_fl.core.availability`): closed forms against simulation,
determinism and resumability, configuration round trips, trace files, and the checks of specs.

Statistical checks run on fixed seeds, so they are deterministic. Each tolerance is Z = 5
standard errors of the simulated statistic under the model's own law, derived next to the check
(P(|N(0, 1)| > 5) = 5.7e-7: a correct model passes for practically every seed, while a wrong
closed form is off by many standard errors at these sample sizes).
"""

import hashlib
import inspect
import json
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aoi_fl.core.availability import (
    AVAILABILITY,
    TRACE_HEADER,
    build_availability,
    check_availability_spec,
)
from aoi_fl.core.seeding import generator

#: standard errors allowed for every simulated statistic
Z = 5.0
N = 24
#: distinct data sizes (a seeded permutation), so ranks by size are unambiguous
SIZES = (generator(0, "test availability sizes").permutation(N) + 1) * 37.0

SPECS = {
    "always": {"name": "always"},
    "bernoulli_mean": {"name": "bernoulli", "seed": 1, "mean": 0.3},
    "bernoulli_rates": {"name": "bernoulli", "seed": 2, "rates": np.linspace(0, 1, N).tolist()},
    "bernoulli_beta": {"name": "bernoulli", "seed": 3, "mean": 0.4, "concentration": 3.0},
    "bernoulli_size": {
        "name": "bernoulli",
        "seed": 3,
        "mean": 0.4,
        "concentration": 3.0,
        "correlation": "size",
    },
    "bernoulli_inverse": {
        "name": "bernoulli",
        "seed": 3,
        "mean": 0.4,
        "concentration": 3.0,
        "correlation": "inverse_size",
    },
    "markov": {
        "name": "markov_onoff",
        "seed": 4,
        "mean_on": 3.0,
        "mean_off": [1.0 + (i % 5) for i in range(N)],
    },
    "diurnal_drawn_phases": {
        "name": "diurnal",
        "seed": 5,
        "base": 0.5,
        "amplitude": 0.3,
        "period": 12,
    },
    "diurnal_clipped": {
        "name": "diurnal",
        "seed": 6,
        "base": 0.8,
        "amplitude": 0.5,
        "period": 8,
        "phases": 0.0,
    },
}


def build(spec, n=N, sizes=SIZES):
    return build_availability(spec, n, sizes)


def assert_counts(hits, probs, axis=0):
    """Sums of independent Bernoulli(probs) indicators along ``axis`` against their mean.

    The sum of independent Bernoulli(p_k) has mean sum p_k and variance sum p_k (1 - p_k); the
    tolerance is Z of its standard deviations (zero where every p_k is 0 or 1: then exact).
    """
    hits, probs = np.broadcast_arrays(np.asarray(hits, dtype=float), probs)
    got, want = hits.sum(axis=axis), probs.sum(axis=axis)
    sd = np.sqrt((probs * (1.0 - probs)).sum(axis=axis))
    assert np.all(np.abs(got - want) <= Z * sd + 1e-9), np.max(np.abs(got - want) / (sd + 1e-12))


def write_trace(directory, text, name="trace.csv"):
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# --------------------------------------------------------------------------- closed forms


def test_always_is_everyone_every_round():
    model = build(SPECS["always"])
    assert model.trace(7).all() and model.trace(7).shape == (7, N)
    assert (model.rates(3) == 1.0).all() and (model.long_run_rates() == 1.0).all()
    assert model.config() == {"name": "always", "seed": 0}


@pytest.mark.parametrize("key", ["bernoulli_mean", "bernoulli_rates", "bernoulli_beta"])
def test_bernoulli_frequencies_match_the_rates(key):
    """Per client, the count over R rounds is Binomial(R, r_i): within Z sqrt(R r_i (1 - r_i))
    of R r_i (exact for r_i in {0, 1}); and rates(t) = long_run_rates() = r every round."""
    model, rounds = build(SPECS[key]), 1500
    rates = model.long_run_rates()
    for t in (0, 1, 17, 10**6):
        np.testing.assert_array_equal(model.rates(t), rates)
    if key == "bernoulli_mean":
        np.testing.assert_array_equal(rates, np.full(N, 0.3))
    if key == "bernoulli_rates":
        np.testing.assert_array_equal(rates, np.linspace(0, 1, N))
    masks = model.trace(rounds)
    assert_counts(masks, rates[None, :], axis=0)
    assert_counts(masks.ravel(), np.tile(rates, rounds))  # pooled over clients and rounds
    # independence across rounds: P(on in t and t + 1) = r_i^2, a Binomial over R - 1 pairs
    assert_counts(masks[1:] & masks[:-1], (rates**2)[None, :], axis=0)
    # independence across clients: the round's count has variance sum_i r_i (1 - r_i); the
    # sample variance of its R standardised values is within Z sqrt(2 / R) of 1 (normal approx.)
    z = (masks.sum(axis=1) - rates.sum()) / math.sqrt((rates * (1 - rates)).sum())
    assert abs(z.var() - 1) <= Z * math.sqrt(2 / rounds)


def beta_excess_kurtosis(a, b):
    return (
        6 * ((a - b) ** 2 * (a + b + 1) - a * b * (a + b + 2)) / (a * b * (a + b + 2) * (a + b + 3))
    )


@pytest.mark.parametrize("mean, concentration", [(0.3, 4.0), (0.7, 20.0), (0.5, 0.8)])
def test_beta_drawn_rates_have_the_stated_mean_and_variance(mean, concentration):
    """r_i ~ Beta(mean c, (1 - mean) c): mean ``mean``, variance v = mean (1 - mean) / (c + 1).

    Over n draws the sample mean has standard error sqrt(v / n); the sample variance has
    standard error ~ v sqrt((kappa - 1) / n), kappa the Beta's kurtosis (its fourth central
    moment is kappa v^2). Both within Z of those.
    """
    n = 4000
    spec = {"name": "bernoulli", "seed": 7, "mean": mean, "concentration": concentration}
    rates = build(spec, n, None).long_run_rates()
    a, b = mean * concentration, (1 - mean) * concentration
    v = mean * (1 - mean) / (concentration + 1)
    kappa = 3 + beta_excess_kurtosis(a, b)
    assert ((rates >= 0) & (rates <= 1)).all()
    assert abs(rates.mean() - mean) <= Z * math.sqrt(v / n)
    assert abs(rates.var(ddof=1) - v) <= Z * v * math.sqrt((kappa - 1) / n)
    assert np.unique(rates).size == n  # drawn per client, not one rate for all
    other = build({**spec, "seed": 8}, n, None).long_run_rates()
    assert not np.array_equal(rates, other)


def test_size_correlation_hands_the_drawn_rates_out_by_size_rank():
    none = build(SPECS["bernoulli_beta"]).long_run_rates()
    size = build(SPECS["bernoulli_size"]).long_run_rates()
    inverse = build(SPECS["bernoulli_inverse"]).long_run_rates()
    # the same draw (same seed), only handed out differently
    np.testing.assert_array_equal(np.sort(none), np.sort(size))
    np.testing.assert_array_equal(np.sort(none), np.sort(inverse))
    by_size = np.argsort(SIZES)
    np.testing.assert_array_equal(np.argsort(size), by_size)  # the ranking is the sizes'
    np.testing.assert_array_equal(np.argsort(inverse), by_size[::-1])  # and its reverse
    assert not np.array_equal(np.argsort(none), by_size)  # "none": as drawn, uncorrelated


def test_size_correlation_ties_go_to_the_lower_id_first():
    sizes = np.array([5.0, 1.0, 5.0, 1.0, 3.0])
    spec = {**SPECS["bernoulli_size"], "seed": 11}
    rates = build(spec, 5, sizes).long_run_rates()
    drawn = np.sort(rates)
    # ascending size, ties by id: 1, 3, 4, 0, 2 get the drawn rates in increasing order
    np.testing.assert_array_equal(rates[[1, 3, 4, 0, 2]], drawn)


@pytest.mark.parametrize(
    "sizes, match",
    [
        (None, "correlation='size' needs the clients' data sizes, got None"),
        (np.ones(N - 1), rf"sizes must have one entry per client \(n={N}\), got {N - 1}"),
        (np.r_[np.ones(N - 1), 0.0], rf"sizes\[{N - 1}\] = 0.0; every dataset size must be"),
    ],
)
def test_size_correlation_needs_the_sizes(sizes, match):
    with pytest.raises(ValueError, match=match):
        build(SPECS["bernoulli_size"], N, sizes)


MARKOV_ON = (1.0, 2.5, 6.0)
MARKOV_OFF = (1.5, 4.0)


def markov_model(clients, seed):
    spec = {
        "name": "markov_onoff",
        "seed": seed,
        "mean_on": [MARKOV_ON[i % 3] for i in range(clients)],
        "mean_off": [MARKOV_OFF[i % 2] for i in range(clients)],
    }
    return build(spec, clients, None)


def runs_of(row):
    """(value, length) of the complete runs of a 0/1 row (the censored first and last dropped)."""
    edges = np.flatnonzero(np.diff(row.astype(np.int8))) + 1
    starts, ends = edges[:-1], edges[1:]
    return row[starts], ends - starts


def test_markov_marginals_are_stationary_from_round_zero():
    """Round t's count over clients and seeds is a sum of independent Bernoulli(pi_i) (the chains
    are independent across clients and seeds): Z sqrt(sum pi_i (1 - pi_i)) around sum pi_i, for
    every round from 0 on (round 0 is drawn stationary)."""
    clients, rounds, seeds = 60, 12, 25
    on = np.array([MARKOV_ON[i % 3] for i in range(clients)])
    off = np.array([MARKOV_OFF[i % 2] for i in range(clients)])
    pi = on / (on + off)
    hits = np.zeros((rounds, clients))
    for seed in range(seeds):
        model = markov_model(clients, seed)
        for t in (0, 5, rounds - 1):
            np.testing.assert_allclose(model.rates(t), pi, rtol=1e-15)
        np.testing.assert_allclose(model.long_run_rates(), pi, rtol=1e-15)
        hits += model.trace(rounds)
    sd = math.sqrt(seeds * (pi * (1 - pi)).sum())
    for t in range(rounds):
        assert abs(hits[t].sum() - seeds * pi.sum()) <= Z * sd


def test_markov_run_lengths_autocorrelation_and_long_run_rates():
    clients, rounds = 60, 3000
    model = markov_model(clients, 21)
    masks = model.trace(rounds)
    on = np.array([MARKOV_ON[i % 3] for i in range(clients)])
    off = np.array([MARKOV_OFF[i % 2] for i in range(clients)])
    pi = on / (on + off)
    lam = 1 - 1 / on - 1 / off  # lag-1 autocorrelation (eigenvalue of the chain)

    # long-run frequency per client: for a stationary two-state chain Var(sum_t X_t) =
    # pi (1 - pi) [R + 2 sum_{k=1}^{R-1} (R - k) lam^k] (autocorrelation lam^k at lag k)
    k = np.arange(1, rounds)
    var = pi * (1 - pi) * (rounds + 2 * ((rounds - k)[None, :] * lam[:, None] ** k).sum(axis=1))
    got = masks.sum(axis=0)
    assert np.all(np.abs(got - rounds * model.long_run_rates()) <= Z * np.sqrt(var))

    # run lengths: geometric with mean mu (P(end) = 1/mu per round), standard deviation
    # sqrt(mu (mu - 1)); the mean of m complete runs within Z sqrt(mu (mu - 1) / m) of mu (exact
    # for mu = 1). Dropping the censored first and last run of each client biases the mean by
    # O(mu^2 / R), far below that at R = 3000.
    lengths = {True: {}, False: {}}
    for i in range(clients):
        values, lens = runs_of(masks[:, i])
        for state, mu in ((True, on[i]), (False, off[i])):
            lengths[state].setdefault(mu, []).extend(lens[values == state].tolist())
    for state, means in ((True, MARKOV_ON), (False, MARKOV_OFF)):
        for mu in means:
            runs = np.array(lengths[state][mu])
            assert runs.size > 1000
            assert abs(runs.mean() - mu) <= Z * math.sqrt(mu * (mu - 1) / runs.size) + 1e-12
    assert (np.array(lengths[True][1.0]) == 1).all()  # mean_on = 1: on for exactly one round

    # lag-1 autocorrelation 1 - 1/mean_on - 1/mean_off = P(on | on) - P(on | off), pooled over
    # the clients of each (mean_on, mean_off). The sample correlation equals p11^ - p01^ up to
    # O(1/R); the transition frequencies are binomial given the visits, so the standard error is
    # sqrt(p11 (1 - p11) / visits_on + p01 (1 - p01) / visits_off).
    for a in MARKOV_ON:
        for b in MARKOV_OFF:
            cols = (on == a) & (off == b)
            x, y = masks[:-1, cols].ravel(), masks[1:, cols].ravel()
            corr = np.corrcoef(x, y)[0, 1]
            p11, p01 = 1 - 1 / a, 1 / b
            se = math.sqrt(p11 * (1 - p11) / x.sum() + p01 * (1 - p01) / (~x).sum())
            assert abs(corr - (1 - 1 / a - 1 / b)) <= Z * se + 2 / x.size


def diurnal_formula(base, amplitude, period, phases, t):
    return np.clip(base + amplitude * np.sin(2 * np.pi * t / period + phases), 0, 1)


def test_diurnal_rates_are_the_clipped_sine():
    phases = np.linspace(0, 6, N)
    spec = {**SPECS["diurnal_drawn_phases"], "phases": phases.tolist()}
    model = build(spec)
    for t in (0, 1, 5, 11, 12, 1000):
        np.testing.assert_allclose(model.rates(t), diurnal_formula(0.5, 0.3, 12, phases, t))
    # by default the phases are drawn once, uniform on [0, 2 pi), from "availability_rates"
    drawn = generator(5, "availability_rates").uniform(0, 2 * np.pi, N)
    model = build(SPECS["diurnal_drawn_phases"])
    for t in (0, 3, 7):
        np.testing.assert_allclose(model.rates(t), diurnal_formula(0.5, 0.3, 12, drawn, t))
    # never clipped and period >= 2: the sine averages out over a period, the long-run rate is base
    np.testing.assert_allclose(model.long_run_rates(), 0.5, atol=1e-12)


def test_diurnal_with_clipping_matches_the_period_mean_of_the_clipped_rates():
    """Every client has phase 0, so round t's count over the N clients is Binomial(N, r(t)) and
    the rounds t = k mod period add up independently: per residue k, within Z sqrt(reps N r (1-r))
    of reps N r(k) (exact where r(k) = 1: clipped rounds have everyone)."""
    model, period, reps = build(SPECS["diurnal_clipped"]), 8, 250
    per_round = diurnal_formula(0.8, 0.5, period, 0.0, np.arange(period))
    assert (per_round == 1.0).sum() == 3  # rounds 1, 2, 3 are clipped
    long_run = per_round.mean()  # 0.7241..., not the base 0.8
    assert long_run == pytest.approx(
        (0.8 + 1 + 1 + 1 + 0.8 + 2 * (0.8 - 0.5 * math.sqrt(0.5)) + 0.3) / 8
    )
    np.testing.assert_allclose(model.long_run_rates(), long_run, rtol=1e-12)
    for t in range(period):
        np.testing.assert_allclose(model.rates(t), per_round[t], rtol=1e-12)
        np.testing.assert_allclose(model.rates(t + 5 * period), per_round[t], rtol=1e-12)
    masks = model.trace(period * reps)
    by_residue = masks.reshape(reps, period, N)
    assert by_residue[:, 1:4].all()  # rate 1: always available
    counts = by_residue.sum(axis=(0, 2))
    sd = np.sqrt(reps * N * per_round * (1 - per_round))
    assert np.all(np.abs(counts - reps * N * per_round) <= Z * sd + 1e-9)
    # per client over all rounds: variance sum_t r(t) (1 - r(t)) = reps sum_k r(k) (1 - r(k))
    assert_counts(masks, np.tile(per_round, reps)[:, None], axis=0)
    assert abs(masks.mean() - long_run) <= Z * math.sqrt(
        reps * N * (per_round * (1 - per_round)).sum()
    ) / (reps * N * period)


def test_diurnal_with_drawn_phases_matches_rates_per_round_and_client():
    model, rounds = build(SPECS["diurnal_drawn_phases"]), 1200
    masks = model.trace(rounds)
    rates = np.array([model.rates(t) for t in range(rounds)])
    assert_counts(masks, rates, axis=0)  # per client over rounds
    assert_counts(masks, rates, axis=1)  # per round over clients
    assert_counts(masks.reshape(-1, 12, N), rates.reshape(-1, 12, N), axis=0)  # per phase


# --------------------------------------------------------------------- determinism, configs


@pytest.mark.parametrize("key", sorted(SPECS))
def test_masks_are_the_same_in_any_order_and_after_a_rebuild(key):
    rounds = 60
    reference = build(SPECS[key]).trace(rounds)
    assert reference.dtype == bool and reference.shape == (rounds, N)
    shuffled = build(SPECS[key])
    for t in generator(0, "test availability order").permutation(rounds):
        np.testing.assert_array_equal(shuffled.mask(int(t)), reference[t])
    # resumability: a model rebuilt mid-run gives the same masks from round t on
    resumed = build(SPECS[key])
    for t in range(37, rounds):
        np.testing.assert_array_equal(resumed.mask(t), reference[t])
    np.testing.assert_array_equal(resumed.trace(rounds), reference)
    # a returned mask is the caller's: changing it changes nothing later
    again = build(SPECS[key])
    first = again.mask(3)
    first[:] = ~first
    np.testing.assert_array_equal(again.mask(3), reference[3])


@pytest.mark.parametrize("key", sorted(set(SPECS) - {"always"}))
def test_different_seeds_give_different_masks(key):
    spec = SPECS[key]
    a = build({**spec, "seed": 100}).trace(40)
    b = build({**spec, "seed": 101}).trace(40)
    assert not np.array_equal(a, b)


@pytest.mark.parametrize("key", sorted(SPECS))
def test_config_round_trip(key):
    model = build(SPECS[key])
    config = model.config()
    assert json.loads(json.dumps(config)) == config  # JSON-serialisable as it is
    assert check_availability_spec(SPECS[key], N) == config  # the canonical form
    assert check_availability_spec(SPECS[key]) == config  # (n-free checks, same form)
    assert check_availability_spec(config, N) == config  # idempotent
    rebuilt = build_availability(config, N, SIZES)
    np.testing.assert_array_equal(rebuilt.trace(50), model.trace(50))
    np.testing.assert_array_equal(rebuilt.long_run_rates(), model.long_run_rates())
    assert rebuilt.config() == config


def test_per_client_options_accept_numpy_arrays():
    """A 1-d array is a per-client list (the module's _is_list): canonicalised to a list."""
    cases = [
        ({"name": "bernoulli", "rates": np.full(3, 0.25)}, "rates"),
        ({"name": "markov_onoff", "mean_on": np.array([2.0, 3.0, 4.0]), "mean_off": 2}, "mean_on"),
        ({"name": "markov_onoff", "mean_on": 2, "mean_off": np.array([2.0, 3.0, 4.0])}, "mean_off"),
        (
            {"name": "diurnal", "base": 0.5, "amplitude": 0.2, "period": 4, "phases": np.ones(3)},
            "phases",
        ),
    ]
    for spec, key in cases:
        config = build_availability(spec, 3, None).config()
        as_list = {**spec, key: np.asarray(spec[key]).tolist()}
        assert config == build_availability(as_list, 3, None).config()
        assert isinstance(config[key], list) and json.dumps(config)


def test_the_registry_lists_every_model_with_its_options():
    assert set(AVAILABILITY) == {"always", "bernoulli", "markov_onoff", "diurnal", "trace"}
    options = {k: list(inspect.signature(f).parameters)[3:] for k, f in AVAILABILITY.items()}
    assert options == {
        "always": [],
        "bernoulli": ["mean", "concentration", "rates", "correlation"],
        "markov_onoff": ["mean_on", "mean_off"],
        "diurnal": ["base", "amplitude", "period", "phases"],
        "trace": ["path", "repeat", "sha256"],
    }


# --------------------------------------------------------------------------------- traces


def test_trace_replays_intervals_start_inclusive_end_exclusive(tmp_path):
    path = write_trace(tmp_path, "client,start,end\n0,0,2\n1,1,3\n0,4,5\n")
    model = build({"name": "trace", "path": path}, 3)
    want = [[1, 0, 0], [1, 1, 0], [0, 1, 0], [0, 0, 0], [1, 0, 0]]
    assert model.span == 5
    np.testing.assert_array_equal(model.trace(5), np.array(want, dtype=bool))
    np.testing.assert_array_equal(model.trace(9)[5:], np.zeros((4, 3), dtype=bool))  # past T
    for t in range(9):
        np.testing.assert_array_equal(model.rates(t), model.mask(t).astype(float))
    np.testing.assert_allclose(model.long_run_rates(), [3 / 5, 2 / 5, 0.0])
    config = model.config()
    digest = hashlib.sha256((tmp_path / "trace.csv").read_bytes()).hexdigest()
    assert config == {"name": "trace", "seed": 0, "path": path, "repeat": False, "sha256": digest}
    assert check_availability_spec({"name": "trace", "path": tmp_path / "trace.csv"}) == config


def test_trace_overlapping_rows_count_once(tmp_path):
    text = "\n".join(
        [
            "client,start,end",
            "0,0,4",
            "0,2,6",
            "0,1,2",
            "0,5,7",
            "1,0,10",
            "2,8,10",
            "2,3,4",
            "2,3,4",
        ]
    )
    model = build({"name": "trace", "path": write_trace(tmp_path, text)}, 4)
    masks = model.trace(model.span)
    assert model.span == 10
    np.testing.assert_array_equal(masks[:, 0], np.arange(10) < 7)  # [0, 7): union of 4 rows
    np.testing.assert_array_equal(masks[:, 2], np.isin(np.arange(10), [3, 8, 9]))
    # long-run rate = length of the union of a client's intervals / span
    np.testing.assert_allclose(model.long_run_rates(), [0.7, 1.0, 0.3, 0.0])
    np.testing.assert_allclose(model.long_run_rates(), masks.mean(axis=0))


def test_trace_repeat_replays_round_t_mod_span(tmp_path):
    path = write_trace(tmp_path, "client,start,end\n0,1,3\n1,0,1\n1,5,7\n2,6,7\n")
    model = build({"name": "trace", "path": path, "repeat": True}, 3)
    span = model.span
    assert span == 7
    masks = model.trace(5 * span)
    for t in range(5 * span):
        np.testing.assert_array_equal(masks[t], masks[t % span])
    assert model.mask(10**6).tolist() == model.mask(10**6 % span).tolist()
    # over whole spans the frequency is the long-run rate exactly
    np.testing.assert_allclose(masks.mean(axis=0), model.long_run_rates())
    np.testing.assert_allclose(model.long_run_rates(), [2 / 7, 3 / 7, 1 / 7])


def test_trace_tolerates_blank_lines_spaces_and_a_bom(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes("\ufeff client , start , end\r\n\r\n 0 , 0 , 2 \r\n\r\n".encode())
    model = build({"name": "trace", "path": str(path)}, 1)
    assert model.trace(3)[:, 0].tolist() == [True, True, False]


@st.composite
def trace_rows(draw):
    n = draw(st.integers(1, 5))
    rows = draw(
        st.lists(
            st.tuples(st.integers(0, n - 1), st.integers(0, 30), st.integers(1, 12)),
            min_size=1,
            max_size=12,
        )
    )
    return n, [(c, s, s + length) for c, s, length in rows]


@settings(max_examples=40, deadline=None)
@given(trace_rows())
def test_trace_masks_and_long_run_rates_are_the_intervals_union(tmp_path_factory, case):
    n, rows = case
    text = ",".join(TRACE_HEADER) + "\n" + "".join(f"{c},{s},{e}\n" for c, s, e in rows)
    directory = tmp_path_factory.mktemp("trace")
    model = build({"name": "trace", "path": write_trace(directory, text)}, n)
    span = max(e for _, _, e in rows)
    assert model.span == span
    want = np.zeros((span + 3, n), dtype=bool)
    for c, s, e in rows:
        want[s:e, c] = True
    np.testing.assert_array_equal(model.trace(span + 3), want)
    np.testing.assert_allclose(model.long_run_rates(), want[:span].mean(axis=0), rtol=1e-12)


#: (file text, n, the line named, what the message says is allowed or expected)
MALFORMED = {
    "bad header": (
        "client,begin,end\n0,0,1\n",
        3,
        1,
        r"the header must be 'client,start,end', got 'client,begin,end'",
    ),
    "no header": ("0,0,1\n", 3, 1, r"the header must be 'client,start,end', got '0,0,1'"),
    "empty": ("", 3, 1, r"the header must be 'client,start,end', got 'an empty file'"),
    "blank only": ("\n\n", 3, 1, r"the header must be 'client,start,end', got 'an empty file'"),
    "non-integer start": (
        "client,start,end\n0,1.5,3\n",
        3,
        2,
        r"start must be an integer, got '1.5'",
    ),
    "non-integer client": (
        "client,start,end\n0,0,1\nx,0,1\n",
        3,
        3,
        r"client must be an integer, got 'x'",
    ),
    "non-integer end": ("client,start,end\n0,0,\n", 3, 2, r"end must be an integer, got ''"),
    "too few fields": (
        "client,start,end\n0,1\n",
        3,
        2,
        r"expected 3 fields client,start,end, got '0,1'",
    ),
    "too many fields": (
        "client,start,end\n0,1,2,3\n",
        3,
        2,
        r"expected 3 fields client,start,end, got '0,1,2,3'",
    ),
    "client out of range": (
        "client,start,end\n0,0,1\n3,0,2\n",
        3,
        3,
        r"client 3 is out of range; allowed: 0\.\.2 \(n=3\)",
    ),
    "negative client": (
        "client,start,end\n-1,0,2\n",
        3,
        2,
        r"client -1 is out of range; allowed: 0\.\.2 \(n=3\)",
    ),
    "start = end": (
        "client,start,end\n0,2,2\n",
        3,
        2,
        r"start must be < end \(rounds \[start, end\)\), got 2, 2",
    ),
    "start > end": (
        "client,start,end\n0,5,2\n",
        3,
        2,
        r"start must be < end \(rounds \[start, end\)\), got 5, 2",
    ),
    "negative start": ("client,start,end\n0,-1,2\n", 3, 2, r"start must be >= 0, got -1"),
    "line counts blanks": (
        "client,start,end\n\n0,0,1\n\n1,x,2\n",
        3,
        5,
        r"start must be an integer, got 'x'",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_trace_names_the_file_the_line_and_what_is_allowed(tmp_path, case):
    text, n, line, allowed = MALFORMED[case]
    path = write_trace(tmp_path, text)
    match = rf"trace file '{re.escape(path)}', line {line}: {allowed}"
    with pytest.raises(ValueError, match=match) as raised:
        check_availability_spec({"name": "trace", "path": path}, n)
    assert path in str(raised.value)
    with pytest.raises(ValueError, match=match):
        build({"name": "trace", "path": path}, n)


def test_a_client_out_of_range_is_found_once_n_is_known(tmp_path):
    path = write_trace(tmp_path, "client,start,end\n5,0,1\n")
    check_availability_spec({"name": "trace", "path": path})  # n unknown: 5 may be fine
    with pytest.raises(ValueError, match=r"line 2: client 5 is out of range; allowed: 0\.\.4"):
        check_availability_spec({"name": "trace", "path": path}, 5)
    assert build({"name": "trace", "path": path}, 6).trace(1)[0].tolist() == [0] * 5 + [1]


def test_a_trace_with_a_header_but_no_rows_or_unreadable_is_refused(tmp_path):
    path = write_trace(tmp_path, "client,start,end\n\n")
    with pytest.raises(
        ValueError, match=rf"trace file '{re.escape(path)}' has a header but no rows"
    ):
        check_availability_spec({"name": "trace", "path": path}, 3)
    missing = str(tmp_path / "missing.csv")
    with pytest.raises(ValueError, match=rf"trace path '{re.escape(missing)}' cannot be read"):
        check_availability_spec({"name": "trace", "path": missing}, 3)
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"client,start,end\n0,0,\xff\n")
    with pytest.raises(
        ValueError, match=rf"trace file '{re.escape(str(binary))}' is not UTF-8 text"
    ):
        check_availability_spec({"name": "trace", "path": str(binary)}, 3)


def test_a_changed_trace_file_no_longer_matches_its_sha256(tmp_path):
    path = write_trace(tmp_path, "client,start,end\n0,0,2\n")
    model = build({"name": "trace", "path": path}, 2)
    config = model.config()
    np.testing.assert_array_equal(build(config, 2).trace(3), model.trace(3))  # digest matches
    old = config["sha256"]
    write_trace(tmp_path, "client,start,end\n0,0,3\n")
    new = hashlib.sha256((tmp_path / "trace.csv").read_bytes()).hexdigest()
    match = (
        rf"trace file '{re.escape(path)}' has changed: its sha256 is {new}, "
        rf"the configuration names '{old}'"
    )
    with pytest.raises(ValueError, match=match):
        check_availability_spec(config, 2)
    with pytest.raises(ValueError, match=match):
        build_availability(config, 2, None)
    # without a pinned digest the new content is read (and pinned anew)
    assert check_availability_spec({"name": "trace", "path": path})["sha256"] == new


# ------------------------------------------------------------------------------ bad specs

#: (spec, n, exception, message: the parameter and the value it got)
BAD_SPECS = [
    (
        ["bernoulli"],
        4,
        TypeError,
        r"an availability spec must be a dict with a 'name', got \['bernoulli'\]",
    ),
    (
        {"mean": 0.5},
        4,
        ValueError,
        r"an availability spec needs a 'name' \(one of always, bernoulli",
    ),
    (
        {"name": "weibull"},
        4,
        ValueError,
        r"unknown availability 'weibull'; valid: always, bernoulli, diurnal, markov_onoff, trace",
    ),
    (
        {"name": "bernoulli", "mean": 0.5, "rate": 0.1},
        4,
        ValueError,
        r"availability 'bernoulli': unknown options \['rate'\]; "
        r"valid: mean, concentration, rates, correlation",
    ),
    (
        {"name": "always", "mean": 0.5},
        4,
        ValueError,
        r"availability 'always': unknown options \['mean'\]; valid: none",
    ),
    (
        {"name": "markov_onoff", "mean_on": 2},
        4,
        ValueError,
        r"availability 'markov_onoff': missing options \['mean_off'\]; valid: mean_on, mean_off",
    ),
    ({"name": "diurnal", "base": 0.5}, 4, ValueError, r"missing options \['amplitude', 'period'\]"),
    (
        {"name": "trace"},
        4,
        ValueError,
        r"availability 'trace': missing options \['path'\]; valid: path, repeat, sha256",
    ),
    ({"name": "bernoulli", "seed": -1, "mean": 0.5}, 4, ValueError, r"seed must be >= 0, got -1"),
    (
        {"name": "bernoulli", "seed": 1.5, "mean": 0.5},
        4,
        TypeError,
        r"seed must be an integer, got 1.5",
    ),
    ({"name": "bernoulli", "mean": 0}, 4, ValueError, r"mean must be > 0.0, got 0.0"),
    ({"name": "bernoulli", "mean": 1.5}, 4, ValueError, r"mean must be <= 1.0, got 1.5"),
    ({"name": "bernoulli", "mean": float("nan")}, 4, ValueError, r"mean must be finite, got nan"),
    ({"name": "bernoulli", "mean": "0.5"}, 4, TypeError, r"mean must be a real number, got '0.5'"),
    (
        {"name": "bernoulli"},
        4,
        ValueError,
        r"needs exactly one of mean or rates, got mean=None, rates=None",
    ),
    (
        {"name": "bernoulli", "mean": 0.5, "rates": [0.5] * 4},
        4,
        ValueError,
        r"needs exactly one of mean or rates, got mean=0.5, rates=a list",
    ),
    (
        {"name": "bernoulli", "mean": 0.5, "concentration": 0},
        4,
        ValueError,
        r"concentration must be > 0.0, got 0.0",
    ),
    (
        {"name": "bernoulli", "mean": 1.0, "concentration": 2},
        4,
        ValueError,
        r"mean must be < 1 with a concentration .* got mean=1.0",
    ),
    (
        {"name": "bernoulli", "mean": 0.5, "correlation": "sizes"},
        4,
        ValueError,
        r"unknown correlation 'sizes'; valid: inverse_size, none, size",
    ),
    (
        {"name": "bernoulli", "rates": [0.5] * 4, "correlation": "size"},
        4,
        ValueError,
        r"concentration must be None and correlation 'none', "
        r"got concentration=None, correlation='size'",
    ),
    ({"name": "bernoulli", "rates": [0.5] * 3}, 4, ValueError, r"rates must have length 4, got 3"),
    (
        {"name": "bernoulli", "rates": [0.5, 1.2, 0.1, 0.0]},
        4,
        ValueError,
        r"rates\[1\] = 1.2 is outside \[0, 1\]",
    ),
    (
        {"name": "bernoulli", "rates": 0.5},
        4,
        TypeError,
        r"rates must be a list of probabilities, got 0.5",
    ),
    (
        {"name": "markov_onoff", "mean_on": 0.5, "mean_off": 2},
        4,
        ValueError,
        r"mean_on must be >= 1.0, got 0.5",
    ),
    (
        {"name": "markov_onoff", "mean_on": 2, "mean_off": 0},
        4,
        ValueError,
        r"mean_off must be >= 1.0, got 0.0",
    ),
    (
        {"name": "markov_onoff", "mean_on": [2, 2, 0.9, 2], "mean_off": 2},
        4,
        ValueError,
        r"mean_on\[2\] must be >= 1.0, got 0.9",
    ),
    (
        {"name": "markov_onoff", "mean_on": 2, "mean_off": [2, 2, 2]},
        4,
        ValueError,
        r"mean_off must have one entry per client \(n=4\), got 3",
    ),
    (
        {"name": "markov_onoff", "mean_on": [], "mean_off": 2},
        None,
        ValueError,
        r"mean_on must be a number >= 1 or a non-empty list of them, got \[\]",
    ),
    (
        {"name": "diurnal", "base": 0.5, "amplitude": 0.1, "period": 0},
        4,
        ValueError,
        r"period must be >= 1, got 0",
    ),
    (
        {"name": "diurnal", "base": 0.5, "amplitude": 0.1, "period": 2.5},
        4,
        TypeError,
        r"period must be an integer, got 2.5",
    ),
    (
        {"name": "diurnal", "base": 1.2, "amplitude": 0.1, "period": 4},
        4,
        ValueError,
        r"base must be <= 1.0, got 1.2",
    ),
    (
        {"name": "diurnal", "base": -0.1, "amplitude": 0.1, "period": 4},
        4,
        ValueError,
        r"base must be >= 0.0, got -0.1",
    ),
    (
        {"name": "diurnal", "base": 0.5, "amplitude": -0.1, "period": 4},
        4,
        ValueError,
        r"amplitude must be >= 0.0, got -0.1",
    ),
    (
        {"name": "diurnal", "base": 0.5, "amplitude": 0.1, "period": 4, "phases": [0, 1]},
        4,
        ValueError,
        r"phases must have one entry per client \(n=4\), got 2",
    ),
    (
        {
            "name": "diurnal",
            "base": 0.5,
            "amplitude": 0.1,
            "period": 4,
            "phases": [0, float("inf"), 0, 0],
        },
        4,
        ValueError,
        r"phases\[1\] must be finite, got inf",
    ),
    (
        {"name": "diurnal", "base": 0.5, "amplitude": 0.1, "period": 4, "phases": []},
        None,
        ValueError,
        r"phases must be a number, a non-empty list or None, got \[\]",
    ),
    ({"name": "trace", "path": 3}, 4, TypeError, r"path must be a string \(a CSV file\), got 3"),
    (
        {"name": "trace", "path": "x.csv", "repeat": "yes"},
        4,
        TypeError,
        r"repeat must be True or False, got 'yes'",
    ),
]


@pytest.mark.parametrize("spec, n, error, match", BAD_SPECS)
def test_a_bad_spec_names_the_parameter_and_its_value(spec, n, error, match):
    with pytest.raises(error, match=match):
        check_availability_spec(spec, n)
    if n is not None:  # (an empty list with n known fails its length check first)
        with pytest.raises(error, match=match):
            build_availability(spec, n, SIZES[:n])


def test_n_must_be_a_positive_integer():
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        check_availability_spec({"name": "always"}, 0)
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        build_availability({"name": "always"}, 0, None)
    with pytest.raises(ValueError, match="t must be >= 0, got -1"):
        build({"name": "always"}).mask(-1)
    with pytest.raises(ValueError, match="rounds must be >= 0, got -2"):
        build(SPECS["markov"]).trace(-2)


# ---------------------------------------------------------------------- property-based


def check_model(model, n, times):
    """What every model promises, whatever its options."""
    for t in times:
        mask, rates = model.mask(t), model.rates(t)
        assert mask.dtype == bool and mask.shape == (n,)
        assert rates.shape == (n,) and ((rates >= 0) & (rates <= 1)).all()
        np.testing.assert_array_equal(model.mask(t), mask)  # the same whenever asked
        assert not mask[rates == 0].any() and mask[rates == 1].all()
    long_run = model.long_run_rates()
    assert long_run.shape == (n,) and ((long_run >= 0) & (long_run <= 1)).all()
    config = model.config()
    assert check_availability_spec(config, n) == config
    assert json.loads(json.dumps(config)) == config


probability = st.floats(0.0, 1.0)
seeds = st.integers(0, 2**32)
times = st.lists(st.integers(0, 10**6), min_size=1, max_size=4)


@st.composite
def bernoulli_specs(draw):
    n = draw(st.integers(1, 30))
    spec = {"name": "bernoulli", "seed": draw(seeds)}
    kind = draw(st.sampled_from(["mean", "rates", "beta"]))
    if kind == "rates":
        spec["rates"] = draw(st.lists(probability, min_size=n, max_size=n))
    else:
        spec["mean"] = draw(st.floats(1e-6, 1.0))
    if kind == "beta":
        spec["mean"] = min(spec["mean"], 1 - 1e-6)
        spec["concentration"] = draw(st.floats(0.05, 500.0))
        spec["correlation"] = draw(st.sampled_from(["none", "size", "inverse_size"]))
    sizes = draw(st.lists(st.floats(1.0, 1e4), min_size=n, max_size=n))
    return spec, n, np.array(sizes)


@settings(max_examples=40, deadline=None)
@given(bernoulli_specs(), times)
def test_any_valid_bernoulli_gives_boolean_masks_and_probabilities(case, ts):
    spec, n, sizes = case
    model = build_availability(spec, n, sizes)
    check_model(model, n, ts)
    np.testing.assert_array_equal(model.rates(ts[0]), model.long_run_rates())
    if "correlation" in spec and spec["correlation"] != "none":
        rates, order = model.long_run_rates(), np.argsort(sizes, kind="stable")
        ordered = rates[order] if spec["correlation"] == "size" else rates[order][::-1]
        assert (np.diff(ordered) >= 0).all()  # monotone in the size rank


@st.composite
def diurnal_specs(draw):
    n = draw(st.integers(1, 20))
    spec = {
        "name": "diurnal",
        "seed": draw(seeds),
        "base": draw(probability),
        "amplitude": draw(st.floats(0.0, 2.0)),
        "period": draw(st.integers(1, 60)),
    }
    phases = draw(st.sampled_from(["none", "one", "each"]))
    angle = st.floats(-10.0, 10.0)
    if phases == "one":
        spec["phases"] = draw(angle)
    elif phases == "each":
        spec["phases"] = draw(st.lists(angle, min_size=n, max_size=n))
    return spec, n


@settings(max_examples=40, deadline=None)
@given(diurnal_specs(), times)
def test_any_valid_diurnal_gives_boolean_masks_and_periodic_probabilities(case, ts):
    spec, n = case
    model = build_availability(spec, n, None)
    check_model(model, n, ts)
    period = spec["period"]
    for t in ts:
        np.testing.assert_allclose(model.rates(t + period), model.rates(t), atol=1e-9)
    period_mean = np.mean([model.rates(t) for t in range(period)], axis=0)
    np.testing.assert_allclose(model.long_run_rates(), period_mean, atol=1e-12)
    base, amplitude = spec["base"], spec["amplitude"]
    if period >= 2 and amplitude <= min(base, 1 - base):  # never clipped: sin averages to 0
        np.testing.assert_allclose(model.long_run_rates(), base, atol=1e-9)


@settings(max_examples=30, deadline=None)
@given(
    st.integers(1, 12),
    st.floats(1.0, 50.0),
    st.floats(1.0, 50.0),
    seeds,
    st.lists(st.integers(0, 60), min_size=1, max_size=4),
)
def test_any_valid_markov_chain_gives_boolean_masks_and_its_stationary_law(
    n, mean_on, mean_off, seed, ts
):
    spec = {"name": "markov_onoff", "seed": seed, "mean_on": mean_on, "mean_off": mean_off}
    model = build_availability(spec, n, None)
    check_model(model, n, ts)
    pi = mean_on / (mean_on + mean_off)
    np.testing.assert_allclose(model.long_run_rates(), pi)
    np.testing.assert_allclose(model.rates(ts[0]), pi)
    trace = build_availability(spec, n, None).trace(max(ts) + 1)
    for t in ts:
        np.testing.assert_array_equal(trace[t], model.mask(t))
