"""The K-Vib paper's claims and printed numbers against ours (the ledger's ``kvib`` rows).

Sec. 3 and Fig. 1 (Examples 3.1 and 3.2, notebook 11) are recomputed from the library's closed
forms (eq. 2-5); the synthetic experiments (Figs 2, 3(b), 3(c) and App. F's Fig. 6, notebook 12)
and the MNIST substitute for Fig. 4 (notebook 13) are read from the cached runs of the profile's
grids: nothing is trained here, and missing runs make a row "inconclusive" and say how many.
FEMNIST (Fig. 4 itself) cannot be fetched here, so its printed numbers are "not computable here".

A comparison between samplers is decided on paired seeds (the same seed starts every sampler
from the same model): :func:`lower_verdict` for a claim without a size, and
:func:`aoi_fl.pipeline.paired.verdict` for Fig. 4's claimed 2x and 3x. :func:`verdict_lines`
prints the same verdicts for the notebooks (see :mod:`aoi_fl.pipeline.claims` for the rules).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from aoi_fl.core.train import rounds_to_target
from aoi_fl.core.validation import require_choice
from aoi_fl.kvib import estimators
from aoi_fl.kvib import experiments as kx
from aoi_fl.kvib import results as kr
from aoi_fl.pipeline import paired, runs
from aoi_fl.pipeline.claims import (
    VERDICT_GROUP,
    Claim,
    Untested,
    combine_verdicts,
    interval_verdict,
    sign_verdict,
    value_verdict,
)

#: Sec. 3's "with K = 1 ISP is RSP": the largest |p_eq4 - p_eq5| still read as equal (both are
#: computed in floating point from the same norms)
K1_TOLERANCE = 1e-12
#: notebook 11's reading of Sec. 3: "comparable" is an MSE ratio RSP / ISP below 1.5, "ISP
#: outperforms" one above 2 (the paper gives no numbers for Fig. 1(a))
COMPARABLE_RATIO, OUTPERFORMS_RATIO = 1.5, 2.0
#: Example 3.2: the three vectors and every number the paper prints about them
EX32_G = kx.EXAMPLE_3_2_G
PAPER_EX32_SQ_NORMS = (1.0, 3.0, 6.0)
PAPER_EX32_Q_RSP = (0.1, 0.3, 0.6)  # p* = K q for RSP
PAPER_EX32_P_ISP = (0.25, 0.75, 1.0)
PAPER_EX32_K3_D = (6.4, 5.9)  # RSP with K = 3
PAPER_EX32_K3_ERROR = 0.6
PAPER_EX32_SIZE_PROB = 3 / 16  # P(|S| = 3) = P(|S| = 1) under ISP
#: the baselines the paper plots in Fig. 2 (Avare is not implemented: see samplers)
BASELINES = ("uniform_unbiased", "mabs", "vrb")
#: the uniform baseline as the authors' code trains it (self-normalised weights)
NORMALISED = "uniform_normalised"
#: Theorem 5.2: regret O(K^(-4/3)), an upper bound's rate (not a prediction of the slope);
#: Fig. 3(b) is offered as its evidence
PAPER_K_RATE = -4 / 3
#: notebook 12's reading of Fig. 3(c)'s "changes slightly": max / min over the gamma scales
GAMMA_STABLE_RATIO = 1.5
_NB11, _NB12, _NB13 = "11_isp_vs_rsp", "12_kvib_synthetic", "13_kvib_mnist"


def _row(
    key: str, ref: str, claim: str, paper, ours, spread: str, verdict: str, nb: str, *, line=False
):
    """A Claim; ``line``: the notebook prints its verdict with :func:`verdict_lines`."""
    printed = rf"^{re.escape(key)}: .* -> {VERDICT_GROUP}\s*$" if line else None
    return Claim(key, "kvib", ref, claim, paper, ours, spread, verdict, nb, printed)


# ---------------------------------------------------------------------------------------------
# Verdict rules


def printed_verdict(paper: float, ours: float, decimals: int) -> str:
    """ "held" when ``ours`` rounds to the paper's number as printed with ``decimals`` decimals
    (the text of Sec. 3 prints one: the tolerance is half a unit of its last digit)."""
    return "held" if abs(ours - paper) <= 0.5 * 10.0**-decimals + 1e-12 else "not held"


def lower_verdict(differences: Sequence[float], level: float = 0.95):
    """(verdict, interval) of the claim "ours is lower" from paired differences ours - theirs.

    No size is claimed, so the sign of the interval over seeds decides
    (:func:`aoi_fl.pipeline.claims.interval_verdict`); "inconclusive" with fewer than 2 finite
    pairs (interval None).
    """
    return interval_verdict(differences, "negative", level)


def _grid_seeds(per_seed: Mapping[Any, Mapping[int, float]]) -> list[int]:
    """The seeds every grid point has."""
    sets = [set(v) for v in per_seed.values()]
    return sorted(set.intersection(*sets)) if sets else []


def _log_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of log y on log x (NaN if a y is not positive)."""
    ys = np.asarray(ys, dtype=float)
    if not (np.isfinite(ys).all() and ys.min() > 0):
        return float("nan")
    return float(np.polyfit(np.log(np.asarray(xs, dtype=float)), np.log(ys), 1)[0])


