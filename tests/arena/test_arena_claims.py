"""The arena's ledger rows (:mod:`aoi_fl.evidence.arena.claims`): its ``claims.toml`` written out
for every comparison the tiers can make, and on hand-built frames each tier one Holm-adjusted
family, a screen row decided only where the confirm tier repeats it."""

import pandas as pd
import pytest

from aoi_fl.evidence.arena import claims as arc
from aoi_fl.evidence.arena import experiments as ex
from aoi_fl.evidence.arena import measures
from aoi_fl.evidence.arena import results as ar
from aoi_fl.pipeline import claimfiles

from .test_results import row

SHIFTS = (-3.0, -2.0, -4.0, -3.0, -2.5, -3.5, -3.0, -2.0, -4.0, -3.0)  # a clear lead, noisy


def tier(availability: str, lead: dict[str, float], seeds: int = 10, base: int = 0) -> pd.DataFrame:
    """uniform, markov_optimal and markov_available under one model; each policy in ``lead``
    takes that many rounds more than uniform (noise from SHIFTS), the others tie with it."""
    rows = []
    for s in range(seeds):
        rows.append(row("uniform", base + s, 50 + s % 3, availability=availability))
        for policy in ("markov_optimal", "markov_available"):
            rounds = 50 + s % 3 + lead.get(policy, 0.0) * abs(SHIFTS[s % 10]) / 3
            rows.append(row(policy, base + s, rounds, availability=availability))
    return pd.DataFrame(rows)


def screen_row(screen: pd.DataFrame, confirm: pd.DataFrame, policy="markov_optimal"):
    """A screen row of ``policy`` under bernoulli availability, judged as claims.toml's are."""
    reference = "uniform" if policy == "markov_optimal" else "markov_optimal"
    args = {"tier": "screen", "repeat": "confirm", "availability": "bernoulli"}
    args |= {"policy": policy, "reference": reference}
    measure = claimfiles.Call("repeated_comparison", args, measures.repeated_comparison)
    rule = claimfiles.Call("replicated", {}, arc.replicated)
    row = claimfiles.Row("arena.screen.x", "screen", "ours", "claim", arc.NOTEBOOK, measure, rule)
    runs = measures.Runs(
        {
            "screen": measures.Tier(screen, arc.family(screen)),
            "confirm": measures.Tier(confirm, arc.family(confirm, arc.CONFIRM_FAMILY)),
        }
    )
    return claimfiles.build(row, "arena", runs)


def test_a_screen_finding_repeated_by_the_confirm_tier_holds():
    faster = {"markov_optimal": -3.0}
    c = screen_row(tier("bernoulli", faster), tier("bernoulli", faster, 5, 1000))
    assert c.verdict == "held" and c.kind == "ours"
    assert "family of 3" in c.spread and "confirm tier:" in c.spread


def test_a_screen_finding_the_other_way_repeated_is_not_held():
    slower = {"markov_optimal": 3.0}
    c = screen_row(tier("bernoulli", slower), tier("bernoulli", slower, 5, 1000))
    assert c.verdict == "not held"


def test_a_screen_finding_is_not_confirmed_without_the_confirm_tier_or_its_repeat():
    faster = {"markov_optimal": -3.0}
    unrun = screen_row(tier("bernoulli", faster), tier("always", faster, 5, 1000))
    assert unrun.verdict == "inconclusive at this budget"
    assert "screen, not confirmed: the confirm tier does not run this comparison" in unrun.spread
    tied = screen_row(tier("bernoulli", faster), tier("bernoulli", {}, 5, 1000))
    assert tied.verdict == "inconclusive at this budget"
    assert "do not repeat it" in tied.spread


def test_the_correction_can_undo_a_comparison_decided_on_its_own():
    # one comparison decided at 95% on its own (p about 0.01) among 130: Holm's p is about 1
    table = pd.DataFrame({"p_value": [0.01] + [0.5] * 129, "mean": [-1.0] * 130})
    table = ar.holm_family(table)
    assert table["p_holm"].iloc[0] == pytest.approx(1.0)
    assert table["holm_level"].iloc[0] == pytest.approx(
        1 - 0.05 / 130
    )  # a family of 130 made up here
    member = table.iloc[0].copy()
    member["censored"] = 0
    assert measures.side(member) == 0
    member["p_holm"] = 0.01
    assert measures.side(member) == -1


