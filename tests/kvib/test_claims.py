"""The K-Vib rows of the claims ledger (aoi_fl.kvib.claims)."""

import re
from pathlib import Path

import numpy as np
import pytest

from aoi_fl.kvib import claims as kc
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
    assert kc.combined_verdict(["held", "held"]) == "held"
    assert kc.combined_verdict(["held", "inconclusive at this budget"]) == (
        "inconclusive at this budget"
    )
    assert kc.combined_verdict(["inconclusive", "not held"]) == "not held"
    assert kc.k_trend_verdict([4, 3, 1], "falls") == "held"
    assert kc.k_trend_verdict([4, 3, 1], "rises") == "not held"
    assert kc.k_trend_verdict([4, 5, 1], "rises") == "inconclusive at this budget"
    assert kc.k_trend_verdict([4], "rises") == "inconclusive"


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
    assert by["kvib.fig3b.falls"].verdict == "held"
    assert by["kvib.fig6.vrb"].verdict == "not held"
    assert by["kvib.fig4.speedup.v1"].verdict == "not computable here"
    assert np.isfinite(by["kvib.fig2.regret"].ours)
    lines = kc.verdict_lines("12_kvib_synthetic", results_dir=str(REPO / "results"))
    for c in rows:
        if c.printed_as and c.notebook == "12_kvib_synthetic":
            match = re.search(c.printed_as, "\n".join(lines), flags=re.M)
            assert match and match.group(1) == c.verdict, c.key
