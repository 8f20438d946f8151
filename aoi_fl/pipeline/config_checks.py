"""Checks of a run configuration that need no data: a bad configuration fails before any work.

A mistake found after the dataset is loaded costs seconds, one found after training costs the
run, and in a grid every run before the bad one is trained and cached first. So
:func:`aoi_fl.pipeline.runs.resolve_config` runs these checks on every configuration, and a grid
checks all of its configurations before it trains one:

- :func:`plain`: the values are JSON (NumPy numbers become Python's, so that they give the same
  cache key) and no number is written as a string (``"0.5"`` would be stored under another key
  than ``0.5``: the same run cached twice);
- :func:`check_config`: names; every option against the signature of what it configures
  (unknown and missing options are reported with the valid ones; the type an annotation names;
  seeds; the ranges of partition options); dry runs of the sampler, the algorithm, the training
  settings and the learning-rate schedule (every round's rate); the model against the dataset's
  facts (:mod:`aoi_fl.data.facts`: one forward pass of a zero sample, outputs against classes,
  loss against the task, the engine);
- memory: every option that sets how much a run allocates (generated samples, rounds, local
  steps and their mini-batch schedules, a Markov sampler's m', an availability model's states)
  against the machine's memory (:func:`aoi_fl.core.validation.require_memory`: a lower bound
  of the bytes, its formula in the message); what only the data can tell (a partition's total
  and clients against the training samples) against the dataset's facts;
- the sampler's first round (it must build a :class:`~aoi_fl.core.selection.Sampler` that
  selects among the clients; a user's factory that fails is named), the learning-rate schedule
  in closed form (:meth:`~aoi_fl.core.train._Schedule.first_outside`: no loop over rounds).

Values that are legal but almost surely a mistake give a :class:`ConfigWarning` and run: more
samples asked than the dataset holds, a batch over :data:`BATCH_SLACK` times the dataset, a
learning rate above :data:`PLAUSIBLE_LR`, a sampler tuned for another number of rounds
(:data:`aoi_fl.core.registry.HORIZONS`), availability that lets nobody take part in any round.

Every message names the parameter by its path in the configuration (``sampler.m``,
``training.lr``). Dry runs are cached per specification: a grid repeats its models and samplers.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from aoi_fl.core import registry
from aoi_fl.core.availability import AVAILABILITY, build_availability, check_availability_spec
from aoi_fl.core.engines import LocalTraining
from aoi_fl.core.models import MODELS, build_model
from aoi_fl.core.selection import Sampler, check_selection_ids
from aoi_fl.core.train import LR_SCHEDULES, TrainSettings
from aoi_fl.core.validation import require_choice, require_int, require_memory, require_real
from aoi_fl.data.facts import DatasetFacts, dataset_facts
from aoi_fl.data.partition import MAX_LOGNORMAL_SIGMA
from aoi_fl.pipeline.cache import canonical_json

Table = Mapping[str, Callable[..., Any]]

#: the loss each kind of task trains with (classification needs an accuracy; a regression
#: target has no class to take a cross-entropy against)
TASK_LOSS = {"classification": "cross_entropy", "regression": "mse"}
#: the learning rates float32 parameters can step with: a larger rate overflows in the first
#: step, a smaller one is 0
_FLOAT32_RATES = (float(np.finfo(np.float32).smallest_subnormal), float(np.finfo(np.float32).max))
#: the training options that are :class:`TrainSettings` fields (the others configure the run)
SETTINGS = tuple(f.name for f in dataclasses.fields(TrainSettings))
#: the largest learning rate that is not almost surely a mistake: SGD diverges beyond 2/L,
#: and on the normalised data here the smoothness L of the loss is about 1 or more (the
#: papers train with 0.001 to 0.1)
PLAUSIBLE_LR = 10.0
#: how many times the whole training set a batch may hold without a warning: any batch of at
#: least the data trains the same (full batch), but the mini-batch schedules are padded to it
BATCH_SLACK = 10
#: the least history a round adds (its learning rate, a float in a list: 8 + 24 bytes)
HISTORY_BYTES_PER_ROUND = 32
#: sampler options that set a sampler's memory: (bytes per unit of the option + 1, what
#: they hold); the Markov policies' peak is measured (tracemalloc, m' = 10^5 and 10^6)
SAMPLER_MEMORY: dict[str, tuple[int, str]] = {
    "m_prime": (136, "the Markov chain over the ages 0..m' (about 17 float64 vectors at its peak)")
}


class ConfigWarning(UserWarning):
    """A configuration value that is legal but almost surely a mistake (the run goes on)."""


def _warn(message: str) -> None:
    warnings.warn(message, ConfigWarning, stacklevel=3)


def _optional(check: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
    return lambda path, value: None if value is None else check(path, value)


#: ranges of the partition options (besides n_clients >= 1, which every partition takes) that
#: mean the same in every partition taking them; what needs the data (e.g. n_clients <= the
#: number of samples) is checked when partitioning
PARTITION_RANGES: dict[str, Callable[[str, Any], Any]] = {
    "alpha": functools.partial(require_real, minimum=0.0, strict_minimum=True),
    "a": functools.partial(require_real, minimum=1.0, strict_minimum=True),
    "sigma": functools.partial(require_real, minimum=0.0, maximum=MAX_LOGNORMAL_SIGMA),
    "total": _optional(functools.partial(require_int, minimum=1)),
}
#: the smallest min_size: a Dirichlet label split may leave a client empty, a size law may not
#: (:mod:`aoi_fl.data.partition`)
MIN_SIZE_FLOOR = {"dirichlet": 0, "dirichlet_prior": 0}


# ---------------------------------------------------------------------------------------------
# Shape and values


def require_mapping(path: str, value: Any) -> Mapping[str, Any]:
    """``value`` must be a dict; a bare name gets the hint of the dict it should be."""
    if isinstance(value, Mapping):
        return value
    hint = f" (e.g. {{'name': {value!r}}})" if isinstance(value, str) else ""
    raise TypeError(
        f"{path} must be a dict of options{hint}, got {value!r} ({type(value).__name__})"
    )


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _text(path: str, text: str, texts: frozenset[str]) -> str:
    if path.rsplit(".", 1)[-1] in texts:
        return text
    try:
        float(text)
    except ValueError:
        return text
    raise TypeError(f"{path}={text!r} must be a number, not a string")


def _text_options() -> frozenset[str]:
    """The option names that are declared strings (a trace's path and sha256, a name): their
    values are text even when they read like numbers (a path "2024", a digest of digits)."""
    tables = (registry.SAMPLERS, registry.ALGORITHMS, LR_SCHEDULES, MODELS, AVAILABILITY)
    params = [p for table in tables for f in table.values() for p in _parameters(f, 0) or ()]
    params += _parameters(TrainSettings, 0) or ()
    declared = {
        p.name
        for p in params
        if (kinds := _kinds(p.annotation)) and "str" in kinds and not {"int", "float"} & {*kinds}
    }
    return frozenset(declared | {"name"})  # every section's name


def plain(value: Any, path: str = "", texts: frozenset[str] | None = None) -> Any:
    """``value`` as JSON types: NumPy scalars and arrays as Python numbers and lists, tuples as
    lists; anything else that JSON cannot hold, and a number written as a string (but for an
    option declared a string, :func:`_text_options`), raises."""
    texts = _text_options() if texts is None else texts
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                where = path or "config"
                raise TypeError(f"{where} has the option name {key!r}; names must be strings")
        return {k: plain(v, _join(path, k), texts) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return plain(value.tolist(), path, texts)
    if isinstance(value, list | tuple):
        return [plain(v, f"{path}[{i}]", texts) for i, v in enumerate(value)]
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return int(value) if isinstance(value, int) else float(value)
    if isinstance(value, str):
        return _text(path, value, texts)
    raise TypeError(
        f"{path}={value!r} ({type(value).__name__}) is not JSON serializable: use numbers, "
        "strings, True/False, None, lists or dicts"
    )


# ---------------------------------------------------------------------------------------------
# Names and options


def _name(path: str, label: str, spec: Mapping[str, Any], table: Table) -> str:
    if "name" not in spec:
        raise ValueError(f"{path} must be a dict with a 'name' (one of {', '.join(sorted(table))})")
    return require_choice(label, spec["name"], table)


@functools.cache
def _parameters(factory: Callable[..., Any], leading: int) -> tuple[inspect.Parameter, ...] | None:
    """The options of ``factory`` after its ``leading`` positional arguments; None if it takes
    any (``**options`` passed on without :func:`registry.declare_options`)."""
    params = list(inspect.signature(factory).parameters.values())[leading:]
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return tuple(p for p in params if p.kind is not p.VAR_POSITIONAL)


def _options_text(params: tuple[inspect.Parameter, ...]) -> str:
    valid = ", ".join(p.name for p in params) or "none"
    required = [p.name for p in params if p.default is p.empty]
    return f"valid: {valid}" + (f" (required: {', '.join(required)})" if required else "")


def _require_options(
    path: str, name: str, options: Mapping[str, Any], params: tuple[inspect.Parameter, ...]
) -> None:
    known = {p.name for p in params}
    unknown = sorted(set(options) - known)
    missing = [p.name for p in params if p.default is p.empty and p.name not in options]
    if unknown or missing:
        problems = [f"unknown options {unknown}"] * bool(unknown)
        problems += [f"missing options {missing}"] * bool(missing)
        raise ValueError(f"{path} {name!r}: {', '.join(problems)}; {_options_text(params)}")


_KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "int": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "float": ("a real number", lambda v: isinstance(v, int | float) and not isinstance(v, bool)),
    "bool": ("True or False", lambda v: isinstance(v, bool)),
    "str": ("a string", lambda v: isinstance(v, str)),
    "None": ("None", lambda v: v is None),
}


def _kinds(annotation: Any) -> list[str] | None:
    """The simple types an annotation names ("int | None" -> int, None), or None for others."""
    if annotation is inspect.Parameter.empty:
        return None
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", None)
    kinds = [part.strip() for part in str(text or annotation).split("|")]
    return kinds if all(k in _KINDS for k in kinds) else None


def _require_type(path: str, value: Any, param: inspect.Parameter) -> None:
    kinds = _kinds(param.annotation)
    if kinds is None or any(_KINDS[k][1](value) for k in kinds):
        return
    wanted = " or ".join(_KINDS[k][0] for k in kinds)
    raise TypeError(f"{path} must be {wanted}, got {value!r} ({type(value).__name__})")


def _check_options(
    path: str, name: str, options: Mapping[str, Any], params: tuple[inspect.Parameter, ...] | None
) -> None:
    """``options`` (without ``name``) of what ``params`` (see :func:`_parameters`; None: any
    option) describe: their names, the types the annotations name, every seed >= 0."""
    if params is not None:
        _require_options(path, name, options, params)
        for p in params:
            if p.name in options:
                _require_type(f"{path}.{p.name}", options[p.name], p)
    if "seed" in options:
        # every seed goes to aoi_fl.core.seeding, whatever the section
        require_int(f"{path}.seed", options["seed"], minimum=0)


def _options(spec: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if k != "name"}


def _located(
    path: str, options: Mapping[str, Any], exc: ValueError | TypeError, label: str
) -> Exception:
    """``exc`` (ValueError or TypeError) with its message placed in the configuration: a message
    about an option (``"m must be <= n"``, ``"m=3 ..."``) becomes ``"sampler.m must be <= n"``,
    any other is prefixed with ``label``."""
    text = str(exc)
    first = text.split(" ", 1)[0].split("=", 1)[0]
    message = f"{path}.{text}" if first in options else f"{label}: {text}"
    return (ValueError if isinstance(exc, ValueError) else TypeError)(message)


def _dry_run(
    path: str, options: Mapping[str, Any], build: Callable[[], Any], label: str | None = None
) -> Any:
    try:
        return build()
    except (ValueError, TypeError) as exc:
        raise _located(path, options, exc, label or path) from exc


# ---------------------------------------------------------------------------------------------
# Sections


def _dataset(spec: Mapping[str, Any], datasets: Table) -> DatasetFacts | None:
    name = _name("dataset", "dataset name", spec, datasets)
    options = _options(spec)
    _check_options("dataset", name, options, _parameters(datasets[name], 1))  # after the root
    facts = _dry_run("dataset", options, lambda: dataset_facts(name, options))
    kept = None if facts is None else facts.train_samples
    if kept is not None and (n_train := options.get("n_train") or 0) > kept:
        _warn(
            f"dataset.n_train={n_train} is more than the {kept} training samples of dataset "
            f"{name!r}: all {kept} are used (allowed: 1..{kept}, or None for all)"
        )
    return facts


def check_natural(n_clients: int, dataset: str, clients: int | None) -> None:
    """Partition ``natural`` of ``dataset``, generated with ``clients`` clients (None: not
    generated client by client), into ``n_clients``: raise ValueError unless it exists."""
    if clients is None:
        raise ValueError(
            f"partition 'natural' needs a dataset generated client by client; {dataset!r} has "
            "no natural partition (use e.g. 'iid' or 'dirichlet')"
        )
    if clients != n_clients:
        raise ValueError(
            f"partition.n_clients={n_clients} but dataset {dataset!r} is generated with "
            f"{clients} clients (its n_clients)"
        )


def _partition(
    spec: Mapping[str, Any], partitions: Table, dataset: str, facts: DatasetFacts | None
) -> tuple[int, int]:
    """Check the partition; return its number of clients and a lower bound of the training
    samples of its smallest client (:func:`_smallest_client`)."""
    name = _name("partition", "partition name", spec, partitions)
    options = _options(spec)
    params = _parameters(partitions[name], 1)  # after the data
    _check_options("partition", name, options, params)
    n_clients = require_int("partition.n_clients", options.get("n_clients"), minimum=1)
    for key, check in PARTITION_RANGES.items():
        if key in options:
            check(f"partition.{key}", options[key])
    if "min_size" in options:
        require_int("partition.min_size", options["min_size"], minimum=MIN_SIZE_FLOOR.get(name, 1))
    min_size = options.get("min_size", {p.name: p.default for p in params or ()}.get("min_size"))
    if options.get("total") is not None and min_size:
        require_int("partition.total", options["total"], minimum=n_clients * min_size)
    if facts is None:  # a dataset without facts is checked on load
        return n_clients, 0
    if name == "natural":
        check_natural(n_clients, dataset, facts.clients)
    if facts.train_samples is not None:
        _fits_samples(name, options, n_clients, min_size, facts.train_samples, dataset)
    return n_clients, _smallest_client(name, n_clients, min_size, facts)


def _fits_samples(
    name: str,
    options: Mapping[str, Any],
    n_clients: int,
    min_size: int | None,
    samples: int,
    dataset: str,
) -> None:
    """What the partition takes from the dataset's ``samples`` training samples: at most all."""
    where = f"the {samples} training samples of dataset {dataset!r}"
    if options.get("total") is not None and options["total"] > samples:
        raise ValueError(f"partition.total must be <= {samples} ({where}), got {options['total']}")
    smallest = 1 if name == "iid" else min_size
    if smallest and n_clients * smallest > samples:
        raise ValueError(
            f"partition.n_clients={n_clients} clients of at least {smallest} samples each need "
            f"more than {where}; allowed: n_clients <= {samples // smallest}"
        )


def _smallest_client(name: str, n_clients: int, min_size: int | None, facts: DatasetFacts) -> int:
    """A lower bound of the training samples of the partition's smallest client: the natural
    partition's known sizes, an IID split's floor(samples / n_clients), a partition's min_size
    (its draws are repeated, or its sizes shifted, until every client has that many), else 0."""
    if name == "natural":
        return facts.client_samples or 0
    if name == "iid":
        return (facts.train_samples or 0) // n_clients
    return min_size or 0


def _zero_losses(ids: np.ndarray, samples: int | None = None, *, free: bool = False) -> tuple:
    return np.zeros(len(ids)), np.zeros(len(ids))


@functools.lru_cache(maxsize=1024)
def _sampler_dry_run(
    factory: Callable[..., Any], name: str, options_json: str, n_clients: int
) -> None:
    """Build sampler ``name`` and draw its first round.

    The clients' sizes need the data; equal sizes run the sampler's own checks of its options
    (e.g. m <= n) all the same. The draw gets what the trainer would give a sampler before it
    (zero losses, unit update norms), and must select clients among 0..n_clients-1.
    """
    sampler = factory(n_clients, np.ones(n_clients), **json.loads(options_json))
    module, qualname = registry.origin(factory)
    if not isinstance(sampler, Sampler):
        raise TypeError(
            f"its factory {module}.{qualname} returned {sampler!r} ({type(sampler).__name__}); "
            f"it must return a Sampler ({Sampler.__module__}.Sampler)"
        )
    if sampler.n != n_clients:
        raise ValueError(
            f"its factory {module}.{qualname} returned a sampler of n={sampler.n} clients for "
            f"partition.n_clients={n_clients}; they must be equal"
        )
    if sampler.wants_losses:
        sampler.loss_probe = _zero_losses
    sampler.inform(np.ones(n_clients))
    check_selection_ids(sampler.sample(), n_clients, name)


def check_sampler(spec: Mapping[str, Any], n_clients: int) -> None:
    """A configuration's ``sampler`` section for ``n_clients`` clients: a registered name, its
    options (names, memory, values by a dry draw), raising ValueError that names the key, the
    value and what is allowed; loads no data."""
    name = _name("sampler", "sampler name", spec, registry.SAMPLERS)
    options = _options(spec)
    factory = registry.SAMPLERS[name]
    _check_options("sampler", name, options, _parameters(factory, 2))  # after (n, sizes)
    for key, (per_unit, what) in SAMPLER_MEMORY.items():
        if isinstance(options.get(key), int):
            require_memory(
                {f"sampler.{key}": options[key]},
                lambda v, per_unit=per_unit: per_unit * (v + 1),
                f"{per_unit} bytes * ({key} + 1): {what}",
            )
    label = f"sampler {name!r}"
    key = canonical_json(options)
    try:
        _dry_run("sampler", options, lambda: _sampler_dry_run(factory, name, key, n_clients), label)
    except (ValueError, TypeError):
        raise
    except Exception as exc:  # noqa: BLE001  (a user's factory may raise anything)
        module, qualname = registry.origin(factory)
        raise ValueError(
            f"{label} (factory {module}.{qualname}) with options {options} for {n_clients} "
            f"clients fails: {type(exc).__name__}: {exc}"
        ) from exc


def _horizon(spec: Mapping[str, Any], rounds: int) -> None:
    """Warn when a sampler tuned for a number of rounds (:data:`registry.HORIZONS`) is given
    another number than the run trains."""
    option = registry.HORIZONS.get(spec["name"])
    if option is not None and option in spec and spec[option] != rounds:
        _warn(
            f"sampler.{option}={spec[option]} but training.rounds={rounds}: sampler "
            f"{spec['name']!r} is tuned for a run of sampler.{option} rounds; set "
            f"sampler.{option}={rounds}"
        )


def check_availability_section(
    spec: Mapping[str, Any], n_clients: int | None = None
) -> dict[str, Any]:
    """The availability section's model and options, checked (a message that names the
    section); returns its canonical form (:func:`check_availability_spec`)."""
    try:
        return check_availability_spec(spec, n_clients)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"config section 'availability': {exc}") from exc


