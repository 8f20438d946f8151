"""Client availability: who can take part in round t (ours, for the selection arena).

An availability model decides which of the n clients *can* take part in round t (0-based); a
selection policy then picks among those (an availability-aware sampler's
``sample(available=mask)``, :mod:`aoi_fl.core.selection`). The four papers assume everyone is
always reachable (:class:`Always`); the other models relax that:

=================  ==========================================================================
name               client i is available in round t ...
=================  ==========================================================================
``always``         always (the papers' setting)
``bernoulli``      independently with a fixed rate r_i: one rate for all, explicit rates, or
                   rates drawn once from a Beta of mean ``mean`` and ``concentration``,
                   optionally matched to the clients' data sizes by rank (``correlation``)
``markov_onoff``   following its own two-state on/off Markov chain, started in its
                   stationary law: on-runs and off-runs last ``mean_on`` / ``mean_off`` rounds
                   on average (geometric)
``diurnal``        independently with rate clip(base + amplitude sin(2 pi t / period + phi_i),
                   0, 1), phi_i a per-client phase (time zone)
``trace``          when a recorded trace (CSV ``client,start,end``) says so
=================  ==========================================================================

The FedSUM paper's participation patterns are the special cases with everyone selected who is
available (the arena's ``all_available`` sampler): its P2 (the FedSUM package's ``Bernoulli``
pattern) is ``bernoulli`` with every rate p, and its P3 (``SineBernoulli``: p (A sin(2 pi t /
period) + offset)) is ``diurnal`` with base = p offset, amplitude = p A and every phase 0.

FLGo's simulator (repository WwZzz/easyFL, ``flgo/simulator/default_simulator.py``) draws static
per-client availability rates, among them two data-size-dependent modes: ``MDF`` (more data
first: the rate grows with the client's number of samples, a power of it normalised by the
largest) and ``LDF`` (less data first: it shrinks with it), and ``SLN`` modulates rates by a sine
of period 24 rounds. Here ``correlation="size"`` / ``"inverse_size"`` give the Bernoulli rates
drawn from the Beta to the clients by the rank of their data size (larger clients more, or
less, available), which keeps the distribution of rates while correlating them with size.

Every model is a deterministic function of (configuration, seed, t): ``mask(t)`` returns the same
mask whenever it is asked, in any order, so a resumed run needs nothing checkpointed and all
policies of one seed see the same availability (paired comparisons). Round t's draws come from
their own stream ``generator(seed, "availability", t)`` (random access is cheap); rates or phases
drawn once come from ``generator(seed, "availability_rates")``.

Each model also states its closed forms: ``rates(t)``, P(client i is available in round t), and
``long_run_rates()``, the long-run fraction of rounds each client is available (the tests compare
both with simulated frequencies).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aoi_fl.core.availability_base import (
    AVAILABILITY,
    MODELS,
    Availability,
    build_availability,
    check_availability_spec,
    register_availability,
)
from aoi_fl.core.availability_trace import TRACE_HEADER, Trace
from aoi_fl.core.seeding import generator
from aoi_fl.core.validation import (
    require_choice,
    require_int,
    require_probability_vector,
    require_real,
    require_sizes,
)

__all__ = [
    "AVAILABILITY",
    "CORRELATIONS",
    "MODELS",
    "TRACE_HEADER",
    "Always",
    "Availability",
    "Bernoulli",
    "Diurnal",
    "IndependentDraws",
    "MarkovOnOff",
    "Trace",
    "build_availability",
    "check_availability_spec",
    "register_availability",
]

#: how drawn Bernoulli rates relate to the clients' data sizes (by rank)
CORRELATIONS: tuple[str, ...] = ("none", "size", "inverse_size")


def _is_list(value: Any) -> bool:
    """Whether an option holds one value per client (a list or 1-d array) rather than one."""
    return isinstance(value, np.ndarray | Sequence) and not isinstance(value, str)


@register_availability
class Always(Availability):
    """Every client in every round: the setting of the four papers."""

    name = "always"

    def __init__(self, n: int, sizes: Any = None, seed: int = 0, **options: Any) -> None:
        super().__init__(n, seed, self.check(n, **options))

    @staticmethod
    def check(n: int | None) -> dict[str, Any]:
        return {}

    def mask(self, t: int) -> np.ndarray:
        self._round(t)
        return np.ones(self.n, dtype=bool)

    def rates(self, t: int) -> np.ndarray:
        self._round(t)
        return np.ones(self.n)

    def long_run_rates(self) -> np.ndarray:
        return np.ones(self.n)


class IndependentDraws(Availability):
    """Models whose clients are available independently given round t's rates: client i is
    available iff u_{t,i} < rates(t)_i, with u_t uniform from ``generator(seed, "availability",
    t)``."""

    def mask(self, t: int) -> np.ndarray:
        t = self._round(t)
        return generator(self.seed, "availability", t).random(self.n) < self.rates(t)


@register_availability
class Bernoulli(IndependentDraws):
    """Client i is available in each round independently with its own fixed rate r_i.

    Either ``rates`` (one per client) or ``mean``: every r_i = mean, or, with ``concentration``
    c, r_i drawn once from Beta(mean c, (1 - mean) c) (mean ``mean``, variance mean (1 - mean) /
    (c + 1)). ``correlation`` then hands the drawn rates to the clients by the rank of their
    data size: ``"size"`` the largest rate to the largest client, ``"inverse_size"`` to the
    smallest, ``"none"`` in the order drawn. Closed form: rates(t) = long_run_rates() = r.
    """

    name = "bernoulli"

    def __init__(self, n: int, sizes: Any = None, seed: int = 0, **options: Any) -> None:
        super().__init__(n, seed, self.check(n, **options))
        o = self.options
        if o["rates"] is not None:
            self._rates = np.asarray(o["rates"], dtype=float)
        elif o["concentration"] is None:
            self._rates = np.full(self.n, o["mean"])
        else:
            a, b = o["mean"] * o["concentration"], (1.0 - o["mean"]) * o["concentration"]
            drawn = generator(self.seed, "availability_rates").beta(a, b, size=self.n)
            self._rates = _by_size_rank(drawn, sizes, o["correlation"], self.n)

    @staticmethod
    def check(
        n: int | None,
        *,
        mean: float | None = None,
        concentration: float | None = None,
        rates: list | None = None,
        correlation: str = "none",
    ) -> dict[str, Any]:
        correlation = require_choice("correlation", correlation, CORRELATIONS)
        if (mean is None) == (rates is None):
            raise ValueError(
                f"bernoulli availability needs exactly one of mean or rates, got mean={mean!r}, "
                f"rates={'None' if rates is None else 'a list'}"
            )
        if rates is not None:
            if concentration is not None or correlation != "none":
                raise ValueError(
                    "explicit rates are given in client order: concentration must be None and "
                    f"correlation 'none', got concentration={concentration!r}, "
                    f"correlation={correlation!r}"
                )
            if not _is_list(rates):
                raise TypeError(f"rates must be a list of probabilities, got {rates!r}")
            rates = require_probability_vector("rates", rates, length=n).tolist()
            return {"mean": None, "concentration": None, "rates": rates, "correlation": "none"}
        mean = require_real("mean", mean, minimum=0.0, strict_minimum=True, maximum=1.0)
        if concentration is not None:
            concentration = require_real(
                "concentration", concentration, minimum=0.0, strict_minimum=True
            )
            if mean == 1.0:
                raise ValueError(
                    "mean must be < 1 with a concentration (the Beta(mean c, (1 - mean) c) "
                    f"needs both parameters > 0), got mean={mean}"
                )
        return {
            "mean": mean,
            "concentration": concentration,
            "rates": None,
            "correlation": correlation,
        }

    def rates(self, t: int) -> np.ndarray:
        self._round(t)
        return self._rates.copy()

    def long_run_rates(self) -> np.ndarray:
        return self._rates.copy()


def _by_size_rank(drawn: np.ndarray, sizes: Any, correlation: str, n: int) -> np.ndarray:
    """``drawn`` rates handed to the clients by the rank of their data size (ties: lower id
    first), or as drawn for ``correlation="none"``."""
    if correlation == "none":
        return drawn
    if sizes is None:
        raise ValueError(f"correlation={correlation!r} needs the clients' data sizes, got None")
    sizes = require_sizes("sizes", sizes)
    if sizes.size != n:
        raise ValueError(f"sizes must have one entry per client (n={n}), got {sizes.size}")
    ascending = np.sort(drawn)
    rates = np.empty(n)
    rates[np.argsort(sizes, kind="stable")] = (
        ascending if correlation == "size" else ascending[::-1]
    )
    return rates


@register_availability
class MarkovOnOff(Availability):
    """Each client follows its own two-state on/off Markov chain.

    P(on -> off) = 1 / mean_on and P(off -> on) = 1 / mean_off, so on-runs and off-runs are
    geometric with means ``mean_on`` and ``mean_off`` rounds (each >= 1; one number for every
    client or one per client). Round 0 is drawn from the stationary law, so every round's
    marginal is the stationary rate pi_i = mean_on_i / (mean_on_i + mean_off_i) (closed form of
    rates(t) and long_run_rates()); the lag-1 autocorrelation of a client's availability is
    1 - 1/mean_on_i - 1/mean_off_i.

    Round t uses its own uniforms u_t (``generator(seed, "availability", t)``): a client is on in
    round t iff u_{t,i} < P(on in t | state in t - 1). The chain is kept as a trace extended
    forward as far as asked (one byte per client and round), so ``mask(t)`` is the same in any
    order of calls.
    """

    name = "markov_onoff"
    bytes_per_client_round = 1  # the chain's states, one bool per client and round

    def __init__(self, n: int, sizes: Any = None, seed: int = 0, **options: Any) -> None:
        super().__init__(n, seed, self.check(n, **options))
        mean_on = np.broadcast_to(np.asarray(self.options["mean_on"], dtype=float), (self.n,))
        mean_off = np.broadcast_to(np.asarray(self.options["mean_off"], dtype=float), (self.n,))
        self._stationary = mean_on / (mean_on + mean_off)
        self._stay_on = 1.0 - 1.0 / mean_on
        self._turn_on = 1.0 / mean_off
        self._states = np.empty((0, self.n), dtype=bool)
        self._filled = 0

    @staticmethod
    def check(n: int | None, *, mean_on: float | list, mean_off: float | list) -> dict[str, Any]:
        return {
            "mean_on": _durations("mean_on", mean_on, n),
            "mean_off": _durations("mean_off", mean_off, n),
        }

    def _extend(self, rounds: int) -> None:
        if rounds <= self._filled:
            return
        if rounds > self._states.shape[0]:
            grown = np.empty((max(rounds, 2 * self._states.shape[0]), self.n), dtype=bool)
            grown[: self._filled] = self._states[: self._filled]
            self._states = grown
        for t in range(self._filled, rounds):
            u = generator(self.seed, "availability", t).random(self.n)
            if t == 0:
                self._states[0] = u < self._stationary
            else:
                self._states[t] = u < np.where(self._states[t - 1], self._stay_on, self._turn_on)
        self._filled = rounds

    def mask(self, t: int) -> np.ndarray:
        t = self._round(t)
        self._extend(t + 1)
        return self._states[t].copy()

    def trace(self, rounds: int) -> np.ndarray:
        rounds = require_int("rounds", rounds, minimum=0)
        self._extend(rounds)
        return self._states[:rounds].copy()

    def rates(self, t: int) -> np.ndarray:
        self._round(t)
        return self._stationary.copy()

    def long_run_rates(self) -> np.ndarray:
        return self._stationary.copy()


def _durations(name: str, value: Any, n: int | None) -> float | list[float]:
    """A mean duration in rounds (>= 1): one number, or one per client (length n if given)."""
    if not _is_list(value):
        return require_real(name, value, minimum=1.0)
    if n is not None and len(value) != n:
        raise ValueError(f"{name} must have one entry per client (n={n}), got {len(value)}")
    if len(value) == 0:
        raise ValueError(f"{name} must be a number >= 1 or a non-empty list of them, got []")
    return [require_real(f"{name}[{i}]", v, minimum=1.0) for i, v in enumerate(value)]


@register_availability
class Diurnal(IndependentDraws):
    """A daily cycle: client i is available in round t independently with rate

        r_i(t) = clip(base + amplitude sin(2 pi t / period + phi_i), 0, 1),

    phi_i its phase (time zone): one for all clients or one per client (``phases``), or, by
    default, drawn once uniformly on [0, 2 pi). ``period`` is a whole number of rounds, so the
    rates repeat every period and the long-run rate is their mean over one period (closed form;
    ``base`` itself when the sine is never clipped and period >= 2).
    """

    name = "diurnal"

    def __init__(self, n: int, sizes: Any = None, seed: int = 0, **options: Any) -> None:
        super().__init__(n, seed, self.check(n, **options))
        phases = self.options["phases"]
        if phases is None:
            phases = generator(self.seed, "availability_rates").uniform(0.0, 2.0 * np.pi, self.n)
        self._phases = np.broadcast_to(np.asarray(phases, dtype=float), (self.n,))

    @staticmethod
    def check(
        n: int | None,
        *,
        base: float,
        amplitude: float,
        period: int,
        phases: float | list | None = None,
    ) -> dict[str, Any]:
        options: dict[str, Any] = {
            "base": require_real("base", base, minimum=0.0, maximum=1.0),
            "amplitude": require_real("amplitude", amplitude, minimum=0.0),
            "period": require_int("period", period, minimum=1),
            "phases": None,
        }
        if phases is None:
            return options
        if not _is_list(phases):
            options["phases"] = require_real("phases", phases)
            return options
        if n is not None and len(phases) != n:
            raise ValueError(f"phases must have one entry per client (n={n}), got {len(phases)}")
        if len(phases) == 0:
            raise ValueError("phases must be a number, a non-empty list or None, got []")
        options["phases"] = [require_real(f"phases[{i}]", p) for i, p in enumerate(phases)]
        return options

    def rates(self, t: int) -> np.ndarray:
        t = self._round(t)
        o = self.options
        # the angle computed as FedSUM's SineBernoulli computes it (its P3 is a special case)
        angle = 2.0 * np.pi * t / o["period"] + self._phases
        return np.clip(o["base"] + o["amplitude"] * np.sin(angle), 0.0, 1.0)

    def long_run_rates(self) -> np.ndarray:
        period = self.options["period"]
        return sum(self.rates(t) for t in range(period)) / period
