"""Errors before work: a bad configuration fails before any data is loaded or any run trained.

Every test of a bad input checks the message (it names the parameter by its path in the
configuration, the value and what is allowed) and that nothing happened: no dataset was loaded
(``parts.load_bundle`` raises if called, and the data root does not exist), no trainer was built
and the cache holds no ``runs/`` entry.
"""

import inspect
import itertools
import json
import re
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from aoi_fl.aoi import sigma
from aoi_fl.core import availability_trace, registry, validation
from aoi_fl.core.models import MODELS
from aoi_fl.core.selection import SeededSampler, Selection
from aoi_fl.core.train import LR_SCHEDULES
from aoi_fl.data.facts import DATASET_FACTS, dataset_facts
from aoi_fl.pipeline import (
    cache,
    config_checks,
    config_model,
    config_training,
    experiment,
    parts,
    plugins,
    resolve,
    runs,
)
from aoi_fl.pipeline.cache import config_key
from aoi_fl.pipeline.runs import resolve_config

ROOT = Path(__file__).resolve().parents[2]
BUILD_TRAINER = experiment.build_trainer  # the real one (``nothing_runs`` replaces it)
COMMITTED = ROOT / "results" / "runs"

#: a run that trains in a fraction of a second and needs no file
TINY = {
    "dataset": {"name": "linear_regression", "n_clients": 6, "samples": 10, "features": 4},
    "partition": {"name": "natural", "n_clients": 6},
    "model": {"name": "linear_regression", "in_features": 4, "seed": 0},
    "sampler": {"name": "uniform", "s": 2, "seed": 0},
    "training": {
        "rounds": 2,
        "local_epochs": 1,
        "batch_size": 5,
        "loss": "mse",
        "lr": {"name": "constant", "lr": 0.01},
    },
}
MNIST = {
    "dataset": {"name": "mnist", "n_train": 200, "n_test": 50},
    "partition": {"name": "iid", "n_clients": 10, "seed": 0},
    "model": {"name": "logistic_regression", "in_features": 784, "num_classes": 10, "seed": 0},
    "sampler": {"name": "random", "m": 3, "seed": 0},
    "training": {"rounds": 2, "local_epochs": 1, "lr": {"name": "constant", "lr": 0.1}},
}


def changed(config, path, value):
    """A copy of ``config`` with the option at ``path`` ("sampler.p") set to ``value``."""
    out = json.loads(json.dumps(config))
    *sections, key = path.split(".")
    target = out
    for section in sections:
        target = target[section]
    target[key] = value
    return out


@pytest.fixture
def nothing_runs(monkeypatch, tmp_path):
    """A cache folder and a data root in which nothing may happen: loading data or building a
    trainer fails the test. Yields (results_dir, data_root)."""

    def forbidden(what):
        def fail(*args, **kwargs):
            raise AssertionError(f"{what} before the configuration was checked")

        return fail

    monkeypatch.setattr(parts, "load_bundle", forbidden("a dataset was loaded"))
    monkeypatch.setattr(runs, "load_bundle", forbidden("a dataset was loaded"))
    monkeypatch.setattr(experiment, "build_trainer", forbidden("a trainer was built"))
    monkeypatch.setattr(runs, "build_trainer", forbidden("a trainer was built"))
    results_dir = tmp_path / "cache"
    yield str(results_dir), str(tmp_path / "no-data")
    assert not (results_dir / "runs").exists(), "something was cached"


def run(config, results_dir, data_root):
    return runs.run_experiment(config, results_dir=results_dir, data_root=data_root, progress=False)


def assert_fails_before_work(config, error, message, results_dir, data_root):
    """Every entry point refuses ``config`` with ``message`` before doing anything."""
    for call in (
        lambda: run(config, results_dir, data_root),
        lambda: runs.run_grid([TINY, config], results_dir=results_dir, progress=False),
        lambda: runs.cached_results([config], results_dir=results_dir),
        lambda: runs.client_sizes(config, data_root),
    ):
        with pytest.raises(error, match=message):
            call()


# ---------------------------------------------------------------------------------------------
# 1. the cache must be writable before a run trains, but only when something has to be trained


def unwritable(tmp_path):
    # a folder under a regular file: mkdir fails with ENOTDIR even for root, who ignores
    # permission bits (chmod 0o555 would not stop the tests' root user from writing)
    (tmp_path / "file").write_text("not a folder")
    return str(tmp_path / "file" / "cache")


def test_an_unwritable_cache_fails_before_training(nothing_runs, tmp_path):
    _, data_root = nothing_runs
    results_dir = unwritable(tmp_path)
    message = r"results_dir='.*file/cache' must be writable to store new runs"
    with pytest.raises(ValueError, match=message):
        run(TINY, results_dir, data_root)
    with pytest.raises(ValueError, match=message):
        runs.run_grid([TINY, changed(TINY, "model.seed", 1)], results_dir=results_dir, workers=2)


def test_a_cache_folder_is_created_when_missing(tmp_path):
    results_dir = tmp_path / "new" / "cache"
    result = run(TINY, str(results_dir), str(tmp_path / "no-data"))
    assert not result.cached and (results_dir / "runs" / result.key / "result.json").exists()
    # the probes of the writability check are gone
    assert [p.name for p in results_dir.iterdir()] == ["runs"]
    assert [p.name for p in (results_dir / "runs").iterdir()] == [result.key]


