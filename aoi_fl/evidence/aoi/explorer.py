"""A live explorer of the AoI paper's selection theory: one update for one set of parameters.

:func:`explore` puts together, for n clients, m selected per round and maximum age m', what the
library computes: Theorem 1's p (:func:`markov.optimal_p`), the age chain of the chosen policy and
its stationary law (eqs 5-8), E[X] and Var[X] of the inter-selection interval X with its pmf
(Sec. III-C), Sigma of all four policies (eq. 14: Theorems 3-5, Remark 4), and a short simulation
of the chosen policy (its interval histogram, moments and empirical Sigma, and the FedSUM paper's
tau_max / tau_avg of the trace). Every number comes from a library function; nothing here
re-derives a formula. :func:`plot` draws an :class:`Exploration` with matplotlib and
:func:`summary` prints it; :func:`widget` wires both to ipywidgets controls for JupyterLab.

Inputs are validated by the library (:func:`samplers.make_sampler` and the helpers of
:mod:`aoi_fl.core.validation`), so a bad value raises the library's ``ValueError`` (or
``TypeError`` for a non-integer count) naming the parameter, the value and what is allowed; the
widget shows that message in its output area.

The simulation is the library's sampler from its stationary start, with the forced selection of
one client when nobody selects itself (:class:`samplers.MarkovSampler`). Where that happens often
(n m/n = m small, e.g. m = 1: P(|S| = 0) ~ e^-m), the simulated intervals of the Markov policies
differ from the chain's law; so do the heavy tails of Policy 2 in a short trace (intervals longer
than the trace are never observed).
"""

from __future__ import annotations

import base64
import functools
import io
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from aoi_fl.aoi import markov, memoryless, samplers, sigma
from aoi_fl.core.delays import DelayTracker
from aoi_fl.core.stats import SelectionStats
from aoi_fl.core.validation import require_choice, require_int, require_n_m, require_sizes
from aoi_fl.data.partition import zipf_sizes

POLICIES = samplers.POLICIES
SIZE_LAWS: tuple[str, ...] = ("equal", "zipf")
#: the widget's choice for Policy 4 "p typed in" beside the named families of markov.FAMILIES
TYPED = "typed p"


@dataclass(frozen=True, eq=False)  # eq=False: numpy fields make == ambiguous
class Exploration:
    """Everything one update shows (see the module docstring).

    ``p`` and ``stationary`` are the chain of the simulated policy and its stationary law (None
    for the memoryless Policies 1-2). ``pmf_theory[k]`` and ``pmf_sim[k]`` are P(X = k + 1) and
    the fraction of simulated intervals of k + 1 rounds. ``sigma`` maps each policy to its
    theoretical Sigma; ``sigma_sim`` is the chosen policy's empirical Sigma over the trace.
    Simulated moments are NaN when no client was selected twice. ``seconds``: time of the update.
    """

    n: int
    m: int
    m_prime: int
    policy: str
    family: str
    seed: int
    sim_rounds: int
    sizes: np.ndarray
    p_optimal: np.ndarray
    p: np.ndarray | None
    stationary: np.ndarray | None
    mean_theory: float
    var_theory: float
    mean_sim: float
    var_sim: float
    intervals: int
    pmf_theory: np.ndarray
    pmf_sim: np.ndarray
    sigma: dict[str, float]
    sigma_sim: float
    tau_max: int
    tau_avg: float
    seconds: float


def client_sizes(n: int, sizes: Any = "equal", zipf_a: float = 2.0, seed: int = 0) -> np.ndarray:
    """The dataset sizes: ``"equal"``, ``"zipf"`` (:func:`zipf_sizes` with ``zipf_a``, ``seed``:
    the paper's Figs 2-3 use a = 2), or a vector of n sizes given as is."""
    n = require_int("n", n, minimum=1)
    if isinstance(sizes, str):
        law = require_choice("sizes", sizes, SIZE_LAWS)
        return np.ones(n) if law == "equal" else zipf_sizes(n, zipf_a, seed).astype(float)
    return require_sizes("sizes", sizes)


