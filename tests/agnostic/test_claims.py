"""The agnostic-FedAvg rows of the claims ledger: the verdict helpers of
:mod:`aoi_fl.evidence.agnostic.results` (shared with notebooks 09-10) on small exact cases (Lemma 1
against exact enumeration, divergence, the speed measure), the rows on an empty cache (all training
rows inconclusive) and on the committed cache."""

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from aoi_fl.agnostic import algorithms as agnostic
from aoi_fl.agnostic import samplers as participation
from aoi_fl.evidence.agnostic import claims as ac
from aoi_fl.evidence.agnostic import experiments as ax
from aoi_fl.evidence.agnostic import results as ar
from aoi_fl.pipeline.claims import OURS_TAG, VERDICTS, Claim, capped

ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------
# verdict helpers


def test_outperform_verdict_by_hand():
    # gaps 1, 2, 3: mean 2, sd 1, t_{0.975, 2} = 4.303: [2 - 2.484, 2 + 2.484] contains 0
    interval, verdict = ar.outperform_verdict([1.0, 2.0, 3.0])
    half = stats.t.ppf(0.975, 2) / math.sqrt(3)
    assert (interval.low, interval.high) == pytest.approx((2 - half, 2 + half))
    assert verdict == "inconclusive at this budget"
    assert ar.outperform_verdict([1.0, 1.1, 0.9])[1] == "held"
    assert ar.outperform_verdict([-1.0, -1.1, -0.9])[1] == "not held"


def test_a_diverged_run_makes_a_comparison_inconclusive():
    # the ledger's one rule: a run that diverged cannot make a claim held (it used to count for
    # agnostic FedAvg: eq. 10 as printed, diverging in every seed, was "held")
    nan = float("nan")
    assert ar.outperform_verdict([nan, nan], [True, True]) == (None, "inconclusive")
    assert ar.outperform_verdict([1.0, 1.1, nan], [False, False, True]) == (None, "inconclusive")
    assert ar.outperform_verdict([-1.0, -1.1, nan], [False, False, True])[1] == "inconclusive"
    # a finite gap of a diverged run (bounded by a projection) does not count either
    assert ar.outperform_verdict([1500.0, 1400.0, 1600.0], [True] * 3)[1] == "inconclusive"
    assert ar.outperform_verdict([1.0])[1] == "inconclusive"


def test_contrast_verdict_is_a_welch_interval():
    a, b = [0.02, 0.025, 0.03], [0.0, 0.005, 0.01]
    diff, low, high, verdict = ar.contrast_verdict(a, b)
    # equal variances 2.5e-5 and n = 3: se = sqrt(2 * 2.5e-5 / 3), Welch df = 4
    half = stats.t.ppf(0.975, 4) * math.sqrt(2 * 2.5e-5 / 3)
    assert diff == pytest.approx(0.02)
    assert (low, high) == pytest.approx((0.02 - half, 0.02 + half))
    assert verdict == "held"
    assert ar.contrast_verdict(b, a)[3] == "not held"
    assert ar.contrast_verdict([0.01], a)[3] == "inconclusive"


def test_skew_noise_floor_matches_simulated_uniform_estimates():
    rng = np.random.default_rng(0)
    draws, m, n = 500, 10, 100
    skews = []
    for _ in range(40):
        counts = np.zeros(n)
        for _ in range(draws):
            counts[rng.choice(n, m, replace=False)] += 1
        skews.append(np.abs(counts / (m * draws) - 1 / n).sum())
    # without replacement the counts vary a little less than binomially: the floor is an upper
    # approximation within a few percent
    assert np.mean(skews) == pytest.approx(ac.skew_noise_floor(draws, m, n), rel=0.1)
    assert ac.skew_noise_floor(100_000, 15) < ac.AOI_NEAR_UNIFORM < ac.skew_noise_floor(2_000, 15)


#: a model outside Assumption 1, as the paper's MNIST model is: a run of it meets the condition
NON_CONVEX = "small_cnn"