def test_a_read_only_cache_holding_every_result_is_still_read(tmp_path, monkeypatch):
    results_dir = str(tmp_path / "cache")
    trained = run(TINY, results_dir, str(tmp_path))

    # read-only as a user sees it (root ignores permission bits): any write attempt fails
    def read_only(self):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(cache.ResultStore, "check_writable", read_only)
    assert run(TINY, results_dir, str(tmp_path)).cached
    (hit,) = runs.run_grid([TINY], results_dir=results_dir, progress=False)
    assert hit.cached and hit.history == trained.history
    with pytest.raises(ValueError, match="must be writable to store new runs"):
        run(changed(TINY, "model.seed", 1), results_dir, str(tmp_path))


def committed_run_configs():
    """(folder, run configuration, whether the folder is that configuration's key) of every
    committed result made from a training run (FedSUM summaries wrap theirs in "run")."""
    for path in sorted(COMMITTED.glob("*/result.json*")):  # .json.gz: compressed entries
        config = cache._unseal(path)["config"]
        sections, known = set(config), set(resolve._SECTIONS)
        if sections <= known and known - sections <= {"availability"}:
            yield path.parent.name, config, True
        elif "fedsum_summary" in config:
            yield path.parent.name, config["run"], False


def never(*args, **kwargs):
    raise AssertionError("must not be called")


def test_the_committed_cache_is_read_without_writing(monkeypatch):
    direct = (c for _, c, is_key in committed_run_configs() if is_key)
    configs = list(itertools.islice(direct, 3))
    monkeypatch.setattr(cache.ResultStore, "check_writable", never)
    monkeypatch.setattr(experiment, "build_trainer", never)
    monkeypatch.setattr(runs, "build_trainer", never)
    found = runs.run_grid(configs, results_dir=str(COMMITTED.parent), progress=False)
    assert [r.cached for r in found] == [True] * 3


# ---------------------------------------------------------------------------------------------
# 2. the model, the loss and the learning rates against the dataset, without loading it


@pytest.mark.parametrize(
    "path, value, message",
    [
        (
            "model.in_features",
            100,
            r"model.in_features=100 does not match dataset 'mnist' \(784 features per sample\)",
        ),
        (
            "model.num_classes",
            5,
            r"model.num_classes=5 does not match dataset 'mnist' \(classification, 10 classes\)",
        ),
        (
            "training.loss",
            "mse",
            r"training.loss='mse' does not fit dataset 'mnist' \(classification, 10 classes\); "
            "use loss 'cross_entropy'",
        ),
        (
            "training.lr",
            {"name": "constant", "lr": 1e300},
            r"training.lr=\{'name': 'constant', 'lr': 1e\+300\} gives the learning rate 1e\+300 "
            r"in round 0; the rate of every round 0..1 must be within \[1.4e-45, 3.403e\+38\]",
        ),
        (
            "training.lr",
            {"name": "exponential", "lr0": 0.1, "decay": 1e-46},  # 1e-47 in round 1: 0 in float32
            r"learning rate 1(\.0*\d*)?e-47 in round 1",
        ),
        (
            "model",
            {"name": "mcmahan_cifar_cnn", "seed": 0},
            r"model 'mcmahan_cifar_cnn' cannot take the samples of dataset 'mnist' "
            r"\(shape \(1, 28, 28\)\)",
        ),
        (
            "model",
            {"name": "linear_regression", "in_features": 784},
            r"model 'linear_regression' gives 1 outputs per sample but dataset 'mnist' "
            r"\(classification, 10 classes\) needs 10",
        ),
    ],
)
def test_a_model_that_does_not_fit_the_dataset_fails_without_loading_it(
    nothing_runs, path, value, message
):
    assert_fails_before_work(changed(MNIST, path, value), ValueError, message, *nothing_runs)


@pytest.mark.parametrize(
    "config, message",
    [
        (
            changed(changed(MNIST, "model", {"name": "mcmahan_cnn"}), "training.engine", "linear"),
            r"model 'mcmahan_cnn' with training.engine='linear': engine 'linear' supports",
        ),
        (
            changed(MNIST, "model", {"name": "small_cnn", "dropout": 0.2}),
            r"model 'small_cnn' with training.engine='auto': model layer '4' is dropout",
        ),
        (
            changed(TINY, "training.loss", "cross_entropy"),
            r"training.loss='cross_entropy' does not fit dataset 'linear_regression' "
            r"\(regression, one real target per sample\); use loss 'mse'",
        ),
        (
            changed(TINY, "model.in_features", 5),
            r"model.in_features=5 does not match dataset 'linear_regression' \(4 features",
        ),
        (
            changed(MNIST, "partition", {"name": "natural", "n_clients": 10}),
            "partition 'natural' needs a dataset generated client by client; 'mnist' has no "
            "natural partition",
        ),
        (
            changed(TINY, "partition.n_clients", 7),
            r"partition.n_clients=7 but dataset 'linear_regression' is generated with 6 clients",
        ),
    ],
)
def test_other_mismatches_fail_without_loading_the_data(nothing_runs, config, message):
    assert_fails_before_work(config, ValueError, message, *nothing_runs)


