"""How a configuration's sections are checked against what they configure: a registered name,
options against the factory's signature (names, the types the annotations name, seeds), dry
runs whose errors name the option by its path, and the warning for suspicious values."""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from aoi_fl.core.validation import require_choice, require_int

Table = Mapping[str, Callable[..., Any]]


class ConfigWarning(UserWarning):
    """A configuration value that is legal but almost surely a mistake (the run goes on)."""


def _warn(message: str) -> None:
    warnings.warn(message, ConfigWarning, stacklevel=3)


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
