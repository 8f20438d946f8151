"""The agnostic-FedAvg rows of the claims ledger: the verdict helpers of
:mod:`aoi_fl.agnostic.results` (shared with notebooks 09-10) on small exact cases (Lemma 1 against
exact enumeration, divergence, the speed measure), the rows on an empty cache (all training rows
inconclusive) and on the committed cache."""

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from aoi_fl.agnostic import algorithms as agnostic
from aoi_fl.agnostic import claims as ac
from aoi_fl.agnostic import experiments as ax
from aoi_fl.agnostic import results as ar
from aoi_fl.agnostic import samplers as participation
from aoi_fl.pipeline.claims import VERDICTS

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


def _run_table(gaps_by_rule, agnostic=1.0, diverged=(), horizon_gaps=None):
    """A results.run_table-shaped table: one task, one tau, seeds 0.., rules with given gaps of
    the converged loss and (``horizon_gaps``, default the same) of the mean loss over the run."""
    rows = []
    n = len(next(iter(gaps_by_rule.values())))
    horizon_gaps = gaps_by_rule if horizon_gaps is None else horizon_gaps
    base = dict(task="mnist", protocol="last_iterate", process="exp_prior", tau=10.0, skew=1.3)
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


def test_the_convex_contrast_needs_a_non_convex_mnist_model():
    # a clear reversal (MNIST's relative gap far larger) is "not held" by the criterion; with
    # our convex MNIST model the paper's condition (a non-convex MNIST task) is not reproduced,
    # so neither "not held" nor "held" is read from it
    rng = np.random.default_rng(0)
    rows = []
    for seed in range(4):
        for task, protocol, gap in (
            ("mnist", "last_iterate", 1.0),
            ("linear_regression", "algorithm1", 0.01),
        ):
            common = dict(task=task, protocol=protocol, process="exp_prior", tau=10.0, seed=seed)
            noise = 0.001 * rng.standard_normal()
            for rule, loss in (("agnostic", 1.0), ("weighted_updates", 1.0 + gap + noise)):
                rows.append(
                    common
                    | dict(aggregation=rule, skew=1.0, loss_p=loss, loss_uniform=loss)
                    | dict(horizon_p=loss, peak_p=1.0, diverged_at=None)
                )
    table = pd.DataFrame(rows)
    rules = ("weighted_updates",)
    assert ar.mnist_model_convex()  # logistic regression: the condition is not met here
    default = ar.fig1_contrast_table(table, rules).loc["weighted_updates"]
    assert default["criterion verdict"] == "not held"
    assert default["verdict"] == "inconclusive at this budget"
    met = ar.fig1_contrast_table(table, rules, condition_met=True).loc["weighted_updates"]
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
    points = pd.DataFrame(rows).assign(diverged=False)
    rules = ("weighted_updates", "weighted_normalised")
    trends = ar.trend_table(points, rules)
    assert list(trends.index) == [(t, r) for t in ax.TASKS for r in rules]
    assert (trends.xs("weighted_updates", level="rule")["verdict"] == "held").all()
    assert (trends.xs("weighted_normalised", level="rule")["verdict"] == "not held").all()
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
    }
    assert expected <= set(keys)
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
    for c in training:
        assert c.verdict == "inconclusive", c.key
        assert re.search(r"\d+ of \d+ runs not cached", c.spread), (c.key, c.spread)
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
    assert "by the criterion not held" in convex.spread and "is convex" in convex.spread
    assert re.search(r"peaks at 1\.\d-3\.\dx", convex.spread)
    assert v["agnostic.sec2.problem3"] == "held" and v["agnostic.lemma1.exact"] == "held"
    assert v["agnostic.fig2.trend.mnist.weighted_updates"] == "inconclusive"  # 3 runs diverged
    assert v["agnostic.fig1.lower.linear_regression.algorithm1.weighted_normalised"] == "held"
    assert v["agnostic.fig2.trend.linear_regression.weighted_normalised"] == "held"
    assert v["agnostic.fig2.trend.mnist.weighted_normalised"] == "inconclusive at this budget"
    assert rows["agnostic.fig1.step.weighted_updates"].ours == pytest.approx(4.17, abs=0.005)
    assert rows["agnostic.sec4.skew"].ours == pytest.approx(1.289 / 2, abs=0.0005)  # TV = L1 / 2
    # Fig. 2's verdicts are the ones notebook 10 prints
    text = _notebook_text("10_participation_skew")
    for key, c in rows.items():
        if key.startswith("agnostic.fig2."):
            m = re.search(c.printed_as, text, flags=re.M)
            assert m and m.group(1) == c.verdict, key
