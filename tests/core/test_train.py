"""Tests of aoi_fl.core.train: engines, aggregation (eq. 15), schedules, trainer,
rounds_to_target."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from aoi_fl.core.algorithms import Algorithm, ClientUpdates, FedAvg, update_norms
from aoi_fl.core.engines import (
    LocalTraining,
    activation_bytes,
    check_model,
    local_batches,
    local_step_batches,
)
from aoi_fl.core.models import build_model
from aoi_fl.core.selection import Sampler, Selection
from aoi_fl.core.tensors import TensorSplit, gather_rows, stack
from aoi_fl.core.train import (
    ConstantLR,
    ExponentialDecay,
    FederatedData,
    FederatedTrainer,
    InverseSqrtDecay,
    TrainSettings,
    rounds_to_target,
)

SIZES = [37, 120, 51, 80, 12, 100]  # unequal, none a multiple of the batch size below


def tiny_cnn() -> nn.Module:
    gen = torch.Generator().manual_seed(1)
    model = nn.Sequential(
        nn.Conv2d(1, 3, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(3 * 4 * 4, 5),
        nn.ReLU(),
        nn.Linear(5, 4),
    )
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    return model


def synthetic(sizes=SIZES, shape=(1, 8, 8), classes=4, seed=0) -> FederatedData:
    gen = torch.Generator().manual_seed(seed)
    total = sum(sizes)
    y = torch.randint(0, classes, (total,), generator=gen)
    prototypes = torch.randn(classes, *shape, generator=gen)
    x = prototypes[y] + 0.5 * torch.randn(total, *shape, generator=gen)
    bounds = np.cumsum([0, *sizes])
    # interleave clients' indices so that a client's samples are not contiguous
    perm = np.random.default_rng(seed).permutation(total)
    partition = [np.sort(perm[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    test = TensorSplit(x[:64].clone(), y[:64].clone())
    return FederatedData(TensorSplit(x, y), test, partition)


def schedules_for(data: FederatedData, ids, epochs=2, batch_size=25, t=0, seed=0):
    out = []
    for i in ids:
        idx = data.partition[i]
        rows = local_batches(seed, t, i, idx.size, epochs, batch_size)
        out.append(np.where(rows >= 0, idx[np.maximum(rows, 0)], -1))
    return out


def params_of(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.named_parameters()}


class MomentumSolver(Algorithm):
    """SGD with heavy-ball momentum and a step counter: exercises per-client local state."""

    name = "momentum"

    def client_start(self, t, ids, global_params, lr):
        state = {f"v.{k}": torch.zeros(len(ids), *v.shape) for k, v in global_params.items()}
        state["steps"] = torch.zeros(len(ids))
        return stack(global_params, len(ids)), state

    def local_step(self, params, grads, lr, state):
        for k, p in params.items():
            v = state[f"v.{k}"]
            v.mul_(0.9).add_(grads[k])
            p.sub_(v, alpha=lr)
        state["steps"].add_(1)


class ScriptedSampler(Sampler):
    """Replays given selections and records the feedback it gets."""

    name = "scripted"

    def __init__(self, n, rounds):
        self.n = n
        self.rounds = [Selection(np.asarray(ids), np.asarray(w, dtype=float)) for ids, w in rounds]
        self.t = 0
        self.fed_back = []

    def sample(self):
        sel = self.rounds[self.t % len(self.rounds)]
        self.t += 1
        return sel

    def feedback(self, ids, values):
        self.fed_back.append((np.asarray(ids).tolist(), np.asarray(values).tolist()))

    def state_dict(self):
        return {"t": self.t}

    def load_state_dict(self, state):
        self.t = state["t"]


# ---------------------------------------------------------------------------------------------
# mini-batch schedules


@settings(max_examples=30, deadline=None)
@given(
    size=st.integers(1, 130),
    batch=st.integers(1, 60),
    epochs=st.integers(1, 4),
    t=st.integers(0, 1000),
    client=st.integers(0, 99),
)
def test_local_batches_are_epochs_of_permutations(size, batch, epochs, t, client):
    rows = local_batches(7, t, client, size, epochs, batch)
    steps = math.ceil(size / batch)
    assert rows.shape == (epochs * steps, batch) and rows.dtype == np.int64
    for e in range(epochs):
        epoch = rows[e * steps : (e + 1) * steps].ravel()
        assert np.array_equal(np.sort(epoch[epoch >= 0]), np.arange(size))
        # padding (-1) only at the end of the epoch's last batch
        assert (epoch[size:] == -1).all() and (epoch[:size] >= 0).all()
    assert np.array_equal(rows, local_batches(7, t, client, size, epochs, batch))


def test_local_batches_depend_on_round_client_and_seed():
    base = local_batches(0, 3, 5, 100, 1, 10)
    for args in [(1, 3, 5), (0, 4, 5), (0, 3, 6)]:
        assert not np.array_equal(base, local_batches(*args, 100, 1, 10))
    assert local_batches(0, 0, 0, 0, 2, 10).shape == (0, 10)  # a client without data
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        local_batches(0, 0, 0, 10, 1, 0)


@settings(max_examples=30, deadline=None)
@given(
    size=st.integers(1, 130),
    batch=st.integers(1, 60),
    steps=st.integers(1, 12),
    t=st.integers(0, 1000),
)
def test_local_step_batches_are_full_batches_of_successive_permutations(size, batch, steps, t):
    rows = local_step_batches(3, t, 4, size, steps, batch)
    b = min(batch, size)
    assert rows.shape == (steps, b) and rows.dtype == np.int64
    per = size // b  # full batches per permutation; the remainder is dropped
    flat = rows.ravel()
    for lo in range(0, steps, per):
        block = rows[lo : lo + per].ravel()
        assert len(set(block.tolist())) == block.size  # a permutation's batches never overlap
    assert flat.min() >= 0 and flat.max() < size
    assert np.array_equal(rows, local_step_batches(3, t, 4, size, steps, batch))


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["blocked", "stacked", "vmap"])
def test_batched_engines_handle_clients_smaller_than_the_batch(engine):
    data = synthetic(sizes=[5, 30, 2, 23])  # batch 8: clients 0 and 2 use all their data
    schedules = [
        idx[local_step_batches(0, 0, c, idx.size, 3, 8)] for c, idx in enumerate(data.partition)
    ]
    assert [s.shape[1] for s in schedules] == [5, 8, 2, 8]
    start = stack(params_of(tiny_cnn()), len(schedules))
    reference = LocalTraining(tiny_cnn(), engine="sequential")(start, data.train, schedules, 0.1)
    batched = LocalTraining(tiny_cnn(), engine=engine, chunk=3)(start, data.train, schedules, 0.1)
    for k, v in reference.items():
        torch.testing.assert_close(batched[k], v, rtol=1e-5, atol=1e-6)


def test_local_step_batches_small_client_uses_all_its_data():
    rows = local_step_batches(0, 0, 0, 5, 3, 128)
    assert rows.shape == (3, 5)
    assert all(sorted(r.tolist()) == list(range(5)) for r in rows)
    with pytest.raises(ValueError, match="steps must be >= 1, got 0"):
        local_step_batches(0, 0, 0, 5, 0, 128)


# ---------------------------------------------------------------------------------------------
# engines


@pytest.mark.slow
@pytest.mark.parametrize("model_fn", [tiny_cnn, lambda: build_model("small_cnn", seed=3)])
def test_batched_engines_match_sequential(model_fn):
    model = model_fn()
    shape = (1, 8, 8) if model_fn is tiny_cnn else (1, 28, 28)
    data = synthetic(shape=shape, classes=4)
    ids = [4, 0, 2, 5, 1, 3]  # not sorted by size: exercises the engines' reordering
    schedules = schedules_for(data, ids)
    global_params = params_of(model)
    results = {}
    engines = [("sequential", None), ("vmap", None), ("vmap", 2)]
    engines += [("stacked", None), ("stacked", 1), ("stacked", 4), ("stacked", 100)]
    engines += [("blocked", None), ("blocked", 4)]
    for engine, chunk in engines:
        solver = MomentumSolver()
        start, state = solver.client_start(0, np.array(ids), global_params, 0.05)
        local = LocalTraining(model, engine=engine, chunk=chunk)
        out = local(start, data.train, schedules, 0.05, solver.local_step, state)
        results[engine, chunk] = out, state
    ref, ref_state = results["sequential", None]
    assert ref_state["steps"].tolist() == [len(s) for s in schedules]
    for key, (out, state) in results.items():
        for k in ref:
            assert out[k].shape == (len(ids), *global_params[k].shape)
            torch.testing.assert_close(out[k], ref[k], rtol=1e-4, atol=2e-5, msg=str(key))
        for k in ref_state:
            torch.testing.assert_close(state[k], ref_state[k], rtol=1e-4, atol=2e-5)
    # every client moved away from the global model, each differently
    last = list(ref)[-1]
    assert not torch.allclose(ref[last][0], ref[last][1])
    assert all(not torch.allclose(v, global_params[last]) for v in ref[last])


@pytest.mark.slow
def test_engines_start_each_client_from_its_own_parameters():
    """Per-client starting points (FedAWE's stale models) train like separate runs."""
    model = tiny_cnn()
    data = synthetic(shape=(1, 8, 8))
    ids = [3, 0, 5]
    schedules = schedules_for(data, ids)
    gp = params_of(model)
    start = {k: torch.stack([v + 0.1 * j for j in range(3)]) for k, v in gp.items()}
    kept = {k: v.clone() for k, v in start.items()}
    ref = LocalTraining(model, engine="sequential")(start, data.train, schedules, 0.05)
    for engine in ("stacked", "blocked", "vmap"):
        out = LocalTraining(model, engine=engine)(start, data.train, schedules, 0.05)
        for k in ref:
            torch.testing.assert_close(out[k], ref[k], rtol=1e-4, atol=2e-5)
    for j in range(3):  # client j alone, from its own start
        one = {k: v[j : j + 1] for k, v in start.items()}
        sequential = LocalTraining(model, engine="sequential")
        alone = sequential(one, data.train, schedules[j : j + 1], 0.05)
        for k in ref:
            torch.testing.assert_close(alone[k][0], ref[k][j])
    assert all(torch.equal(start[k], kept[k]) for k in start)  # the input is not modified
    with pytest.raises(ValueError, match="one entry per schedule"):
        LocalTraining(model)(stack(gp, 2), data.train, schedules, 0.05)


def test_sequential_engine_is_plain_sgd():
    """One client, one full-batch step: theta - lr * grad of the mean loss."""
    model = tiny_cnn()
    data = synthetic(sizes=[10], shape=(1, 8, 8))
    gp = params_of(model)
    schedules = [np.arange(10)[None, :]]
    out = LocalTraining(model, engine="sequential")(stack(gp, 1), data.train, schedules, 0.1)
    loss = nn.functional.cross_entropy(model(data.train.x), data.train.y)
    grads = torch.autograd.grad(loss, list(model.parameters()))
    for (k, p), g in zip(gp.items(), grads, strict=True):
        torch.testing.assert_close(out[k][0], p - 0.1 * g)


def test_auto_engine_and_chunk():
    assert LocalTraining(build_model("small_cnn")).engine == "blocked"
    logistic = build_model("logistic_regression", in_features=4, num_classes=2)
    assert LocalTraining(logistic).engine == "blocked"  # a flat Sequential: no per-client part
    layer_norm = nn.Sequential(nn.Flatten(), nn.LayerNorm(4), nn.Linear(4, 2))
    assert LocalTraining(layer_norm).engine == "vmap"  # LayerNorm has parameters: not stackable
    with pytest.raises(ValueError, match="engine 'stacked' supports"):
        LocalTraining(layer_norm, engine="stacked")
    model = build_model("mcmahan_cnn")
    split = TensorSplit(torch.zeros(2, 1, 28, 28), torch.zeros(2, dtype=torch.int64))
    # McMahan's CNN: ~17 MB of activations per batch of 50, so one client at a time
    assert 16e6 < activation_bytes(model, split.x[:1]) * 50 < 20e6
    assert LocalTraining(model).chunk_size(split, 50) == 1
    assert LocalTraining(model, chunk=3).chunk_size(split, 50) == 3


def test_blocked_engine_models():
    """Flat CNNs only; the ReLU/max-pool swap it makes gives the reference's gradients."""
    for name in ("small_cnn", "mcmahan_cnn", "mcmahan_cifar_cnn"):
        assert LocalTraining(build_model(name), engine="blocked").engine == "blocked"
    nested = nn.Sequential(nn.Sequential(nn.Conv2d(1, 2, 3)), nn.Flatten(), nn.Linear(72, 2))
    conv_after_linear = nn.Sequential(
        nn.Linear(4, 4), nn.Unflatten(1, (1, 2, 2)), nn.Conv2d(1, 1, 1)
    )

    class OwnForward(nn.Sequential):
        def forward(self, x):
            return super().forward(x) * 2

    own_forward = OwnForward(nn.Flatten(), nn.Linear(4, 2))
    for model in (nested, conv_after_linear, own_forward):
        with pytest.raises(ValueError, match="engine 'blocked' supports flat nn.Sequential"):
            LocalTraining(model, engine="blocked")
    # 2x2 windows with tied positive, tied negative and tied zero maxima: both orders of ReLU
    # and max-pool route the gradient to the same element
    model = nn.Sequential(
        nn.Conv2d(1, 2, 1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8, 3)
    )
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([1.0, -1.0]).view(2, 1, 1, 1))
        model[0].bias.zero_()
    pattern = torch.tensor([[1.0, 1, -1, -2], [1, 0, -3, -1], [2, 2, 0, 0], [2, -1, 0, -5]]).view(
        1, 1, 4, 4
    )
    x = torch.cat([pattern * s for s in (1.0, 2.0, 0.5, -1.0)])
    split = TensorSplit(x, torch.tensor([0, 1, 2, 0]))
    schedules = [np.arange(4)[None, :]]
    gp = params_of(model)
    ref = LocalTraining(model, engine="sequential")(stack(gp, 1), split, schedules, 0.5)
    out = LocalTraining(model, engine="blocked")(stack(gp, 1), split, schedules, 0.5)
    for k in ref:
        torch.testing.assert_close(out[k], ref[k], rtol=0, atol=1e-6)


