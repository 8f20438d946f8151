"""The checks of the K-Vib notebooks: what each notebook prints and its Reading says, asserted.

Each ``check_*`` function raises AssertionError with the numbers at fault, or returns None. The
checks of the Readings' numbers are about the committed ``cpu`` run: a notebook skips them in a
profile that does not give those numbers (:func:`notebook_11` and its siblings print why), and
``tests/kvib/test_notebook_checks.py`` runs them on the ``cpu`` numbers (the committed cache).
The verdicts a notebook prints are the ledger's rows (:mod:`aoi_fl.evidence.kvib.claims`): that they
are the ones its Reading states, which the "checks passed" lines name, is asserted with the ledger's
tests (``tests/kvib/test_claims.py``), not here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from aoi_fl.evidence.kvib import claims as kc
from aoi_fl.evidence.kvib import experiments as kx
from aoi_fl.evidence.kvib import results as kr
from aoi_fl.kvib import estimators
from aoi_fl.pipeline import runs
from aoi_fl.pipeline.claims import log_log_slope
from aoi_fl.pipeline.profiles import traits


def _profile_checks(
    profile: str, applies: bool, run: Callable[[], None], skipped: Mapping[str, str]
) -> None:
    """Run the checks where they ``applies`` (a trait of ``profile``, :func:`~aoi_fl.pipeline.
    profiles.traits`: mostly ``readings``, the committed ``cpu`` run's numbers), or say why
    ``profile`` skips them (``skipped[profile]``)."""
    if applies:
        run()
    else:
        print(f"skipped in {profile}: {skipped[profile]}")


def _check_cached_as(result: Any, config: dict[str, Any], name: str) -> None:
    assert result.config == runs.resolve_config(config), (
        f"{name}: cached result of another configuration"
    )


# ---------------------------------------------------------------------------------------------
# Fig. 1


def check_fig1a(g: np.ndarray, mse, ks: Sequence[int]) -> None:
    """Fig. 1(a) (Example 3.1), in every profile: the repetitions agree with the closed forms
    (|z| < 4); eq. 4's p sums to K within [0, 1] (8 vectors capped at p = 1 for K = 30, none for
    K = 10) and eq. 5's K q to K; ISP < RSP < uniform at every K, each falling with K; the
    table's closed forms are the ledger's (:func:`aoi_fl.evidence.kvib.claims.example_3_1_mse`, same
    vectors)."""
    assert (mse["z"].abs() < 4).all(), (
        f"|z| up to {mse['z'].abs().max():.2f}: repetitions far from the closed form"
    )
    a = np.linalg.norm(g, axis=1)
    labels = list(kr.EXAMPLE_3_1_PROCEDURES)
    for k in ks:
        p = estimators.optimal_isp_probabilities(a, k)
        assert abs(p.sum() - k) < 1e-9 and p.min() >= 0 and p.max() <= 1 + 1e-12, (
            f"K = {k}: eq. 4's p sums to {p.sum():.9f} within [{p.min():.3g}, {p.max():.3g}]"
        )
        assert abs(estimators.optimal_rsp_probabilities(a, k).sum() - k) < 1e-9, (
            f"K = {k}: eq. 5's K q does not sum to K"
        )
        by = mse[mse["K"] == k].set_index("procedure")
        for col in ("MSE (closed form)", "MSE (repetitions)"):
            uni, rsp, iso = (by.loc[label, col] for label in labels)
            assert iso < rsp < uni, (
                f"K = {k}, {col}: ISP {iso:.4g}, RSP {rsp:.4g}, uniform {uni:.4g}: not in that "
                "order"
            )
    by_k = mse.pivot(index="procedure", columns="K", values="MSE (closed form)")
    assert (by_k[max(ks)] < by_k[min(ks)]).all(), (
        f"closed-form MSE does not fall with K: {by_k.to_dict()}"
    )
    closed = mse.set_index(["K", "procedure"])["MSE (closed form)"]
    for k in ks:
        ledger = kc.example_3_1_mse(g, k)
        for label, (_, key) in kr.EXAMPLE_3_1_PROCEDURES.items():
            assert np.isclose(closed[(k, label)], ledger[key], rtol=1e-12), (
                f"K = {k}, {label}: table {closed[(k, label)]:.6g}, ledger {ledger[key]:.6g}"
            )
    capped = mse.set_index(["K", "procedure"])["clients at p = 1"]
    assert capped[(30, kr.ISP_LABEL)] == 8 and capped[(10, kr.ISP_LABEL)] == 0, (
        f"vectors at p = 1: {capped[(10, kr.ISP_LABEL)]:.0f} at K = 10, "
        f"{capped[(30, kr.ISP_LABEL)]:.0f} at K = 30"
    )


def check_fig1a_repetitions(mse) -> None:
    """Fig. 1(a) with the 1,000 repetitions of the ``cpu`` and ``paper`` profiles: every mean
    squared error over the repetitions lies within 2 standard errors of its closed form (the
    Reading says 1.5)."""
    assert (mse["z"].abs() < 2).all(), (
        f"|z| up to {mse['z'].abs().max():.2f}: the repetitions are not within 2 standard errors "
        "of the closed forms (the Reading says 1.5)"
    )


def check_example_3_2(ex: kr.Example32) -> None:
    """Fig. 1(b) (Example 3.2), exact: the probabilities the paper prints (from the norms, which
    the text calls the squared norms), the paper's numbers as the Reading quotes them, unbiased
    enumerations whose variance is the closed form's, P(|S| = 1) = P(|S| = 3) = 3/16 for ISP,
    ISP's variance 6 and RSP's over 4x that, the K = 3 error of 0.355 and ISP's p = 1 at
    K = 3."""
    p_isp, p_rsp = ex.probabilities["ISP"], ex.probabilities["RSP"]
    assert (
        np.allclose(ex.norms, kc.PAPER_EX32_SQ_NORMS)
        and np.allclose(p_isp, kc.PAPER_EX32_P_ISP)
        and np.allclose(p_rsp, 2 * np.array(kc.PAPER_EX32_Q_RSP))
    ), (
        f"norms {ex.norms}, ISP p {p_isp}, RSP p {p_rsp}: not the paper's printed norms, "
        "p*_ISP and K q"
    )
    assert (
        kc.PAPER_EX32_SQ_NORMS == (1.0, 3.0, 6.0)
        and kc.PAPER_EX32_K3_D == (6.4, 5.9)
        and kc.PAPER_EX32_K3_ERROR == 0.6
    ), "the paper's numbers in the library are not those the Reading quotes"
    variance = {}
    for name, table in ex.outcomes.items():
        prob = table["probability"].to_numpy()
        assert abs(prob.sum() - 1) < 1e-12, (
            f"{name}: outcome probabilities sum to {prob.sum():.15f}"
        )
        mean, variance[name] = ex.moments(name)
        assert np.allclose(mean, ex.total, atol=1e-12), (
            f"{name}: E[d] = {mean}, not sum g = {ex.total}"
        )
        closed = ex.closed_form(name)
        assert abs(variance[name] - closed) < 1e-9, (
            f"{name}: variance {variance[name]:.6f}, closed form {closed:.6f}"
        )
    sizes = ex.isp_sizes()
    assert np.allclose([sizes[1], sizes[3]], 3 / 16), (
        f"ISP: P(|S| = 1) = {sizes[1]}, P(|S| = 3) = {sizes[3]}, not 3/16"
    )
    assert abs(variance["ISP"] - 6) < 1e-9 and variance["RSP"] / variance["ISP"] > 4, (
        f"variances ISP {variance['ISP']:.4f}, RSP {variance['RSP']:.4f}: not 6 and over 4x more"
    )
    full_error = float(np.sum((ex.k3_rsp - ex.total) ** 2))
    assert abs(full_error - 0.3552) < 1e-3, (
        f"RSP with K = 3: error {full_error:.4f}, not the 0.355 the Reading gives"
    )
    assert np.array_equal(estimators.optimal_isp_probabilities(ex.norms, 3), np.ones(3)), (
        "ISP with K = 3: p is not all ones"
    )


def check_scale_curve(curve, mse, scale_sigma: float) -> None:
    """Fig. 1(a) against the LogNormal scale
    (:func:`aoi_fl.evidence.kvib.claims.example_3_1_curve`): at the Fig. 1 notebook's scale the
    curve is the table's closed forms (the same vectors), and the Reading's scale ranges: RSP / ISP
    below 1.5 at K = 10 for scale 0.5-1.3 only, above 2 at K = 30 for 0.8-2.0 only, and ISP below
    both RSP and uniform at every scale."""
    closed = mse.set_index(["K", "procedure"])["MSE (closed form)"]
    at = curve[np.isclose(curve["scale"], scale_sigma)]
    assert len(at) == mse["K"].nunique(), f"the curve has no point at scale {scale_sigma:g}"
    for k, row in at.set_index("K").iterrows():
        for label, (_, key) in kr.EXAMPLE_3_1_PROCEDURES.items():
            table = closed[(k, label)]
            assert np.isclose(row[key], table, rtol=1e-12), (
                f"scale {scale_sigma:g}, K = {k}, {label}: curve {row[key]:.6g}, table {table:.6g}"
            )
    ratio = curve.set_index(["K", "scale"])["RSP / ISP"]
    below = [s for (k, s), r in ratio.items() if k == 10 and r < kc.COMPARABLE_RATIO]
    above = [s for (k, s), r in ratio.items() if k == 30 and r > kc.OUTPERFORMS_RATIO]
    scales = kx.EXAMPLE_3_1_SCALES
    assert below == [s for s in scales if s <= 1.3], (
        f"K = 10: RSP / ISP below {kc.COMPARABLE_RATIO} at scales {below}, not 0.5-1.3"
    )
    assert above == [s for s in scales if s >= 0.8], (
        f"K = 30: RSP / ISP above {kc.OUTPERFORMS_RATIO} at scales {above}, not 0.8-2.0"
    )
    lowest = curve["next best / ISP"].min()
    assert lowest > 1, f"min(RSP, uniform) / ISP down to {lowest:.3g}: ISP not the lowest"


def notebook_11(
    g: np.ndarray, mse, ex: kr.Example32, curve, cfg: Mapping[str, Any], profile: str
) -> None:
    """The Fig. 1 notebook's checks: :func:`check_fig1a`, :func:`check_scale_curve` and
    :func:`check_example_3_2` in every profile (``cfg``: Example 3.1's settings),
    :func:`check_fig1a_repetitions` where the profile runs 1,000 repetitions."""
    check_fig1a(g, mse, cfg["ks"])
    check_scale_curve(curve, mse, cfg["scale_sigma"])
    check_example_3_2(ex)
    _profile_checks(
        profile,
        not traits(profile).quick,
        lambda: check_fig1a_repetitions(mse),
        {
            "smoke": "|z| < 2 for every K and procedure (100 repetitions; the Reading's "
            "agreement of repetitions and closed forms is about the 1,000 of the real profiles)"
        },
    )
    print(
        "checks passed: repetitions against closed forms, eq. 4 and eq. 5 probabilities, the "
        "order ISP < RSP < uniform, the ledger's closed forms, the ratios' scale ranges, "
        "Example 3.2's enumeration, probabilities, variances and K = 3 error"
    )


# ---------------------------------------------------------------------------------------------
# Synthetic(0, 0): Figs 2, 3, 6 and 7


def check_synthetic_sizes(train_sizes: np.ndarray) -> None:
    """Fig. 3(a): the shares lambda_i sum to one; the largest client's weight under unbiased
    uniform sampling, lambda_max N / K, is 4.11 at K = 10 and 1.03 at K = 40 (the Reading)."""
    share = kr.largest_shares(train_sizes)
    assert abs(share.sum() - 1) < 1e-12, f"lambda sums to {share.sum():.15f}, not 1"
    assert round(share[0] * 100 / 10, 2) == 4.11 and round(share[0] * 100 / 40, 2) == 1.03, (
        f"lambda_max N / K = {share[0] * 10:.3f} (K = 10), {share[0] * 100 / 40:.3f} (K = 40), "
        "not 4.11 and 1.03"
    )


def check_synthetic_runs(s: kr.SyntheticRuns, profile: str) -> None:
    """Every planned run of ``profile``'s grids is there, cached under its own configuration,
    with all its rounds and a finite regret and variance. The regret's comparator (the ISP
    optimum of eq. 4) is never beaten by an ISP sampler (p <= 1), so their regret (eq. 8) never
    falls, and the optimum's own regret is 0; the uniform samplers' regret is that of uniform
    probabilities on their own feedback."""
    rounds = s.settings["rounds"]
    for label, planned, done in (
        ("Fig. 2", kx.fig2_grid(profile), s.fig2),
        ("K grid", kx.k_grid(profile), s.grid),
        ("gamma grid", kx.gamma_grid(profile), s.gamma),
    ):
        assert len(done) == len(planned), f"{label}: {len(done)} results for {len(planned)} runs"
        for config, result in zip(planned, done, strict=True):
            name = f"{label}: {kr.run_label(result)} seed {config['training']['seed']}"
            _check_cached_as(result, config, name)
            arr = kr.run_arrays(result)
            assert len(arr["regret"]) == rounds and arr["eval_round"][-1] == rounds, (
                f"{name}: {len(arr['regret'])} rounds recorded, last evaluation "
                f"{arr['eval_round'][-1]}, not {rounds}"
            )
            assert np.isfinite(arr["regret"]).all() and np.isfinite(arr["variance"]).all(), (
                f"{name}: non-finite regret or variance"
            )
            step = np.diff(arr["uniform_regret"], prepend=0.0).min()
            assert step >= -1e-9, (
                f"{name}: uniform probabilities' regret falls by {-step:.3g} in a round"
            )
            sampler = kr.run_label(result)[0]
            if sampler not in ("mabs", "vrb"):  # with replacement: K q_i may exceed 1
                step = np.diff(arr["regret"], prepend=0.0).min()
                assert step >= -1e-9, (
                    f"{name}: regret falls by {-step:.3g} in a round, below the optimum"
                )
            if sampler == "optimal":
                assert np.abs(arr["regret"]).max() < 1e-9, (
                    f"{name}: the optimum's regret reaches {np.abs(arr['regret']).max():.3g}"
                )
            if sampler.startswith("uniform"):
                ratio = arr["regret"][-1] / arr["uniform_regret"][-1]
                assert abs(ratio - 1) < 1e-9, (
                    f"{name}: regret / uniform-p regret = {ratio:.12f}, not 1"
                )


def check_synthetic_reading(s: kr.SyntheticRuns) -> None:
    """The synthetic notebook's Reading, numbered as its claims, on the committed ``cpu`` run
    (3 seeds for Fig. 2, one per grid point).

    The runs in which FedAvg diverged are those it names. 1: VRB's mean regret is the lowest,
    K-Vib's above it within VRB's spread. 2: K-Vib's mean variance is the lowest at K = 10 and
    over the last tenth of the rounds below VRB's; in the K grid VRB's is lower below K = 40. 3:
    the samplers near K/N diverge (final test loss above 10), the stable ones end alike (below
    1.1), K-Vib not the lowest; the self-normalised uniform is the fastest and lowest, unbiased
    uniform never reaches 75%. 4-5: every sampler's regret falls with K, K-Vib's at a log-log
    slope of -1.9 and above VRB's at every K. 6: gamma changes the regret and the variance by
    1.2x. 7: uniform ISP's variance is above uniform's. Ours: after the first tenth of the rounds
    the realised squared error averages to the closed form (10%); K-Vib's regret is below the
    self-normalised uniform's and below uniform probabilities' on its own feedback. 8 (Fig. 7):
    K-Vib's variance falls at every step of the K grid, 57x over K = 5-40. 9: the first round's
    aggregate feedback is the largest in 6 of the 12 stable Fig. 2 runs, at least 96.7% of the
    largest in the others, below 1% of it in the diverged ones.
    """
    assert s.diverged == {
        "uniform_unbiased": {5, 10, 20},
        "uniform_isp": {10},
        "mabs": {5, 10, 20},
    }, f"diverged runs {s.diverged}: not those the Reading names"
    row, var, baselines = s.fig2_table, kr.VARIANCE, list(kc.BASELINES)
    reg, variance, loss = row["regret"], row[var], row["final test loss"]
    best = row.loc[baselines, "regret"].idxmin()
    assert best == "vrb" and reg["vrb"] < reg["kvib"] < reg["vrb"] + row.loc["vrb", "regret sd"], (
        f"regret K-Vib {reg['kvib']:.4g}, best baseline {best} {reg[best]:.4g} (sd "
        f"{row.loc[best, 'regret sd']:.3g}): not a loss to VRB within its spread"
    )
    late = {name: s.late_variance(name) for name in ("kvib", "vrb")}
    assert variance["kvib"] < variance[baselines].min() and late["kvib"] < late["vrb"], (
        f"variance K-Vib {variance['kvib']:.4g} against {variance[baselines].min():.4g}; last "
        f"tenth {late['kvib']:.4g} against VRB's {late['vrb']:.4g}"
    )
    ks, kvar = s.settings["k_grid"], s.by_k(var)
    vrb_lower = [k for k in ks if kvar.loc["vrb", k] < kvar.loc["kvib", k]]
    assert vrb_lower == [k for k in ks if k < 40], (
        f"VRB's variance is lower than K-Vib's at K = {vrb_lower}"
    )
    assert loss["kvib"] > loss[baselines].min(), (
        f"K-Vib's final test loss {loss['kvib']:.4g} is the lowest"
    )
    assert (loss[["uniform_unbiased", "uniform_isp", "mabs"]] > 10).all(), (
        f"final test losses {loss.to_dict()}"
    )
    assert (loss[["vrb", "kvib", "optimal"]] < 1.1).all(), f"final test losses {loss.to_dict()}"
    target = f"rounds to {kx.SYNTHETIC_TARGET:.0%}"
    assert loss.idxmin() == "uniform_normalised" == row[target].idxmin(), (
        f"lowest final loss {loss.idxmin()}, fastest to the target {row[target].idxmin()}"
    )
    assert row.loc["uniform_unbiased", "seeds reaching it"] == 0, (
        "unbiased uniform reaches the target"
    )
    _check_k_grid_reading(s)
    _check_sensitivity_and_ours_reading(s)


def _check_k_grid_reading(s: kr.SyntheticRuns) -> None:
    """Claims 4-5 of the synthetic notebook's Reading: every regret falls with K, K-Vib's at a
    log-log slope of -1.9 and above VRB's at every K."""
    kreg = s.by_k("regret")
    kvr = kreg.loc["kvib"]
    slope = log_log_slope(kvr.index, kvr)
    assert np.all(np.diff(kvr.to_numpy()) < 0) and round(slope, 1) == -1.9, (
        f"K-Vib's regret by K {kvr.to_dict()}, log-log slope {slope:.2f}"
    )
    for name in kx.GRID_SAMPLERS:
        assert np.all(np.diff(kreg.loc[name].to_numpy()) < 0), (
            f"{name}'s regret does not fall with K: {kreg.loc[name].to_dict()}"
        )
    assert (kreg.loc["kvib"] > kreg.loc["vrb"]).all(), (
        f"K-Vib's regret {kreg.loc['kvib'].to_dict()} is below VRB's "
        f"{kreg.loc['vrb'].to_dict()} at some K"
    )


