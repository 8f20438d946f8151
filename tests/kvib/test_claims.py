"""The K-Vib rows of the claims ledger (aoi_fl.evidence.kvib.claims)."""

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from aoi_fl.evidence.kvib import claims as kc
from aoi_fl.evidence.kvib import results as kr
from aoi_fl.pipeline.claims import VERDICTS, Untested, horizon_mean

REPO = Path(__file__).resolve().parents[2]

#: every number the paper prints for Figs 1-4 and Sec. 3, by key
PRINTED = {
    "kvib.ex3_2.sq_norm.g1": 1.0,
    "kvib.ex3_2.sq_norm.g2": 3.0,
    "kvib.ex3_2.sq_norm.g3": 6.0,
    "kvib.ex3_2.q_rsp.g1": 0.1,
    "kvib.ex3_2.q_rsp.g2": 0.3,
    "kvib.ex3_2.q_rsp.g3": 0.6,
    "kvib.ex3_2.p_isp.g1": 0.25,
    "kvib.ex3_2.p_isp.g2": 0.75,
    "kvib.ex3_2.p_isp.g3": 1.0,
    "kvib.ex3_2.size3": 3 / 16,
    "kvib.ex3_2.size1": 3 / 16,
    "kvib.ex3_2.k3_rsp.d_x": 6.4,
    "kvib.ex3_2.k3_rsp.d_y": 5.9,
    "kvib.ex3_2.k3_rsp.error": 0.6,
    "kvib.ex3_2.k3_isp": 0.0,
    "kvib.fig4.speedup.v1": 3.0,
    "kvib.fig4.speedup.v2": 2.0,
    "kvib.fig5.speedup": 2.0,
}
#: rows read from the cached runs (the rest are closed forms or FEMNIST)
TRAINING = (
    "kvib.fig2.",
    "kvib.fig3b.",
    "kvib.fig3c.",
    "kvib.fig6.",
    "kvib.fig7.",
    "kvib.sec6.",
    "kvib.fig4.substitute.",
)


def test_printed_verdict_uses_the_printed_digit():
    assert kc.printed_verdict(6.4, 6.4079, 1) == "held"
    assert kc.printed_verdict(6.4, 6.45, 1) == "held"
    assert kc.printed_verdict(6.4, 6.46, 1) == "not held"
    assert kc.printed_verdict(0.6, 0.3552, 1) == "not held"
    assert kc.printed_verdict(0.6, 0.3552**0.5, 1) == "held"  # 0.596: the norm


def test_lower_verdict_small_cases():
    # mean -2, sd 1, n = 3: t_{0.975, 2} = 4.303, half width 4.303 / sqrt(3) = 2.484
    verdict, ci = kc.lower_verdict([-1.0, -2.0, -3.0])
    assert verdict == "inconclusive at this budget"
    assert ci.low == pytest.approx(-2 - 2.4841, abs=1e-3) and ci.high == pytest.approx(0.4841, 1e-3)
    assert kc.lower_verdict([-10.0, -11.0, -12.0])[0] == "held"
    assert kc.lower_verdict([10.0, 11.0, 12.0])[0] == "not held"
    assert kc.lower_verdict([1.0]) == ("inconclusive", None)
    assert kc.lower_verdict([1.0, float("nan")]) == ("inconclusive", None)


def test_combined_and_trend_verdicts():
    assert kc.combine_verdicts(["held", "held"]) == "held"
    assert kc.combine_verdicts(["held", "inconclusive at this budget"]) == (
        "inconclusive at this budget"
    )
    assert kc.combine_verdicts(["inconclusive", "not held"]) == "not held"


def _grid(*columns):
    """{K: {seed: value}} from one list of per-seed values per K (K = 5, 10, 20, ...)."""
    return {k: dict(enumerate(v)) for k, v in zip((5, 10, 20, 40), columns, strict=False)}


def test_one_seed_per_grid_point_is_inconclusive_at_this_budget():
    verdict, spread = kc.k_trend_verdict(_grid([8.0], [4.0], [2.0]), "falls")
    assert verdict == "inconclusive at this budget"
    assert "one seed per K: falls 4x over K = 5-20" in spread and "log-log slope -1" in spread
    assert kc.k_trend_verdict(_grid([8.0]), "falls")[0] == "inconclusive"
    verdict, slope, _ = kc.k_rate_verdict(_grid([8.0], [4.0], [2.0]), -4 / 3)
    assert verdict == "inconclusive at this budget" and slope == pytest.approx(-1.0)
    verdict, ratio, _ = kc.stable_verdict({0.1: {0: 1.0}, 1.0: {0: 1.2}}, 1.5)
    assert verdict == "inconclusive at this budget" and ratio == pytest.approx(1.2)


