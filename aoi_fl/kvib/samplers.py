"""K-Vib (Alg. 2 of the K-Vib paper) and the unbiased samplers it is compared with.

Every sampler here draws with one of the procedures of :mod:`aoi_fl.kvib.estimators` and returns the
unbiased estimator's weights w_i = m_i lambda_i / p_i (Alg. 1 line 12; m_i the number of draws),
with lambda_i = n_i / sum_j n_j the data-size weights. Together with FedAvg's
``"weighted_delta"`` aggregation and server_lr = 1 this is Alg. 1. After a round the trainer
feeds back the selected clients' update norms ||g_i||; the samplers use pi_i = lambda_i ||g_i||.

=================  ===================  ======================================================
name               procedure            probabilities
=================  ===================  ======================================================
``uniform_         without replacement  K / n (unbiased: w_i = lambda_i n / K)
unbiased``
``uniform_         without replacement  K / n, but *biased* self-normalised weights
normalised``                            w_i = lambda_i / sum_{j in S} lambda_j (FedAvg's usual
                                        rule; the authors' code trains its uniform baseline so)
``uniform_isp``    ISP                  K / n
``optimal``        ISP                  eq. 4 from all n clients' current norms (full
                                        information: needs the trainer's ``full_information``)
``kvib``           ISP                  Alg. 2: capped water-filling of sqrt(omega + gamma),
                                        mixed with the uniform (eq. 12)
``vrb``            with replacement     Borsos et al. 2018: q ~ sqrt(omega + gamma), mixed
``mabs``           with replacement     Salehi et al. 2017: exponential weights, mixed
=================  ===================  ======================================================

K-Vib, VRB and MABS need a bound G on the feedback. By default G is the mean feedback of the
first round (the K-Vib paper's Sec. 6: "use the mean value of first-round client feedback as a
naive estimate of G"), which is known before it is first needed (all three sample uniformly in
round 1); ``G`` sets it instead (App. F: 0.01 for the synthetic task, 0.1 for FEMNIST).

Under client availability (:mod:`aoi_fl.core.selection`) every sampler but ``optimal`` is
availability aware. Given the round's available set A (nobody: an empty selection), the
policy's p restricted to A is fitted back to the budget among them (our extension; the K-Vib
paper assumes every client can be drawn):

- ISP: p' = the capped water-filling (eq. 4) of (p_i)_{i in A} to budget min(K, |A|), so that
  p' keeps p's proportions where no cap binds;
- with replacement: q restricted to A and renormalised, still K draws (p' = K q');
- uniform without replacement: min(K, |A|) of A uniformly (p' = min(K, |A|) / |A|).

p'_i = 0 outside A. The weights become w_i = m_i lambda'_i / p'_i with lambda' = lambda
restricted to A and renormalised (lambda'_i = lambda_i / sum_{j in A} lambda_j), so the estimate
is unbiased for sum_{i in A} lambda'_i g_i: the data-weighted mean update of the clients that
can take part, the quantity FedAvg over A would average. The feedback of the drawn clients is
still pi_i = lambda_i ||g_i|| (the policy's scores do not depend on who was available), and
K-Vib's, VRB's and MABS's importance weights divide by the p' they were drawn with. With
``available=None`` the draws are exactly those of the samplers without availability.

Avare (El Hanchi & Stephens 2020), the paper's fourth baseline, is not implemented: its update
rule is not stated in the K-Vib paper and could not be retrieved from a public source here.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import numpy as np

from aoi_fl.core.registry import PALETTE, Style, declare_options, declared
from aoi_fl.core.selection import SeededSampler, Selection, check_available, sizes_key
from aoi_fl.core.validation import require_int, require_real, require_sizes
from aoi_fl.kvib.estimators import draw, optimal_isp_probabilities


def _mixing(name: str, value: float) -> float:
    return require_real(name, value, minimum=0.0, strict_minimum=True, maximum=1.0)


class UnbiasedSampler(SeededSampler):
    """Shared machinery: lambda, the draw, the estimator weights, the feedback bound G.

    Subclasses set ``procedure`` and implement :meth:`probabilities` (the p of the coming round)
    and, if adaptive, :meth:`_observe` (the feedback pi_i = lambda_i ||g_i|| of the drawn
    clients, with their draw counts and the p they were drawn with).
    """

    procedure = "isp"
    availability_aware = True

    def __init__(self, sizes: Any, k: int, seed: int = 0, G: float | None = None) -> None:
        self.sizes = require_sizes("sizes", sizes)
        n = self.sizes.size
        self.k = require_int("k", k, minimum=1, maximum=n)
        super().__init__(n, seed)
        self.lam = self.sizes / self.sizes.sum()
        self.G = None if G is None else require_real("G", G, minimum=0.0, strict_minimum=True)
        self._estimate_G = G is None
        self._last_p = np.full(n, self.k / n)
        self._last_counts = np.zeros(n, dtype=np.int64)

    def probabilities(self) -> np.ndarray:
        """The p of the coming round (see :mod:`aoi_fl.kvib.estimators`)."""
        raise NotImplementedError

    def sample(self, available: np.ndarray | None = None) -> Selection:
        available = check_available(available, self.n)
        if available is not None and not self.availability_aware:
            raise ValueError(
                f"sampler {self.name!r} is not availability aware: sample() takes no mask"
            )
        p, lam = self.probabilities(), self.lam
        if available is None:
            counts = draw(self.procedure, p, self._rng)
        else:
            p, lam, counts = self._draw_available(p, np.flatnonzero(available))
        ids = np.flatnonzero(counts)
        self._last_p, self._last_counts = p, counts
        self.round += 1
        return Selection(
            ids, self._weights(ids, counts, p, lam), probabilities=p, procedure=self.procedure
        )

    def _draw_available(
        self, p: np.ndarray, pool: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """p', lambda' and the draw counts when only the clients ``pool`` can take part (module
        docstring), each over all n clients (0 outside the pool)."""
        p_pool, lam_pool, counts = np.zeros(self.n), np.zeros(self.n), np.zeros(self.n, np.int64)
        if pool.size:
            p_pool[pool] = self._fit_budget(p[pool])
            lam_pool[pool] = self.lam[pool] / self.lam[pool].sum()
            counts[pool] = draw(self.procedure, p_pool[pool], self._rng)
        return p_pool, lam_pool, counts

    def _fit_budget(self, p: np.ndarray) -> np.ndarray:
        """The policy's p over the available clients, fitted to the budget among them."""
        k = min(self.k, p.size)
        if self.procedure == "isp":
            return optimal_isp_probabilities(p, k)
        if self.procedure == "with_replacement":
            return self.k * p / p.sum()
        return np.full(p.size, k / p.size)

    def _weights(
        self, ids: np.ndarray, counts: np.ndarray, p: np.ndarray, lam: np.ndarray
    ) -> np.ndarray:
        """The estimator's weights w_i = (draws of i) lambda_i / p_i (unbiased)."""
        return counts[ids] * lam[ids] / p[ids]

    def feedback(self, ids: np.ndarray, values: np.ndarray) -> None:
        """The drawn clients' feedback (their update norms): pi_i = lambda_i ||g_i|| (Secs 5.1
        and 6), handed to :meth:`_observe`; G, the feedback scale, is set from the first."""
        ids = np.asarray(ids, dtype=np.int64)
        values = np.asarray(values, dtype=float)
        if ids.shape != values.shape or not np.array_equal(ids, np.flatnonzero(self._last_counts)):
            raise ValueError("feedback must come for exactly the clients of the last sample()")
        if ids.size == 0:
            return
        pi = self.lam[ids] * values
        if self.G is None:
            self.G = float(pi.mean())
        self._observe(ids, pi, self._last_counts[ids], self._last_p[ids])

    def _observe(self, ids: np.ndarray, pi: np.ndarray, counts: np.ndarray, p: np.ndarray) -> None:
        """Update the sampler from the feedback of the drawn clients (non-adaptive: nothing)."""

    def config(self) -> dict:
        return {
            **super().config(),
            "k": self.k,
            "sizes": sizes_key(self.sizes),
            "G": None if self._estimate_G else self.G,
        }

    def state_dict(self) -> dict:
        return {
            **super().state_dict(),
            "G": self.G,
            "last_p": self._last_p.tolist(),
            "last_counts": self._last_counts.tolist(),
            **{k: v.tolist() for k, v in self._arrays().items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        rng, t = self._check_state(state)
        arrays = {"last_p": self._last_p, "last_counts": self._last_counts, **self._arrays()}
        loaded = {}
        for key, current in arrays.items():
            value = np.asarray(state.get(key), dtype=current.dtype)
            if value.shape != current.shape or not np.all(np.isfinite(value)):
                raise ValueError(f"state[{key!r}] must hold {current.size} finite values")
            loaded[key] = value
        G = state.get("G")
        self._rng, self.round = rng, t
        self.G = None if G is None else require_real("state['G']", G, minimum=0.0)
        self._last_p, self._last_counts = loaded.pop("last_p"), loaded.pop("last_counts")
        for key, value in loaded.items():
            setattr(self, f"_{key}", value)

    def _arrays(self) -> dict[str, np.ndarray]:
        """The adaptive state's arrays by name (each stored in the attribute ``_<name>``)."""
        return {}


class UniformSampler(UnbiasedSampler):
    """K of n clients uniformly without replacement, unbiased weights lambda_i n / K."""

    name = "uniform_unbiased"
    procedure = "without_replacement"

    def probabilities(self) -> np.ndarray:
        return np.full(self.n, self.k / self.n)


class UniformNormalised(UniformSampler):
    """Uniform without replacement with FedAvg's self-normalised weights (biased).

    w_i = lambda_i / sum_{j in S} lambda_j. Not an unbiased sampler: it is here because the K-Vib
    authors' public code trains its uniform baseline this way, and
    because the unbiased weights lambda_i n / K make FedAvg diverge when one client holds a
    large share of the data. Its selections still carry p = K / n, so the trainer's records
    give the cost of those probabilities and the variance the *unbiased* estimator would have.
    """

    name = "uniform_normalised"

    def _weights(
        self, ids: np.ndarray, counts: np.ndarray, p: np.ndarray, lam: np.ndarray
    ) -> np.ndarray:
        share = lam[ids]
        return share / share.sum()


class UniformISP(UniformSampler):
    """Every client independently with probability K / n (ISP); E|S| = K."""

    name = "uniform_isp"
    procedure = "isp"


class OptimalSampler(UnbiasedSampler):
    """ISP with eq. 4's optimum from every client's current norm (Chen et al. 2020).

    Full information: before each round it must get all n clients' update norms at the current
    model through :meth:`inform` (the trainer's ``full_information`` mode), and it samples
    p* = argmin_p sum_i pi_i^2 / p_i, so its cost is the comparator of the dynamic regret.
    Not availability aware: its comparator is defined over all n clients.
    """

    name = "optimal"
    availability_aware = False

    def __init__(self, sizes: Any, k: int, seed: int = 0) -> None:
        super().__init__(sizes, k, seed)
        self._informed: np.ndarray | None = None

    def inform(self, values: np.ndarray) -> None:
        values = np.asarray(values, dtype=float)
        if values.shape != (self.n,):
            raise ValueError(f"inform needs one norm per client ({self.n}), got {values.shape}")
        self._informed = self.lam * values

    def probabilities(self) -> np.ndarray:
        if self._informed is None:
            raise ValueError(
                "the optimal sampler needs every client's update norm before each round: "
                "train with TrainSettings(full_information=True)"
            )
        pi, self._informed = self._informed, None
        return optimal_isp_probabilities(pi, self.k)


def kvib_theta(n: int, k: int, rounds: int) -> float:
    """theta = (N / (T K))^(1/3) (Theorem 5.2), at most 1."""
    return min(1.0, (n / (rounds * k)) ** (1 / 3))


class _MixedFTRL(UnbiasedSampler):
    """K-Vib and VRB: scores sqrt(omega_i + gamma) from the importance-weighted cumulative
    squared feedback omega, mixed with the uniform distribution by theta."""

    def __init__(
        self,
        sizes: Any,
        k: int,
        rounds: int,
        seed: int = 0,
        theta: float | None = None,
        G: float | None = None,
    ) -> None:
        super().__init__(sizes, k, seed, G)
        self.rounds = require_int("rounds", rounds, minimum=1)
        self.theta = self._default_theta() if theta is None else _mixing("theta", theta)
        self._omega = np.zeros(self.n)

    def _default_theta(self) -> float:
        raise NotImplementedError

    def _scores(self, gamma: float | None) -> np.ndarray:
        return np.sqrt(self._omega + (gamma or 0.0))

    def _arrays(self) -> dict[str, np.ndarray]:
        return {"omega": self._omega}

    def config(self) -> dict:
        return {**super().config(), "rounds": self.rounds, "theta": self.theta}


class KVib(_MixedFTRL):
    """The K-Vib sampler (Alg. 2) with ISP.

    Round t: scores s_i = sqrt(omega_i + gamma) (FTRL, eqs 10-11), p = capped water-filling of s
    to budget K (eq. 4 applied to s, no floor: App. D.2), p~ = (1 - theta) p + theta K / N (eq.
    12), ISP draw with p~. Feedback: omega_i += pi_i^2 / p~_i for each drawn client (the
    importance-weighted cumulative squared feedback of Sec. 5.3 and App. D.3).

    theta defaults to (N / (T K))^(1/3) and gamma to G^2 N / (K theta) (Theorem 5.2), times
    ``gamma_scale`` (the sensitivity study of Fig. 3c). In round 1 omega = 0, so p = K / N
    whatever gamma is.
    """

    name = "kvib"

    def __init__(
        self,
        sizes: Any,
        k: int,
        rounds: int,
        seed: int = 0,
        theta: float | None = None,
        G: float | None = None,
        gamma_scale: float = 1.0,
    ) -> None:
        super().__init__(sizes, k, rounds, seed, theta, G)
        self.gamma_scale = require_real("gamma_scale", gamma_scale, minimum=0.0)

    def _default_theta(self) -> float:
        return kvib_theta(self.n, self.k, self.rounds)

    @property
    def gamma(self) -> float | None:
        """gamma = gamma_scale * G^2 N / (K theta); None until G is known."""
        if self.G is None:
            return None
        return self.gamma_scale * self.G**2 * self.n / (self.k * self.theta)

    def probabilities(self) -> np.ndarray:
        """The FTRL solution on the ISP polytope (eqs 10-11, :func:`optimal_isp_probabilities`),
        mixed with uniform K/N by theta (eq. 12)."""
        p = optimal_isp_probabilities(self._scores(self.gamma), self.k)
        return (1 - self.theta) * p + self.theta * self.k / self.n

    def _observe(self, ids: np.ndarray, pi: np.ndarray, counts: np.ndarray, p: np.ndarray) -> None:
        """omega_i <- omega_i + pi_i^2 / p_i for the drawn clients (Alg. 2's last line)."""
        self._omega[ids] += pi**2 / p

    def config(self) -> dict:
        return {**super().config(), "gamma_scale": self.gamma_scale}


class VRB(_MixedFTRL):
    """Variance Reducer Bandit (Borsos et al. 2018) with K draws with replacement.

    q_i = sqrt(omega_i + gamma) / sum_j sqrt(omega_j + gamma) (FTRL on the simplex, no cap),
    q~ = (1 - theta) q + theta / N, K i.i.d. draws from q~; after the round omega_i +=
    pi_i^2 / q~_i once per draw. theta = (N / T)^(1/3), or 0.3 when N > T, and gamma =
    G^2 N / theta (the K-Vib paper's App. F). This is K-Vib's rule with K = 1 per draw and
    no cap (the update rule as in the authors' public code, online-variance-reduction).
    """

    name = "vrb"
    procedure = "with_replacement"

    def _default_theta(self) -> float:
        return 0.3 if self.n > self.rounds else kvib_theta(self.n, 1, self.rounds)

    def probabilities(self) -> np.ndarray:
        scores = self._scores(None if self.G is None else self.G**2 * self.n / self.theta)
        q = scores / scores.sum() if scores.sum() > 0 else np.full(self.n, 1 / self.n)
        return self.k * ((1 - self.theta) * q + self.theta / self.n)

    def _observe(self, ids: np.ndarray, pi: np.ndarray, counts: np.ndarray, p: np.ndarray) -> None:
        self._omega[ids] += counts * pi**2 / (p / self.k)


class MABS(UnbiasedSampler):
    """Multi-armed bandit sampler (Salehi et al. 2017) with K draws with replacement.

    Exponential weights: w_i = 1, q = (1 - eta) w / sum w + eta / N; after a round, for each
    draw of client i, w_i *= exp(delta (pi_i / N)^2 / q_i^3) with
    delta = sqrt(eta^4 ln N / (N^5 T L^2)) and L = G; eta = 0.4 (the K-Vib paper's App. F; the
    update as in FedLab's ``MultiArmedBanditSampler``, applied once per draw). The weights are
    kept as logarithms.
    """

    name = "mabs"
    procedure = "with_replacement"

    def __init__(
        self,
        sizes: Any,
        k: int,
        rounds: int,
        seed: int = 0,
        eta: float = 0.4,
        G: float | None = None,
    ) -> None:
        super().__init__(sizes, k, seed, G)
        self.rounds = require_int("rounds", rounds, minimum=1)
        self.eta = require_real("eta", eta, minimum=0.0, maximum=1.0)
        self._log_w = np.zeros(self.n)

    @property
    def delta(self) -> float | None:
        """The step delta = sqrt(eta^4 ln N / (N^5 T G^2)); None until G is known."""
        if self.G is None:
            return None
        return math.sqrt(self.eta**4 * math.log(self.n) / (self.n**5 * self.rounds * self.G**2))

    def probabilities(self) -> np.ndarray:
        w = np.exp(self._log_w - self._log_w.max())
        return self.k * ((1 - self.eta) * w / w.sum() + self.eta / self.n)

    def _observe(self, ids: np.ndarray, pi: np.ndarray, counts: np.ndarray, p: np.ndarray) -> None:
        q = p / self.k
        self._log_w[ids] += counts * self.delta * (pi / self.n) ** 2 / q**3

    def _arrays(self) -> dict[str, np.ndarray]:
        return {"log_w": self._log_w}

    def config(self) -> dict:
        return {**super().config(), "rounds": self.rounds, "eta": self.eta}


#: sampler name -> class; constructors take (sizes, k, [rounds], seed, options)
UNBIASED_SAMPLERS: dict[str, type[UnbiasedSampler]] = {
    cls.name: cls
    for cls in (UniformSampler, UniformNormalised, UniformISP, OptimalSampler, KVib, VRB, MABS)
}


def _configured(cls: type[UnbiasedSampler], n: int, sizes: Any, **options: Any) -> UnbiasedSampler:
    return cls(sizes, **options)


_STYLES = {
    "uniform_unbiased": Style("uniform (unbiased)", PALETTE[7], "X"),
    "uniform_normalised": Style("uniform (self-normalised, biased)", PALETTE[9], "v"),
    "uniform_isp": Style("uniform ISP", PALETTE[5], "P"),
    "mabs": Style("MABS", PALETTE[4], "<"),
    "vrb": Style("VRB", PALETTE[6], ">"),
    "kvib": Style("K-Vib", "#b30000", "p"),
    "optimal": Style("optimal (full information)", "#222222", "*"),
}


def _plugin(cls: type[UnbiasedSampler]) -> Any:
    factory = declare_options(functools.partial(_configured, cls), cls)
    # K-Vib's theta and MABS's eta are tuned to the run's length: a configuration training
    # for another number of rounds is warned about
    horizon = "rounds" if "rounds" in inspect.signature(factory).parameters else None
    return declared(
        factory, _STYLES[cls.name], availability=cls.availability_aware, horizon=horizon
    )


#: the factories ``aoi_fl/entry_points.txt`` names (``aoi_fl.samplers``)
PLUGINS = SimpleNamespace(**{name: _plugin(cls) for name, cls in UNBIASED_SAMPLERS.items()})
