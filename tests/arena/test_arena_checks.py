"""The arena's configurations (:mod:`aoi_fl.evidence.arena.experiments`), the checks its notebook
runs on them (:mod:`aoi_fl.evidence.arena.checks`) and its rows of the claims ledger
(:mod:`aoi_fl.evidence.arena.claims`), on hand-built configurations and frames.

The availability check's expected counts are computed here as the check computes them, from
:func:`aoi_fl.core.availability.build_availability`: the mean over the T rounds of sum_i
P(i available in t), with the standard error of a mean of T independent Bernoulli sums (inflated
by (1 + rho) / (1 - rho) for the Markov on/off model, rho = 1 - 1/mean_on - 1/mean_off).
"""

import copy
import itertools
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aoi_fl.core.availability import build_availability
from aoi_fl.core.seeding import generator
from aoi_fl.evidence.arena import checks
from aoi_fl.evidence.arena import claims as arena_claims
from aoi_fl.evidence.arena import experiments as ex
from aoi_fl.evidence.arena import results as ar

PROFILE = "smoke"

# ------------------------------------------------------------------------ availability names


@pytest.mark.parametrize("name", list(ex.AVAILABILITY))
@pytest.mark.parametrize("seed", [0, 7])
def test_availability_name_round_trips_every_model(name, seed):
    section = ex.config("uniform", name, seed, profile=PROFILE)["availability"]
    assert section["seed"] == seed
    assert ex.availability_name(section) == name
    assert ex.availability_name(ex.AVAILABILITY[name]) == name  # without a seed


def test_no_availability_section_is_always():
    assert ex.availability_name(None) == "always"


@pytest.mark.parametrize(
    "section",
    [
        {"name": "bernoulli", "mean": 0.5, "concentration": 4.0, "correlation": "none", "seed": 0},
        {"name": "bernoulli", "mean": 0.33, "concentration": 4.0},  # an option missing
        {"name": "markov_onoff", "mean_on": 5.0, "mean_off": 10.0, "extra": 1},
        {"name": "trace", "seed": 3},
    ],
)
def test_an_unknown_section_is_refused_naming_it(section):
    with pytest.raises(ValueError, match="none of the arena's models") as error:
        ex.availability_name(section)
    assert repr(section) in str(error.value)


# ------------------------------------------------------------------------ configurations


def valid(message):
    return re.escape(f"; valid: {', '.join(sorted(message))}")


@pytest.mark.parametrize(
    ("kwargs", "name", "allowed"),
    [
        ({"policy": "fastest"}, "policy", ex.POLICIES),
        ({"availability": "sometimes"}, "availability", ex.AVAILABILITY),
        ({"tier": "final"}, "tier", ex.TIERS),
        ({"profile": "huge"}, "profile", ("cpu", "paper", "smoke")),
    ],
)
def test_config_refuses_a_bad_choice_naming_it_and_the_allowed(kwargs, name, allowed):
    args = {"policy": "uniform", "availability": "bernoulli", "seed": 0, "profile": PROFILE}
    args.update(kwargs)
    bad = kwargs[name]
    with pytest.raises(ValueError, match=rf"unknown {name} '{bad}'{valid(allowed)}$"):
        ex.config(args.pop("policy"), args.pop("availability"), args.pop("seed"), **args)


def test_config_refuses_a_negative_seed_naming_it_and_the_range():
    with pytest.raises(ValueError, match=r"^seed must be >= 0, got -1$"):
        ex.config("uniform", "always", -1, profile=PROFILE)
    # a seed that is no integer at all is a TypeError (aoi_fl.core.validation.require_int)
    with pytest.raises(TypeError, match="seed must be an integer"):
        ex.config("uniform", "always", 1.5, profile=PROFILE)


def test_the_other_entry_points_refuse_bad_choices_too():
    with pytest.raises(ValueError, match=rf"unknown tier 'x'{valid(ex.TIERS)}$"):
        ex.tier_settings("x", PROFILE)
    with pytest.raises(ValueError, match=rf"unknown policy 'x'{valid(ex.POLICIES)}$"):
        ex.sampler_spec("x", 20, 4, 4, "screen")
    with pytest.raises(ValueError, match=rf"unknown availability 'x'{valid(ex.AVAILABILITY)}$"):
        ex.confirm_models("x")
    with pytest.raises(ValueError, match=rf"unknown availability 'x'{valid(ex.AVAILABILITY)}$"):
        ex.grid(["uniform"], ["x"], profile=PROFILE)
    with pytest.raises(ValueError, match=rf"unknown policy 'x'{valid(ex.POLICIES)}$"):
        ex.confirm_grid(["x"], "diurnal", profile=PROFILE)


