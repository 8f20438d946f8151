"""A package's ledger rows as data (:mod:`aoi_fl.pipeline.claimfiles`): a row is checked when
read, and a malformed one is refused naming the file, the row, the field and what is allowed."""

import pytest

from aoi_fl.pipeline import claimfiles, rules

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
        ('name = "direction"', 'name = "no"', "'rule': unknown rule 'no'; allowed: direction"),
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
    with pytest.raises(ValueError, match=r"^pkg/claims\.toml: unknown tables \['claims'\]"):
        parse(ROW.replace("[[claim]]", "[[claims]]"))
    with pytest.raises(ValueError, match=r"^pkg/claims\.toml: not valid TOML"):
        parse(ROW.replace("ref = ", "ref "))
