"""What the K-Vib notebooks show of the K-Vib paper: its figures and the summaries printed next
to them, from the tables of :mod:`aoi_fl.evidence.kvib.results`.

One notebook each: Fig. 1 (Examples 3.1 and 3.2); Figs 2, 3, 6 and 7 on Synthetic(0, 0); the
MNIST substitute for Fig. 4. A function named ``plot_*`` returns the figure (the notebook saves
and shows it), one named ``print_*`` prints what the notebook's Reading cites.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from aoi_fl.evidence.kvib import claims as kc
from aoi_fl.evidence.kvib import experiments as kx
from aoi_fl.evidence.kvib import results as kr
from aoi_fl.kvib import estimators
from aoi_fl.pipeline import plotting
from aoi_fl.pipeline.claims import log_log_slope
from aoi_fl.pipeline.notebook import print_table

#: Fig. 1's colours (by the closed forms' keys of
#: :func:`aoi_fl.evidence.kvib.claims.example_3_1_mse`): uniform, RSP and ISP drawn as the samplers
#: that use them
_FIG1_STYLES = {"uniform": "uniform_unbiased", "rsp": "mabs", "isp": "kvib"}


def _fig1_color(key: str) -> str:
    return plotting.style(_FIG1_STYLES[key]).color


# ---------------------------------------------------------------------------------------------
# Fig. 1


def print_example_3_1(g: np.ndarray, mse) -> None:
    """Example 3.1's vectors (their norms a_i = ||g_i||) and Fig. 1(a)'s table
    (:func:`aoi_fl.evidence.kvib.results.example_3_1_table`)."""
    a = np.linalg.norm(g, axis=1)
    print(
        f"norms: min {a.min():.1f}, median {np.median(a):.1f}, max {a.max():.1f}; "
        f"sum of squares {np.sum(a**2):.0f}, ||sum g||^2 {np.sum(g.sum(0) ** 2):.0f}"
    )
    print_table(mse, "{:.2f}", index=False)
    print("z: (repetitions - closed form) / standard error")


def plot_fig1a(mse, errors: Mapping[tuple, np.ndarray], settings: Mapping[str, Any]):
    """Fig. 1(a): one panel per K, the first two coordinates of the errors d - sum g of every
    repetition of each procedure; the legend gives each one's MSE over all coordinates."""
    ks = settings["ks"]
    fig, axes = plt.subplots(1, len(ks), figsize=(11, 4.6), sharex=True, sharey=True)
    for ax, k in zip(np.atleast_1d(axes), ks, strict=True):
        for label, (_, key) in kr.EXAMPLE_3_1_PROCEDURES.items():
            err = errors[(k, label)]
            row = mse[(mse["K"] == k) & (mse["procedure"] == label)].iloc[0]
            ax.scatter(
                err[:, 0],
                err[:, 1],
                s=4,
                alpha=0.35,
                color=_fig1_color(key),
                label=f"{label}: MSE {row['MSE (repetitions)']:.0f}",
            )
        ax.axhline(0, color="0.3", lw=0.6)
        ax.axvline(0, color="0.3", lw=0.6)
        ax.set_title(f"K = {k}")
        ax.set_xlabel("error, coordinate 1")
        ax.legend(fontsize="x-small", markerscale=3, loc="upper right")
    np.atleast_1d(axes)[0].set_ylabel("error, coordinate 2")
    fig.suptitle(
        f"Fig. 1(a) · estimate errors d - sum g of {settings['repetitions']} repetitions "
        f"(first two of {settings['dim']} coordinates); MSE over all coordinates",
        fontsize="medium",
    )
    fig.tight_layout()
    return fig


def _scale_table(curve):
    """:func:`aoi_fl.evidence.kvib.claims.example_3_1_curve` by scale: RSP's and uniform's MSE over
    ISP's at each K."""
    table = curve.assign(**{"uniform / ISP": curve["uniform"] / curve["isp"]}).pivot(
        index="scale", columns="K", values=["RSP / ISP", "uniform / ISP"]
    )
    table.columns = [f"{ratio}, K = {k}" for ratio, k in table.columns]
    return table


def print_scale_curve(curve) -> None:
    """Fig. 1(a)'s ratios against the LogNormal scale of the norms (:func:`plot_scale_curve`'s,
    and uniform's over ISP's), to two decimals."""
    print_table(_scale_table(curve), "{:.2f}")