@functools.lru_cache(maxsize=32)
def _sigma_random(sizes_bytes: bytes, m: int) -> float:
    # Theorem 3 costs O(n m) per quadrature node: with the display rule (half the nodes, Sigma
    # within 5e-8 of the exact one) 0.15 s at n = 1000, m = 150, and cached per sizes and m, so
    # that moving the other controls (m', the policy, p, the rounds) does not redo it.
    return sigma.sigma_random(np.frombuffer(sizes_bytes), m, sigma.DISPLAY)


def _sigma_policy1(sizes: np.ndarray, m: int) -> float:
    if np.all(sizes == sizes[0]):
        return sigma.sigma_random_equal(sizes.size, m)  # Remark 4: Theorem 3's closed form
    return _sigma_random(sizes.tobytes(), m)


def explore(
    n: int,
    m: int,
    m_prime: int,
    *,
    policy: str = "markov_optimal",
    p: Any = None,
    family: str = "linear",
    sizes: Any = "equal",
    zipf_a: float = 2.0,
    seed: int = 0,
    sim_rounds: int = 1000,
) -> Exploration:
    """One update of the explorer; see the module docstring and :class:`Exploration`.

    ``policy`` is simulated (one of :data:`samplers.POLICIES`). Policy 4 takes ``p`` (length
    m' + 1, non-decreasing, pi_0 = m/n: constraint (3)) or else the named ``family`` of
    :data:`markov.FAMILIES` calibrated to pi_0 = m/n; either way its Sigma is shown, so ``p`` is
    checked whatever the policy. ``sizes`` weight Policies 1-2 (:func:`client_sizes`); ``seed``
    draws the Zipf sizes and drives the simulation of ``sim_rounds`` rounds.
    """
    start = time.perf_counter()
    policy = require_choice("policy", policy, POLICIES)
    n, m = require_n_m(n, m)
    m_prime = require_int("m_prime", m_prime, minimum=1)
    seed = require_int("seed", seed, minimum=0)
    sim_rounds = require_int("sim_rounds", sim_rounds, minimum=1)
    d = client_sizes(n, sizes, zipf_a, seed)
    built = _samplers(n, m, m_prime, d, seed, p, family)
    stats, tracker = _simulate(built[policy], n, sim_rounds)
    hist = stats.interval_histogram()
    chain, stationary, mean, var, pmf_of = _interval_theory(policy, built[policy], n, m, d)
    # x from 1 to past the longest simulated interval and 4 E[X] (most of the theoretical mass)
    x_max = max(hist.size - 1, math.ceil(4.0 * mean), m_prime + 1)
    pmf_sim = np.zeros(x_max)
    if stats.interval_count:
        pmf_sim[: hist.size - 1] = hist[1:] / stats.interval_count
    sigmas = _sigmas(built, n, m, d)
    observed = stats.interval_count > 0
    return Exploration(
        n=n,
        m=m,
        m_prime=m_prime,
        policy=policy,
        family=family if p is None else "custom",
        seed=seed,
        sim_rounds=sim_rounds,
        sizes=d,
        p_optimal=built["markov_optimal"].p,
        p=chain,
        stationary=stationary,
        mean_theory=mean,
        var_theory=var,
        mean_sim=stats.interval_mean() if observed else math.nan,
        var_sim=stats.interval_var() if observed else math.nan,
        intervals=stats.interval_count,
        pmf_theory=pmf_of(x_max),
        pmf_sim=pmf_sim,
        sigma=sigmas,
        sigma_sim=stats.sigma(),
        tau_max=int(tracker.tau_max),
        tau_avg=float(tracker.tau_avg),
        seconds=time.perf_counter() - start,
    )


def _samplers(
    n: int, m: int, m_prime: int, sizes: np.ndarray, seed: int, p: Any, family: str
) -> dict[str, Any]:
    """The four policies' samplers, by name (only Policy 4 takes ``p``)."""
    # make_sampler validates every remaining input (sizes per client, p, family) as the library
    # does for a training run; the four samplers are cheap to build, only the chosen one runs.
    return {
        name: samplers.make_sampler(
            name,
            n=n,
            m=m,
            sizes=sizes,
            m_prime=m_prime,
            seed=seed,
            p=p if name == "markov_nonoptimal" else None,
            family=family,
        )
        for name in POLICIES
    }


