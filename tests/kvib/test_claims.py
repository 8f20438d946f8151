"""The K-Vib rows of the claims ledger (aoi_fl.kvib.claims)."""

import re
from pathlib import Path

import numpy as np
import pytest

from aoi_fl.kvib import claims as kc
from aoi_fl.kvib import results as kr
from aoi_fl.pipeline.claims import VERDICTS

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
}
#: rows read from the cached runs (the rest are closed forms or FEMNIST)
TRAINING = ("kvib.fig2.", "kvib.fig3b.", "kvib.fig3c.", "kvib.fig6.", "kvib.fig4.substitute.")


def test_printed_verdict_uses_the_printed_digit():
    assert kc.printed_verdict(6.4, 6.4079, 1) == "held"
    assert kc.printed_verdict(6.4, 6.45, 1) == "held"
    assert kc.printed_verdict(6.4, 6.46, 1) == "not held"
    assert kc.printed_verdict(0.6, 0.3552, 1) == "not held"


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
    assert "mabs at K = 5 (1 of 2 runs)" in text
    assert kc._diverged_text(runs_, [("mabs", 10, None)]) == ""
    start = np.array([2.5, 1.0, 3.0])
    assert not kr.diverged({"test_loss": start})
    assert kr.diverged({"test_loss": np.array([2.5, 20.0, 1.0])})
    assert kr.diverged({"test_loss": np.array([2.5, np.nan])})


def test_figure1_rows_use_the_profiles_settings(monkeypatch):
    asked = []
    settings = kc.kx.example_3_1_settings

    def spy(profile):
        asked.append(profile)
        return settings(profile)

    monkeypatch.setattr(kc.kx, "example_3_1_settings", spy)
    kc.verdict_lines("11_isp_vs_rsp", "smoke")
    assert asked == ["smoke"]
    k1 = next(c for c in kc.figure1_claims("smoke") if c.key == "kvib.sec3.k1_is_rsp")
    assert k1.verdict == "held" and f"{kc.K1_TOLERANCE:g}" in k1.spread


def test_example_3_2_rows_are_exact():
    rows = {c.key: c for c in kc.example_3_2_claims()}
    assert rows["kvib.ex3_2.sq_norm.g3"].ours == pytest.approx(36.0)
    assert rows["kvib.ex3_2.sq_norm.g3"].verdict == "not held"
    assert rows["kvib.ex3_2.p_isp.g2"].verdict == "held"
    assert rows["kvib.ex3_2.k3_rsp.error"].ours == pytest.approx(0.3552, abs=1e-4)
    assert rows["kvib.ex3_2.isp_closer"].ours == pytest.approx(25.2597 / 6, abs=1e-3)


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


@pytest.mark.slow
def test_committed_cache_rows():
    rows = kc.claims("cpu", results_dir=str(REPO / "results"))
    _check_rows(rows)
    by = {c.key: c for c in rows}
    assert not any("not cached" in c.spread for c in rows)
    assert by["kvib.fig1a.k30.isp_better"].verdict == "held"
    # one seed per K or gamma scale: no interval
    for key in ("fig3b.falls", "fig3b.rate", "fig6.vrb", "fig3c.regret", "fig3c.variance"):
        assert by[f"kvib.{key}"].verdict == "inconclusive at this budget", key
    # decided by diverging FedAvg runs: more seeds would not help
    for key in ("fig6.uniform_unbiased", "fig6.mabs", "fig4.isp_early"):
        assert by[f"kvib.{key}"].verdict == "inconclusive", key
        assert "FedAvg diverged" in by[f"kvib.{key}"].spread, key
    assert "confounded by the aggregation rule" in by["kvib.fig2.loss.uniform_normalised"].claim
    assert by["kvib.fig4.speedup.v1"].verdict == "not computable here"
    assert np.isfinite(by["kvib.fig2.regret"].ours)
    lines = kc.verdict_lines("12_kvib_synthetic", results_dir=str(REPO / "results"))
    for c in rows:
        if c.printed_as and c.notebook == "12_kvib_synthetic":
            match = re.search(c.printed_as, "\n".join(lines), flags=re.M)
            assert match and match.group(1) == c.verdict, c.key