def _check_sensitivity_and_ours_reading(s: kr.SyntheticRuns) -> None:
    """Claims 6-9 and ours of the synthetic notebook's Reading: gamma's effect, uniform ISP's
    variance, the realised against the closed-form variance, K-Vib's regret against uniform's, its
    variance over the K grid, and the first round's share of the aggregate feedback."""
    row, var = s.fig2_table, kr.VARIANCE
    reg, variance = row["regret"], row[var]
    kvar = s.by_k(var)
    g = s.gamma_table
    assert (
        round(g["regret"].max() / g["regret"].min(), 1) == 1.2
        and round(g[var].max() / g[var].min(), 1) == 1.2
    ), (
        f"over the gamma scales: regret x{g['regret'].max() / g['regret'].min():.2f}, variance "
        f"x{g[var].max() / g[var].min():.2f}"
    )
    assert variance["uniform_isp"] > variance["uniform_unbiased"], (
        "uniform ISP's variance is not above uniform's"
    )
    for name in ("kvib", "vrb", "optimal"):
        after = s.consistency(name)[1]
        assert abs(after - 1) < 0.1, (
            f"{name}: realised / closed-form variance {after:.3f} after T/10"
        )
    kv_vs_normalised = reg["kvib"] / reg["uniform_normalised"]
    assert kv_vs_normalised < 1 and row.loc["kvib", "regret / uniform-p regret"] < 1, (
        f"K-Vib's regret / self-normalised uniform's {kv_vs_normalised:.3f}, / uniform-p "
        f"{row.loc['kvib', 'regret / uniform-p regret']:.3f}"
    )
    kv_var = kvar.loc["kvib"].to_numpy()
    assert np.all(np.diff(kv_var) < 0) and round(kv_var[0] / kv_var[-1]) == 57, (
        f"K-Vib's variance by K {kvar.loc['kvib'].to_dict()}"
    )
    shares: dict[bool, list[float]] = {True: [], False: []}
    for result in s.fig2:
        arr = kr.run_arrays(result)
        shares[kr.diverged(arr)].append(arr["uniform_cost"][0] / arr["uniform_cost"].max())
    stable = np.array(shares[False])
    assert stable.size == 12 and (stable == 1).sum() == 6 and round(stable.min(), 3) == 0.967, (
        f"first round's share of the largest feedback in the stable runs: {np.round(stable, 4)}"
    )
    assert max(shares[True]) < 0.01, f"diverged runs: {np.round(shares[True], 4)}"


