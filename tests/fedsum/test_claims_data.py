"""The FedSUM paper's rows as data (``aoi_fl/evidence/fedsum/claims.toml``): every row loads with a
known measure and rule, its statement is filled by every profile's facts, and what it states is what
the library computes (App. F's cases, the vectors sent and kept, the claims' conditions)."""

import re

import pytest

from aoi_fl.evidence.fedsum import claims as fc
from aoi_fl.evidence.fedsum import experiments as fx
from aoi_fl.evidence.fedsum import measures
from aoi_fl.pipeline.profiles import PROFILES
from aoi_fl.pipeline.rules import RULES


def measured_by(name):
    return [r for r in fc.rows() if r.measure.name == name]


def test_every_row_loads_with_a_known_measure_and_rule():
    rows = fc.rows()
    assert len(rows) == 49 and len({r.key for r in rows}) == 49
    assert all(r.key.startswith("fedsum.") for r in rows)
    assert {r.measure.name for r in rows} == set(measures.MEASURES)
    assert all(r.rule.function is RULES["criterion"] for r in rows)
    assert len(fc.UNTESTED) == 21 and all(u.paper == "fedsum" for u in fc.UNTESTED)


@pytest.mark.parametrize("profile", PROFILES)
def test_every_statement_is_filled_by_the_profiles_facts(profile):
    facts = fc.facts(profile)
    for row in fc.rows():
        filled = row.statement.format_map(facts)
        assert not re.search(r"\{[a-z0-9_]+(:[^}]*)?\}", filled), row.key
    tau = fc.row("fedsum.claim_iv.tau").statement.format_map(facts)
    assert f"T = {fx.DELAY_SETTINGS[profile]['rounds']};" in tau


def test_the_bound_rows_are_notebook_14s_cases_as_the_lemmas_state_them():
    cases = fc.bound_cases(fx.DELAY_CLIENTS, fx.DELAY_ACTIVE, 200)
    rows = measured_by("app_f_bound")
    assert [r.key for r in rows] == [f"fedsum.{key}" for key in cases]
    for row in rows:
        case = cases[row.measure.args["case"]]
        assert (row.kind == "ours") == case.ours and row.paper_value is None, row.key
        assert row.ref == f"App. F, {case.lemma}"
        statement = row.statement.format_map(fc.facts("smoke"))
        bounds = "tau_max" if case.sure else "E[tau_max]"
        assert f"{bounds} <= {case.formula}" in statement and case.label in statement
        line = fc.bound_line(
            row.measure.args["case"],
            {
                "verdict": "held",
                "lemma": case.lemma,
                "bounds": bounds,
                "bound": 1.0,
                "tau_max": 1.0,
                "tau_max min": 1,
                "tau_max max": 1,
                "seeds": 2,
            },
        )
        assert re.search(row.printed, line, flags=re.M).group(1) == "held", row.key


def test_the_communication_and_memory_rows_state_the_papers_counts():
    for row in measured_by("sent_in_process"):
        (down, up), ref, text = fc.PAPER_COMMUNICATION[row.measure.args["method"]]
        assert row.ref == ref and row.statement.startswith(f"{text}: ")
        assert row.paper_value == down + up and f"round {(down, up)};" in row.statement
        assert row.kind == "arithmetic"
    flower = measured_by("sent_by_flower")
    assert [r.measure.args["method"] for r in flower] == list(fc.PAPER_COMMUNICATION)
    assert all(r.kind == "ours" and r.paper_value is None for r in flower)
    memory = measured_by("kept")
    assert [r.measure.args["method"] for r in memory] == list(fc.PAPER_MEMORY)
    for row in memory:
        counts = fc.PAPER_MEMORY[row.measure.args["method"]]
        n = measures.MEMORY_CLIENTS
        assert f"{counts}, so {counts[0] * n + counts[1]} vectors" in row.statement, row.key


def test_every_claim_has_a_cnn_and_a_long_row_scoped_as_the_library_states():
    cnn = {r.measure.args["claim"]: r for r in measured_by("cnn_claim")}
    long = {r.measure.args["claim"]: r for r in measured_by("long_claim")}
    assert list(cnn) == list(long) == list(fc.CLAIMS)
    for claim, panel in fc.CLAIMS.items():
        assert cnn[claim].key == long[claim].key.replace(".long", ".cnn")
        paper = fc.horizon(fx.PAPER_ROUNDS).paper
        assert [(s.name, s.paper) for s in cnn[claim].scope] == [("horizon", paper)]
        stated = [(c.name, c.paper) for c in fc.long_conditions(claim, "cpu")]
        assert [(s.name, s.paper) for s in long[claim].scope] == stated
        notebook = "15_fedsum_mnist" if panel == "main" else "16_fedsum_patterns"
        assert cnn[claim].notebook == notebook
        assert f"{{{fc.CRITERION_FACTS[claim]}}}" in cnn[claim].statement
        assert f"{{{fc.CRITERION_FACTS[claim]}}}" in long[claim].statement