@pytest.mark.parametrize(
    ("partition", "allowed"),
    [({"name": "zipf", "a": 2.0}, 1), ({"name": "dirichlet", "alpha": 0.3}, 0)],
)
def test_min_size_is_checked_as_its_partition_allows(nothing_runs, partition, allowed):
    # a size law gives every client at least one sample; a Dirichlet label split may leave one
    # empty (aoi_fl.data.partition)
    spec = {**partition, "n_clients": 10, "seed": 0, "min_size": allowed - 1}
    message = rf"partition.min_size must be >= {allowed}, got {allowed - 1}"
    assert_fails_before_work(changed(MNIST, "partition", spec), ValueError, message, *nothing_runs)
    runs.resolve_config(changed(MNIST, "partition", {**spec, "min_size": allowed}))


def test_the_dataset_facts_agree_with_the_loaded_data():
    options = {
        "mnist": {"n_train": 20, "n_test": 5},
        "fashion_mnist": {"n_train": 20, "n_test": 5},
        "synthetic_cifar": {"num_classes": 3, "n_train": 20, "n_test": 5},
        "linear_regression": {"n_clients": 3, "samples": 4, "features": 7},
        "fedprox_synthetic": {"n_clients": 3, "features": 9, "classes": 4},
    }
    assert set(DATASET_FACTS) == set(runs.DATASETS)
    for name, opts in options.items():
        bundle = runs.DATASETS[name](str(ROOT / "data"), **opts)
        facts = dataset_facts(name, opts)
        assert facts.input_shape == tuple(bundle.train.x.shape[1:]), name
        regression = bundle.train.y.is_floating_point()
        assert facts.num_classes == (None if regression else bundle.num_classes), name
        clients = None if bundle.partition is None else len(bundle.partition)
        assert facts.clients == clients, name
        assert facts.train_samples in (None, len(bundle.train)), name
        if clients is not None:  # the natural partition's smallest client: a lower bound
            assert facts.client_samples <= min(len(idx) for idx in bundle.partition), name
    for name in ("cifar10", "cifar100"):  # not on this machine: their shapes and classes
        assert dataset_facts(name, {}).input_shape == (3, 32, 32)
    assert dataset_facts("cifar100", {}).num_classes == 100


# ---------------------------------------------------------------------------------------------
# 3. messages that name what is wrong; NumPy numbers accepted


@pytest.mark.parametrize(
    "config, error, message",
    [
        ([1, 2], TypeError, r"config must be a dict of options, got \[1, 2\] \(list\)"),
        (
            {**TINY, "training": None},
            TypeError,
            r"config section 'training' must be a dict of options, got None \(NoneType\)",
        ),
        (
            {**TINY, "dataset": "mnist"},
            TypeError,
            r"config section 'dataset' must be a dict of options \(e.g. \{'name': 'mnist'\}\), "
            r"got 'mnist' \(str\)",
        ),
        (
            {**TINY, "dataset": {"n_clients": 6}},
            ValueError,
            r"dataset must be a dict with a 'name' \(one of cifar10, .*synthetic_cifar\)",
        ),
        (
            changed(TINY, "model.seed", {1}),
            TypeError,
            r"model.seed=\{1\} \(set\) is not JSON serializable",
        ),
        (changed(TINY, "model.seed", -1), ValueError, "model.seed must be >= 0, got -1"),
        (changed(TINY, "sampler.seed", 0.5), TypeError, r"sampler.seed must be an integer"),
        (
            changed(TINY, "training.keep_params", "no"),
            TypeError,
            "training.keep_params must be True or False, got 'no'",
        ),
    ],
)
def test_malformed_configurations_are_named(nothing_runs, config, error, message):
    with pytest.raises(error, match=message):
        run(config, *nothing_runs)
    with pytest.raises(error, match=message):
        BUILD_TRAINER(config, nothing_runs[1])


UNKNOWN_OR_MISSING = [
    (
        changed(TINY, "sampler", {"name": "bernoulli", "q": 0.5}),
        r"sampler 'bernoulli': unknown options \['q'\], missing options \['p'\]; "
        r"valid: p, seed \(required: p\)",
    ),
    (
        changed(MNIST, "sampler.tau", 2.0),
        r"sampler 'random': unknown options \['tau'\]; "
        r"valid: m, m_prime, seed, start, p, family \(required: m\)",
    ),
    (
        changed(TINY, "sampler", {"name": "kvib", "k": 2}),
        r"sampler 'kvib': missing options \['rounds'\]; valid: k, rounds, seed, theta, G, "
        r"gamma_scale \(required: k, rounds\)",
    ),
    (
        changed(TINY, "training.algorithm", {"name": "fedsum"}),
        r"training.algorithm 'fedsum': missing options \['local_steps'\]; "
        r"valid: local_steps, server_lr \(required: local_steps\)",
    ),
    (
        changed(TINY, "training.lr", {"name": "exponential", "lr": 0.1}),
        r"training.lr 'exponential': unknown options \['lr'\]; valid: lr0, decay$",
    ),
    (
        changed(TINY, "model.depth", 3),
        r"model 'linear_regression': unknown options \['depth'\]; "
        r"valid: in_features, seed, init \(required: in_features\)",
    ),
    (
        changed(TINY, "dataset.size", 3),
        r"dataset 'linear_regression': unknown options \['size'\]; valid: n_clients, samples, "
        r"test_samples, features, heterogeneity, noise, seed$",
    ),
    (
        changed(MNIST, "dataset.features", 3),
        r"dataset 'mnist': unknown options \['features'\]; valid: verify, n_train, n_test$",
    ),
    (
        changed(MNIST, "partition.name", "dirichlet"),
        r"partition 'dirichlet': missing options \['alpha'\]; "
        r"valid: n_clients, seed, alpha, min_size \(required: n_clients, seed, alpha\)",
    ),
    (
        changed(TINY, "partition.seed", 0),
        r"partition 'natural': unknown options \['seed'\]; valid: n_clients",
    ),
]


