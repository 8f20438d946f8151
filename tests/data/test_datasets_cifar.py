"""CIFAR-10/100 loaders on tiny folders written in the exact on-disk format."""

import dataclasses
import hashlib
import os
import pickle
import struct
import urllib.error
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision

import aoi_fl.data.datasets as data
from aoi_fl.data.datasets import (
    _CIFAR,
    DataError,
    cifar_available,
    fetch_cifar,
    load_cifar10,
    load_cifar100,
    load_dataset,
)

PER_BATCH = 3


# --- writers ------------------------------------------------------------------------------------
# The real batches were written by Python 2's cPickle (protocol 2): str keys, NumPy arrays
# pickled as numpy.core.multiarray._reconstruct with their bytes as a Python 2 str. `py2_pickle`
# emits exactly those opcodes; `py3_pickle` writes what a Python 3 user would (bytes keys).


def _s(b: bytes) -> bytes:  # SHORT_BINSTRING / BINSTRING
    return b"U" + bytes([len(b)]) + b if len(b) < 256 else b"T" + struct.pack("<i", len(b)) + b


def _i(v: int) -> bytes:  # BININT
    return b"J" + struct.pack("<i", v)


def _py2_value(v) -> bytes:
    if isinstance(v, str):
        return _s(v.encode("latin1"))
    if isinstance(v, int):
        return _i(v)
    if isinstance(v, list):
        return b"](" + b"".join(_py2_value(e) for e in v) + b"e"
    assert isinstance(v, np.ndarray) and v.dtype == np.uint8
    dtype = (
        b"cnumpy\ndtype\n" + _s(b"u1") + _i(0) + _i(1) + b"\x87R"
        + b"(" + _i(3) + _s(b"|") + b"NNN" + _i(-1) + _i(-1) + _i(0) + b"tb"
    )  # fmt: skip
    shape = b"(" + b"".join(_i(d) for d in v.shape) + b"t"
    return (
        b"cnumpy.core.multiarray\n_reconstruct\n" + b"cnumpy\nndarray\n" + _i(0) + b"\x85"
        + _s(b"b") + b"\x87R" + b"(" + _i(1) + shape + dtype + b"\x89" + _s(v.tobytes()) + b"tb"
    )  # fmt: skip


def py2_pickle(d: dict) -> bytes:
    return b"\x80\x02}(" + b"".join(_s(k.encode()) + _py2_value(v) for k, v in d.items()) + b"u."


def py3_pickle(d: dict) -> bytes:
    return pickle.dumps({k.encode(): v for k, v in d.items()}, protocol=pickle.HIGHEST_PROTOCOL)