def k_trend_verdict(per_seed: Mapping[int, Mapping[int, float]], claim: str) -> tuple[str, str]:
    """(verdict, spread) of ``claim`` "falls" or "rises" with K, from {K: {seed: value}} (K in
    increasing order).

    With at least 2 seeds at every K, each step between consecutive K is decided on the paired
    per-seed differences value(K_next) - value(K) by :func:`sign_verdict`, and the steps are
    combined by :func:`combine_verdicts` (held when every step moves the claimed way, not held
    when one moves the other way). With one seed per K there is no interval: "inconclusive at
    this budget", and the spread says what the one seed shows; "inconclusive" with fewer than
    2 K or no seed common to all.
    """
    direction = {"falls": "negative", "rises": "positive"}
    require_choice("claim", claim, tuple(direction))
    ks = list(per_seed)
    seeds = _grid_seeds(per_seed)
    if len(ks) < 2 or not seeds:
        return "inconclusive", f"{len(ks)} K, {len(seeds)} common seed(s)"
    means = [float(np.mean([per_seed[k][s] for s in seeds])) for k in ks]
    values = ", ".join(f"{v:.3g}" for v in means)
    if len(seeds) < 2:
        first, last = means[0], means[-1]
        moves = "falls" if last < first else "rises"
        factor = max(first, last) / min(first, last) if min(first, last) > 0 else float("nan")
        slope = _log_slope(ks, means)
        return "inconclusive at this budget", (
            f"one seed per K: {moves} {factor:.3g}x over K = {ks[0]}-{ks[-1]} ({values}), "
            f"log-log slope {slope:.3g}; no interval from one seed"
        )
    verdicts, texts = [], []
    for a, b in zip(ks[:-1], ks[1:], strict=True):
        d = [per_seed[b][s] - per_seed[a][s] for s in seeds]
        ci = paired.paired_interval(np.asarray(d, dtype=float))
        verdicts.append(sign_verdict(ci.low, ci.high, direction[claim]))
        texts.append(f"K {a}->{b} [{ci.low:.3g}, {ci.high:.3g}] {verdicts[-1]}")
    return combine_verdicts(verdicts), (
        f"{len(seeds)} paired seeds per K ({values}); 95% t intervals of the step: "
        + "; ".join(texts)
    )


def k_rate_verdict(
    per_seed: Mapping[int, Mapping[int, float]], rate: float
) -> tuple[str, float, str]:
    """(verdict, mean slope, spread) of "falls at least as fast as K^rate": the least-squares
    slope of log value on log K per seed; with at least 2 seeds, :func:`sign_verdict` on the t
    interval of slope - rate (held below 0); with one seed "inconclusive at this budget"."""
    ks = list(per_seed)
    seeds = _grid_seeds(per_seed)
    if len(ks) < 2 or not seeds:
        return "inconclusive", float("nan"), f"{len(ks)} K, {len(seeds)} common seed(s)"
    slopes = np.array([_log_slope(ks, [per_seed[k][s] for k in ks]) for s in seeds])
    if not np.isfinite(slopes).all():
        return "inconclusive", float("nan"), "a value is not positive: no log-log slope"
    mean = float(slopes.mean())
    if len(seeds) < 2:
        return (
            "inconclusive at this budget",
            mean,
            (
                f"one seed per K (K = {', '.join(map(str, ks))}): log-log slope {mean:.3g} against "
                f"{rate:.3g}; no interval from one seed"
            ),
        )
    verdict, ci = lower_verdict(slopes - rate)
    return (
        verdict,
        mean,
        (
            f"per-seed log-log slope, mean {mean:.3g}; slope - ({rate:.3g}): 95% t interval "
            f"[{ci.low:.3g}, {ci.high:.3g}] over {len(seeds)} seeds"
        ),
    )