def test_trends_are_decided_on_per_seed_intervals():
    falling = _grid([8.0, 8.5, 7.9], [4.0, 4.4, 3.8], [2.0, 2.1, 1.8])
    assert kc.k_trend_verdict(falling, "falls")[0] == "held"
    assert kc.k_trend_verdict(falling, "rises")[0] == "not held"
    # one step whose paired interval contains 0: the trend is not decided
    noisy = _grid([8.0, 8.5, 7.9], [4.0, 9.0, 1.0], [2.0, 2.1, 1.8])
    assert kc.k_trend_verdict(noisy, "falls")[0] == "inconclusive at this budget"
    # slope -1 per seed: slower than K^(-4/3) (not held), faster than K^(-1/2) (held)
    halving = _grid([8.0, 16.0, 4.0], [4.0, 8.0, 2.0], [2.0, 4.0, 1.0])
    assert kc.k_rate_verdict(halving, -4 / 3)[0] == "not held"
    assert kc.k_rate_verdict(halving, -1 / 2)[0] == "held"
    assert kc.k_rate_verdict(_grid([1.0, 1.0], [0.0, 1.0]), -1)[0] == "inconclusive"
    stable = {0.1: {0: 1.0, 1: 1.0, 2: 1.0}, 1.0: {0: 1.2, 1: 1.21, 2: 1.19}}
    assert kc.stable_verdict(stable, 1.5)[0] == "held"
    assert kc.stable_verdict(stable, 1.1)[0] == "not held"


def test_a_diverged_run_is_said_and_a_stable_one_is_not():
    runs_ = {("mabs", 5, None): {0: True, 1: False}, ("mabs", 10, None): {0: False, 1: False}}
    text = kc._diverged_text(runs_, [("mabs", 5, None), ("mabs", 10, None)])
    assert text.startswith("left out, FedAvg diverged") and "mabs at K = 5 (1 of 2 runs)" in text
    assert kc._diverged_text(runs_, [("mabs", 10, None)]) == ""
    start = np.array([2.5, 1.0, 3.0])
    assert not kr.diverged({"test_loss": start})
    assert kr.diverged({"test_loss": np.array([2.5, 20.0, 1.0])})
    assert kr.diverged({"test_loss": np.array([2.5, np.nan])})


def test_the_mnist_substitute_meets_fig4s_conditions_in_no_profile():
    for profile in ("smoke", "cpu", "paper"):
        unmet = kc.substitute_unmet(profile)
        assert any("not FEMNIST" in u for u in unmet), profile
        assert any("100 clients, not FEMNIST's 462 to 2,231" in u for u in unmet), profile
    # the paper profile runs the FEMNIST recipe (CNN, T = 500, 3 local epochs) on MNIST
    assert len(kc.substitute_unmet("paper")) == 2
    cpu = kc.substitute_unmet("cpu")
    assert "logistic regression, not McMahan's CNN" in cpu
    assert "T = 300 with 1 local epoch, not 500 with 3" in cpu
    # a speed-up is tied to its FEMNIST version's clients
    v2 = kc.substitute_unmet("paper", "v2")
    assert len(v2) == 2 and "100 clients, not FEMNIST v2's 1,231" in v2[1]


def test_does_not_outperform_is_non_superiority():
    margin = kc.NOT_BETTER_MARGIN
    assert margin == 0.01
    # better by half a point in every seed: within the margin, so "does not outperform" holds
    verdict, ci = kc.not_better_verdict([0.004, 0.005, 0.006], margin)
    assert verdict == "held" and ci.high < margin
    # better by 3 points in every seed: it does outperform
    assert kc.not_better_verdict([0.029, 0.03, 0.031], margin)[0] == "not held"
    # worse in every seed: held (the old rule needed exactly this)
    assert kc.not_better_verdict([-0.05, -0.04, -0.06], margin)[0] == "held"
    assert kc.not_better_verdict([-0.05, 0.05, 0.1], margin)[0] == "inconclusive at this budget"
    assert kc.not_better_verdict([0.1], margin) == ("inconclusive", None)


def test_typically_is_a_majority_of_runs_by_its_bounds():
    assert kc.TYPICAL_SHARE == 0.5
    verdict, (low, high) = kc.typical_verdict([True] * 12)
    # one-sided 95% Clopper-Pearson: 0.05 ** (1 / 12) = 0.779
    assert verdict == "held" and low == pytest.approx(0.05 ** (1 / 12), abs=1e-6) and high == 1
    assert kc.typical_verdict([False] * 12)[0] == "not held"
    assert kc.typical_verdict([True] * 6 + [False] * 6)[0] == "inconclusive at this budget"
    # 4 of 4 is not enough runs: 0.05 ** (1 / 4) = 0.47
    assert kc.typical_verdict([True] * 4)[0] == "inconclusive at this budget"
    assert kc.typical_verdict([]) == ("inconclusive", None)


# ---------------------------------------------------------------------------------------------
# the rules on constructed runs (the cache is replaced by runs whose answer is known)


