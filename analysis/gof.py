"""Goodness of fit of the power law ``log R = log c + alpha log B + sigma eps`` (same censored likelihood
as :mod:`analysis.fit`: exact, interval-, left- and right-censored times).

* **Lack-of-fit test** (a likelihood-ratio test of the straight line against a free mean per size,
  the censored-data analogue of the classical pure-error lack-of-fit F test, e.g. Draper & Smith,
  *Applied Regression Analysis*, §2.1): ``LR = 2 (ll_free - ll_line)``, referred to chi-square with
  ``m - 2`` degrees of freedom (m sizes). Sizes where no run has an informative time (every run
  right-censored) have no finite free mean; they are left out of both models (and named). Needs
  replication (more runs than sizes) for the free model's scatter.
* **Broken power law**: ``log R = log c + alpha_1 log B + (alpha_2 - alpha_1) max(0, log B - log B_k)``,
  continuous with a knee at ``B_k`` (a critical batch size: below it responses-to-target grow slowly
  with B, above it faster), fitted by profile likelihood over a grid of 13 knees (log-spaced) between the second and
  the second-to-last size (each segment keeps two sizes), and compared with the line by AIC
  (``2 k - 2 ll``; the knee counts as a parameter: k = 5 against 3). ``delta_aic`` < -2 favours the
  knee, > 2 the line (Burnham & Anderson 2002, §2.6). Needs four sizes.
* **Residuals**: conditional-mean standardised residuals ``E[z | data]`` under the fitted model
  (``z`` itself for exact times; ``(phi(a) - phi(b)) / (Phi(b) - Phi(a))`` for ``z`` in ``(a, b]``;
  generalised residuals in the sense of Gourieroux et al. 1987).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from analysis.fit import FitResult, interval_mle, log_bounds, log_ndtr_diff

_LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)


@dataclass
class GoodnessOfFit:
    lof_stat: float = np.nan
    lof_df: int = 0
    lof_p: float = np.nan
    lof_sizes_left_out: tuple[float, ...] = ()
    aic_line: float = np.nan
    aic_broken: float = np.nan
    delta_aic: float = np.nan  # aic_broken - aic_line: negative favours the knee
    knee: float = np.nan  # B_k of the best broken power law
    slope_below: float = np.nan
    slope_above: float = np.nan
    note: str = ""


def _data(sizes, values, censored, lower):
    B = np.asarray(sizes, float)
    R = np.asarray(values, float)
    c = np.asarray(censored, bool)
    L = np.full(B.shape, np.nan) if lower is None else np.asarray(lower, float)
    keep = np.isfinite(B) & np.isfinite(R) & (B > 0) & (R > 0)
    lo, hi = log_bounds(R[keep], c[keep], L[keep])
    return np.log(B[keep]), lo, hi


def goodness_of_fit(sizes, values, censored, lower=None) -> GoodnessOfFit:
    """Lack-of-fit test and broken-power-law AIC for one condition and clock (module docstring)."""
    out = GoodnessOfFit()
    x, lo, hi = _data(sizes, values, censored, lower)
    if x.size == 0:
        out.note = "no runs"
        return out
    uniq = np.unique(x)
    informative = np.array([np.isfinite(hi[x == u]).any() for u in uniq])
    out.lof_sizes_left_out = tuple(float(np.exp(u)) for u in uniq[~informative])
    keep = np.isin(x, uniq[informative])
    x, lo, hi = x[keep], lo[keep], hi[keep]
    sizes_used = uniq[informative]
    m = sizes_used.size
    notes = []
    xm = x.mean() if x.size else 0.0
    line = interval_mle(np.column_stack([np.ones_like(x), x - xm]), lo, hi) if m >= 2 else None
    ll_line = float(line["loglik"][0]) if line is not None and line["ok"][0] else np.nan
    if m < 3:
        notes.append(f"lack-of-fit needs 3 sizes with reached targets (have {m})")
    elif x.size <= m:
        notes.append("lack-of-fit needs more runs than sizes")
    elif np.isfinite(ll_line):
        onehot = (x[:, None] == sizes_used[None, :]).astype(float)
        free = interval_mle(onehot, lo, hi)
        if free["ok"][0]:
            out.lof_stat = max(0.0, 2 * (float(free["loglik"][0]) - ll_line))
            out.lof_df = m - 2
            out.lof_p = float(stats.chi2.sf(out.lof_stat, out.lof_df))
        else:
            notes.append("free-mean model did not converge")
    if np.isfinite(ll_line):
        out.aic_line = 2 * 3 - 2 * ll_line
    if m >= 4 and np.isfinite(ll_line):
        best = (-np.inf, np.nan, np.nan, np.nan)
        for knee in np.linspace(sizes_used[1], sizes_used[-2], 13):
            X = np.column_stack([np.ones_like(x), x - xm, np.maximum(0.0, x - knee)])
            fit = interval_mle(X, lo, hi)
            if fit["ok"][0] and fit["loglik"][0] > best[0]:
                b = fit["beta"][0]
                best = (float(fit["loglik"][0]), knee, b[1], b[1] + b[2])
        if np.isfinite(best[0]):
            out.aic_broken = 2 * 5 - 2 * best[0]
            out.delta_aic = out.aic_broken - out.aic_line
            out.knee, out.slope_below, out.slope_above = float(np.exp(best[1])), best[2], best[3]
    elif m < 4:
        notes.append(f"broken power law needs 4 sizes (have {m})")
    out.note = "; ".join(notes)
    return out


def residuals(
    fit: FitResult, sizes, values, censored, lower=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(B, r, kind)``: conditional-mean standardised residuals of every run under ``fit``; ``kind``
    is ``exact``, ``interval``, ``left`` or ``right`` (censored)."""
    x, lo, hi = _data(sizes, values, censored, lower)
    mu = fit.intercept + fit.exponent * x
    a, b = (lo - mu) / fit.sigma, (hi - mu) / fit.sigma
    exact = lo == hi
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        ld = log_ndtr_diff(np.where(exact, -np.inf, a), np.where(exact, np.inf, b))
        pa = np.where(np.isfinite(a), np.exp(-0.5 * a * a - _LOG_SQRT_2PI - ld), 0.0)
        pb = np.where(np.isfinite(b), np.exp(-0.5 * b * b - _LOG_SQRT_2PI - ld), 0.0)
    r = np.where(exact, a, pa - pb)
    kind = np.where(
        exact, "exact", np.where(~np.isfinite(hi), "right", np.where(~np.isfinite(lo), "left", "interval"))
    )
    return np.exp(x), r, kind
