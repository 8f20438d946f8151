"""Papers found by name, and a user's registrations in worker processes (issue 28).

A sampler registered in an importable module trains with one worker, two spawned workers and
Ray tasks; one defined where a worker cannot import it (a notebook cell or a script run as
``__main__``, a lambda) is refused in the parent before anything trains, with an error that
says to move it into an importable module; one worker in this process still takes it.
"""

import re

import pytest

from aoi_fl.core import registry
from aoi_fl.papers import PAPERS
from aoi_fl.pipeline import plugins, runs


def config(name, seed=0):
    return {
        "dataset": {"name": "fedprox_synthetic", "n_clients": 4, "seed": 0},
        "partition": {"name": "natural", "n_clients": 4},
        "model": {"name": "logistic_regression", "in_features": 60, "num_classes": 10},
        "sampler": {"name": name, "seed": seed},
        "training": {"rounds": 3, "local_steps": 2, "batch_size": 10, "eval_every": 3},
    }


@pytest.fixture
def notebook_sampler(tmp_path, user_policy):
    """The same sampler defined as in a notebook cell (module ``__main__``)."""
    name = f"cell_{tmp_path.name}"
    cell = {"__name__": "__main__"}
    exec(user_policy.format(name=name), cell)  # noqa: S102  (a notebook cell, as the kernel runs it)
    yield name
    del registry.SAMPLERS[name], registry.STYLES[name]


def selections(results):
    return [r.history["selected"] for r in results]


def test_the_papers_are_found_by_name_and_register_everything():
    assert plugins.paper_packages()[: len(PAPERS)] == PAPERS
    plugins.load()
    for name in ("random", "markov_optimal", "kvib", "exp_prior", "uniform", "bernoulli"):
        assert name in registry.SAMPLERS
    for name in ("fedavg", "fedsum", "agnostic"):
        assert name in registry.ALGORITHMS
    assert "full_information" in registry.RECORDERS
    assert [m.__name__ for m in plugins.claim_modules()] == [f"{p}.claims" for p in PAPERS]


def test_the_shared_layers_name_no_paper():
    import pathlib

    root = pathlib.Path(plugins.__file__).parent.parent
    for layer in ("core", "data", "pipeline"):
        for path in (root / layer).rglob("*.py"):
            text = path.read_text()
            for paper in plugins.paper_titles():
                assert not re.search(rf"\baoi_fl\.{paper}\b", text), (path, paper)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_a_sampler_from_an_importable_module_trains_in_workers(user_module, tmp_path, workers):
    configs = [config(user_module, seed) for seed in (0, 1)]
    results = runs.run_grid(
        configs, results_dir=str(tmp_path / "cache"), workers=workers, threads=1, progress=False
    )
    assert selections(results) == [[[0, 2], [1, 3], [0, 2]]] * 2


@pytest.mark.slow
def test_a_sampler_from_an_importable_module_trains_in_ray_tasks(user_module, tmp_path):
    pytest.importorskip("ray")
    results = runs.run_grid(
        [config(user_module)], results_dir=str(tmp_path / "cache"), executor="ray", workers=1,
        progress=False,
    )  # fmt: skip
    assert selections(results) == [[[0, 2], [1, 3], [0, 2]]]


@pytest.mark.parametrize("executor, workers", [("local", 2), ("ray", 1)])
def test_a_notebook_cells_sampler_is_refused_before_anything_trains(
    notebook_sampler, tmp_path, executor, workers
):
    cache = tmp_path / "cache"
    with pytest.raises(ValueError, match=r"importable module.*workers=1") as error:
        runs.run_grid(
            [config(notebook_sampler)], results_dir=str(cache), executor=executor, workers=workers
        )
    assert f"sampler {notebook_sampler!r} is registered with __main__.every_other" in str(
        error.value
    )
    assert not list(cache.glob("runs/*")) and not list(cache.glob("checkpoints/*"))


def test_a_lambda_is_refused_with_the_same_advice(tmp_path):
    name = f"lambda_{tmp_path.name}"
    registry.register_sampler(
        name, lambda n, sizes, seed=0: registry.SAMPLERS["random"](n, sizes, m=1, seed=seed)
    )
    try:
        with pytest.raises(ValueError, match=r"inside a function.*importable module"):
            runs.run_grid([config(name)], results_dir=str(tmp_path), workers=2)
    finally:
        del registry.SAMPLERS[name]


@pytest.mark.slow
def test_one_worker_in_this_process_takes_a_notebook_cells_sampler(notebook_sampler, tmp_path):
    results = runs.run_grid([config(notebook_sampler)], results_dir=str(tmp_path), progress=False)
    assert selections(results) == [[[0, 2], [1, 3], [0, 2]]]


@pytest.fixture
def paper_factory_renamed(tmp_path):
    """A paper's factory registered by the user under a name of their own (nested partials)."""
    import functools

    name = f"my_random_{tmp_path.name}"
    registry.register_sampler(name, functools.partial(registry.SAMPLERS["random"]))
    yield name
    del registry.SAMPLERS[name]


def test_a_paper_factory_under_a_users_name_is_shipped_by_reference(paper_factory_renamed):
    import pickle

    config_ = config(paper_factory_renamed)
    config_["sampler"]["m"] = 2
    assert registry.REGISTRARS[("sampler", paper_factory_renamed)] == __name__
    for by_value in (False, True):  # Ray: aoi_fl travels by reference too
        if by_value:
            pytest.importorskip("ray")
        ((kind, name, data, flags),) = plugins.shipped([config_], by_value=by_value)
        assert (kind, name) == ("sampler", paper_factory_renamed)
        assert registry.origin(pickle.loads(data)) == registry.origin(registry.SAMPLERS["random"])
        assert flags == {"availability": False, "horizon": None}  # as registered by the user
    assert plugins.shipped([config("random")]) == ()  # a paper's own name: the worker loads it


@pytest.mark.slow
def test_a_paper_factory_under_a_users_name_trains_in_workers(paper_factory_renamed, tmp_path):
    configs = [config(paper_factory_renamed, seed) for seed in (0, 1)]
    for c in configs:
        c["sampler"]["m"] = 2
    apart = runs.run_grid(configs, results_dir=str(tmp_path / "a"), workers=2, progress=False)
    here = runs.run_grid(configs, results_dir=str(tmp_path / "b"), progress=False)
    assert selections(apart) == selections(here)
