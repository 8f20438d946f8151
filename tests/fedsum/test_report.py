"""What notebooks 14-17 print (aoi_fl.evidence.fedsum.report): lines checked against numbers worked
out by hand, and the branches the committed cpu outputs do not show."""

import math

import numpy as np
import pandas as pd

from aoi_fl.evidence.fedsum import experiments as fx
from aoi_fl.evidence.fedsum import report


def lines(capsys):
    return capsys.readouterr().out.splitlines()


def test_closed_forms_at_small_sizes(capsys):
    # N = 10, S = 5: m = 2 rounds per epoch, tau_t = min(t + 1, m - 1) = 1 in every round
    report.closed_forms(10, 5, 4)
    out = lines(capsys)
    assert out[:2] == [
        "deterministic cyclic, T = 4: tau_max = 1 (= m - 1 = 1), tau_avg = 1.0000",
        "reshuffled cyclic: tau_max <= 2m - 2 = 2; Lemma F.3: E[tau_max] <= 4N/S = 8 (its proof: "
        "tau_max <= 2 floor(N/S) = 4)",
    ]
    assert out[2] == f"Lemma F.1 (uniform), T = 4: (4N/S) ln(NT) = {8 * math.log(40):.2f}"
    # (4/delta) max(ln NT, ln 1/delta): ln 40 > ln 20 for delta = 0.05
    assert out[3] == f"Lemma F.2, delta = 0.05, T = 4: {80 * math.log(40):8.2f}"
    assert out[5] == f"Lemma F.2, delta = 0.1 , T = 4: {40 * math.log(40):8.2f}"
    assert len(out) == 8


def test_verdict_lines_with_their_parts(capsys):
    table = pd.DataFrame(
        {
            "verdict": ["inconclusive at this budget", "held"],
            "rounds": [40, 2000],
            "by the criterion": ["not held", "held"],
            "parts held": ["0/2", "1/1"],
            "numbers": ["first part (not held); second part (inconclusive)", "only part (held)"],
        },
        index=["(i)", "(iv)"],
    )
    report.verdicts(table)
    assert lines(capsys) == [
        "(i) inconclusive at this budget (40 of the paper's 2000 rounds; by the criterion not "
        "held, 0/2 parts held)",
        "    first part (not held)",
        "    second part (inconclusive)",
        "(iv) held (2000 of the paper's 2000 rounds; by the criterion held, 1/1 parts held)",
        "    only part (held)",
    ]
    report.verdicts(table.loc[["(iv)"]], spaced=True)
    assert lines(capsys)[:2] == [
        "",
        "(iv) held (2000 of the paper's 2000 rounds; by the criterion held, 1/1 parts held)",
    ]


def test_long_verdicts_name_the_panels_model(capsys):
    table = pd.DataFrame(
        {
            "verdict": ["inconclusive at this budget"],
            "unmet": ["logistic regression, not the paper's CNN"],
            "by the criterion": ["held"],
            "parts held": ["2/2"],
            "criterion": ["the criterion"],
            "numbers": ["a; b"],
        },
        index=["(iii)"],
    )
    report.long_verdicts(table, "cpu")
    out = lines(capsys)
    assert out[0].startswith(
        "Verdicts on this panel's model (multinomial logistic regression), T = 2000, 2 paired "
        "seeds. The paper's own model"
    )
    assert out[1:] == [
        "(iii) inconclusive at this budget (logistic regression, not the paper's CNN; by the "
        "criterion held, 2/2 parts held)",
        "    criterion: the criterion",
        "    a",
        "    b",
    ]
    report.long_verdicts(table.assign(unmet=""), "paper")
    out = lines(capsys)
    assert out[0] == "Verdicts on this panel's model (the paper's CNN), T = 2000, 3 paired seeds."


def test_partition_line_by_hand(capsys):
    # client 0: labels 3, 1, 0 of 4 (top share 0.75, two labels >= 5%); client 1: one label
    report.partition(np.array([[3, 1, 0], [0, 0, 4]]), seed=7)
    assert lines(capsys) == [
        "2 clients (seed 7): sizes min 4, median 4, max 4; share of a client's most frequent "
        "label: median 0.88; labels with >= 5% of a client's data: mean 1.5"
    ]


def test_claim_ii_says_when_a_run_evaluated_nothing_within_the_budget(capsys):
    # one evaluation after the initial one: FedSUM's 3 vectors a client exceed the budget of
    # the 2-vector methods there, so it has no value at the budget (tiny smoke runs)
    summaries = []
    for algorithm in fx.MAIN_ALGORITHMS:
        comm = (2, 1) if algorithm in ("fedsum", "scaffold") else (1, 1)
        planned = fx.Planned("main", "mnist", "P1", algorithm, 0, {})
        ones = np.ones(2)
        summaries.append(
            fx.RunSummary(
                planned, np.array([0, 2]), ones, ones, ones, ones, np.full(2, 4), 2, 1.5, comm
            )
        )
    report.claim_ii(summaries)
    assert lines(capsys) == [
        f"{metric}: some run evaluated nothing within the budget (tiny smoke runs)"
        for metric in ("train_loss", "test_accuracy")
    ]
