"""Tables of training results: accuracy curves, rounds to a target accuracy, speed-ups, skew;
and the theory they are read against: each policy's Var[X] and Sigma (:func:`policy_theory`,
:func:`sigma_closed_forms`) and Theorem 1 on a grid (:func:`theorem1_table`,
:func:`optimiser_table`).

Every training function takes :class:`aoi_fl.pipeline.runs.ExperimentResult` objects (or their
histories) and returns plain NumPy arrays or pandas tables; notebooks only print and plot them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from aoi_fl.aoi import markov, memoryless, samplers, sigma
from aoi_fl.evidence.aoi.experiments import PAPER_MODELS, group_runs, split_of
from aoi_fl.pipeline.claims import Condition, diverged, scoped_verdict
from aoi_fl.pipeline.paired import (
    PairedInterval,
    Verdict,
    minimum_detectable_effect,
    paired_interval,
    sample_sd,
    verdict,
)


def accuracy_curves(runs: Sequence[Any], *, common: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(evaluation rounds, accuracy array of shape (seeds, evaluations)) of a group of runs.

    Runs of a group must be evaluated at the same rounds, unless ``common``: then only the
    rounds every run evaluated are kept (screened runs add rounds of their own near the target,
    see :class:`aoi_fl.core.train.TrainSettings`, around a common schedule).
    """
    histories = [r.history for r in runs]
    rounds = np.asarray(histories[0]["eval_round"])
    if common:
        for h in histories[1:]:
            rounds = np.intersect1d(rounds, h["eval_round"])
    elif any(not np.array_equal(h["eval_round"], rounds) for h in histories[1:]):
        raise ValueError("runs of one group must be evaluated at the same rounds")
    acc = [dict(zip(h["eval_round"], h["test_accuracy"], strict=True)) for h in histories]
    return rounds, np.array([[a[t] for t in rounds] for a in acc], dtype=float)


def screening_check(results: Iterable[Any], margin: float) -> pd.DataFrame:
    """Per (split, policy): full-test minus screen accuracy over the rounds where both were
    measured (:func:`aoi_fl.core.train.screen_gaps`), over every seed, against ``margin``.

    A first crossing of the target can be missed only in a round where this gap exceeds the
    margin, and only near the target; so besides the largest gap overall (early rounds, far from
    the target, have the subset's largest errors) the table gives the largest gap over the rounds
    whose full-test accuracy is within two margins of the target, where a miss could happen.
    """
    from aoi_fl.core.train import screen_pairs

    rows = []
    for (split, policy), runs in sorted(group_runs(results).items()):
        gaps, near = [], []
        for r in runs:
            full, screen = screen_pairs(r.history)
            target = r.config["training"]["screen_target"]
            gaps.append(full - screen)
            near.append(gaps[-1][full >= target - 2 * margin])
        gaps, near = np.concatenate(gaps), np.concatenate(near)
        rows.append(
            {
                "split": split,
                "policy": policy,
                "rounds compared": gaps.size,
                "max gap": gaps.max(),
                "rounds near target": near.size,
                "max gap near target": near.max() if near.size else np.nan,
                "margin": margin,
            }
        )
    return pd.DataFrame(rows).set_index(["split", "policy"])


def rounds_to_target_table(
    results: Iterable[Any],
    target: float,
    paper: Mapping[tuple[str, str], Mapping[str, int]] | None = None,
    dataset: str | None = None,
) -> pd.DataFrame:
    """Rounds until the global model first reaches ``target`` test accuracy, per split and policy.

    Columns: one per seed (NaN when the target is never reached within the run), the mean and
    sample standard deviation (:func:`sample_sd`) over the seeds that reached it, how many did,
    and the paper's number (``paper[(dataset, split)][policy]``) where it reports one.
    """
    rows = []
    for (split, policy), runs in sorted(group_runs(results).items()):
        per_seed = [r.rounds_to_target(target) for r in runs]
        reached = np.array([v for v in per_seed if v is not None], dtype=float)
        row: dict[str, Any] = {"split": split, "policy": policy}
        for r, v in zip(runs, per_seed, strict=True):
            row[f"seed {r.config['training']['seed']}"] = v
        row["mean"] = reached.mean() if reached.size else np.nan
        row["sd"] = sample_sd(reached)
        row["reached"] = f"{reached.size}/{len(per_seed)}"
        if paper is not None and dataset is not None:
            row["paper"] = paper.get((dataset, split), {}).get(policy, np.nan)
        rows.append(row)
    return pd.DataFrame(rows).set_index(["split", "policy"])