def _run_table(gaps_by_rule, agnostic=1.0, diverged=(), horizon_gaps=None, model=NON_CONVEX):
    """A results.run_table-shaped table: one task (MNIST, ``model``), one tau, seeds 0.., rules
    with given gaps of the converged loss and (``horizon_gaps``, default the same) of the mean
    loss over the run."""
    rows = []
    n = len(next(iter(gaps_by_rule.values())))
    horizon_gaps = gaps_by_rule if horizon_gaps is None else horizon_gaps
    base = dict(task="mnist", protocol="last_iterate", process="exp_prior", tau=10.0, skew=1.3)
    base |= dict(model=model)
    for seed in range(n):
        rows.append(
            {**base, "seed": seed, "aggregation": "agnostic", "loss_p": agnostic}
            | {"loss_uniform": agnostic, "horizon_p": 2 * agnostic, "diverged_at": None}
        )
        for rule, gaps in gaps_by_rule.items():
            bad = (rule, seed) in diverged
            loss = float("nan") if bad else agnostic + gaps[seed]
            horizon = float("nan") if bad else 2 * agnostic + horizon_gaps[rule][seed]
            rows.append(
                {**base, "seed": seed, "aggregation": rule, "loss_p": loss}
                | {"loss_uniform": loss, "horizon_p": horizon, "diverged_at": 20 if bad else None}
            )
    return pd.DataFrame(rows)


def test_fig1_claims_table_pairs_seeds_and_counts_divergence():
    table = _run_table(
        {"weighted": [0, 0, 0], "weighted_normalised": [0.1, 0.2, -0.05]},
        diverged={("weighted", s) for s in range(3)},
    )
    out = ar.fig1_claims_table(table, ("weighted", "weighted_normalised"))
    w = out.loc[("converged", "mnist", "last_iterate", "weighted")]
    assert (w["diverged"], w["verdict"]) == (3, "inconclusive") and pd.isna(w["agnostic lower"])
    r = out.loc[("converged", "mnist", "last_iterate", "weighted_normalised")]
    assert r["agnostic lower"] == "2/3"
    assert r["gap mean"] == pytest.approx(0.25 / 3)
    assert r["verdict"] == "inconclusive at this budget"
    printed = out.to_string(sparsify=False)
    for rule in ("weighted", "weighted_normalised"):
        index = ("converged", "mnist", "last_iterate", rule)
        m = re.search(ac._claim1_printed(*index), printed, flags=re.M)
        assert m and m.group(1) == out.loc[index, "verdict"]


def test_the_horizon_measure_reads_the_mean_over_the_run_not_the_endpoint():
    # (ours, notebook 09's second table: no ledger row, Sec. 4's sentence is about the value
    # reached) the weighted rule ends level with agnostic FedAvg (converged gaps around 0) but
    # is higher over the whole run in every seed: the endpoint cannot decide, the horizon mean
    # does;
    # a rule that is lower over the run must give "not held"
    table = _run_table(
        {"weighted_normalised": [0.01, -0.01, 0.0], "weighted_updates": [0.0, 0.01, -0.01]},
        horizon_gaps={
            "weighted_normalised": [0.30, 0.32, 0.31],
            "weighted_updates": [-0.50, -0.52, -0.49],
        },
    )
    rules = ("weighted_updates", "weighted_normalised")
    end = ar.fig1_claims_table(table, rules)["verdict"].droplevel(["measure", "task", "protocol"])
    assert (end == "inconclusive at this budget").all()
    speed = ar.fig1_claims_table(table, rules, measure="horizon")
    v = speed["verdict"].droplevel(["measure", "task", "protocol"])
    assert v.to_dict() == {"weighted_updates": "not held", "weighted_normalised": "held"}
    row = speed.loc[("horizon", "mnist", "last_iterate", "weighted_normalised")]
    assert row["gap mean"] == pytest.approx(0.31)
    assert row["relative gap"] == pytest.approx(0.31 / 2)  # the agnostic run's mean loss is 2
    with pytest.raises(ValueError, match="measure"):
        ar.fig1_claims_table(table, rules, measure="endpoint")