def stable_verdict(
    per_seed: Mapping[float, Mapping[int, float]], ratio: float
) -> tuple[str, float, str]:
    """(verdict, max / min of the means, spread) of "changes only slightly" over a grid (the
    gamma scales): per seed the max / min over the grid; with at least 2 seeds,
    :func:`sign_verdict` on the t interval of that ratio - ``ratio`` (held below 0); with one
    seed "inconclusive at this budget"."""
    points = sorted(per_seed)
    seeds = _grid_seeds(per_seed)
    if len(points) < 2 or not seeds:
        return "inconclusive", float("nan"), f"{len(points)} point(s), {len(seeds)} common seed(s)"
    means = {p: float(np.mean([per_seed[p][s] for s in seeds])) for p in points}
    overall = max(means.values()) / min(means.values())
    values = ", ".join(f"x{p:g}: {v:.3g}" for p, v in means.items())
    if len(seeds) < 2:
        return (
            "inconclusive at this budget",
            overall,
            (f"one seed per scale: max / min {overall:.3g} ({values}); no interval from one seed"),
        )
    per = np.array(
        [max(per_seed[p][s] for p in points) / min(per_seed[p][s] for p in points) for s in seeds]
    )
    verdict, ci = lower_verdict(per - ratio)
    return (
        verdict,
        overall,
        (
            f"{len(seeds)} seeds per scale ({values}); per-seed max / min - {ratio:g}: 95% t "
            f"interval [{ci.low:.3g}, {ci.high:.3g}]"
        ),
    )


def _diverged_text(div: Mapping[tuple, Mapping[int, bool]], labels: Sequence[tuple]) -> str:
    """Which of ``labels``' runs diverged (:func:`.results.diverged`), or "" if none did."""
    found: dict[str, list] = {}
    for lab in labels:
        runs_ = div.get(lab, {})
        n = sum(bool(v) for v in runs_.values())
        if n:
            found.setdefault(lab[0], []).append((lab[1], n, len(runs_)))
    if not found:
        return ""
    parts = [
        f"{name} at K = {', '.join(str(k) for k, _, _ in hits)} "
        f"({sum(n for _, n, _ in hits)} of {sum(m for _, _, m in hits)} runs)"
        for name, hits in found.items()
    ]
    return f"FedAvg diverged (test loss above {kr.DIVERGENCE_FACTOR:g}x the initial model's): " + (
        ", ".join(parts)
    )


def _interval_text(ci) -> str:
    if ci is None:
        return "fewer than 2 paired seeds"
    return f"95% t interval [{ci.low:.3g}, {ci.high:.3g}] over {ci.n} paired seeds"


def _lower_row(key: str, ref: str, text: str, d, nb: str, *, refutes=False, against="") -> Claim:
    """The row of a claim read from paired differences ``d`` by :func:`lower_verdict`;
    ``refutes``: the claim is the opposite ("no better"), so held and not held swap."""
    verdict, ci = lower_verdict(d)
    if refutes:
        verdict = {"held": "not held", "not held": "held"}.get(verdict, verdict)
    spread = f"against {against}: {_interval_text(ci)}" if against else _interval_text(ci)
    return _row(key, ref, text, None, float(np.mean(d)), spread, verdict, nb, line=True)


# ---------------------------------------------------------------------------------------------
# Sec. 3, Fig. 1: Examples 3.1 and 3.2 (closed forms, notebook 11)


def example_3_1_mse(g: np.ndarray, k: int) -> dict[str, float]:
    """Closed-form eq. 2 of uniform RSP, RSP with eq. 5 and ISP with eq. 4 at budget ``k``."""
    a = np.linalg.norm(g, axis=1)
    n = len(a)
    return {
        "uniform": estimators.expected_squared_error("without_replacement", g, np.full(n, k / n)),
        "rsp": estimators.expected_squared_error(
            "with_replacement", g, estimators.optimal_rsp_probabilities(a, k)
        ),
        "isp": estimators.expected_squared_error(
            "isp", g, estimators.optimal_isp_probabilities(a, k)
        ),
    }