def test_the_confirm_family_is_its_hypotheses():
    confirm = pd.concat([tier("always", {}, 5, 1000), tier("bernoulli", {}, 5, 1000)])
    every = arc.family(confirm)
    planned = arc.family(confirm, arc.CONFIRM_FAMILY)
    # per model: markov_available against both references, the references against each other
    # once (not both ways)
    assert len(every) == 2 * 3
    pairs = set(zip(planned.policy, planned.reference, strict=True))
    assert pairs == {
        ("markov_optimal", "uniform"),
        ("markov_available", "uniform"),
        ("markov_available", "markov_optimal"),
    }
    assert len(planned) == 6


def test_a_confirm_row_reads_its_holm_adjusted_comparison():
    confirm = tier("bernoulli", {"markov_optimal": 3.0}, 5, 1000)
    c = arc._confirm_row(
        "arena.confirm.bernoulli.markov_optimal", "claim",
        (confirm, arc.family(confirm, arc.CONFIRM_FAMILY)), "bernoulli", "markov_optimal",
        "uniform",
    )  # fmt: skip
    assert c.verdict == "not held" and "Holm-adjusted p" in c.spread
    tied = tier("bernoulli", {}, 5, 1000)
    c = arc._confirm_row(
        "k", "claim", (tied, arc.family(tied, arc.CONFIRM_FAMILY)), "bernoulli",
        "markov_optimal", "uniform",
    )  # fmt: skip
    assert c.verdict == "inconclusive at this budget" and "MDE" in c.spread


def test_every_row_of_the_file_names_a_known_measure_and_rule():
    rows = arc.rows()
    assert len(rows) == len({r.key for r in rows}) == 74
    for written in rows:
        assert written.measure.function is measures.MEASURES[written.measure.name]
        assert written.rule.function is arc.RULES[written.rule.name]
        assert (written.kind, written.paper_value) == ("ours", None)
        assert written.notebook == arc.NOTEBOOK


def test_each_row_says_what_its_measure_reads():
    for written in arc.rows():
        args = written.measure.args
        tier, availability, policy = args["tier"], args["availability"], args["policy"]
        assert written.key == f"arena.{tier}.{availability}.{policy}"
        assert {policy, args["reference"]} <= set(ex.POLICIES)
        assert f"under {availability} availability" in written.statement
        assert f"reaches {ex.TASKS[tier]['target']:.0%}" in written.statement
        assert written.rule.args == {"claimed": "negative"}  # "in fewer rounds"


def test_the_file_has_a_row_for_every_comparison_the_tiers_can_make():
    compared = {}
    for written in arc.rows():
        args = written.measure.args
        compared.setdefault(args["tier"], set()).add(
            (args["availability"], args["policy"], args["reference"])
        )
    partial = [a for a in ex.AVAILABILITY if a != "always"]
    assert compared["screen"] == {(a, "markov_optimal", "uniform") for a in ex.AVAILABILITY} | {
        (a, "markov_available", "markov_optimal") for a in partial
    }
    assert compared["confirm"] == {
        (a, p, "uniform") for a in ex.AVAILABILITY for p in ex.POLICIES if p != "uniform"
    }


def test_the_confirm_rows_enter_in_the_order_of_the_tier_and_only_those():
    plan = (("bernoulli", "oort", "uniform"), ("always", "random", "uniform"))
    keys = [written.key for written in arc._chosen(arc.rows(), plan)]
    assert keys[-2:] == ["arena.confirm.bernoulli.oort", "arena.confirm.always.random"]
    assert all(key.startswith("arena.screen.") for key in keys[:-2])
    with pytest.raises(ValueError, match=r"no confirm row for the comparisons \[\('always', 'x'"):
        arc._chosen(arc.rows(), (("always", "x", "uniform"),))