def plot_scale_curve(curve, scale_sigma: float):
    """Fig. 1(a)'s MSE ratio RSP / ISP against the LogNormal scale of the norms, one line per K,
    with the thresholds of the ledger's reading of "comparable" at the smallest K (below
    :data:`~aoi_fl.evidence.kvib.claims.COMPARABLE_RATIO`) and "ISP outperforms" at the largest
    (above :data:`~aoi_fl.evidence.kvib.claims.OUTPERFORMS_RATIO`) and the Fig. 1 notebook's scale;
    uniform / ISP is in :func:`print_scale_curve`'s table."""
    ks = sorted(curve["K"].unique())
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for k in ks:
        at = curve[curve["K"] == k]
        ax.plot(at["scale"], at["RSP / ISP"], "-o", ms=3.5, label=f"RSP / ISP, K = {k}")
    right = curve["scale"].max()
    for y, text in (
        (kc.COMPARABLE_RATIO, f"K = {ks[0]}: comparable below {kc.COMPARABLE_RATIO:g}"),
        (kc.OUTPERFORMS_RATIO, f"K = {ks[-1]}: ISP outperforms above {kc.OUTPERFORMS_RATIO:g}"),
    ):
        ax.axhline(y, color="0.5", lw=0.8, ls="--")
        ax.annotate(text, (right, y), fontsize=7, ha="right", va="bottom")
    ax.axvline(scale_sigma, color="0.3", lw=0.8, ls=":")
    ax.annotate(
        f" scale of the vectors above ({scale_sigma:g})",
        (scale_sigma, curve["RSP / ISP"].max()),
        fontsize=7,
        va="top",
    )
    ax.set_yscale("log")
    ax.set_xlabel("LogNormal scale of the norms (not given by the paper)")
    ax.set_ylabel("MSE ratio RSP / ISP (closed form, eq. 2)")
    ax.legend(fontsize="x-small", loc="upper left")
    ax.set_title("Fig. 1(a) · the claims against the unstated scale", fontsize="medium")
    fig.tight_layout()
    return fig


def print_example_3_2(ex: kr.Example32) -> None:
    """Example 3.2 next to the numbers the paper prints (``kc.PAPER_EX32_*``): the norms, the
    optimal probabilities of eqs 4 and 5, every outcome of RSP and ISP at K = 2 with E[d] and the
    variance (enumerated and closed form), ISP's sample sizes, and K = 3."""
    norms, total = ex.norms, ex.total
    print(
        f"||g_i|| = {np.round(norms, 12).tolist()}, ||g_i||^2 = {np.round(norms**2, 12).tolist()}"
        f"   (paper: ||g_i||^2 = {list(kc.PAPER_EX32_SQ_NORMS)})"
    )
    print(
        f"ISP eq. 4: p = {np.round(ex.probabilities['ISP'], 12).tolist()}   "
        f"(paper: {list(kc.PAPER_EX32_P_ISP)})"
    )
    print(
        f"RSP eq. 5: p = K q = {np.round(ex.probabilities['RSP'], 12).tolist()}   "
        f"(paper: K {list(kc.PAPER_EX32_Q_RSP)})"
    )
    print(f"Global: sum g = ({total[0]:.4f}, {total[1]:.4f})")
    for name, table in ex.outcomes.items():
        print(f"\n{name} outcomes:")
        print_table(table, "{:.4f}", index=False)
        mean, exact = ex.moments(name)
        print(
            f"  E[d] = ({mean[0]:.4f}, {mean[1]:.4f}); variance (enumeration) {exact:.4f}, "
            f"closed form {ex.closed_form(name):.4f}"
        )
    sizes = ex.isp_sizes()
    print(
        "\nISP sample sizes: "
        + ", ".join(f"P(|S| = {s}) = {v:.4f}" for s, v in sizes.items())
        + f"   (paper: P(|S| = 3) = P(|S| = 1) = {kc.PAPER_EX32_SIZE_PROB:.4f})"
    )
    full = ex.k3_rsp
    print(
        f"RSP with K = 3 drawing each vector once: d = ({full[0]:.4f}, {full[1]:.4f}), "
        f"||d - sum g||^2 = {np.sum((full - total) ** 2):.4f}   "
        f"(paper: d = {kc.PAPER_EX32_K3_D}, {kc.PAPER_EX32_K3_ERROR})"
    )
    p3 = estimators.optimal_isp_probabilities(norms, 3)
    print(f"ISP with K = 3: p = {p3.tolist()}, error 0")