def test_a_convex_mnist_model_caps_the_mnist_rows_by_the_shared_rule():
    # held by the criterion in every case; with our convex MNIST model (logistic regression)
    # the paper's condition (a model outside Assumption 1) is not met, so the table prints what
    # the ledger's Claim makes of it: "inconclusive at this budget", and the reason
    table = _run_table({"weighted_normalised": [0.10, 0.11, 0.12]}, model="logistic_regression")
    index = ("converged", "mnist", "last_iterate", "weighted_normalised")
    row = ar.fig1_claims_table(table, ("weighted_normalised",)).loc[index]
    assert (row["criterion verdict"], row["verdict"]) == ("held", "inconclusive at this budget")
    conditions = ar.task_conditions("mnist", table["model"])
    claim = Claim(
        "k", "agnostic", "r", "c", None, 0.11, "interval", row["criterion verdict"], "nb",
        kind="experiment", conditions=conditions,
    )  # fmt: skip
    assert claim.verdict == row["verdict"]
    assert "MNIST model (logistic_regression): ours convex (Assumption 1)" in claim.spread
    # a non-convex model meets it: the criterion decides, in the table and in the Claim
    met = ar.fig1_claims_table(_run_table({"weighted_normalised": [0.10, 0.11, 0.12]}))
    assert met.loc[index, "verdict"] == met.loc[index, "criterion verdict"] == "held"
    assert all(c.met for c in ar.task_conditions("mnist", [NON_CONVEX]))
    # the linear regression is the paper's convex task: no condition; undecided verdicts stay
    assert ar.task_conditions("linear_regression") == ()
    assert capped("inconclusive", conditions) == "inconclusive"
    assert capped("not held", conditions) == "inconclusive at this budget"
    # by default the configured model: ours is the convex logistic regression
    (default,) = ar.task_conditions("mnist")
    assert not default.met and default.paper == ar.PAPER_MNIST_MODEL
    with pytest.raises(ValueError, match="models must name at least one model"):
        ar.convexity([])
    with pytest.raises(ValueError, match="task"):
        ar.task_conditions("cifar10")


def _contrast_table(mnist_model):
    """Fig. 1 runs of both tasks in which MNIST's relative gap is far larger (a clear reversal
    of claim 2), MNIST runs of ``mnist_model``."""
    rng = np.random.default_rng(0)
    rows = []
    for seed in range(4):
        for task, protocol, gap, model in (
            ("mnist", "last_iterate", 1.0, mnist_model),
            ("linear_regression", "algorithm1", 0.01, "linear_regression"),
        ):
            common = dict(task=task, protocol=protocol, process="exp_prior", tau=10.0, seed=seed)
            noise = 0.001 * rng.standard_normal()
            for rule, loss in (("agnostic", 1.0), ("weighted_updates", 1.0 + gap + noise)):
                rows.append(
                    common
                    | dict(aggregation=rule, skew=1.0, loss_p=loss, loss_uniform=loss)
                    | dict(horizon_p=loss, peak_p=1.0, diverged_at=None, model=model)
                )
    return pd.DataFrame(rows)


def test_the_convex_contrast_needs_a_non_convex_mnist_model():
    # a clear reversal (MNIST's relative gap far larger) is "not held" by the criterion; with
    # our convex MNIST model the paper's condition (a non-convex MNIST task) is not reproduced,
    # so neither "not held" nor "held" is read from it
    table = _contrast_table("logistic_regression")
    rules = ("weighted_updates",)
    (condition,) = ar.contrast_conditions(table)
    assert not condition.met  # logistic regression: the condition is not met here
    default = ar.fig1_contrast_table(table, rules).loc["weighted_updates"]
    assert default["criterion verdict"] == "not held"
    assert default["verdict"] == "inconclusive at this budget"
    met = ar.fig1_contrast_table(_contrast_table(NON_CONVEX), rules).loc["weighted_updates"]
    assert met["verdict"] == met["criterion verdict"] == "not held"
    # the other way round: held by the criterion, still undecided without the condition
    flipped = table.assign(task=table.task.map({"mnist": "linear_regression",
                                                "linear_regression": "mnist"}),
                           protocol=table.protocol.map({"last_iterate": "algorithm1",
                                                        "algorithm1": "last_iterate"}))  # fmt: skip
    row = ar.fig1_contrast_table(flipped, rules).loc["weighted_updates"]
    assert (row["criterion verdict"], row["verdict"]) == ("held", "inconclusive at this budget")


