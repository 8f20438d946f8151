"""What the AoI paper's measures read: the paper's settings and the tolerances fixed for its
rows (each with why), the profile's panels of cached runs (:class:`Runs`, each table read once)
and the helpers the theory and training measures share."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aoi_fl.aoi import samplers, sigma
from aoi_fl.data import partition
from aoi_fl.evidence.aoi import experiments, traces
from aoi_fl.evidence.aoi import results as summaries
from aoi_fl.evidence.aoi.paper import PAPER_SIGMA, WINDOWS
from aoi_fl.pipeline import plotting
from aoi_fl.pipeline import runs as cache
from aoi_fl.pipeline.claims import (
    Condition,
    sign_verdict,
)
from aoi_fl.pipeline.rules import Reading

N, M, M_PRIME, ZIPF_A = experiments.N_CLIENTS, experiments.M_SELECTED, experiments.M_PRIME, 2.0
#: the tolerance of a value the theory fixes: 1000-round traces scatter by under 1% (the Fig. 2
#: notebook). Two such values within it are equal, so "lower" means lower by more than it
#: (:func:`below`)
SIGMA_RTOL = 0.05
#: "significantly lower" (Sec. V, Fig. 2 paragraph), read at the paper's own strength: the
#: paragraph calls the Markov policies' 0.055 and 0.061 significantly lower than Policy 2's
#: 0.116, so a gap is significant when the other Sigma is at least the smaller of its printed
#: ratios, 0.116 / 0.061 = 1.90 times the Markov one (not the 5% within which two closed forms
#: are equal: that is a tolerance, not "significant")
SIGNIFICANT_RATIO = PAPER_SIGMA["probabilistic"] / PAPER_SIGMA["markov_nonoptimal"]
#: Zipf realisations for the spread of Policies 1-2's Sigma (as the Fig. 2 notebook)
ZIPF_SEEDS = 200
#: Fig. 4: the traces over the Fig. 4 notebook's windows (:data:`WINDOWS`; an ordering of the
#: 0/1 policies of rate m/n leaves out T = 1, where they tie by construction: :data:`TIE_AT_1`).
#: Y counts Policy 2's draws: its client "is selected l times out of m total selections"
#: (Sec. III-B)
TRACE_SEEDS, TRACE_ROUNDS = 20, 1000
#: the mean Sigma of the traces against Theorems 3-5: 20 traces of 1000 rounds estimate it to
#: about 0.5% (sd over traces / sqrt(20), the Fig. 2 notebook), which checks its means at 2%
TRACE_RTOL = 0.02
#: Sec. III-C's geometric Var[X] of random selection against the traces' intervals: a
#: 1000-round trace censors intervals longer than itself, which pulls the variance down by a
#: few percent (the Fig. 3 notebook checks one trace at 5%)
INTERVAL_RTOL = 0.05
#: Fig. 3's "peak around 6 rounds", fixed from the word "about" before the pmf was read: an
#: interval of about 6 rounds is one within a round of 6 (one histogram bin); a "concentrated"
#: peak holds most (more than half) of the intervals within that band
FIG3_ABOUT, FIG3_TOL = 6, 1
#: "the variance stabilises after a few rounds" (Fig. 2 paragraph), fixed before it was
#: computed: "a few" is at most FEW_ROUNDS = 10 rounds (1% of Fig. 2's 1000 rounds, about 1.5
#: of Policy 3's 6-7-round selection cycles). From eq. 4's start (every age 0) the per-round
#: Sigma, E[1/|S_t|] - 1/n over independent traces, has stabilised by round R when every block
#: of SETTLE_BLOCK rounds from R on has its mean within SIGMA_RTOL of Theorem 5's stationary
#: value; SETTLE_TRACES traces of TRACE_ROUNDS rounds per Markov policy (a block's mean then
#: has a standard error under 1% of the value)
FEW_ROUNDS, SETTLE_BLOCK, SETTLE_TRACES = 10, 10, 100
#: Sec. I's "lower variability in X improves overall model accuracy", fixed before it was
#: computed: Markov optimal (the least Var[X], row aoi.fig3.order) against Policies 1 and 2
#: (larger Var[X]), on the final test accuracy (the mean of the last FINAL_EVALS evaluations
#: every compared run made), paired over seeds, per split: the sign of the 95% t interval
FINAL_EVALS = 5
#: random starts of the numerical optimiser per grid point (the Fig. 1 notebook uses 30)
OPTIMISER_STARTS = 10
#: "the Markov policy": the paper's proposed policy (Markov optimal), against Policies 1-2
MARKOV, OTHERS = "markov_optimal", ("random", "probabilistic")
#: per panel of a training row: the dataset whose target its runs are read at, and the one whose
#: paper model they are held to (the Fashion-MNIST panel stands in for Figs 6-7's CIFAR)
PANELS = {
    "main_mnist": ("mnist", "mnist"),
    "main_cifar10": ("cifar10", "cifar10"),
    "main_cifar100": ("cifar100", "cifar100"),
    "power": ("mnist", "mnist"),
    "fashion": ("fashion_mnist", "cifar10"),
}
#: the condition the Fashion-MNIST substitute misses, whatever its runs
SUBSTITUTE = Condition("dataset", "CIFAR-10 and CIFAR-100", "Fashion-MNIST")
#: Fig. 4's orderings among the policies that select 0/1 per round at the rate m/n (eq. 3):
#: at T = 1 each one's Y is one round's indicator, and sqrt(Var(Y)) = sqrt(r (1 - r)) is the
#: same for all of them by construction, so T = 1 cannot order them (said in the rows)
TIE_AT_1 = (
    "T = 1 left out: there Y is one round's indicator and every 0/1 policy of rate m/n has "
    f"sqrt(r (1 - r)) = {np.sqrt(M / N * (1 - M / N)):.3f}, a tie by construction, not a test "
    "(the paper names no window sizes)"
)


@dataclass(frozen=True)
class Seeds(Reading):
    """A reading of per-seed numbers, for a rule that puts the paper's one run among them: the
    ``values``, or where only their summary is printed (Table II) ``ours`` with its ``sd`` over
    ``count`` seeds."""

    values: tuple[float, ...] = ()
    sd: float = float("nan")
    count: int = 0


@dataclass(frozen=True)
class Panel:
    """Runs a training row reads: the ``results``, how many are ``missing``, the ``target``
    accuracy, the claim's ``conditions`` against them and where they come from (``source``) when
    not from the profile's own panel."""

    results: list
    missing: int = 0
    target: float = 0.0
    conditions: tuple[Condition, ...] = ()
    source: str = ""


