"""The ``grouped`` training engine (aoi_fl.core.engines): all clients' convolutions as one grouped
convolution per layer, and ``auto``'s choice per device.

Tolerance against the ``sequential`` reference: the engines differ only in the order of the
float32 sums inside convolutions and matrix products (each sum rounds to about 6e-8 relative),
which a few SGD steps carry forward without much growth. Over the at most 12 steps here the
largest difference seen was 1.2e-6 (SmallCNN; 3e-7 for the small models) on parameters that
moved by up to 1.5; no difference went past a fifth of rtol 1e-5 / atol 1e-6, while a layout
mistake (a client's channels or weights mixed with another's) moves the parameters by 1e-2 or
more.
"""

import numpy as np
import pytest
import torch
from torch import nn

from aoi_fl.core.device import resolve_device
from aoi_fl.core.engines import (
    GPU_GROUPED_CHUNK_CLIENTS,
    LOSSES,
    LocalTraining,
    _blocked_layers,
    _grouped_gradients,
    local_batches,
)
from aoi_fl.core.models import build_model
from aoi_fl.core.tensors import TensorSplit

TOL = {"rtol": 1e-5, "atol": 1e-6}
SIZES = [37, 12, 51, 25]  # batch 10, 2 epochs: 8, 4, 12 and 6 steps, every epoch a short batch
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="checks CUDA kernels")


def two_convs(lrn: bool = False) -> nn.Module:
    """Two channels in, a grouped bias-free second convolution, and optionally a
    LocalResponseNorm whose window (3 channels) would reach into a neighbouring client's
    channels if the engine let it."""
    gen = torch.Generator().manual_seed(1)
    model = nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        *([nn.LocalResponseNorm(3, alpha=0.5, k=1.0)] if lrn else []),
        nn.Conv2d(4, 6, 3, padding=1, groups=2, bias=False),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(6 * 4 * 4, 5),
        nn.ReLU(),
        nn.Linear(5, 3),
    )
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    return model


def clients_data(shape=(2, 8, 8), classes=3, sizes=SIZES, batch=10, epochs=2):
    """Data of ``len(sizes)`` clients (client i's samples contiguous) and their schedules."""
    gen = torch.Generator().manual_seed(0)
    total = sum(sizes)
    data = TensorSplit(
        torch.randn(total, *shape, generator=gen),
        torch.randint(0, classes, (total,), generator=gen),
    )
    offsets = np.cumsum([0, *sizes])
    schedules = []
    for i, size in enumerate(sizes):
        rows = local_batches(0, 0, i, size, epochs, batch)
        schedules.append(np.where(rows >= 0, rows + offsets[i], -1))
    return data, schedules


def own_starts(model: nn.Module, count: int) -> dict[str, torch.Tensor]:
    """A different starting point per client, so that a client given another's parameters shows."""
    return {
        k: torch.stack([v.detach() + 0.01 * j for j in range(count)])
        for k, v in model.named_parameters()
    }


def pick(params: dict[str, torch.Tensor], clients: list[int]) -> dict[str, torch.Tensor]:
    return {k: v[clients] for k, v in params.items()}


@pytest.mark.parametrize(
    ("model_fn", "shape", "lr"),
    [
        (two_convs, (2, 8, 8), 0.1),
        (lambda: two_convs(lrn=True), (2, 8, 8), 0.1),
        # unnormalised 28x28 noise gives SmallCNN large gradients: a larger lr diverges, and
        # a diverging run amplifies rounding differences past any float tolerance
        (lambda: build_model("small_cnn", num_classes=3, seed=2), (1, 28, 28), 0.01),
    ],
    ids=["two_convs", "local_response_norm", "small_cnn"],
)
def test_grouped_matches_sequential(model_fn, shape, lr):
    model = model_fn()
    data, schedules = clients_data(shape=shape)
    start = own_starts(model, len(schedules))
    ref = LocalTraining(model, engine="sequential")(start, data, schedules, lr)
    for chunk in (None, 2, 1):  # one chunk, two chunks, a client at a time
        out = LocalTraining(model, engine="grouped", chunk=chunk)(start, data, schedules, lr)
        for k in ref:
            torch.testing.assert_close(out[k], ref[k], **TOL)
    last = list(ref)[-1]
    assert all(not torch.allclose(ref[last][j], start[last][j]) for j in range(len(schedules)))


def test_padded_call_gives_each_real_client_its_own_gradient():
    """The CUDA padding (copies of the first client, dropped afterwards), run here on the CPU."""
    model = two_convs()
    data, schedules = clients_data()
    params = own_starts(model, 3)
    index = torch.from_numpy(np.stack([s[0] for s in schedules[:3]]))
    x, y, mask = data.x[index], data.y[index], torch.ones(index.shape)
    sections, loss = _blocked_layers(model), LOSSES["cross_entropy"]
    plain = _grouped_gradients(sections, loss, None)(params, x, y, mask)
    padded = _grouped_gradients(sections, loss, 5)(params, x, y, mask)
    for k in plain:
        assert padded[k].shape == plain[k].shape == params[k].shape
        torch.testing.assert_close(padded[k], plain[k], **TOL)