def test_lemma1_estimate_against_exact_enumeration():
    # p of eq. 2 for 2 of 4 drawn from exp(-i/2): exact by enumeration; the estimator every run
    # uses must agree within 4 standard errors, and a wrong p (the prior itself, or a p
    # estimated from a sampler that draws with replacement) must be "not held"
    prior, m, draws = participation.exponential_prior(4, 2.0), 2, 20_000
    estimate = agnostic.induced_weights(participation.PriorSampler(prior, m, seed=3), draws)
    worst, verdict = ar.exact_p_check(estimate, prior, m, draws)
    assert verdict == "held" and worst <= ar.EXACT_Z
    assert ar.exact_p_check(prior, prior, m, draws)[1] == "not held"
    rng = np.random.default_rng(0)
    hits = np.bincount(rng.choice(4, size=(draws, m), p=prior).ravel(), minlength=4)
    assert ar.exact_p_check(hits / (m * draws), prior, m, draws)[1] == "not held"
    # exactly the exact p: 0 standard errors
    assert ar.exact_p_check(agnostic.exact_prior_weights(prior, m)[1], prior, m, draws) == (
        0.0,
        "held",
    )
    assert ar.lemma1_check(2_000)[1] == "held"


def test_trend_table_rows_and_printed_verdicts():
    rng = np.random.default_rng(1)
    rows = []
    for task in ax.TASKS:
        for seed in range(4):
            for skew in (0.1, 0.5, 1.0, 1.5):
                for rule, slope in (("weighted_updates", 1.0), ("weighted_normalised", -1.0)):
                    gap = slope * skew + 0.01 * rng.standard_normal()
                    rows.append(dict(task=task, rule=rule, seed=seed, skew=skew, gap_p=gap))
    points = pd.DataFrame(rows).assign(diverged=False, model=NON_CONVEX)
    rules = ("weighted_updates", "weighted_normalised")
    trends = ar.trend_table(points, rules)
    assert list(trends.index) == [(t, r) for t in ax.TASKS for r in rules]
    assert (trends.xs("weighted_updates", level="rule")["verdict"] == "held").all()
    assert (trends.xs("weighted_normalised", level="rule")["verdict"] == "not held").all()
    # with our convex MNIST model the MNIST trends are undecided, whichever way they point
    ours = ar.trend_table(points.assign(model="logistic_regression"), rules)
    assert (ours["criterion verdict"] == trends["verdict"]).all()
    assert (ours.xs("mnist")["verdict"] == "inconclusive at this budget").all()
    lin = "linear_regression"
    assert (ours.xs(lin)["verdict"] == trends.xs(lin)["verdict"]).all()
    assert (trends["weighted_worse"].xs("weighted_updates", level="rule") == 1.0).all()
    # one seed: no trend, no row
    assert ar.trend_table(points[points.seed == 0], rules).empty
    # a point from a diverged run: the clear trend is no longer held (and "not held" neither)
    bad = points.assign(diverged=(points["skew"] == 1.5) & (points.seed == 0))
    trends = ar.trend_table(bad, rules)
    assert (trends["verdict"] == "inconclusive").all() and (trends["diverged"] == 1).all()


# ---------------------------------------------------------------------------------------------
# the rows