def test_model_checks():
    with pytest.raises(ValueError, match="buffers"):
        check_model(nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)))
    with pytest.raises(ValueError, match="dropout with p=0.2"):
        check_model(build_model("small_cnn", dropout=0.2))
    check_model(build_model("small_cnn"))  # dropout 0 is fine
    with pytest.raises(ValueError, match="unknown engine 'jit'"):
        LocalTraining(tiny_cnn(), engine="jit")


# ---------------------------------------------------------------------------------------------
# aggregation, feedback, schedules


def two_client_updates(weights):
    a = {"w": torch.tensor([[1.0, 2.0]]), "b": torch.tensor([0.5])}
    b = {"w": torch.tensor([[3.0, -2.0]]), "b": torch.tensor([-1.5])}
    stacked = {k: torch.stack([a[k], b[k]]) for k in a}
    start = {k: torch.zeros_like(v) for k, v in stacked.items()}
    ids, steps = np.array([2, 7]), np.array([1, 1])
    return a, b, ClientUpdates(0, 0.1, ids, np.array(weights), start, stacked, {}, steps)


def test_weighted_sum_is_eq15_on_a_hand_made_case():
    a, b, updates = two_client_updates([0.25, 0.75])
    glob = {"w": torch.tensor([[100.0, 100.0]]), "b": torch.tensor([100.0])}
    new = FedAvg().aggregate(glob, updates)
    assert torch.equal(new["w"], torch.tensor([[2.5, -1.0]]))  # 0.25 * a + 0.75 * b
    assert torch.equal(new["b"], torch.tensor([-1.0]))
    # the delta form agrees when the weights sum to one
    delta = FedAvg("weighted_delta").aggregate(glob, updates)
    for k in new:
        torch.testing.assert_close(delta[k], new[k])