class Runs:
    """What the rows read, each computed once, when a row first needs it: the theory on
    ``zipf_seeds`` size draws, ``trace_seeds`` traces, ``starts`` optimiser starts and
    ``settle_traces`` traces from the all-zero start, and ``profile``'s cached panels.
    ``panels`` and ``speeds`` (a speed-up row's runs, by panel) hand a row given runs."""

    def __init__(
        self,
        profile: str = "cpu",
        results_dir: str = "results",
        data_root: str = "data",
        *,
        zipf_seeds: int = ZIPF_SEEDS,
        trace_seeds: int = TRACE_SEEDS,
        starts: int = OPTIMISER_STARTS,
        settle_traces: int = SETTLE_TRACES,
        panels: dict[str, Panel] | None = None,
        speeds: dict[str, Panel] | None = None,
    ) -> None:
        self.profile, self.results_dir, self.data_root = profile, results_dir, data_root
        self.zipf_seeds, self.trace_seeds = zipf_seeds, trace_seeds
        self.starts, self.settle_traces = starts, settle_traces
        self.panels, self.speeds = dict(panels or {}), dict(speeds or {})
        self._memo: dict[tuple, Any] = {}

    def memo(self, key: tuple, compute: Callable[[], Any]) -> Any:
        """``compute()``, once per ``key``: the tables several rows read."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def panel(self, name: str) -> Panel:
        """The profile's cached panel ``name``, with its target and the claim's conditions."""
        if name not in self.panels:
            found, missing = cache.cached_results(
                experiments.panel_grid(name, self.profile), results_dir=self.results_dir
            )
            dataset, paper = PANELS[name]
            conditions = (SUBSTITUTE,) if dataset != paper else ()
            model = summaries.model_condition(found, paper)
            self.panels[name] = Panel(
                found, missing, experiments.TARGETS[dataset], (*conditions, model)
            )
        return self.panels[name]

    def speed(self, name: str) -> Panel:
        """A speed-up row's runs: the paper profile's regime of Fig. 5 where it has more paired
        seeds than the profile's own panel ``name`` (:func:`regime`)."""
        if name not in self.speeds:
            own = self.panel(name).results
            runs, source = own, ""
            if name == "main_mnist" and (wide := regime(self.results_dir)):
                runs, source = wide, regime_source(wide)
            if name == "power":
                wide = regime(self.results_dir, "power")
                if len(wide) > len(summaries.complete_pairs(own, experiments.PAIR)):
                    runs, source = wide, regime_source(wide, "its horizons, up to 30 seeds")
            self.speeds[name] = Panel(runs, source=source)
        return self.speeds[name]

    @functools.cached_property
    def closed(self) -> dict[str, float]:
        """Theorems 3-5's Sigma per policy on the seed-0 sizes."""
        return summaries.sigma_closed_forms(sizes(), M, M_PRIME)

    @functools.cached_property
    def draws(self) -> dict[str, list[float]]:
        """Policies 1-2's Sigma and Policy 2's Var[X] over the Zipf size draws."""
        out = {"random": [], "probabilistic": [], "var_probabilistic": []}
        for s in range(self.zipf_seeds):
            d = sizes(s)
            out["random"].append(sigma.sigma_random(d, M))
            out["probabilistic"].append(sigma.sigma_probabilistic(d, M))
            out["var_probabilistic"].append(interval_variance("probabilistic", d))
        return out

    @functools.cached_property
    def simulated(self) -> dict[str, list]:
        """The four policies' traces on the seed-0 sizes."""
        return {
            policy: traces.window_traces(
                policy,
                sizes(),
                WINDOWS,
                n=N,
                m=M,
                m_prime=M_PRIME,
                seeds=self.trace_seeds,
                rounds=TRACE_ROUNDS,
            )
            for policy in samplers.POLICIES
        }

    @functools.cached_property
    def curves(self) -> dict[str, np.ndarray]:
        """sqrt(Var(Y))/T per trace and window, per policy (Fig. 4)."""
        return {k: traces.window_std_ratios(v, WINDOWS) for k, v in self.simulated.items()}


