"""What the arena's notebook prints and draws: the leaderboards, participation beside accuracy,
and the paired differences against the references (ours, not the papers')."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from aoi_fl.evidence.arena import experiments as ex
from aoi_fl.evidence.arena import results as ar
from aoi_fl.pipeline import plotting
from aoi_fl.pipeline.notebook import print_table

#: the leaderboard's columns as printed (name in the table -> header)
_COLUMNS = {
    "seeds": "seeds",
    "rounds_to_target": "rounds",
    "censored": "cens.",
    "final_accuracy": "final acc",
    "worst_clients_accuracy": "worst 10%",
    "jain": "Jain",
    "interval_var": "Var X",
    "sigma": "Sigma",
    "tau_max": "tau_max",
    "mean_participants": "|S|",
}


def describe(tier: str, profile: str) -> str:
    """One line: the tier's task, sizes and target."""
    s, task = ex.tier_settings(tier, profile), ex.TASKS[tier]
    return (
        f"{tier}: {task['model']['name']} on Fashion-MNIST, Dirichlet({ex.ALPHA}) labels, "
        f"n = {s['n']}, m = {s['m']}, K = {ex.LOCAL_STEPS} local steps of batch {ex.BATCH_SIZE}, "
        f"lr {task['lr']}, T = {s['rounds']}, {s['seeds']} paired seeds, target "
        f"{task['target']:.0%} (fixed before running)"
    )


def print_availability(n: int = 100, seed: int = 0) -> None:
    """Each availability model's configuration and its mean long-run rate (closed form)."""
    from aoi_fl.core.availability import build_availability

    rows = []
    for name, spec in ex.AVAILABILITY.items():
        sizes = np.arange(1, n + 1)  # a size order for the size-matched Bernoulli rates
        model = build_availability({**spec, "seed": seed}, n, sizes)
        rates = model.long_run_rates()
        options = ", ".join(f"{k}={v}" for k, v in spec.items() if k != "name")
        rows.append((name, spec["name"], options or "-", rates.mean(), rates.min(), rates.max()))
    table = pd.DataFrame(
        rows, columns=["model", "kind", "options", "mean rate", "min rate", "max rate"]
    )
    print_table(table, "{:.3f}", index=False)


def print_leaderboards(frame: pd.DataFrame, missing: int, measure: str = "rounds") -> None:
    """One leaderboard per availability model (:func:`aoi_fl.evidence.arena.results.leaderboard`),
    best first; the two last columns are the paired comparisons against uniform and the AoI paper's
    Markov optimal (difference in the measure, 95% interval, word)."""
    label = ar.MEASURES[measure][2]
    print(f"{len(frame)} runs read, {missing} missing; ranked by {label} (mean over seeds)")
    for availability in frame.availability.unique():
        board = ar.leaderboard(frame[frame.availability == availability], measure)
        numbers = board[list(_COLUMNS)].rename(columns=_COLUMNS)
        print(f"\n== availability: {availability}")
        print_table(numbers, "{:.3f}")
        print(f"-- paired differences in {label}, policy - reference, 95% t interval")
        print_table(board[[f"vs {r}" for r in ex.REFERENCES]])