def test_weighted_delta_with_unnormalised_weights_and_server_lr():
    a, b, updates = two_client_updates([2.0, 0.5])
    glob = {"w": torch.tensor([[1.0, 1.0]]), "b": torch.tensor([0.0])}
    new = FedAvg("weighted_delta", server_lr=0.5).aggregate(glob, updates)
    for k in glob:
        expected = glob[k] + 0.5 * (2.0 * (a[k] - glob[k]) + 0.5 * (b[k] - glob[k]))
        torch.testing.assert_close(new[k], expected)
    with pytest.raises(ValueError, match="server_lr must be > 0"):
        FedAvg("weighted_delta", server_lr=0.0)
    with pytest.raises(ValueError, match="needs aggregation='weighted_delta'"):
        FedAvg("weighted_sum", server_lr=0.5)
    with pytest.raises(ValueError, match="unknown aggregation 'median'"):
        FedAvg("median")


def test_empty_selection_keeps_the_global_model():
    glob = {"w": torch.ones(1, 2)}
    none = {"w": torch.zeros(0, 1, 2)}
    empty = ClientUpdates(0, 0.1, np.zeros(0, np.int64), np.zeros(0), none, none, {}, np.zeros(0))
    assert FedAvg().aggregate(glob, empty) is glob
    assert FedAvg("weighted_delta").aggregate(glob, empty) is glob
    assert update_norms(glob, empty).shape == (0,)


