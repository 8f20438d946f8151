"""The live explorer (aoi_fl.evidence.aoi.explorer): every value it shows against the library
function that computes it, over a grid of parameters with its edge cases (m = n, m' = 1, m' above
n/m, one huge client); theory against its short simulation with stated tolerances; the widget's
error path.

Values computed by the same library call are compared exactly. The simulations are seeded, so
every comparison is deterministic; the theory-vs-simulation tolerances are about 3-5 standard
errors of a trace with thousands of intervals (see THEORY_VS_SIM).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aoi_fl.aoi import markov, memoryless, samplers, sigma
from aoi_fl.core import delays as trace_delays
from aoi_fl.core import stats
from aoi_fl.core.validation import require_n_m
from aoi_fl.data.partition import zipf_sizes
from aoi_fl.evidence.aoi import explorer

POLICIES = samplers.POLICIES


def huge_client(n: int) -> np.ndarray:
    """Sizes with one client a million times larger than the others."""
    d = np.ones(n)
    d[n // 3] = 1e6
    return d


def sizes_of(n: int, kind: str) -> object:
    return huge_client(n) if kind == "huge" else kind


def check_against_library(
    ex: explorer.Exploration, sizes: object, family: str = "linear", zipf_a: float = 2.0
) -> None:
    """Every field of ``ex`` equals what the library computes for the same inputs."""
    n, m, m_prime, policy, seed = ex.n, ex.m, ex.m_prime, ex.policy, ex.seed
    if isinstance(sizes, str):
        d = np.ones(n) if sizes == "equal" else zipf_sizes(n, zipf_a, seed).astype(float)
    else:
        d = np.asarray(sizes, dtype=float)
    np.testing.assert_array_equal(ex.sizes, d)
    np.testing.assert_array_equal(ex.p_optimal, markov.optimal_p(n, m, m_prime))
    x_max = ex.pmf_theory.size
    assert ex.pmf_sim.size == x_max
    if policy.startswith("markov"):
        p = (
            markov.optimal_p(n, m, m_prime)
            if policy == "markov_optimal"
            else markov.calibrate_family(family, n, m, m_prime)
        )
        np.testing.assert_array_equal(ex.p, p)
        np.testing.assert_array_equal(ex.stationary, markov.stationary_distribution(p))
        assert ex.mean_theory == markov.interval_mean(p)
        assert ex.var_theory == markov.interval_variance(p)
        np.testing.assert_array_equal(ex.pmf_theory, markov.interval_pmf(p, x_max))
    else:
        assert ex.p is None and ex.stationary is None
        rates = (
            memoryless.random_rates(n, m)
            if policy == "random"
            else memoryless.probabilistic_rates(d, m)
        )
        assert (ex.mean_theory, ex.var_theory) == memoryless.pooled_interval_moments(rates)
        np.testing.assert_array_equal(ex.pmf_theory, memoryless.pooled_interval_pmf(rates, x_max))
    # Sigma: Theorem 3 (Remark 4's closed form for equal sizes), Theorem 4, Theorem 5
    if np.all(d == d[0]):
        assert ex.sigma["random"] == sigma.sigma_random_equal(n, m)
        assert ex.sigma["random"] == pytest.approx(sigma.sigma_random(d, m), rel=1e-9, abs=1e-15)
    else:
        assert ex.sigma["random"] == sigma.sigma_random(d, m, sigma.DISPLAY)
        assert ex.sigma["random"] == pytest.approx(sigma.sigma_random(d, m), rel=1e-6)
    assert ex.sigma["probabilistic"] == sigma.sigma_probabilistic(d, m)
    p3 = markov.optimal_p(n, m, m_prime)
    p4 = markov.calibrate_family(family, n, m, m_prime)
    assert ex.sigma["markov_optimal"] == sigma.sigma_markov(n, markov.selection_rate(p3))
    assert ex.sigma["markov_nonoptimal"] == sigma.sigma_markov(n, markov.selection_rate(p4))
    # the simulation: the library's sampler and streaming statistics, the same seed
    build = dict(n=n, m=m, sizes=d, m_prime=m_prime, seed=seed, family=family)
    trace = stats.simulate(samplers.make_sampler(policy, **build), ex.sim_rounds)
    assert ex.intervals == trace.interval_count
    hist = trace.interval_histogram()
    if ex.intervals:
        np.testing.assert_array_equal(ex.pmf_sim[: hist.size - 1], hist[1:] / ex.intervals)
        assert not ex.pmf_sim[hist.size - 1 :].any()
        assert ex.mean_sim == trace.interval_mean()
        assert ex.var_sim == trace.interval_var()
    else:  # no client selected twice: nothing to show
        assert not ex.pmf_sim.any() and np.isnan(ex.mean_sim) and np.isnan(ex.var_sim)
    assert ex.sigma_sim == trace.sigma()
    tau = trace_delays.sampler_metrics(samplers.make_sampler(policy, **build), ex.sim_rounds)
    assert (ex.tau_max, ex.tau_avg) == (tau.tau_max, tau.tau_avg)


# (n, m, m'): the paper's point, m = n with m' = 1, m' = 1 with r = 7.1, m' far above r = 6.7,
# non-integer r = 2.4 with m' = 2 (Theorem 1's second case, p_1 = 0.6)
GRID = [(100, 15, 10), (10, 10, 1), (50, 7, 1), (40, 6, 20), (12, 5, 2)]


@pytest.mark.parametrize("sizes", ["equal", "zipf", "huge"])
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(("n", "m", "m_prime"), GRID)
def test_every_value_is_the_library_value(n, m, m_prime, policy, sizes):
    given_sizes = sizes_of(n, sizes)
    ex = explorer.explore(n, m, m_prime, policy=policy, sizes=given_sizes, sim_rounds=300)
    check_against_library(ex, given_sizes)
    assert ex.seconds > 0


@pytest.mark.parametrize("family", sorted(markov.FAMILIES))
def test_policy_4_families(family):
    ex = explorer.explore(100, 15, 10, policy="markov_nonoptimal", family=family, sim_rounds=300)
    check_against_library(ex, "equal", family)
    assert ex.family == family


def test_policy_4_typed_p_is_used_as_given():
    p = markov.calibrate_shape(np.arange(1.0, 8.0), 60, 9)  # a shape of the user's, calibrated
    ex = explorer.explore(60, 9, 6, policy="markov_nonoptimal", p=p, sim_rounds=300)
    np.testing.assert_array_equal(ex.p, p)
    assert ex.family == "custom"
    assert ex.var_theory == markov.interval_variance(p)
    assert ex.sigma["markov_nonoptimal"] == sigma.sigma_markov(60, markov.selection_rate(p))
    # Policy 4's Sigma takes the typed p whatever the simulated policy
    other = explorer.explore(60, 9, 6, policy="random", p=p, sim_rounds=50)
    assert other.sigma["markov_nonoptimal"] == ex.sigma["markov_nonoptimal"]


def test_zipf_sizes_follow_a_and_the_seed():
    ex = explorer.explore(30, 5, 4, sizes="zipf", zipf_a=1.3, seed=7, sim_rounds=20)
    np.testing.assert_array_equal(ex.sizes, zipf_sizes(30, 1.3, 7).astype(float))
    assert ex.sigma["probabilistic"] == sigma.sigma_probabilistic(ex.sizes, 5)


def test_large_n():
    ex = explorer.explore(1000, 150, 10, policy="markov_nonoptimal", sizes="zipf", sim_rounds=200)
    check_against_library(ex, "zipf")


# Theory against simulation, where the two describe the same process: the Markov sampler forces
# one client in when nobody selects itself, which the chain's law leaves out, so only points with
# P(|S| = 0) = (1 - m/n)^n below 1e-3. Equal sizes: the sizes change which clients Policies 1, 3
# and 4 select not at all, and with unequal sizes Policy 2 has intervals far longer than a short
# trace (never observed: censored). 2000 rounds give at least 13,000 intervals.
THEORY_VS_SIM = {"mean_rel": 0.03, "var_rel": 0.15, "var_abs": 0.02, "pmf_tv": 0.05}
SIM_GRID = [(100, 15, 10), (10, 10, 1), (50, 7, 1), (1000, 150, 10)]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(("n", "m", "m_prime"), SIM_GRID)
def test_theory_against_simulation(n, m, m_prime, policy):
    assert (1 - m / n) ** n < 1e-3
    ex = explorer.explore(n, m, m_prime, policy=policy, sim_rounds=2000, seed=3)
    tol = THEORY_VS_SIM
    assert ex.intervals > 10_000
    assert abs(ex.mean_sim / ex.mean_theory - 1) < tol["mean_rel"]
    assert abs(ex.var_sim - ex.var_theory) <= tol["var_rel"] * ex.var_theory + tol["var_abs"]
    assert 0.5 * np.abs(ex.pmf_sim - ex.pmf_theory).sum() < tol["pmf_tv"]
    # the theory's interval pmf holds most of its mass up to 4 E[X], where x stops at least
    assert ex.pmf_theory.sum() > 0.9


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 60),
    m_share=st.floats(0.0, 1.0),
    m_prime=st.integers(1, 15),
    policy=st.sampled_from(POLICIES),
    sizes=st.sampled_from(["equal", "zipf", "huge"]),
    seed=st.integers(0, 5),
)
def test_any_valid_input_gives_the_library_values(n, m_share, m_prime, policy, sizes, seed):
    m = max(1, round(m_share * n))
    given_sizes = sizes_of(n, sizes)
    ex = explorer.explore(n, m, m_prime, policy=policy, sizes=given_sizes, seed=seed, sim_rounds=40)
    check_against_library(ex, given_sizes)
    if ex.stationary is not None:
        assert ex.stationary.sum() == pytest.approx(1.0, abs=1e-12)


def test_same_seed_same_numbers():
    kw = dict(policy="markov_nonoptimal", sizes="zipf", seed=4, sim_rounds=300)
    a, b = explorer.explore(80, 11, 6, **kw), explorer.explore(80, 11, 6, **kw)
    for field in explorer.Exploration.__dataclass_fields__:
        if field != "seconds":
            np.testing.assert_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert explorer.summary(a) == explorer.summary(b)
    c = explorer.explore(80, 11, 6, **{**kw, "seed": 5})
    assert not np.array_equal(c.pmf_sim, a.pmf_sim)


def library_message(call) -> str:
    with pytest.raises(ValueError) as err:
        call()
    return str(err.value)


BAD = {
    "m > n": (
        dict(n=10, m=11, m_prime=3),
        lambda: require_n_m(10, 11),
    ),
    "m' < 1": (
        dict(n=10, m=2, m_prime=0),
        lambda: samplers.make_sampler("random", n=10, m=2, m_prime=0),
    ),
    "p violates pi_0 = m/n": (
        dict(n=10, m=2, m_prime=3, policy="markov_nonoptimal", p=[0.0, 0.0, 0.0, 1.0]),
        lambda: samplers.make_sampler(
            "markov_nonoptimal", n=10, m=2, m_prime=3, p=[0.0, 0.0, 0.0, 1.0]
        ),
    ),
    "p decreasing": (
        dict(n=10, m=2, m_prime=2, p=[0.5, 0.2, 0.4]),
        lambda: markov.check_non_decreasing([0.5, 0.2, 0.4]),
    ),
    "p of the wrong length": (
        dict(n=10, m=2, m_prime=3, p=[0.1, 0.9]),
        lambda: samplers.make_sampler("markov_nonoptimal", n=10, m=2, m_prime=3, p=[0.1, 0.9]),
    ),
    "unknown policy": (
        dict(n=10, m=2, m_prime=3, policy="greedy"),
        lambda: samplers.make_sampler("greedy", n=10, m=2),
    ),
    "unknown family": (
        dict(n=10, m=2, m_prime=3, family="cubic"),
        lambda: markov.calibrate_family("cubic", 10, 2, 3),
    ),
    "sizes of the wrong length": (
        dict(n=10, m=2, m_prime=3, sizes=[1.0, 2.0]),
        lambda: samplers.make_sampler("random", n=10, m=2, sizes=[1.0, 2.0]),
    ),
    "a size of 0": (
        dict(n=3, m=2, m_prime=3, sizes=[1.0, 0.0, 2.0]),
        lambda: samplers.make_sampler("random", n=3, m=2, sizes=[1.0, 0.0, 2.0]),
    ),
    "Zipf a <= 1": (
        dict(n=10, m=2, m_prime=3, sizes="zipf", zipf_a=1.0),
        lambda: zipf_sizes(10, 1.0, 0),
    ),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_input_raises_the_library_message(case):
    kwargs, call = BAD[case]
    expected = library_message(call)
    args = (kwargs.pop("n"), kwargs.pop("m"), kwargs.pop("m_prime"))
    with pytest.raises(ValueError) as err:
        explorer.explore(*args, **kwargs)
    assert str(err.value) == expected


def test_summary_and_plot():
    ex = explorer.explore(100, 15, 10, policy="random", sizes="zipf", sim_rounds=200)
    text = explorer.summary(ex)
    assert "memoryless" in text and f"{ex.sigma['random']:.6f}" in text and "ms" not in text
    assert "update:" in explorer.summary(ex, timing=True)
    fig = explorer.plot(ex)
    assert len(fig.axes) == 3
    again = explorer.plot(explorer.explore(12, 5, 2, policy="markov_optimal", sim_rounds=50), fig)
    assert again is fig and len(fig.axes) == 3
    assert explorer.parse_p("0, 0.5 1") == [0.0, 0.5, 1.0]
    with pytest.raises(ValueError, match="numbers separated by commas"):
        explorer.parse_p("0, half")


def test_importable_without_ipywidgets():
    code = (
        "import sys; sys.modules['ipywidgets'] = None\n"
        "from aoi_fl.evidence.aoi import explorer\n"
        "ex = explorer.explore(10, 2, 3, sim_rounds=20)\n"
        "print(explorer.summary(ex).splitlines()[0])\n"
        "try:\n    explorer.widget()\nexcept ImportError:\n    print('no widget')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith("n = 10, m = 2, m' = 3") and out.endswith("no widget\n")


# --- the widget ---------------------------------------------------------------------------


@pytest.fixture
def ui():
    pytest.importorskip("ipywidgets")
    return explorer.widget(n=40, m=6, m_prime=4, sizes="equal", sim_rounds=200)


def shown_text(ui) -> str:
    return "".join(o["text"] for o in ui.output.outputs if o["output_type"] == "stream")


def test_widget_shows_the_update(ui):
    assert ui.error is None and ui.last is not None
    kinds = [o["output_type"] for o in ui.output.outputs]
    assert kinds == ["stream", "display_data"]
    assert ui.output.outputs[1]["data"]["image/png"].startswith("iVBOR")  # base64 of a PNG
    assert explorer.summary(ui.last) in shown_text(ui)


WIDGET_STEPS = [
    {"m": 40},  # m = n
    {"m_prime": 1},
    {"policy": "random"},
    {"sizes": "zipf", "zipf_a": 1.05},  # a near 1: one client far larger than the rest
    {"policy": "probabilistic", "seed": 3},
    {"policy": "markov_nonoptimal", "family": "exponential", "m": 5, "m_prime": 8},
    {"n": 1000, "m": 150, "m_prime": 10, "sim_rounds": 100},
]


def test_widget_drives_explore_over_a_grid(ui):
    for step in WIDGET_STEPS:
        for name, value in step.items():
            ui.controls[name].value = value
        assert ui.error is None, (step, ui.error)
        kw = ui.values()
        check_against_library(ui.last, kw["sizes"], kw["family"], kw["zipf_a"])
        expected = explorer.explore(**kw)
        assert explorer.summary(ui.last) == explorer.summary(expected)


def test_widget_typed_p(ui):
    p = markov.calibrate_family("quadratic", 40, 6, 4)
    ui.controls["policy"].value = "markov_nonoptimal"
    ui.controls["p"].value = ", ".join(repr(float(v)) for v in p)
    ui.controls["family"].value = explorer.TYPED
    assert ui.error is None
    np.testing.assert_array_equal(ui.last.p, p)
    assert ui.last.family == "custom"


BAD_STEPS = {
    "m > n": ({"m": 41}, lambda: require_n_m(40, 41)),
    "m' < 1": ({"m_prime": 0}, lambda: samplers.make_sampler("random", n=40, m=6, m_prime=0)),
    "p violates pi_0 = m/n": (
        {"family": explorer.TYPED, "p": "0, 0, 0, 0.5, 1"},
        lambda: samplers.make_sampler(
            "markov_nonoptimal", n=40, m=6, m_prime=4, p=[0, 0, 0, 0.5, 1]
        ),
    ),
    "p not numbers": ({"family": explorer.TYPED, "p": "0, x"}, lambda: explorer.parse_p("0, x")),
}


@pytest.mark.parametrize("case", BAD_STEPS, ids=list(BAD_STEPS))
def test_widget_shows_the_library_message(ui, case):
    step, call = BAD_STEPS[case]
    expected = library_message(call)
    for name, value in step.items():
        ui.controls[name].value = value  # raises nothing
    assert ui.error == expected and ui.last is None
    assert [o["output_type"] for o in ui.output.outputs] == ["stream"]
    assert shown_text(ui) == f"invalid input: {expected}\n"
    assert "Traceback" not in shown_text(ui)
    # a good value again brings the figure back
    ui.controls["m"].value, ui.controls["m_prime"].value = 6, 4
    ui.controls["family"].value = "linear"
    assert ui.error is None and len(ui.output.outputs) == 2


def test_widget_rejects_unknown_controls():
    pytest.importorskip("ipywidgets")
    with pytest.raises(ValueError, match="unknown explorer controls"):
        explorer.widget(rounds=10)
    with pytest.raises(ValueError, match="unknown sizes"):
        explorer.widget(sizes=[1.0, 2.0])


def test_widget_takes_a_typed_p_as_initial_value():
    pytest.importorskip("ipywidgets")
    p = markov.calibrate_family("linear", 30, 4, 3)
    ui = explorer.widget(n=30, m=4, m_prime=3, policy="markov_nonoptimal", p=p, sim_rounds=100)
    assert ui.controls["family"].value == explorer.TYPED and ui.error is None
    np.testing.assert_array_equal(ui.last.p, p)