def write_cifar(root: Path, name: str, writer=py2_pickle, seed: int = 0) -> dict:
    """A tiny CIFAR folder; returns the (N, 3072) data and labels written per split."""
    tv = torchvision.datasets.CIFAR10 if name == "cifar10" else torchvision.datasets.CIFAR100
    num_classes, label_key = (10, "labels") if name == "cifar10" else (100, "fine_labels")
    folder = root / tv.base_folder
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    written = {}
    for split, files in (("train", tv.train_list), ("test", tv.test_list)):
        datas, labels = [], []
        for fname, _ in files:
            data = rng.integers(0, 256, size=(PER_BATCH, 3072), dtype=np.uint8)
            y = rng.integers(0, num_classes, size=PER_BATCH).tolist()
            entry = {"batch_label": f"{fname} of tiny", "data": data, label_key: y}
            if name == "cifar100":
                entry["coarse_labels"] = [c // 5 for c in y]
            (folder / fname).write_bytes(writer(entry))
            datas.append(data)
            labels += y
        written[split] = (np.concatenate(datas), np.array(labels))
    meta_key = "label_names" if name == "cifar10" else "fine_label_names"
    meta = {meta_key: [f"class{c}" for c in range(num_classes)], "num_cases_per_batch": PER_BATCH}
    (folder / tv.meta["filename"]).write_bytes(writer(meta))
    return written


# --- loading --------------------------------------------------------------------------------------


@pytest.mark.parametrize("writer", [py2_pickle, py3_pickle], ids=["python2", "python3"])
@pytest.mark.parametrize("name, load", [("cifar10", load_cifar10), ("cifar100", load_cifar100)])
def test_tiny_folder_loads_through_the_real_loader(tmp_path, writer, name, load):
    written = write_cifar(tmp_path, name, writer)
    assert cifar_available(name, tmp_path)
    for split, train in (("train", True), ("test", False)):
        x, y = load(tmp_path, train=train, verify=False)
        data, labels = written[split]
        assert x.dtype == torch.uint8 and x.shape == (len(labels), 32, 32, 3)
        assert y.dtype == torch.int64 and y.tolist() == labels.tolist()
        # rows are channel-major (1024 R, 1024 G, 1024 B); pixel (r, c) of image i channel k
        i, r, c, k = len(labels) - 1, 5, 30, 2
        assert x[i, r, c, k] == data[i, k * 1024 + r * 32 + c]
    assert len(load(tmp_path, train=True, verify=False)[1]) == PER_BATCH * (
        5 if name == "cifar10" else 1
    )


def test_python2_writer_matches_what_pickle_reads():
    a = np.arange(12, dtype=np.uint8).reshape(2, 6)
    back = pickle.loads(py2_pickle({"data": a, "labels": [3, 8]}), encoding="latin1")
    assert back["labels"] == [3, 8] and np.array_equal(back["data"], a)


def test_verify_checks_torchvision_md5s(tmp_path, monkeypatch):
    write_cifar(tmp_path, "cifar10")
    with pytest.raises(DataError, match=r"data_batch_1: md5 .* differs from torchvision's"):
        load_cifar10(tmp_path)
    # with the table pointing at the tiny files, the verified path loads them
    folder = tmp_path / "cifar-10-batches-py"
    tv = torchvision.datasets.CIFAR10

    def md5(f):
        return hashlib.md5((folder / f).read_bytes()).hexdigest()

    monkeypatch.setattr(tv, "train_list", [[f, md5(f)] for f, _ in tv.train_list])
    monkeypatch.setattr(tv, "test_list", [[f, md5(f)] for f, _ in tv.test_list])
    monkeypatch.setattr(tv, "meta", {**tv.meta, "md5": md5(tv.meta["filename"])})
    assert load_cifar10(tmp_path, train=False)[0].shape == (PER_BATCH, 32, 32, 3)


@pytest.mark.parametrize("name, load", [("cifar10", load_cifar10), ("cifar100", load_cifar100)])
def test_missing_folder_says_how_to_provide_it(tmp_path, name, load):
    assert not cifar_available(name, tmp_path)
    with pytest.raises(DataError) as err:
        load(tmp_path)
    msg = str(err.value)
    assert "not available" in msg and "cannot be fetched on this machine" in msg
    assert (
        f"https://www.cs.toronto.edu/~kriz/{name.replace('cifar', 'cifar-')}-python.tar.gz" in msg
    )
    assert f"unpack it into {tmp_path}" in msg and f"fetch-cifar --name {name}" in msg


def test_partial_folder_names_the_missing_file(tmp_path):
    write_cifar(tmp_path, "cifar10")
    (tmp_path / "cifar-10-batches-py" / "data_batch_4").unlink()
    assert not cifar_available("cifar10", tmp_path)
    with pytest.raises(DataError, match="lacks data_batch_4"):
        load_cifar10(tmp_path, verify=False)
    assert load_cifar10(tmp_path, train=False, verify=False)[0].shape[0] == PER_BATCH


def test_unsafe_pickle_is_refused_without_running_it(tmp_path):
    write_cifar(tmp_path, "cifar10")
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.mkdir, (str(marker),))

    (tmp_path / "cifar-10-batches-py" / "test_batch").write_bytes(pickle.dumps({b"data": Evil()}))
    with pytest.raises(pickle.UnpicklingError, match="refusing to load posix.mkdir"):
        load_cifar10(tmp_path, train=False, verify=False)
    assert not marker.exists()