def _simulate(sampler: Any, n: int, rounds: int) -> tuple[SelectionStats, DelayTracker]:
    """``rounds`` rounds of ``sampler``: the interval histogram and empirical Sigma, and
    FedSUM's delays tau_t of the trace."""
    stats, tracker = SelectionStats(n), DelayTracker(n)
    trace = [sampler.sample() for _ in range(rounds)]
    stats.update_rounds(trace)
    for selection in trace:
        tracker.update(selection.ids)
    return stats, tracker


def _interval_theory(
    policy: str, sampler: Any, n: int, m: int, sizes: np.ndarray
) -> tuple[np.ndarray | None, np.ndarray | None, float, float, Callable[[int], np.ndarray]]:
    """(chain p, its stationary law, E[X], Var[X], x_max -> P(X = 1..x_max)) of ``policy``;
    no chain or law for the memoryless Policies 1-2."""
    if policy.startswith("markov"):
        chain = sampler.p
        stationary = markov.stationary_distribution(chain)
        mean, var = markov.interval_mean(chain), markov.interval_variance(chain)
        return chain, stationary, mean, var, functools.partial(markov.interval_pmf, chain)
    rates = (
        memoryless.random_rates(n, m)
        if policy == "random"
        else memoryless.probabilistic_rates(sizes, m)
    )
    mean, var = memoryless.pooled_interval_moments(rates)
    return None, None, mean, var, functools.partial(memoryless.pooled_interval_pmf, rates)


def _sigmas(built: dict[str, Any], n: int, m: int, sizes: np.ndarray) -> dict[str, float]:
    """Sigma of each of the four policies (eq. 14) from their samplers ``built``."""
    return {
        "random": _sigma_policy1(sizes, m),
        "probabilistic": sigma.sigma_probabilistic(sizes, m),
        # Theorem 5 depends on the chain only through p_avg = pi_0
        "markov_optimal": sigma.sigma_markov(n, markov.selection_rate(built["markov_optimal"].p)),
        "markov_nonoptimal": sigma.sigma_markov(
            n, markov.selection_rate(built["markov_nonoptimal"].p)
        ),
    }


def summary(ex: Exploration, *, timing: bool = False) -> str:
    """The numbers of ``ex`` as text (``timing``: with the update time, which varies by run)."""

    def vec(v: np.ndarray | None) -> str:
        return "-" if v is None else "[" + ", ".join(f"{x:.4f}" for x in v) + "]"

    chain = ex.policy.startswith("markov")
    lines = [
        f"n = {ex.n}, m = {ex.m}, m' = {ex.m_prime}, r = n/m = {ex.n / ex.m:.4f}; "
        f"simulated: {samplers.STYLES[ex.policy].label}"
        + (f" ({ex.family})" if ex.policy == "markov_nonoptimal" else "")
        + f", {ex.sim_rounds} rounds, seed {ex.seed}",
        f"Theorem 1's p: {vec(ex.p_optimal)}",
        f"chain p:       {vec(ex.p) if chain else '- (memoryless policy: no age chain)'}",
        f"stationary pi: {vec(ex.stationary)}",
        f"E[X]   theory {ex.mean_theory:.4f}  simulated {ex.mean_sim:.4f}",
        f"Var[X] theory {ex.var_theory:.4f}  simulated {ex.var_sim:.4f}  "
        f"({ex.intervals} intervals)",
        "Sigma (eq. 14): "
        + ", ".join(f"{name} {value:.6f}" for name, value in ex.sigma.items())
        + f"; simulated {ex.policy} {ex.sigma_sim:.6f}",
        f"tau_max = {ex.tau_max}, tau_avg = {ex.tau_avg:.3f} (FedSUM eq. 4, over the trace)",
    ]
    if timing:
        lines.append(f"update: {1000 * ex.seconds:.0f} ms")
    return "\n".join(lines)


