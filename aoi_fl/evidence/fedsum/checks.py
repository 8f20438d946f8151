"""The checks of the FedSUM notebooks: what each prints, and the numbers its Reading states,
asserted.

Each function raises AssertionError saying what differs, and returns the lines its notebook
prints: in a profile whose runs cannot decide the Reading's numbers (``smoke``: a few rounds;
``paper``: the Readings are the committed ``cpu`` runs'), what it skipped, then what passed. The
verdicts themselves are the claims ledger's (:mod:`aoi_fl.evidence.fedsum.claims`), which the
notebooks print; these checks assert the rules that make them (the budget, the panel's conditions,
the parts) and the numbers they rest on. ``tests/fedsum/test_notebook_checks.py`` runs the ``cpu``
checks on the committed cache.

The delay and MNIST notebooks' checks are here, the pattern notebook's in
:mod:`~aoi_fl.evidence.fedsum.pattern_checks`, the long-horizon notebook's in
:mod:`~aoi_fl.evidence.fedsum.long_checks` and what they share in
:mod:`~aoi_fl.evidence.fedsum.run_checks`; all are importable from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from aoi_fl.evidence.fedsum import claims as fc
from aoi_fl.evidence.fedsum import costs, traces
from aoi_fl.evidence.fedsum import experiments as fx
from aoi_fl.evidence.fedsum import results as fr
from aoi_fl.evidence.fedsum.long_checks import long_panel
from aoi_fl.evidence.fedsum.pattern_checks import pattern_panels
from aoi_fl.evidence.fedsum.run_checks import _skipped, budget_rule, runs_complete
from aoi_fl.pipeline.claims import VERDICTS
from aoi_fl.pipeline.profiles import traits

__all__ = [
    "budget_rule",
    "delay_patterns",
    "long_panel",
    "mnist_panel",
    "pattern_panels",
    "runs_complete",
]


# ---------------------------------------------------------------------------------------------
# The delay notebook


def delay_patterns(table: pd.DataFrame, verdicts: pd.DataFrame, profile: str) -> list[str]:
    """The delay notebook (``table``: :func:`aoi_fl.evidence.fedsum.traces.pattern_table`;
    ``verdicts``: :func:`aoi_fl.evidence.fedsum.claims.bound_table`, on the same traces). In every
    profile: the closed forms (the deterministic cyclic order and the optimal Markov policy have
    tau_max = m - 1 = N/S - 1 in every seed, the reshuffled order at most 2m - 2, full
    participation no delay), every seed below its bound, the bounds above the mean, tau_avg at
    most tau_max, AoI Policy 1 equal to P1, the mean |S_t| (S, or N p within 5 standard
    errors) and tau_max falling with p. In ``cpu`` also the Reading: every App. F bound held,
    P1 ~ P2, P3 above both whatever its period, biased sampling the largest tau_max at
    S/N = 0.2, and P1 against the cyclic order >= 10x in tau_max, 1.5-3x in sqrt(1 + tau_avg)."""
    n, s, t, seeds = traces.sizes(profile)
    name = traces.rows(profile)
    _closed_forms(table, name, n, s, profile)
    _bounds(table, verdicts)
    _participation(table, name, n, s, t * len(seeds))
    lines = []
    if traits(profile).quick:
        lines.append(
            "skipped in smoke: the Reading's verdicts (every App. F bound held) and comparisons "
            "of the patterns (P1 ~ P2, P3 above both, period hardly matters, biased largest, "
            f"P1 / cyclic >= 10x) ({t} rounds and {len(seeds)} seeds: too noisy to rank the "
            "patterns)"
        )
    else:
        _delays_reading(table, verdicts, name, s, profile)
    return lines + [
        "checks passed: closed forms of the cyclic and Markov patterns, bounds, mean |S_t|, "
        f"{len(table)} patterns, {len(verdicts)} verdicts on the same traces"
        + ("" if traits(profile).quick else ", the Reading's verdicts and comparisons")
    ]


def _closed_forms(table: pd.DataFrame, name: dict[str, str], n: int, s: int, profile: str) -> None:
    """The delays with a closed form (m = N/S): the deterministic cyclic order as simulated,
    it and the optimal Markov policy at tau_max = m - 1 in every seed, the reshuffled order at
    most 2m - 2, full participation none."""
    m = n // s
    assert traces.cyclic_matches(table, profile), (
        "the simulated deterministic cyclic order differs from its closed form"
    )
    for row in (name["lemf4.cyclic"], name["markov_optimal"]):
        lo, hi = table.loc[row, ["tau_max min", "tau_max max"]]
        assert lo == hi == m - 1, (
            f"{row}: tau_max from {lo} to {hi} over the seeds, not m - 1 = {m - 1}"
        )
    reshuffled = table.loc[name["lemf3.reshuffled"], "tau_max max"]
    assert reshuffled <= 2 * m - 2, (
        f"reshuffled cyclic: tau_max up to {reshuffled}, above 2m - 2 = {2 * m - 2}"
    )
    full = table.loc[name["lemf2.p1"]]
    assert full["tau_max max"] == full["tau_avg max"] == 0 and full["mean |S_t|"] == n, (
        f"p = 1: tau_max up to {full['tau_max max']}, tau_avg up to {full['tau_avg max']}, "
        f"mean |S_t| {full['mean |S_t|']}"
    )


def _bounds(table: pd.DataFrame, verdicts: pd.DataFrame) -> None:
    """The verdicts on the table's traces, every seed below its bound, the bounds above the
    mean, tau_avg at most tau_max and each mean within its min-max."""
    # the verdicts were computed on the same traces as the table (same patterns, same tau_max)
    columns = ["tau_max", "tau_max min", "tau_max max"]
    same = table.loc[verdicts["pattern"], columns].to_numpy()
    assert (same == verdicts[columns].to_numpy()).all(), (
        "the verdicts' tau_max differ from the table's"
    )
    assert set(verdicts["verdict"]) <= set(VERDICTS), f"verdicts {set(verdicts['verdict'])}"
    within = table["tau_max max"] <= table["bound on E[tau_max]"]
    assert within.all(), f"tau_max above its bound for: {list(table.index[~within])}"
    loose = traces.looseness(table)
    assert loose.min() >= 1, (
        f"a bound on E[tau_max] is below the mean tau_max: {loose.idxmin()} ({loose.min():.2f})"
    )
    assert (
        (table["tau_avg"] <= table["tau_max"]).all()
        and (table["tau_max min"] <= table["tau_max"]).all()
        and (table["tau_max"] <= table["tau_max max"]).all()
    ), "tau_avg > tau_max or a mean outside its min-max"


def _participation(
    table: pd.DataFrame, name: dict[str, str], n: int, s: int, n_traces: int
) -> None:
    """AoI Policy 1 equal to P1, the mean |S_t| (S, or N p within 5 standard errors over
    ``n_traces`` traces) and tau_max falling with p."""
    p = s / n
    # AoI Policy 1 with equal sizes is P1 itself: the same draws, the same numbers
    measured = list(traces.COLUMNS[:7])
    assert table.loc[name["random"], measured].equals(table.loc[name["lemf1.p1"], measured]), (
        "AoI Policy 1 and P1 give different delays"
    )
    # mean |S_t|: S for the fixed-size patterns, N p (within 5 standard errors) for Bernoulli p
    bernoulli = {"lemf2.p2": p, "lemf2.p0_05": 0.05, "lemf2.p0_1": 0.1, "lemf2.p0_5": 0.5}
    fixed = ("lemf1.p1", "lemf4.cyclic", "lemf3.reshuffled", "random")
    expected_size = {
        **{name[k]: (s, 0.0) for k in fixed},
        name["markov_optimal"]: (s, 0.0),
        **{name[k]: (n * q, np.sqrt(n * q * (1 - q))) for k, q in bernoulli.items()},
    }
    for row, (mean_size, sd) in expected_size.items():
        got = table.loc[row, "mean |S_t|"]
        assert abs(got - mean_size) <= 5 * sd / np.sqrt(n_traces) + 1e-9, (
            f"{row}: mean |S_t| = {got:.3f}, expected {mean_size:g}"
        )
    # Case 2: tau_max falls as p grows
    by_p = [name[k] for k in ("lemf2.p0_05", "lemf2.p0_1", "lemf2.p2", "lemf2.p0_5", "lemf2.p1")]
    assert np.all(np.diff(table.loc[by_p, "tau_max"].to_numpy()) < 0), (
        f"tau_max does not fall with p: {table.loc[by_p, 'tau_max'].to_dict()}"
    )


def _delays_reading(
    table: pd.DataFrame, verdicts: pd.DataFrame, name: dict[str, str], s: int, profile: str
) -> None:
    """The numbers of the delay notebook's Reading: every App. F bound held, P1 ~ P2, P3 above both
    whatever its period, biased sampling the largest tau_max at S/N = 0.2, and P1 against the
    cyclic order >= 10x in tau_max, 1.5-3x in sqrt(1 + tau_avg)."""
    held = verdicts["verdict"] == "held"
    assert held.all(), f"App. F bounds not held: {verdicts.loc[~held, 'verdict'].to_dict()}"
    p1, p2 = table.loc[name["lemf1.p1"]], table.loc[name["lemf2.p2"]]
    assert (
        abs(p1["tau_avg"] / p2["tau_avg"] - 1) < 0.05
        and abs(p1["tau_max"] / p2["tau_max"] - 1) < 0.2
    ), (
        f"P1 and P2: tau_max {p1['tau_max']:.1f} / {p2['tau_max']:.1f}, tau_avg "
        f"{p1['tau_avg']:.2f} / {p2['tau_avg']:.2f}"
    )
    sine = table.loc[[name["lemf2.p3"], name["lemf2.p3_period20"]]]
    for col in ("tau_max", "tau_avg"):
        assert (sine[col] > max(p1[col], p2[col])).all(), (
            f"P3's {col} {sine[col].tolist()} not above P1's and P2's"
        )
        assert sine[col].max() / sine[col].min() < 1.1, (
            f"P3's {col} changes with the period: {sine[col].tolist()}"
        )
    at_p = table.loc[[r for r in table.index if not r.startswith("Case 2: Bernoulli")]]
    assert at_p["tau_max"].idxmax() == name["lemf2.biased"], (
        f"largest tau_max of the S = {s} patterns: {at_p['tau_max'].idxmax()}, not biased sampling"
    )
    ratio = traces.p1_over_cyclic(table, profile)
    root = table["sqrt(1 + tau_avg)"]
    root_ratio = root[name["lemf1.p1"]] / root[name["lemf4.cyclic"]]
    assert ratio >= 10 and 1.5 < root_ratio < 3, (
        f"P1 against the cyclic order: tau_max x{ratio:.1f}, sqrt(1 + tau_avg) x{root_ratio:.2f}"
    )


# ---------------------------------------------------------------------------------------------
# The MNIST notebook


def mnist_panel(
    summaries: Sequence[Any], histogram: np.ndarray, n_train: int, profile: str
) -> list[str]:
    """The MNIST notebook (``summaries``: the ``main`` panel's runs; ``histogram`` and ``n_train``:
    :func:`aoi_fl.evidence.fedsum.results.label_histogram` of its seed-0 partition). In every
    profile: the partition covers the training set once, every planned run is complete
    (:func:`runs_complete`), every run records as its unit the vectors its method sends in
    the trainer (measured now, :func:`aoi_fl.evidence.fedsum.costs.trainer_traffic`), the vectors
    each method keeps are the paper's (Sec. 1.1, Secs 3.1-3.3), P1's common budget is rounds x S x 2
    vectors, the verdicts have their parts
    and their budget's rule (:func:`budget_rule`). In ``cpu`` also the Reading's numbers: the
    client sizes, the parts of claims (i), (ii) and (cr) held and not held, and the comparisons
    of the methods after 40 rounds."""
    s = fx.profile_settings(profile)
    planned = fx.plan("main", profile)
    n_rounds, n_clients = s["rounds"]["main"], planned[0].config["partition"]["n_clients"]
    sizes = histogram.sum(axis=1)
    assert len(histogram) == n_clients and sizes.sum() == n_train, (
        f"{len(histogram)} clients with {sizes.sum()} samples, not {n_clients} clients with the "
        f"{n_train} training samples"
    )
    assert (
        len(summaries)
        == len(planned)
        == len(fx.MAIN_ALGORITHMS) * len(fx.MAIN_PATTERNS) * s["seeds"]["main"]
    ), f"{len(summaries)} summaries for {len(planned)} planned runs"
    runs_complete(summaries, n_rounds, "main")
    groups = fr.group(summaries)
    # Fig. 1(b)'s unit: every run records what its method sends in the trainer, measured now
    for algorithm in fx.MAIN_ALGORITHMS:
        runs = [r for (_, a), rs in groups.items() if a == algorithm for r in rs]
        spec = runs[0].planned.config["training"]["algorithm"]
        sent = tuple(costs.trainer_traffic(costs.traffic_config(spec)))
        recorded = {tuple(r.communication) for r in runs}
        assert recorded == {sent}, (
            f"{algorithm}: runs record {recorded} vectors (down, up); the trainer sends {sent}"
        )
    # FedSUM-B, FedSUM and SCAFFOLD: one vector per client and one on the server; FedSUM-CR one
    # more vector (z_i) and a scalar (a_i) per client
    memory = {a: fc.memory_count(a) for a in fc.PAPER_MEMORY}
    assert memory == {
        "fedsum_b": (1, 1, 0),
        "fedsum": (1, 1, 0),
        "fedsum_cr": (2, 1, 1),
        "scaffold": (1, 1, 0),
    }, f"kept besides x: {memory}"
    budget_p1 = fr.budget_table(summaries, "train_loss").loc["P1", "budget"]
    assert budget_p1 == n_rounds * planned[0].config["sampler"]["s"] * 2, (
        f"P1's common budget {budget_p1}, not rounds x S x 2 vectors (the cheapest methods)"
    )
    # claims (i), (ii) and (cr) in 18, 12 and 6 parts: 2 candidates x (2 horizon means + the
    # oscillation) x 3 patterns, 2 candidates x 2 metrics x 3 patterns, 2 metrics x 3 patterns
    verdicts = fc.cnn_verdicts(summaries, "main", profile)
    assert list(verdicts.index) == ["(i)", "(ii)", "(cr)"], f"verdicts on {list(verdicts.index)}"
    parts = verdicts["parts held"].str.split("/").str[1].astype(int).to_dict()
    assert parts == {"(i)": 18, "(ii)": 12, "(cr)": 6}, f"parts of the claims: {parts}"
    budget_rule(verdicts, n_rounds)
    lines = _skipped(
        profile,
        "the Reading's partition numbers and comparisons of the methods (claims (i) and (ii), "
        f"rounds to the threshold, FedAWE behind) ({n_rounds} rounds on {n_clients} clients "
        "rank nothing)",
        "the Reading's partition numbers and comparisons of the methods (they are the committed "
        "cpu run's, 40 rounds and 2 seeds; paper runs T = 2000 with 3 seeds)",
    )
    if traits(profile).readings:
        _mnist_reading(summaries, sizes, verdicts, profile)
    return lines + [
        f"checks passed: partition, {len(summaries)} runs (rounds, finite metrics, shared "
        "traces), communication and memory per method, the verdicts on claims (i), (ii) and (cr)"
        + (", the Reading's comparisons" if traits(profile).readings else "")
    ]


def _mnist_reading(
    summaries: Sequence[Any], sizes: np.ndarray, verdicts: pd.DataFrame, profile: str
) -> None:
    """The numbers of the MNIST notebook's Reading (the ``cpu`` runs: 40 rounds, 2 seeds)."""
    assert (sizes.min(), int(np.median(sizes)), sizes.max()) == (427, 596, 931), (
        f"client sizes {sizes.min()}-{sizes.max()}, median {int(np.median(sizes))}: not the "
        "Reading's 427-931, 596"
    )
    # no part of (i) or (ii) held: the 1-df intervals of the horizon means lie below 0 in every
    # training-loss part of (i) and its accuracy parts under P2 and P3 (10 of 18), and in every
    # part of (ii); (cr): only P3's accuracy deficit held, the other five straddle the margin
    held = verdicts["parts held"].tolist()
    assert held == ["0/18", "0/12", "1/6"], f"parts held {held}"
    cr_held = [p for p in verdicts.loc["(cr)", "numbers"].split("; ") if p.endswith("(held)")]
    assert len(cr_held) == 1 and cr_held[0].startswith("P3 fedsum_cr vs fedsum, test_accuracy"), (
        f"(cr) parts held: {cr_held}"
    )
    not_held = [verdicts.loc[c, "numbers"].count("(not held)") for c in ("(i)", "(ii)")]
    assert not_held == [10, 12], f"parts not held: {not_held}"
    # nor won on the final means
    table = fr.final_table(summaries, last=fx.LAST["cnn"][profile], threshold=fr.THRESHOLD[profile])
    candidates = ["fedsum", "fedsum_cr"]
    for metric in fr.CLAIM_METRICS:
        won = fr.head_to_head(table, metric, candidates, fx.BASELINES)["beats all"]
        assert not won.any(), f"a comparison of claim (i) was won on the final {metric}"
    acc = fr.head_to_head(table, "test_accuracy", candidates, fx.BASELINES)
    rivals = acc["best rival"].groupby(level="pattern").first().to_dict()
    assert rivals == {"P1": "scaffold", "P2": "scaffold", "P3": "fedvarp"}, (
        f"best rivals in test accuracy: {rivals}"
    )
    fin = table["test_accuracy"].unstack("algorithm")
    osc = table["oscillation"].unstack("algorithm")
    rounds = table["rounds to threshold"].unstack("algorithm")
    late = fr.late_loss_ratio(fr.group(summaries), fx.MAIN_PATTERNS, fx.MAIN_ALGORITHMS)
    for cand in candidates:
        # slower to 70% than SCAFFOLD, FedVARP and MIFA; ahead of FedAWE everywhere, of FedAU
        # on P1-P2 and of FedAvg on P3; training loss still falling fastest; not steadier
        assert (rounds[cand] > rounds[["scaffold", "fedvarp", "mifa"]].max(axis=1)).all(), (
            f"{cand} reaches the threshold in {rounds[cand].to_dict()} rounds, not after "
            "SCAFFOLD, FedVARP, MIFA"
        )
        assert (
            (fin[cand] > fin["fedawe"]).all()
            and (fin.loc[["P1", "P2"], cand] > fin.loc[["P1", "P2"], "fedau"]).all()
            and fin.loc["P3", cand] > fin.loc["P3", "fedavg"]
        ), f"{cand}'s test accuracy {fin[cand].to_dict()}"
        assert (late[cand] < late[list(fx.BASELINES)].min(axis=1)).all(), (
            f"{cand}'s late loss ratio {late[cand].to_dict()} is not the smallest"
        )
        assert (osc[cand] > osc[["scaffold", "fedvarp"]].max(axis=1)).all(), (
            f"{cand}'s oscillation {osc[cand].to_dict()}"
        )
    assert ((fin["fedsum"] - fin["fedsum_cr"]).abs() < 0.01).all(), (
        "FedSUM and FedSUM-CR differ in test accuracy by up to "
        f"{(fin['fedsum'] - fin['fedsum_cr']).abs().max():.4f}"
    )
    assert (fin["fedawe"] < 0.65).all() and (fin.idxmin(axis=1) == "fedawe").all(), (
        f"FedAWE's test accuracy {fin['fedawe'].to_dict()}: not last and below 65%"
    )
    # claim (ii): FedSUM-CR beats FedSUM at the budget, FedVARP is best per vector
    for metric in fr.CLAIM_METRICS:
        at = fr.budget_table(summaries, metric)[list(fx.MAIN_ALGORITHMS)]
        best = fr.best_of(at, metric)
        cr_better = fr.ahead(at["fedsum_cr"], at["fedsum"], metric)
        assert (best == "fedvarp").all() and cr_better.all(), (
            f"{metric} at the budget: best {best.to_dict()}, FedSUM-CR better than FedSUM "
            f"{cr_better.to_dict()}"
        )
