"""The claims ledger: its verdict rules, and agreement with the README and the notebooks."""

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from scipy import stats

from aoi_fl.pipeline import claims

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------------------------
# verdict rules


def test_prediction_interval_of_one_more_run_by_hand():
    # 3 seeds 35, 36, 36: mean 35.667, sd 0.577; t_{0.975, 2} = 4.303; sqrt(1 + 1/3) = 1.155
    half = 4.302652729911275 * math.sqrt(1 / 3) * math.sqrt(4 / 3)
    mean, spread, verdict = claims.run_verdict(45, [35, 36, 36])
    assert mean == pytest.approx(107 / 3)
    assert verdict == "not held"
    assert f"[{107 / 3 - half:.3g}, {107 / 3 + half:.3g}]" in spread
    assert claims.run_verdict(37, [35, 36, 36])[2] == "held"  # 37 < 35.667 + 2.87


@given(
    values=st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=12),
    offset=st.floats(-5, 5),
)
def test_the_verdict_is_the_prediction_interval(values, offset):
    v = np.array(values)
    sd = v.std(ddof=1)
    half = stats.t.ppf(0.975, v.size - 1) * sd * math.sqrt(1 + 1 / v.size)
    assume(half > 1e-6 and abs(abs(offset) - 1) > 1e-6)  # on the boundary rounding decides
    paper = v.mean() + offset * half
    expected = "held" if abs(offset) < 1 else "not held"
    assert claims.run_verdict(paper, values)[2] == expected


def test_fewer_than_two_seeds_is_inconclusive_and_missing_seeds_are_said():
    assert claims.run_verdict(10, [12])[2] == "inconclusive"
    assert claims.run_verdict(10, [None, float("nan")])[1:] == (
        "no run gave a value",
        "inconclusive",
    )
    _, spread, _ = claims.run_verdict(10, [9, 11, None])
    assert "(1 of 3 seeds gave none)" in spread


def test_value_verdict_is_relative():
    assert claims.value_verdict(0.061, 0.0610285, 0.05) == "held"
    assert claims.value_verdict(0.055, 0.0610285, 0.05) == "not held"


@given(
    low=st.floats(-10, 10),
    width=st.floats(0, 10),
    claimed=st.sampled_from(["positive", "negative"]),
)
def test_sign_verdict_reads_the_side_of_zero(low, width, claimed):
    high = low + width
    verdict = claims.sign_verdict(low, high, claimed)
    mirrored = claims.sign_verdict(-high, -low, "negative" if claimed == "positive" else "positive")
    assert verdict == mirrored
    if low <= 0 <= high:
        assert verdict == "inconclusive at this budget"
    else:
        assert verdict == ("held" if (low > 0) == (claimed == "positive") else "not held")


def test_sign_verdict_names_a_bad_direction():
    assert claims.sign_verdict(0.1, 0.2, "positive") == "held"
    assert claims.sign_verdict(-0.2, -0.1, "positive") == "not held"
    with pytest.raises(ValueError, match="claimed.*'up'"):
        claims.sign_verdict(0.1, 0.2, "up")


def test_a_claim_names_a_bad_paper_or_verdict():
    row = dict(
        key="k",
        ref="r",
        claim="c",
        paper_value=1.0,
        ours=2.0,
        spread="",
        notebook="n",
        kind="experiment",
    )
    with pytest.raises(ValueError, match="paper"):
        claims.Claim(paper="other", verdict="held", **row)
    with pytest.raises(ValueError, match="verdict.*'maybe'"):
        claims.Claim(paper="aoi", verdict="maybe", **row)
    c = claims.Claim(paper="aoi", verdict="held", **row)
    assert c.difference == 1.0
    assert claims.Claim(paper="aoi", verdict="held", **{**row, "ours": None}).difference is None


def test_duplicate_keys_are_refused():
    row = claims.Claim("k", "aoi", "r", "c", 1.0, 1.0, "", "held", "n", kind="experiment")
    with pytest.raises(ValueError, match="duplicate claim keys: \\['k'\\]"):
        claims.ledger([lambda: [row, row]])


# ---------------------------------------------------------------------------------------------
# the ledger of the committed cache against the README and the notebooks