def _fake(name, seed, loss, *, k, accuracy=None, cost=None, every=5, feedback=None):
    """A cached result as :mod:`aoi_fl.evidence.kvib.results` reads it: evaluations every ``every``
    rounds, and (``cost``) full-information curves of 20 rounds with that constant cost;
    ``feedback``: the uniform cost of those 20 rounds instead (the aggregate feedback)."""
    history = {
        "eval_round": list(range(0, every * len(loss), every)),
        "test_loss": list(loss),
        "test_accuracy": list(accuracy if accuracy is not None else np.full(len(loss), 0.5)),
    }
    if cost is not None:
        for key in ("cost", "uniform_cost", "expected_squared_error", "squared_error"):
            history[key] = [cost] * 20
        history["optimal_cost"] = [0.0] * 20
        if feedback is not None:
            history["uniform_cost"] = list(feedback)
    config = {"sampler": {"name": name, "k": k}, "training": {"seed": seed}}
    return SimpleNamespace(config=config, history=history)


def _figure2(monkeypatch, curves, costs, feedback=None):
    """Fig. 2's rows (profile cpu, K = 10) from runs of 3 seeds: ``curves`` and ``costs`` map a
    sampler to its test-loss curve and per-round cost (seed s adds 0.01 s to both);
    ``feedback``: the aggregate feedback of every run's 20 rounds."""
    fake = [
        _fake(
            name,
            s,
            np.asarray(loss) + 0.01 * s,
            k=10,
            cost=costs[name] + 0.01 * s,
            feedback=feedback,
        )
        for name, loss in curves.items()
        for s in range(3)
    ]
    monkeypatch.setattr(kc.runs, "cached_results", lambda configs, results_dir: (fake, 0))
    return {c.key: c for c in kc.figure2_claims("cpu", "unused")}


STABLE = [2.3, 1.5, 1.2, 1.0, 1.0]
FAST = [2.3, 1.0, 1.0, 1.0, 1.0]  # the same endpoint as STABLE, reached 10 rounds earlier
EXPLODING = [2.3, 20.0, 50.0, 60.0, 70.0]  # above 5x the initial loss: diverged


def test_a_diverged_run_cannot_make_a_comparison_held(monkeypatch):
    # K-Vib beats every baseline in every seed, but uniform's and MABS's runs all diverged:
    # before issue 27 their parts were "held" and the row with them
    curves = {"kvib": STABLE, "vrb": STABLE, "uniform_unbiased": EXPLODING, "mabs": EXPLODING}
    costs = {"kvib": 0.1, "vrb": 1.0, "uniform_unbiased": 100.0, "mabs": 100.0}
    rows = _figure2(monkeypatch, curves, costs)
    regret = rows["kvib.fig2.regret"]
    assert regret.verdict == "inconclusive"
    assert "uniform_unbiased at K = 10 (3 of 3 runs), mabs at K = 10 (3 of 3 runs)" in (
        regret.spread
    )
    assert "uniform_unbiased inconclusive (0 paired seeds)" in regret.spread
    assert "vrb held (3 paired seeds)" in regret.spread
    # the same runs without the explosion: every part held, and so the row
    stable = {**curves, "uniform_unbiased": STABLE, "mabs": STABLE}
    rows = _figure2(monkeypatch, stable, costs)
    assert rows["kvib.fig2.regret"].verdict == "held"
    assert "left out" not in rows["kvib.fig2.regret"].spread
    # and a baseline with a lower regret in every seed makes it "not held"
    rows = _figure2(monkeypatch, stable, {**costs, "vrb": 0.01})
    assert rows["kvib.fig2.regret"].verdict == "not held"


def test_faster_is_judged_on_the_speed_measure_not_the_endpoint(monkeypatch):
    costs = dict.fromkeys(("kvib", *kc.BASELINES), 1.0)
    # every sampler ends at the same test loss; K-Vib gets there 10 rounds earlier
    rows = _figure2(monkeypatch, {"kvib": FAST} | dict.fromkeys(kc.BASELINES, STABLE), costs)
    loss = rows["kvib.fig2.loss"]
    assert kc.SPEED_MEASURES["fig2"] in loss.claim
    assert loss.verdict == "held"
    rounds = range(0, 25, 5)
    assert loss.ours == pytest.approx(horizon_mean(FAST, rounds) - horizon_mean(STABLE, rounds))
    # the other way round: the rule says "not held"
    rows = _figure2(monkeypatch, {"kvib": STABLE} | dict.fromkeys(kc.BASELINES, FAST), costs)
    assert rows["kvib.fig2.loss"].verdict == "not held"