def plot_participation_vs_speed(
    frame: pd.DataFrame, x: str = "interval_var", measure: str = "rounds"
) -> plt.Figure:
    """Per availability model, each policy's mean participation metric ``x`` (Var X by default,
    on a symlog axis) against its mean ``measure`` with 95% t intervals over seeds."""
    column, _, label = ar.MEASURES[measure]
    models = list(frame.availability.unique())
    fig, axes = plt.subplots(1, len(models), figsize=(3.6 * len(models), 4.0), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, availability in zip(axes, models, strict=True):
        part = frame[frame.availability == availability]
        for policy, rows in part.groupby("policy", sort=False):
            st = plotting.style(policy)
            y = rows[column].to_numpy(float)
            half = _half_width(y)
            ax.errorbar(
                rows[x].mean(),
                y.mean(),
                yerr=half,
                color=st.color,
                marker=st.marker,
                label=st.label,
                linestyle="none",
                markersize=6,
                capsize=2,
            )
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlabel(
            {"interval_var": "Var X (inter-selection interval)", "jain": "Jain's index"}.get(x, x)
        )
        ax.set_title(availability)
    axes[0].set_ylabel(f"{label} (mean, 95% CI)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize="x-small")
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    return fig


def _half_width(values: np.ndarray) -> float:
    from scipy import stats

    if values.size < 2:
        return 0.0
    return float(stats.t.ppf(0.975, values.size - 1) * values.std(ddof=1) / np.sqrt(values.size))


def plot_differences(frame: pd.DataFrame, reference: str, measure: str = "rounds") -> plt.Figure:
    """Every policy's paired difference from ``reference`` in ``measure``, one panel per
    availability model, with its 95% interval: left of 0 is fewer rounds (better) for a speed
    measure."""
    table = ar.comparisons(frame, measure)
    table = table[table.reference == reference]
    models = list(frame.availability.unique())
    policies = sorted(set(table.policy), key=ex.POLICIES.index)
    fig, axes = plt.subplots(
        1, len(models), figsize=(2.6 * len(models) + 1.6, 0.3 * len(policies) + 1.2), sharey=True
    )
    axes = np.atleast_1d(axes)
    for ax, availability in zip(axes, models, strict=True):
        part = table[table.availability == availability].set_index("policy")
        for y, policy in enumerate(policies):
            if policy in part.index:
                r, st = part.loc[policy], plotting.style(policy)
                ax.errorbar(
                    r["mean"],
                    y,
                    xerr=[[r["mean"] - r["low"]], [r["high"] - r["mean"]]],
                    color=st.color,
                    marker=st.marker,
                    capsize=2,
                )
        ax.axvline(0.0, color="0.3", linewidth=0.8)
        ax.set_title(availability)
        ax.set_xlabel(f"policy - {reference}")
    axes[0].set_yticks(range(len(policies)), policies, fontsize="x-small")
    axes[0].invert_yaxis()
    fig.suptitle(
        f"{ar.MEASURES[measure][2]}: paired difference from {reference} (mean, 95% interval)",
        fontsize="medium",
    )
    fig.tight_layout()
    return fig


def print_choices(frame: pd.DataFrame, measure: str = "rounds") -> tuple[tuple[str, ...], str]:
    """The screen's choices for the confirm tier, printed with their grounds: the three best
    others by mean rank, and the partial-availability model with the largest Friedman
    chi-square (where the policies were told apart most)."""
    ranks = ar.mean_ranks(frame, measure)
    print("mean rank on rounds to target over (availability, seed), 1 = best:")
    print_table(ranks.to_frame("mean rank"), "{:.2f}")
    print("\nFriedman chi-square of rounds to target over the policies, per availability model:")
    print_table(ar.separation(frame, measure).to_frame(), "{:.1f}")
    others, where = ar.best_others(frame, 3, measure), ar.most_separating(frame, measure)
    print(f"\nconfirm tier: the three best others {list(others)}; availability {where!r}")
    return others, where


def print_confirm_status(configs: Sequence[dict], missing: int) -> None:
    """How much of the confirm tier is cached."""
    print(f"confirm tier: {len(configs) - missing} of {len(configs)} runs cached")


def print_power_plan(
    frame: pd.DataFrame, tier: str, effect: float, hypotheses: tuple | None = None
) -> None:
    """A tier's power on rounds to target: its family's minimum detectable effects now, and the
    paired seeds they would need for a minimum detectable effect of ``effect``
    (:func:`ar.power_plan`: each at 95%, and at Holm's first step over the family of
    ``hypotheses``, every comparison when None), with the runs that means."""
    plan = ar.power_plan(frame, effect, hypotheses)
    if plan.empty:
        print(f"{tier}: no comparison has 2 paired seeds yet")
        return
    configs = frame.groupby(["availability", "policy"]).ngroups
    q = plan[["sd", "mde", "seeds", "seeds_holm"]].quantile([0.5, 0.9, 1.0], interpolation="higher")
    print(
        f"{tier}: {len(plan)} comparisons on rounds to target, "
        f"{_span(plan['n'])} paired seeds each "
        f"({len(frame)} runs, {configs} configurations a seed)"
    )
    rows = {
        "paired sd": q["sd"],
        "MDE now (80% power)": q["mde"],
        f"seeds for an MDE of {effect:g}, at 95%": q["seeds"],
        f"  at Holm's first step (alpha {ar.FAMILY_ALPHA} / {len(plan)})": q["seeds_holm"],
    }
    table = pd.DataFrame(rows).T.set_axis(["median", "90th percentile", "largest"], axis=1)
    print_table(table, "{:.4g}")
    need = int(q.loc[0.5, "seeds_holm"])
    print(
        f"the median comparison decided at Holm's first step needs {need} seeds: "
        f"{need * configs:,} runs of this tier"
    )


def _span(values: pd.Series) -> str:
    low, high = int(values.min()), int(values.max())
    return str(low) if low == high else f"{low}-{high}"
