"""Seeds as blocks: the cluster bootstrap over seed ids, paired comparisons, and the seed correlations.

Runs launched with the same ``seed`` share random streams across rollout sizes and across conditions
(``docs/study.md`` lists which: the task's data order, the sampling keys, the model's initialisation and
the warm start), so their crossing times are correlated: a seed whose prompts happen to be easy is fast
at every B and under every learning rate. The within-size bootstrap of :mod:`analysis.fits.fit` resamples
runs as if they were independent; when seeds are blocks:

* ``resample="seeds"`` (the default where a condition has at least 5 seeds, ``MIN_SEEDS``, and every
  size has runs of two of them) draws seed ids with replacement, each drawn seed bringing all its runs:
  every size where every seed ran, and only the sizes it holds where seed sets are unequal (an
  adaptive study's added seeds; ``benchmarks/calibration/seed_blocks.py`` measures the coverage of both designs).
  The small-sample factor becomes ``sqrt(S / (S - 1)) * t_{S-1}(0.975) / z(0.975)`` for S seeds
  (:func:`analysis.fits.fit.fit_power_law`, ``n_clusters``): the pivot of a mean over S independent blocks.
  It is robust to any correlation within a seed; with none it is wider than the within-size bootstrap
  (fewer degrees of freedom), with a positive correlation between sizes it is narrower (the seed's
  shared offset cancels in the slope).
* Conditions with the **same set of seeds** draw the same seed ids in every replicate (the stream is
  keyed by the seed set, not by the condition), so the replicate-by-replicate difference of their
  exponents (:func:`analysis.fits.fit.difference_interval`) is a **paired** bootstrap: a seed effect shared
  between conditions cancels in the difference. Conditions with different seed sets are resampled
  independently (their difference is still valid, unpaired).
* ``resample="runs"`` keeps the within-size bootstrap (each condition its own stream).

The seed effect is not a term of the censored likelihood: the point estimate is the pooled fit (with
every seed at every size, a fixed seed effect is orthogonal to log B and leaves the slope of an
uncensored fit unchanged), and the seed dependence enters through the resampling of whole seeds — a
fixed effect per seed would cost S - 1 parameters of a 20-run fit, and a random effect would need
numerical integration in an interval-censored likelihood for little gain at these sizes.

:func:`seed_correlations` measures what the blocks buy: the correlation of the fit's residuals
(``E[z | data]``, :func:`analysis.fits.gof.residuals`) of one seed between sizes (within a condition) and
between conditions (at one size); ``report.md`` states them with the bootstrap used.
"""

from __future__ import annotations

import itertools
import math
import zlib

import numpy as np
import pandas as pd

from analysis.fits.fit import stratified_weights

RESAMPLING = ("seeds", "runs")
# S seeds have C(2S - 1, S) distinct resamples (3: 10, 4: 35, 5: 126): below 5 the percentile interval
# of a cluster bootstrap is too coarse to use, and the within-size bootstrap is kept
MIN_SEEDS = 5


def _seed_keys(runs: pd.DataFrame) -> np.ndarray:
    seeds = runs["seed"].to_numpy(dtype=object)
    return np.array(
        ["none" if s is None or (isinstance(s, float) and math.isnan(s)) else f"{s}" for s in seeds]
    )


def condition_rng(seed: int, condition: str) -> np.random.Generator:
    """The within-size bootstrap stream of one condition: keyed by its label, not by its position."""
    return np.random.default_rng([seed, zlib.crc32(condition.encode())])


def seed_blocks_apply(runs: pd.DataFrame) -> tuple[bool, str]:
    """Whether the seeds of one condition's fitted runs can be resampled as blocks, and why not.

    Seeds need not hold runs at every size (an adaptive study adds seeds at some sizes only, or drops
    a size): a drawn seed brings whatever runs it holds, so the number of runs at a size varies between
    resamples as it would between repetitions of the design. Every size needs runs of at least two
    seeds (else one seed decides whether the size is in a resample at all)."""
    if runs["seed"].isna().any():
        return False, "some runs have no seed"
    seeds = _seed_keys(runs)
    if np.unique(seeds).size < MIN_SEEDS:
        return False, f"only {np.unique(seeds).size} seed(s) (< {MIN_SEEDS})"
    thin = [b for b in sorted(set(runs["B"])) if np.unique(seeds[runs["B"].to_numpy() == b]).size < 2]
    if thin:
        return False, f"B={', '.join(f'{b:g}' for b in thin)} has runs of a single seed"
    return True, ""


def seed_sets_equal(runs: pd.DataFrame) -> bool:
    """Whether every seed of the condition holds runs at every size of it."""
    seeds = _seed_keys(runs)
    sizes = set(runs["B"])
    return all(set(runs["B"][seeds == s]) == sizes for s in np.unique(seeds))