def test_the_self_normalised_uniform_row_is_ours_with_its_control(monkeypatch):
    costs = dict.fromkeys(("kvib", "optimal", kc.NORMALISED), 1.0)
    # the self-normalised uniform ahead of K-Vib and of the optimum: the aggregation rule's lead
    curves = {"kvib": STABLE, "optimal": STABLE, kc.NORMALISED: FAST}
    row = _figure2(monkeypatch, curves, costs)["kvib.fig2.loss.uniform_normalised"]
    assert row.kind == "ours" and row.ref == "Fig. 2 (ours)"
    # the tag is the ledger's, once, and the statement reads on from it
    assert row.claim.startswith("(ours, not the paper's) uniform sampling with the self-normalised")
    assert row.claim.count("(ours, not the paper's)") == 1 and "kvib.fig2.loss" in row.claim
    assert row.verdict == "held"
    assert (
        "kvib - it: 95% t interval" in row.spread and "optimal - it: 95% t interval" in row.spread
    )
    # ahead of K-Vib but not of the optimum: the control fails, the sampler matters
    rows = _figure2(monkeypatch, curves | {"optimal": FAST - np.r_[0, 0.1, 0.1, 0.1, 0.1]}, costs)
    assert rows["kvib.fig2.loss.uniform_normalised"].verdict == "not held"
    # the optimum's runs missing: no control, no verdict
    rows = _figure2(monkeypatch, {"kvib": STABLE, kc.NORMALISED: FAST}, costs)
    assert rows["kvib.fig2.loss.uniform_normalised"].verdict == "inconclusive"


def test_the_first_rounds_feedback_row(monkeypatch):
    names = ("kvib", "vrb", "optimal", kc.NORMALISED)
    costs = dict.fromkeys((*names, "mabs"), 1.0)
    falling = np.linspace(5.0, 0.1, 20)
    curves = dict.fromkeys(names, STABLE) | {"mabs": EXPLODING}
    row = _figure2(monkeypatch, curves, costs, feedback=falling)["kvib.sec6.first_feedback_largest"]
    # 12 stable runs, each with its largest feedback in the first round; MABS's diverged runs
    # are left out and said
    assert row.verdict == "held" and row.ours == 1.0
    assert "largest in 12 of 12 runs" in row.spread and "mabs at K = 10 (3 of 3 runs)" in row.spread
    # the largest comes later in every run: not held
    rising = falling[::-1]
    row = _figure2(monkeypatch, curves, costs, feedback=rising)["kvib.sec6.first_feedback_largest"]
    assert row.verdict == "not held" and "largest in 0 of 12 runs" in row.spread
    # a bump of 1% in round 3: the first round is not the largest (no tolerance)
    bumped = falling.copy()
    bumped[3] = 1.01 * falling[0]
    row = _figure2(monkeypatch, curves, costs, feedback=bumped)["kvib.sec6.first_feedback_largest"]
    assert row.verdict == "not held" and "at least 99.0% of it" in row.spread


def _k_grid(monkeypatch, variance):
    """Figs 3(b), 6 and 7's rows (profile cpu: K = 5, 10, 20, 40) from 3 seeds per K:
    ``variance`` maps a sampler to its per-round cost and variance at K (seed s adds 0.01 s)."""
    fake = [
        _fake(name, s, STABLE, k=k, cost=float(v(k)) + 0.01 * s)
        for name, v in variance.items()
        for k in (5, 10, 20, 40)
        for s in range(3)
    ]
    monkeypatch.setattr(kc.runs, "cached_results", lambda configs, results_dir: (fake, 0))
    return {c.key: c for c in kc.figure3_claims("cpu", "unused")}


def test_figure7_and_the_baselines_slopes_on_constructed_runs(monkeypatch):
    rows = _k_grid(monkeypatch, {"kvib": lambda k: 8 / k, "vrb": lambda k: 64 / k**2})
    assert rows["kvib.fig7.falls"].verdict == "held"
    # Fig. 7 plots the variance but states no result: the reading is ours, and says so once
    fig7 = rows["kvib.fig7.falls"]
    assert fig7.kind == "ours" and fig7.claim.count("(ours, not the paper's)") == 1
    assert fig7.ref == "Fig. 7, App. F (ours)" and fig7.paper_value is None
    assert rows["kvib.fig7.falls"].ours == pytest.approx((1.6 + 0.01) / (0.2 + 0.01))
    assert "vrb 2.57, 0.65, 0.17, 0.05" in rows["kvib.fig7.falls"].spread
    # VRB's regret falls as K^-2, K-Vib's as K^-1: said in the rate row's spread
    assert "log-log slope vrb -1.9 (steeper)" in rows["kvib.fig3b.rate"].spread
    assert "mabs, uniform_normalised: no slope" in rows["kvib.fig3b.rate"].spread
    # a variance that rises with K: not held
    rows = _k_grid(monkeypatch, {"kvib": lambda k: k / 8, "vrb": lambda k: 64 / k**2})
    assert rows["kvib.fig7.falls"].verdict == "not held"
    assert "(shallower)" not in rows["kvib.fig3b.rate"].spread


def _accuracy(hit, plateau, rounds=61):
    """A test-accuracy curve that reaches 0.9 at round ``hit`` and levels off at ``plateau``."""
    return np.minimum(plateau, 0.5 + 0.4 * np.arange(rounds) / hit)