@pytest.mark.parametrize("tier", ex.TIERS)
def test_config_shares_the_seed_and_takes_the_profiles_settings(tier):
    s = ex.tier_settings(tier, PROFILE)
    assert s == ex._TIERS[tier]["smoke"]
    c = ex.config("power_of_choice", "markov_onoff", 3, tier=tier, profile=PROFILE)
    seeds = [c[k]["seed"] for k in ("partition", "model", "sampler", "training", "availability")]
    assert seeds == [3] * 5
    assert c["partition"]["n_clients"] == s["n"] and c["training"]["rounds"] == s["rounds"]
    assert c["sampler"]["m"] == s["m"] and c["sampler"]["d"] == min(2 * s["m"], s["n"])
    assert c["model"]["name"] == ex.TASKS[tier]["model"]["name"]
    assert c["dataset"] == {"name": "fashion_mnist", "n_train": 2000, "n_test": 500}


@pytest.mark.parametrize(
    ("policies", "models"),
    [
        (ex.POLICIES, tuple(ex.AVAILABILITY)),
        (("oort", "uniform"), ("diurnal",)),
        (("kvib",), ("always", "bernoulli_size")),
    ],
)
@pytest.mark.parametrize("tier", ex.TIERS)
def test_grid_runs_seeds_innermost(policies, models, tier):
    configs = ex.grid(policies, models, tier=tier, profile=PROFILE)
    # the confirm tier's seeds are not the screen's: its runs did not choose its entrants
    first = ex.CONFIRM_SEED0 if tier == "confirm" else 0
    seeds = range(first, first + ex.tier_settings(tier, PROFILE)["seeds"])
    assert len(configs) == len(policies) * len(models) * len(seeds)
    order = [
        (ex.availability_name(c["availability"]), c["sampler"]["name"], c["training"]["seed"])
        for c in configs
    ]
    assert order == list(itertools.product(models, policies, seeds))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from(ex.POLICIES), unique=True, max_size=8))
def test_confirm_entrants_keep_the_fixed_first_and_drop_repeats_of_them(others):
    entrants = ex.confirm_entrants(others)
    assert entrants[: len(ex.CONFIRM_FIXED)] == ex.CONFIRM_FIXED
    assert list(entrants[len(ex.CONFIRM_FIXED) :]) == [
        p for p in others if p not in ex.CONFIRM_FIXED
    ]
    assert len(set(entrants)) == len(entrants)


def test_confirm_entrants_drop_repeats_within_the_others():
    entrants = ex.confirm_entrants(["oort", "oort", "uniform"])
    assert entrants == (*ex.CONFIRM_FIXED, "oort")


def test_confirm_models_and_grid():
    assert ex.confirm_models("always") == ("always",)
    assert ex.confirm_models("diurnal") == ("always", "diurnal")
    configs = ex.confirm_grid(["oort", "uniform", "vrb"], "diurnal", profile=PROFILE)
    entrants = (*ex.CONFIRM_FIXED, "oort", "vrb")
    seeds = ex.tier_settings("confirm", PROFILE)["seeds"]
    assert len(configs) == len(entrants) * 2 * seeds
    assert {c["model"]["name"] for c in configs} == {"small_cnn"}
    names = [(ex.availability_name(c["availability"]), c["sampler"]["name"]) for c in configs]
    assert list(dict.fromkeys(names)) == list(itertools.product(("always", "diurnal"), entrants))


# ------------------------------------------------------------------------ check_pairing


@pytest.fixture(scope="module")
def screen_configs():
    return ex.grid(ex.POLICIES, ex.AVAILABILITY, profile=PROFILE)


def test_pairing_holds_on_the_grids(screen_configs):
    seeds = ex.tier_settings("screen", PROFILE)["seeds"]
    assert checks.check_pairing(screen_configs) == seeds
    confirm = ex.confirm_grid(["oort", "vrb", "kvib"], "markov_onoff", profile=PROFILE)
    assert checks.check_pairing(confirm) == ex.tier_settings("confirm", PROFILE)["seeds"]