def test_update_norms():
    a, b, updates = two_client_updates([0.5, 0.5])
    glob = {"w": torch.zeros(1, 2), "b": torch.zeros(1)}
    np.testing.assert_allclose(update_norms(glob, updates), [math.sqrt(5.25), math.sqrt(15.25)])


def test_lr_schedules():
    paper = ExponentialDecay()
    assert paper(0) == 0.1
    assert paper(10) == pytest.approx(0.1 * 0.998**10, rel=1e-15)
    assert paper(1000) == pytest.approx(0.1 * math.exp(1000 * math.log(0.998)), rel=1e-12)
    assert all(paper(t + 1) < paper(t) for t in range(50))
    fedsum = InverseSqrtDecay(lr0=0.01, period=10)
    assert fedsum(0) == 0.01 and fedsum(30) == pytest.approx(0.005)
    assert ConstantLR(0.3)(123) == 0.3
    assert ExponentialDecay(0.2, 0.5).config() == {"name": "exponential", "lr0": 0.2, "decay": 0.5}
    with pytest.raises(ValueError, match="decay must be <= 1.0"):
        ExponentialDecay(0.1, 1.5)
    with pytest.raises(ValueError, match="lr0 must be > 0"):
        ExponentialDecay(0.0)


def test_rounds_to_target():
    assert rounds_to_target([0.5, 0.8, 0.97, 0.96, 0.99], 0.97) == 3
    assert rounds_to_target([0.5, 0.8], 0.97) is None
    assert rounds_to_target([0.1, 0.2, 0.975], 0.975, rounds=[0, 5, 10]) == 10
    assert rounds_to_target({0: 0.1, 2: None, 4: 0.98}, 0.97) == 4
    assert rounds_to_target([], 0.5) is None
    with pytest.raises(ValueError, match="rounds has 2 entries but accuracy has 3"):
        rounds_to_target([0.1, 0.2, 0.3], 0.5, rounds=[1, 2])