def resample_weights(
    runs: pd.DataFrame, n_boot: int, seed: int, mode: str, condition: str
) -> tuple[np.ndarray, str, int | None, str]:
    """``(W [n_boot, n_runs], mode used, clusters, note)`` for one condition's fitted runs.

    ``mode="seeds"``: seed ids drawn with replacement from a stream keyed by the condition's seed set
    (so conditions with the same seeds are paired); falls back to ``runs`` with a note where seeds are
    not blocks (:func:`seed_blocks_apply`). ``mode="runs"``: within-size resampling from the
    condition's own stream (the behaviour before seeds were blocks).
    """
    if mode not in RESAMPLING:
        raise ValueError(f"resample must be one of {RESAMPLING}, got {mode!r}")
    B = runs["B"].to_numpy(float)
    note = ""
    if mode == "seeds":
        ok, why = seed_blocks_apply(runs)
        if ok:
            keys = _seed_keys(runs)
            ids = np.unique(keys)
            stream = np.random.default_rng([seed, zlib.crc32(("seeds:" + "|".join(ids)).encode())])
            draws = stream.integers(0, ids.size, size=(n_boot, ids.size))
            counts = np.stack([np.bincount(d, minlength=ids.size) for d in draws])  # [n_boot, S]
            W = counts[:, np.searchsorted(ids, keys)].astype(float)
            if not seed_sets_equal(runs):
                note = "seeds resampled as blocks with unequal seed sets (each brings the runs it holds)"
            return W, "seeds", int(ids.size), note
        note = f"seed bootstrap not possible ({why}): runs resampled within sizes"
    uniq = np.unique(B)
    return (
        stratified_weights(np.searchsorted(uniq, B), n_boot, condition_rng(seed, condition)),
        "runs",
        None,
        note,
    )


def seed_correlations(tables, fits: dict) -> pd.DataFrame:
    """Correlation of the fits' residuals of one seed: between sizes within a condition and clock
    (mean over pairs of sizes of the correlation across seeds), and between conditions that share
    seeds (per clock, pooled over sizes). Columns: ``kind`` (``sizes`` or ``conditions``),
    ``condition``, ``other`` (the second condition, or empty), ``clock``, ``correlation``, ``n_pairs``
    (the number of correlations averaged), ``n_seeds``."""
    from analysis.fits.gof import residuals

    runs = tables.runs[tables.runs["in_fit"]]
    resid: dict[tuple[str, str], pd.Series] = {}
    for (condition, clock), fit in fits.items():
        if clock.count(":") > 1 or not np.isfinite(fit.exponent) or not np.isfinite(fit.sigma):
            continue  # sensitivity fits ("target:a:never") and unidentified fits
        group = runs[runs["condition"] == condition]
        if clock not in group or group["seed"].isna().any():
            continue
        lower = group[f"{clock}:lower"] if f"{clock}:lower" in group else None
        _, r, _ = residuals(fit, group["B"], group[clock], group[f"{clock}:censored"], lower)
        index = pd.MultiIndex.from_arrays(
            [_seed_keys(group), group["B"].to_numpy(float)], names=["seed", "B"]
        )
        resid[(condition, clock)] = pd.Series(r, index=index).groupby(level=[0, 1]).mean()
    rows = []
    for (condition, clock), series in resid.items():
        table = series.unstack("B")
        cors = []
        for a, b in itertools.combinations(table.columns, 2):
            pair = table[[a, b]].dropna()
            if len(pair) >= 3 and pair[a].std() > 0 and pair[b].std() > 0:
                cors.append(float(np.corrcoef(pair[a], pair[b])[0, 1]))
        if cors:
            rows.append(
                dict(
                    kind="sizes",
                    condition=condition,
                    other="",
                    clock=clock,
                    correlation=float(np.mean(cors)),
                    n_pairs=len(cors),
                    n_seeds=int(table.shape[0]),
                )
            )
    for (ca, clock), (cb, clock_b) in itertools.combinations(sorted(resid), 2):
        if clock != clock_b:
            continue
        joined = pd.concat([resid[(ca, clock)], resid[(cb, clock)]], axis=1, join="inner").dropna()
        if len(joined) >= 3 and joined.iloc[:, 0].std() > 0 and joined.iloc[:, 1].std() > 0:
            rows.append(
                dict(
                    kind="conditions",
                    condition=ca,
                    other=cb,
                    clock=clock,
                    correlation=float(np.corrcoef(joined.iloc[:, 0], joined.iloc[:, 1])[0, 1]),
                    n_pairs=int(len(joined)),
                    n_seeds=int(joined.index.get_level_values(0).nunique()),
                )
            )
    columns = ["kind", "condition", "other", "clock", "correlation", "n_pairs", "n_seeds"]
    return pd.DataFrame(rows, columns=columns)
