"""K-Vib's rows as data (``aoi_fl/evidence/kvib/claims.toml``): every row loads with a known measure
and rule, its statement is filled by every profile's facts, its paper value is the library's, and
every untested statement is read."""

import re

import pytest

from aoi_fl.evidence.kvib import claims as kc
from aoi_fl.evidence.kvib import example_measures as em
from aoi_fl.evidence.kvib import experiments as kx
from aoi_fl.evidence.kvib import measures, verdicts
from aoi_fl.pipeline.profiles import PROFILES


def test_every_row_loads_with_a_known_measure_and_rule():
    rows = kc.rows()
    assert len(rows) == 52 and len({r.key for r in rows}) == 52
    assert all(r.key.startswith("kvib.") for r in rows)
    for row in rows:
        assert measures.MEASURES[row.measure.name] is row.measure.function, row.key
        assert verdicts.RULES[row.rule.name] is row.rule.function, row.key
    assert len(kc.UNTESTED) == 34 and all(u.paper == "kvib" for u in kc.UNTESTED)


def test_every_row_belongs_to_one_figure():
    for row in kc.rows():
        owners = [f for f, prefixes in kc.FIGURES.items() if row.key.startswith(prefixes)]
        assert len(owners) == 1, (row.key, owners)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("cached", [True, False])
def test_every_statement_is_filled_by_the_profiles_facts(profile, cached, tmp_path):
    runs = measures.Runs(profile, str(tmp_path))
    runs.k_grid = measures.Grid([], str(tmp_path))
    runs.k_grid.missing = 0 if cached else 3
    facts = kc.facts(profile, runs)
    for row in kc.rows():
        assert "{" not in row.statement.format_map(facts), row.key
    rate = kc.row("kvib.fig3b.rate").statement.format_map(facts)
    grid = ", ".join(map(str, kx.synthetic_settings(profile)["k_grid"]))
    # a K grid's row states its reading of the runs only where the runs are there
    assert rate.endswith(f"on log K, K = {grid} (grid ours)" if cached else "on log K")


def test_the_paper_values_are_the_librarys():
    for name, printed in (
        ("sq_norm", em.PAPER_EX32_SQ_NORMS),
        ("q_rsp", em.PAPER_EX32_Q_RSP),
        ("p_isp", em.PAPER_EX32_P_ISP),
    ):
        assert [kc.row(f"kvib.ex3_2.{name}.g{i}").paper_value for i in (1, 2, 3)] == list(printed)
    assert kc.row("kvib.ex3_2.k3_rsp.error").paper_value == em.PAPER_EX32_K3_ERROR
    assert kc.row("kvib.ex3_2.k3_isp").paper_value == em.PAPER_EX32_K3_ISP_ERROR
    assert kc.row("kvib.ex3_2.size3").paper_value == em.PAPER_EX32_SIZE_PROB
    assert [kc.row(f"kvib.ex3_2.k3_rsp.d_{a}").paper_value for a in "xy"] == list(
        em.PAPER_EX32_K3_D
    )
    assert kc.row("kvib.fig3b.rate").paper_value == measures.PAPER_K_RATE
    for version, factor in kx.PAPER_FEMNIST_SPEEDUP.items():
        row = kc.row(f"kvib.fig4.speedup.{version}")
        assert row.paper_value == factor and f"{factor:g}x" in row.statement
        assert f"{kx.PAPER_FEMNIST_TARGET:.0%}" in row.statement


def test_a_rows_threshold_is_the_one_its_statement_states():
    for key in ("kvib.fig1a.k10.comparable", "kvib.fig1a.k30.isp_better"):
        row = kc.row(key)
        args = row.rule.args
        assert f"RSP / ISP {args['claimed']} {args['threshold']} at every scale" in row.statement
        assert f"at K = {row.measure.args['k']} " in row.statement
    assert (kc.COMPARABLE_RATIO, kc.OUTPERFORMS_RATIO) == (1.5, 2.0)


def test_each_printed_expression_finds_its_notebooks_line(tmp_path):
    for notebook in ("11_isp_vs_rsp", "12_kvib_synthetic", "13_kvib_mnist"):
        lines = kc.verdict_lines(notebook, "smoke", results_dir=str(tmp_path))
        printed = [r for r in kc.rows() if r.notebook == notebook and r.printed]
        assert len(lines) == len(printed)
        for row, line in zip(printed, lines, strict=True):
            assert re.search(row.printed, line, re.MULTILINE), row.key