# ---------------------------------------------------------------------------------------------
# the trainer


def make_trainer(seed=0, engine="auto", sampler=None, **kw):
    data = synthetic(shape=(1, 8, 8))
    sampler = sampler or ScriptedSampler(
        6, [([0, 3], [0.4, 0.6]), ([1, 2, 5], [0.2, 0.3, 0.5]), ([4], [1.0])]
    )
    settings = TrainSettings(
        rounds=kw.pop("rounds", 4), local_epochs=1, batch_size=16, seed=seed, engine=engine, **kw
    )
    return FederatedTrainer(tiny_cnn(), data, sampler, settings, lr_schedule=ConstantLR(0.1))


@pytest.mark.slow
def test_trainer_records_and_feedback():
    trainer = make_trainer(eval_every=3, rounds=4)
    history = trainer.run()
    assert trainer.round == 4
    assert history["eval_round"] == [0, 3, 4]  # initial, every 3 rounds, and the last round
    assert history["selected"] == [[0, 3], [1, 2, 5], [4], [0, 3]]
    assert history["weights"][1] == [0.2, 0.3, 0.5]
    assert history["lr"] == [0.1] * 4
    assert all(0.0 <= a <= 1.0 for a in history["test_accuracy"])
    fed = trainer.sampler.fed_back
    assert [ids for ids, _ in fed] == history["selected"]
    assert [v for _, v in fed] == history["update_norms"]
    assert all(v > 0 for _, vals in fed for v in vals)