@pytest.mark.parametrize("config, message", UNKNOWN_OR_MISSING)
def test_unknown_and_missing_options_list_the_valid_ones(nothing_runs, config, message):
    assert_fails_before_work(config, ValueError, message, *nothing_runs)


def test_every_registered_factory_declares_its_options():
    # a factory that passes **options on without declaring them would accept any option
    tables = [plugins.samplers(), plugins.algorithms(), LR_SCHEDULES, MODELS]
    for table in [*tables, runs.DATASETS, runs.PARTITIONS]:
        for name, factory in table.items():
            kinds = [p.kind for p in inspect.signature(factory).parameters.values()]
            assert inspect.Parameter.VAR_KEYWORD not in kinds, name


NUMPY_INTEGERS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@given(
    n=st.integers(min_value=3, max_value=100),  # MNIST's sampler selects 3
    dtype=st.sampled_from(NUMPY_INTEGERS),
    seed=st.integers(min_value=0, max_value=100),
)
def test_numpy_integers_give_the_key_of_the_python_int(n, dtype, seed):
    python = changed(changed(MNIST, "partition.n_clients", n), "model.seed", seed)
    numpy = changed(MNIST, "partition.n_clients", 0)
    numpy["partition"]["n_clients"] = dtype(n)
    numpy["model"]["seed"] = dtype(seed)
    resolved = resolve_config(numpy)
    assert resolved == resolve_config(python)
    assert type(resolved["partition"]["n_clients"]) is int
    assert config_key(resolved) == config_key(resolve_config(python))


@given(
    lr=st.floats(min_value=1e-6, max_value=10.0),
    dtype=st.sampled_from([np.float16, np.float32, np.float64]),
)
def test_numpy_floats_give_the_key_of_the_python_float(lr, dtype):
    # the Python float a NumPy float equals (a float32 0.1 is not the float 0.1)
    python = changed(MNIST, "training.lr", {"name": "constant", "lr": float(dtype(lr))})
    numpy = changed(MNIST, "training.lr", {"name": "constant", "lr": 0.5})
    numpy["training"]["lr"]["lr"] = dtype(lr)
    numpy["training"]["algorithm"] = {"name": "weighted", "p": np.full(10, 0.1)}
    python["training"]["algorithm"] = {"name": "weighted", "p": [0.1] * 10}
    assert config_key(resolve_config(numpy)) == config_key(resolve_config(python))


def test_sigma_lists_the_valid_quadratures():
    # not a configuration, but the same kind of defect: 'str' object has no attribute ...
    with pytest.raises(TypeError, match=r"quadrature must be a Quadrature: sigma.EXACT .*"):
        sigma.sigma_random([1.0, 2.0, 3.0], 2, quadrature="fast")
    with pytest.raises(TypeError, match="sigma.DISPLAY"):
        sigma.random_weight_moments([1.0, 2.0, 3.0], 1, quadrature=None)
    assert sigma.sigma_random([1.0, 2.0, 3.0], 2, quadrature=sigma.DISPLAY) > 0


# ---------------------------------------------------------------------------------------------
# 4. a grid checks every configuration before it trains any


GRID_ERRORS = [
    (changed(TINY, "sampler.s", 7), ValueError, r"sampler.s must be <= 6, got 7"),
    (changed(MNIST, "sampler.m", 11), ValueError, r"sampler.m must be <= n .*got m=11, n=10"),
    (
        changed(MNIST, "partition", {"name": "dirichlet", "n_clients": 10, "seed": 0, "alpha": 0}),
        ValueError,
        r"partition.alpha must be > 0.0, got 0",
    ),
    (
        changed(MNIST, "partition", {"name": "zipf", "n_clients": 10, "seed": 0, "a": 1.0}),
        ValueError,
        r"partition.a must be > 1.0, got 1.0",
    ),
    (changed(MNIST, "partition.n_clients", 0), ValueError, "partition.n_clients must be >= 1"),
    (changed(TINY, "dataset.noise", -1.0), ValueError, r"dataset.noise must be >= 0.0"),
    (changed(MNIST, "dataset.n_train", 0), ValueError, r"dataset.n_train must be >= 1, got 0"),
    (
        changed(MNIST, "training.algorithm", {"name": "weighted", "p": [0.5, 0.5]}),
        ValueError,
        r"training.algorithm.p has 2 weights but there are 10 clients",
    ),
    (
        changed(
            changed(TINY, "training.local_steps", 3),
            "training.algorithm",
            {"name": "fedsum", "local_steps": 2},
        ),
        ValueError,
        r"training.algorithm.local_steps=2 differs from training.local_steps=3",
    ),
    (changed(TINY, "training.rounds", -1), ValueError, r"training.rounds must be >= 0, got -1"),
    (
        changed(TINY, "training.lr", {"name": "exponential", "lr0": 0}),
        ValueError,
        r"training.lr.lr0 must be > 0",
    ),
    (changed(TINY, "model.in_features", 0), ValueError, r"model.in_features must be >= 1"),
]


