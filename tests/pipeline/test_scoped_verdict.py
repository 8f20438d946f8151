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
