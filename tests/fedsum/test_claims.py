"""The FedSUM rows of the claims ledger: the verdict rule of App. F's bounds, rows without
cached runs, and the rows of the committed cache."""

import re
from pathlib import Path

import pytest

from aoi_fl.fedsum import claims as fc
from aoi_fl.fedsum import delays
from aoi_fl.pipeline.claims import VERDICTS

ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------
# the verdict on a bound


def test_a_bound_on_the_expectation_uses_the_one_sided_limit_of_the_mean():
    # 4 and 6: mean 5, sd sqrt(2), t_{0.95, 1} = 6.3138 -> limits 5 -/+ 6.3138
    assert fc.bound_verdict(11.4, [4, 6]) == "held"
    assert fc.bound_verdict(11.2, [4, 6]) == "inconclusive"
    assert fc.bound_verdict(-1.4, [4, 6]) == "not held"
    assert fc.bound_verdict(100, [4]) == "inconclusive"  # one seed: no interval
    assert fc.bound_verdict(4, [4, 4, 4]) == "held"  # no spread: the mean itself


def test_a_sure_bound_must_hold_in_every_seed():
    assert fc.bound_verdict(8, [8, 8, 7], sure=True) == "held"
    assert fc.bound_verdict(8, [8, 9, 7], sure=True) == "not held"


def test_the_long_rows_find_the_verdict_in_a_printed_claim_line():
    row = next(c for c in fc.long_claims("smoke", "/nonexistent") if c.key.endswith("viii.long"))
    found = re.search(row.printed_as, "x\n(viii) not held (2/3 parts held)\n", flags=re.M)
    assert found and found.group(1) == "not held"
    assert not re.search(row.printed_as, "(iii) held (1/1 parts held)", flags=re.M)


# ---------------------------------------------------------------------------------------------
# without cached runs


def test_without_cached_runs_every_training_row_is_inconclusive_and_says_why(tmp_path):
    rows = fc.cnn_claims("smoke", str(tmp_path)) + fc.long_claims("smoke", str(tmp_path))
    assert len(rows) == 12
    for c in rows:
        assert c.verdict == "inconclusive", c
        assert re.fullmatch(r"(\d+) of \1 runs not cached", c.spread), c.spread
        assert c.ours is None


def test_the_smoke_rows_are_quick_and_well_formed(tmp_path):
    rows = fc.claims("smoke", results_dir=str(tmp_path), data_root=str(tmp_path))
    keys = [c.key for c in rows]
    assert len(set(keys)) == len(keys) and all(k.startswith("fedsum.") for k in keys)
    assert all(k == k.lower() for k in keys)
    assert {c.verdict for c in rows} <= set(VERDICTS)
    unrun = {c.key: c.verdict for c in rows if c.key.endswith(("resnet18", "sst2"))}
    assert unrun == {
        "fedsum.claim_vi.resnet18": "not computable here",
        "fedsum.claim_vii.sst2": "not computable here",
    }


# ---------------------------------------------------------------------------------------------
# the committed cache (profile cpu)


@pytest.fixture(scope="module")
def committed():
    rows = fc.claims("cpu", results_dir=str(ROOT / "results"), data_root=str(ROOT / "data"))
    return {c.key: c for c in rows}


@pytest.mark.slow
def test_every_claim_and_every_app_f_bound_has_a_row(committed):
    assert all(k.startswith("fedsum.") for k in committed)
    assert {c.verdict for c in committed.values()} <= set(VERDICTS)
    for claim in ("i", "ii", "iii", "iv", "v", "vi", "vii", "viii"):
        assert any(k.startswith(f"fedsum.claim_{claim}.") for k in committed), claim
    n, s, t = 100, 20, 2000
    assert committed["fedsum.lemf1.p1"].paper_value == delays.uniform_bound(n, s, t)
    assert committed["fedsum.lemf2.p2"].paper_value == delays.bernoulli_bound(0.2, n, t)
    for q in ("0_05", "0_1", "0_5", "1"):
        assert committed[f"fedsum.lemf2.p{q}"].paper_value == delays.bernoulli_bound(
            float(q.replace("_", ".")), n, t
        )
    assert committed["fedsum.lemf3.reshuffled"].paper_value == 10
    assert committed["fedsum.lemf4.cyclic"].paper_value == 10
    assert committed["fedsum.lemf4.cyclic"].ours == 4  # N/S - 1, every seed
    # the bounds are loose: every one holds on the committed traces
    assert all(c.verdict == "held" for k, c in committed.items() if ".lemf" in k)


@pytest.mark.slow
def test_the_committed_verdicts_are_the_notebooks(committed):
    # notebook 17 (logistic regression, T = 2000), as its Checks cell states them: each part
    # by the paired 95% t interval over 2 seeds (1 df)
    stated = {
        "i": "inconclusive at this budget",
        "ii": "not held",
        "iii": "held",
        "iv": "inconclusive at this budget",
        "v": "inconclusive at this budget",
        "viii": "inconclusive at this budget",
    }
    for claim, verdict in stated.items():
        row = committed[f"fedsum.claim_{claim}.long"]
        assert row.verdict == verdict and row.printed_as and row.notebook.startswith("17_")
        # the paper's CNN at 20-40 of its 2000 rounds decides nothing
        assert committed[f"fedsum.claim_{claim}.cnn"].verdict == "inconclusive at this budget"
    assert committed["fedsum.claim_i.long"].ours == 0.0  # no part held
    assert "by the criterion not held, 0/12" in committed["fedsum.claim_i.cnn"].spread
    small = committed["fedsum.claim_v.small_batch"]
    assert (small.verdict, small.spread) == ("inconclusive at this budget", "not run")
