"""What each method sends and keeps, counted in model-size vectors in our implementations.

The paper prices a method in vectors of the model's size: those an active client receives
(down) and sends (up) per round (Sec. 1.1, second contribution; Secs 3.1-3.3, lines 3 and
10-11 of Algs 1-3), and those kept besides the model x (h_i, y, z_i). Here they are counted in
what our implementations do, never read from a declaration, so a method that sent or kept one
vector more would be counted with it:

- **sent, in-process trainer** (:func:`trainer_traffic`): a few rounds of the method on a tiny
  least-squares task (:func:`traffic_config`), its two sides (:class:`~aoi_fl.core.algorithms.
  Algorithm`) watched. Down: the vectors in what the server sends each selected client
  (``server_message``), plus the global model when the client's ``client_begin`` reads it. Up:
  the vectors in what the client uploads (``client_end``), plus its model when the server's
  ``server_update`` reads it. One process holds both sides, so what counts as sent is what the
  receiving side reads: FedSUM's server never reads a client's model (only delta_i), FedAWE's
  client never reads the global model (it starts from the stale model it is sent);
- **sent, Flower** (:func:`message_traffic`): the arrays of every training message the
  strategy sends and of every reply (``aoi_fl.flower.inprocess.train_messages``, the real
  strategy and ClientApp without Ray). The layers' rule keeps this paper from importing the
  Flower package, so the count is measured by code that may import both (the MNIST notebook,
  the tests) through :func:`flower_traffic`, which caches it with the results; the ledger reads the
  cache;
- **kept** (:func:`memory_count`): the state the implementation checkpoints.

A tensor counts as its share of the model's size when it is shaped like one of the model's
parameters (after a leading client axis where clients are stacked, :func:`model_vectors`); any
other tensor is an error, so that nothing sent or kept is silently left out. Counts per active
client and round are averages over the client-rounds of the run.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import torch

from aoi_fl.core.algorithms import Algorithm, ClientUpdates, merged_sides
from aoi_fl.pipeline import plugins
from aoi_fl.pipeline.cache import ResultStore
from aoi_fl.pipeline.runs import build_trainer, resolve_config

#: a tensor's or an array's shape, by name (a parameter's, or one of a message)
Shapes = Mapping[str, Sequence[int]]
#: the version of what a cached count holds (part of its cache key): a change of what is
#: counted must change it, so that no stale count is read
TRAFFIC_VERSION = 1
#: the tiny task of :func:`traffic_config`: clients, rounds, the Bernoulli participation
#: probability (several clients in most rounds, some rounds empty) and local steps K
TRAFFIC_CLIENTS, TRAFFIC_ROUNDS, TRAFFIC_P, TRAFFIC_STEPS = 6, 5, 0.5, 2


class Traffic(NamedTuple):
    """Model-size vectors an active client receives (``down``) and sends (``up``) per round."""

    down: float
    up: float

    def text(self) -> str:
        return f"({self.down:g}, {self.up:g})"


def shapes(tensors: Mapping[str, torch.Tensor]) -> dict[str, tuple[int, ...]]:
    """The shape of each tensor of ``tensors``."""
    return {k: tuple(v.shape) for k, v in tensors.items()}


def model_share(shape: Sequence[int], like: Shapes, lead: Sequence[int] = ()) -> float | None:
    """How many model-size vectors a tensor of ``shape`` holds: its size over the model's when
    it is shaped like a parameter of the model ``like`` after the axes ``lead`` (a client axis
    of a stacked table, or none), else None (a scalar, or another shape)."""
    size = sum(math.prod(s) for s in like.values())
    if any(tuple(shape) == (*lead, *s) for s in like.values()):
        return math.prod(shape) / size
    return None


def model_vectors(tensors: Shapes, like: Shapes, lead: Sequence[int], what: str) -> float:
    """The model-size vectors in ``tensors`` (:func:`model_share` of each, all together);
    ValueError naming the first tensor that is not shaped like a parameter of ``like`` after
    ``lead`` (``what`` says whose tensors they are)."""
    total = 0.0
    for key, shape in tensors.items():
        share = model_share(shape, like, lead)
        if share is None:
            raise ValueError(
                f"{what}: {key!r} of shape {tuple(shape)} is not shaped like a parameter of the "
                f"model {dict(like)} after the axes {tuple(lead)}, so it cannot be counted in "
                "model-size vectors"
            )
        total += share
    return total


# ---------------------------------------------------------------------------------------------
# Sent per active client and round (Sec. 1.1, Secs 3.1-3.3)


def traffic_config(algorithm: Mapping[str, Any]) -> dict[str, Any]:
    """The tiny task on which what ``algorithm`` (a configuration's algorithm section) sends is
    counted: least squares on :data:`TRAFFIC_CLIENTS` clients, Bernoulli participation
    :data:`TRAFFIC_P`, :data:`TRAFFIC_ROUNDS` rounds, K local steps (the algorithm's own
    ``local_steps`` where it has one, else :data:`TRAFFIC_STEPS`), one client trained at a time
    as a Flower node trains. A second of training, and rounds with several clients."""
    if not isinstance(algorithm, Mapping) or not isinstance(algorithm.get("name"), str):
        raise ValueError(
            f"algorithm must be a configuration's algorithm section (a mapping with a 'name'), "
            f"got {algorithm!r}"
        )
    n = TRAFFIC_CLIENTS
    return {
        "dataset": {"name": "linear_regression", "n_clients": n, "samples": 12, "features": 3},
        "partition": {"name": "natural", "n_clients": n},
        "model": {"name": "linear_regression", "in_features": 3, "seed": 0},
        "sampler": {"name": "bernoulli", "p": TRAFFIC_P, "seed": 1},
        "training": {
            "rounds": TRAFFIC_ROUNDS,
            "local_steps": algorithm.get("local_steps", TRAFFIC_STEPS),
            "batch_size": 4,
            "loss": "mse",
            "eval_every": TRAFFIC_ROUNDS,
            "lr": {"name": "constant", "lr": 0.05},
            "algorithm": dict(algorithm),
            "client_chunk": 1,
        },
    }


class _Watched(dict):
    """A dict of tensors that notes whether anything read its tensors (or its keys, to look
    them up): the side that read it received it."""

    read = False

    def __getitem__(self, key):
        self.read = True
        return super().__getitem__(key)

    def __iter__(self):
        self.read = True
        return super().__iter__()

    def get(self, key, default=None):
        self.read = True
        return super().get(key, default)

    def items(self):
        self.read = True
        return super().items()

    def values(self):
        self.read = True
        return super().values()


def _sides_apart(algorithm: Algorithm) -> None:
    """ValueError unless ``algorithm`` runs its two sides through the base class's in-process
    drivers (``client_start``, ``aggregate``): only then are its messages seen."""
    merged = merged_sides(algorithm)
    if merged:
        raise ValueError(
            f"algorithm {algorithm.name!r} overrides {merged}, which run the client and the server "
            "in one step: what one side sends the other cannot be counted"
        )


def trainer_traffic(config: Mapping[str, Any], data_root: str = "data") -> Traffic:
    """What the method of ``config`` sends per active client and round in the in-process
    trainer's protocol (module docstring), counted over the rounds of ``config``'s run (take
    :func:`traffic_config`: a second). ValueError if no client was active in the run."""

    trainer = build_trainer(config, data_root, device="cpu")
    algorithm = trainer.algorithm
    _sides_apart(algorithm)
    like = shapes(trainer.params)
    count = {"down": 0.0, "up": 0.0, "clients": 0}
    server_message, client_begin = algorithm.server_message, algorithm.client_begin
    client_end, server_update = algorithm.client_end, algorithm.server_update

    # the instance's methods shadow the class's, so the base class's drivers call these
    def message(t, ids, global_params, lr):
        sent = server_message(t, ids, global_params, lr)
        count["down"] += model_vectors(shapes(sent), like, (len(ids),), "server_message")
        return sent

    def begin(t, lr, clients, global_params, sent, own):
        model = _Watched(global_params)
        out = client_begin(t, lr, clients, model, sent, own)
        count["down"] += clients * model.read
        return out

    def end(updates, own):
        upload, new = client_end(updates, own)
        count["up"] += model_vectors(shapes(upload), like, (len(updates.ids),), "client_end")
        return upload, new

    def update(global_params, updates: ClientUpdates, upload):
        models = _Watched(updates.params)
        out = server_update(global_params, dataclasses.replace(updates, params=models), upload)
        count["up"] += updates.ids.size * models.read
        count["clients"] += int(updates.ids.size)
        return out

    algorithm.server_message, algorithm.client_begin = message, begin
    algorithm.client_end, algorithm.server_update = end, update
    trainer.run()
    if not count["clients"]:
        raise ValueError(f"no client was active in the {trainer.round} rounds: nothing to count")
    return Traffic(count["down"] / count["clients"], count["up"] / count["clients"])


#: one training message of a Flower run and its reply: record -> array -> shape (the reply
#: None when none came), as ``aoi_fl.flower.inprocess.train_messages`` records them
MessageArrays = tuple[Mapping[str, Shapes], Mapping[str, Shapes] | None]


def message_traffic(messages: Sequence[MessageArrays], like: Shapes) -> Traffic:
    """What the training ``messages`` of a Flower run carry per message (one per active client
    and round): the model-size vectors in all their arrays, down in the messages, up in the
    replies (every array of every record: the model and what the algorithm adds). ValueError
    without messages or with a message that got no reply."""
    if not messages:
        raise ValueError("no training message was sent: nothing to count")
    unanswered = sum(reply is None for _, reply in messages)
    if unanswered:
        raise ValueError(f"{unanswered} of {len(messages)} training messages got no reply")

    def vectors(records: Mapping[str, Shapes], what: str) -> float:
        return sum(model_vectors(a, like, (), f"{what} record {r!r}") for r, a in records.items())

    down = sum(vectors(sent, "a training message's") for sent, _ in messages)
    up = sum(vectors(reply, "a training reply's") for _, reply in messages)
    return Traffic(down / len(messages), up / len(messages))


def flower_traffic(
    config: Mapping[str, Any],
    results_dir: str = "results",
    measure: Callable[[Mapping[str, Any]], Sequence[MessageArrays]] | None = None,
    *,
    rerun: bool = False,
    data_root: str = "data",
) -> Traffic | None:
    """What the method of ``config`` sends per active client and round in Flower's messages
    (:func:`message_traffic`): cached in ``results_dir``; else (or with ``rerun``), given
    ``measure`` (``config`` -> its run's training messages: ``aoi_fl.flower.inprocess.
    train_messages``), measured and cached; else None (not measured)."""

    store = ResultStore(results_dir)
    key = {"fedsum_traffic": TRAFFIC_VERSION, "protocol": "flower", "run": resolve_config(config)}
    hit = None if rerun else store.load(key)
    if hit is not None:
        return Traffic(**hit[0])
    if measure is None:
        return None
    like = shapes(build_trainer(config, data_root, device="cpu").params)
    traffic = message_traffic(measure(config), like)
    store.save(key, traffic._asdict())
    return traffic


# ---------------------------------------------------------------------------------------------
# Kept besides x (Sec. 1.1, Secs 3.1-3.3)


def memory_count(algorithm: Mapping[str, Any]) -> tuple[float, float, float]:
    """What the method of ``algorithm`` (a configuration's algorithm section) keeps besides the
    global model, from the state its implementation checkpoints (``state_dict``, everything a
    run carries from one round to the next): (model-size vectors per client, model-size
    vectors not per client, scalars per client).

    Counted on a toy model (two tensors, 8 parameters) and 7 clients: a tensor shaped like a
    parameter with a leading client axis is a per-client table, one shaped like a parameter a
    single vector, one of shape (clients,) a scalar per client; any other shape is an error. In
    Algs 1-3 the per-client tables are the clients' own state (h_i, z_i, a_i) and the single
    vector is the server's y; the simulation keeps both in one process, so the count reads
    the side from the structure, not from where a tensor lives.
    """
    n = 7
    like = {"weight": torch.zeros(3, 2), "bias": torch.zeros(2)}
    name = algorithm["name"]
    method = plugins.algorithms()[name](**{k: v for k, v in algorithm.items() if k != "name"})
    method.setup(n, like)
    per_client = shared = scalars = 0.0
    for key, shape in shapes(method.state_dict()).items():
        if shape == (n,):
            scalars += 1
        elif (table := model_share(shape, shapes(like), (n,))) is not None:
            per_client += table / n
        elif (vector := model_share(shape, shapes(like))) is not None:
            shared += vector
        else:
            raise ValueError(f"{name}: state {key!r} of shape {shape} is not countable")
    return per_client, shared, scalars