@pytest.fixture(scope="module")
def rows():
    """Every claim of the committed cache, built once for the module (a build reads every
    paper's cached runs: the longest part of these tests)."""
    builders = claims.default_builders("cpu", str(ROOT / "results"), str(ROOT / "data"))
    return [c for build in builders for c in build()]


@pytest.fixture(scope="module")
def ledger(rows):
    return claims.ledger([lambda: rows])


def findings() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## What the notebooks found")
    return text[start : text.index("\n## ", start + 1)]


VERDICT = claims.VERDICT_PATTERN
#: the tests of the ledger's build share one worker when tests are spread one by one
LEDGER = pytest.mark.xdist_group("ledger")


def tagged_verdicts(text: str, ledger, where: str) -> list[tuple[str, str]]:
    """Every bold verdict of ``text`` with the ledger keys its tag names (``**held**<!-- key
    ... -->``), checked: each is tagged, and is the ledger's verdict of every key it names.
    Whitespace is folded first, so that a verdict wrapped over two lines is read too."""
    text = re.sub(r"\s+", " ", text)
    tagged = re.findall(rf"\*\*({VERDICT})\*\*<!--(.*?)-->", text)
    bold = re.findall(rf"\*\*({VERDICT})\*\*", text)
    assert len(tagged) == len(bold), f"a bold verdict in {where} has no ledger key"
    for verdict, keys in tagged:
        assert keys.split(), f"a bold {verdict!r} in {where} has a tag naming no key"
        for key in keys.split():
            assert key in ledger.index, f"{where} names {key}, which the ledger does not have"
            assert ledger.loc[key, "verdict"] == verdict, (where, key, verdict, ledger.loc[key])
    return tagged


@pytest.mark.slow
@pytest.mark.cpu_sensitive
@LEDGER
def test_every_bold_verdict_in_the_readme_findings_is_the_ledgers(ledger):
    assert len(tagged_verdicts(findings(), ledger, "the README findings")) >= 10


def notebook_markdown(name: str) -> str:
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
    return "\n\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


@pytest.mark.slow
@pytest.mark.cpu_sensitive
@LEDGER
def test_every_bold_verdict_in_the_notebooks_markdown_is_the_ledgers(ledger):
    # a notebook's Reading states a row's verdict as the README does: in bold, tagged with its key
    names = sorted(path.stem for path in (ROOT / "notebooks").glob("*.ipynb"))
    tags = [tagged_verdicts(notebook_markdown(name), ledger, name) for name in names]
    assert sum(map(len, tags)) >= 30