def plot_fig1b(ex: kr.Example32):
    """Fig. 1(b): every estimate d of RSP and ISP at K = 2 (area ~ its probability, labelled by
    the clients drawn) around sum g."""
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for name, marker in (("RSP", "s"), ("ISP", "o")):
        t = ex.outcomes[name]
        ax.scatter(
            t["d_x"],
            t["d_y"],
            s=30 + 400 * t["probability"],
            marker=marker,
            alpha=0.7,
            color=_fig1_color(name.lower()),
            label=f"{name} (area ~ probability)",
        )
        for _, r in t.iterrows():
            ax.annotate(
                f"{name}({r['draw']})",
                (r["d_x"], r["d_y"]),
                fontsize=6,
                xytext=(4, 3),
                textcoords="offset points",
            )
    ax.scatter([ex.total[0]], [ex.total[1]], marker="*", s=160, color="0.1", label="Global (sum g)")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.legend(fontsize="x-small")
    ax.set_title("Fig. 1(b) · Example 3.2: every estimate, N = 3, K = 2")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# Synthetic(0, 0): Figs 2, 3, 6 and 7


def _size_bars(ax: plt.Axes, sizes: np.ndarray, ylabel: str) -> None:
    """The clients' data sizes, largest first, on a log scale (Fig. 3(a))."""
    ax.bar(np.arange(sizes.size), np.sort(sizes)[::-1], color=plotting.style("kvib").color)
    ax.set_yscale("log")
    ax.set_xlabel("client (sorted by size)")
    ax.set_ylabel(ylabel)


def _log_axis(ax: plt.Axes, ylabel: str, *, legend: bool = True) -> None:
    """A panel of a curve against rounds on a log scale."""
    ax.set_yscale("log")
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel)
    if legend:
        ax.legend(fontsize="x-small")


def print_synthetic_sizes(train_sizes: np.ndarray, test_samples: int) -> None:
    """Fig. 3(a)'s data: the clients' training samples, the largest clients' shares lambda_i
    and the weight lambda_max N / K of the largest client under unbiased uniform sampling."""
    share = kr.largest_shares(train_sizes)
    print(f"training samples: {train_sizes.sum()}, test samples: {test_samples}")
    print(
        f"per client (training): min {train_sizes.min()}, median {np.median(train_sizes):.0f}, "
        f"max {train_sizes.max()}"
    )
    print(f"share of the largest 1 / 10 clients: {share[0]:.3f} / {share[:10].sum():.3f}")
    print(
        "weight of the largest client under unbiased uniform sampling, lambda_max N / K: "
        f"{share[0] * 100 / 10:.2f} (K = 10)"
    )


def plot_fig3a(train_sizes: np.ndarray):
    """Fig. 3(a): the clients' training samples, n_i = floor(LogNormal(4, 2)) + 50."""
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    _size_bars(ax, train_sizes, "training samples")
    ax.set_title("Fig. 3(a) · Synthetic(0, 0) client sizes, floor(LogNormal(4, 2)) + 50")
    fig.tight_layout()
    return fig


def _rounds(settings: Mapping[str, Any]) -> np.ndarray:
    return np.arange(1, settings["rounds"] + 1)


def print_fig2_table(fig2: Sequence[Any], settings: Mapping[str, Any]) -> None:
    """Fig. 2's runs: the summary table of every sampler at K
    (:func:`aoi_fl.evidence.kvib.results.summary_table`, means over seeds)."""
    table = kr.summary_table(fig2, kx.SYNTHETIC_TARGET)
    print(
        f"{len(fig2)} runs; means over {settings['seeds']} seeds; variance = eq. 2 closed form; "
        f"target test accuracy {kx.SYNTHETIC_TARGET:.0%} (NaN: never reached)"
    )
    print(
        table.drop(columns=["K", "gamma scale"]).to_string(
            index=False, float_format="{:.4g}".format
        )
    )


