"""What each method sends and keeps, counted in its implementation (aoi_fl.evidence.fedsum.costs):
the paper's methods in the in-process trainer, a method that sends one vector more counted with
it, a model a side does not read not counted, Flower's messages counted from their arrays (on
constructed messages; the real ones: tests/flower/test_messages.py), the cache, the errors."""

import pytest
import torch

from aoi_fl.core.algorithms import FedAvg
from aoi_fl.evidence.fedsum import costs
from aoi_fl.evidence.fedsum import experiments as fx
from aoi_fl.fedsum.algorithms import FedSUM
from aoi_fl.pipeline.runs import ALGORITHMS, build_trainer


def trainer(name):
    return tuple(costs.trainer_traffic(costs.traffic_config(fx.algorithm_spec(name, "paper"))))


class FedSUMSendingX(FedSUM):
    """FedSUM whose server also sends each client the model a second time: one vector more
    down than Alg. 2."""

    def server_message(self, t, ids, global_params, lr):
        again = {f"x.{k}": v.expand(len(ids), *v.shape) for k, v in global_params.items()}
        return {**super().server_message(t, ids, global_params, lr), **again}


class FedSUMReadingModels(FedSUM):
    """FedSUM whose server reads the clients' models (their norms), so it must receive them:
    one vector more up than Alg. 2."""

    def server_update(self, global_params, updates, upload):
        self.norms = [float(v.norm()) for v in updates.deltas().values()]
        return super().server_update(global_params, updates, upload)


def test_the_trainer_counts_what_each_side_of_the_paper_s_methods_reads():
    # Secs 1.1 and 3: FedSUM and SCAFFOLD x and a correction down, the others the model only;
    # one vector up each: delta_i (FedSUM's family), u_i (SCAFFOLD) or the model (the rest);
    # FedAWE's client starts from the stale model it is sent, never from x
    assert {a: trainer(a) for a in (*fx.MAIN_ALGORITHMS, "fedsum_b")} == {
        "fedsum": (2.0, 1.0),
        "fedsum_cr": (1.0, 1.0),
        "fedavg": (1.0, 1.0),
        "fedau": (1.0, 1.0),
        "fedawe": (1.0, 1.0),
        "fedvarp": (1.0, 1.0),
        "mifa": (1.0, 1.0),
        "scaffold": (2.0, 1.0),
        "fedsum_b": (1.0, 1.0),
    }


@pytest.mark.parametrize(
    "variant, expected", [(FedSUMSendingX, (3.0, 1.0)), (FedSUMReadingModels, (2.0, 2.0))]
)
def test_a_method_that_sends_one_vector_more_is_counted_with_it(monkeypatch, variant, expected):
    monkeypatch.setitem(ALGORITHMS, "fedsum", variant)
    assert trainer("fedsum") == expected


def test_a_method_whose_sides_run_as_one_cannot_be_counted(monkeypatch):
    class Merged(FedAvg):
        def aggregate(self, global_params, updates):
            return global_params

    monkeypatch.setitem(ALGORITHMS, "fedavg", Merged)
    with pytest.raises(ValueError, match=r"overrides \['aggregate'\].*cannot be counted"):
        trainer("fedavg")


def test_a_run_without_active_clients_has_nothing_to_count():
    config = costs.traffic_config({"name": "fedavg"})
    config["sampler"]["p"] = 1e-12
    with pytest.raises(ValueError, match="no client was active in the 5 rounds"):
        costs.trainer_traffic(config)


def test_bad_inputs_say_what_is_allowed():
    with pytest.raises(ValueError, match="algorithm must be a configuration's algorithm section"):
        costs.traffic_config("fedsum")
    like = {"weight": (1, 3), "bias": (1,)}
    with pytest.raises(ValueError, match=r"server_message: 'odd' of shape \(4, 2\) is not shaped"):
        costs.model_vectors({"odd": (4, 2)}, like, (4,), "server_message")


def test_a_tensor_counts_its_share_of_the_model():
    like = {"weight": (1, 3), "bias": (1,)}
    # a stacked table of 5 clients of one model each; the weight alone, 3 of the 4 entries
    assert costs.model_vectors({"w": (5, 1, 3), "b": (5, 1)}, like, (5,), "x") == 5.0
    assert costs.model_share((1, 3), like) == 0.75
    assert costs.model_share((5,), like, (5,)) is None  # a scalar per client is no vector


# ---------------------------------------------------------------------------------------------
# Flower's messages, constructed


LIKE = {"1.weight": (1, 3), "1.bias": (1,)}


def message(down, up):
    """A training message carrying the model and ``down - 1`` more model-size vectors, and
    its reply carrying ``up`` (None: no reply)."""
    extra = {f"v{j}.{k}": s for j in range(down - 1) for k, s in LIKE.items()}
    sent = {"arrays": dict(LIKE), **({"extra": extra} if extra else {})}
    back = None if up is None else {f"u{j}.{k}": s for j in range(up) for k, s in LIKE.items()}
    reply = None if back is None else {"arrays": back}
    return sent, reply


def test_flower_s_messages_are_counted_per_message_from_all_their_arrays():
    assert costs.message_traffic([message(2, 2), message(2, 1)], LIKE) == (2.0, 1.5)
    with pytest.raises(ValueError, match="no training message was sent"):
        costs.message_traffic([], LIKE)
    with pytest.raises(ValueError, match="1 of 2 training messages got no reply"):
        costs.message_traffic([message(1, 1), message(1, None)], LIKE)
    odd = ({"arrays": {"scalar": ()}}, {"arrays": dict(LIKE)})
    with pytest.raises(ValueError, match="a training message's record 'arrays': 'scalar'"):
        costs.message_traffic([odd], LIKE)


def test_flower_s_count_is_measured_once_then_read_from_the_cache(tmp_path):
    config = costs.traffic_config({"name": "fedavg"})
    assert list(LIKE) == list(costs.shapes(build_trainer(config).params))
    calls = []

    def measure(cfg):
        calls.append(cfg)
        return [message(1, 1), message(1, 1)]

    assert costs.flower_traffic(config, str(tmp_path)) is None  # not measured, nothing cached
    assert costs.flower_traffic(config, str(tmp_path), measure) == (1.0, 1.0)
    assert costs.flower_traffic(config, str(tmp_path), measure) == (1.0, 1.0)
    assert costs.flower_traffic(config, str(tmp_path)) == (1.0, 1.0)
    assert len(calls) == 1
    assert costs.flower_traffic(config, str(tmp_path), lambda c: [message(1, 2)], rerun=True) == (
        1.0,
        2.0,
    )
    # another method's run is another entry
    other = costs.traffic_config({"name": "mifa"})
    assert costs.flower_traffic(other, str(tmp_path)) is None


def test_memory_is_counted_in_the_checkpointed_state():
    # FedSUM keeps h_i per client and y on the server; FedSUM-CR also z_i and a_i
    assert costs.memory_count(fx.algorithm_spec("fedsum", "paper")) == (1.0, 1.0, 0.0)
    assert costs.memory_count(fx.algorithm_spec("fedsum_cr", "paper")) == (2.0, 1.0, 1.0)
    assert costs.memory_count({"name": "fedavg"}) == (0.0, 0.0, 0.0)
    assert costs.shapes({"a": torch.zeros(2, 3)}) == {"a": (2, 3)}