def _availability(spec: Mapping[str, Any] | None, sampler: str, n_clients: int) -> None:
    """An availability model that exists, with valid options, paired with a sampler that picks
    among the available clients (:data:`registry.AVAILABILITY_AWARE`)."""
    if spec is None:
        return
    check_availability_section(spec, n_clients)
    if sampler not in registry.AVAILABILITY_AWARE:
        raise ValueError(
            f"sampler {sampler!r} cannot select under availability model {spec['name']!r}: it "
            f"does not pick among the available clients; availability-aware samplers: "
            f"{sorted(registry.AVAILABILITY_AWARE)}"
        )


def _availability_rounds(spec: Mapping[str, Any] | None, n_clients: int, rounds: int) -> None:
    """The (checked) availability model over the run's rounds: its memory, and a warning when
    it lets no client take part in any round (nothing would train)."""
    if spec is None:
        return
    model = build_availability(spec, n_clients, np.ones(n_clients))
    if per := model.bytes_per_client_round:
        require_memory(
            {"training.rounds": rounds, "partition.n_clients": n_clients},
            lambda r, n: per * r * n,
            f"{per} byte(s) * rounds * n_clients: availability {model.name!r} keeps its states",
        )
    if model.nobody_available(rounds):
        _warn(
            f"availability {model.name!r} lets no client take part in any of the {rounds} "
            f"rounds (training.rounds={rounds}): nothing is trained and the model keeps its "
            "initial accuracy"
        )