def _figure4(monkeypatch, hits, plateaus, diverged=()):
    """Fig. 4's substitute rows (profile cpu: K = 5, target 90%) from 5 seeds of each sampler:
    seed s reaches 90% at round hits[name] + s (K-Vib) or + 2 s; ``diverged``: (name, seed)
    runs whose test loss explodes."""
    fake = []
    for name, hit in hits.items():
        for s in range(5):
            loss = np.linspace(2.3, 0.3, 61)
            if (name, s) in diverged:
                loss[30] = 20.0
            acc = _accuracy(hit + s * (1 if name == "kvib" else 2), plateaus[name] + 0.001 * s)
            fake.append(_fake(name, s, loss, k=kc.kx.MNIST_K, accuracy=acc, every=1))
    monkeypatch.setattr(kc.runs, "cached_results", lambda configs, results_dir: (fake, 0))
    return {c.key: c for c in kc.figure4_claims("cpu", "unused")}


def test_the_substitutes_rules_on_constructed_runs(monkeypatch):
    names = ("uniform_unbiased", "uniform_normalised", "uniform_isp", "mabs", "vrb", "kvib")
    hits = dict.fromkeys(names, 40) | {"kvib": 10}
    plateaus = dict.fromkeys(names, 0.92) | {"vrb": 0.95}
    rows = _figure4(monkeypatch, hits, plateaus, diverged={("uniform_unbiased", 1)})
    # MNIST's 100 clients are not FEMNIST's: every decided row is capped, and its spread keeps
    # what the criterion gives
    substitute = [c for k, c in rows.items() if k.startswith("kvib.fig4.substitute.")]
    assert len(substitute) == 8
    assert {c.verdict for c in substitute} == {"inconclusive at this budget"}
    for c in substitute:
        assert "the claim's conditions are not met (MNIST" in c.spread, c.key
        assert re.search(r"100 clients, not FEMNIST('s 462 to 2,231| v2's 1,231)", c.spread)
    speed = rows["kvib.fig4.substitute.speedup.uniform_unbiased"]
    assert "by the criterion held" in speed.spread
    assert "100 clients, not FEMNIST v2's 1,231 (the claimed 2x is v2's" in speed.spread
    assert "over 4 paired seeds" in speed.spread
    assert "uniform_unbiased at K = 5 (1 of 5 runs)" in speed.spread
    vrb = rows["kvib.fig4.substitute.no_better.vrb"]
    assert "by the criterion not held" in vrb.spread and vrb.ours == pytest.approx(0.03)
    assert "by the criterion held" in rows["kvib.fig4.substitute.enlarges"].spread
    # a substitute that met every condition would decide: the criteria, one by one
    monkeypatch.setattr(kc, "substitute_unmet", lambda profile, version=None: [])
    rows = _figure4(monkeypatch, hits, plateaus, diverged={("uniform_unbiased", 1)})
    # rounds to 90%: K-Vib 30 rounds sooner in every seed, more than the claimed 2x; the
    # diverged seed of unbiased uniform is left out of its pairs and said
    speed = rows["kvib.fig4.substitute.speedup.uniform_unbiased"]
    assert speed.verdict == "held" and "over 4 paired seeds" in speed.spread
    assert rows["kvib.fig4.substitute.speedup.vrb"].verdict == "held"
    # VRB ends 3 points above unbiased uniform in every seed: it does outperform (margin 1)
    assert rows["kvib.fig4.substitute.no_better.vrb"].verdict == "not held"
    # half a point above: within the non-superiority margin
    rows = _figure4(monkeypatch, hits, plateaus | {"vrb": 0.925})
    assert rows["kvib.fig4.substitute.no_better.vrb"].verdict == "held"
    # early and whole-horizon speed (areas under the accuracy curve): K-Vib above uniform ISP
    assert rows["kvib.fig4.substitute.enlarges"].verdict == "held"
    assert rows["kvib.fig4.substitute.isp_early"].verdict == "inconclusive at this budget"
    rows = _figure4(monkeypatch, hits | {"uniform_isp": 10}, plateaus)
    assert rows["kvib.fig4.substitute.isp_early"].verdict == "held"
    rows = _figure4(monkeypatch, hits | {"kvib": 50}, plateaus)
    assert rows["kvib.fig4.substitute.enlarges"].verdict == "not held"


def test_figure1_rows_use_the_profiles_settings(monkeypatch):
    asked = []
    settings = kc.kx.example_3_1_settings

    def spy(profile):
        asked.append(profile)
        return settings(profile)

    monkeypatch.setattr(kc.kx, "example_3_1_settings", spy)
    kc.verdict_lines("11_isp_vs_rsp", "smoke")
    assert asked == ["smoke"]
    # Sec. 3's K = 1 remark is an identity: not a row that cannot fail, but an Untested entry
    assert "kvib.sec3.k1_is_rsp" not in {c.key for c in kc.figure1_claims("smoke")}
    assert any("K = 1" in u.statement for u in kc.UNTESTED)