def model_condition(results: Iterable[Any], dataset: str) -> Condition:
    """The paper's model for ``dataset`` (:data:`experiments.PAPER_MODELS`, "a CNN as in McMahan
    et al.") against the models our ``results`` train: a condition of every training claim
    (:class:`aoi_fl.pipeline.claims.Condition`)."""
    ours = sorted({r.config["model"]["name"] for r in results}) or [PAPER_MODELS[dataset]]
    return Condition("model", PAPER_MODELS[dataset], ", ".join(ours))


def substitute_model(results: Iterable[Any], dataset: str) -> bool:
    """Whether some run trains another model than the paper's for ``dataset``
    (:func:`model_condition` not met): its verdicts on the paper's claims can be neither "held"
    nor "not held" (:func:`paired_table`)."""
    return not model_condition(results, dataset).met


def diverged_runs(results: Iterable[Any]) -> set[tuple[str, str, int]]:
    """(split, policy, seed) of the runs whose test loss diverged (the ledger's one rule,
    :func:`aoi_fl.pipeline.claims.diverged`: not finite, or above 5x the initial model's at some
    evaluation): a comparison such a run enters cannot be held."""
    return {
        (split_of(r.config), r.config["sampler"]["name"], r.config["training"]["seed"])
        for r in results
        if diverged(r.history["test_loss"])
    }


def speedup_table(
    table: pd.DataFrame, fast: str = "markov_optimal", slow: str = "random"
) -> pd.DataFrame:
    """Relative speed-up (R_slow - R_fast) / R_slow of mean rounds to target, ours and paper's.

    Ours is NaN unless every seed of both policies reached the target: a mean over only the
    seeds that got there would favour the policy that missed it more often.
    """
    rows = []
    for split in table.index.get_level_values("split").unique():
        row: dict[str, Any] = {"split": split}
        for column in ("mean", "paper"):
            if column not in table:
                continue
            r_fast, r_slow = table.loc[(split, fast), column], table.loc[(split, slow), column]
            if column == "mean" and not all(
                _all_reached(table.loc[(split, p), "reached"]) for p in (fast, slow)
            ):
                r_fast = np.nan
            row[f"speed-up ({'ours' if column == 'mean' else 'paper'})"] = (
                r_slow - r_fast
            ) / r_slow
        rows.append(row)
    return pd.DataFrame(rows).set_index("split")


def _all_reached(reached: str) -> bool:
    hits, seeds = reached.split("/")
    return hits == seeds


def complete_pairs(results: Iterable[Any], policies: Sequence[str]) -> list[Any]:
    """The runs of ``results`` whose (split, seed) has a run of every one of ``policies``: the
    paired seeds among runs cached piecemeal (e.g. computed on a GPU in several sessions)."""
    results = list(results)
    have: dict[tuple[str, int], set[str]] = {}
    for r in results:
        key = (split_of(r.config), r.config["training"]["seed"])
        have.setdefault(key, set()).add(r.config["sampler"]["name"])
    complete = {k for k, names in have.items() if set(policies) <= names}
    return [
        r
        for r in results
        if (split_of(r.config), r.config["training"]["seed"]) in complete
        and r.config["sampler"]["name"] in policies
    ]


def final_accuracy_table(results: Iterable[Any], last: int = 5) -> pd.DataFrame:
    """Mean test accuracy over the last ``last`` evaluations that every seed of a group made (a
    screened run adds evaluations near the target at rounds of its own), mean and sd over seeds."""
    rows = []
    for (split, policy), runs in sorted(group_runs(results).items()):
        _, acc = accuracy_curves(runs, common=True)
        tail = acc[:, -last:].mean(axis=1)
        rows.append(
            {
                "split": split,
                "policy": policy,
                "final accuracy": tail.mean(),
                "sd over seeds": sample_sd(tail),
            }
        )
    return pd.DataFrame(rows).set_index(["split", "policy"])


# Paired comparison over seeds. Within one seed every policy sees the same partition, model
# initialisation and mini-batches, so the seed-to-seed spread they share cancels in the per-seed
# difference R_fast - R_slow; intervals and power are computed on those differences.


