import math

import pytest
import torch
from torch.func import functional_call, grad, vmap

from aoi_fl.core.models import (
    MODELS,
    McMahanCifarCNN,
    SmallCNN,
    build_model,
    count_parameters,
)

# (registry name, kwargs, input shape without batch, output shape without batch)
CASES = [
    ("mcmahan_cnn", {}, (1, 28, 28), (10,)),
    ("mcmahan_cifar_cnn", {}, (3, 32, 32), (10,)),
    ("mcmahan_cifar_cnn", {"num_classes": 100}, (3, 32, 32), (100,)),
    ("mcmahan_cifar_cnn", {"input_size": 24}, (3, 24, 24), (10,)),
    ("small_cnn", {}, (1, 28, 28), (10,)),
    ("logistic_regression", {"in_features": 784, "num_classes": 10}, (1, 28, 28), (10,)),
    ("linear_regression", {"in_features": 60}, (60,), ()),
    ("fedsum_cifar_cnn", {}, (3, 32, 32), (10,)),
]
IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for name, kw, _, _ in CASES]
# one case per architecture: the variants only change layer widths
VMAP_CASES = [CASES[i] for i in (0, 1, 4, 5, 6)]
VMAP_IDS = [IDS[i] for i in (0, 1, 4, 5, 6)]


@pytest.mark.parametrize(
    "name, kwargs, count",
    [
        # McMahan et al.'s MNIST CNN; known public ports that differ have 582,026
        ("mcmahan_cnn", {}, 1_663_370),
        # TF-tutorial CIFAR net: 'same' 5x5 convs, FC 384/192
        ("mcmahan_cifar_cnn", {"num_classes": 10}, 1_756_426),
        ("mcmahan_cifar_cnn", {"num_classes": 100}, 1_773_796),
        ("mcmahan_cifar_cnn", {"num_classes": 10, "input_size": 24}, 1_068_298),
        ("mcmahan_cifar_cnn", {"num_classes": 100, "input_size": 24}, 1_085_668),
        # FedSUM Table 2 MNIST CNN
        ("small_cnn", {}, 51_480),
        # FedSUM Table 2 CIFAR-10 CNN (its layers give 551,786)
        ("fedsum_cifar_cnn", {}, 551_786),
        ("logistic_regression", {"in_features": 784, "num_classes": 10}, 7_850),
        ("linear_regression", {"in_features": 60}, 61),
    ],
)
def test_parameter_counts(name, kwargs, count):
    assert count_parameters(build_model(name, **kwargs)) == count


@pytest.mark.slow
@pytest.mark.parametrize("name, kwargs, in_shape, out_shape", CASES, ids=IDS)
def test_output_shape_and_no_buffers(name, kwargs, in_shape, out_shape):
    model = build_model(name, **kwargs)
    out = model(torch.zeros(5, *in_shape))
    assert out.shape == (5, *out_shape) and out.dtype == torch.float32
    assert list(model.buffers()) == []  # nothing besides parameters to carry across clients


@pytest.mark.parametrize("name, kwargs, in_shape, out_shape", CASES, ids=IDS)
def test_seeded_init_is_deterministic_and_leaves_global_rng_alone(
    name, kwargs, in_shape, out_shape
):
    before = torch.random.get_rng_state()
    a = build_model(name, seed=7, **kwargs).state_dict()
    b = build_model(name, seed=7, **kwargs).state_dict()
    c = build_model(name, seed=8, **kwargs).state_dict()
    assert torch.equal(before, torch.random.get_rng_state())
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert all(not torch.equal(a[k], c[k]) for k in a)


def test_init_follows_torch_default_bounds():
    # Kaiming-uniform with a = sqrt(5) and the bias rule both give U(-1/sqrt(fan_in), +)
    model = build_model("mcmahan_cnn", seed=0)
    for module in model.modules():
        if isinstance(module, torch.nn.Conv2d | torch.nn.Linear):
            bound = 1 / math.sqrt(module.weight[0].numel())
            for p in (module.weight, module.bias):
                assert p.abs().max() <= bound
            w = module.weight.detach()
            # sd of U(-b, b) is b / sqrt(3); every layer here has >= 800 weights
            assert abs(w.std().item() / (bound / math.sqrt(3)) - 1) < 0.1
            assert w.device.type == "cpu"


def stacked(models):
    names = [n for n, _ in models[0].named_parameters()]
    return {n: torch.stack([dict(m.named_parameters())[n].detach() for m in models]) for n in names}