def test_example_3_2_rows_are_exact():
    rows = {c.key: c for c in kc.example_3_2_claims()}
    assert rows["kvib.ex3_2.sq_norm.g3"].ours == pytest.approx(36.0)
    assert rows["kvib.ex3_2.sq_norm.g3"].verdict == "not held"
    assert rows["kvib.ex3_2.p_isp.g2"].verdict == "held"
    # one reading for the whole example: its "||.||^2" is the squared norm, so the printed 0.6
    # (the norm of the 0.3552 error) fails like the printed squared norms, and says why
    assert kc.EX32_NORM_POWER == 2
    error = rows["kvib.ex3_2.k3_rsp.error"]
    assert error.ours == pytest.approx(0.3552, abs=1e-4) and error.verdict == "not held"
    assert "||d - sum g|| = 0.596" in error.spread and "kvib.ex3_2.sq_norm" in error.spread
    for key in ("kvib.ex3_2.sq_norm.g2", "kvib.ex3_2.k3_rsp.error"):
        assert "read as printed: the squared norm" in rows[key].claim, key
    assert rows["kvib.ex3_2.k3_rsp.d_y"].verdict == "not held"
    assert rows["kvib.ex3_2.isp_closer"].ours == pytest.approx(25.2597 / 6, abs=1e-3)
    assert {c.kind for c in rows.values()} == {"arithmetic"}


def test_example_3_2_rows_hold_on_vectors_whose_numbers_are_the_printed_ones():
    # vectors whose squared norms are the printed [1, 3, 6]: those rows hold, and the printed
    # probabilities (the paper's, from the norms [1, 3, 6]) no longer do
    directions = kc.EX32_G / np.linalg.norm(kc.EX32_G, axis=1)[:, None]
    rows = {
        c.key: c
        for c in kc.example_3_2_claims(directions * np.sqrt(kc.PAPER_EX32_SQ_NORMS)[:, None])
    }
    assert {rows[f"kvib.ex3_2.sq_norm.g{i}"].verdict for i in (1, 2, 3)} == {"held"}
    assert rows["kvib.ex3_2.p_isp.g1"].verdict == "not held"
    # the paper's vectors scaled so that RSP's K = 3 squared error is the printed 0.6 (every
    # estimate scales with the vectors, the probabilities do not)
    scale = np.sqrt(kc.PAPER_EX32_K3_ERROR / 0.355161)
    error = {c.key: c for c in kc.example_3_2_claims(scale * kc.EX32_G)}["kvib.ex3_2.k3_rsp.error"]
    assert error.ours == pytest.approx(0.6, abs=1e-5) and error.verdict == "held"
    with pytest.raises(ValueError, match=r"g must be Example 3.2's three vectors in R\^2"):
        kc.example_3_2_claims(np.ones((4, 2)))


def test_scale_verdict_on_constructed_curves():
    scales = [0.5, 1.0, 1.5, 2.0]
    # below the threshold at every scale: held, whatever the unstated scale
    assert kc.scale_verdict(scales, [1.1, 1.2, 1.3, 1.4], 1.5, "below") == (
        "held",
        "held at every scale 0.5-2",
    )
    # above it at every scale: not held
    verdict, where = kc.scale_verdict(scales, [1.6, 1.7, 2.5, 9.0], 1.5, "below")
    assert (verdict, where) == ("not held", "not held at every scale 0.5-2")
    # the curve crosses the threshold: the scale decides, which no budget changes
    verdict, where = kc.scale_verdict(scales, [1.6, 1.9, 2.1, 3.0], 2.0, "above")
    assert verdict == "inconclusive"
    assert where.startswith("not held for scale 0.5-1, held for scale 1.5-2: the verdict turns")
    # a verdict that comes back is named at each of its ranges; on the threshold is not beyond it
    _, where = kc.scale_verdict(scales, [1.0, 2.0, 1.0, 1.0], 1.5, "below")
    assert where.startswith("held for scale 0.5 and 1.5-2, not held for scale 1:")
    assert kc.scale_verdict(scales, [1.5] * 4, 1.5, "below")[0] == "not held"


@pytest.mark.parametrize(
    ("scales", "values", "threshold", "claimed", "message"),
    [
        ([0.5], [1.0], 1.5, "below", "scales must be at least 2 finite, strictly increasing"),
        ([1.0, 0.5], [1.0, 1.0], 1.5, "below", "scales must be at least 2"),
        ([0.5, 1.0], [1.0], 1.5, "below", "values must be 2 finite numbers, one per scale"),
        ([0.5, 1.0], [1.0, np.nan], 1.5, "below", "values must be 2 finite numbers"),
        ([0.5, 1.0], [1.0, 1.0], np.inf, "below", "threshold must be a finite number, got inf"),
        ([0.5, 1.0], [1.0, 1.0], 1.5, "under", "claimed"),
    ],
)
def test_scale_verdict_rejects_bad_input(scales, values, threshold, claimed, message):
    with pytest.raises(ValueError, match=message):
        kc.scale_verdict(scales, values, threshold, claimed)


