"""Learning-rate schedules: callables round -> eta_t whose ``config()`` keys the runs that use
them."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from aoi_fl.core.validation import require_real


class _Schedule:
    """eta_t = ``self(t)``; :meth:`config` (its name and fields) keys the runs that use it."""

    name: ClassVar[str]

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # every parameter of a schedule is a positive real
            require_real(f.name, getattr(self, f.name), minimum=0.0, strict_minimum=True)

    def config(self) -> dict:
        return {"name": self.name, **dataclasses.asdict(self)}

    def first_outside(self, low: float, high: float, rounds: int) -> tuple[int, float] | None:
        """The first (round t, eta_t) of rounds 0..rounds-1 with eta_t outside [low, high], or
        None. Every schedule here is non-increasing in t, so this bisects: O(log rounds) rates
        whatever the number of rounds."""
        if rounds == 0:
            return None
        first = float(self(0))
        if not low <= first <= high:
            return 0, first
        if float(self(rounds - 1)) >= low:
            return None
        inside, below = 0, rounds - 1
        while below - inside > 1:
            middle = (inside + below) // 2
            inside, below = (middle, below) if float(self(middle)) >= low else (inside, middle)
        return below, float(self(below))


@dataclass(frozen=True)
class ExponentialDecay(_Schedule):
    """eta_t = lr0 * decay^t (the AoI paper: lr0 = 0.1, decay = 0.998)."""

    name = "exponential"

    lr0: float = 0.1
    decay: float = 0.998

    def __post_init__(self) -> None:
        super().__post_init__()
        require_real("decay", self.decay, maximum=1.0)

    def __call__(self, t: int) -> float:
        return self.lr0 * self.decay**t


@dataclass(frozen=True)
class InverseSqrtDecay(_Schedule):
    """eta_t = lr0 / sqrt(t / period + 1) (the FedSUM experiments: period 10)."""

    name = "inverse_sqrt"

    lr0: float = 0.01
    period: float = 10.0

    def __call__(self, t: int) -> float:
        return self.lr0 / math.sqrt(t / self.period + 1.0)


@dataclass(frozen=True)
class ConstantLR(_Schedule):
    """eta_t = lr."""

    name = "constant"

    lr: float = 0.1

    def __call__(self, t: int) -> float:
        return self.lr


#: schedule name -> class (every one a non-increasing :class:`_Schedule`)
LR_SCHEDULES: dict[str, Callable[..., _Schedule]] = {
    "exponential": ExponentialDecay,
    "inverse_sqrt": InverseSqrtDecay,
    "constant": ConstantLR,
}