def paired_differences(
    results: Iterable[Any], target: float, fast: str = "markov_optimal", slow: str = "random"
) -> pd.DataFrame:
    """Rounds to ``target`` of ``fast`` and ``slow`` per (split, seed), and their difference.

    Columns: ``fast``, ``slow`` (rounds to target) and ``difference`` = R_fast - R_slow, so a
    negative difference means ``fast`` got there sooner. Only seeds run with both policies are
    kept: an unpaired run has nothing to be compared with. A run that never reached the target
    has NaN rounds, and so does its difference; :func:`paired_interval` refuses such differences
    rather than guess how long the run would have needed.
    """
    groups = group_runs(results)
    rows = []
    for split in sorted({s for s, _ in groups}):
        by_policy = {p: _by_seed(groups.get((split, p), []), split, p) for p in (fast, slow)}
        for seed in sorted(by_policy[fast].keys() & by_policy[slow].keys()):
            r_fast, r_slow = (_rounds(by_policy[p][seed], target) for p in (fast, slow))
            rows.append(
                {
                    "split": split,
                    "seed": seed,
                    fast: r_fast,
                    slow: r_slow,
                    "difference": r_fast - r_slow,
                }
            )
    columns = ["split", "seed", fast, slow, "difference"]
    return pd.DataFrame(rows, columns=columns).set_index(["split", "seed"])


def _by_seed(runs: Sequence[Any], split: str, policy: str) -> dict[int, Any]:
    # Two runs with one seed (e.g. two datasets or profiles mixed) would make the pairing
    # ambiguous, so they are refused instead of one being picked silently.
    out: dict[int, Any] = {}
    for r in runs:
        seed = r.config["training"]["seed"]
        if seed in out:
            raise ValueError(
                f"results: two {split}/{policy} runs with seed {seed}; "
                "pass the runs of one dataset and profile at a time"
            )
        out[seed] = r
    return out


def _rounds(run: Any, target: float) -> float:
    rounds = run.rounds_to_target(target)
    return float("nan") if rounds is None else float(rounds)


def paired_table(
    results: Iterable[Any],
    target: float,
    paper: Mapping[tuple[str, str], Mapping[str, int]] | None = None,
    dataset: str | None = None,
    fast: str = "markov_optimal",
    slow: str = "random",
    level: float = 0.95,
    substitute: bool = False,
) -> pd.DataFrame:
    """Paired comparison of ``fast`` with ``slow`` per split, against the paper's numbers.

    Columns: paired seeds ``n`` and how many pairs reached the target in both runs, mean and sd of
    R_fast - R_slow, its t and bootstrap intervals (:func:`paired_interval`), the relative
    speed-up (mean R_slow - mean R_fast) / mean R_slow, the paper's rounds for both policies and
    their difference (``paper[(dataset, split)]``, NaN where it gives none), that difference as
    the paper's relative speed-up at our scale (``claimed difference``, what the verdict tests
    against: -(paper R_slow - paper R_fast) / paper R_slow x our mean R_slow), the minimum
    detectable effect at 80% power (:func:`minimum_detectable_effect`) and the verdict on the t
    interval (:func:`verdict`). The paper's claim is tested as a relative speed-up scaled to our
    mean R_slow, since rounds to target at another model or profile are not the paper's rounds.

    Statistics and the verdict are missing (NaN) for a split where fewer than two pairs exist or a
    run missed the target, as in :func:`speedup_table`: pairs that reached it would be a
    selection favouring the policy that missed more often. The verdict is also missing where the
    paper gives no speed-up of ``fast`` over ``slow`` to test.

    ``substitute``: the runs are not under the paper's conditions (another model,
    :func:`substitute_model`): they can make its claim neither "held" nor "not held"; a decided
    verdict becomes "inconclusive at this budget" (:func:`substitute_verdict`: the paper's
    setting would decide) and the criterion's own verdict is kept in a ``criterion verdict``
    column, before ``verdict``.
    """
    diffs = paired_differences(results, target, fast, slow)
    rows = []
    for split in diffs.index.get_level_values("split").unique():
        d = diffs.loc[split]
        reported = paper.get((dataset, split), {}) if paper is not None else {}
        paper_fast, paper_slow = (float(reported.get(p, np.nan)) for p in (fast, slow))
        row: dict[str, Any] = {
            "split": split,
            "n": len(d),
            "reached": f"{int(d['difference'].notna().sum())}/{len(d)}",
            f"paper {fast}": paper_fast,
            f"paper {slow}": paper_slow,
            "paper difference": paper_fast - paper_slow,
        }
        row.update(_paired_statistics(d, fast, slow, level, paper_fast, paper_slow))
        if substitute:
            label = row.pop("verdict")
            row["criterion verdict"] = label
            row["verdict"] = substitute_verdict(label)
        rows.append(row)
    return pd.DataFrame(rows).set_index("split") if rows else pd.DataFrame()


