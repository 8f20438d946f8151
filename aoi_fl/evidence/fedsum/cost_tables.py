"""What each method sends and keeps per round, as the paper states it and as measured in
process and under Flower: the tables the MNIST notebook prints (the ``fedsum.comm.*`` and
``fedsum.memory.*`` rows of claims.toml read them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from aoi_fl.evidence.fedsum import costs
from aoi_fl.evidence.fedsum import experiments as fx

#: model-size vectors (received, sent) per active client and round, as the paper states them,
#: and where: FedSUM-B and FedSUM-CR one each way, FedSUM x and y^{(t-1)} down and delta_i up
#: (Secs 3.1-3.3, lines 3 and 10-11 of Algs 1-3); SCAFFOLD the same as FedSUM and FedAvg the
#: same as FedSUM-B and FedSUM-CR (Sec. 1.1, second contribution)
PAPER_COMMUNICATION = {
    "fedsum_b": ((1, 1), "Sec. 3.1, Alg. 1 lines 3 and 10", "FedSUM-B: x down, delta_i up"),
    "fedsum": ((2, 1), "Sec. 3.2, Alg. 2 lines 3 and 11", "FedSUM: x and y down, delta_i up"),
    "fedsum_cr": ((1, 1), "Sec. 3.3, Alg. 3 lines 3 and 11", "FedSUM-CR: x down, delta_i up"),
    "scaffold": (
        (2, 1),
        "Sec. 1.1, second contribution",
        "SCAFFOLD (single-upload form of Huang et al.) costs what FedSUM costs",
    ),
    "fedavg": (
        (1, 1),
        "Sec. 1.1, second contribution",
        "FedAvg costs what FedSUM-B and FedSUM-CR cost",
    ),
}


#: the protocols in which what a method sends is measured (:mod:`aoi_fl.evidence.fedsum.costs`): the
#: method's own, in the in-process trainer (its two sides watched: what each reads of the
#: other's), which decides the paper's claim; and our Flower strategy's (the arrays of the
#: training messages and replies on Flower's in-process grid, cached by the MNIST notebook), a
#: transport of ours, whose rows say whether it carries only what the method sends
PROTOCOLS = ("in process", "Flower")


#: the methods' names as the paper writes them
METHOD_LABELS = {
    "fedsum_b": "FedSUM-B",
    "fedsum": "FedSUM",
    "fedsum_cr": "FedSUM-CR",
    "scaffold": "SCAFFOLD",
    "fedavg": "FedAvg",
}
#: why our Flower replies carry one vector more than a method that uploads delta_i sends
FLOWER_REPLY = (
    "; every reply carries the client's model besides the method's upload: the strategy reads "
    "it for the update norms it records and feeds back to the sampler, a cost of our "
    "transport, not of the method"
)


def communication_verdict(paper: costs.Traffic, measured: costs.Traffic | None) -> str:
    """The verdict on the vectors a method sends per active client and round, from one
    protocol's count (None: not measured): "held" when it is the paper's (down, up), "not held"
    when it differs, "inconclusive" when not measured."""
    if measured is None:
        return "inconclusive"
    return "held" if tuple(measured) == tuple(paper) else "not held"


def communication_table(
    results_dir: str = "results",
    measure: Callable[[Mapping[str, Any]], Sequence[costs.MessageArrays]] | None = None,
    *,
    rerun: bool = False,
) -> pd.DataFrame:
    """Per method of :data:`PAPER_COMMUNICATION`, with the paper's settings on the tiny task of
    :func:`~aoi_fl.evidence.fedsum.costs.traffic_config`: the paper's (down, up), ours in each of
    the :data:`PROTOCOLS` (:class:`~aoi_fl.evidence.fedsum.costs.Traffic`; in process measured here,
    in Flower read from ``results_dir``'s cache or, given ``measure`` (``aoi_fl.flower.inprocess.
    train_messages``), measured where missing or with ``rerun``; None: not measured) and each
    protocol's :func:`communication_verdict` (``verdict``: the method's, in process;
    ``Flower verdict``: our transport's)."""
    rows = {}
    for name, (paper, _, _) in PAPER_COMMUNICATION.items():
        config = costs.traffic_config(fx.algorithm_spec(name, "paper"))
        measured = {
            "in process": costs.trainer_traffic(config),
            "Flower": costs.flower_traffic(config, results_dir, measure, rerun=rerun),
        }
        stated = costs.Traffic(*paper)
        rows[name] = {
            "paper": stated,
            **measured,
            "verdict": communication_verdict(stated, measured["in process"]),
            "Flower verdict": communication_verdict(stated, measured["Flower"]),
        }
    return pd.DataFrame.from_dict(rows, orient="index", dtype=object)


def traffic_text(row: Any, protocol: str) -> str:
    return "not measured" if row[protocol] is None else row[protocol].text()


def communication_line(name: str, row: Any) -> str:
    """How the MNIST notebook prints the verdicts on what method ``name`` sends (a row of
    :func:`communication_table`); the ledger's ``printed_as`` finds them."""
    return (
        f"comm.{name}: {row['verdict']} (down, up: paper {row['paper'].text()}; in process "
        f"{traffic_text(row, 'in process')}) | our Flower messages: {row['Flower verdict']} "
        f"({traffic_text(row, 'Flower')})"
    )


#: what each method keeps besides the global model x, as the paper states it: (model-size
#: vectors per client, model-size vectors on the server, scalars per client); where, in its
#: words: the rows ``fedsum.memory.*`` of claims.toml.
#: FedSUM-B keeps h_i on the clients and y on the server (Sec. 3.1), FedSUM the same control
#: variables (Sec. 3.2), FedSUM-CR also z_i (a model) and a_i (a round) on each client, the
#: "extra memory" that saves the downlink of y (Sec. 3.3, eq. 10, Alg. 3 line 1); SCAFFOLD the
#: same as FedSUM (Sec. 1.1, second contribution: "the same communication and memory cost")
PAPER_MEMORY = {
    "fedsum_b": (1, 1, 0),
    "fedsum": (1, 1, 0),
    "fedsum_cr": (2, 1, 1),
    "scaffold": (1, 1, 0),
}
#: the paper's federation (Sec. 5), at which a row's value counts the vectors kept
MEMORY_CLIENTS = 100


def memory_count(name: str) -> tuple[float, float, float]:
    """What method ``name`` with the paper's settings keeps besides the global model (model-
    size vectors per client, on the server, scalars per client;
    :func:`aoi_fl.evidence.fedsum.costs.memory_count`)."""
    return costs.memory_count(fx.algorithm_spec(name, "paper"))