@pytest.mark.slow
@pytest.mark.parametrize("name, kwargs, in_shape, out_shape", VMAP_CASES, ids=VMAP_IDS)
def test_vmap_over_stacked_parameters_matches_loop(name, kwargs, in_shape, out_shape):
    clients = [build_model(name, seed=s, **kwargs) for s in range(3)]
    x = torch.randn(3, 4, *in_shape, generator=torch.Generator().manual_seed(0))
    base = clients[0]

    def forward(params, xb):
        return functional_call(base, params, (xb,))

    batched = vmap(forward)(stacked(clients), x)
    looped = torch.stack([m(xb) for m, xb in zip(clients, x, strict=True)])
    torch.testing.assert_close(batched, looped, rtol=1e-4, atol=1e-5)

    def loss(params, xb):
        return forward(params, xb).square().mean()

    grads = vmap(grad(loss))(stacked(clients), x)
    clients[1].zero_grad()
    clients[1](x[1]).square().mean().backward()
    for n, p in clients[1].named_parameters():
        torch.testing.assert_close(grads[n][1], p.grad, rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_small_cnn_dropout_is_active_in_training_only():
    # catches dropout layers that never drop (p ignored, or always in eval mode), that drop
    # in eval mode too, that drop the wrong fraction, or that do not rescale the kept units
    x = torch.randn(8, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    model = SmallCNN(dropout=0.2, seed=3)
    plain = SmallCNN(dropout=0.0, seed=3)  # the same parameters: dropout has none
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model.eval()
        first = model(x)
        assert torch.equal(first, model(x))  # eval: deterministic ...
        torch.testing.assert_close(first, plain.eval()(x), rtol=0, atol=0)  # ... and no dropout
        model.train()
        train = model(x)
        assert not torch.equal(train, model(x))  # a new mask on every call
        assert (train - first).abs().max() > 1e-3
        seen = []
        hooks = [
            m.register_forward_hook(lambda mod, inp, out: seen.append((inp[0], out)))
            for m in model
            if isinstance(m, torch.nn.Dropout)
        ]
        model(x)
        for h in hooks:
            h.remove()
        plain.train()
        assert torch.equal(plain(x), first)  # dropout = 0 is the identity in training too
    assert len(seen) == 2
    for inp, out in seen:
        live = inp != 0
        dropped = (out == 0) & live
        count = int(live.sum())
        assert count >= 200
        # binomial: the zeroed fraction of the live units is p = 0.2 within 5 standard errors
        assert abs(dropped.sum().item() / count - 0.2) < 5 * math.sqrt(0.2 * 0.8 / count)
        kept = live & ~dropped
        torch.testing.assert_close(out[kept], inp[kept] / 0.8)  # inverted dropout: 1 / (1 - p)


@pytest.mark.slow
def test_small_cnn_dropout_needs_vmap_randomness():
    # catches per-client batching that shares one dropout mask across clients (randomness
    # "same"), or that silently runs dropout where vmap forbids random operations
    model = SmallCNN(dropout=0.2)
    twin = stacked([model, model])  # two clients with identical parameters
    x = torch.randn(1, 3, 1, 28, 28, generator=torch.Generator().manual_seed(1)).expand(
        2, 3, 1, 28, 28
    )

    def forward(randomness):
        return vmap(lambda p, xb: functional_call(model, p, (xb,)), randomness=randomness)(twin, x)

    with torch.random.fork_rng():
        torch.manual_seed(0)
        different = forward("different")
        assert different.shape == (2, 3, 10)
        assert (different[0] - different[1]).abs().max() > 1e-3  # each client its own mask
        same = forward("same")
        torch.testing.assert_close(same[0], same[1], rtol=1e-5, atol=1e-6)  # one shared mask
        with pytest.raises(RuntimeError, match="randomness"):
            forward("error")  # the default: dropout must be asked for explicitly
        model.eval()
        evaluated = forward("error")  # no random operation in eval mode
    torch.testing.assert_close(evaluated[0], model(x[0]), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(evaluated[0], evaluated[1], rtol=1e-5, atol=1e-6)


def test_build_model_unknown_name_lists_valid():
    with pytest.raises(ValueError) as err:
        build_model("resnet18")
    for name in MODELS:
        assert name in str(err.value)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: McMahanCifarCNN(input_size=28), "input_size must be 24 or 32"),
        (lambda: McMahanCifarCNN(num_classes=1), "num_classes must be >= 2"),
        (lambda: SmallCNN(dropout=1.0), "dropout must be <= 0.99"),
        (lambda: build_model("logistic_regression", in_features=0, num_classes=3), "in_features"),
        (
            lambda: build_model("linear_regression", in_features=2, init="ones"),
            "unknown init 'ones'; valid: default, zeros",
        ),
    ],
)
def test_bad_arguments(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_zero_init_sets_every_parameter_to_zero():
    # Algorithm 1 of the agnostic-FedAvg paper starts from theta_0 = 0
    model = build_model("logistic_regression", in_features=5, num_classes=3, seed=4, init="zeros")
    assert all(torch.count_nonzero(p) == 0 for p in model.parameters())
    assert count_parameters(model) == 18
