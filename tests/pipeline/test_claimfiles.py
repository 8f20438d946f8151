"""A package's ledger rows as data (:mod:`aoi_fl.pipeline.claimfiles`): a row is checked when
read, and a malformed one is refused naming the file, the row, the field and what is allowed."""

import re

import pytest

from aoi_fl.pipeline import claimfiles, rules
from aoi_fl.pipeline.claims import Condition

SOURCE = "pkg/claims.toml"
ROW = """
[[claim]]
key = "arena.x"
ref = "screen"
kind = "ours"
statement = "x reaches the target in fewer rounds"
notebook = "20_selection_arena"
measure = { name = "read", tier = "screen" }
rule = { name = "direction", claimed = "negative" }
"""


def read(runs, *, tier):
    """A measure: the decision ``runs`` holds for ``tier``."""
    return runs[tier]


def parse(text):
    return claimfiles.parse(text, SOURCE, measures={"read": read}, rules=rules.RULES)


def test_a_row_is_its_rule_on_its_measure():
    (row,) = parse(ROW)
    assert (row.key, row.measure.name, row.rule.args) == (
        "arena.x",
        "read",
        {"claimed": "negative"},
    )
    runs = {"screen": rules.Decision(-2.0, -1, "screen: -2 rounds")}
    claim = claimfiles.build(row, "arena", runs)
    assert (claim.ours, claim.spread, claim.verdict) == (-2.0, "screen: -2 rounds", "held")
    assert claim.claim.startswith("(ours, not the paper's) x reaches")  # the ledger's tag


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('statement = "x reaches the target in fewer rounds"\n', "", "'statement' is missing"),
        ('key = "arena.x"\n', "", r"#1: field 'key' is missing"),
        (
            'name = "direction"',
            'name = "no"',
            "'rule': unknown rule 'no'; allowed: above, .*direction",
        ),
        ('name = "read"', 'name = "no"', "'measure': unknown measure 'no'; allowed: read"),
        (', tier = "screen"', "", r"measure 'read' takes \(tier\): missing a required argument"),
        ('claimed = "negative"', 'claim = "negative"', r"rule 'direction' takes \(claimed\)"),
        ('rule = { name = "direction", claimed = "negative" }', 'rule = "x"', "must be a table"),
        (
            'kind = "ours"',
            'kind = "mine"',
            "'kind' is 'mine'; allowed: experiment, arithmetic, ours",
        ),
        ('ref = "screen"', 'ref = ""', "field 'ref' must be a non-empty text"),
        ('ref = "screen"', 'paper_value = "39"\nref = "screen"', "'paper_value' must be a number"),
        ('ref = "screen"', 'refs = "screen"', "unknown field 'refs'; allowed: key, ref, kind"),
    ],
)
def test_a_malformed_row_is_refused_naming_file_row_field_and_what_is_allowed(old, new, message):
    assert old in ROW
    with pytest.raises(ValueError, match=rf"^pkg/claims\.toml: row .*{message}"):
        parse(ROW.replace(old, new))


def test_a_malformed_file_is_refused_naming_it():
    with pytest.raises(
        ValueError, match=r"^pkg/claims\.toml: keys given to more than one row: \['arena\.x'\]"
    ):
        parse(ROW + ROW)
    with pytest.raises(
        ValueError,
        match=r"^pkg/claims\.toml: unknown tables \['claims'\]; allowed: \[\[claim\]\], \[\[untes",
    ):
        parse(ROW.replace("[[claim]]", "[[claims]]"))
    with pytest.raises(ValueError, match=r"^pkg/claims\.toml: not valid TOML"):
        parse(ROW.replace("ref = ", "ref "))


# ---------------------------------------------------------------------------------------------
# the optional fields: paper value, scope, printed, facts; [[untested]]

FULL = """
[[claim]]
key = "paper.x"
ref = "Fig. 1"
kind = "experiment"
statement = "x reaches 97% in {rounds} rounds"
notebook = "05_mnist_accuracy"
paper_value = 39
measure = { name = "values" }
rule = { name = "prediction", level = 0.95 }
scope = [{ name = "model", paper = "CNN" }]
printed = '^x: .* -> {verdict}$'

[[untested]]
ref = "Sec. 3"
statement = "a bound in constants we do not measure"
reason = "no measurable quantity"
"""