def plot_fig2(fig2: Sequence[Any], settings: Mapping[str, Any]):
    """Fig. 2: cumulative dynamic regret (eq. 8; not drawn for the optimum, its comparator),
    variance (eq. 2) and test loss against rounds, every sampler at K (mean over seeds, band:
    min-max)."""
    groups = kr.curves_by_label(fig2)
    k, rounds = settings["k"], _rounds(settings)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    for name in kx.FIG2_SAMPLERS:
        st = plotting.style(name)
        runs = groups[(name, k, None)]
        if name != "optimal":  # its regret is 0 by definition
            plotting.plot_band(axes[0], rounds, kr.stacked(runs, "regret"), st.color, st.label)
        plotting.plot_band(axes[1], rounds, kr.stacked(runs, "variance"), st.color, st.label)
        plotting.plot_band(
            axes[2], runs[0]["eval_round"], kr.stacked(runs, "test_loss"), st.color, st.label
        )
    for ax, ylabel in zip(
        axes,
        (
            "cumulative dynamic regret (eq. 8)",
            "variance E||d - sum lambda g||^2 (eq. 2)",
            "test loss",
        ),
        strict=True,
    ):
        _log_axis(ax, ylabel, legend=False)
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize="x-small")
    fig.suptitle(
        f"Fig. 2 · Synthetic(0, 0), N = 100, K = {k}; mean over {settings['seeds']} seeds, "
        "band: min-max",
        fontsize="medium",
    )
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


#: the K grid's columns the synthetic notebook prints, samplers by K
K_GRID_COLUMNS = ("regret", "regret after T/10", kr.VARIANCE, "final test loss")


def print_k_grid(grid: Sequence[Any], settings: Mapping[str, Any]) -> None:
    """The K grid (Figs 3(b), 6, 7): each column of :data:`K_GRID_COLUMNS`, samplers by K."""
    table = kr.summary_table(grid)
    print(
        f"K grid {settings['k_grid']} (ours; the paper gives none), "
        f"{settings['grid_seeds']} seed(s) each"
    )
    for column in K_GRID_COLUMNS:
        print(f"\n{column}:")
        print_table(kr.by_k(table, column), "{:.4g}")


