"""The agnostic paper's rows as data (``aoi_fl/evidence/agnostic/claims.toml``): every row loads,
states what its rule tests and the library's conditions, and every untested statement is read."""

import re

import pytest

from aoi_fl.evidence.agnostic import claims as ac
from aoi_fl.evidence.agnostic import experiments as ax
from aoi_fl.evidence.agnostic import results as ar
from aoi_fl.pipeline.profiles import PROFILES


def test_every_row_loads_with_a_measure_and_a_rule():
    rows = ac.rows()
    assert len(rows) == 30 and len({r.key for r in rows}) == 30
    assert all(r.key.startswith("agnostic.") for r in rows)
    assert len(ac.UNTESTED) == 10 and all(u.paper == "agnostic" for u in ac.UNTESTED)


@pytest.mark.parametrize("profile", PROFILES)
def test_every_statement_is_filled_by_the_profiles_facts(profile):
    facts = ac.facts(profile)
    for row in ac.rows():
        assert "{" not in row.statement.format_map(facts), row.key
    lemma1 = ac.row("agnostic.lemma1.exact").statement.format_map(facts)
    assert f"({facts['draws']:,} draws)" in lemma1


def test_a_rows_bound_is_the_one_its_statement_states():
    for row in ac.rows():
        bound = row.rule.args.get("bound")
        if bound is not None:
            assert re.search(rf"\b{re.escape(f'{bound:g}')}\b", row.statement), row.key


def test_the_scope_is_the_librarys_and_the_rate_the_theorems():
    rate = ac.row("agnostic.thm4.rate")
    assert rate.paper_value == ar.THEOREM4_RATE
    stated = {s.name: s.paper for s in rate.scope}
    assert stated == {c.name: c.paper for c in ar.rate_conditions(ax.rate_grid("cpu", 0.2))}
    for row in ac.rows():
        for scope in row.scope:
            if scope.name == "MNIST model":
                assert scope.paper == ar.PAPER_MNIST_MODEL, row.key
    on_mnist = {r.key for r in ac.rows() if any(s.name == "MNIST model" for s in r.scope)}
    assert on_mnist == {
        *(f"agnostic.fig1.lower.mnist.last_iterate.{r}" for r in ac.FIG1_RULES),
        *(f"agnostic.fig1.convex.{r}" for r in ax.FIG2_RULES),
        *(f"agnostic.fig2.trend.mnist.{r}" for r in ax.FIG2_RULES),
    }