class Values(list):
    """A measure's per-seed values with the conditions its runs have."""

    conditions = ()


def values(runs):
    return runs


def full(text=FULL):
    return claimfiles.parse(
        text, SOURCE, measures={"values": values}, rules=rules.RULES, facts=("rounds",)
    )


def test_the_optional_fields_reach_the_rule_the_claim_and_its_conditions():
    (row,) = full()
    assert row.rule.args == {"level": 0.95, "paper_value": 39}  # the row's, for the rule
    assert row.scope == (claimfiles.Scope("model", "CNN"),)
    assert row.printed.startswith("^x: .* -> (")
    runs = Values([38.0, 40.0, 41.0])
    runs.conditions = (Condition("model (small_cnn)", "ignored: the row states it", "2NN"),)
    claim = claimfiles.build(row, "aoi", runs, facts={"rounds": 39})
    assert claim.claim == "x reaches 97% in 39 rounds" and claim.paper_value == 39
    assert claim.conditions == (Condition("model (small_cnn)", "CNN", "2NN"),)
    assert claim.verdict == "inconclusive at this budget"  # held, capped by the unmet scope
    assert "model (small_cnn): ours 2NN, the paper's CNN" in claim.spread
    assert re.search(claim.printed_as, "x: anything -> not held").group(1) == "not held"
    # a condition the runs are measured for and the row does not state would hide it
    runs.conditions = (Condition("dataset", "MNIST", "MNIST"),)
    with pytest.raises(
        ValueError, match=r"'dataset', which its scope does not state; stated: model"
    ):
        claimfiles.build(row, "aoi", runs, facts={"rounds": 39})


def test_the_untested_statements_are_read_with_the_paper():
    (u,) = claimfiles.parse_untested(FULL, SOURCE, "aoi")
    assert (u.paper, u.ref, u.reason) == ("aoi", "Sec. 3", "no measurable quantity")
    assert claimfiles.parse_untested(ROW, SOURCE, "aoi") == ()


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("paper_value = 39\n", "", "rule 'prediction' takes the row's 'paper_value'"),
        ("level = 0.95", "paper_value = 39", "rule 'prediction' takes the row's 'paper_value'"),
        (
            '"CNN" }]',
            '"CNN", ours = "2NN" }]',
            "field 'scope': unknown field 'ours'; allowed: name",
        ),
        ('paper = "CNN"', 'paper = ""', "field 'scope': field 'paper' must be a non-empty text"),
        ('scope = [{ name = "model", paper = "CNN" }]', 'scope = "CNN"', "'scope' must be a list"),
        (
            '[{ name = "model", paper = "CNN" }]',
            '[{ name = "model", paper = "CNN" }, { name = "model", paper = "MLP" }]',
            "field 'scope' states a condition twice",
        ),
        ("-> {verdict}$", "-> held$", r"'printed' must be a regular expression with \{verdict\}"),
        ("^x: ", "^x: (", "field 'printed' is no regular expression"),
        ("{rounds}", "{round}", "names the unknown fact 'round'; allowed: rounds"),
        ("{rounds}", "{rounds", "field 'statement': .*a literal brace is"),
    ],
)
def test_a_malformed_optional_field_is_refused_naming_file_row_field(old, new, message):
    assert old in FULL
    with pytest.raises(ValueError, match=rf"^pkg/claims\.toml: row 'paper\.x': .*{message}"):
        full(FULL.replace(old, new))


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('reason = "no measurable quantity"\n', "", "field 'reason' is missing"),
        (
            'ref = "Sec. 3"',
            'ref = "Sec. 3"\nrow = 1',
            "unknown field 'row'; allowed: ref, statement",
        ),
        (
            'reason = "no measurable quantity"',
            'reason = " "',
            "field 'reason' must be a non-empty text",
        ),
    ],
)
def test_a_malformed_untested_statement_is_refused_naming_file_entry_field(old, new, message):
    with pytest.raises(ValueError, match=rf"^pkg/claims\.toml: untested #1: {message}"):
        claimfiles.parse_untested(FULL.replace(old, new), SOURCE, "aoi")