def notebook_12(train_sizes: np.ndarray, s: kr.SyntheticRuns, profile: str) -> None:
    """The synthetic notebook's checks: :func:`check_synthetic_sizes` and
    :func:`check_synthetic_runs` in every profile, :func:`check_synthetic_reading` in the ``cpu``
    profile (the committed run the Reading describes)."""
    check_synthetic_sizes(train_sizes)
    check_synthetic_runs(s, profile)
    settings = s.settings
    _profile_checks(
        profile,
        traits(profile).readings,
        lambda: check_synthetic_reading(s),
        {
            "smoke": "the Reading's verdicts and numbers (divergence of the samplers near K/N, "
            "the K grid's trends, gamma sensitivity, realised against closed-form variance) "
            f"({settings['rounds']} rounds of {settings['n_clients']} clients decide none of "
            "them)",
            "paper": "the Reading's verdicts and numbers (they are the committed cpu run's, 3 "
            "seeds and K grid 5-40; paper runs 5 seeds and another K grid)",
        },
    )
    print(
        f"checks passed: data sizes, {len(s.fig2) + len(s.grid) + len(s.gamma)} runs (configs, "
        "rounds, regret against the optimum, uniform samplers' regret ratio)"
        + (", the Reading's verdicts and numbers" if traits(profile).readings else "")
    )