def plot_k_grid(grid: Sequence[Any], settings: Mapping[str, Any]):
    """Figs 3(b), 6 and 7: each sampler's regret against rounds, one line per K (K-Vib: Fig.
    3(b); the baselines: Fig. 6), and every sampler's variance (eq. 2, mean over rounds)
    against K (Fig. 7)."""
    groups, variance = kr.curves_by_label(grid), kr.by_k(kr.summary_table(grid), kr.VARIANCE)
    ks, rounds = settings["k_grid"], _rounds(settings)
    shades = plt.cm.viridis(np.linspace(0.1, 0.85, len(ks)))
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    baselines = [s for s in kx.GRID_SAMPLERS if s != "kvib"]
    panels = [("kvib", axes[0, 0], "Fig. 3(b) · K-Vib")] + [
        (name, ax, f"Fig. 6 · {plotting.style(name).label}")
        for name, ax in zip(baselines, axes.flat[1:], strict=False)
    ]
    for name, ax, title in panels:
        for k, color in zip(ks, shades, strict=True):
            plotting.plot_band(
                ax, rounds, kr.stacked(groups[(name, k, None)], "regret"), color, f"K = {k}"
            )
        ax.set_title(title)
        _log_axis(ax, "cumulative dynamic regret")
    ax = axes[1, 2]
    for name in kx.GRID_SAMPLERS:
        st = plotting.style(name)
        var = [variance.loc[name, k] for k in ks]
        ax.plot(ks, var, marker=st.marker, color=st.color, label=st.label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.minorticks_off()
    ax.set_xlabel("K")
    ax.set_ylabel("variance (eq. 2), mean over rounds")
    ax.set_title("Fig. 7 · variance against K")
    ax.legend(fontsize="x-small")
    fig.suptitle(
        f"Figs 3(b), 6, 7 · regret and variance over K (grid ours), "
        f"{settings['grid_seeds']} seed(s)",
        fontsize="medium",
    )
    fig.tight_layout()
    return fig


def print_gamma_grid(gamma: Sequence[Any], settings: Mapping[str, Any]) -> None:
    """Fig. 3(c)'s runs: K-Vib with theta = 0.3 and gamma scaled around its default, the
    summary table by scale."""
    table = kr.summary_table(gamma)
    print(
        f"K-Vib, K = {settings['k']}, theta = {kx.SENSITIVITY_THETA}, gamma = scale * G^2 N / "
        f"(K theta); scales {settings['gamma_scales']} (ours)"
    )
    print_table(table.drop(columns=["sampler", "K"]), "{:.4g}", index=False)


def plot_fig3c(gamma: Sequence[Any], settings: Mapping[str, Any]):
    """Fig. 3(c): K-Vib's regret (eq. 8) and variance (eq. 2) against rounds, one line per
    gamma scale."""
    groups = kr.curves_by_label(gamma)
    k, rounds, scales = settings["k"], _rounds(settings), settings["gamma_scales"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for scale, color in zip(scales, plt.cm.plasma(np.linspace(0.1, 0.8, len(scales))), strict=True):
        runs = groups[("kvib", k, scale)]
        for ax, key in zip(axes, ("regret", "variance"), strict=True):
            plotting.plot_band(ax, rounds, kr.stacked(runs, key), color, f"gamma x {scale:g}")
    for ax, ylabel in zip(axes, ("cumulative dynamic regret", "variance (eq. 2)"), strict=True):
        _log_axis(ax, ylabel)
    fig.suptitle(f"Fig. 3(c) · K-Vib, theta = {kx.SENSITIVITY_THETA}, K = {k}", fontsize="medium")
    fig.tight_layout()
    return fig


def print_synthetic_numbers(s: kr.SyntheticRuns) -> None:
    """The numbers the synthetic notebook's Reading cites, below the ledger's verdicts: the runs in
    which FedAvg diverged, Fig. 2's means, the variance over the last tenth of the rounds against
    the optimum's, K-Vib's regret over K with its log-log slope (Theorem 5.2's rate: -4/3), the
    gamma sensitivity, A17's uniform ISP against uniform sampling, realised against
    closed-form variance, and K-Vib's regret against the self-normalised uniform's."""
    print(
        f"\nRuns in which FedAvg diverged (test loss above {kr.DIVERGENCE_FACTOR:g}x the initial "
        "model's): "
        + ("; ".join(f"{name} at K = {sorted(v)}" for name, v in s.diverged.items()) or "none")
    )
    row, var = s.fig2_table, kr.VARIANCE
    target = f"rounds to {kx.SYNTHETIC_TARGET:.0%}"
    print(
        f"\nFig. 2, means over {s.settings['seeds']} seeds (regret | after T/10 | variance | "
        f"final test loss | {target}):"
    )
    for name in kx.FIG2_SAMPLERS:
        print(
            f"  {name}: {row.loc[name, 'regret']:.3g} | {row.loc[name, 'regret after T/10']:.3g} | "
            f"{row.loc[name, var]:.3g} | {row.loc[name, 'final test loss']:.3g} | "
            f"{row.loc[name, target]:.0f}"
        )
    late = {name: s.late_variance(name) for name in ("kvib", "vrb", "optimal")}
    print(
        f"Last tenth of the rounds: K-Vib {late['kvib'] / late['optimal']:.2f}x and VRB "
        f"{late['vrb'] / late['optimal']:.2f}x the optimum's variance"
    )
    kvr = s.by_k("regret").loc["kvib"]
    print(
        "Fig. 3(b): K-Vib's regret by K: "
        + ", ".join(f"K={k}: {v:.3g}" for k, v in kvr.items())
        + f"; log-log slope {log_log_slope(kvr.index, kvr):.2f} (Theorem 5.2's rate: -4/3)"
    )
    g = s.gamma_table
    print(
        f"Fig. 3(c): over the gamma scales regret max/min "
        f"{g['regret'].max() / g['regret'].min():.2f}, "
        f"variance max/min {g[var].max() / g[var].min():.2f}"
    )
    print(
        "A17: variance of uniform ISP / uniform without replacement (same p = K/N): first tenth "
        f"{s.early_variance('uniform_isp') / s.early_variance('uniform_unbiased'):.3f}, all "
        f"rounds {row.loc['uniform_isp', var] / row.loc['uniform_unbiased', var]:.3f}"
    )
    consistency = {name: s.consistency(name) for name in ("kvib", "vrb", "optimal")}
    print(
        "Consistency (ours): mean realised squared error / closed form, all rounds | after "
        "T/10: "
        + ", ".join(
            f"{name} {whole:.2f} | {after:.2f}" for name, (whole, after) in consistency.items()
        )
    )
    print(
        "\nK-Vib's regret / self-normalised uniform's: "
        f"{row.loc['kvib', 'regret'] / row.loc['uniform_normalised', 'regret']:.3f}; / uniform "
        f"probabilities on K-Vib's own feedback: {row.loc['kvib', 'regret / uniform-p regret']:.3f}"
    )


# ---------------------------------------------------------------------------------------------
# The MNIST substitute for Fig. 4


def print_mnist_partition(sizes: np.ndarray, hist: np.ndarray) -> None:
    """The substitute's partition (:func:`aoi_fl.evidence.kvib.results.client_classes`): the
    clients' sizes, the share of the largest 10% and of the largest client, and how much of a
    client's data its most frequent class holds on average."""
    share = kr.largest_shares(sizes)
    print(
        f"client sizes: min {sizes.min()}, median {np.median(sizes):.0f}, max {sizes.max()}; "
        f"the largest 10% hold {share[:10].sum():.1%}, the largest client {share[0]:.1%}"
    )
    print(f"mean share of a client's most frequent class: {(hist.max(1) / hist.sum(1)).mean():.2f}")


def plot_mnist_partition(sizes: np.ndarray, hist: np.ndarray):
    """The substitute's partition: the clients' sizes (lognormal, sigma = 2), and the class mix
    (Dirichlet(0.5) per client) of the 30 largest clients."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 3.4))
    _size_bars(ax, sizes, "training images")
    order = np.argsort(sizes)[::-1][:30]
    bottom = np.zeros(order.size)
    for c in range(hist.shape[1]):
        bx.bar(np.arange(order.size), hist[order, c] / sizes[order], bottom=bottom, width=0.9)
        bottom += hist[order, c] / sizes[order]
    bx.set_xlabel("the 30 largest clients")
    bx.set_ylabel("class mix")
    fig.suptitle(
        "MNIST substitute: lognormal(2) sizes, Dirichlet(0.5) class mix per client",
        fontsize="medium",
    )
    fig.tight_layout()
    return fig


def plot_mnist_accuracy(results: Sequence[Any], settings: Mapping[str, Any]):
    """The substitute for Fig. 4: test accuracy (near the target) and test loss against rounds,
    every sampler (mean over seeds, band: min-max)."""
    groups = kr.curves_by_label(results)
    runs = {name: groups[(name, kx.MNIST_K, None)] for name in settings["samplers"]}
    target = settings["target"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    curves = {
        name: (group[0]["eval_round"], kr.stacked(group, "test_accuracy"))
        for name, group in runs.items()
    }
    plotting.plot_accuracy(axes[0], curves, target)
    axes[0].set_ylim(max(0.0, target - 0.25), min(1.0, target + 0.08))
    for name, group in runs.items():
        st = plotting.style(name)
        plotting.plot_band(
            axes[1], group[0]["eval_round"], kr.stacked(group, "test_loss"), st.color, st.label
        )
    _log_axis(axes[1], "test loss", legend=False)
    axes[0].legend(fontsize="x-small", loc="lower right")
    fig.suptitle(
        f"MNIST substitute for Fig. 4 · {settings['model']['name']}, K = {kx.MNIST_K} of "
        f"{kx.MNIST_CLIENTS}; mean over {settings['seeds']} seeds, band: min-max",
        fontsize="medium",
    )
    fig.tight_layout()
    return fig


def print_mnist_table(table, settings: Mapping[str, Any]) -> None:
    """The substitute's table (:func:`aoi_fl.evidence.kvib.results.speedup_table`) next to the
    speed-ups the paper reports on FEMNIST (Fig. 4)."""
    print(
        f"rounds to {settings['target']:.0%} test accuracy: mean over the seeds that reach it "
        f"(of {settings['seeds']})"
    )
    print_table(table.drop(columns=["K", "gamma scale"]), "{:.3g}")
    print(
        f"\npaper (FEMNIST, CNN, target {kx.PAPER_FEMNIST_TARGET:.0%}): K-Vib "
        + ", ".join(f"{v:g}x faster on {k}" for k, v in kx.PAPER_FEMNIST_SPEEDUP.items())
        + " than the baselines; VRB and MABS no better than uniform"
    )