@pytest.mark.slow
def test_trainer_is_deterministic_and_engine_independent():
    runs = {}
    for engine in ("sequential", "stacked", "vmap"):
        trainer = make_trainer(engine=engine)
        runs[engine] = trainer.run(), trainer.params
    again = make_trainer(engine="stacked")
    assert again.run() == runs["stacked"][0]  # same seed: identical numbers
    for k, v in again.params.items():
        assert torch.equal(v, runs["stacked"][1][k])
    for engine in ("sequential", "vmap"):
        for k, v in runs[engine][1].items():
            torch.testing.assert_close(v, runs["stacked"][1][k], rtol=1e-4, atol=1e-5)
    other = make_trainer(seed=1, engine="stacked")
    other.run()
    assert not torch.equal(other.params["0.weight"], runs["stacked"][1]["0.weight"])


@pytest.mark.slow
def test_trainer_learns():
    trainer = make_trainer(rounds=15)
    history = trainer.run()
    assert history["test_accuracy"][-1] > history["test_accuracy"][0] + 0.3
    assert history["test_loss"][-1] < history["test_loss"][0]


@pytest.mark.slow
def test_trainer_state_roundtrip_continues_identically():
    full = make_trainer(rounds=5)
    full.run()
    part = make_trainer(rounds=5)
    for _ in range(2):
        part.run_round()
    tensors, state = part.state_dict()
    resumed = make_trainer(rounds=5)
    resumed.load_state_dict(tensors, state)
    resumed.run()
    assert resumed.history == full.history
    for k in full.params:
        assert torch.equal(resumed.params[k], full.params[k])
    with pytest.raises(ValueError, match="do not match the model"):
        resumed.load_state_dict({"params.0.weight": torch.zeros(1)}, state)


def test_trainer_argument_checks():
    with pytest.raises(ValueError, match="sampler has n=3 clients but the partition has 6"):
        make_trainer(sampler=ScriptedSampler(3, [([0], [1.0])]))
    with pytest.raises(ValueError, match="local_epochs must be >= 1"):
        TrainSettings(rounds=1, local_epochs=0)
    with pytest.raises(ValueError, match="unknown loss 'hinge'"):
        TrainSettings(rounds=1, loss="hinge")
    with pytest.raises(ValueError, match=r"partition\[0\] has indices outside"):
        FederatedData(
            TensorSplit(torch.zeros(3, 1), torch.zeros(3)),
            TensorSplit(torch.zeros(1, 1), torch.zeros(1)),
            [np.array([0, 3])],
        )