# ---------------------------------------------------------------------------------------------
# The MNIST substitute for Fig. 4


def check_mnist_partition(sizes: np.ndarray, hist: np.ndarray, settings: Mapping[str, Any]) -> None:
    """The partition (:func:`aoi_fl.evidence.kvib.results.client_classes`): the profile's total of
    images over :data:`~aoi_fl.evidence.kvib.experiments.MNIST_CLIENTS` clients, each at least its
    minimum size, class histograms that add up to the sizes."""
    assert (
        sizes.sum() == settings["total"]
        and sizes.min() >= settings["min_size"]
        and sizes.size == kx.MNIST_CLIENTS
    ), (
        f"{sizes.size} clients, {sizes.sum()} images, smallest {sizes.min()}: not "
        f"{kx.MNIST_CLIENTS}, {settings['total']}, >= {settings['min_size']}"
    )
    assert np.array_equal(hist.sum(1), sizes), (
        "the class histograms do not add up to the client sizes"
    )


def check_mnist_runs(
    configs: Sequence[dict[str, Any]], results: Sequence[Any], table, settings: Mapping[str, Any]
) -> None:
    """Every planned run is there, cached under its own configuration, with all its evaluations
    (round 0 to T) and accuracies in [0, 1]; the samplers of one seed start from the same model
    on the same partition (the pairing); the table
    (:func:`aoi_fl.evidence.kvib.results.speedup_table`) has every sampler with all its seeds."""
    samplers, seeds = settings["samplers"], settings["seeds"]
    assert len(configs) == len(results) == len(samplers) * seeds, (
        f"{len(configs)} configurations, {len(results)} results for {len(samplers)} samplers x "
        f"{seeds} seeds"
    )
    start = {}
    for config, result in zip(configs, results, strict=True):
        arr = kr.run_arrays(result)
        seed = config["training"]["seed"]
        name = f"{kr.run_label(result)[0]} seed {seed}"
        _check_cached_as(result, config, name)
        assert arr["eval_round"][0] == 0 and arr["eval_round"][-1] == settings["rounds"], (
            f"{name}: evaluations from round {arr['eval_round'][0]} to {arr['eval_round'][-1]}, "
            f"not 0 to {settings['rounds']}"
        )
        assert ((arr["test_accuracy"] >= 0) & (arr["test_accuracy"] <= 1)).all(), (
            f"{name}: accuracy outside [0, 1]"
        )
        first = start.setdefault(seed, (arr["test_loss"][0], arr["test_accuracy"][0]))
        assert first == (arr["test_loss"][0], arr["test_accuracy"][0]), (
            f"{name}: initial model's test loss {arr['test_loss'][0]}, not the seed's {first[0]}"
        )
    assert list(table.index) == list(samplers) and (table["seeds"] == seeds).all(), (
        f"table rows {list(table.index)} with seeds {table['seeds'].tolist()}"
    )
    assert (table["seeds reaching it"] <= table["seeds"]).all(), (
        "more seeds reach the target than ran"
    )


