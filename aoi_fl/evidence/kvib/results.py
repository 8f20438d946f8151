"""Tables of the K-Vib experiments: Fig. 1's estimation errors (Examples 3.1 and 3.2); for
the training runs (Figs 2-4, 6-7) per-run curves, curves grouped by
setting, the summary table of regret, variance and accuracy, and the runs in which FedAvg
diverged."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from aoi_fl.core.seeding import generator
from aoi_fl.core.train import rounds_to_target
from aoi_fl.data import partition, synthetic
from aoi_fl.evidence.kvib.experiments import (
    DATA_SEED,
    EXAMPLE_3_2_G,
    FIG2_SAMPLERS,
    GRID_SAMPLERS,
    SYNTHETIC_TARGET,
)
from aoi_fl.kvib import estimators
from aoi_fl.kvib.estimators import dynamic_regret
from aoi_fl.pipeline import claims as shared_claims
from aoi_fl.pipeline import runs as pipeline_runs
from aoi_fl.pipeline.paired import sample_sd

#: the ledger's one divergence rule (:func:`aoi_fl.pipeline.claims.diverged`), re-exported for
#: the synthetic notebook (and its summary,
#: :func:`aoi_fl.evidence.kvib.figures.print_synthetic_numbers`)
DIVERGENCE_FACTOR = shared_claims.DIVERGENCE_FACTOR


#: Fig. 1(a)'s procedures (Example 3.1), by label: the sampling procedure of
#: :mod:`~aoi_fl.kvib.estimators` and the key of its closed form in
#: :func:`aoi_fl.evidence.kvib.claims.example_3_1_mse`
EXAMPLE_3_1_PROCEDURES = {
    "uniform (RSP, p = K/N)": ("without_replacement", "uniform"),
    "RSP, eq. 5": ("with_replacement", "rsp"),
    "ISP, eq. 4": ("isp", "isp"),
}
ISP_LABEL = "ISP, eq. 4"


def example_3_1_probabilities(procedure: str, a: np.ndarray, k: int) -> np.ndarray:
    """Fig. 1(a)'s probabilities at budget ``k`` from the norms ``a``: K/N for uniform sampling
    without replacement, p = K q of eq. 5 with replacement, eq. 4 for ISP."""
    if procedure == "without_replacement":
        return np.full(len(a), k / len(a))
    if procedure == "with_replacement":
        return estimators.optimal_rsp_probabilities(a, k)
    return estimators.optimal_isp_probabilities(a, k)


def example_3_1_table(g: np.ndarray, ks: Sequence[int], repetitions: int):
    """Fig. 1(a) (Example 3.1): (table, errors) of every procedure of
    :data:`EXAMPLE_3_1_PROCEDURES` at every budget in ``ks``.

    ``errors[(K, label)]`` holds the errors d - sum g of ``repetitions`` draws (rows, from the
    stream ``kvib_fig1a_draws``). The table gives per K and procedure the mean squared error
    over the repetitions with its standard error, the closed form (eq. 3 for ISP), the vectors
    eq. 4 caps at p = 1, z = (repetitions - closed form) / standard error and the ratio of the
    closed form to ISP's.
    """
    import pandas as pd

    a = np.linalg.norm(g, axis=1)
    errors, rows = {}, []
    for k in ks:
        for label, (procedure, _) in EXAMPLE_3_1_PROCEDURES.items():
            p = example_3_1_probabilities(procedure, a, k)
            err = estimators.estimation_errors(
                procedure, g, p, repetitions, generator(0, "kvib_fig1a_draws", k, len(rows))
            )
            errors[(k, label)] = err
            sq = (err**2).sum(axis=1)
            rows.append(
                {
                    "K": k,
                    "procedure": label,
                    "MSE (repetitions)": sq.mean(),
                    "standard error": sq.std() / math.sqrt(sq.size),
                    "MSE (closed form)": estimators.expected_squared_error(procedure, g, p),
                    "clients at p = 1": int((p >= 1).sum()) if procedure == "isp" else np.nan,
                }
            )
    mse = pd.DataFrame(rows)
    mse["z"] = (mse["MSE (repetitions)"] - mse["MSE (closed form)"]) / mse["standard error"]
    isp = mse[mse["procedure"] == ISP_LABEL].set_index("K")["MSE (closed form)"]
    mse["closed form / ISP"] = mse["MSE (closed form)"] / mse["K"].map(isp)
    return mse, errors


@dataclass(frozen=True)
class Example32:
    """Example 3.2 (Fig. 1(b)), N = 3 and K = 2, enumerated exactly: the norms, sum g, the
    probabilities and the table of every possible estimate (:func:`outcome_table`) of RSP
    (p = K q, eq. 5) and ISP (eq. 4), and the estimate of RSP with K = 3 drawing each vector
    once."""

    g: np.ndarray
    norms: np.ndarray
    total: np.ndarray
    procedures: dict[str, str]
    probabilities: dict[str, np.ndarray]
    outcomes: dict[str, Any]
    k3_rsp: np.ndarray

    def moments(self, name: str) -> tuple[np.ndarray, float]:
        """(E[d], E||d - sum g||^2) of procedure ``name`` from its enumeration."""
        t = self.outcomes[name]
        mean = (t["probability"].to_numpy()[:, None] * t[["d_x", "d_y"]].to_numpy()).sum(axis=0)
        return mean, float((t["probability"] * t["||d - sum g||^2"]).sum())

    def closed_form(self, name: str) -> float:
        """E||d - sum g||^2 of procedure ``name`` in closed form (eq. 2; eq. 3 for ISP)."""
        return estimators.expected_squared_error(
            self.procedures[name], self.g, self.probabilities[name]
        )

    def isp_sizes(self):
        """P(|S| = s) of ISP, by sample size s."""
        t = self.outcomes["ISP"]
        size = t["draw"].str.replace("-", "").str.len()  # "-": none drawn
        return t.assign(size=size).groupby("size")["probability"].sum()


def outcome_table(procedure: str, p: np.ndarray, g: np.ndarray):
    """Every draw of ``procedure`` with probabilities ``p`` that can happen: the clients drawn
    ("12": clients 1 and 2; "-": none), its probability, the estimate d (Alg. 1 line 12) and its
    squared error."""
    import pandas as pd

    total = g.sum(axis=0)
    rows = []
    for m, prob in estimators.enumerate_outcomes(procedure, p):
        if prob == 0:
            continue
        d = estimators.estimate(m, p, g)
        rows.append(
            {
                "draw": "".join(str(i + 1) * int(c) for i, c in enumerate(m)) or "-",
                "probability": prob,
                "d_x": d[0],
                "d_y": d[1],
                "||d - sum g||^2": float(np.sum((d - total) ** 2)),
            }
        )
    return pd.DataFrame(rows)


def example_3_2(g: np.ndarray = EXAMPLE_3_2_G) -> Example32:
    """Example 3.2 enumerated (:class:`Example32`)."""
    norms = np.linalg.norm(g, axis=1)
    procedures = {"RSP": "with_replacement", "ISP": "isp"}
    probabilities = {
        "RSP": estimators.optimal_rsp_probabilities(norms, 2),
        "ISP": estimators.optimal_isp_probabilities(norms, 2),
    }
    return Example32(
        g,
        norms,
        g.sum(axis=0),
        procedures,
        probabilities,
        {name: outcome_table(procedures[name], probabilities[name], g) for name in procedures},
        estimators.estimate(
            np.ones(3, dtype=int), estimators.optimal_rsp_probabilities(norms, 3), g
        ),
    )


def diverged(arrays: dict[str, np.ndarray], factor: float = DIVERGENCE_FACTOR) -> bool:
    """Whether FedAvg diverged in a run (its :func:`run_arrays`): the ledger's rule
    (:func:`aoi_fl.pipeline.claims.diverged`) on its test loss. A sampler's regret or variance on
    such a run measures the exploding trajectory more than the sampler."""
    return shared_claims.diverged(arrays["test_loss"], factor)


def run_label(result: Any) -> tuple[str, int, float | None]:
    """(sampler name, K, gamma scale or None): what distinguishes the curves of a figure."""
    spec = result.config["sampler"]
    return spec["name"], int(spec["k"]), spec.get("gamma_scale")


def run_arrays(result: Any) -> dict[str, np.ndarray]:
    """One run's per-round curves.

    ``regret``: cumulative dynamic regret (eq. 8) of the sampler's probabilities;
    ``uniform_regret``: that of p = K / n on the same feedback; ``variance``: eq. 2 in closed
    form per round; ``squared_error``: the realised ||d - sum lambda g||^2; ``uniform_cost``:
    l_t(K / n) = (n / K) sum_i pi_t(i)^2 per round, every client's feedback aggregated;
    ``eval_round``, ``test_loss``, ``test_accuracy``: the evaluations (round 0 = the initial
    model). All but the last three exist only for full-information runs.
    """
    h = result.history
    out = {key: np.asarray(h[key], dtype=float) for key in ("test_loss", "test_accuracy")}
    out["eval_round"] = np.asarray(h["eval_round"], dtype=int)
    if "cost" in h:
        out["regret"] = dynamic_regret(h["cost"], h["optimal_cost"])
        out["uniform_regret"] = dynamic_regret(h["uniform_cost"], h["optimal_cost"])
        out["variance"] = np.asarray(h["expected_squared_error"], dtype=float)
        out["squared_error"] = np.asarray(h["squared_error"], dtype=float)
        out["uniform_cost"] = np.asarray(h["uniform_cost"], dtype=float)
    return out


def curves_by_label(results: Sequence[Any]) -> dict[tuple, list[dict[str, np.ndarray]]]:
    """The runs' curves grouped by :func:`run_label` (seeds of one setting together)."""
    groups: dict[tuple, list[dict[str, np.ndarray]]] = defaultdict(list)
    for result in results:
        groups[run_label(result)].append(run_arrays(result))
    return dict(groups)