def substitute_verdict(label: str | None) -> str | None:
    """The verdict on the paper's claim from runs outside its regime (a substitute model or
    dataset): the shared rule of :func:`aoi_fl.pipeline.claims.scoped_verdict`, a judged verdict
    becomes "inconclusive at this budget" and an undecided one (or None) stays."""
    return scoped_verdict(label, ["the paper's model and dataset"])[0]


def _paired_statistics(
    d: pd.DataFrame, fast: str, slow: str, level: float, paper_fast: float, paper_slow: float
) -> dict[str, Any]:
    pct = f"{level:.0%}"
    columns = ["claimed difference", "mean difference", "sd", f"t {pct} low", f"t {pct} high"]
    columns += [f"bootstrap {pct} low", f"bootstrap {pct} high", "speed-up", "MDE (80% power)"]
    if len(d) < 2 or d["difference"].isna().any():
        return dict.fromkeys(columns, np.nan) | {"verdict": None}
    t = paired_interval(d["difference"], level, "t")
    boot = paired_interval(d["difference"], level, "bootstrap")
    mean_slow = float(d[slow].mean())
    speedup = (mean_slow - float(d[fast].mean())) / mean_slow
    mde = minimum_detectable_effect(t.sd, t.n, level)
    paper_speedup = (paper_slow - paper_fast) / paper_slow
    # the paper's relative speed-up at our scale: the difference the verdict tests against
    claimed = -paper_speedup * mean_slow if paper_speedup > 0 else np.nan
    values = [claimed, t.mean, t.sd, t.low, t.high, boot.low, boot.high, speedup, mde]
    # NaN (no paper number) compares False, so no claim gives no verdict
    label = verdict(t, paper_speedup, mean_slow).label if paper_speedup > 0 else None
    return dict(zip(columns, values, strict=True)) | {"verdict": label}


__all__ = [
    "PairedInterval",
    "Verdict",
    "accuracy_curves",
    "diverged_runs",
    "final_accuracy_table",
    "group_runs",
    "minimum_detectable_effect",
    "paired_differences",
    "paired_interval",
    "paired_table",
    "rounds_to_target_table",
    "sample_sd",
    "speedup_table",
    "model_condition",
    "substitute_model",
    "substitute_verdict",
    "verdict",
]


# ---------------------------------------------------------------------------------------------
# Participation of a realised trace against the theory of its policy


def policy_theory(sampler: Any) -> dict[str, float]:
    """Var[X] (the pooled inter-selection interval, Sec. III) and Sigma (eq. 14; Theorems 3-5)
    of one of the four AoI policies, and the largest possible interval (``inf`` where none).

    ``sampler`` is the policy's sampler (:func:`aoi_fl.aoi.samplers.make_sampler`): its sizes and
    m (Policies 1-2) or its chain p (Policies 3-4) give the theory.
    """
    if sampler.name in ("markov_optimal", "markov_nonoptimal"):
        p = sampler.p
        age = markov.last_reachable_age(p)  # an interval ends at the latest when p_age = 1
        return {
            "Var[X]": markov.interval_variance(p),
            "Sigma": sigma.sigma_markov(sampler.n, markov.selection_rate(p)),
            "X max": float(age + 1) if p[age] >= 1.0 else float("inf"),
        }
    if sampler.name == "random":
        rates = memoryless.random_rates(sampler.n, sampler.m)
        sigma_value = sigma.sigma_random(sampler.sizes, sampler.m)
    elif sampler.name == "probabilistic":
        rates = memoryless.probabilistic_rates(sampler.sizes, sampler.m)
        sigma_value = sigma.sigma_probabilistic(sampler.sizes, sampler.m)
    else:
        raise ValueError(f"sampler {sampler.name!r} is not one of the AoI paper's policies")
    # pooled geometric intervals (memoryless.pooled_interval_pmf), moments in closed form:
    # E[X | i] = 1/r, E[X^2 | i] = (2 - r)/r^2, client i's intervals in proportion to r_i
    share = rates / rates.sum()
    mean = float(share @ (1.0 / rates))
    second = float(share @ ((2.0 - rates) / rates**2))
    return {"Var[X]": second - mean**2, "Sigma": sigma_value, "X max": float("inf")}


def sigma_closed_forms(sizes: np.ndarray, m: int, m_prime: int) -> dict[str, float]:
    """Sigma = sum_i Var[w_i] (eq. 14) per policy (:func:`policy_theory` of its sampler, n =
    ``len(sizes)``): Theorem 3 (Policy 1, exact), Theorem 4 (Policy 2) and Theorem 5 (Policies
    3-4: through their chain's pi_0 only, |S| = 0 forced)."""
    return {
        policy: policy_theory(
            samplers.make_sampler(policy, n=len(sizes), m=m, sizes=sizes, m_prime=m_prime)
        )["Sigma"]
        for policy in samplers.POLICIES
    }