def notebook_text(name: str) -> str:
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
    parts = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            parts.append("".join(out.get("text", "")))
            parts.append("".join(out.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


@pytest.mark.slow
@pytest.mark.cpu_sensitive
@LEDGER
def test_a_notebook_prints_the_verdict_its_ledger_row_has(rows):
    printed = [c for c in rows if c.printed_as]
    assert len(printed) >= 4
    for c in printed:
        found = re.search(c.printed_as, notebook_text(c.notebook), flags=re.M)
        assert found, f"{c.key}: no line matching {c.printed_as!r} in {c.notebook}"
        assert found.group(1) == c.verdict, (c.key, found.group(0), c.verdict)


@pytest.mark.slow
@LEDGER
def test_every_number_of_the_aoi_papers_sec_v_and_table_ii_has_a_row(ledger):
    from aoi_fl.evidence.aoi import experiments

    for (dataset, split), reported in experiments.PAPER_ROUNDS_TO_TARGET.items():
        fig = {"mnist": "fig5", "cifar10": "fig6", "cifar100": "fig7"}[dataset]
        for policy, value in reported.items():
            assert ledger.loc[f"aoi.{fig}.rounds.{split}.{policy}", "paper value"] == value
    for policy, columns in experiments.PAPER_SKEW.items():
        for dataset, value in columns.items():
            keys = [k for k in ledger.index if k.startswith(f"aoi.table2.{dataset}.{policy}")]
            assert keys and all(ledger.loc[k, "paper value"] == value for k in keys)


@pytest.mark.slow
@pytest.mark.cpu_sensitive
@LEDGER
def test_the_committed_ledger_notebook_prints_the_ledger(ledger):
    # what 00_claims shows is the ledger of the committed cache (re-run make figures NB=00 if not)
    text = notebook_text("00_claims")
    for key, row in ledger.iterrows():
        line = next((ln for ln in text.splitlines() if ln.startswith(key + " ")), None)
        assert line is not None, f"{key} is missing from 00_claims' output"
        assert line.rstrip().endswith(row["notebook"]) and row["verdict"] in line, (key, line)


# ---------------------------------------------------------------------------------------------
# the shared rules of issue 27: speed measures, one divergence rule, untested statements


def test_rounds_to_level_is_the_first_evaluation_at_the_level():
    rounds = [0, 10, 20, 30]
    assert claims.rounds_to_level([2.0, 1.5, 1.0, 0.9], rounds, 1.0) == 20
    assert claims.rounds_to_level([0.1, 0.5, 0.8, 0.7], rounds, 0.7, lower_is_better=False) == 20
    assert claims.rounds_to_level([2.0, 1.5, 1.2, 1.1], rounds, 1.0) == np.inf
    with pytest.raises(ValueError, match="values and rounds must be 1-d of one length"):
        claims.rounds_to_level([1.0], rounds, 1.0)


def test_a_speed_claim_on_equal_endpoints_is_decided_by_the_speed_measure():
    # two methods end at the same loss; A gets there 10 rounds earlier in every seed: the endpoint
    # cannot tell them apart, rounds-to-level and the horizon mean can
    rounds = np.arange(0, 101, 10)
    seeds = range(5)

    def curve(delay, seed):
        return np.maximum(1.0 - (rounds - delay) / 60.0, 0.2) + 0.001 * seed

    a = [curve(0, s) for s in seeds]
    b = [curve(10, s) for s in seeds]
    assert all(x[-1] == y[-1] for x, y in zip(a, b, strict=True))
    level = 0.5
    ttl = [
        claims.rounds_to_level(x, rounds, level) - claims.rounds_to_level(y, rounds, level)
        for x, y in zip(a, b, strict=True)
    ]
    assert ttl == [-10.0] * 5 and claims.interval_verdict(ttl, "negative")[0] == "held"
    auc = [
        claims.horizon_mean(x, rounds) - claims.horizon_mean(y, rounds)
        for x, y in zip(a, b, strict=True)
    ]
    auc = np.asarray(auc) + 0.001 * np.arange(5)  # seed noise, as real runs have
    assert claims.interval_verdict(auc, "negative")[0] == "held"
    # and the claim that B is faster is "not held" on the same data
    assert claims.interval_verdict(-auc, "negative")[0] == "not held"


def test_horizon_mean_is_the_area_over_the_horizon():
    assert claims.horizon_mean([1.0, 1.0, 0.0], [0, 1, 2]) == pytest.approx(0.75)
    assert claims.horizon_mean([4.0, 2.0], [10, 20]) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="rounds must increase"):
        claims.horizon_mean([1.0, 2.0], [5, 5])


def test_divergence_is_one_rule_a_non_finite_or_exploding_loss():
    assert not claims.diverged([2.3, 1.0, 0.5, 4.0])  # a bump below 5x the initial loss
    assert claims.diverged([2.3, 1.0, 12.0])
    assert claims.diverged([2.3, np.nan])
    assert claims.diverged([2.3, np.inf])
    with pytest.raises(ValueError, match="losses must be a non-empty 1-d sequence"):
        claims.diverged([])


def test_an_untested_statement_names_its_paper_place_and_reason():
    row = claims.Untested("aoi", "Sec. I", "AoI balances participation", "a restatement of X")
    table = claims.untested_table([row])
    assert table.to_dict("records") == [
        {
            "paper": "aoi",
            "ref": "Sec. I",
            "statement": "AoI balances participation",
            "reason": "a restatement of X",
        }
    ]
    with pytest.raises(ValueError, match="unknown paper 'fedprox'"):
        claims.Untested("fedprox", "Sec. 1", "x", "y")
    with pytest.raises(ValueError, match="Untested.reason must be a non-empty text"):
        claims.Untested("aoi", "Sec. 1", "x", " ")


# ---------------------------------------------------------------------------------------------
# the ledger's edges: every row in its group, no row decided out of its regime, no repeats


@pytest.mark.slow
@LEDGER
def test_no_row_is_decided_on_runs_that_miss_a_condition_it_states(rows):
    decided = {"held", "held (smaller effect than claimed)", "not held"}
    stated = [c for c in rows if c.conditions]
    assert stated, "no row states the conditions of its claim"
    for c in rows:
        if c.unmet:
            assert c.verdict not in decided, (c.key, c.verdict, c.unmet)
            assert "the claim's conditions are not met" in c.spread, c.key


@pytest.mark.slow
@LEDGER
def test_every_row_of_ours_is_marked_and_no_row_repeats_another(rows):
    for c in rows:
        assert c.kind in claims.KINDS, c.key
        tagged = c.claim.startswith(claims.OURS_TAG)
        assert tagged == (c.kind == "ours"), c.key
        if tagged:
            assert c.ref.endswith("(ours)") and c.paper_value is None, c.key
    # two decided rows with the same numbers and the same spread count one finding twice
    seen = {}
    for c in rows:
        if c.verdict in ("held", "not held") and c.ours is not None:
            fingerprint = (c.paper_value, c.ours, c.spread)
            assert fingerprint not in seen, f"{c.key} repeats {seen[fingerprint]}"
            seen[fingerprint] = c.key


@pytest.mark.slow
@pytest.mark.cpu_sensitive
@LEDGER
def test_the_readme_tallies_the_ledger_in_its_three_groups(ledger):
    assert claims.tally_markdown(ledger) in (ROOT / "README.md").read_text()


def test_the_tally_table_is_markdown_with_a_row_per_group():
    row = dict(ref="r", claim="c", paper_value=None, ours=1.0, spread="", notebook="n")
    rows = [
        claims.Claim("a", "aoi", verdict="held", kind="experiment", **row),
        claims.Claim("b", "aoi", verdict="not held", kind="arithmetic", **row),
    ]
    text = claims.tally_markdown(claims.ledger([lambda: rows]))
    assert text.splitlines() == [
        "| group | held | not held | all |",
        "|---|---|---|---|",
        f"| {claims.KINDS['experiment']} | 1 | 0 | 1 |",
        f"| {claims.KINDS['arithmetic']} | 0 | 1 | 1 |",
        f"| {claims.KINDS['ours']} | 0 | 0 | 0 |",
        "| all | 1 | 1 | 2 |",
    ]


def test_the_log_log_slope_is_the_exponent_of_a_power_law():
    t = np.array([10, 20, 40, 80])
    assert claims.log_log_slope(t, 3.0 * t**-0.5) == pytest.approx(-0.5)
    assert claims.log_log_slope(t, 2.0 / t) == pytest.approx(-1.0)
    # a value that is not positive has no logarithm: no slope
    assert np.isnan(claims.log_log_slope(t, [1.0, 0.5, 0.0, 0.1]))
    assert np.isnan(claims.log_log_slope([10, 10], [1.0, 0.5]))  # one x
    with pytest.raises(ValueError, match="xs and ys must be 1-d of one length"):
        claims.log_log_slope(t, [1.0, 2.0])


def test_capped_is_the_rule_a_row_with_those_conditions_applies():
    unmet = claims.Condition("model", "the paper's CNN", "logistic regression")
    met = claims.Condition("dataset", "MNIST", "MNIST")
    assert claims.capped("held", [met]) == "held"
    assert claims.capped("not held", [met, unmet]) == "inconclusive at this budget"
    assert claims.capped("inconclusive", [unmet]) == "inconclusive"
    assert claims.unmet([met, unmet]) == [unmet.text()]
    row = claims.Claim(
        "k", "aoi", "r", "c", None, 1.0, "", "inconclusive", "n", kind="experiment",
        conditions=(unmet,),
    )  # fmt: skip
    # an undecided row keeps its verdict, and still says which condition its runs miss
    assert row.verdict == "inconclusive" and row.spread == claims.unmet_reason([unmet.text()])
