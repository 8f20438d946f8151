"""The AoI paper's rows as data (``aoi_fl/evidence/aoi/claims.toml``): every row loads with a known
measure and rule, its numbers are the library's, and the rows that enter depend only on the
runs."""

import numpy as np
import pytest

from aoi_fl.aoi import markov
from aoi_fl.evidence.aoi import claims as ac
from aoi_fl.evidence.aoi import experiments, measures
from aoi_fl.pipeline import rules


def test_every_row_loads_with_a_measure_and_a_rule():
    rows = ac.rows()
    assert len(rows) == 75 and len({r.key for r in rows}) == 75
    assert all(r.key.startswith("aoi.") for r in rows)
    assert all(r.measure.function is measures.MEASURES[r.measure.name] for r in rows)
    assert all(r.rule.function is ac.RULES[r.rule.name] for r in rows)
    assert len(ac.UNTESTED) == 18 and all(u.paper == "aoi" for u in ac.UNTESTED)


def test_the_paper_values_are_the_librarys():
    for policy, value in ac.PAPER_SIGMA.items():
        assert ac.row(f"aoi.fig2.{policy}").paper_value == value
    figures = {"mnist": "fig5", "cifar10": "fig6", "cifar100": "fig7"}
    for (dataset, split), reported in experiments.PAPER_ROUNDS_TO_TARGET.items():
        figure = figures[dataset]
        for policy, rounds in reported.items():
            assert ac.row(f"aoi.{figure}.rounds.{split}.{policy}").paper_value == rounds
        speedup = reported["markov_optimal"] - reported["random"]
        assert ac.row(f"aoi.{figure}.speedup.{split}").paper_value == speedup
    for policy, per_dataset in experiments.PAPER_SKEW.items():
        for dataset, rho in per_dataset.items():
            for row in ac.rows():
                if row.key.startswith(f"aoi.table2.{dataset}.{policy}"):
                    assert row.paper_value == rho, row.key
    frac = ac.N / ac.M - np.floor(ac.N / ac.M)
    assert ac.row("aoi.thm1").paper_value == frac * (1 - frac)
    interval = ac.row("aoi.sec3c.random_interval")
    assert interval.paper_value == markov.random_interval_variance(ac.N, ac.M)


def test_the_tolerances_are_the_modules():
    for policy in ("markov_optimal", "markov_nonoptimal"):
        assert ac.row(f"aoi.fig2.{policy}").rule.args["rtol"] == ac.SIGMA_RTOL
    assert ac.row("aoi.sec3c.random_interval").rule.args["rtol"] == ac.INTERVAL_RTOL
    for key in ("aoi.thm3", "aoi.thm4", "aoi.thm5"):
        assert ac.row(key).rule.args["rtol"] == ac.TRACE_RTOL


def test_the_scope_is_the_librarys():
    for row in ac.rows():
        stated = {s.name: s.paper for s in row.scope}
        if row.measure.name in ("speedup", "faster"):
            panel = row.measure.args["panel"]
            assert stated["model"] == experiments.PAPER_MODELS[measures.PANELS[panel][1]]
        if "dataset" in stated:
            assert stated["dataset"] == measures.SUBSTITUTE.paper, row.key
    assert {r.key for r in ac.rows() if r.scope} == {
        r.key for r in ac.rows() if r.measure.name in ("speedup", "faster")
    }


def test_table2_enters_per_split_only_on_a_complete_panel(tmp_path):
    keys = [c.key for c in ac.claims("smoke", results_dir=str(tmp_path))]
    table2 = [k for k in keys if k.startswith("aoi.table2.") and "markov_larger" not in k]
    # an empty cache: one row per dataset and policy, none per split
    assert len(table2) == 12 and not any(k.endswith(("iid", "noniid")) for k in table2)
    written = [r.key for r in ac.rows() if r.measure.name == "rho"]
    assert len(written) == 12 + 4 * 2  # and MNIST's per split, for a complete panel


def test_a_speedup_row_without_a_verdict_names_no_printed_line(tmp_path):
    rows = {c.key: c for c in ac.claims("smoke", results_dir=str(tmp_path))}
    assert all(rows[k].printed_as is None for k in rows if ".speedup." in k)


def test_the_papers_rules():
    reading = measures.Seeds(None, "; 2 runs not cached", values=(40.0, 42.0, 41.0))
    ours, spread, _ = ac.per_seed(reading, 45)
    assert ours == pytest.approx(41.0) and spread.endswith("; 2 runs not cached")
    absent = rules.Reading(None, "5 runs not cached", verdict="inconclusive")
    assert ac.per_seed(absent, 45) == (None, "5 runs not cached", "inconclusive")
    assert ac.rho_prediction(absent, 0.98) == (None, "5 runs not cached", "inconclusive")
    assert ac.near_one(rules.Reading(1.01, ""), 0.02)[2] == "held"
    assert ac.near_one(rules.Reading(0.97, ""), 0.02)[2] == "not held"
    assert ac.share(rules.Reading(0.5, ""))[2] == "inconclusive"
    inside = rules.Reading(0.1, "", interval=(0.09, 0.12))
    assert ac.within_draws(inside, 0.116)[2] == "held"
    assert ac.within_draws(inside, 0.13)[2] == "not held"