def participation_table(sampler: Any, selected: Sequence[Sequence[int]], weights) -> pd.DataFrame:
    """A trace's Var[X], Sigma and tau_max / tau_avg beside the theory of ``sampler``'s policy.

    ``selected`` / ``weights`` are a run's per-round records (``history["selected"]``,
    ``history["weights"]``, the same from the in-process trainer and from a Flower run). Var[X]
    pools every completed interval of every client, Sigma is eq. 14's sum over clients of the
    variance of w_i(t) over the rounds, tau is the FedSUM paper's delay (``fedsum.delays``). A
    short trace estimates them with a large error: the table gives the number of intervals.
    """
    from aoi_fl.core.delays import trace_metrics
    from aoi_fl.core.stats import empirical_sigma_from_matrix, intervals_from_matrix

    matrix = np.zeros((len(selected), sampler.n))
    for t, (ids, w) in enumerate(zip(selected, weights, strict=True)):
        matrix[t, np.asarray(ids, dtype=np.int64)] = w
    intervals = intervals_from_matrix(matrix)
    delays = trace_metrics(selected, sampler.n)
    theory = policy_theory(sampler)
    rows = {
        "Var[X]": (float(intervals.var()) if intervals.size > 1 else np.nan, theory["Var[X]"]),
        "Sigma": (empirical_sigma_from_matrix(matrix), theory["Sigma"]),
        "largest interval": (float(intervals.max()) if intervals.size else np.nan, theory["X max"]),
        "tau_max": (float(delays.tau_max), np.nan),
        "tau_avg": (float(delays.tau_avg), np.nan),
    }
    table = pd.DataFrame(rows, index=["trace", "theory"]).T
    table["intervals"] = intervals.size
    return table


# ---------------------------------------------------------------------------------------------
# Theorem 1 on a grid of (n, m, m')


def theorem1_table(grid: Iterable[tuple[int, int, int]]) -> pd.DataFrame:
    """Theorem 1 per (n, m, m') of ``grid``: its case (1 when m' <= floor(n/m) - 1), its
    closed-form minimum Var[X], Var[X] of the chain with its p (exact), whether that p meets
    pi_0 = m/n (eq. 3, within :data:`markov.FEASIBLE_RTOL`), and random selection's Var[X]."""
    rows = []
    for n, m, m_prime in grid:
        p = markov.optimal_p(n, m, m_prime)
        rows.append(
            {
                "n": n,
                "m": m,
                "m'": m_prime,
                "r = n/m": n / m,
                "case": 1 if m_prime <= n // m - 1 else 2,
                "closed form": markov.optimal_variance(n, m, m_prime),
                "chain Var[X]": markov.interval_variance(p),
                "pi_0 = m/n": _meets_rate(markov.selection_rate(p), n, m),
                "random Var[X]": markov.random_interval_variance(n, m),
            }
        )
    return pd.DataFrame(rows)


def optimiser_table(starts: int, grid: Iterable[tuple[int, int, int]]) -> pd.DataFrame:
    """The numerical minimum of Var[X] subject to E[X] = n/m
    (:func:`markov.minimise_variance_numerically`, ``starts`` random starts, seed 0) against
    Theorem 1's closed form per (n, m, m') of ``grid``: equal to it or below it by more than
    :data:`markov.CONVERGED_RTOL` (relative, on the scale max(variance, 1)), on the constraint
    pi_0 = m/n, and whether most (more than half of the) starts reach the best one."""
    rows = []
    for n, m, m_prime in grid:
        res = markov.minimise_variance_numerically(n, m, m_prime, starts=starts, seed=0)
        closed = markov.optimal_variance(n, m, m_prime)
        margin = markov.CONVERGED_RTOL * max(closed, 1.0)
        rows.append(
            {
                "n": n,
                "m": m,
                "m'": m_prime,
                "closed form": closed,
                "optimiser": res.variance,
                "optimiser = closed form": abs(res.variance - closed) <= margin,
                "optimiser below it": res.variance < closed - margin,
                "pi_0 = m/n": _meets_rate(res.rate, n, m),
                "most starts reach it": 2 * res.converged > res.starts,
            }
        )
    return pd.DataFrame(rows)


def _meets_rate(rate: float, n: int, m: int) -> bool:
    """Constraint (3), pi_0 = m/n, within :data:`markov.FEASIBLE_RTOL` (relative)."""
    return abs(rate - m / n) <= markov.FEASIBLE_RTOL * m / n
