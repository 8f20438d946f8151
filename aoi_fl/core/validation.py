"""Argument checks shared by the whole package.

Every check names the parameter, shows the value it got and says what is allowed, so that a
bad call fails before any work is done (and before anything is written).
"""

from __future__ import annotations

import functools
import math
import numbers
import os
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np


def require_int(
    name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """Return ``value`` as an int, or raise naming ``name`` and the allowed range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def require_real(
    name: str,
    value: Any,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    strict_minimum: bool = False,
) -> float:
    """Return ``value`` as a finite float within the bounds, or raise naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if minimum is not None:
        if strict_minimum and value <= minimum:
            raise ValueError(f"{name} must be > {minimum}, got {value}")
        if not strict_minimum and value < minimum:
            raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def require_bool(name: str, value: Any) -> bool:
    """Return ``value`` if it is True or False, or raise naming ``name``: a string such as
    ``"no"`` would otherwise count as true."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
    return bool(value)


def require_folder(name: str, value: Any) -> str:
    """Return ``value`` as a path string if it names a folder or nothing yet, or raise naming
    ``name`` (a file there, or not a path at all)."""
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise TypeError(f"{name} must be a folder path, got {value!r} ({type(value).__name__})")
    path = os.fspath(value)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{name}={path!r} is a file; it must be a folder (or not exist yet)")
    return path


@functools.cache
def physical_memory() -> int:
    """This machine's physical memory in bytes: the limit of :func:`require_memory`."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _bytes_text(count: float) -> str:
    power = min(int(math.log(max(count, 1.0), 1024)), 5)
    return (
        f"{count:.0f} bytes" if power == 0 else f"{count / 1024**power:.1f} {'KMGTP'[power - 1]}iB"
    )


def require_memory(options: Mapping[str, int], need: Callable[..., float], formula: str) -> None:
    """Raise ValueError unless ``need(*options.values())`` bytes fit in this machine's memory.

    ``need`` is a lower bound of the bytes the options imply (so a refusal is never wrong) and
    grows with every option; ``formula`` states it. The message names the largest option (the
    likeliest mistake), its value and the largest value that fits with the others as given
    (found by bisection, as ``need`` is monotone).
    """
    total = physical_memory()
    required = need(*options.values())
    if required <= total:
        return
    name = max(options, key=lambda key: options[key])

    def fits(value: int) -> bool:
        return need(*{**options, name: value}.values()) <= total

    low, high = 0, options[name]  # fits(low) or low == 0; not fits(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    others = ", ".join(f"{k}={v}" for k, v in options.items() if k != name)
    allowed = f"{name} <= {low}" if low else f"no {name} fits"
    raise ValueError(
        f"{name}={options[name]} needs about {_bytes_text(required)} of memory ({formula}), "
        f"more than this machine's {_bytes_text(total)}; allowed: {allowed}"
        + (f" with {others}" if others else "")
    )


def require_probability_vector(name: str, p: Any, *, length: int | None = None) -> np.ndarray:
    """A 1-d float array of probabilities, each in [0, 1]."""
    arr = np.asarray(p, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d sequence, got shape {arr.shape}")
    if length is not None and arr.size != length:
        raise ValueError(f"{name} must have length {length}, got {arr.size}")
    bad = ~np.isfinite(arr) | (arr < 0.0) | (arr > 1.0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{name}[{i}] = {float(arr[i])!r} is outside [0, 1]; every entry must be in [0, 1]"
        )
    return arr


def require_nonnegative_vector(name: str, a: Any) -> np.ndarray:
    """A non-empty 1-d float array of finite values >= 0."""
    arr = np.asarray(a, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d sequence, got shape {arr.shape}")
    bad = ~np.isfinite(arr) | (arr < 0.0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name}[{i}] = {float(arr[i])!r}; every entry must be finite and >= 0")
    return arr


def require_sizes(name: str, sizes: Any) -> np.ndarray:
    """Dataset sizes: a non-empty 1-d array of finite, strictly positive numbers."""
    arr = np.asarray(sizes, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d sequence, got shape {arr.shape}")
    bad = ~np.isfinite(arr) | (arr <= 0.0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{name}[{i}] = {float(arr[i])!r}; every dataset size must be finite and > 0"
        )
    return arr


def require_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    """``value`` must be one of ``choices``; the error lists the valid ones."""
    options: Sequence[str] = sorted(choices)
    if value not in options:
        raise ValueError(f"unknown {name} {value!r}; valid: {', '.join(options)}")
    return str(value)


def require_n_m(n: Any, m: Any) -> tuple[int, int]:
    """The number of clients n >= 1 and the number selected per round 1 <= m <= n."""
    n = require_int("n", n, minimum=1)
    m = require_int("m", m, minimum=1)
    if m > n:
        raise ValueError(
            f"m must be <= n (cannot select more clients than exist), got m={m}, n={n}"
        )
    return n, m


def require_n_s(n: Any, s: Any) -> tuple[int, int]:
    """The number of clients n >= 1 and the number active per round 1 <= s <= n (FedSUM's S)."""
    n = require_int("n", n, minimum=1)
    return n, require_int("s", s, minimum=1, maximum=n)


def check_chain(p: object) -> np.ndarray:
    """Validate a selection-probability vector p = (p_0, ..., p_{m'}), m' >= 1.

    Besides p in [0, 1]^{m'+1}, the chain must keep selecting: if age m' is reachable
    (prod_{j<m'} (1 - p_j) > 0) then p_{m'} must be > 0, otherwise a client can reach age m' and
    never be selected again.
    """
    p = require_probability_vector("p", p)
    if p.size < 2:
        raise ValueError(
            f"p must have length m' + 1 with m' >= 1 (maximum age at least 1), got length {p.size}"
        )
    if p[-1] == 0.0 and np.prod(1.0 - p[:-1]) > 0.0:
        raise ValueError(
            f"p[m'] = p[{p.size - 1}] = 0 while age m' = {p.size - 1} is reachable: a client could "
            "stop being selected forever; p[m'] must be > 0 (or some p_j = 1 with j < m')"
        )
    return p


def renamed(old: str, new: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator for a function whose keyword ``old`` is now ``new``: ``old=`` still works,
    with a DeprecationWarning that names both, for one release; both at once are refused."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if old in kwargs:
                if new in kwargs:
                    raise TypeError(f"{func.__name__}() got {old}= and {new}=: pass {new}= only")
                warnings.warn(
                    f"{func.__name__}({old}=...) is now {func.__name__}({new}=...); {old}= will "
                    "be removed in the next release",
                    DeprecationWarning,
                    stacklevel=2,
                )
                kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        return wrapper

    return decorate