def stacked(runs: Sequence[dict[str, np.ndarray]], key: str) -> np.ndarray:
    """``key`` of every run of a group as a (seeds, length) array."""
    return np.stack([run[key] for run in runs])


def horizon(key: str, *, first_tenth: bool = False) -> Callable[[dict], float]:
    """The speed measure "area under the ``key`` curve / horizon" of a run
    (:func:`aoi_fl.pipeline.claims.horizon_mean`) over all its evaluations, or over those of the
    first tenth of the rounds; NaN (no value, so no verdict) where that holds fewer than two
    evaluations, as in a run of a few rounds."""

    def metric(r: dict) -> float:
        rounds, values = r["eval_round"], r[key]
        if first_tenth:
            keep = rounds <= rounds[-1] // 10
            rounds, values = rounds[keep], values[keep]
        return shared_claims.horizon_mean(values, rounds) if len(rounds) >= 2 else float("nan")

    return metric


#: the speed measure of the claims, a column of :func:`summary_table`
_LOSS_HORIZON = horizon("test_loss")


def summary_table(results: Sequence[Any], target: float | None = None):
    """Per setting (sampler, K, gamma scale), means over seeds (and the seed spread).

    Columns: final regret (eq. 8) with its standard deviation, the part of it accrued after the
    first tenth of the rounds (the regret of the first rounds, when the feedback is largest,
    dominates the total), the ratio of the final regret to that of uniform probabilities on
    the same runs' feedback, the mean over rounds of the
    closed-form variance (eq. 2) and of the realised squared error, the final test loss, the
    test loss averaged over the horizon (:func:`horizon`: the speed measure of the claims), the
    final accuracy, the accuracy averaged over the last tenth of the evaluations and, with
    ``target``, the first round whose test accuracy reaches it (mean and standard deviation over
    the seeds that reach it, and how many do).
    """
    import pandas as pd

    rows = []
    for (name, k, scale), runs in sorted(curves_by_label(results).items(), key=_order):
        row: dict[str, Any] = {"sampler": name, "K": k, "gamma scale": scale, "seeds": len(runs)}
        if "regret" in runs[0]:
            regret = stacked(runs, "regret")
            final = regret[:, -1]
            row["regret"] = final.mean()
            row["regret sd"] = sample_sd(final)
            row["regret after T/10"] = (final - regret[:, max(1, regret.shape[1] // 10) - 1]).mean()
            row["regret / uniform-p regret"] = np.mean(
                final / stacked(runs, "uniform_regret")[:, -1]
            )
            row["variance (eq. 2, mean over rounds)"] = stacked(runs, "variance").mean()
            row["realised sq. error (mean)"] = stacked(runs, "squared_error").mean()
        accuracy = stacked(runs, "test_accuracy")
        row["final test loss"] = stacked(runs, "test_loss")[:, -1].mean()
        row["test loss, horizon mean"] = np.mean([_LOSS_HORIZON(run) for run in runs])
        row["final test accuracy"] = accuracy[:, -1].mean()
        row["test accuracy, last 10%"] = accuracy[:, -max(1, accuracy.shape[1] // 10) :].mean()
        if target is not None:
            hits = [rounds_to_target(r["test_accuracy"], target, r["eval_round"]) for r in runs]
            reached = [h for h in hits if h is not None]
            row[f"rounds to {target:.0%}"] = np.mean(reached) if reached else np.nan
            row[f"rounds to {target:.0%} sd"] = sample_sd(reached)
            row["seeds reaching it"] = len(reached)
        rows.append(row)
    return pd.DataFrame(rows)


def _order(item: tuple) -> tuple:
    (name, k, scale), _ = item
    known = list(FIG2_SAMPLERS)
    return (k, known.index(name) if name in known else len(known), scale or 0.0)


def diverged_runs(results: Sequence[Any]) -> dict[str, set[int]]:
    """{sampler: every K at which FedAvg diverged (:func:`diverged`) in one of its runs}, the
    samplers in the order their first diverged run comes."""
    out: dict[str, set[int]] = {}
    for result in results:
        if diverged(run_arrays(result)):
            name, k, _ = run_label(result)
            out.setdefault(name, set()).add(k)
    return out


# ---------------------------------------------------------------------------------------------
# Synthetic(0, 0): Figs 2, 3, 6 and 7


def largest_shares(sizes: np.ndarray) -> np.ndarray:
    """The clients' shares lambda_i of the data (proportional to ``sizes``), largest first."""
    return np.sort(sizes)[::-1] / sizes.sum()


def synthetic_client_sizes(n_clients: int = 100, seed: int = DATA_SEED) -> tuple[np.ndarray, int]:
    """Fig. 3(a): (each client's training samples, the test samples) of the Synthetic(0, 0) draw
    every run shares (:data:`~aoi_fl.evidence.kvib.experiments.DATA_SEED`)."""
    bundle = synthetic.fedprox_synthetic(n_clients=n_clients, seed=seed)
    return np.array([len(p) for p in bundle.partition]), len(bundle.test)


#: the variance column of :func:`summary_table`
VARIANCE = "variance (eq. 2, mean over rounds)"


def by_k(table, column: str):
    """``column`` of a K grid's :func:`summary_table`: samplers (rows, in the order of
    :data:`~aoi_fl.evidence.kvib.experiments.GRID_SAMPLERS`) by K (columns)."""
    return table.pivot(index="sampler", columns="K", values=column).reindex(GRID_SAMPLERS)


@dataclass
class SyntheticRuns:
    """The synthetic notebook's runs and the numbers its Reading cites: ``fig2`` (every sampler
    at K, Fig. 2), ``grid`` (the K grid of Figs 3(b), 6 and 7) and ``gamma`` (Fig. 3(c)), in the
    order of their grids, with the profile's ``settings``
    (:func:`~aoi_fl.evidence.kvib.experiments.synthetic_settings`)."""

    fig2: list
    grid: list
    gamma: list
    settings: dict[str, Any]

    @property
    def tenth(self) -> int:
        """A tenth of the rounds (at least one)."""
        return max(1, self.settings["rounds"] // 10)

    @cached_property
    def fig2_table(self):
        """:func:`summary_table` of Fig. 2 (rounds to 75% accuracy), by sampler."""
        return summary_table(self.fig2, SYNTHETIC_TARGET).set_index("sampler")

    @cached_property
    def grid_table(self):
        """:func:`summary_table` of the K grid."""
        return summary_table(self.grid)

    @cached_property
    def gamma_table(self):
        """:func:`summary_table` of the gamma grid, by gamma scale."""
        return summary_table(self.gamma).set_index("gamma scale")

    def by_k(self, column: str):
        """:func:`by_k` of the K grid's table."""
        return by_k(self.grid_table, column)

    @cached_property
    def _curves(self) -> dict[tuple, list[dict[str, np.ndarray]]]:
        return curves_by_label(self.fig2)

    def curves(self, name: str, key: str) -> np.ndarray:
        """``key`` of Fig. 2's runs of sampler ``name`` (seeds, rounds)."""
        return stacked(self._curves[(name, self.settings["k"], None)], key)

    def late_variance(self, name: str) -> float:
        """Fig. 2: ``name``'s variance (eq. 2) averaged over the last tenth of the rounds."""
        return self.curves(name, "variance")[:, -self.tenth :].mean()

    def early_variance(self, name: str) -> float:
        """Fig. 2: ``name``'s variance (eq. 2) averaged over the first tenth of the rounds."""
        return self.curves(name, "variance")[:, : self.tenth].mean()

    def consistency(self, name: str) -> tuple[float, float]:
        """Fig. 2: ``name``'s mean realised squared error over its mean closed-form variance
        (eq. 2), over all rounds and after the first tenth."""
        err, closed = self.curves(name, "squared_error"), self.curves(name, "variance")
        tenth = self.tenth
        return err.mean() / closed.mean(), err[:, tenth:].mean() / closed[:, tenth:].mean()

    @cached_property
    def diverged(self) -> dict[str, set[int]]:
        """:func:`diverged_runs` of every run (Fig. 2, the K grid, the gamma grid)."""
        return diverged_runs([*self.fig2, *self.grid, *self.gamma])


# ---------------------------------------------------------------------------------------------
# The MNIST substitute for Fig. 4


def client_classes(config: dict[str, Any], data_root: str) -> tuple[np.ndarray, np.ndarray]:
    """(each client's training images, its count of each class) in ``config``'s partition."""
    data = pipeline_runs.build_trainer(config, data_root).data
    classes = config["model"]["num_classes"]
    hist = partition.label_histogram(data.train.y.cpu().numpy(), data.partition, classes)
    return data.sizes, hist


def speedup_table(results: Sequence[Any], target: float):
    """:func:`summary_table` by sampler with each sampler's speed-up in rounds to ``target``
    over unbiased and over self-normalised uniform sampling (mean rounds of the reference / its
    own)."""
    table = summary_table(results, target).set_index("sampler")
    col = f"rounds to {target:.0%}"
    for ref in ("uniform_unbiased", "uniform_normalised"):
        if ref in table.index:
            table[f"speed-up vs {ref}"] = table.loc[ref, col] / table[col]
    return table