def label(policy: str) -> str:
    return plotting.style(policy).label


def sizes(seed: int = 0) -> np.ndarray:
    return partition.zipf_sizes(N, ZIPF_A, seed=seed).astype(float)


def interval_variance(policy: str, sizes: np.ndarray) -> float:
    """Var[X] of a policy's pooled interval between selections (theory, Sec. III-C)."""
    sampler = samplers.make_sampler(policy, n=N, m=M, sizes=sizes, m_prime=M_PRIME)
    return summaries.policy_theory(sampler)["Var[X]"]


def below(a: float, b: float, rtol: float = SIGMA_RTOL) -> bool:
    """Whether a value the theory fixes is lower than another: by more than ``rtol`` (relative),
    the tolerance within which the ledger calls two such values equal."""
    return bool(a < (1 - rtol) * b)


def peak_verdict(
    pmf: Sequence[float], about: int = FIG3_ABOUT, tol: int = FIG3_TOL
) -> tuple[int, float, str]:
    """(mode, mass within ``about`` +- ``tol``, verdict) on "the intervals X have a concentrated
    peak at about ``about`` rounds" from the law of X (``pmf[x - 1] = P(X = x)``): "held" when
    the mode lies in the band and the band holds more than half of the intervals."""
    pmf = np.asarray(pmf, dtype=float)
    mode = int(np.argmax(pmf)) + 1
    mass = float(pmf[about - tol - 1 : about + tol].sum())
    return mode, mass, "held" if abs(mode - about) <= tol and mass > 0.5 else "not held"


def window_order(lower: np.ndarray, higher: np.ndarray) -> list[str]:
    """Per window, the verdict on "``lower``'s sqrt(Var(Y))/T lies below ``higher``'s" from
    independent traces (arrays traces x windows): :func:`sign_verdict` of the difference of
    the means +- 3 standard errors (plus 1e-9 of the value: at T = 1 a rate-m/n policy's
    statistic is the same sqrt(r (1 - r)) in every trace, and float noise must not order it)."""
    lo, hi = np.asarray(lower, dtype=float), np.asarray(higher, dtype=float)
    diff = hi.mean(axis=0) - lo.mean(axis=0)
    se = np.sqrt(hi.var(axis=0, ddof=1) / len(hi) + lo.var(axis=0, ddof=1) / len(lo))
    half = 3 * se + 1e-9 * np.abs(hi.mean(axis=0))
    return [sign_verdict(d - h, d + h, "positive") for d, h in zip(diff, half, strict=True)]