def _check_rows(rows):
    keys = [c.key for c in rows]
    assert len(keys) == len(set(keys))
    assert all(k.startswith("agnostic.") and k == k.lower() for k in keys)
    assert all(c.verdict in VERDICTS and c.paper == "agnostic" for c in rows)
    expected = {
        *(
            f"agnostic.fig1.lower.{t}.{p}.{r}"
            for t, p in [
                ("mnist", "last_iterate"),
                ("linear_regression", "algorithm1"),
                ("linear_regression", "last_iterate"),
            ]
            for r in ac.FIG1_RULES
        ),
        *(f"agnostic.fig1.convex.{r}" for r in ax.FIG2_RULES),
        *(f"agnostic.fig2.trend.{t}.{r}" for t in ax.TASKS for r in ax.FIG2_RULES),
        "agnostic.sec4.skew",
        "agnostic.lemma1.exact",
        "agnostic.sec2.problem3",
        "agnostic.fig1.step.weighted_updates",
        "agnostic.thm4.rate",
    }
    assert expected <= set(keys)
    # the paper compares with eq. 10 only: a row on another weighted rule is ours, on every
    # task, tagged once; the theorem's rate is arithmetic; the rest of the paper's rows are its
    # experiments'
    by_key = {c.key: c for c in rows}
    for key, c in by_key.items():
        rule = key.rsplit(".", 1)[-1]
        if key.startswith(("agnostic.fig1.lower.", "agnostic.fig1.convex.", "agnostic.fig2.")):
            assert c.kind == ("experiment" if rule in ac.PAPER_RULES else "ours"), key
        if c.kind == "ours":
            assert c.claim.startswith(OURS_TAG) and c.claim.count(OURS_TAG) == 1, key
            assert c.ref.endswith("(ours)") and c.ref.count("(ours)") == 1, key
            assert c.paper_value is None, key
        else:
            assert OURS_TAG not in c.claim, key
    assert by_key["agnostic.thm4.rate"].kind == "arithmetic"
    assert by_key["agnostic.thm4.rate"].paper_value == -0.5
    assert [k for k, c in by_key.items() if c.kind == "ours" and ".aoi." not in k] == [
        "agnostic.fig1.step.weighted_updates",
        *(
            f"agnostic.fig1.lower.{t}.{p}.{r}"
            for t, p in ax.FIG1_PANELS
            for r in ("weighted_rescaled", "weighted_normalised")
        ),
        *(f"agnostic.fig1.convex.{r}" for r in ("weighted_rescaled", "weighted_normalised")),
        *(
            f"agnostic.fig2.trend.{t}.{r}"
            for t in ax.TASKS
            for r in ("weighted_rescaled", "weighted_normalised")
        ),
    ]
    # a claim about the paper's MNIST runs carries its MNIST model as a condition (the AoI
    # policies' rows are ours, about participation processes, not about the paper's model)
    paper_mnist = ("fig1.lower.mnist.", "fig1.convex.", "fig2.trend.mnist.")
    for key, c in by_key.items():
        names = [cond.name for cond in c.conditions]
        on_mnist = key.startswith(tuple(f"agnostic.{k}" for k in paper_mnist))
        assert any(n.startswith("MNIST model") for n in names) == on_mnist, key
    # Sec. 4's "suboptimal relative to the objective of problem (3)" is the value reached: the
    # rows agnostic.fig1.lower.* (an UNTESTED entry), no horizon-mean rows
    assert not [k for k in keys if k.startswith("agnostic.sec4.convergence")]
    return {c.key: c for c in rows}


def test_an_empty_cache_leaves_every_training_row_inconclusive(tmp_path):
    rows = _check_rows(ac.claims("smoke", results_dir=str(tmp_path)))
    # the ledger estimates the missing p in memory: the cache is left as it was
    assert not list(tmp_path.iterdir())
    training = [
        c
        for k, c in rows.items()
        if k.split(".")[1] in ("fig1", "fig2") or ".rules." in k or k.startswith("agnostic.sec2")
    ]
    assert len(training) == 3 * 4 + 3 + 6 + 1 + 2 + 1
    for c in [*training, rows["agnostic.thm4.rate"]]:
        assert c.verdict == "inconclusive", c.key
        assert re.search(r"\d+ of \d+ (tuning )?runs not cached", c.spread), (c.key, c.spread)
        # undecided for want of runs, and on MNIST also out of the paper's regime: both said
        assert ("the claim's conditions are not met" in c.spread) == bool(c.unmet), c.key
    assert rows["agnostic.fig1.lower.mnist.last_iterate.weighted_normalised"].unmet
    # 2,000 draws cannot resolve a skew of 0.01
    assert rows["agnostic.aoi.skew.near_uniform"].verdict == "inconclusive at this budget"
    # every untested statement names its place and cites rows that exist
    assert len(ac.UNTESTED) >= 8
    (sec4,) = [u for u in ac.UNTESTED if "clearly suboptimal" in u.statement]
    assert "agnostic.fig1.lower.*" in sec4.reason and "Sec. 4" in sec4.ref
    for u in ac.UNTESTED:
        assert u.paper == "agnostic" and re.search(r"Abstract|Sec\. |Lemma|Theorem", u.ref), u
        for cited in re.findall(r"agnostic\.[a-z0-9_.*]+[a-z0-9*]", u.reason):
            prefix = cited.rstrip("*").rstrip(".")
            assert any(k == prefix or k.startswith(prefix + ".") for k in rows), (cited, u)


def _notebook_text(name):
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
    return "\n".join(
        "".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
        for cell in nb["cells"]
        for o in cell.get("outputs", [])
    )