def test_malformed_batch_is_refused(tmp_path):
    write_cifar(tmp_path, "cifar10")
    bad = {"data": np.zeros((2, 100), np.uint8), "labels": [0, 1]}
    (tmp_path / "cifar-10-batches-py" / "test_batch").write_bytes(py2_pickle(bad))
    with pytest.raises(DataError, match=r"test_batch: 'data' is uint8 \(2, 100\)"):
        load_cifar10(tmp_path, train=False, verify=False)
    bad = {"data": np.zeros((2, 3072), np.uint8), "labels": [0, 10]}
    (tmp_path / "cifar-10-batches-py" / "test_batch").write_bytes(py2_pickle(bad))
    with pytest.raises(DataError, match=r"labels' must hold 2 labels in \[0, 10\)"):
        load_cifar10(tmp_path, train=False, verify=False)


def test_cifar_bundle_is_normalised_nchw(tmp_path):
    write_cifar(tmp_path, "cifar100", py3_pickle)
    bundle = load_dataset("cifar100", tmp_path, verify=False)
    assert bundle.num_classes == 100 and not bundle.synthetic
    assert bundle.train.x.shape == (PER_BATCH, 3, 32, 32)
    assert bundle.test.x.dtype == torch.float32


def test_cifar_available_rejects_unknown_name(tmp_path):
    with pytest.raises(ValueError, match="valid: cifar10, cifar100"):
        cifar_available("cifar1000", tmp_path)


# --- fetching (torchvision faked: no network) ---------------------------------------------------


def fake_torchvision(monkeypatch, name, fail=None):
    """Put a stand-in for torchvision's class of ``name`` in the table: it records its calls and
    writes the tiny folder (or raises ``fail``), as the real one would after downloading."""
    real = _CIFAR[name].tv_class
    calls = []

    class Fake(real):  # keeps base_folder and the file lists; never downloads
        def __init__(self, root, train=True, download=False):
            calls.append((root, train, download))
            if fail is not None:
                raise fail
            write_cifar(Path(root), name)

    monkeypatch.setitem(_CIFAR, name, dataclasses.replace(_CIFAR[name], tv_class=Fake))
    return calls


@pytest.mark.parametrize(
    "name, folder", [("cifar10", "cifar-10-batches-py"), ("cifar100", "cifar-100-python")]
)
def test_fetch_cifar_downloads_into_the_loaders_folder(tmp_path, monkeypatch, name, folder):
    calls = fake_torchvision(monkeypatch, name)
    root = tmp_path / "data"
    assert not cifar_available(name, root)
    # bug: the returned path not where the loader looks (e.g. the root, or the class name)
    assert fetch_cifar(name, root) == root / folder
    assert calls == [(str(root), True, True)]  # the training split, with download on
    assert cifar_available(name, root)
    assert load_dataset(name, root, verify=False).train.x.shape[1:] == (3, 32, 32)


@pytest.mark.parametrize(
    "name, title, error",
    [
        ("cifar10", "CIFAR-10", RuntimeError("Error downloading cifar-10-python.tar.gz")),
        ("cifar100", "CIFAR-100", urllib.error.URLError("[Errno -3] name resolution")),
    ],
)
def test_fetch_cifar_failure_names_the_dataset(tmp_path, monkeypatch, name, title, error):
    fake_torchvision(monkeypatch, name, fail=error)
    # bug: torchvision's bare error escapes (not a DataError) or names no dataset
    with pytest.raises(DataError, match=f"torchvision could not download {title}: ") as err:
        fetch_cifar(name, tmp_path)
    assert str(error) in str(err.value) and err.value.__cause__ is error
    assert not cifar_available(name, tmp_path)


def test_fetch_cifar_rejects_unknown_name_before_any_download(tmp_path, monkeypatch):
    calls = fake_torchvision(monkeypatch, "cifar10")
    with pytest.raises(ValueError, match="unknown name 'cifar1000'; valid: cifar10, cifar100"):
        fetch_cifar("cifar1000", tmp_path)
    assert calls == []


def test_fetch_cifar_command_line(tmp_path, monkeypatch, capsys):
    fake_torchvision(monkeypatch, "cifar100")
    root = tmp_path / "ok"
    assert data.main(["fetch-cifar", "--name", "cifar100", "--root", str(root)]) == 0
    assert capsys.readouterr().out == f"ok: {root / 'cifar-100-python'}\n"
    fake_torchvision(monkeypatch, "cifar10", fail=RuntimeError("offline"))
    assert data.main(["fetch-cifar", "--name", "cifar10", "--root", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert err == "error: torchvision could not download CIFAR-10: offline\n"