def test_example_3_1_curve_moves_with_the_scale_alone():
    # one seeded stream: at each scale the vectors are those of example_3_1_vectors, so the
    # curve at a scale is the closed forms on that scale's vectors
    curve = kc.example_3_1_curve((0.5, 1.0), (2, 6), 20, 7)
    assert list(curve["scale"]) == [0.5, 0.5, 1.0, 1.0] and list(curve["K"]) == [2, 6, 2, 6]
    mse = kc.example_3_1_mse(kc.kx.example_3_1_vectors(20, 7, 1.0), 6)
    last = curve.iloc[-1]
    assert [last[key] for key in ("uniform", "rsp", "isp")] == pytest.approx(list(mse.values()))
    assert last["RSP / ISP"] == pytest.approx(mse["rsp"] / mse["isp"])
    assert last["next best / ISP"] == pytest.approx(min(mse["rsp"], mse["uniform"]) / mse["isp"])


def test_figure1a_rows_are_decided_over_the_unstated_scale():
    rows = {c.key: c for c in kc.figure1_claims("cpu")}
    assert kc.kx.EXAMPLE_3_1_SCALES == tuple(np.round(np.linspace(0.5, 2.0, 16), 1))
    # each ratio claim holds at some scales and fails at others: inconclusive, and the spread
    # says where each verdict holds
    comparable, better = rows["kvib.fig1a.k10.comparable"], rows["kvib.fig1a.k30.isp_better"]
    assert comparable.verdict == better.verdict == "inconclusive"
    assert "held for scale 0.5-1.3, not held for scale 1.4-2" in comparable.spread
    assert "not held for scale 0.5-0.7, held for scale 0.8-2" in better.spread
    # ours: the ratio at notebook 11's scale, where the table and scatter plot are
    assert comparable.ours == pytest.approx(1.266, abs=1e-3)
    assert better.ours == pytest.approx(2.671, abs=1e-3)
    # ISP lowest at every scale; RSP below uniform (not claimed) fails at small scales
    lowest = rows["kvib.fig1a.isp_lowest"]
    assert lowest.verdict == "held" and "held at every scale 0.5-2" in lowest.spread
    assert "fails at K = 30 for scale 0.5-0.6" in lowest.spread
    # Example 3.1 is a simulation on random vectors: experiment, not arithmetic
    assert {rows[k].kind for k in rows if k.startswith("kvib.fig1a.")} == {"experiment"}


def _check_rows(rows):
    keys = [c.key for c in rows]
    assert len(keys) == len(set(keys))
    for c in rows:
        assert c.key.startswith("kvib.") and c.key == c.key.lower()
        assert c.verdict in VERDICTS and c.paper == "kvib"
        assert (REPO / "notebooks" / f"{c.notebook}.ipynb").exists()
        if c.printed_as:
            re.compile(c.printed_as, flags=re.M)
    for key, value in PRINTED.items():
        assert key in keys, key
        assert next(c for c in rows if c.key == key).paper_value == pytest.approx(value)


def test_empty_results_dir_makes_training_rows_inconclusive(tmp_path):
    rows = kc.claims("smoke", results_dir=str(tmp_path))
    _check_rows(rows)
    training = [c for c in rows if c.key.startswith(TRAINING)]
    assert training
    for c in training:
        assert c.verdict == "inconclusive" and re.search(r"\d+ runs not cached", c.spread), c


def test_every_untested_statement_says_where_and_its_rows_exist(tmp_path):
    keys = {c.key for c in kc.claims("smoke", results_dir=str(tmp_path))}
    assert len(kc.UNTESTED) >= 30
    by_ref = {u.ref: u for u in kc.UNTESTED}
    # App. G's own cost, quoted: O(K log N) per round, O(T K log N) in total
    cost = by_ref["Sec. 5.3 (computational complexity); App. G"].statement
    assert "O(K log N) per round" in cost and "O(T K log N) in total" in cost
    assert "App. E.2" in by_ref
    # the first-round feedback is a row now (the runs record every client's, aggregated)
    assert not any("first-round feedback" in u.statement for u in kc.UNTESTED)
    assert "kvib.sec6.first_feedback_largest" in keys and "kvib.fig7.falls" in keys
    for u in kc.UNTESTED:
        assert isinstance(u, Untested) and u.paper == "kvib"
        assert re.search(
            r"Abstract|Contributions|Sec\. \d|App\. [A-G]|Lemma|Theorem|Assumption", u.ref
        )
        for named in re.findall(r"kvib\.[a-z0-9_.]+[a-z0-9_*]", u.reason):
            pattern = re.escape(named).replace(r"\*", ".*")
            assert any(re.fullmatch(pattern, k) for k in keys), (named, u.ref)