@pytest.mark.parametrize(
    ("section", "option", "value"),
    [
        ("partition", "seed", 99),
        ("model", "seed", 99),
        ("partition", "alpha", 1.0),
        ("dataset", "n_train", 1000),
        ("training", "batch_size", 16),
    ],
)
@pytest.mark.parametrize("pick", [0, 1, 2])
def test_pairing_fails_naming_the_seed_when_one_run_differs(
    screen_configs, section, option, value, pick
):
    rng = generator(pick, "test arena pairing")
    configs = copy.deepcopy(screen_configs)
    i = int(rng.integers(len(configs)))
    configs[i][section][option] = value
    seed = configs[i]["training"]["seed"]
    name = ex.availability_name(configs[i]["availability"])
    with pytest.raises(AssertionError, match=re.escape(f"seed/availability ({seed}, '{name}')")):
        checks.check_pairing(configs)


def test_pairing_fails_when_a_samplers_seed_is_not_the_runs(screen_configs):
    configs = copy.deepcopy(screen_configs)
    configs[5]["sampler"]["seed"] += 1
    with pytest.raises(AssertionError, match="the sampler's seed is not the run's"):
        checks.check_pairing(configs)


# ------------------------------------------------------------------------ Theorem 1's interval


def interval_frame(mean, var, tier_n_m=(100, 10)):
    n, m = tier_n_m
    rows = [
        {"availability": "always", "policy": "markov_optimal", "seed": s, "interval_mean": mean}
        | {"interval_var": var}
        for s in range(3)
    ]
    # other policies and models carry other numbers, which the check ignores
    rows += [
        {"availability": a, "policy": p, "seed": 0, "interval_mean": 7.3, "interval_var": 2.0}
        for a, p in (("always", "uniform"), ("diurnal", "markov_optimal"))
    ]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("tier", ex.TIERS)
def test_markov_optimal_always_holds_at_n_over_m(tier):
    s = ex.tier_settings(tier, "cpu")
    frame = interval_frame(s["n"] / s["m"], 0.0)
    assert checks.check_markov_optimal_always(frame, tier, "cpu") is True
    frame.loc[1, "interval_mean"] += 1e-12  # within floating-point tolerance
    assert checks.check_markov_optimal_always(frame, tier, "cpu") is True


@pytest.mark.parametrize(("column", "value"), [("interval_mean", 11.0), ("interval_var", 0.5)])
@pytest.mark.parametrize("tier", ex.TIERS)
def test_markov_optimal_always_fails_on_another_number(tier, column, value):
    frame = interval_frame(10.0, 0.0)
    frame.loc[2, column] = value
    with pytest.raises(AssertionError, match="Theorem 1 gives X = 10 exactly"):
        checks.check_markov_optimal_always(frame, tier, "cpu")


@pytest.mark.parametrize("tier", ex.TIERS)
def test_markov_optimal_always_does_not_apply_to_a_smoke_horizon(tier):
    # smoke: n / m = 5 rounds, more than the horizon, so no interval completes
    s = ex.tier_settings(tier, PROFILE)
    assert s["rounds"] <= s["n"] // s["m"]
    assert checks.check_markov_optimal_always(interval_frame(3.0, 9.0), tier, PROFILE) is False


# ------------------------------------------------------------------------ available counts


def closed_form(name, seed, tier, profile):
    """The check's expected mean count of available clients and its standard error."""
    s = ex.tier_settings(tier, profile)
    spec = {**ex.AVAILABILITY[name], "seed": seed}
    model = build_availability(spec, s["n"], None)
    rates = np.array([model.rates(t) for t in range(s["rounds"])])
    se = np.sqrt((rates * (1 - rates)).sum()) / s["rounds"]
    if name == "markov_onoff":
        rho = 1 - 1 / spec["mean_on"] - 1 / spec["mean_off"]
        se *= np.sqrt((1 + rho) / (1 - rho))
    return rates.sum(axis=1).mean(), se


CHECKED = ("bernoulli", "markov_onoff", "diurnal")


def counts_frame(tier, profile, seeds=(0, 1), policies=("uniform", "oort")):
    rows = []
    for name in ex.AVAILABILITY:
        for seed in seeds:
            for policy in policies:
                if name in CHECKED:
                    available = closed_form(name, seed, tier, profile)[0]
                else:  # full availability and size-correlated rates: not checked here
                    available = -1.0
                rows.append(
                    {"availability": name, "policy": policy, "seed": seed}
                    | {"mean_available": available}
                )
    return pd.DataFrame(rows)


