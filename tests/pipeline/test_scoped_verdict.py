"""The one rule for claims made under conditions the runs do not meet (every paper's rows)."""

from aoi_fl.pipeline.claims import scoped_verdict


def test_a_claim_that_names_a_condition_decides_only_under_it():
    unmet = ["100 clients, not FEMNIST's 462 to 2,231", "logistic regression, not the CNN"]
    verdict, why = scoped_verdict("not held", unmet)
    assert verdict == "inconclusive at this budget"
    assert "conditions are not met" in why and "100 clients" in why and "not the CNN" in why
    assert scoped_verdict("held", unmet)[0] == "inconclusive at this budget"
    assert scoped_verdict("inconclusive at this power", unmet)[0] == ("inconclusive at this budget")
    # runs that meet every condition decide, "not held" included; missing runs stay undecided
    assert scoped_verdict("not held", []) == ("not held", "")
    assert scoped_verdict("held", []) == ("held", "")
    assert scoped_verdict("inconclusive", unmet) == ("inconclusive", "")
    assert scoped_verdict("not computable here", unmet) == ("not computable here", "")
    assert scoped_verdict(None, unmet) == (None, "")


# ---------------------------------------------------------------------------------------------
# the rule applied by every row: a Claim's stated conditions cap its verdict


def _claim(verdict="held", **kw):
    from aoi_fl.pipeline.claims import Claim

    fields = dict(ref="Fig. 1", claim="A ends below B", paper_value=None, ours=0.5)
    fields.update(kw.pop("fields", {}))
    return Claim(
        "k", "agnostic", fields["ref"], fields["claim"], fields["paper_value"], fields["ours"],
        "interval [+0.1, +0.9]", verdict, "n", **{"kind": "experiment", **kw},
    )  # fmt: skip


def test_a_row_whose_runs_miss_a_stated_condition_is_capped_by_the_claim_itself():
    from aoi_fl.pipeline.claims import Condition

    model = Condition("model", "the paper's non-convex CNN", "logistic regression (convex)")
    for decided in ("held", "not held", "inconclusive at this power"):
        row = _claim(decided, conditions=(model,))
        assert row.verdict == "inconclusive at this budget"
        assert row.spread.startswith("interval [+0.1, +0.9]; the claim's conditions are not met")
        assert "model: ours logistic regression (convex), the paper's" in row.spread
        assert row.unmet == [model.text()]
    # a condition the runs meet changes nothing: the row can hold and can fail
    met = Condition("model", "the paper's CNN", "the paper's CNN")
    assert _claim("held", conditions=(met,)).verdict == "held"
    assert _claim("not held", conditions=(met, met)).verdict == "not held"
    assert _claim("inconclusive", conditions=(model,)).verdict == "inconclusive"


def test_a_row_of_ours_is_tagged_and_carries_no_paper_value():
    import pytest

    from aoi_fl.pipeline.claims import OURS_TAG

    row = _claim(kind="ours")
    assert row.claim == f"{OURS_TAG} A ends below B" and row.ref == "Fig. 1 (ours)"
    tagged = _claim(kind="ours", fields={"claim": f"{OURS_TAG} x", "ref": "nb 10 (ours)"})
    assert (tagged.claim, tagged.ref) == (f"{OURS_TAG} x", "nb 10 (ours)")  # not tagged twice
    with pytest.raises(ValueError, match="a row of ours has no paper value, got 101"):
        _claim(kind="ours", fields={"paper_value": 101})
    with pytest.raises(ValueError, match="a row of kind 'experiment' carries"):
        _claim(fields={"claim": f"{OURS_TAG} x"})
    with pytest.raises(ValueError, match="kind.*'mine'"):
        _claim(kind="mine")


def test_row_kind_reads_the_tag_then_the_arithmetic_prefixes():
    from aoi_fl.pipeline.claims import OURS_TAG, row_kind

    assert row_kind("a.thm1", f"{OURS_TAG} x", ("a.thm",)) == "ours"
    assert row_kind("a.thm1", "x", ("a.thm",)) == "arithmetic"
    assert row_kind("a.fig5", "x (ours: iid)", ("a.thm",)) == "experiment"


def test_the_tally_counts_each_group_apart():
    from aoi_fl.pipeline.claims import KINDS, ledger, tally

    rows = [
        _claim("held"),
        _claim("held", kind="ours"),
        _claim("not held", kind="arithmetic"),
        _claim("held", kind="arithmetic"),
    ]
    rows = [r.__class__(**{**r.__dict__, "key": f"k{i}"}) for i, r in enumerate(rows)]
    counts = tally(ledger([lambda: rows]))
    assert list(counts.index) == [*KINDS.values(), "all"]
    assert counts.loc[KINDS["experiment"], "held"] == 1
    assert counts.loc[KINDS["ours"], "held"] == 1
    assert counts.loc[KINDS["arithmetic"], ["held", "not held"]].tolist() == [1, 1]
    assert counts.loc["all", "all"] == 4
    assert tally(ledger([lambda: rows]), "paper").loc["agnostic", "all"] == 4