def settle_round(
    per_round: Sequence[float], target: float, block: int = SETTLE_BLOCK, rtol: float = SIGMA_RTOL
) -> int | None:
    """The first round R (a multiple of ``block``) from which the mean of every complete block
    of ``block`` rounds of ``per_round`` lies within ``rtol`` (relative) of ``target``; None if
    the last block is not."""
    x = np.asarray(per_round, dtype=float)
    k = x.size // block
    if k == 0:
        raise ValueError(f"need at least one block of {block} rounds, got {x.size}")
    ok = np.abs(x[: k * block].reshape(k, block).mean(axis=1) / target - 1) <= rtol
    bad = np.flatnonzero(~ok)
    if bad.size == 0:
        return 0
    return None if bad[-1] == k - 1 else int(bad[-1] + 1) * block


def most_verdict(parts: Sequence[str]) -> str:
    """A claim about "most" of several parts (datasets): "held" when more than half are held,
    "not held" when at most half could still be held (the others are not held), otherwise
    "not computable here" if a part is, else "inconclusive" (runs missing) or "inconclusive at
    this budget"."""
    k = len(parts)
    if 2 * parts.count("held") > k:
        return "held"
    if 2 * (k - parts.count("not held")) <= k:
        return "not held"
    if "not computable here" in parts:
        return "not computable here"
    return "inconclusive" if "inconclusive" in parts else "inconclusive at this budget"


def final_accuracy_pairs(
    results: list, split: str, fast: str, slow: str, last: int = FINAL_EVALS
) -> list[float]:
    """Per seed run with both policies on ``split``, final accuracy of ``fast`` minus that of
    ``slow``: each run's mean test accuracy over the last ``last`` evaluations that every run of
    the two policies made (screened runs add evaluations of their own near the target)."""
    groups = summaries.group_runs(results)
    by = {
        p: {r.config["training"]["seed"]: r for r in groups.get((split, p), [])}
        for p in (fast, slow)
    }
    seeds = sorted(by[fast].keys() & by[slow].keys())
    if not seeds:
        return []
    runs_ = [by[p][s] for p in (fast, slow) for s in seeds]
    _, acc = summaries.accuracy_curves(runs_, common=True)
    tail = acc[:, -last:].mean(axis=1)
    return list(tail[: len(seeds)] - tail[len(seeds) :])


def regime(results_dir: str, panel: str = "main_mnist") -> list:
    """Fig. 5's pair in the ``paper`` profile's ``panel`` at every paired seed cached (the
    Fig. 5 notebook's panels of that name, :meth:`figures.PanelNotebook.show_regime`):
    ``main_mnist`` is the paper's regime (its CNN at its horizons), with more power than the
    profile's own few seeds, so the speed-up rows are decided on it; ``power`` is the small-CNN
    panel at its paper-profile horizons and seeds."""
    found, _ = cache.cached_results(experiments.regime_grid(panel), results_dir=results_dir)
    return summaries.complete_pairs(found, experiments.PAIR)


def regime_source(regime: list, what: str = "its CNN and horizons") -> str:
    devices = ", ".join(sorted({r.device for r in regime}))
    return f"; the paper profile's runs ({what}), trained on {devices}"


def missing_note(missing: int) -> str:
    return f"; {missing} runs not cached" if missing else ""


def not_here(runs: Runs, dataset: str, missing: int, why: str | None = None) -> Reading:
    """No verdict: the dataset is absent ("not computable here"), or runs are not cached or
    cannot decide (``why``; "inconclusive")."""
    from aoi_fl.data.datasets import cifar_available

    absent = dataset.startswith("cifar") and not cifar_available(dataset, runs.data_root)
    spread = f"{dataset} is not on this machine" if absent else why or f"{missing} runs not cached"
    return Reading(None, spread, verdict="not computable here" if absent else "inconclusive")


def diverged_note(results: list, split: str, policies: tuple[str, ...]) -> str | None:
    """Why a comparison of ``policies`` on ``split`` cannot be held: some of its runs diverged
    (:func:`summaries.diverged_runs`); None if none did."""
    bad = [k for k in summaries.diverged_runs(results) if k[0] == split and k[1] in policies]
    if not bad:
        return None
    return (
        f"{len(bad)} of the compared runs diverged (test loss not finite or above 5x the initial "
        "model's): a diverged run cannot decide the comparison"
    )