@pytest.mark.parametrize(("tier", "profile"), [("screen", PROFILE), ("confirm", PROFILE)])
def test_available_counts_pass_at_the_closed_form(tier, profile):
    frame = counts_frame(tier, profile)
    assert checks.check_available_counts(frame, tier, profile) == len(CHECKED) * 2 * 2


def test_available_counts_pass_at_the_closed_form_of_the_cpu_screen():
    frame = counts_frame("screen", "cpu", seeds=(3,), policies=("uniform",))
    assert checks.check_available_counts(frame, "screen", "cpu") == len(CHECKED)


def test_the_closed_forms_are_the_models_means():
    n = ex.tier_settings("screen", PROFILE)["n"]
    assert closed_form("markov_onoff", 0, "screen", PROFILE)[0] == pytest.approx(n * 5 / 15)
    for name in CHECKED:  # each about a third of the clients
        assert closed_form(name, 0, "screen", PROFILE)[0] == pytest.approx(n / 3, rel=0.6)


@pytest.mark.parametrize("name", CHECKED)
@pytest.mark.parametrize("sign", [1, -1])
def test_available_counts_fail_ten_standard_errors_off(name, sign):
    frame = counts_frame("screen", PROFILE)
    i = frame.index[(frame.availability == name) & (frame.seed == 1)][1]
    expected, se = closed_form(name, 1, "screen", PROFILE)
    frame.loc[i, "mean_available"] = expected + sign * 10 * se
    policy = frame.loc[i, "policy"]
    with pytest.raises(AssertionError, match=rf"^{name} seed 1 {policy}: .* \(se {se:.2f}\)$"):
        checks.check_available_counts(frame, "screen", PROFILE)
    frame.loc[i, "mean_available"] = expected + sign * 4 * se  # within the 5 se allowed
    assert checks.check_available_counts(frame, "screen", PROFILE) == len(CHECKED) * 4


# ------------------------------------------------------------------------ claims


def faster_frame(diffs, censored=()):
    """uniform at 50 rounds on every seed, markov_optimal at 50 + diffs[seed]."""
    rows = []
    for seed, d in enumerate(diffs):
        rows.append({"policy": "uniform", "seed": seed, "rounds_to_target": 50, "censored": False})
        rows.append(
            {"policy": "markov_optimal", "seed": seed, "rounds_to_target": 50 + d}
            | {"censored": seed in censored}
        )
    return pd.DataFrame(rows).assign(availability="bernoulli")


def printed_line(c):
    """The line :func:`aoi_fl.evidence.arena.claims.verdict_lines` prints for a row."""
    ours = "-" if c.ours is None else f"{c.ours:+.3g}"
    return f"{c.key}: {c.claim} (ours {ours} rounds; {c.spread}) -> {c.verdict}"


def faster(frame, key="arena.confirm.bernoulli.markov_optimal"):
    """A confirm-tier row on ``frame``: with one comparison its Holm family is itself, so its
    interval is the plain 95% one."""
    table = arena_claims.family(frame, arena_claims.CONFIRM_FAMILY)
    return arena_claims._confirm_row(
        key, "it is faster than uniform", (frame, table), "bernoulli", "markov_optimal", "uniform"
    )


@pytest.mark.parametrize(
    ("diffs", "verdict"),
    [
        ([-5, -6, -4, -5], "held"),
        ([-5, -5, -5], "held"),
        ([5, 6, 4, 5], "not held"),
        ([7, 7], "not held"),
        ([-5, 5, -3, 3], "inconclusive at this budget"),
        ([0, 0, 0], "inconclusive at this budget"),
        ([-5], "inconclusive"),
        ([], "inconclusive"),
    ],
)
def test_faster_verdicts_follow_the_interval_and_print_as_matched(diffs, verdict):
    frame = faster_frame(diffs)
    c = faster(frame)
    assert c.verdict == verdict and c.paper == "arena"
    assert c.claim == "(ours, not the paper's) it is faster than uniform" and c.kind == "ours"
    comparison = ar.compare(frame, "markov_optimal", "uniform") if len(frame) else None
    if comparison is None:
        assert c.ours is None and c.spread == "fewer than 2 paired seeds cached"
    else:
        assert c.ours == comparison.mean
        assert f"[{comparison.low:+.3g}, {comparison.high:+.3g}] over {len(diffs)} seeds" in (
            c.spread
        )
        assert "95.0000% interval (Holm's level in a family of 1)" in c.spread
        if verdict == "inconclusive at this budget":
            assert c.spread.endswith(f"MDE {comparison.mde:.3g}")
    line = printed_line(c)
    found = re.search(c.printed_as, f"other: x -> held\n{line}\nmore -> not held", flags=re.M)
    assert found and found.group(0) == line and found.group(1) == verdict


