"""What the training notebooks show of their panels (:mod:`aoi_fl.evidence.aoi.experiments`): a
panel's runs, the Figs 5-7 plot, the per-seed rounds to target and the paired answer to the
paper's claim (the Figs 5-7 notebooks), and Table II's selection skew of the main panels (the
Table II notebook).

Kept here, not in the notebooks, because the three Figs 5-7 notebooks show panels the same way:
they start with :func:`panel_notebook`, list their panels with :meth:`PanelNotebook.show`, then
assert what they printed with :meth:`PanelNotebook.check`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from aoi_fl.evidence.aoi import experiments
from aoi_fl.evidence.aoi import results as summaries
from aoi_fl.pipeline import notebook, plotting, runs
from aoi_fl.pipeline.cache import config_key
from aoi_fl.pipeline.data_status import CIFAR_LABELS, data_status
from aoi_fl.pipeline.notebook import print_table
from aoi_fl.pipeline.profiles import resolve_profile, traits


def panel_results(
    plan: experiments.PanelPlan,
    *,
    results_dir: str,
    data_root: str,
    rerun: bool = False,
    only_cached: bool = False,
    workers: int = 1,
    threads: int | None = None,
) -> list[Any]:
    """The results of a panel's grid (:func:`experiments.plan`): computed where missing
    (:func:`runs.run_grid`), or with ``only_cached`` just the cached ones, saying how many are
    still missing."""
    if only_cached:
        found, missing = runs.cached_results(plan.configs, results_dir=results_dir)
        print(
            f"{plan.name}: {len(found)} of {len(plan.configs)} runs cached, {missing} NOT YET "
            "COMPUTED (shown: the cached ones only)"
        )
        return found
    return runs.run_grid(
        plan.configs,
        results_dir=results_dir,
        rerun=rerun,
        data_root=data_root,
        workers=workers,
        threads=threads,
        progress=traits(plan.profile).progress,
    )


def plot_panel(results: Sequence[Any], dataset: str, title: str, *, zoom: float = 0.05):
    """Figs 5-7: accuracy against rounds per split (columns), mean and min-max band over seeds
    at the rounds every seed evaluated, the paper's rounds to target as open markers; the
    bottom row zooms on the approach to the target (``zoom`` below it)."""
    import matplotlib.pyplot as plt

    target = experiments.TARGETS[dataset]
    groups = summaries.group_runs(results)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex="col")
    for col, split in enumerate(experiments.SPLITS):
        curves = {
            policy: summaries.accuracy_curves(groups[(split, policy)], common=True)
            for policy in experiments.POLICIES
            if (split, policy) in groups
        }
        for row, ax in enumerate(axes[:, col]):
            plotting.plot_accuracy(ax, curves, target)
            for policy, rounds in experiments.PAPER_ROUNDS_TO_TARGET.get(
                (dataset, split), {}
            ).items():
                st = plotting.style(policy)
                ax.plot(
                    [rounds], [target], marker=st.marker, mfc="white", color=st.color, ls="none"
                )
            if row == 1:
                ax.set_ylim(target - zoom, min(1.0, target + zoom / 2))
        label = "IID" if split == "iid" else f"non-IID (Dirichlet {experiments.ALPHA})"
        axes[0, col].set_title(f"({'ab'[col]}) {dataset} {label}")
    axes[0, 0].plot(
        [], [], marker="o", mfc="white", color="0.3", ls="none", label="paper: rounds to target"
    )
    axes[0, 0].legend(fontsize="x-small", loc="lower right")
    fig.suptitle(title, fontsize="medium")
    fig.tight_layout()
    return fig


def paired_answer(
    results: Sequence[Any], dataset: str, others: Sequence[str], fast: str = "markov_optimal"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rounds to target per seed and policy, ``fast`` minus each of ``others`` paired over
    seeds with intervals and the verdict: :func:`summaries.paired_table`), against the paper;
    runs of another model than the paper's (the power panel) can make its claim neither "held"
    nor "not held" (the criterion's own verdict is a column beside it)."""
    target = experiments.TARGETS[dataset]
    paper = experiments.PAPER_ROUNDS_TO_TARGET
    table = summaries.rounds_to_target_table(results, target, paper, dataset)
    substitute = summaries.substitute_model(results, dataset)
    paired = pd.concat(
        {
            other: summaries.paired_table(
                results, target, paper, dataset, fast=fast, slow=other, substitute=substitute
            )
            for other in others
        }
    )
    paired.index.names = ["versus", "split"]
    # each "paper <policy>" column belongs to one comparison only; the difference says it all
    policy_columns = [c for c in paired if c.startswith("paper ") and c != "paper difference"]
    return table, paired.drop(columns=policy_columns)