def _named(label: str, path: str, spec: Any, table: Table) -> tuple[Callable[..., Any], dict]:
    if not isinstance(spec, Mapping):
        raise ValueError(f"{label} must be a dict with a 'name', got {spec!r}")
    name = _name(path, label, spec, table)
    options = _options(spec)
    _check_options(path, name, options, _parameters(table[name], 0))
    return table[name], options


def _lr(spec: Any, rounds: int) -> None:
    """Every round's rate within :data:`_FLOAT32_RATES` (in O(log rounds) rates,
    :meth:`~aoi_fl.core.train._Schedule.first_outside`); a warning above :data:`PLAUSIBLE_LR`."""
    factory, options = _named("training lr", "training.lr", spec, LR_SCHEDULES)
    schedule = _dry_run("training.lr", options, lambda: factory(**options))
    bad = schedule.first_outside(*_FLOAT32_RATES, rounds)
    if bad is not None:
        raise ValueError(
            f"training.lr={dict(spec)!r} gives the learning rate {bad[1]!r} in round {bad[0]}; "
            f"the rate of every round 0..{rounds - 1} must be within [{_FLOAT32_RATES[0]:.3g}, "
            f"{_FLOAT32_RATES[1]:.4g}] (> 0 and finite in float32)"
        )
    if rounds and (first := float(schedule(0))) > PLAUSIBLE_LR:
        _warn(
            f"training.lr={dict(spec)!r} starts at the learning rate {first!r}, more than "
            f"{PLAUSIBLE_LR}: SGD almost surely diverges (the papers train with 0.001 to 0.1)"
        )