def check_mnist_reading(sizes: np.ndarray, table, settings: Mapping[str, Any]) -> None:
    """The MNIST notebook's Reading on the committed ``cpu`` run (softmax regression to 90%,
    5 seeds).

    The partition: the largest 10% of the clients hold 55-65% of the images, the largest
    client's unbiased uniform weight lambda_max N / K is 2.1. 1: every seed reaches the target;
    K-Vib is first on average, faster than unbiased uniform by less than 2x (the paper: 2-3x).
    2: K-Vib has the highest accuracy over the last 10% of the rounds and the lowest final test
    loss. 3: VRB is better than unbiased uniform, MABS in between (means of the rounds to the
    target and of the late accuracy).
    """
    share = kr.largest_shares(sizes)
    weight = share[0] * kx.MNIST_CLIENTS / kx.MNIST_K
    assert 0.55 < share[:10].sum() < 0.65 and round(weight, 1) == 2.1, (
        f"largest 10% hold {share[:10].sum():.3f}, lambda_max N / K = {weight:.2f}"
    )
    target = settings["target"]
    rounds_to, last = table[f"rounds to {target:.0%}"], table["test accuracy, last 10%"]
    assert (table["seeds reaching it"] == settings["seeds"]).all(), (
        f"seeds reaching {target:.0%}: {table['seeds reaching it'].to_dict()}"
    )
    speedup = table.loc["kvib", "speed-up vs uniform_unbiased"]
    assert rounds_to.idxmin() == "kvib" and 1 < speedup < 2, (
        f"rounds to {target:.0%}: {rounds_to.to_dict()}; K-Vib's speed-up over unbiased uniform "
        f"{speedup:.2f}"
    )
    assert last.idxmax() == "kvib" and table["final test loss"].idxmin() == "kvib", (
        f"best late accuracy {last.idxmax()}, lowest final loss {table['final test loss'].idxmin()}"
    )
    assert rounds_to["vrb"] < rounds_to["mabs"] < rounds_to["uniform_unbiased"], (
        f"rounds to {target:.0%}: VRB {rounds_to['vrb']:.1f}, MABS {rounds_to['mabs']:.1f}, "
        f"unbiased uniform {rounds_to['uniform_unbiased']:.1f}"
    )
    assert last["vrb"] > last["mabs"] > last["uniform_unbiased"], (
        f"last-10% accuracy: VRB {last['vrb']:.3f}, MABS {last['mabs']:.3f}, unbiased uniform "
        f"{last['uniform_unbiased']:.3f}"
    )


