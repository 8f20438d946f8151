"""The tables notebooks 15-16 print besides the final metrics: Fig. 4's label histogram, the
late fall of the training loss, Fig. 10's p grid, Fig. 11's margins over FedSUM and claim
(iii)'s view of Cases 1-4, each against numbers worked out by hand."""

import numpy as np
import pandas as pd
import pytest

from aoi_fl.evidence.fedsum import experiments as fx
from aoi_fl.evidence.fedsum import results as fr
from aoi_fl.pipeline import runs


def run(pattern, algorithm, loss, accuracy=None, seed=0):
    """A run evaluated every 2 rounds, 4 clients a round."""
    loss = np.asarray(loss, dtype=float)
    accuracy = 1 - loss / 3 if accuracy is None else np.asarray(accuracy, dtype=float)
    planned = fx.Planned("p_grid", "mnist", pattern, algorithm, seed, {})
    rounds = np.arange(loss.size) * 2
    return fx.RunSummary(
        planned, rounds, loss, loss, loss, accuracy, np.full(rounds[-1], 4), 5, 2.5, (1, 1)
    )


def test_label_histogram_counts_each_clients_labels_of_the_runs_partition():
    # smoke's synthetic CIFAR-shaped data: no files needed, 2000 training samples, 10 clients
    config = fx.plan("main", "smoke", "cifar10", synthetic=True)[0].config
    counts, n_train = fr.label_histogram(config, "/nonexistent")
    assert counts.shape == (10, 10) and n_train == 2000
    assert counts.sum() == n_train  # every sample in exactly one client
    # the same partition drawn by hand, counted label by label
    bundle = runs.DATASETS["synthetic_cifar"](
        "/nonexistent", num_classes=10, n_train=2000, n_test=200
    )
    clients = runs.PARTITIONS["dirichlet_prior"](bundle, 10, seed=0, alpha=0.1)
    labels = bundle.train.y.numpy()
    by_hand = [[int((labels[c] == k).sum()) for k in range(10)] for c in clients]
    np.testing.assert_array_equal(counts, by_hand)


def test_late_loss_ratio_is_the_last_loss_over_the_loss_two_evaluations_earlier():
    groups = fr.group(
        [
            run("P1", "fedsum", [2.0, 1.0, 0.8, 0.5], seed=0),  # 0.5 / 1.0
            run("P1", "fedsum", [2.0, 1.0, 0.6, 0.3], seed=1),  # 0.3 / 1.0
            run("P1", "fedavg", [2.0, 0.9, 0.9, 0.9]),  # 0.9 / 0.9
        ]
    )
    table = fr.late_loss_ratio(groups, ["P1"], ["fedsum", "fedavg"])
    assert list(table.columns) == ["fedsum", "fedavg"] and list(table.index) == ["P1"]
    assert table.loc["P1", "fedsum"] == pytest.approx(0.4)  # mean over the seeds
    assert table.loc["P1", "fedavg"] == pytest.approx(1.0)


def test_p_grid_table_orders_by_p_and_counts_the_rises_of_the_loss():
    grid = [
        run("p=1", "fedsum", [2.0, 1.0, 1.5, 1.2, 1.3]),  # rises twice
        run("p=0.05", "fedsum", [2.0, 1.8, 1.6, 1.5, 1.4]),
        run("p=0.5", "fedsum", [2.0, 1.0, 0.9, 1.1, 1.0]),  # rises once
    ]
    table = fr.p_grid_table(grid, last=1)
    assert list(table.index) == ["p=0.05", "p=0.5", "p=1"]
    assert table["p"].tolist() == [0.05, 0.5, 1.0] and table.columns[0] == "p"
    assert table["loss rises"].tolist() == [0, 1, 2]
    assert table["train_loss"].tolist() == [1.4, 1.0, 1.3]  # the last evaluation


def test_family_margins_are_over_fedsum_positive_when_better():
    table = fr.final_table(
        [
            run("P1", "fedsum", [2.0, 1.0], accuracy=[0.1, 0.8]),
            run("P1", "fedsum_b", [2.0, 1.2], accuracy=[0.1, 0.7]),
            run("P1", "fedsum_cr", [2.0, 0.9], accuracy=[0.1, 0.85]),
        ],
        last=1,
    )
    margins = fr.family_margins(table)
    assert list(margins.columns) == ["train_loss margin", "accuracy margin"]
    assert margins.loc[("P1", "fedsum_b")].tolist() == pytest.approx([-0.2, -0.1])
    assert margins.loc[("P1", "fedsum_cr")].tolist() == pytest.approx([0.1, 0.05])


def test_four_cases_reads_fedsum_under_cases_1_to_4_and_whether_its_loss_fell():
    summaries = [run(p, "fedsum", [2.0, 1.0]) for p in ("biased", "reshuffled", "P2", "cyclic")]
    summaries += [run("P1", "fedsum", [2.0, 2.5]), run("P1", "fedavg", [2.0, 0.1])]
    table = fr.final_table(summaries, last=1)
    four, falls = fr.four_cases(table, fr.group(summaries))
    assert list(four.index) == list(fr.FOUR_CASES)  # biased sampling and FedAvg left out
    assert falls == {"P1": False, "P2": True, "cyclic": True, "reshuffled": True}


def test_best_of_and_ahead_follow_the_metrics_direction():
    values = pd.DataFrame({"a": [0.5, 0.9], "b": [0.7, 0.2]}, index=["P1", "P2"])
    assert fr.best_of(values, "test_accuracy").tolist() == ["b", "a"]
    assert fr.best_of(values, "train_loss").tolist() == ["a", "b"]
    assert fr.ahead(values["a"], values["b"], "test_accuracy").tolist() == [False, True]
    assert fr.ahead(values["a"], values["b"], "train_loss").tolist() == [True, False]
