"""The device setting (issue 16), tested on the CPU: names, errors, identity and records."""

import json

import pytest
import torch

from aoi_fl.core import device as dev
from aoi_fl.pipeline import cache, runs

NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without a GPU")


def tiny_config(engine="auto", algorithm=None, model="logistic_regression"):
    spec = {"name": model, "seed": 0}
    if model == "logistic_regression":
        spec.update(in_features=784, num_classes=10)
    return {
        "dataset": {"name": "mnist"},
        "partition": {"name": "dirichlet_prior", "n_clients": 10, "seed": 0, "alpha": 0.3},
        "model": spec,
        "sampler": {"name": "bernoulli", "p": 0.4, "seed": 0},
        "training": {
            "rounds": 2,
            "local_steps": 2,
            "batch_size": 8,
            "engine": engine,
            "eval_every": 2,  # the initial and the final model: evaluations are costly here
            "client_loss_samples": 10,
            "lr": {"name": "constant", "lr": 0.05},
            "algorithm": algorithm or {"name": "fedavg"},
        },
    }


@pytest.fixture(autouse=True)
def no_device_variable(monkeypatch):
    monkeypatch.delenv(dev.DEVICE_VAR, raising=False)
    monkeypatch.delenv(dev.EVAL_BATCH_VAR, raising=False)


def test_the_name_comes_from_the_argument_then_the_environment_then_auto(monkeypatch):
    assert dev.requested_device() == "auto"
    monkeypatch.setenv(dev.DEVICE_VAR, "CPU")
    assert dev.requested_device() == "cpu"
    assert dev.requested_device("cuda:1") == "cuda:1"


@pytest.mark.parametrize("bad", ["gpu", "cuda:", "cuda:x", "tpu", "", 3])
def test_a_bad_name_is_refused_with_what_is_allowed(bad):
    with pytest.raises(ValueError, match=r"device must be 'auto', 'cpu', 'cuda', 'cuda:N'"):
        dev.requested_device(bad)


@NO_GPU
def test_auto_is_the_cpu_without_a_gpu():
    assert dev.resolve_device("auto") == torch.device("cpu")
    assert dev.resolve_device() == torch.device("cpu")


@NO_GPU
@pytest.mark.parametrize("name", ["cuda", "cuda:1"])
def test_a_missing_gpu_is_named_with_what_was_found(name):
    with pytest.raises(ValueError, match=rf"device '{name}' was requested but .* no CUDA device"):
        dev.resolve_device(name)


def test_mps_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="float64"):
        dev.resolve_device("mps")


def test_evaluation_batch_size_per_device_and_from_the_environment(monkeypatch):
    assert dev.eval_batch_size(torch.device("cpu")) == dev.CPU_EVAL_BATCH == 500
    assert dev.eval_batch_size(torch.device("cuda", 0)) == dev.GPU_EVAL_BATCH
    monkeypatch.setenv(dev.EVAL_BATCH_VAR, "64")
    assert dev.eval_batch_size(torch.device("cuda", 0)) == 64
    assert dev.eval_batch_size(torch.device("cpu")) == 500  # the cached results' size
    monkeypatch.setenv(dev.EVAL_BATCH_VAR, "-3")
    with pytest.raises(ValueError, match=dev.EVAL_BATCH_VAR):
        dev.eval_batch_size(torch.device("cuda", 0))


def test_an_out_of_memory_error_names_the_settings_to_lower():
    with pytest.raises(torch.OutOfMemoryError, match="client_chunk") as info:
        with dev.memory_hint(torch.device("cpu")):
            raise torch.OutOfMemoryError("CUDA out of memory")
    assert dev.EVAL_BATCH_VAR in str(info.value)


def _fingerprint(trainer):
    history = trainer.run()
    params = {k: v.clone() for k, v in trainer.reported_params().items()}
    return history, params


CASES = [
    ("linear", {"name": "fedavg"}, "logistic_regression"),
    ("stacked", {"name": "scaffold"}, "logistic_regression"),
    ("linear", {"name": "fedsum_cr", "local_steps": 2}, "logistic_regression"),
    ("linear", {"name": "fedau"}, "logistic_regression"),
    ("linear", {"name": "fedawe"}, "logistic_regression"),
    ("linear", {"name": "fedavg", "average": True, "radius": 5.0}, "logistic_regression"),
    ("blocked", {"name": "mifa"}, "small_cnn"),
    ("vmap", {"name": "fedvarp"}, "small_cnn"),
    ("sequential", {"name": "fedsum", "local_steps": 2}, "small_cnn"),
]


@pytest.mark.slow
@NO_GPU
@pytest.mark.parametrize(
    "engine,algorithm,model", CASES, ids=[f"{c[0]}-{c[1]['name']}" for c in CASES]
)
def test_explicit_cpu_gives_exactly_the_numbers_of_the_default(engine, algorithm, model):
    config = tiny_config(engine, algorithm, model)
    default = _fingerprint(runs.build_trainer(config, "data"))
    explicit = runs.build_trainer(config, "data", device="cpu")
    assert explicit.device == torch.device("cpu")
    assert all(v.device.type == "cpu" for v in explicit.params.values())
    history, params = _fingerprint(explicit)
    assert history == default[0]
    assert all(torch.equal(params[k], default[1][k]) for k in params)


def test_the_device_is_not_part_of_the_key_but_is_recorded(tmp_path):
    config = tiny_config()
    on_cpu = {**config, "training": {**config["training"], "device": "cpu"}}
    assert cache.config_key(runs.resolve_config(on_cpu)) == cache.config_key(
        runs.resolve_config(config)
    )
    result = runs.run_experiment(on_cpu, results_dir=str(tmp_path), progress=False)
    assert (result.device, result.cached) == ("cpu", False)
    stored = json.loads((tmp_path / "runs" / result.key / "result.json").read_text())
    assert stored["result"]["device"] == "cpu"
    again = runs.run_experiment(config, results_dir=str(tmp_path), progress=False)
    assert (again.device, again.cached, again.key) == ("cpu", True, result.key)


def test_a_bad_device_in_a_configuration_is_refused_before_training(tmp_path):
    config = tiny_config()
    config["training"]["device"] = "gpu0"
    with pytest.raises(ValueError, match="device must be"):
        runs.run_experiment(config, results_dir=str(tmp_path), progress=False)
    assert not (tmp_path / "runs").exists()


def test_a_checkpoint_resumes_on_an_explicit_device(tmp_path):
    config = tiny_config(algorithm={"name": "scaffold"})
    config["training"]["rounds"] = 4
    whole = _fingerprint(runs.build_trainer(config, "data", device="cpu"))
    first = runs.build_trainer(config, "data", device="cpu")
    first.run_round()
    first.run_round()
    store = cache.CheckpointStore(str(tmp_path), runs.resolve_config(config))
    store.save(first.round, *first.state_dict())
    _, tensors, state = store.load()  # read with map_location="cpu"
    resumed = runs.build_trainer(config, "data", device="cpu")
    resumed.load_state_dict(tensors, state)
    assert resumed.round == 2
    history, params = _fingerprint(resumed)
    assert history == whole[0]
    assert all(torch.equal(params[k], whole[1][k]) for k in params)