@functools.lru_cache(maxsize=1024)
def _algorithm_dry_run(factory: Callable[..., Any], options_json: str, n_clients: int) -> None:
    algorithm = factory(**json.loads(options_json))
    # the per-client state of a one-number model: the algorithm's own checks against the
    # number of clients (e.g. one weight per client) at no cost in memory
    algorithm.setup(n_clients, {"placeholder": torch.zeros(1)})


def _algorithm(training: Mapping[str, Any], n_clients: int) -> None:
    factory, options = _named(
        "training algorithm", "training.algorithm", training["algorithm"], registry.ALGORITHMS
    )
    # an algorithm option that is also a training setting describes the same thing (FedSUM's
    # local_steps: its correction assumes the clients take exactly that many steps)
    for key in sorted(set(options) & set(training)):
        if options[key] != training[key]:
            raise ValueError(
                f"training.algorithm.{key}={options[key]!r} differs from "
                f"training.{key}={training[key]!r}; they must be equal"
            )
    _dry_run(
        "training.algorithm",
        options,
        lambda: _algorithm_dry_run(factory, canonical_json(options), n_clients),
    )


def _training_memory(t: TrainSettings, smallest: int) -> None:
    """The memory the run's length and its clients' local steps imply (lower bounds).

    The history keeps :data:`HISTORY_BYTES_PER_ROUND` per round at least. A client trains from
    an int64 schedule of its mini-batches (:mod:`aoi_fl.core.engines`): ``local_steps`` rows of
    min(batch_size, its samples), or ``local_epochs`` epochs of rows padded to batch_size
    (>= max(batch_size, its samples) entries each); every client has at least ``smallest``
    samples (:func:`_smallest_client`).
    """
    require_memory(
        {"training.rounds": t.rounds},
        lambda rounds: HISTORY_BYTES_PER_ROUND * rounds,
        f"{HISTORY_BYTES_PER_ROUND} bytes * rounds: every round's learning rate in the history",
    )
    if t.local_steps is not None:
        width = min(t.batch_size, max(smallest, 1))  # a client without samples cannot step
        require_memory(
            {"training.local_steps": t.local_steps},
            lambda steps: 8 * steps * width,
            f"8 bytes * local_steps * {width} (min(batch_size, the smallest client's {smallest} "
            "samples)): one client's mini-batch schedule of a round",
        )
    elif smallest:
        require_memory(
            {"training.local_epochs": t.local_epochs, "training.batch_size": t.batch_size},
            lambda epochs, batch: 8 * epochs * max(batch, smallest),
            f"8 bytes * local_epochs * max(batch_size, {smallest}, the smallest client's "
            "samples): one client's mini-batch schedule of a round",
        )