@pytest.mark.parametrize("bad, error, message", GRID_ERRORS)
def test_a_grid_trains_nothing_when_one_configuration_is_bad(nothing_runs, bad, error, message):
    results_dir, data_root = nothing_runs
    for workers in (1, 2):
        with pytest.raises(error, match=message):
            runs.run_grid(
                [TINY, bad], results_dir=results_dir, data_root=data_root, workers=workers
            )


# ---------------------------------------------------------------------------------------------
# 5. numbers written as strings; `cached` tells the truth


@pytest.mark.parametrize(
    "config, path",
    [
        (changed(TINY, "sampler", {"name": "bernoulli", "p": "0.5"}), "sampler.p='0.5'"),
        (changed(TINY, "dataset.samples", "10"), "dataset.samples='10'"),
        (changed(TINY, "partition.n_clients", "6"), "partition.n_clients='6'"),
        (changed(TINY, "model.seed", " 1 "), r"model.seed=' 1 '"),
        (changed(TINY, "training.rounds", "2"), "training.rounds='2'"),
        (changed(TINY, "training.lr.lr", "1e-2"), "training.lr.lr='1e-2'"),
        (
            changed(TINY, "training.algorithm", {"name": "fedavg", "server_lr": "1"}),
            "training.algorithm.server_lr='1'",
        ),
        (
            changed(MNIST, "training.algorithm", {"name": "weighted", "p": ["0.5", 0.5]}),
            r"training.algorithm.p\[0\]='0.5'",
        ),
    ],
)
def test_numbers_written_as_strings_are_refused(nothing_runs, config, path):
    assert_fails_before_work(
        config, TypeError, f"{path} must be a number, not a string", *nothing_runs
    )


def test_a_string_that_is_not_a_number_is_checked_as_the_option_s_type(nothing_runs):
    config = changed(TINY, "sampler.s", "two")
    assert_fails_before_work(
        config, TypeError, r"sampler.s must be an integer, got 'two'", *nothing_runs
    )


def test_run_grid_reports_cached_only_for_results_it_read(tmp_path):
    results_dir = str(tmp_path / "cache")
    first, second = TINY, changed(TINY, "model.seed", 1)
    assert [r.cached for r in runs.run_grid([first], results_dir=results_dir, progress=False)] == [
        False
    ]
    both = runs.run_grid([first, second], results_dir=results_dir, progress=False)
    assert [r.cached for r in both] == [True, False]
    again = runs.run_grid([first, second], results_dir=results_dir, progress=False)
    assert [r.cached for r in again] == [True, True]
    assert again[1].history == both[1].history


# ---------------------------------------------------------------------------------------------
# every committed result is still found, and its configuration passes the checks


def test_every_committed_run_configuration_resolves_to_itself_and_passes(monkeypatch):
    monkeypatch.setattr(parts, "load_bundle", never)  # every dataset loads through it
    monkeypatch.setattr(runs, "load_bundle", never)  # every dataset loads through it
    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", config_checks.ConfigWarning)  # none is suspicious
        for folder, config, direct in committed_run_configs():
            resolved = resolve_config(config)
            assert resolved == config, folder
            assert not direct or config_key(resolved) == folder
            checked += 1
    assert checked > 600


def test_validation_is_cached_per_specification():
    # a grid repeats its model and sampler: the dry runs are not repeated per seed
    config_model._model_fits.cache_clear()
    resolve_config(MNIST)
    for seed in range(1, 20):
        resolve_config(changed(MNIST, "model.seed", seed))
    assert config_model._model_fits.cache_info().misses == 1


def test_checking_draws_from_no_global_random_generator():
    # the dry runs build models and samplers: all from their own seeded generators
    before = torch.get_rng_state()
    for model in ({"name": "small_cnn", "seed": 3}, {"name": "mcmahan_cnn", "seed": 4}):
        resolve_config(changed(MNIST, "model", model))
    resolve_config(changed(MNIST, "sampler", {"name": "markov_optimal", "m": 3, "m_prime": 4}))
    assert torch.equal(before, torch.get_rng_state())


# ---------------------------------------------------------------------------------------------
# 6. holds on a busy machine (issue 38, part 3): memory bounds, closed forms, named refusals,
# warnings for legal values that are almost surely mistakes

#: the memory the bounds below are computed against (the messages do not depend on the machine)
MEMORY = 16 * 2**30


@pytest.fixture
def machine(monkeypatch):
    """This machine with :data:`MEMORY` bytes of memory."""
    monkeypatch.setattr(validation, "physical_memory", lambda: MEMORY)


def memory_message(option, value, formula, allowed):
    return (
        rf"{re.escape(option)}={value} needs about [\d.]+ [KMGTP]iB of memory "
        rf"\({re.escape(formula)}.*\), more than this machine's 16\.0 GiB; "
        rf"allowed: {re.escape(allowed)}"
    )


def quick(call):
    """``call()``, which must return (or raise) within a second: no hang before the refusal."""
    start = time.perf_counter()
    try:
        return call()
    finally:
        assert time.perf_counter() - start < 1.0