def figure1_claims(profile: str = "cpu") -> list[Claim]:
    """Fig. 1(a) (Example 3.1, with ``profile``'s settings: those notebook 11 uses), Sec. 3's
    K = 1 remark and Fig. 1(b) (Example 3.2)."""
    out = []
    ex = kx.example_3_1_settings(profile)
    n, dim, ks = ex["n"], ex["dim"], ex["ks"]
    g = kx.example_3_1_vectors(n, dim, ex["scale_sigma"])
    mse = {k: example_3_1_mse(g, k) for k in ks}
    ratio = {k: m["rsp"] / m["isp"] for k, m in mse.items()}
    lo, hi = min(ks), max(ks)
    spread = f"closed-form eq. 2 on notebook 11's {n} vectors in R^{dim}: RSP / ISP " + ", ".join(
        f"{r:.2f} at K = {k}" for k, r in ratio.items()
    )
    out.append(
        _row(
            f"kvib.fig1a.k{lo}.comparable",
            "Fig. 1(a), Example 3.1",
            f"RSP (eq. 5) and ISP (eq. 4) give comparable errors at K = {lo} "
            f"(ours: MSE ratio RSP / ISP below {COMPARABLE_RATIO})",
            None,
            ratio[lo],
            spread,
            "held" if ratio[lo] < COMPARABLE_RATIO else "not held",
            _NB11,
            line=True,
        )
    )
    out.append(
        _row(
            f"kvib.fig1a.k{hi}.isp_better",
            "Fig. 1(a), Example 3.1",
            f"ISP outperforms RSP at K = {hi} "
            f"(ours: MSE ratio RSP / ISP above {OUTPERFORMS_RATIO})",
            None,
            ratio[hi],
            spread,
            "held" if ratio[hi] > OUTPERFORMS_RATIO else "not held",
            _NB11,
            line=True,
        )
    )
    ordered = all(m["isp"] < m["rsp"] < m["uniform"] for m in mse.values())
    out.append(
        _row(
            "kvib.fig1a.isp_lowest",
            "Fig. 1 caption",
            "ISP estimates have a lower variance than RSP (and uniform) ones",
            None,
            min(ratio.values()),
            "closed-form eq. 2: ISP < RSP < uniform at K = "
            + ", ".join(str(k) for k in ks)
            + "; ours = the smallest RSP / ISP ratio",
            "held" if ordered else "not held",
            _NB11,
            line=True,
        )
    )
    a = np.linalg.norm(g, axis=1)
    gap = float(
        np.abs(
            estimators.optimal_isp_probabilities(a, 1) - estimators.optimal_rsp_probabilities(a, 1)
        ).max()
    )
    out.append(
        _row(
            "kvib.sec3.k1_is_rsp",
            "Sec. 3",
            "with K = 1, ISP's eq. 4 puts no client at p = 1 and is RSP's eq. 5",
            0.0,
            gap,
            f"max |p_eq4 - p_eq5| on Example 3.1's vectors; held when at most {K1_TOLERANCE:g} "
            "(floating point)",
            "held" if gap <= K1_TOLERANCE else "not held",
            _NB11,
        )
    )
    return out + example_3_2_claims()


def example_3_2_claims() -> list[Claim]:
    """Example 3.2 (Fig. 1(b)) enumerated exactly: every number of Sec. 3's text."""
    out = []
    g, ref, nb = EX32_G, "Example 3.2, Fig. 1(b)", _NB11
    norms = np.linalg.norm(g, axis=1)
    p_isp = estimators.optimal_isp_probabilities(norms, 2)
    q_rsp = estimators.optimal_rsp_probabilities(norms, 2) / 2
    for i in range(3):
        out.append(
            _row(
                f"kvib.ex3_2.sq_norm.g{i + 1}",
                ref,
                f"||g_{i + 1}||^2 (lambda omitted)",
                PAPER_EX32_SQ_NORMS[i],
                float(norms[i] ** 2),
                f"exact; ||g_{i + 1}|| = {norms[i]:.6g} (the printed values are the norms)",
                value_verdict(PAPER_EX32_SQ_NORMS[i], float(norms[i] ** 2), 1e-9),
                nb,
            )
        )
    for name, paper, ours, text in (
        ("q_rsp", PAPER_EX32_Q_RSP, q_rsp, "RSP optimum p* = K q (eq. 5), q_{}"),
        ("p_isp", PAPER_EX32_P_ISP, p_isp, "ISP optimum p*_{} (eq. 4), K = 2"),
    ):
        for i in range(3):
            out.append(
                _row(
                    f"kvib.ex3_2.{name}.g{i + 1}",
                    ref,
                    text.format(i + 1),
                    paper[i],
                    float(ours[i]),
                    "exact",
                    value_verdict(paper[i], float(ours[i]), 1e-9),
                    nb,
                )
            )
    total = g.sum(axis=0)
    var_rsp = estimators.expected_squared_error("with_replacement", g, 2 * q_rsp)
    var_isp = estimators.expected_squared_error("isp", g, p_isp)
    out.append(
        _row(
            "kvib.ex3_2.isp_closer",
            "Fig. 1(b) caption",
            "ISP's estimates lie closer to Global (sum g) than RSP's (K = 2)",
            None,
            var_rsp / var_isp,
            f"exact eq. 2: RSP {var_rsp:.4g}, ISP {var_isp:.4g}; ours = their ratio",
            "held" if var_isp < var_rsp else "not held",
            nb,
            line=True,
        )
    )
    sizes: dict[int, float] = {}
    for counts, prob in estimators.enumerate_outcomes("isp", p_isp):
        sizes[int(counts.sum())] = sizes.get(int(counts.sum()), 0.0) + prob
    for size in (3, 1):
        out.append(
            _row(
                f"kvib.ex3_2.size{size}",
                "Sec. 3 (Example 3.2)",
                f"ISP draws {size} client{'s' if size > 1 else ''} with probability 3/16",
                PAPER_EX32_SIZE_PROB,
                sizes.get(size, 0.0),
                "exact enumeration",
                value_verdict(PAPER_EX32_SIZE_PROB, sizes.get(size, 0.0), 1e-9),
                nb,
            )
        )
    full = estimators.estimate(
        np.ones(3, dtype=int), estimators.optimal_rsp_probabilities(norms, 3), g
    )
    error = float(np.sum((full - total) ** 2))
    for axis, name in enumerate(("d_x", "d_y")):
        out.append(
            _row(
                f"kvib.ex3_2.k3_rsp.{name}",
                "Sec. 3 (Example 3.2)",
                f"RSP with K = 3, each vector drawn once: {name} of d",
                PAPER_EX32_K3_D[axis],
                float(full[axis]),
                "exact; tolerance: the printed digit",
                printed_verdict(PAPER_EX32_K3_D[axis], float(full[axis]), 1),
                nb,
            )
        )
    out.append(
        _row(
            "kvib.ex3_2.k3_rsp.error",
            "Sec. 3 (Example 3.2)",
            "RSP with K = 3, each vector drawn once: ||d - sum g||^2",
            PAPER_EX32_K3_ERROR,
            error,
            "exact; tolerance: the printed digit",
            printed_verdict(PAPER_EX32_K3_ERROR, error, 1),
            nb,
        )
    )
    p3 = estimators.optimal_isp_probabilities(norms, 3)
    err3 = estimators.expected_squared_error("isp", g, p3)
    out.append(
        _row(
            "kvib.ex3_2.k3_isp",
            "Sec. 3 (Example 3.2)",
            "ISP with K = 3: p* = (1, 1, 1) and ||d - sum g||^2 = 0",
            0.0,
            err3,
            f"exact; p* = {np.round(p3, 12).tolist()}",
            "held" if np.allclose(p3, 1.0) and abs(err3) < 1e-12 else "not held",
            nb,
        )
    )
    return out


