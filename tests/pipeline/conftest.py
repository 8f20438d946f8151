"""Fixtures of the pipeline tests."""

from __future__ import annotations

import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def data_root() -> str:
    """The repository's data folder, with Fashion-MNIST (the arena's runs train on it)."""
    root = ROOT / "data"
    if not (root / "FashionMNIST").exists():
        pytest.skip(f"no Fashion-MNIST under {root} (`make data` fetches it)")
    return str(root)