@pytest.mark.slow
def test_client_losses_match_a_direct_computation():
    trainer = make_trainer(rounds=2, client_loss_samples=7)
    trainer.run()
    assert len(trainer.history["client_losses"]) == len(trainer.history["eval_round"]) == 3
    split = trainer.client_loss_split()
    start = 0
    for k, idx in enumerate(trainer.data.partition):
        count = min(len(idx), 7)
        own = TensorSplit(split.x[start : start + count], split.y[start : start + count])
        # the subset is drawn from client k's own samples
        assert set(own.y.tolist()) <= set(trainer.data.train.y[idx].tolist())
        with torch.no_grad():
            out = torch.func.functional_call(trainer.model, trainer.params, (own.x,))
            direct = float(nn.functional.cross_entropy(out, own.y))
        assert trainer.history["client_losses"][-1][k] == pytest.approx(direct, rel=1e-5)
        start += count


def test_client_losses_over_all_samples_need_no_copy_and_agree():
    full = make_trainer(rounds=1, client_loss_samples=10**6)
    full.run()
    assert full._loss_split is full.data.train  # every sample counts: evaluated in place
    for k, idx in enumerate(full.data.partition):
        with torch.no_grad():
            out = torch.func.functional_call(full.model, full.params, (full.data.train.x[idx],))
            direct = float(nn.functional.cross_entropy(out, full.data.train.y[idx]))
        assert full.history["client_losses"][-1][k] == pytest.approx(direct, rel=1e-5)


class RunningSum(Algorithm):
    """FedAvg that also keeps a server-side running sum of the aggregates (checkpointed state)."""

    name = "running_sum"

    def setup(self, n_clients, global_params):
        self.total = {k: torch.zeros_like(v) for k, v in global_params.items()}
        self.rounds = torch.zeros(1)

    def aggregate(self, global_params, updates):
        new = FedAvg().aggregate(global_params, updates)
        for k, v in new.items():
            self.total[k] += v
        self.rounds += 1
        return new

    def state_dict(self):
        return {**{f"total.{k}": v for k, v in self.total.items()}, "rounds": self.rounds}


@pytest.mark.slow
def test_trainer_fixed_local_steps_and_stateful_algorithm_resume():
    def trainer():
        t = make_trainer(rounds=4, local_steps=3)
        t.algorithm = RunningSum()
        t.algorithm.setup(6, t.params)
        return t

    full = trainer()
    full.run()
    assert full.algorithm.rounds.item() == 4
    assert all(n > 0 for vals in full.history["update_norms"] for n in vals)
    part = trainer()
    part.run_round()
    tensors, state = part.state_dict()
    assert "algorithm.rounds" in tensors
    resumed = trainer()
    resumed.load_state_dict(tensors, state)
    resumed.run()
    assert resumed.history == full.history
    for k, v in full.algorithm.total.items():
        assert torch.equal(resumed.algorithm.total[k], v)
    with pytest.raises(ValueError, match="state must have the keys"):
        resumed.algorithm.load_state_dict({})


def test_client_losses_need_the_setting():
    with pytest.raises(ValueError, match="client_loss_samples > 0"):
        make_trainer().client_losses()
    with pytest.raises(ValueError, match="client_loss_samples must be >= 0"):
        TrainSettings(rounds=1, client_loss_samples=-1)


@pytest.mark.parametrize("index_shape", [(7,), (3, 5), (2, 0), (2, 3, 4)])
def test_gather_rows_is_advanced_indexing_bit_for_bit(index_shape):
    # the batched engine's fast gather must not change a single value (cached runs depend on it)
    gen = torch.Generator().manual_seed(0)
    table = torch.randn(50, 1, 4, 3, generator=gen)
    labels = torch.randint(0, 10, (50,), generator=gen)
    index = torch.randint(0, 50, index_shape, generator=gen)
    assert torch.equal(gather_rows(table, index), table[index])
    assert torch.equal(gather_rows(labels, index), labels[index])
