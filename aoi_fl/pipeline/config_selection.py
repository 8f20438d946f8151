"""The sampler and availability sections: a dry draw of the sampler's first round, the memory
its options and the availability model's states take, and a sampler tuned for other rounds."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from aoi_fl.core import registry
from aoi_fl.core.availability import build_availability, check_availability_spec
from aoi_fl.core.selection import Sampler, check_selection_ids
from aoi_fl.core.validation import require_memory
from aoi_fl.pipeline.cache import canonical_json
from aoi_fl.pipeline.config_options import (
    _check_options,
    _dry_run,
    _name,
    _options,
    _parameters,
    _warn,
)

#: sampler options that set a sampler's memory: (bytes per unit of the option + 1, what
#: they hold); the Markov policies' peak is measured (tracemalloc, m' = 10^5 and 10^6)
SAMPLER_MEMORY: dict[str, tuple[int, str]] = {
    "m_prime": (136, "the Markov chain over the ages 0..m' (about 17 float64 vectors at its peak)")
}


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