def print_paired_answer(
    results: Sequence[Any], dataset: str, fast: str = "markov_optimal"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Print and return :func:`paired_answer` for ``fast`` against every other policy run."""
    others = sorted({r.config["sampler"]["name"] for r in results} - {fast})
    table, paired = paired_answer(results, dataset, others, fast)
    print(f"rounds to {experiments.TARGETS[dataset]:.0%} test accuracy per seed")
    print_table(table, "{:.1f}")
    print(f"\n{fast} minus the other policy, paired over seeds")
    print_table(paired, "{:.2f}")
    return table, paired


def print_screening_and_final_accuracy(results: Sequence[Any], dataset: str) -> None:
    """Under Fig. 5: the screening check (:func:`summaries.screening_check`: rounds to target
    found by screening miss no first crossing when the full-test minus subset accuracy stays
    within the dataset's margin near the target) and the final accuracy per split and policy
    (:func:`summaries.final_accuracy_table`). Nothing for no results (only cached runs shown,
    none cached)."""
    if not results:
        return
    margin = experiments.SCREEN_MARGIN[dataset]
    print("screening check: full-test minus subset accuracy where both were measured")
    print_table(summaries.screening_check(results, margin), "{:.4f}")
    print("\nfinal accuracy (mean of the last 5 common evaluations):")
    print_table(summaries.final_accuracy_table(results), "{:.4f}")


def local_work_table(panels: dict[str, Sequence[Any]], profile: str, dataset: str) -> pd.DataFrame:
    """Mean rounds to target per (panel's local work, split, policy) and how often an average
    client had been selected by then (rounds x m / n)."""
    target = experiments.TARGETS[dataset]
    tables = {}
    for panel, results in panels.items():
        unit, count = experiments.panel(panel, profile)["local_work"]
        table = summaries.rounds_to_target_table(results, target)
        tables[f"{count} {unit} ({panel})"] = pd.DataFrame(
            {
                "seeds": table["reached"].str.split("/").str[1].astype(int),
                "reached": table["reached"],
                "mean rounds to target": table["mean"],
                "selections per client": table["mean"]
                * experiments.M_SELECTED
                / experiments.N_CLIENTS,
            }
        )
    table = pd.concat(tables)
    table.index.names = ["local work", "split", "policy"]
    return table


def print_local_work_table(panels: dict[str, Sequence[Any]], profile: str, dataset: str) -> None:
    """Print :func:`local_work_table`."""
    print_table(local_work_table(panels, profile, dataset), "{:.1f}")


def check_panel(
    results: Sequence[Any],
    panel: str,
    profile: str,
    dataset: str,
    *,
    paired: pd.DataFrame | None = None,
    synthetic: bool = False,
    complete: bool = True,
) -> list[str]:
    """Assert what the Figs 5-7 notebooks print of a panel; return the checks made (skipped ones
    are printed, with the reason).

    Always: every result is served as the configuration of one of the panel's runs (its stored
    configuration is the resolved configuration of that key), ran all its rounds, and within a
    seed the runs differ only in the sampler (same partition, model, mini-batch seeds: the
    pairing); each verdict of ``paired`` (by default :func:`paired_answer` of Markov optimal
    against the other policies) says "held" exactly when its t interval of R_fast - R_slow lies
    below 0. With ``complete`` (not only the cached runs) every planned run is present. Outside
    smoke, every run reaches the dataset's target within its horizon (the horizons are chosen
    for that).
    """
    configs = {}
    for config in experiments.panel_grid(panel, profile, synthetic=synthetic):
        resolved = runs.resolve_config(config)
        configs[config_key(resolved)] = resolved
    done = ["results are their configurations"]
    for r in results:
        assert r.key in configs, f"{panel}: result {r.key} is not one of the panel's runs"
        assert r.config == configs[r.key], f"{panel}: result {r.key} has another configuration"
        rounds = r.config["training"]["rounds"]
        assert len(r.history["lr"]) == rounds, f"{panel}: run {r.key} stopped before {rounds}"
    if complete:
        assert sorted(r.key for r in results) == sorted(configs), f"{panel}: runs missing"
        done.append(f"all {len(configs)} runs present")
    seeds: dict[tuple, list[dict]] = {}
    for r in results:
        c = r.config
        seeds.setdefault((c["partition"]["name"], c["training"]["seed"]), []).append(c)
    for group in seeds.values():
        shared = [{k: v for k, v in c.items() if k != "sampler"} for c in group]
        assert all(s == shared[0] for s in shared), "runs of one seed differ beyond the sampler"
        assert len({c["sampler"]["seed"] for c in group}) == 1, "sampler seeds differ in a seed"
    done.append("pairing within seeds")
    if paired is None and results:
        others = sorted({r.config["sampler"]["name"] for r in results} - {"markov_optimal"})
        paired = paired_answer(results, dataset, others)[1] if others else None
    if paired is not None:
        for index, row in paired.dropna(subset=["verdict"]).iterrows():
            low, high, label = row["t 95% low"], row["t 95% high"], row["verdict"]
            # "held" needs every value of the interval to be a speed-up; the others need not
            agrees = (high < 0) == label.startswith("held")
            assert agrees, f"{panel} {index}: verdict {label!r} against [{low}, {high}]"
        done.append("verdicts agree with their intervals")
    target = experiments.TARGETS[dataset]
    if traits(profile).quick:
        print(f"skipped in smoke: every run reaches {target:.0%} (smoke runs last 2 rounds)")
    else:
        missed = [r.key for r in results if r.rounds_to_target(target) is None]
        assert not missed, f"{panel}: runs that never reached {target:.0%}: {missed}"
        done.append(f"every run reaches {target:.0%}")
    return done


#: the datasets whose panels a notebook can skip (:func:`data_status`: the others must be present)
@dataclass
class PanelNotebook:
    """What the Figs 5-7 notebooks need to show their training panels (:func:`panel_notebook`):
    the notebook's profile and folders, its parameters ``rerun`` and ``only_cached``, and whether
    the dataset of its paper figure (``data``) can be trained on here, or only as synthetic data
    (:func:`data_status`); then the panels shown and skipped so far, for :meth:`check`."""

    env: notebook.NotebookSetup
    data: str
    has_data: bool
    synthetic: bool
    rerun: bool = False
    only_cached: bool = False
    shown: dict[str, list[Any]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    plans: dict[str, experiments.PanelPlan] = field(default_factory=dict)

    @property
    def profile(self) -> str:
        return self.env.profile

    def plan(self, panel: str) -> experiments.PanelPlan:
        """``panel`` in the notebook's profile (:func:`experiments.plan`), read once; it trains
        on synthetic data where its dataset is the paper figure's and only synthetic data are
        here (panels of another dataset train on data that ``make data`` fetches)."""
        if panel not in self.plans:
            synthetic_data = self.data if self.synthetic else None
            self.plans[panel] = experiments.plan(panel, self.profile, synthetic_data=synthetic_data)
        return self.plans[panel]

    def load(self, panel: str, *, example: bool = False) -> list[Any]:
        """Describe ``panel`` (:attr:`~experiments.PanelPlan.description`; with ``example`` its
        first configuration too) and return its results (:func:`panel_results`); none,
        silently, where its data are not here (the setup said so)."""
        plan = self.plan(panel)
        if plan.dataset == self.data and not self.has_data:
            self.skipped.append(panel)
            return []
        print(plan.description)
        if example:
            print("example configuration:", plan.configs[0])
        self.shown[panel] = panel_results(
            plan,
            results_dir=self.env.RESULTS,
            data_root=self.env.DATA,
            rerun=self.rerun,
            only_cached=self.only_cached,
            workers=self.env.WORKERS,
            threads=self.env.THREADS,
        )
        return self.shown[panel]

    def show(self, panel: str, figure: str, title: str) -> list[Any]:
        """A panel of Figs 5-7 as the notebooks show it: :meth:`load` with an example
        configuration, then, if there are results, the plot (:func:`plot_panel`, ``title``
        marked when the data are synthetic) saved as ``figure`` and shown, and the paired answer
        to the paper's claim (:func:`print_paired_answer`). Returns the results."""

        results = self.load(panel, example=True)
        if results:
            plan = self.plan(panel)
            marked = title + (" · SYNTHETIC DATA" if plan.synthetic else "")
            self.env.show(plot_panel(results, plan.dataset, marked), figure)
            print_paired_answer(results, plan.dataset)
        return results

    def show_regime(self, figure: str, title: str, panel: str = "main_mnist") -> list[Any]:
        """Fig. 5's pair in the ``paper`` profile's ``panel``, from the cache only (nothing is
        trained): Markov optimal and random at every seed where both are cached
        (:func:`experiments.regime_grid`; ``main_mnist``: the paper's regime, its CNN at its
        horizons, affordable on a GPU; ``power``: the small-CNN power panel at its 30 seeds).
        Prints how many paired seeds there are and which devices trained them, then the plot,
        the paired answer and the screening check. Returns the runs."""
        grid = experiments.regime_grid(panel)
        found, _ = runs.cached_results(grid, results_dir=self.env.RESULTS)
        results = summaries.complete_pairs(found, experiments.PAIR)
        p = experiments.panel(panel, "paper")
        seeds = {
            split: sorted(
                {
                    r.config["training"]["seed"]
                    for r in results
                    if experiments.split_of(r.config) == split
                }
            )
            for split in experiments.SPLITS
        }
        model = "the paper's CNN" if p.get("model") is None else f"model {p['model']}"
        print(
            f"{panel}, paper profile ({model}, 5 local steps, rounds IID "
            f"{p['rounds']['iid']} / non-IID {p['rounds']['noniid']}), Markov optimal and random: "
            + ", ".join(f"{split} {len(s)} paired seeds" for split, s in seeds.items())
            + f" (the profile plans {p['seeds']})"
            + f"; trained on {', '.join(sorted({r.device for r in results})) or 'nothing cached'}"
        )
        if results:
            self.env.show(plot_panel(results, "mnist", title), figure)
            print_paired_answer(results, "mnist")
            print_screening_and_final_accuracy(results, "mnist")
        return results

    def check(self) -> None:
        """Say which panels were skipped for want of data, then assert what the notebook printed
        of every panel shown (:func:`check_panel`; all of a panel's runs present unless only the
        cached ones were asked for) and print the checks passed."""
        for panel in self.skipped:
            label = CIFAR_LABELS[self.plan(panel).dataset]
            what = f"the {label} panel" if self.shown else "every check"
            print(f"skipped: {what} (no {label} data here, see above)")
        done = []
        for panel, results in self.shown.items():
            plan = self.plan(panel)
            checks = check_panel(
                results,
                panel,
                self.profile,
                plan.dataset,
                synthetic=plan.synthetic,
                complete=not self.only_cached,
            )
            done += [f"{panel}: {c}" for c in checks]
        if done:
            print("checks passed:\n  " + "\n  ".join(done))


def panel_notebook(
    profile: str, data: str, *, rerun: bool = False, only_cached: bool = False
) -> PanelNotebook:
    """The setup of the Figs 5-7 notebooks: resolve ``profile`` (``$AOI_FL_PROFILE`` overrides the
    parameters cell), print it and the training device (:func:`notebook.setup`), print whether
    ``data``, the dataset of the notebook's figure of the paper, is here (:func:`data_status`),
    and return the :class:`PanelNotebook` that shows the notebook's panels."""
    profile = resolve_profile(profile)
    env = notebook.setup(profile, display_width=160, training=True)
    has_data, synthetic, message = data_status(data, profile, env.DATA)
    print(message)
    return PanelNotebook(env, data, has_data, synthetic, rerun=rerun, only_cached=only_cached)


#: Table II's per-dataset columns (:data:`experiments.SKEW_COLUMNS`): the average rho and how
#: far it moves with the local optima F_k(theta_k*), then the bounds of Theorem 2's skew terms
#: (eqs 25-26) with where F* was trained
SKEW_ESTIMABILITY = list(experiments.SKEW_COLUMNS[:9])
SKEW_BOUNDS = list(experiments.SKEW_COLUMNS[9:])
#: the range of the average rho over F_k* moved by its residual and set to 0
_MOVED = ["rho (F* - residual)", "rho (F* + residual)", "rho (F* = 0)"]


def table2(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Table II: the average empirical rho (eq. 24) per policy, one column per (dataset, split)
    of ``tables`` (:func:`experiments.selection_skew` per dataset; NaN where a policy was not
    run), then the paper's values for every dataset."""
    rows = []
    for policy in experiments.POLICIES:
        row = {"policy": policy}
        for dataset, table in tables.items():
            for split in experiments.SPLITS:
                row[f"{dataset} {split}"] = (
                    table.loc[(split, policy), "rho (average)"]
                    if (split, policy) in table.index
                    else np.nan
                )
        for dataset in experiments.DATASETS:
            row[f"paper {dataset}"] = experiments.PAPER_SKEW[policy][dataset]
        rows.append(row)
    return pd.DataFrame(rows).set_index("policy")


def print_table2(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Print and return :func:`table2`."""
    table = table2(tables)
    print(
        "Table II · average empirical rho (ours: mean over the rounds used and the seeds; "
        "paper: its Table II)"
    )
    print_table(table, "{:.3f}")
    return table


def print_skew_tables(tables: dict[str, pd.DataFrame]) -> None:
    """Per dataset: the average rho with its spread and its dependence on F_k(theta_k*)
    (:data:`SKEW_ESTIMABILITY`), then the bounds of Theorem 2's skew terms
    (:data:`SKEW_BOUNDS`)."""
    for dataset, table in tables.items():
        print(f"\n{dataset}: average rho and its dependence on F_k(theta_k*), mean over seeds")
        print_table(table[SKEW_ESTIMABILITY], "{:.3f}")
        print(f"\n{dataset}: bounds of Theorem 2's skew terms, mean over seeds")
        print_table(table[SKEW_BOUNDS], "{:.3f}")


def plot_table2(tables: dict[str, pd.DataFrame], synthetic: set[str] | frozenset = frozenset()):
    """Table II as bars: one panel per dataset, the average rho per split and policy with the
    range over F_k* moved by its residual and set to 0, and the paper's value as an open marker
    (drawn at the IID bar: the paper does not say which split it reports). Datasets in
    ``synthetic`` are titled as such."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(tables), figsize=(5.5 * len(tables), 3.8), squeeze=False)
    x = np.arange(len(experiments.SPLITS))
    for ax, (dataset, table) in zip(axes[0], tables.items(), strict=True):
        for j, policy in enumerate(experiments.POLICIES):
            if ("iid", policy) not in table.index:
                continue
            st = plotting.style(policy)
            at = x + (j - 1.5) * 0.2
            picked = table.loc[[(split, policy) for split in experiments.SPLITS]]
            ax.bar(at, picked["rho (average)"], 0.2, color=st.color, label=st.label)
            moved = picked[_MOVED]
            low, high = moved.min(axis=1).to_numpy(), moved.max(axis=1).to_numpy()
            ax.vlines(at, low, high, color="0.1", lw=1.2)
            ax.plot(
                [at[0]],
                [experiments.PAPER_SKEW[policy][dataset]],
                marker=st.marker,
                mfc="white",
                color=st.color,
                ls="none",
            )
        ax.axhline(1.0, color="0.3", lw=0.8)
        ax.set_xticks(x, ["IID", "non-IID"])
        ax.set_ylabel("average empirical rho")
        ax.set_title(dataset + (" (SYNTHETIC)" if dataset in synthetic else ""))
    axes[0, 0].plot(
        [], [], marker="o", mfc="white", color="0.3", ls="none", label="paper (Table II)"
    )
    axes[0, 0].vlines([], [], [], color="0.1", lw=1.2, label="F* +/- residual, F* = 0")
    axes[0, 0].legend(fontsize="x-small")
    fig.suptitle(
        "Table II · selection skew rho (eq. 24), bars: ours, markers: paper", fontsize="medium"
    )
    fig.tight_layout()
    return fig


__all__ = [
    "SKEW_BOUNDS",
    "SKEW_ESTIMABILITY",
    "PanelNotebook",
    "check_panel",
    "local_work_table",
    "paired_answer",
    "panel_notebook",
    "panel_results",
    "plot_panel",
    "plot_table2",
    "print_local_work_table",
    "print_paired_answer",
    "print_screening_and_final_accuracy",
    "print_skew_tables",
    "print_table2",
    "table2",
]