def test_a_learning_rate_schedule_is_checked_in_closed_form(machine, nothing_runs):
    # 10**12 rounds: the history alone needs 32 TB; 4 * 10**8 rounds fit and are checked at once
    config = changed(TINY, "training.rounds", 10**12)
    allowed = f"training.rounds <= {MEMORY // 32}"
    message = memory_message("training.rounds", 10**12, "32 bytes * rounds", allowed)
    quick(lambda: assert_fails_before_work(config, ValueError, message, *nothing_runs))
    many = changed(changed(TINY, "training.rounds", 4 * 10**8), "training.lr.lr", 0.5)
    quick(lambda: runs.resolve_config(many))
    # the first round whose rate underflows float32, found by bisection
    decaying = changed(many, "training.lr", {"name": "exponential", "lr0": 0.1, "decay": 0.9})
    smallest = config_training._FLOAT32_RATES[0]
    first = next(t for t in itertools.count() if 0.1 * 0.9**t < smallest)
    with pytest.raises(ValueError, match=rf"in round {first}; the rate of every round"):
        quick(lambda: runs.resolve_config(decaying))


@pytest.mark.parametrize(
    "path, value, formula, allowed",
    [
        (
            "dataset.samples",
            10**10,
            "12 bytes * n_clients * (samples + test_samples) * (features + 1)",
            f"samples <= {MEMORY // (12 * 6 * 5) - 20} with n_clients=6, test_samples=20, "
            "features=4",
        ),
        (
            "training.local_steps",
            10**9,
            "8 bytes * local_steps * 5 (min(batch_size, the smallest client's 10 samples))",
            f"training.local_steps <= {MEMORY // 40}",
        ),
    ],
)
def test_options_beyond_the_machine_s_memory_are_refused(
    machine, nothing_runs, path, value, formula, allowed
):
    message = memory_message(path, value, formula, allowed)
    config = changed(TINY, path, value)
    quick(lambda: assert_fails_before_work(config, ValueError, message, *nothing_runs))


def test_a_huge_m_prime_is_refused_before_the_sampler_is_built(machine, nothing_runs):
    config = changed(TINY, "sampler", {"name": "markov_optimal", "m": 2, "m_prime": 10**9})
    formula = "136 bytes * (m_prime + 1): the Markov chain over the ages 0..m'"
    allowed = f"sampler.m_prime <= {MEMORY // 136 - 1}"
    message = memory_message("sampler.m_prime", 10**9, formula, allowed)
    quick(lambda: assert_fails_before_work(config, ValueError, message, *nothing_runs))


@pytest.fixture
def user_sampler():
    """Register a user's sampler factory under a fresh name for the test; yields register."""
    names = []

    def register(name, factory):
        registry.register_sampler(name, factory, availability=True)
        names.append(name)
        return changed(TINY, "sampler", {"name": name})

    yield register
    for name in names:
        del registry.SAMPLERS[name]
        registry.AVAILABILITY_AWARE.discard(name)


def returns_none(n, sizes):
    return None


class OutOfRange(SeededSampler):
    """Selects clients n-1 and n: one more than there are."""

    name = "out_of_range"

    def sample(self, available=None):
        return Selection(np.array([self.n - 1, self.n]), np.array([0.5, 0.5]))


def out_of_range(n, sizes):
    return OutOfRange(n, 0)


def fails(n, sizes):
    return {}["a key the factory's author forgot"]


@pytest.mark.parametrize(
    "factory, error, message",
    [
        (
            returns_none,
            TypeError,
            r"sampler 'user_.*': its factory .*returns_none returned None \(NoneType\); it "
            r"must return a Sampler \(aoi_fl.core.selection.Sampler\)",
        ),
        (
            out_of_range,
            ValueError,
            r"sampler 'user_.*' \(factory .*out_of_range\) with options \{\} for 6 clients "
            r"fails: RuntimeError: sampler 'user_.*' selected client ids \[5, 6\] \(\[6\] "
            r"outside\); allowed: distinct ids among 0..5 \(n=6\) in increasing order",
        ),
        (
            fails,
            ValueError,
            r"sampler 'user_.*' \(factory .*fails\) with options \{\} for 6 clients fails: "
            r"KeyError: \"a key the factory's author forgot\"",
        ),
    ],
)
def test_a_user_sampler_that_cannot_run_is_refused_with_its_name(
    user_sampler, nothing_runs, factory, error, message
):
    config = user_sampler(f"user_{factory.__name__}", factory)
    assert_fails_before_work(config, error, message, *nothing_runs)


def test_a_sampler_that_leaves_the_clients_in_a_later_round_is_named_then(user_sampler, tmp_path):
    class LateOutOfRange(OutOfRange):
        name = "late"

        def sample(self, available=None):
            self.round += 1
            if self.round == 1:
                return Selection(np.array([0, 1]), np.array([0.5, 0.5]))
            return super().sample(available)

    config = user_sampler("user_late", lambda n, sizes: LateOutOfRange(n, 0))
    with pytest.raises(RuntimeError, match=r"sampler 'late' selected client ids \[5, 6\]"):
        BUILD_TRAINER(config, str(tmp_path)).run()


def test_a_non_callable_factory_is_refused_when_registered():
    message = r"the factory of sampler 'five' must be callable \(\(n, sizes, \*\*options\) -> "
    with pytest.raises(TypeError, match=message + r"Sampler\), got 5 \(int\)"):
        registry.register_sampler("five", 5)
    with pytest.raises(TypeError, match=r"the factory of algorithm 'none' must be callable"):
        registry.register_algorithm("none", None)
    assert "five" not in registry.SAMPLERS and "none" not in registry.ALGORITHMS