@pytest.mark.slow
def test_the_committed_cache_gives_every_row():
    rows = _check_rows(ac.claims("cpu", results_dir=str(ROOT / "results")))
    assert not [k for k, c in rows.items() if "not cached" in c.spread]
    # what notebooks 09-10 print and the README states
    v = {k: c.verdict for k, c in rows.items()}
    assert v["agnostic.fig1.lower.mnist.last_iterate.weighted_normalised"] == (
        "inconclusive at this budget"
    )
    # eq. 10 as printed diverges in every seed of every panel (under Algorithm 1 its loss is
    # bounded at 35-70x the initial one): no verdict from it
    for t, pr in ax.FIG1_PANELS:
        assert v[f"agnostic.fig1.lower.{t}.{pr}.weighted"] == "inconclusive"
    # claim 2 contrasts the convex task with an MNIST model the analysis does not cover; ours is
    # convex, so eq. 10 on the updates' reversed gap (by the criterion "not held") cannot decide
    convex = rows["agnostic.fig1.convex.weighted_updates"]
    assert convex.verdict == "inconclusive at this budget"
    assert "conditions are not met (MNIST model (logistic_regression)" in convex.spread
    assert re.search(r"peaks at 1\.\d-3\.\dx", convex.spread)
    # eq. 10 on the updates ends above agnostic FedAvg in every MNIST seed, but on a convex
    # model: the shared rule, not a hand-made cap, leaves it undecided
    updates = rows["agnostic.fig1.lower.mnist.last_iterate.weighted_updates"]
    assert updates.verdict == "inconclusive at this budget" and "[+0.0285" in updates.spread
    # Theorem 4: the gap falls about as 1/T (strongly convex least squares), faster than the
    # bound's T^(-1/2); every condition of the theorem met
    rate = rows["agnostic.thm4.rate"]
    assert rate.verdict == "held" and rate.ours < -0.5 and not rate.unmet
    assert {c.name for c in rate.conditions} == {"loss", "algorithm", "step size"}
    assert v["agnostic.sec2.problem3"] == "held" and v["agnostic.lemma1.exact"] == "held"
    assert v["agnostic.fig2.trend.mnist.weighted_updates"] == "inconclusive"  # 3 runs diverged
    assert v["agnostic.fig1.lower.linear_regression.algorithm1.weighted_normalised"] == "held"
    assert v["agnostic.fig2.trend.linear_regression.weighted_normalised"] == "held"
    assert v["agnostic.fig2.trend.mnist.weighted_normalised"] == "inconclusive at this budget"
    assert rows["agnostic.fig1.step.weighted_updates"].ours == pytest.approx(4.17, abs=0.005)
    assert rows["agnostic.sec4.skew"].ours == pytest.approx(1.289 / 2, abs=0.0005)  # TV = L1 / 2
    # the verdicts are the ones notebooks 09-10 print
    for key, c in rows.items():
        if c.printed_as:
            m = re.search(c.printed_as, _notebook_text(c.notebook), flags=re.M)
            assert m and m.group(1) == c.verdict, key


# ---------------------------------------------------------------------------------------------
# Theorem 4's rate


def _rate_table(exponent, seeds=5, horizons=(20, 40, 80, 160, 320, 640, 1280), noise=0.05):
    """results.rate_table-shaped rows: each seed's gap is a_s T^exponent times a log-normal
    factor of sd ``noise`` (its own generator per seed), c = 0.2."""
    rows = []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        scale = 1.0 + 0.5 * seed
        for t in horizons:
            gap = scale * t**exponent * np.exp(noise * rng.standard_normal())
            rows.append(dict(seed=seed, T=t, c=0.2, loss_p=gap + 1.0, gap=gap, diverged=False))
    return pd.DataFrame(rows)


def test_the_rate_slopes_are_each_seeds_log_log_slope():
    slopes = ar.rate_slopes(_rate_table(-0.5, noise=0.0))
    assert list(slopes.index) == list(range(5)) and np.allclose(slopes, -0.5)


@pytest.mark.parametrize(
    ("exponent", "verdict"),
    [
        (-0.5, "held"),  # exactly the theorem's rate
        (-1.0, "held"),  # faster: an upper bound on the rate allows it
        (-0.45, "held"),  # slower than T^(-1/2), within the stated tolerance
        (-0.2, "not held"),  # measurably slower than T^(-1/2) + tolerance
        (0.0, "not held"),  # a floor: no convergence at all
    ],
)
def test_the_rate_verdict_holds_for_a_fast_enough_fall_and_fails_for_a_slow_one(exponent, verdict):
    slopes = ar.rate_slopes(_rate_table(exponent, noise=0.02))
    got, interval = ar.rate_verdict(slopes)
    assert got == verdict
    assert interval.low <= slopes.mean() <= interval.high and interval.n == 5


