"""The models used in the experiments, with seeded initialisation.

Every model is built on the ``meta`` device and then initialised from a private
``torch.Generator`` seeded with ``seeding.derived_seed(seed, "model_init")``, so building a model
never reads or advances torch's global RNG. The initialisation scheme is PyTorch's default for
``Conv2d`` / ``Linear`` (Kaiming-uniform weights with a = sqrt(5), biases uniform in
+-1/sqrt(fan_in)), drawn from that generator.

No model has buffers (no BatchNorm running statistics): the trainer batches clients with
``torch.func.functional_call`` over stacked parameters under ``torch.func.vmap``, and a model's
whole state is its parameters.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import torch
from torch import nn

from aoi_fl.core.seeding import derived_seed
from aoi_fl.core.validation import require_choice, require_int, require_real


def init_parameters(model: nn.Module, seed: int) -> nn.Module:
    """Materialise ``model`` on the CPU and draw every Conv2d/Linear parameter from ``seed``."""
    gen = torch.Generator().manual_seed(derived_seed(seed, "model_init"))
    model.to_empty(device="cpu")
    for module in model.modules():
        if isinstance(module, nn.Conv2d | nn.Linear):
            nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5), generator=gen)
            if module.bias is not None:
                fan_in = module.weight[0].numel()
                bound = 1.0 / math.sqrt(fan_in)
                nn.init.uniform_(module.bias, -bound, bound, generator=gen)
    return model


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


class _SeededSequential(nn.Sequential):
    """A Sequential whose layers are created on ``meta`` and then initialised from ``seed``."""

    def __init__(self, seed: int, layers: Callable[[], list[nn.Module]]) -> None:
        with torch.device("meta"):
            super().__init__(*layers())
        init_parameters(self, seed)


def _conv_relu_pool(c_in: int, c_out: int, kernel: int) -> list[nn.Module]:
    """A 'same'-padded conv, ReLU and 2x2 max-pool: the block of the MNIST and FedSUM CNNs."""
    return [nn.Conv2d(c_in, c_out, kernel, padding=kernel // 2), nn.ReLU(), nn.MaxPool2d(2)]


def _two_blocks_then_mlp(
    c_in: int, widths: tuple[int, int], kernel: int, side: int, hidden: tuple[int, ...], out: int
) -> list[nn.Module]:
    """Two conv-ReLU-pool blocks, then fully connected layers of widths ``hidden`` with ReLUs
    between them, to ``out`` logits (``side``: the feature map's side after the pools)."""
    fc = (side * side * widths[1], *hidden)
    return [
        *_conv_relu_pool(c_in, widths[0], kernel),
        *_conv_relu_pool(*widths, kernel),
        nn.Flatten(),
        *(layer for a, b in itertools.pairwise(fc) for layer in (nn.Linear(a, b), nn.ReLU())),
        nn.Linear(fc[-1], out),
    ]


class McMahanCNN(_SeededSequential):
    """The MNIST "CNN as in McMahan et al." (2017): 1,663,370 parameters.

    Input (B, 1, 28, 28). conv 5x5 32 'same' -> ReLU -> maxpool 2 -> conv 5x5 64 'same' ->
    ReLU -> maxpool 2 -> FC 3136->512 -> ReLU -> FC 512->10.
    """

    def __init__(self, num_classes: int = 10, seed: int = 0) -> None:
        num_classes = require_int("num_classes", num_classes, minimum=2)
        super().__init__(seed, lambda: _two_blocks_then_mlp(1, (32, 64), 5, 7, (512,), num_classes))


class McMahanCifarCNN(_SeededSequential):
    """McMahan et al.'s CIFAR model, the TensorFlow CIFAR-10 tutorial network.

    conv 5x5 64 'same' -> ReLU -> maxpool 3x3/2 -> LRN -> conv 5x5 64 'same' -> ReLU -> LRN ->
    maxpool 3x3/2 -> FC 384 -> ReLU -> FC 192 -> ReLU -> FC num_classes.

    ``input_size`` is the side of the square input: 32 (default; the full CIFAR image, no crop
    pipeline needed) or 24 (the tutorial's and McMahan's random 24x24 crops). Parameter counts:
    1,756,426 (32, 10 classes), 1,773,796 (32, 100 classes), 1,068,298 (24, 10 classes),
    1,085,668 (24, 100 classes). The 3x3 stride-2 pools use padding 1, which gives TF 'SAME'
    output sizes (32 -> 16 -> 8, 24 -> 12 -> 6).

    Normalisation is local response normalisation with the tutorial's constants (TF
    ``depth_radius=4, bias=1, alpha=0.001/9, beta=0.75`` = torch ``size=9, alpha=0.001,
    beta=0.75, k=1``). It has no parameters and no running statistics, so it works under
    ``torch.func.vmap``; BatchNorm is avoided on purpose (per-client batched training through
    ``functional_call`` must not carry running statistics).
    """

    def __init__(self, num_classes: int = 10, input_size: int = 32, seed: int = 0) -> None:
        num_classes = require_int("num_classes", num_classes, minimum=2)
        if input_size not in (24, 32):
            raise ValueError(f"input_size must be 24 or 32, got {input_size!r}")
        side = input_size // 4  # two stride-2 pools
        super().__init__(
            seed,
            lambda: [
                nn.Conv2d(3, 64, 5, padding=2),
                nn.ReLU(),
                nn.MaxPool2d(3, stride=2, padding=1),
                nn.LocalResponseNorm(9, alpha=0.001, beta=0.75, k=1.0),
                nn.Conv2d(64, 64, 5, padding=2),
                nn.ReLU(),
                nn.LocalResponseNorm(9, alpha=0.001, beta=0.75, k=1.0),
                nn.MaxPool2d(3, stride=2, padding=1),
                nn.Flatten(),
                nn.Linear(side * side * 64, 384),
                nn.ReLU(),
                nn.Linear(384, 192),
                nn.ReLU(),
                nn.Linear(192, num_classes),
            ],
        )


class SmallCNN(_SeededSequential):
    """The FedSUM paper's MNIST CNN (its Table 2): 51,480 parameters, cheap on a CPU.

    Input (B, 1, 28, 28). conv 3x3 1->10 (padding 1) -> ReLU -> maxpool 2 -> conv 3x3 10->20
    (padding 1) -> dropout -> ReLU -> maxpool 2 -> flatten (980) -> FC 50 -> ReLU -> dropout
    -> FC 10. FedSUM uses dropout 0.2; the default here is 0 because ``F.dropout`` takes no
    generator and would draw from torch's global RNG (and needs ``vmap(randomness=...)``).
    """

    def __init__(self, num_classes: int = 10, dropout: float = 0.0, seed: int = 0) -> None:
        num_classes = require_int("num_classes", num_classes, minimum=2)
        dropout = require_real("dropout", dropout, minimum=0.0, maximum=0.99)
        super().__init__(
            seed,
            lambda: [
                *_conv_relu_pool(1, 10, 3),
                nn.Conv2d(10, 20, 3, padding=1),
                nn.Dropout(dropout),
                nn.ReLU(),
                nn.MaxPool2d(2),
                nn.Flatten(),
                nn.Linear(7 * 7 * 20, 50),
                nn.ReLU(),
                nn.Dropout(dropout),
                nn.Linear(50, num_classes),
            ],
        )


class FedSUMCifarCNN(_SeededSequential):
    """The FedSUM paper's CIFAR-10 CNN (its Table 2): 551,786 parameters (10 classes).

    Input (B, 3, 32, 32). conv 3x3 3->32 (padding 1) -> ReLU -> maxpool 2 -> conv 3x3 32->32
    (padding 1) -> ReLU -> maxpool 2 -> flatten (2048) -> FC 256 -> ReLU -> FC 64 -> ReLU ->
    FC num_classes. Initialised like every model here (the FedAWE code the paper's models come
    from uses Kaiming-normal weights; the paper does not say).
    """

    def __init__(self, num_classes: int = 10, seed: int = 0) -> None:
        num_classes = require_int("num_classes", num_classes, minimum=2)
        super().__init__(
            seed, lambda: _two_blocks_then_mlp(3, (32, 32), 3, 8, (256, 64), num_classes)
        )


class LogisticRegression(_SeededSequential):
    """Multinomial logistic (softmax) regression: flatten -> Linear(in_features, num_classes).

    Outputs logits; pair with cross-entropy. Convex in its parameters.
    """

    def __init__(self, in_features: int, num_classes: int, seed: int = 0) -> None:
        in_features = require_int("in_features", in_features, minimum=1)
        num_classes = require_int("num_classes", num_classes, minimum=2)
        super().__init__(seed, lambda: [nn.Flatten(), nn.Linear(in_features, num_classes)])


class LinearRegression(_SeededSequential):
    """Linear regression: flatten -> Linear(in_features, 1), output shape (B,). Use with MSE."""

    def __init__(self, in_features: int, seed: int = 0) -> None:
        in_features = require_int("in_features", in_features, minimum=1)
        super().__init__(
            seed, lambda: [nn.Flatten(), nn.Linear(in_features, 1), nn.Flatten(start_dim=0)]
        )


MODELS: dict[str, type[nn.Module]] = {
    "mcmahan_cnn": McMahanCNN,
    "mcmahan_cifar_cnn": McMahanCifarCNN,
    "small_cnn": SmallCNN,
    "fedsum_cifar_cnn": FedSUMCifarCNN,
    "logistic_regression": LogisticRegression,
    "linear_regression": LinearRegression,
}


#: how a model's parameters start: the seeded default initialisation, or all zero (the
#: agnostic-FedAvg paper's Algorithm 1, theta_0 = 0; meant for convex models)
INITS = ("default", "zeros")


def build_model(name: str, init: str = "default", **kwargs: object) -> nn.Module:
    """Build the model registered as ``name`` in ``MODELS``; ``kwargs`` (and ``seed``) go to it.

    ``init="zeros"`` sets every parameter to 0 after construction (see :data:`INITS`).
    """
    name = require_choice("model", name, MODELS)
    init = require_choice("init", init, INITS)
    model = MODELS[name](**kwargs)
    if init == "zeros":
        with torch.no_grad():
            for p in model.parameters():
                p.zero_()
    return model