@pytest.mark.slow
def test_committed_cache_rows():
    rows = kc.claims("cpu", results_dir=str(REPO / "results"))
    _check_rows(rows)
    by = {c.key: c for c in rows}
    assert not any("not cached" in c.spread for c in rows)
    # notebook 11's Reading: Fig. 1(a)'s ratio claims turn on the unstated scale, ISP is the
    # lowest at every scale, and ISP is closer in Example 3.2
    assert {c.key: c.verdict for c in rows if c.notebook == "11_isp_vs_rsp" and c.printed_as} == {
        "kvib.fig1a.k10.comparable": "inconclusive",
        "kvib.fig1a.k30.isp_better": "inconclusive",
        "kvib.fig1a.isp_lowest": "held",
        "kvib.ex3_2.isp_closer": "held",
    }
    # rows of ours: the self-normalised uniform's control and Fig. 7, which states no result
    assert {c.key for c in rows if c.kind == "ours"} == {
        "kvib.fig2.loss.uniform_normalised",
        "kvib.fig7.falls",
    }
    # one seed per K or gamma scale: no interval
    for key in (
        "fig3b.falls",
        "fig3b.rate",
        "fig6.vrb",
        "fig6.uniform_normalised",
        "fig3c.regret",
        "fig3c.variance",
    ):
        assert by[f"kvib.{key}"].verdict == "inconclusive at this budget", key
    # unbiased uniform and MABS diverge in every Fig. 2 seed (and at K = 5-20 in the K grid),
    # uniform ISP in every Fig. 2 seed: left out, their comparisons cannot be decided
    for key in (
        "fig2.regret",
        "fig2.variance",
        "fig2.loss",
        "fig6.uniform_unbiased",
        "fig6.mabs",
        "fig4.isp_early",
    ):
        assert by[f"kvib.{key}"].verdict == "inconclusive", key
        assert by[f"kvib.{key}"].spread.startswith("left out, FedAvg diverged"), key
    assert "uniform_unbiased inconclusive (0 paired seeds)" in by["kvib.fig2.regret"].spread
    # the speed claim on the speed measure; the self-normalised uniform is faster than K-Vib
    # and than the optimum (the control): ours, not the paper's, and held
    assert kc.SPEED_MEASURES["fig2"] in by["kvib.fig2.loss"].claim
    normalised = by["kvib.fig2.loss.uniform_normalised"]
    assert normalised.claim.startswith("(ours, not the paper's)")
    assert normalised.verdict == "held"
    assert "optimal - it: 95% t interval [0.184, 0.396] over 3 paired seeds" in normalised.spread
    assert "kvib - it: 95% t interval [0.237, 0.467]" in normalised.spread
    # the baselines' one-seed regret falls faster than K-Vib's (no verdict of its own)
    rate = by["kvib.fig3b.rate"].spread
    assert "vrb -2 (steeper), uniform_normalised -2.53 (steeper)" in rate
    # Fig. 7 on the one-seed K grid; Sec. 6's first-round feedback in 6 of the 12 stable runs
    assert by["kvib.fig7.falls"].verdict == "inconclusive at this budget"
    first = by["kvib.sec6.first_feedback_largest"]
    assert first.verdict == "inconclusive at this budget" and first.ours == 0.5
    assert "largest in 6 of 12 runs" in first.spread and "at least 96.7% of it" in first.spread
    # MNIST substitute: one diverged seed of unbiased uniform is left out of its pairs, and no
    # row decides FEMNIST's claims (what the criterion gives stays in the spread)
    speed = by["kvib.fig4.substitute.speedup.uniform_unbiased"]
    assert "over 4 paired seeds" in speed.spread and "uniform_unbiased at K = 5 (1 of 5" in (
        speed.spread
    )
    substitute = [c for c in rows if c.key.startswith("kvib.fig4.substitute.")]
    assert len(substitute) == 8
    for c in substitute:
        assert c.verdict == "inconclusive at this budget", c.key
        assert "the claim's conditions are not met (MNIST" in c.spread, c.key
    # what each criterion gives, as notebook 13's Reading states it
    for c in substitute:
        given = "held" if c.key.endswith(".enlarges") else "inconclusive at this budget"
        given = "inconclusive at this power" if ".speedup." in c.key else given
        assert f"by the criterion {given}," in c.spread, c.key
    enlarges = by["kvib.fig4.substitute.enlarges"]
    assert "by the criterion held, 95% t interval [-0.113, -0.0384]" in enlarges.spread
    assert by["kvib.fig4.speedup.v1"].verdict == "not computable here"
    assert {by[f"kvib.fig5.{key}"].verdict for key in ("speedup", "baselines_worse")} == {
        "not computable here"
    }
    assert np.isfinite(by["kvib.fig2.regret"].ours)
    lines = kc.verdict_lines("12_kvib_synthetic", results_dir=str(REPO / "results"))
    for c in rows:
        if c.printed_as and c.notebook == "12_kvib_synthetic":
            match = re.search(c.printed_as, "\n".join(lines), flags=re.M)
            assert match and match.group(1) == c.verdict, c.key


def test_an_early_speed_measure_of_a_short_run_gives_no_value():
    # a run of a few rounds (the smoke profile) has one evaluation in its first tenth: no area
    run = {"eval_round": np.array([0, 5, 10]), "test_accuracy": np.array([0.1, 0.5, 0.8])}
    assert np.isnan(kr.horizon("test_accuracy", first_tenth=True)(run))
    assert kr.horizon("test_accuracy")(run) == pytest.approx(0.475)
