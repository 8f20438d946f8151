"""The agnostic-FedAvg rows of the claims ledger: the verdict helpers of
:mod:`aoi_fl.agnostic.results` (shared with notebooks 09-10) on small exact cases, the rows on an
empty cache (all training rows inconclusive) and on the committed cache."""

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from aoi_fl.agnostic import claims as ac
from aoi_fl.agnostic import experiments as ax
from aoi_fl.agnostic import results as ar
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


def test_a_diverged_weighted_run_counts_for_agnostic():
    nan = float("nan")
    assert ar.outperform_verdict([nan, nan], [True, True]) == (None, "held")
    # two converged seeds with agnostic higher and one diverged seed: not readable
    assert ar.outperform_verdict([-1.0, -1.1, nan], [False, False, True])[1] == (
        "inconclusive at this budget"
    )
    assert ar.outperform_verdict([1.0, 1.1, nan], [False, False, True])[1] == "held"
    assert ar.outperform_verdict([1.0])[1] == "inconclusive"
    assert ar.outperform_verdict([1.0, nan], [False, True])[1] == "inconclusive"


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


def _run_table(gaps_by_rule, agnostic=1.0, diverged=()):
    """A results.run_table-shaped table: one task, one tau, seeds 0.., rules with given gaps."""
    rows = []
    n = len(next(iter(gaps_by_rule.values())))
    base = dict(task="mnist", protocol="last_iterate", process="exp_prior", tau=10.0, skew=1.3)
    for seed in range(n):
        rows.append(
            {**base, "seed": seed, "aggregation": "agnostic", "loss_p": agnostic}
            | {"loss_uniform": agnostic, "diverged_at": None}
        )
        for rule, gaps in gaps_by_rule.items():
            bad = (rule, seed) in diverged
            loss = float("nan") if bad else agnostic + gaps[seed]
            rows.append(
                {**base, "seed": seed, "aggregation": rule, "loss_p": loss}
                | {"loss_uniform": loss, "diverged_at": 20 if bad else None}
            )
    return pd.DataFrame(rows)


def test_fig1_claims_table_pairs_seeds_and_counts_divergence():
    table = _run_table(
        {"weighted": [0, 0, 0], "weighted_normalised": [0.1, 0.2, -0.05]},
        diverged={("weighted", s) for s in range(3)},
    )
    out = ar.fig1_claims_table(table, ("weighted", "weighted_normalised"))
    w = out.loc[("mnist", "last_iterate", "weighted")]
    assert (w["diverged"], w["agnostic lower"], w["verdict"]) == (3, "3/3", "held")
    r = out.loc[("mnist", "last_iterate", "weighted_normalised")]
    assert r["agnostic lower"] == "2/3"
    assert r["gap mean"] == pytest.approx(0.25 / 3)
    assert r["verdict"] == "inconclusive at this budget"
    printed = out.to_string(sparsify=False)
    for rule in ("weighted", "weighted_normalised"):
        m = re.search(ac._claim1_printed("mnist", "last_iterate", rule), printed, flags=re.M)
        assert m and m.group(1) == out.loc[("mnist", "last_iterate", rule), "verdict"]


def test_trend_table_rows_and_printed_verdicts():
    rng = np.random.default_rng(1)
    rows = []
    for task in ax.TASKS:
        for seed in range(4):
            for skew in (0.1, 0.5, 1.0, 1.5):
                for rule, slope in (("weighted_updates", 1.0), ("weighted_normalised", -1.0)):
                    gap = slope * skew + 0.01 * rng.standard_normal()
                    rows.append(dict(task=task, rule=rule, seed=seed, skew=skew, gap_p=gap))
    points = pd.DataFrame(rows)
    rules = ("weighted_updates", "weighted_normalised")
    trends = ar.trend_table(points, rules)
    assert list(trends.index) == [(t, r) for t in ax.TASKS for r in rules]
    assert (trends.xs("weighted_updates", level="rule")["verdict"] == "held").all()
    assert (trends.xs("weighted_normalised", level="rule")["verdict"] == "not held").all()
    assert (trends["weighted_worse"].xs("weighted_updates", level="rule") == 1.0).all()
    # one seed: no trend, no row
    assert ar.trend_table(points[points.seed == 0], rules).empty


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
        "agnostic.fig1.step.weighted_updates",
    }
    assert expected <= set(keys)
    return {c.key: c for c in rows}


def test_an_empty_cache_leaves_every_training_row_inconclusive(tmp_path):
    rows = _check_rows(ac.claims("smoke", results_dir=str(tmp_path)))
    # the ledger estimates the missing p in memory: the cache is left as it was
    assert not list(tmp_path.iterdir())
    training = [c for k, c in rows.items() if k.split(".")[1] in ("fig1", "fig2") or ".rules." in k]
    assert len(training) == 3 * 4 + 3 + 6 + 1 + 2
    for c in training:
        assert c.verdict == "inconclusive", c.key
        assert re.search(r"\d+ of \d+ runs not cached", c.spread), (c.key, c.spread)
    # 2,000 draws cannot resolve a skew of 0.01
    assert rows["agnostic.aoi.skew.near_uniform"].verdict == "inconclusive at this budget"


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