def notebook_13(
    sizes: np.ndarray,
    hist: np.ndarray,
    configs: Sequence[dict[str, Any]],
    results: Sequence[Any],
    table,
    profile: str,
) -> None:
    """The MNIST notebook's checks: :func:`check_mnist_partition` and :func:`check_mnist_runs` in
    every profile, :func:`check_mnist_reading` in the ``cpu`` profile (the committed run the Reading
    describes)."""
    settings = kx.mnist_settings(profile)
    check_mnist_partition(sizes, hist, settings)
    check_mnist_runs(configs, results, table, settings)
    claims = "the partition's shares, the verdicts and claims 1-3 as the Reading states them"
    _profile_checks(
        profile,
        traits(profile).readings,
        lambda: check_mnist_reading(sizes, table, settings),
        {
            "smoke": f"{claims} ({settings['rounds']} rounds on {settings['total']} images "
            "decide none of them)",
            "paper": f"{claims} (they are the committed cpu run's, softmax regression to 90%; "
            "paper trains the CNN to 97%)",
        },
    )
    print(
        f"checks passed: partition, {len(results)} runs (configs, evaluations, shared initial "
        "models)"
        + (
            ", the verdicts and claims 1-3 as the Reading states them"
            if traits(profile).readings
            else ""
        )
    )
