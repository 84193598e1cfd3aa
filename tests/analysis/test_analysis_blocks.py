"""Seeds as blocks: which streams a seed shares, the cluster bootstrap, paired comparisons, and the
measured seed correlations (docs/study.md, "Seeds as blocks")."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import stdtrit

from analysis.data.clock_tables import build_tables
from analysis.fits.exponents import compare_conditions, fit_conditions
from analysis.fits.fit import fit_power_law
from analysis.fits.seed_blocks import MIN_SEEDS, resample_weights, seed_correlations
from analysis.synthetic import SyntheticSpec, records


def _runs(seeds=5, corr=0.0, stream=0, lr=1e-6, alpha=0.3, sizes=(32, 64, 128, 256), pair=0.0):
    spec = SyntheticSpec(
        sizes=sizes, seeds=seeds, alpha=alpha, gamma=None, seed_corr=corr, seed_stream=stream, seed_size_corr=pair,
        seed=int(lr * 1e7), overrides=(("lr.ref_lr", lr),), b_noise=None, targets=(0.3,),
    )  # fmt: skip
    return spec


def test_cluster_weights_move_a_seed_as_a_whole_and_pair_conditions():
    tables = build_tables(records(_runs(lr=1e-6), _runs(lr=1e-5)))
    runs = tables.runs
    a = runs[runs["lr.ref_lr"] == 1e-6]
    b = runs[runs["lr.ref_lr"] == 1e-5]
    Wa, mode, clusters, note = resample_weights(a, 200, 0, "seeds", "a")
    Wb, *_ = resample_weights(b, 200, 0, "seeds", "b")
    assert mode == "seeds" and clusters == 5 and note == ""
    seeds = a["seed"].to_numpy()
    for s in np.unique(seeds):  # every run of a seed gets the seed's count, at every size
        cols = Wa[:, seeds == s]
        assert (cols == cols[:, :1]).all()
    assert (Wa.sum(1) == len(a)).all()  # 5 seeds drawn x 4 sizes
    # the same seed set: the same draws in both conditions (paired)
    order_a = np.lexsort((a["B"].to_numpy(), seeds))
    order_b = np.lexsort((b["B"].to_numpy(), b["seed"].to_numpy()))
    assert np.array_equal(Wa[:, order_a], Wb[:, order_b])
    # too few seeds, or a size held by one seed: the within-size bootstrap with a note
    few = build_tables(records(_runs(seeds=MIN_SEEDS - 1))).runs
    W, mode, clusters, note = resample_weights(few, 50, 0, "seeds", "x")
    assert mode == "runs" and clusters is None and f"< {MIN_SEEDS}" in note
    thin = a[~((a["B"] == 64) & (a["seed"] != 2))]
    assert resample_weights(thin, 50, 0, "seeds", "x")[1] == "runs"
    assert resample_weights(a, 50, 0, "runs", "x")[1] == "runs"
    # a seed missing a size (unequal seed sets): still blocks, each seed bringing the runs it holds
    gap = a[~((a["seed"] == 2) & (a["B"] == 64))]
    W, mode, clusters, note = resample_weights(gap, 200, 0, "seeds", "x")
    assert mode == "seeds" and clusters == 5 and "unequal" in note
    gseeds = gap["seed"].to_numpy()
    for s in np.unique(gseeds):
        cols = W[:, gseeds == s]
        assert (cols == cols[:, :1]).all()
    held = np.array([(gseeds == s).sum() for s in np.unique(gseeds)])  # runs each seed holds
    draws = np.stack([W[:, gseeds == s][:, 0] for s in np.unique(gseeds)], 1)  # [n_boot, seeds]
    assert (draws.sum(1) == 5).all() and np.array_equal(draws @ held, W.sum(1))


def test_cluster_inflation_is_the_t_pivot_of_a_mean_over_seeds():
    runs = build_tables(records(_runs())).runs
    W, _, S, _ = resample_weights(runs, 300, 0, "seeds", "c")
    fit = fit_power_law(
        runs["B"], runs["target:0.3"], runs["target:0.3:censored"], lower=runs["target:0.3:lower"],
        weights=W, n_clusters=S,
    )  # fmt: skip
    assert fit.inflation == pytest.approx(np.sqrt(5 / 4) * stdtrit(4, 0.975) / 1.959963984540054)


def test_paired_difference_is_narrower_when_conditions_share_a_seed_effect():
    # a (seed, B) effect shared by the two conditions moves both slopes alike: the paired (seed)
    # bootstrap cancels it in the difference, the independent within-size bootstraps do not
    tables = build_tables(
        records(_runs(seeds=6, pair=0.9, lr=1e-6), _runs(seeds=6, pair=0.9, lr=1e-5, alpha=0.4))
    )
    widths = {}
    for mode in ("seeds", "runs"):
        exp, fits = fit_conditions(tables, n_boot=400, seed=0, joint_model=False, resample=mode)
        comp = compare_conditions(exp, fits, tables.varying_keys)
        row = comp[comp["clock"] == "target:0.3"].iloc[0]
        widths[mode] = row["ci_high"] - row["ci_low"]
        assert set(exp["resampling"]) == {mode}
    assert widths["seeds"] < 0.8 * widths["runs"]


def test_seed_correlations_are_measured():
    strong = build_tables(records(_runs(seeds=8, corr=0.8), _runs(seeds=8, corr=0.8, lr=1e-5)))
    _, fits = fit_conditions(strong, n_boot=50, seed=0, joint_model=False)
    cors = seed_correlations(strong, fits)
    sizes = cors[(cors["kind"] == "sizes") & (cors["clock"] == "target:0.3")]
    between = cors[(cors["kind"] == "conditions") & (cors["clock"] == "target:0.3")]
    assert len(sizes) == 2 and (sizes["correlation"] > 0.4).all()
    assert len(between) == 1 and between["correlation"].iloc[0] > 0.4
    none = build_tables(records(_runs(seeds=8, corr=0.0), _runs(seeds=8, corr=0.0, lr=1e-5)))
    _, fits0 = fit_conditions(none, n_boot=50, seed=0, joint_model=False)
    cors0 = seed_correlations(none, fits0)
    assert cors0[cors0["clock"] == "target:0.3"]["correlation"].abs().mean() < 0.35


def test_common_exponent_stays_between_the_targets_when_gls_would_extrapolate():
    # two targets whose replicates are almost perfectly correlated with unequal spread (what a seed
    # bootstrap over few seeds gives): GLS would put a negative weight on one and land outside; the
    # fixed inverse-variance weights (from the fits' standard errors) stay a convex combination
    from analysis.fits.cross import common_exponent
    from analysis.fits.fit import FitResult

    rng = np.random.default_rng(0)
    z = rng.standard_normal(1000)
    a = FitResult(exponent=0.20, se=0.10, boot_slopes=0.20 + 0.10 * z + 0.005 * rng.standard_normal(1000))
    b = FitResult(exponent=0.30, se=0.05, boot_slopes=0.30 + 0.05 * z + 0.005 * rng.standard_normal(1000))
    out = common_exponent([a, b])
    assert 0.20 <= out["exponent_common"] <= 0.30
    w = [float(x) for x in out["weights"].split()]
    assert w == pytest.approx([0.2, 0.8], abs=1e-3) and abs(sum(w) - 1) < 1e-9
    # without a standard error or a finite interval for a target: equal weights, said so
    a.se = np.nan
    equal = common_exponent([a, b])
    assert equal["weights"] == "0.500 0.500" and "equal weights" in equal["note"]