def test_threads_below_one_are_refused_before_any_run(nothing_runs):
    results_dir, data_root = nothing_runs
    with pytest.raises(ValueError, match="threads must be >= 1, got 0"):
        runs.run_grid([TINY], results_dir=results_dir, data_root=data_root, threads=0, workers=2)


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"rerun": "no"}, TypeError, r"rerun must be True or False, got 'no' \(str\)"),
        ({"progress": 1}, TypeError, r"progress must be True or False, got 1 \(int\)"),
        ({"executor": ""}, ValueError, r"unknown executor ''"),
        ({"on_result": 5}, TypeError, r"on_result must be a function \(i, result\) or None, got 5"),
        ({"ray_address": 5}, ValueError, r"ray_address must be 'local', 'auto' or a cluster"),
        ({"deadline": 3600.0}, ValueError, r"deadline=3600.0 is before 2001; it is a time in "),
        (
            {"deadline": 4e9, "executor": "ray"},
            ValueError,
            r"deadline needs executor='local'",
        ),
        ({"results_dir": None}, TypeError, r"results_dir must be a folder path, got None"),
    ],
)
def test_the_grids_own_arguments_are_refused_before_any_run(
    nothing_runs, monkeypatch, options, error, message
):
    # found by probing: "no" counted as rerun=True, a callback failed after the first run was
    # stored, a duration given as the deadline stopped the grid with nothing trained
    monkeypatch.delenv("AOI_FL_EXECUTOR", raising=False)  # make test EXECUTOR=ray exports it
    results_dir, data_root = nothing_runs
    kwargs = {"results_dir": results_dir, "data_root": data_root, "progress": False, **options}
    with pytest.raises(error, match=message):
        runs.run_grid([TINY], **kwargs)


def test_configurations_must_come_as_a_list(nothing_runs):
    results_dir, data_root = nothing_runs
    with pytest.raises(TypeError, match=r"configs must be a list of configurations, got one: "):
        runs.run_grid(TINY, results_dir=results_dir, data_root=data_root)
    with pytest.raises(TypeError, match=r"configs must be a list of configurations, got None"):
        runs.run_grid(None, results_dir=results_dir, data_root=data_root)


def test_run_experiments_own_arguments_are_refused_before_any_run(nothing_runs, tmp_path):
    results_dir, data_root = nothing_runs
    afile = tmp_path / "afile"
    afile.write_text("")
    for options, error, message in [
        ({"rerun": "no"}, TypeError, r"rerun must be True or False, got 'no'"),
        ({"checkpoint_seconds": "30"}, TypeError, r"checkpoint_seconds must be a number of seco"),
        ({"results_dir": str(afile)}, ValueError, r"results_dir='.*afile' is a file; it must"),
    ]:
        kwargs = {"results_dir": results_dir, "data_root": data_root, "progress": False, **options}
        with pytest.raises(error, match=message):
            runs.run_experiment(TINY, **kwargs)
    with pytest.raises(ValueError, match=r"results_dir='.*afile' is a file"):
        runs.cached_results([TINY], results_dir=str(afile))


def test_a_gpu_the_machine_lacks_is_refused_before_the_data_loads(nothing_runs, monkeypatch):
    # it used to be found when the trainer was built, after the data had loaded (and in a grid
    # after the other batches had trained)
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("AOI_FL_EXECUTOR", raising=False)
    results_dir, data_root = nothing_runs
    gpu = changed(TINY, "training.device", "cuda")
    with pytest.raises(ValueError, match=r"device 'cuda' was requested but this machine has no"):
        runs.run_grid([TINY, gpu], results_dir=results_dir, data_root=data_root, progress=False)
    with pytest.raises(ValueError, match=r"device 'cuda' was requested but this machine has no"):
        runs.run_experiment(TINY, results_dir=results_dir, data_root=data_root, device="cuda")
    # a configuration that names no device trains on $AOI_FL_DEVICE's: checked as early
    monkeypatch.setenv("AOI_FL_DEVICE", "cuda")
    with pytest.raises(ValueError, match=r"device 'cuda' was requested but this machine has no"):
        runs.run_grid([TINY], results_dir=results_dir, data_root=data_root, progress=False)
    assert not Path(results_dir).exists()  # refused before the results folder is made
    # on Ray the cluster's GPUs count, not this machine's: nothing is refused here
    trained = []
    monkeypatch.setattr(runs, "_train_on_ray", lambda found, todo, *a: trained.extend(todo))
    monkeypatch.setattr(runs._Found, "ordered", lambda self: [])
    runs.run_grid([gpu], results_dir=results_dir, executor="ray", ray_address="auto")
    assert trained == [0]


def test_a_missing_dataset_is_refused_before_any_run_of_the_grid_trains(nothing_runs):
    # a grid used to find it when its batch loaded, after other datasets' runs had trained
    from aoi_fl.data.files import DataError

    results_dir, data_root = nothing_runs
    with pytest.raises(DataError, match=r"MNIST"):
        runs.run_grid([TINY, MNIST], results_dir=results_dir, data_root=data_root, progress=False)
    assert not Path(results_dir).exists()  # refused before the results folder is made


LOGNORMAL = {"name": "lognormal_dirichlet", "n_clients": 10, "seed": 0, "alpha": 0.5}


@pytest.mark.parametrize(
    "options, message",
    [
        ({"sigma": 1e6}, r"partition.sigma must be <= 50.0, got 1000000.0"),
        (
            {"sigma": 1.0, "total": 10**9},
            r"partition.total must be <= 200 \(the 200 training samples of dataset 'mnist'\), "
            r"got 1000000000",
        ),
        (
            {"sigma": 1.0, "total": 5, "min_size": 1},
            r"partition.total must be >= 10, got 5",
        ),
    ],
)
def test_partition_sizes_are_named_before_the_data_is_loaded(nothing_runs, options, message):
    config = changed(MNIST, "partition", {**LOGNORMAL, **options})
    assert_fails_before_work(config, ValueError, message, *nothing_runs)


