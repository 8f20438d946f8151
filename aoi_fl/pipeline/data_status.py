"""Which datasets a notebook can train on here, and a configuration's ``dataset`` section.

Shared by every paper that trains: MNIST and Fashion-MNIST are fetched by ``make data``; CIFAR
cannot be downloaded everywhere, so the smoke profile stands in CIFAR-shaped synthetic data
(labelled as such) and the other profiles say how to provide the real one.
"""

from __future__ import annotations

from typing import Any

from aoi_fl.core.validation import require_choice
from aoi_fl.pipeline.profiles import PROFILES, traits

#: datasets the papers' training notebooks use
TRAIN_DATASETS = ("mnist", "cifar10", "cifar100", "fashion_mnist")
#: how messages name the datasets that may be missing here
CIFAR_LABELS = {"cifar10": "CIFAR-10", "cifar100": "CIFAR-100"}


def dataset_section(
    dataset: str, synthetic: bool, subset: dict[str, int] | None = None
) -> dict[str, Any]:
    """A configuration's ``dataset`` section: the real ``dataset`` (``subset``: its n_train /
    n_test limits), or for a CIFAR dataset in the smoke profile without the data on disk,
    CIFAR-shaped random data (``synthetic``; labelled as such wherever it is used)."""
    if synthetic and dataset not in ("mnist", "fashion_mnist"):
        classes = 10 if dataset == "cifar10" else 100
        return {"name": "synthetic_cifar", "num_classes": classes, "n_train": 2000, "n_test": 200}
    return {"name": dataset, **(subset or {})}


def data_status(dataset: str, profile: str, data_root: str = "data") -> tuple[bool, bool, str]:
    """(run?, synthetic?, message) for a notebook that trains on ``dataset``.

    MNIST and Fashion-MNIST must be present (``make data`` fetches both). CIFAR cannot be
    fetched everywhere: when it is absent, the smoke profile runs on synthetic CIFAR-shaped data
    (said so in the message) and the other profiles run nothing and say how to provide the data.
    """
    from aoi_fl.data.datasets import cifar_available, verify_fashion_mnist, verify_mnist

    dataset = require_choice("dataset", dataset, TRAIN_DATASETS)
    profile = require_choice("profile", profile, PROFILES)
    if dataset == "mnist":
        verify_mnist(data_root)  # raises with the command to run when missing or altered
        return True, False, f"MNIST verified under {data_root}/MNIST/raw"
    if dataset == "fashion_mnist":
        verify_fashion_mnist(data_root)
        return True, False, f"Fashion-MNIST verified under {data_root}/FashionMNIST/raw"
    label = CIFAR_LABELS[dataset]
    folder = {"cifar10": "cifar-10-batches-py", "cifar100": "cifar-100-python"}[dataset]
    if cifar_available(dataset, data_root):
        return True, False, f"{label} found under {data_root}/{folder}"
    if traits(profile).quick:
        return (
            True,
            True,
            (
                f"{label} is not on this machine: the smoke profile runs on SYNTHETIC "
                f"{label}-shaped data (class prototypes plus noise) to exercise the code path; "
                "its numbers mean nothing."
            ),
        )
    return (
        False,
        False,
        (
            f"{label} was not found under {data_root}/{folder}, so nothing is trained for it.\n"
            "It cannot be downloaded on the machine this artifact was built on (no internet).\n"
            f"To provide it: on a machine with internet run\n"
            f"    .venv/bin/python -m aoi_fl.data fetch-cifar --name {dataset} --root data\n"
            f"or unpack the python version of {label} from "
            f"https://www.cs.toronto.edu/~kriz/cifar.html into data/ (giving data/{folder}/), "
            "then run make figures again."
        ),
    )