def plot(ex: Exploration, fig: Any = None) -> Any:
    """Draw ``ex`` on ``fig`` (cleared; a new matplotlib Figure if None) and return the figure:
    the chain (Theorem 1's p, the policy's p, pi), the interval pmf against the simulated
    histogram, and Sigma of the four policies."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 3.6)) if fig is None else fig
    if len(fig.axes) == 3:  # a figure this function drew before: clearing axes is cheaper
        for ax in fig.axes:
            ax.clear()
        ax_chain, ax_x, ax_sigma = fig.axes
    else:
        fig.clear()
        ax_chain, ax_x, ax_sigma = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1.1, 1.4, 1]})
        # fixed margins rather than tight_layout, which costs half of a redraw
        fig.subplots_adjust(left=0.05, right=0.99, bottom=0.15, top=0.83, wspace=0.22)
    ages = np.arange(ex.m_prime + 1)
    ax_chain.bar(ages, ex.p_optimal, width=0.8, color="0.8", label="Theorem 1's p")
    if ex.p is not None:
        color = samplers.STYLES[ex.policy].color
        ax_chain.plot(ages, ex.p, "o-", color=color, ms=4, label=f"p ({ex.policy})")
        ax_chain.plot(ages, ex.stationary, "s:", color="0.2", ms=4, label="stationary pi")
    ax_chain.set(xlabel="age a", ylim=(0, 1.05), title="age chain")
    ax_chain.legend(fontsize="x-small")

    x = np.arange(1, ex.pmf_theory.size + 1)
    # show up to where the theory holds 99.5% of its mass or the longest simulated interval
    inside = int(np.searchsorted(np.cumsum(ex.pmf_theory), 0.995)) + 2
    last_seen = int(np.flatnonzero(ex.pmf_sim)[-1]) + 2 if ex.intervals else 1
    x_hi = min(x.size, max(inside, last_seen, ex.m_prime + 2))
    # one stairs artist rather than a bar per x: hundreds of bars cost most of a redraw
    edges = np.arange(x_hi + 1) + 0.5
    simulated = f"simulated ({ex.sim_rounds} rounds)"
    color = samplers.STYLES[ex.policy].color
    ax_x.stairs(ex.pmf_sim[:x_hi], edges, fill=True, color=color, alpha=0.6, label=simulated)
    ax_x.plot(x[:x_hi], ex.pmf_theory[:x_hi], ".-", color="0.15", lw=1, ms=3, label="theory")
    ax_x.set(
        xlabel="interval X (rounds)",
        ylabel="P(X = x)",
        title=f"Var[X]: theory {ex.var_theory:.3f}, simulated {ex.var_sim:.3f}",
    )
    ax_x.legend(fontsize="x-small")

    names = list(ex.sigma)
    colors = [samplers.STYLES[k].color for k in names]
    ax_sigma.bar(range(4), [ex.sigma[k] for k in names], color=colors, width=0.7)
    ax_sigma.plot(names.index(ex.policy), ex.sigma_sim, "kx", ms=8, label="simulated")
    ax_sigma.set_xticks(range(4), ["P1", "P2", "P3", "P4"])
    ax_sigma.set(title="Sigma (Theorems 3-5)")
    ax_sigma.legend(fontsize="x-small")
    fig.suptitle(
        f"n={ex.n}, m={ex.m}, m'={ex.m_prime}, {ex.policy}: "
        f"tau_max = {ex.tau_max}, tau_avg = {ex.tau_avg:.2f}",
        fontsize="medium",
    )
    return fig


def _png(fig: Any, dpi: float = 80) -> str:
    """The figure as base64 PNG (what a notebook's display_data carries)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    buffer = io.BytesIO()
    FigureCanvasAgg(fig)  # attaches a canvas to the figure
    fig.savefig(buffer, format="png", dpi=dpi)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def parse_p(text: str) -> list[float]:
    """A p typed as numbers separated by commas or spaces, e.g. ``"0, 0.1, 0.5, 1"``."""
    try:
        return [float(v) for v in text.replace(",", " ").split()]
    except ValueError:
        raise ValueError(f"p must be numbers separated by commas, got {text!r}") from None


class Explorer:
    """The ipywidgets explorer (build it with :func:`widget`).

    ``controls`` maps the names of :func:`explore`'s arguments to their widgets; ``output`` is the
    ipywidgets Output where each update writes its summary and figure, or the library's message
    for a bad value; ``last`` is the latest :class:`Exploration` (None after an error) and
    ``error`` the latest message (None after a good update).
    """

    def __init__(self, **initial: Any) -> None:
        import ipywidgets as w  # lazily: the rest of this module works without ipywidgets

        v = {
            "n": 100,
            "m": 15,
            "m_prime": 10,
            "policy": "markov_optimal",
            "family": "linear",
            "p": "",
            "sizes": "zipf",
            "zipf_a": 2.0,
            "seed": 0,
            "sim_rounds": 1000,
        }
        unknown = set(initial) - set(v)
        if unknown:
            raise ValueError(f"unknown explorer controls {sorted(unknown)}; valid: {sorted(v)}")
        v.update(initial)
        if not isinstance(v["p"], str):  # a vector given as initial value: shown as text
            v["p"], v["family"] = ", ".join(repr(float(x)) for x in v["p"]), TYPED
        # the choices must be valid to build the dropdowns (explicit size vectors: use explore)
        require_choice("policy", v["policy"], POLICIES)
        require_choice("family", v["family"], [*markov.FAMILIES, TYPED])
        require_choice("sizes", v["sizes"], SIZE_LAWS)
        wide = {"style": {"description_width": "initial"}, "continuous_update": False}
        # The sliders reach m > n and m' = 0 on purpose: the library's message then shows.
        self.controls = {
            "n": w.IntSlider(v["n"], min=1, max=2000, description="n", **wide),
            "m": w.IntSlider(v["m"], min=1, max=2000, description="m", **wide),
            "m_prime": w.IntSlider(v["m_prime"], min=0, max=40, description="m'", **wide),
            "policy": w.Dropdown(
                options=[(samplers.STYLES[k].label, k) for k in POLICIES],
                value=v["policy"],
                description="policy",
            ),
            "family": w.Dropdown(
                options=[*markov.FAMILIES, TYPED], value=v["family"], description="Policy 4"
            ),
            "p": w.Text(v["p"], description="p", placeholder="p_0, ..., p_m'", **wide),
            "sizes": w.Dropdown(options=SIZE_LAWS, value=v["sizes"], description="sizes"),
            "zipf_a": w.FloatSlider(
                v["zipf_a"], min=1.05, max=6.0, step=0.05, description="Zipf a", **wide
            ),
            "seed": w.IntText(v["seed"], description="seed"),
            "sim_rounds": w.IntSlider(
                v["sim_rounds"], min=100, max=5000, step=100, description="rounds", **wide
            ),
        }
        self.output = w.Output()
        self.figure = None  # one matplotlib Figure, redrawn in place by every update
        self.last: Exploration | None = None
        self.error: str | None = None
        c = self.controls
        rows = [
            w.HBox([c["n"], c["m"], c["m_prime"]]),
            w.HBox([c["policy"], c["family"], c["p"]]),
            w.HBox([c["sizes"], c["zipf_a"], c["seed"], c["sim_rounds"]]),
        ]
        self.box = w.VBox([*rows, self.output])
        for control in c.values():
            control.observe(self.refresh, names="value")
        self.refresh()

    def values(self) -> dict[str, Any]:
        """The controls as keyword arguments of :func:`explore` (a typed p parsed)."""
        kw = {name: control.value for name, control in self.controls.items()}
        kw["p"] = parse_p(kw["p"]) if kw["family"] == TYPED else None
        if kw["family"] == TYPED:
            kw["family"] = "linear"  # unused: p is given
        return kw

    def refresh(self, change: Any = None) -> Exploration | None:
        """Recompute and redraw; a bad value shows the library's message instead."""
        try:
            ex = explore(**self.values())
        except (ValueError, TypeError) as err:  # the library's input checks
            self.last, self.error = None, str(err)
            # assigning outputs (not ``with output:``) also works without a kernel (tests)
            self.output.outputs = (
                {"output_type": "stream", "name": "stdout", "text": f"invalid input: {err}\n"},
            )
            return None
        self.figure = plot(ex, self.figure)
        figure = {
            "output_type": "display_data",
            "data": {"image/png": _png(self.figure), "text/plain": "<explorer figure>"},
            "metadata": {},
        }
        text = {"output_type": "stream", "name": "stdout", "text": summary(ex, timing=True) + "\n"}
        self.last, self.error = ex, None
        self.output.outputs = (text, figure)
        return ex

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.box._repr_mimebundle_(**kwargs)


def widget(**initial: Any) -> Explorer:
    """The explorer with ipywidgets controls, starting from ``initial`` (names of
    :func:`explore`'s arguments; ``p`` as text or a vector). Display it in JupyterLab."""
    return Explorer(**initial)