def test_more_clients_than_samples_are_refused_before_loading(nothing_runs):
    config = changed(MNIST, "partition.n_clients", 300)
    message = (
        r"partition.n_clients=300 clients of at least 1 samples each need more than the 200 "
        r"training samples of dataset 'mnist'; allowed: n_clients <= 200"
    )
    assert_fails_before_work(config, ValueError, message, *nothing_runs)


def trace_config(directory, text, name="trace.csv", **options):
    path = directory / name
    path.write_text(text)
    return {**TINY, "availability": {"name": "trace", "path": name, **options}}


def test_a_trace_path_or_digest_of_digits_is_text(tmp_path, monkeypatch, nothing_runs):
    monkeypatch.chdir(tmp_path)
    config = trace_config(tmp_path, "client,start,end\n0,0,2\n", name="2024")
    assert runs.resolve_config(config)["availability"]["path"] == "2024"
    message = (
        r"sha256 must be None or the file's SHA-256 \(64 lowercase hexadecimal digits\), "
        r"got '1234'"
    )
    digits = changed(config, "availability.sha256", "1234")
    assert_fails_before_work(digits, ValueError, message, *nothing_runs)
    other = changed(config, "availability.sha256", "1" * 64)
    message = r"trace file '2024' has changed: its sha256 is \w{64}, the configuration names '1+'"
    assert_fails_before_work(other, ValueError, message, *nothing_runs)


def test_a_trace_end_beyond_int64_is_refused(tmp_path, monkeypatch, nothing_runs):
    monkeypatch.chdir(tmp_path)
    config = trace_config(tmp_path, f"client,start,end\n0,0,2\n1,0,{10**30}\n")
    message = (
        rf"config section 'availability': trace file 'trace.csv', line 3: end must be <= "
        rf"{2**63 - 1} \(rounds are int64\), got {10**30}"
    )
    assert_fails_before_work(config, ValueError, message, *nothing_runs)


def test_a_trace_is_parsed_once_per_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = "".join(f"{i % 6},{i},{i + 3}\n" for i in range(1000))
    config = trace_config(tmp_path, "client,start,end\n" + rows)
    parsed = []
    plain_rows = availability_trace._plain_rows
    monkeypatch.setattr(
        availability_trace, "_plain_rows", lambda content: parsed.append(1) or plain_rows(content)
    )
    monkeypatch.setattr(availability_trace, "_PARSED", {})
    run(config, str(tmp_path / "cache"), str(tmp_path))
    assert parsed == [1]


# warnings: legal values that are almost surely mistakes; the run is not refused


@pytest.mark.parametrize(
    "config, message",
    [
        (
            changed(MNIST, "dataset.n_train", 10**12),
            r"dataset.n_train=1000000000000 is more than the 60000 training samples of dataset "
            r"'mnist': all 60000 are used \(allowed: 1..60000, or None for all\)",
        ),
        (
            changed(TINY, "training.batch_size", 10**9),
            r"training.batch_size=1000000000 is more than 10 times the 60 training samples of "
            r"the whole dataset: every local step takes all of a client's samples \(full batch\), "
            r"as with batch_size=60, but the mini-batch schedules are padded to batch_size; "
            r"allowed without this warning: 1..600",
        ),
        (
            changed(TINY, "training.lr.lr", 1e6),
            r"training.lr=\{'name': 'constant', 'lr': 1000000.0\} starts at the learning rate "
            r"1000000.0, more than 10.0: SGD almost surely diverges",
        ),
        (
            changed(
                changed(TINY, "sampler", {"name": "kvib", "k": 2, "rounds": 5}),
                "training.rounds",
                20,
            ),
            r"sampler.rounds=5 but training.rounds=20: sampler 'kvib' is tuned for a run of "
            r"sampler.rounds rounds; set sampler.rounds=20",
        ),
        (
            {**TINY, "availability": {"name": "bernoulli", "rates": [0.0] * 6}},
            r"availability 'bernoulli' lets no client take part in any of the 2 rounds "
            r"\(training.rounds=2\): nothing is trained and the model keeps its initial accuracy",
        ),
        (
            {
                **TINY,
                "availability": {"name": "diurnal", "base": 0.0, "amplitude": 0.0, "period": 4},
            },
            r"availability 'diurnal' lets no client take part in any of the 2 rounds",
        ),
    ],
)
def test_legal_but_suspicious_values_are_warned_about_before_work(
    machine, nothing_runs, config, message
):
    with pytest.warns(config_checks.ConfigWarning, match=message):
        runs.resolve_config(config)


def test_a_trace_that_starts_after_the_run_is_warned_about(tmp_path, monkeypatch, nothing_runs):
    monkeypatch.chdir(tmp_path)
    config = trace_config(tmp_path, "client,start,end\n0,2,5\n")
    message = r"availability 'trace' lets no client take part in any of the 2 rounds"
    with pytest.warns(config_checks.ConfigWarning, match=message):
        runs.resolve_config(config)
    with warnings.catch_warnings():
        warnings.simplefilter("error", config_checks.ConfigWarning)
        runs.resolve_config(changed(config, "training.rounds", 3))  # round 2 has client 0