def test_the_rate_verdict_undecided_cases():
    bound = ar.THEOREM4_RATE + ar.RATE_TOLERANCE
    # an interval across the bound: more seeds could decide it
    verdict, interval = ar.rate_verdict([bound - 0.2, bound + 0.2, bound - 0.1, bound + 0.15])
    assert verdict == "inconclusive at this budget" and interval.low < bound < interval.high
    # one seed, a slope that is not finite, a diverged run: no interval
    assert ar.rate_verdict([-0.9]) == ("inconclusive", None)
    assert ar.rate_verdict([-0.9, float("nan")]) == ("inconclusive", None)
    assert ar.rate_verdict([-0.9, -1.0], diverged_run=True) == ("inconclusive", None)
    # the tolerance moves the bound: -0.45 is "not held" against -1/2 exactly
    assert ar.rate_verdict([-0.45, -0.46, -0.44])[0] == "held"
    assert ar.rate_verdict([-0.45, -0.46, -0.44], tolerance=0.0)[0] == "not held"
    with pytest.raises(ValueError, match="tolerance"):
        ar.rate_verdict([-0.5, -0.6], tolerance=-0.1)


def test_the_step_constant_is_the_tuning_runs_lowest_mean_loss_without_divergence():
    rows = [
        dict(seed=s, T=160, c=c, loss_p=loss + 0.01 * s, gap=float("nan"), diverged=False)
        for c, loss in ((0.1, 3.0), (0.2, 2.0), (0.4, 2.5))
        for s in range(3)
    ]
    table = pd.DataFrame(rows)
    assert ar.tuned_step_constant(table) == 0.2
    summary = ar.tuning_summary(table)
    assert summary["chosen"].tolist() == [False, True, False]
    assert summary.loc[0.2, "mean loss on (3)"] == pytest.approx(2.01)
    # a constant with a diverged run is out, however low its loss
    table.loc[(table.c == 0.2) & (table.seed == 1), "diverged"] = True
    assert ar.tuned_step_constant(table) == 0.4
    assert np.isnan(ar.tuned_step_constant(table.assign(diverged=True)))


def test_theorem4s_conditions_are_read_from_the_runs():
    configs = ax.rate_grid("cpu", 0.2)
    assert all(c.met for c in ar.rate_conditions(configs))
    rate = ar.theorem4_rate(configs, _rate_table(-1.0))
    assert (rate.criterion, rate.verdict) == ("held", "held")
    assert ar.theorem4_rate(configs, _rate_table(-0.1)).verdict == "not held"
    # one constant step for every horizon (not Theta(1/sqrt(TH))): the criterion still says
    # held, but the theorem's step-size condition is not met, so nothing is decided
    constant = [
        {**c, "training": {**c["training"], "lr": {"name": "constant", "lr": 0.005}}}
        for c in configs
    ]
    unmet = [c for c in ar.rate_conditions(constant) if not c.met]
    assert [c.name for c in unmet] == ["step size"]
    rate = ar.theorem4_rate(constant, _rate_table(-1.0))
    assert (rate.criterion, rate.verdict) == ("held", "inconclusive at this budget")
    claim = Claim(
        "agnostic.thm4.rate", "agnostic", "Theorem 4", "c", -0.5, -1.0, "", rate.criterion,
        "nb", kind="arithmetic", conditions=rate.conditions,
    )  # fmt: skip
    assert claim.verdict == rate.verdict and "step size: ours eta sqrt(TH) takes" in claim.spread
    # a non-convex model or the last iterate from a random start: not the analysed algorithm
    cnn = [{**c, "model": {**c["model"], "name": NON_CONVEX}} for c in configs]
    assert [c.name for c in ar.rate_conditions(cnn) if not c.met] == ["loss"]
    last = ax.rate_config(0, "cpu", 20, 0.2)
    last["training"]["algorithm"] = {"name": "agnostic"}
    assert [c.name for c in ar.rate_conditions([last]) if not c.met] == ["algorithm"]
    # a diverged run cannot make the rate held
    diverged = _rate_table(-1.0)
    diverged.loc[0, "diverged"] = True
    assert ar.theorem4_rate(configs, diverged).criterion == "inconclusive"
    with pytest.raises(ValueError, match="configs must hold at least one run"):
        ar.rate_conditions([])
