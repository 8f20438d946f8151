"""The arena's ledger rows on hand-built frames (:mod:`aoi_fl.arena.claims`): each tier is one
Holm-adjusted family, and a screen row is decided only where the confirm tier repeats it."""

import pandas as pd
import pytest

from aoi_fl.arena import claims as arc
from aoi_fl.arena import results as ar

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
    reference = "uniform" if policy == "markov_optimal" else "markov_optimal"
    return arc._screen_row(
        "arena.screen.x", "claim", "screen", (screen, arc.family(screen)),
        (confirm, arc.family(confirm, arc.CONFIRM_FAMILY)), "bernoulli", policy, reference,
    )  # fmt: skip


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
    assert arc.side(member) == 0
    member["p_holm"] = 0.01
    assert arc.side(member) == -1


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
