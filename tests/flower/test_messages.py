"""What Flower's messages carry (issue 37): the in-process grid records the arrays of every
training message and reply; counted (aoi_fl.evidence.fedsum.costs), they make the ledger's
communication rows, which a method sending one vector more makes "not held" in both
protocols; and the counts cached with the results are what the messages carry now."""

from pathlib import Path

import pytest

pytest.importorskip("flwr")

from aoi_fl.evidence.fedsum import claims as fc  # noqa: E402
from aoi_fl.evidence.fedsum import costs  # noqa: E402
from aoi_fl.evidence.fedsum import experiments as fx  # noqa: E402
from aoi_fl.fedsum.algorithms import FedSUM  # noqa: E402
from aoi_fl.flower.inprocess import node_ids, run_in_process, train_messages  # noqa: E402
from aoi_fl.pipeline.runs import ALGORITHMS, build_trainer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def config(name):
    return costs.traffic_config(fx.algorithm_spec(name, "paper"))


def flower(name):
    cfg = config(name)
    like = costs.shapes(build_trainer(cfg).params)
    return tuple(costs.message_traffic(train_messages(cfg), like))


class FedSUMSendingX(FedSUM):
    """FedSUM whose server also sends each client the model a second time: one vector more
    down than Alg. 2, in every protocol."""

    def server_message(self, t, ids, global_params, lr):
        again = {f"x.{k}": v.expand(len(ids), *v.shape) for k, v in global_params.items()}
        return {**super().server_message(t, ids, global_params, lr), **again}


def test_every_training_message_and_its_reply_are_recorded():
    cfg = config("fedsum")
    record = []
    run = run_in_process(cfg, record=record)
    # one message per active client and round, in the order sent
    assert len(record) == sum(len(s) for s in run.history["selected"]) > 0
    sent, reply = record[0]
    like = costs.shapes(build_trainer(cfg).params)
    # Alg. 2 line 3: x and y^(t-1) down; the reply carries delta_i and the client's model
    assert sent == {"arrays": like, "extra": {f"y.{k}": s for k, s in like.items()}}
    assert reply == {"arrays": like, "extra": {f"delta.{k}": s for k, s in like.items()}}
    assert record == train_messages(cfg)


def test_a_message_without_a_reply_is_recorded_as_such():
    cfg = config("fedavg")
    silent = next(iter(node_ids(costs.TRAFFIC_CLIENTS)))
    record = []
    run_in_process(cfg, record=record, silent=[silent], timeout=1.0)
    unanswered = [r for r in record if r[1] is None]
    assert unanswered and all(r[1] is not None for r in record if r not in unanswered)
    with pytest.raises(ValueError, match="training messages got no reply"):
        costs.message_traffic(record, costs.shapes(build_trainer(cfg).params))


def test_flower_sends_the_model_with_every_reply():
    # FedAvg: the model each way, as the paper counts it; FedSUM: x and y down as Alg. 2, but
    # the reply carries the client's model besides delta_i (the strategy reads it for the
    # update norms it records and feeds back to the sampler)
    assert flower("fedavg") == (1.0, 1.0)
    assert flower("fedsum") == (2.0, 2.0)
    assert flower("fedsum_cr") == (1.0, 2.0)


def test_a_method_sending_one_vector_more_is_not_held_in_either_protocol(tmp_path, monkeypatch):
    monkeypatch.setitem(ALGORITHMS, "fedsum", FedSUMSendingX)
    table = fc.communication_table(str(tmp_path), train_messages)
    assert table.loc["fedsum", "in process"] == (3.0, 1.0)
    assert table.loc["fedsum", "Flower"] == (3.0, 2.0)
    rows = {c.key: c for c in fc.communication_claims(str(tmp_path))}
    method, flower_row = rows["fedsum.comm.fedsum"], rows["fedsum.comm.flower.fedsum"]
    assert (method.verdict, method.ours, method.paper_value) == ("not held", 4.0, 3.0)
    assert (flower_row.verdict, flower_row.ours) == ("not held", 5.0)
    # FedAvg, untouched, sends the paper's vectors in both protocols
    assert table.loc["fedavg", ["verdict", "Flower verdict"]].tolist() == ["held", "held"]


def test_the_cached_flower_counts_are_what_the_messages_carry_now():
    for name in fc.PAPER_COMMUNICATION:
        cached = costs.flower_traffic(config(name), str(ROOT / "results"))
        assert cached is not None, f"{name}: Flower's count is not cached (run notebook 15)"
        assert tuple(cached) == flower(name), name