def _training(
    training: Mapping[str, Any], n_clients: int, smallest: int, facts: DatasetFacts | None
) -> None:
    settings = {k: v for k, v in training.items() if k in SETTINGS}
    checked = _dry_run("training", settings, lambda: TrainSettings(**settings))
    for key in ("keep_params", "compress"):
        if not isinstance(training.get(key, False), bool):
            raise TypeError(f"training.{key} must be True or False, got {training[key]!r}")
    _training_memory(checked, smallest)
    _lr(training["lr"], checked.rounds)
    _algorithm(training, n_clients)
    samples = None if facts is None else facts.train_samples
    if samples is not None and checked.batch_size > BATCH_SLACK * samples:
        _warn(
            f"training.batch_size={checked.batch_size} is more than {BATCH_SLACK} times the "
            f"{samples} training samples of the whole dataset: every local step takes all of a "
            f"client's samples (full batch), as with batch_size={samples}, but the mini-batch "
            f"schedules are padded to batch_size; allowed without this warning: 1.."
            f"{BATCH_SLACK * samples}"
        )


# ---------------------------------------------------------------------------------------------
# The model against the dataset


def _model_options(spec: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    name = _name("model", "model name", spec, MODELS)
    options = _options(spec)
    params = _parameters(MODELS[name], 0)
    if params is not None:  # build_model's own option comes with the model's
        params = (*params, inspect.signature(build_model).parameters["init"])
    _check_options("model", name, options, params)
    return name, options


def _task_loss(facts: DatasetFacts, dataset: str, loss: str) -> None:
    wanted = TASK_LOSS["regression" if facts.num_classes is None else "classification"]
    if loss != wanted:
        raise ValueError(
            f"training.loss={loss!r} does not fit dataset {dataset!r} ({facts.task()}); "
            f"use loss {wanted!r}"
        )


def _declared_sizes(options: Mapping[str, Any], facts: DatasetFacts, dataset: str) -> None:
    if "in_features" in options and options["in_features"] != facts.features:
        raise ValueError(
            f"model.in_features={options['in_features']!r} does not match dataset {dataset!r} "
            f"({facts.features} features per sample)"
        )
    if "num_classes" in options and options["num_classes"] != facts.num_classes:
        raise ValueError(
            f"model.num_classes={options['num_classes']!r} does not match dataset {dataset!r} "
            f"({facts.task()})"
        )


def _outputs(model: torch.nn.Module, name: str, facts: DatasetFacts, dataset: str) -> int:
    """Outputs per sample of ``model`` on one zero sample of the dataset's shape."""
    model.eval()  # no dropout: no draw from torch's global RNG
    try:
        with torch.no_grad():
            out = model(torch.zeros(1, *facts.input_shape))
    except RuntimeError as exc:
        raise ValueError(
            f"model {name!r} cannot take the samples of dataset {dataset!r} (shape "
            f"{facts.input_shape}): {str(exc).splitlines()[0]}"
        ) from exc
    return out.numel()


@functools.lru_cache(maxsize=256)
def _model_fits(
    factory: Callable[..., Any],
    name: str,
    options_json: str,
    facts: DatasetFacts,
    dataset: str,
    training: tuple[str, str, int | None],
) -> None:
    """Raise unless model ``name`` (built by ``factory``: part of the key, so that a model
    registered anew is checked anew) fits the dataset and the (loss, engine, chunk) of its
    training."""
    loss, engine, chunk = training
    options = json.loads(options_json)
    _task_loss(facts, dataset, loss)
    # the shapes do not depend on the seed: one build serves every seed of a grid
    model = _dry_run("model", options, lambda: build_model(name, **options))
    _declared_sizes(options, facts, dataset)
    _dry_run(
        f"model {name!r} with training.engine={engine!r}",
        {},
        lambda: LocalTraining(model, loss, engine, chunk),
    )
    width = _outputs(model, name, facts, dataset)
    wanted = 1 if facts.num_classes is None else facts.num_classes
    if width != wanted:
        raise ValueError(
            f"model {name!r} gives {width} outputs per sample but dataset {dataset!r} "
            f"({facts.task()}) needs {wanted}"
        )


def _model(
    spec: Mapping[str, Any],
    training: Mapping[str, Any],
    dataset: str,
    facts: DatasetFacts | None,
) -> None:
    name, options = _model_options(spec)
    if facts is None:
        return
    unseeded = {k: v for k, v in options.items() if k != "seed"}
    _model_fits(
        MODELS[name],
        name,
        canonical_json(unseeded),
        facts,
        dataset,
        (training["loss"], training["engine"], training["client_chunk"]),
    )


def check_config(config: Mapping[str, Any], datasets: Table, partitions: Table) -> None:
    """Raise unless the resolved ``config`` can run (see the module docstring); reads no data.

    ``datasets`` and ``partitions`` are the name -> function tables of
    :mod:`aoi_fl.pipeline.runs`.
    """
    dataset = config["dataset"]
    facts = _dataset(dataset, datasets)
    n_clients, smallest = _partition(config["partition"], partitions, dataset["name"], facts)
    check_sampler(config["sampler"], n_clients)
    _availability(config.get("availability"), config["sampler"]["name"], n_clients)
    _training(config["training"], n_clients, smallest, facts)
    _model(config["model"], config["training"], dataset["name"], facts)
    rounds = config["training"]["rounds"]
    _horizon(config["sampler"], rounds)
    _availability_rounds(config.get("availability"), n_clients, rounds)
