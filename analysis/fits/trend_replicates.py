"""The replicates a trend is built from: each condition's exponent replicates with the early-size choice
made inside every resample, stretched to the interval the report prints.

A target's power-law fit (:func:`analysis.fits.exponents.early_sizes`) leaves out the sizes where most runs
cross within the first ``early_rollouts`` rollouts (all but the smallest such size): a choice made on the
data. Made once on the full data and held fixed in every resample, it never enters the interval, and two
conditions of a trend can regress their slopes over different sizes with nothing in the replicates to
say the choice could have gone the other way. Here the rule is applied to **each resample**: replicate
``r`` drops the sizes that are early in resample ``r`` (the same thresholds, counting the resampled runs
with their multiplicities) and refits the slope on the rest, with the fit's own resamples
(:func:`analysis.fits.exponents.condition_resamples`, so replicates stay paired across conditions that
share seeds) and its small-sample factor (``inflation``). The point estimate is unchanged (the full data's
choice); where no resample's choice differs from the full data's, the replicates are the fit's own
(``FitResult.boot_slopes``, up to the Newton tolerance). Then :func:`analysis.fits.cross.reported_replicates`
stretches them to the interval ``exponents.csv`` reports where that is wider (a degenerate bootstrap
widened to the profile likelihood), so no condition enters a trend with more weight than its printed
interval allows.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from analysis.fits.cross import reported_replicates
from analysis.fits.exponents import condition_resamples, early_sizes
from analysis.fits.fit import FitResult, _identified, _unbounded_direction, interval_mle, log_bounds


def early_weights(fitted: pd.DataFrame, clock: str, opts, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(W with each replicate's own early sizes zeroed, which replicates' choice differs from the full
    data's)``: :func:`analysis.fits.exponents.early_sizes` applied to every resample (row of ``W``)."""
    limit = getattr(opts, "max_early_sizes", 1) if opts is not None else 1
    rollouts = getattr(opts, "early_rollouts", 4) if opts is not None else 4
    W = np.asarray(W, float)
    if limit is None:
        return W, np.zeros(W.shape[0], bool)
    B = fitted["B"].to_numpy(float)
    v = fitted[clock].to_numpy(float)
    with np.errstate(invalid="ignore"):
        reached = ~fitted[f"{clock}:censored"].to_numpy(bool) & (v > 0)
        fast = reached & (v <= rollouts * B)
    sizes = np.unique(B)
    onehot = (B[:, None] == sizes[None, :]).astype(float)  # [n, m]
    n_b, r_b, f_b = W @ onehot, W @ (onehot * reached[:, None]), W @ (onehot * fast[:, None])
    early = (r_b > 0.5 * n_b) & (f_b > 0.5 * n_b)  # [M, m], sizes ascending
    dropped = early & (np.cumsum(early, axis=1) > limit)
    full = np.isin(sizes, early_sizes(fitted, clock, opts))
    changed = (dropped != full[None, :]).any(1)
    return W * (1.0 - dropped.astype(float) @ onehot.T), changed


def reselected_slopes(fitted: pd.DataFrame, clock: str, fit: FitResult, W: np.ndarray, opts) -> tuple:
    """``(replicate slopes [M], share of replicates whose early sizes differ from the full data's)``:
    the fit refitted on every resample with that resample's own early sizes left out, deviations from
    ``fit.exponent`` scaled by ``fit.inflation``; a resample without informative times at two sizes is
    +-inf (the side its likelihood runs off to), as in :func:`analysis.fits.fit.fit_power_law`."""
    We, changed = early_weights(fitted, clock, opts, W)
    B = fitted["B"].to_numpy(float)
    R = fitted[clock].to_numpy(float)
    c = fitted[f"{clock}:censored"].to_numpy(bool)
    L = fitted[f"{clock}:lower"].to_numpy(float) if f"{clock}:lower" in fitted else np.full(B.shape, np.nan)
    keep = np.isfinite(B) & np.isfinite(R) & (B > 0) & (R > 0)
    B, R, c, L, We = B[keep], R[keep], c[keep], L[keep], We[:, keep]
    lo, hi = log_bounds(R, c, L)
    x = np.log(B)
    X = np.column_stack([np.ones_like(x), x - x.mean()])
    informative = np.isfinite(hi)
    ok = _identified(x, informative, We)
    boot = interval_mle(X, lo, hi, We, ok=ok)
    k = fit.inflation if np.isfinite(fit.inflation) and fit.inflation > 0 else 1.0
    slopes = fit.exponent + k * (boot["beta"][:, 1] - fit.exponent)
    failed = ~boot["ok"]
    if failed.any():
        slopes[failed] = _unbounded_direction(x, ~informative, We[failed])
    return slopes, float(changed.mean()) if changed.size else 0.0


def condition_replicates(
    tables, condition: str, clock: str, fit: FitResult, n_boot: int, seed: int, resample: str
) -> tuple[np.ndarray, float, str]:
    """``(replicates, share reselected, note)`` of one condition and clock for a trend: a target's with
    the early sizes chosen in every resample (module docstring), the failure clock's as fitted; both
    stretched to the reported interval (:func:`analysis.fits.cross.reported_replicates`). Without the
    tables (or where the resamples cannot be rebuilt) the fit's own replicates, selection held fixed."""
    if tables is None or clock == "failure" or not fit.boot_slopes.size or not np.isfinite(fit.exponent):
        return reported_replicates(fit), 0.0, ""
    fitted, W, _used, _clusters, _note = condition_resamples(tables, condition, n_boot, seed, resample)
    if W is None or W.shape[0] != fit.boot_slopes.size or f"{clock}:censored" not in fitted:
        return reported_replicates(fit), 0.0, "early sizes held fixed (the fit's resamples not rebuilt)"
    slopes, share = reselected_slopes(fitted, clock, fit, W, tables.options)
    return reported_replicates(dataclasses.replace(fit, boot_slopes=slopes)), share, ""