def test_a_client_does_not_depend_on_its_partners_on_the_cpu():
    """Unpadded on the CPU, so the kernels see other shapes with partners: equal to tolerance."""
    model = two_convs()
    data, schedules = clients_data()
    start = own_starts(model, len(schedules))
    local = LocalTraining(model, engine="grouped")
    alone = local(pick(start, [3]), data, schedules[3:4], 0.1)
    partners = local(pick(start, [0, 3, 1]), data, [schedules[i] for i in (0, 3, 1)], 0.1)
    for k in alone:
        torch.testing.assert_close(partners[k][1], alone[k][0], **TOL)


@CUDA
def test_a_client_has_the_same_bits_alone_with_partners_and_in_another_order_on_cuda():
    """Every CUDA call is padded to the chunk, so the kernels see the same shapes whatever the
    other clients: client 3's parameters come out bit for bit the same."""
    device = resolve_device("cuda")  # deterministic cuDNN kernels, no TF32
    model = two_convs().to(device)
    data, schedules = clients_data()
    data = TensorSplit(data.x.to(device), data.y.to(device))
    start = {k: v.to(device) for k, v in own_starts(model, len(schedules)).items()}
    local = LocalTraining(model, engine="grouped", chunk=3)
    # client 3 (6 steps) is the first, second and third of its chunk once ordered by steps
    runs = {
        "alone": ([3], 0),
        "with partners": ([0, 3, 1], 1),
        "another order": ([1, 2, 3, 0], 2),  # two chunks: [2, 0, 3] and [1]
    }
    got = {}
    for name, (clients, position) in runs.items():
        out = local(pick(start, clients), data, [schedules[i] for i in clients], 0.1)
        got[name] = {k: v[position] for k, v in out.items()}
    for name, params in got.items():
        for k, v in params.items():
            assert torch.equal(v, got["alone"][k]), f"{k} {name}"


@CUDA
def test_grouped_agrees_with_blocked_on_cuda():
    device = resolve_device("cuda")
    model = build_model("small_cnn", num_classes=3, seed=2).to(device)
    data, schedules = clients_data(shape=(1, 28, 28))
    data = TensorSplit(data.x.to(device), data.y.to(device))
    start = {k: v.to(device) for k, v in own_starts(model, len(schedules)).items()}
    local = LocalTraining(model)
    grouped = local(start, data, schedules, 0.01)  # a larger lr diverges: see above
    assert local.engine == "grouped"  # auto on CUDA
    blocked = LocalTraining(model, engine="blocked")(start, data, schedules, 0.01)
    for k in blocked:
        torch.testing.assert_close(grouped[k], blocked[k], **TOL)


@CUDA
def test_cuda_chunks_of_grouped_stay_within_the_client_cap():
    """Every CUDA call of ``grouped`` is padded to its chunk, so the activation budget alone
    (13,500 clients of a logistic regression) would waste nearly all of a small call."""
    device = resolve_device("cuda")
    split = TensorSplit(torch.zeros(2, 1, 28, 28, device=device), torch.zeros(2, device=device))
    logistic = build_model("logistic_regression", in_features=784, num_classes=10).to(device)
    assert LocalTraining(logistic).chunk_size(split, 50) == GPU_GROUPED_CHUNK_CLIENTS
    assert LocalTraining(logistic, engine="blocked").chunk_size(split, 50) > 10_000
    assert LocalTraining(build_model("mcmahan_cnn").to(device)).chunk_size(split, 50) == 120


def test_auto_picks_per_device():
    """The CPU's choice is unchanged (cached results depend on its bits); a CUDA device gets
    ``grouped`` for the models ``blocked`` supports, which no GPU is needed to ask."""
    model = build_model("small_cnn")
    local = LocalTraining(model)
    assert local.engine == local.engine_for("cpu") == "blocked"
    assert local.engine_for(torch.device("cuda")) == local.engine_for("cuda:1") == "grouped"
    assert LocalTraining(model, device="cuda").engine == "grouped"
    assert LocalTraining(build_model("mcmahan_cifar_cnn")).engine_for("cuda") == "grouped"
    data, schedules = clients_data(shape=(1, 28, 28), classes=10, sizes=[12, 7], epochs=1)
    cuda_intent = LocalTraining(model, device="cuda")
    cuda_intent(own_starts(model, 2), data, schedules, 0.1)
    assert cuda_intent.engine == "blocked"  # the data were on the CPU: the engine used
    nested = nn.Sequential(nn.Sequential(nn.Conv2d(1, 2, 3)), nn.Flatten(), nn.Linear(72, 2))
    assert LocalTraining(nested).engine_for("cuda") == "stacked"
    layer_norm = nn.Sequential(nn.Flatten(), nn.LayerNorm(4), nn.Linear(4, 2))
    assert LocalTraining(layer_norm).engine_for("cuda") == "vmap"
    assert LocalTraining(model, engine="blocked").engine_for("cuda") == "blocked"
    with pytest.raises(ValueError, match="engine 'grouped' supports flat nn.Sequential"):
        LocalTraining(nested, engine="grouped")