# ---------------------------------------------------------------------------------------------
# Cached runs: per-seed values


def _seed(result: Any) -> int:
    return int(result.config["training"]["seed"])


def _per_seed(results: Sequence[Any], metric: Callable[[dict], float]) -> dict[tuple, dict]:
    """{run label: {seed: metric of that run's curves}}."""
    out: dict[tuple, dict] = {}
    for result in results:
        out.setdefault(kr.run_label(result), {})[_seed(result)] = metric(kr.run_arrays(result))
    return out


def _paired(values: dict[tuple, dict], ours: tuple, theirs: tuple):
    """Paired differences ours - theirs over the seeds both have."""
    a, b = values.get(ours, {}), values.get(theirs, {})
    seeds = sorted(set(a) & set(b))
    return [a[s] - b[s] for s in seeds]


def _late(curve: np.ndarray) -> float:
    return float(curve[-max(1, curve.size // 10) :].mean())


def _missing_row(key, ref, claim, paper, missing, nb) -> Claim:
    return _row(
        key, ref, claim, paper, None, f"{missing} runs not cached", "inconclusive", nb, line=True
    )


# ---------------------------------------------------------------------------------------------
# Fig. 2 and the gamma-free part of Fig. 4's text (notebook 12)


def _versus_baselines(values, k: int):
    """(verdict, mean difference and interval text) of K-Vib against each of :data:`BASELINES`;
    the mean and interval are those against the best baseline by its mean (as notebook 12)."""
    verdicts, texts = [], []
    for b in BASELINES:
        v, ci = lower_verdict(_paired(values, ("kvib", k, None), (b, k, None)))
        verdicts.append(v)
        texts.append(f"{b} {v}")
    means = {
        b: np.mean(list(values.get((b, k, None), {np.nan: np.nan}).values())) for b in BASELINES
    }
    best = min(means, key=means.get)
    d = _paired(values, ("kvib", k, None), (best, k, None))
    _, ci = lower_verdict(d)
    spread = f"against {best} (best baseline): {_interval_text(ci)}; " + ", ".join(texts)
    return combine_verdicts(verdicts), (float(np.mean(d)) if d else None), spread


def figure2_claims(profile: str, results_dir: str) -> list[Claim]:
    """Fig. 2 (K-Vib's regret, variance and test loss below the baselines') and Sec. 6.2's
    remark that independent sampling alone gives better early estimates (Lemma 2.1)."""
    results, missing = runs.cached_results(kx.fig2_grid(profile), cache_dir=results_dir)
    k = kx.synthetic_settings(profile)["k"]
    metrics = {
        "regret": ("cumulative dynamic regret (eq. 8) at T", lambda r: float(r["regret"][-1])),
        "variance": (
            "variance (eq. 2), mean over the rounds",
            lambda r: float(r["variance"].mean()),
        ),
        "loss": ("final test loss", lambda r: float(r["test_loss"][-1])),
    }
    claims_text = {
        "regret": "K-Vib's regret curve lies below the baselines' (uniform, MABS, VRB)",
        "variance": "hence K-Vib's estimates have a lower variance than the baselines'",
        "loss": "hence FedAvg with K-Vib converges faster (test loss) than with the baselines",
    }
    out = []
    for name, (label, metric) in metrics.items():
        key, text = (
            f"kvib.fig2.{name}",
            f"{claims_text[name]}; ours: {label}, K = {k}, K-Vib - best",
        )
        if missing:
            out.append(_missing_row(key, "Fig. 2", text, None, missing, _NB12))
            continue
        verdict, ours, spread = _versus_baselines(_per_seed(results, metric), k)
        out.append(_row(key, "Fig. 2", text, None, ours, spread, verdict, _NB12, line=True))
    key = "kvib.fig2.loss.uniform_normalised"
    text = (
        "faster convergence than uniform sampling as the authors' code trains it: K-Vib with "
        "unbiased weights against uniform with self-normalised (biased) weights, a comparison "
        "confounded by the aggregation rule; ours: final test loss, K = "
        f"{k}, K-Vib - it"
    )
    if missing:
        out.append(_missing_row(key, "Fig. 2", text, None, missing, _NB12))
    else:
        d = _paired(
            _per_seed(results, metrics["loss"][1]), ("kvib", k, None), (NORMALISED, k, None)
        )
        out.append(_lower_row(key, "Fig. 2", text, d, _NB12))
    key = "kvib.fig4.isp_early"
    text = (
        "in the early rounds independent sampling alone gives better estimates (Lemma 2.1; "
        f"Sec. 6.2); ours: variance (eq. 2) over the first tenth of the rounds, K = {k}, "
        "uniform ISP - uniform without replacement (same p = K/N)"
    )
    if missing:
        out.append(_missing_row(key, "Sec. 6.2 (Fig. 4)", text, None, missing, _NB12))
    else:
        early = _per_seed(
            results, lambda r: float(r["variance"][: max(1, r["variance"].size // 10)].mean())
        )
        pair = (("uniform_isp", k, None), ("uniform_unbiased", k, None))
        d = _paired(early, *pair)
        row = _lower_row(key, "Sec. 6.2 (Fig. 4)", text, d, _NB12)
        why = _diverged_text(_per_seed(results, kr.diverged), pair)
        if why:  # decided by exploding trajectories: more seeds would not help
            why += (
                "; the variance then measures the explosion, not the sampling, and more seeds "
                "would not change that"
            )
            row = dataclasses.replace(row, spread=f"{why}; {row.spread}", verdict="inconclusive")
        out.append(row)
    return out


# ---------------------------------------------------------------------------------------------
# Figs 3(b), 3(c) and 6 (notebook 12)


def figure3_claims(profile: str, results_dir: str) -> list[Claim]:
    """Fig. 3(b) (K-Vib's regret falls with K, at least as fast as Theorem 5.2's K^(-4/3)),
    App. F's Fig. 6 (the baselines' regret does not fall, it rises) and Fig. 3(c) (gamma barely
    matters). Trends over a grid are decided on per-seed intervals (:func:`k_trend_verdict`,
    :func:`k_rate_verdict`, :func:`stable_verdict`): one seed per grid point gives
    "inconclusive at this budget"; a row whose runs diverged (:func:`.results.diverged`) is
    "inconclusive", whatever the number of seeds."""
    out = []
    s = kx.synthetic_settings(profile)
    ks = list(s["k_grid"])
    grid, missing = runs.cached_results(kx.k_grid(profile), cache_dir=results_dir)
    regret = _per_seed(grid, lambda r: float(r["regret"][-1]))
    div = _per_seed(grid, kr.diverged)

    def by_k(name: str) -> dict[int, dict[int, float]]:
        return {k: regret.get((name, k, None), {}) for k in ks}

    grid_text = f"K = {', '.join(map(str, ks))} (grid ours)"
    text = "K-Vib's regret falls substantially as K grows"
    if missing:
        out.append(_missing_row("kvib.fig3b.falls", "Fig. 3(b)", text, None, missing, _NB12))
        out.append(
            _missing_row(
                "kvib.fig3b.rate",
                "Fig. 3(b), Theorem 5.2",
                _RATE_TEXT,
                PAPER_K_RATE,
                missing,
                _NB12,
            )
        )
    else:
        kv = by_k("kvib")
        means = [float(np.mean(list(kv[k].values()))) for k in ks]
        why = _diverged_text(div, [("kvib", k, None) for k in ks])
        verdict, spread = k_trend_verdict(kv, "falls")
        rate_verdict, slope, rate_spread = k_rate_verdict(kv, PAPER_K_RATE)
        if why:
            verdict = rate_verdict = "inconclusive"
            spread, rate_spread = f"{why}; {spread}", f"{why}; {rate_spread}"
        out.append(
            _row(
                "kvib.fig3b.falls",
                "Fig. 3(b)",
                text + f"; ours: final regret, ratio of the smallest to the largest K, {grid_text}",
                None,
                means[0] / means[-1],
                spread,
                verdict,
                _NB12,
                line=True,
            )
        )
        out.append(
            _row(
                "kvib.fig3b.rate",
                "Fig. 3(b), Theorem 5.2",
                _RATE_TEXT + f", {grid_text}",
                PAPER_K_RATE,
                slope,
                rate_spread,
                rate_verdict,
                _NB12,
                line=True,
            )
        )
    for name in (*BASELINES, NORMALISED):
        key = f"kvib.fig6.{name}"
        text = f"{name}'s regret is not reduced by a larger K: it rises (App. F)"
        if missing:
            out.append(_missing_row(key, "Fig. 6", text, None, missing, _NB12))
            continue
        values = by_k(name)
        means = [float(np.mean(list(values[k].values()))) for k in ks]
        verdict, spread = k_trend_verdict(values, "rises")
        why = _diverged_text(div, [(name, k, None) for k in ks])
        if why:  # the regret of an exploding trajectory: more seeds would not help
            verdict = "inconclusive"
            spread = (
                f"{why}; its regret measures the explosion, not the sampler, and more seeds "
                f"would not change that; {spread}"
            )
        out.append(
            _row(
                key,
                "Fig. 6",
                text + f"; ours: final regret, ratio of the largest to the smallest K, {grid_text}",
                None,
                means[-1] / means[0],
                spread,
                verdict,
                _NB12,
                line=True,
            )
        )
    gam, gmissing = runs.cached_results(kx.gamma_grid(profile), cache_dir=results_dir)
    gdiv = _per_seed(gam, kr.diverged)
    for name, label, metric in (
        ("regret", "final regret", lambda r: float(r["regret"][-1])),
        (
            "variance",
            "variance (eq. 2), mean over the rounds",
            lambda r: float(r["variance"].mean()),
        ),
    ):
        key = f"kvib.fig3c.{name}"
        text = (
            "K-Vib's "
            + ("regret changes only slightly" if name == "regret" else "variance stays stable")
            + f" with gamma (theta = {kx.SENSITIVITY_THETA}); ours: {label}, max / min over the "
            f"gamma scales (below {GAMMA_STABLE_RATIO})"
        )
        if gmissing:
            out.append(_missing_row(key, "Fig. 3(c)", text, None, gmissing, _NB12))
            continue
        per = {lab[2]: v for lab, v in _per_seed(gam, metric).items()}
        verdict, ratio, spread = stable_verdict(per, GAMMA_STABLE_RATIO)
        if any(any(v.values()) for v in gdiv.values()):
            verdict = "inconclusive"
            spread = f"FedAvg diverged in a run of the gamma grid; {spread}"
        out.append(_row(key, "Fig. 3(c)", text, None, ratio, spread, verdict, _NB12, line=True))
    return out


# ---------------------------------------------------------------------------------------------
# Fig. 4: FEMNIST (not here) and the MNIST substitute (notebook 13)

_RATE_TEXT = (
    "K-Vib's regret falls at least as fast as K^(-4/3), the rate of Theorem 5.2's upper bound "
    "(not a prediction of the slope); ours: least-squares slope of log final regret on log K"
)
_FEMNIST = "FEMNIST (Chen et al. 2020's unbalanced versions) cannot be fetched here"


def figure4_claims(profile: str, results_dir: str) -> list[Claim]:
    """Fig. 4's FEMNIST numbers and claims, and their test on the MNIST substitute."""
    out = []
    for version, factor in kx.PAPER_FEMNIST_SPEEDUP.items():
        out.append(
            _row(
                f"kvib.fig4.speedup.{version}",
                "Fig. 4(b)",
                f"K-Vib reaches {kx.PAPER_FEMNIST_TARGET:.0%} test accuracy {factor:g}x faster "
                "than "
                f"the baselines, FEMNIST {version}",
                factor,
                None,
                _FEMNIST,
                "not computable here",
                _NB13,
            )
        )
    for key, text in (
        ("vrb_mabs", "VRB and MABS do not outperform uniform sampling on FEMNIST"),
        ("avare", "Avare speeds up after about 150 rounds on FEMNIST v1 and v2, not on v3"),
        ("v3", "on FEMNIST v3 K-Vib's improvement is marginal"),
        ("gap_narrows", "K-Vib's lead narrows as the data-size variance falls (v1 to v3)"),
    ):
        out.append(
            _row(
                f"kvib.fig4.{key}",
                "Fig. 4(b)",
                text,
                None,
                None,
                _FEMNIST,
                "not computable here",
                _NB13,
            )
        )
    m = kx.mnist_settings(profile)
    results, missing = runs.cached_results(kx.mnist_grid(profile), cache_dir=results_dir)
    target, k = m["target"], kx.MNIST_K
    rounds = _per_seed(
        results,
        lambda r: (
            float(v)
            if (v := rounds_to_target(r["test_accuracy"], target, r["eval_round"])) is not None
            else float("nan")
        ),
    )
    late = _per_seed(results, lambda r: _late(r["test_accuracy"]))
    claimed = kx.PAPER_FEMNIST_SPEEDUP["v2"]  # the smaller of the paper's two factors
    sub = f"(substitute: MNIST, {m['model']['name']}, K = {k} of {kx.MNIST_CLIENTS})"
    for base in (*BASELINES, NORMALISED):
        key = f"kvib.fig4.substitute.speedup.{base}"
        text = (
            f"{sub} K-Vib reaches {target:.0%} {claimed:g}x faster than {base}; ours: rounds, "
            "K-Vib - it"
        )
        if missing:
            out.append(_missing_row(key, "Fig. 4(b)", text, None, missing, _NB13))
            continue
        d = _paired(rounds, ("kvib", k, None), (base, k, None))
        if len(d) < 2 or not np.isfinite(d).all():
            why = (
                f"{base} is not in this profile's samplers"
                if (base, k, None) not in rounds
                else "fewer than 2 paired seeds"
                if len(d) < 2
                else "a seed never reached the target"
            )
            out.append(
                _row(key, "Fig. 4(b)", text, None, None, why, "inconclusive", _NB13, line=True)
            )
            continue
        slow = float(np.nanmean(list(rounds[(base, k, None)].values())))
        ci = paired.paired_interval(d)
        v = paired.verdict(ci, 1 - 1 / claimed, relative_to=slow)
        mde = paired.minimum_detectable_effect(ci.sd, ci.n)
        out.append(
            _row(
                key,
                "Fig. 4(b)",
                text,
                None,
                ci.mean,
                f"{_interval_text(ci)}; claimed {-(1 - 1 / claimed) * slow:.3g} rounds; "
                f"MDE {mde:.3g}",
                v.label,
                _NB13,
                line=True,
            )
        )
    for base in ("vrb", "mabs"):
        key = f"kvib.fig4.substitute.no_better.{base}"
        text = (
            f"{sub} {base} does not outperform unbiased uniform sampling; ours: test accuracy over "
            "the last tenth of the rounds, uniform - it"
        )
        if missing:
            out.append(_missing_row(key, "Fig. 4(b)", text, None, missing, _NB13))
            continue
        # "no better" is refuted when the baseline is better: uniform - it < 0 means it is
        d = _paired(late, ("uniform_unbiased", k, None), (base, k, None))
        out.append(_lower_row(key, "Fig. 4(b)", text, d, _NB13, refutes=True))
    key = "kvib.fig4.substitute.converged"
    text = (
        f"{sub} K-Vib keeps its lead once converged; ours: test accuracy over the last tenth of "
        "the rounds, the best other sampler - K-Vib"
    )
    if missing:
        out.append(_missing_row(key, "Fig. 4(b)", text, None, missing, _NB13))
    else:
        others = [lab for lab in late if lab[0] != "kvib"]
        best = max(others, key=lambda lab: np.mean(list(late[lab].values())))
        d = _paired(late, best, ("kvib", k, None))
        out.append(_lower_row(key, "Fig. 4(b)", text, d, _NB13, against=best[0]))
    return out


# ---------------------------------------------------------------------------------------------


def _builders(profile: str, results_dir: str) -> dict[str, Callable[[], list[Claim]]]:
    """Each notebook's rows, by notebook (nothing is built until called)."""
    return {
        _NB11: lambda: figure1_claims(profile),
        _NB12: lambda: figure2_claims(profile, results_dir) + figure3_claims(profile, results_dir),
        _NB13: lambda: figure4_claims(profile, results_dir),
    }


def claims(
    profile: str = "cpu", *, results_dir: str = "results", data_root: str = "data"
) -> list[Claim]:
    """Every K-Vib row of the ledger (``data_root`` is unused: nothing is loaded or trained)."""
    del data_root
    return [c for build in _builders(profile, results_dir).values() for c in build()]


def verdict_lines(
    notebook: str, profile: str = "cpu", *, results_dir: str = "results", data_root: str = "data"
) -> list[str]:
    """The lines ``notebook`` prints for its rows whose verdict is a comparison: "key: claim
    (ours, spread) -> verdict", which the rows' ``printed_as`` find. Only that notebook's rows
    are built (from ``profile``'s cached runs in ``results_dir``)."""
    del data_root
    return [
        f"{c.key}: {c.claim} (ours {c.ours if c.ours is None else f'{c.ours:.4g}'}; {c.spread}) "
        f"-> {c.verdict}"
        for c in _builders(profile, results_dir)[notebook]()
        if c.printed_as
    ]


#: statements of the paper that state a result but have no row, and why (issue 27)
UNTESTED: tuple[Untested, ...] = ()