def test_a_censored_pair_makes_a_faster_row_inconclusive_at_this_budget():
    # counted at the horizon, a run that never reached the target would look slow (or its
    # reference fast) because of T, not of the policy: the row cannot be decided
    c = faster(faster_frame([-5, -6, -4], censored={0}))
    assert c.verdict == "inconclusive at this budget"
    assert c.spread.endswith("1 run(s) of the pairs never reached the target within T")
    found = re.search(c.printed_as, printed_line(c), flags=re.M)
    assert found and found.group(1) == "inconclusive at this budget"


def test_a_faster_row_matches_only_its_own_line():
    held = faster(faster_frame([-5, -6, -4]), "arena.confirm.bernoulli.markov_optimal")
    other = faster(faster_frame([5, 6, 4]), "arena.confirm.bernoulli_size.markov_optimal")
    text = "\n".join([printed_line(other), printed_line(held)])
    assert re.search(held.printed_as, text, flags=re.M).group(1) == "held"
    assert re.search(other.printed_as, text, flags=re.M).group(1) == "not held"


def synthetic_load(tier, profile, policies=None, availabilities=None, *, results_dir="results"):
    """:func:`aoi_fl.evidence.arena.results.load` on made-up runs: markov_optimal faster than
    uniform under bernoulli, slower under diurnal, the same under the others; every other policy
    random."""
    policies = ex.POLICIES if policies is None else tuple(policies)
    availabilities = tuple(ex.AVAILABILITY if availabilities is None else availabilities)
    rng = generator(4, "test arena claims", ex.TIERS.index(tier))
    shift = {"bernoulli": -10, "diurnal": 10}
    rows = []
    for name in availabilities:
        for seed in range(4):
            for policy in policies:
                rounds = 50 + int(rng.integers(-2, 3))
                if policy == "uniform":
                    rounds = 50
                elif policy in ("markov_optimal", "markov_available"):
                    rounds = 50 + shift.get(name, 0) + seed % 2
                rows.append(
                    {"availability": name, "policy": policy, "seed": seed}
                    | {"rounds_to_target": rounds, "censored": False}
                )
    return pd.DataFrame(rows), 0


def test_verdict_lines_print_every_row_as_its_pattern_finds_it(monkeypatch, tmp_path):
    monkeypatch.setattr(ar, "load", synthetic_load)
    rows = arena_claims.claims(PROFILE, results_dir=str(tmp_path))
    lines = arena_claims.verdict_lines(arena_claims.NOTEBOOK, PROFILE, results_dir=str(tmp_path))
    assert lines == [printed_line(c) for c in rows]
    keys = [c.key for c in rows]
    assert len(set(keys)) == len(keys) and any(k.startswith("arena.confirm.") for k in keys)
    text = "\n".join(lines)
    for c, line in zip(rows, lines, strict=True):
        found = re.search(c.printed_as, text, flags=re.M)
        assert found.group(0) == line and found.group(1) == c.verdict
    by_key = {c.key: c for c in rows}
    # the screen's bernoulli lead survives Holm's correction and the confirm tier (which runs
    # bernoulli, the most separating model) repeats it
    assert by_key["arena.screen.bernoulli.markov_optimal"].verdict == "held"
    # the diurnal lag is decided on the screen, but the confirm tier never runs diurnal
    diurnal = by_key["arena.screen.diurnal.markov_optimal"]
    assert diurnal.verdict == "inconclusive at this budget"
    assert "screen, not confirmed: the confirm tier does not run this comparison" in diurnal.spread
    for key in ("arena.screen.always.markov_optimal", "arena.screen.bernoulli.markov_available"):
        assert by_key[key].verdict == "inconclusive at this budget"


def test_verdict_lines_without_runs_are_inconclusive(tmp_path):
    lines = arena_claims.verdict_lines(arena_claims.NOTEBOOK, PROFILE, results_dir=str(tmp_path))
    partial = len(ex.AVAILABILITY) - 1
    assert len(lines) == len(ex.AVAILABILITY) + partial  # no confirm rows before the screen
    assert all(
        line.endswith("(ours - rounds; fewer than 2 paired seeds cached) -> inconclusive")
        for line in lines
    )
    assert arena_claims.verdict_lines("01_other_notebook", PROFILE, results_dir=str(tmp_path)) == []
