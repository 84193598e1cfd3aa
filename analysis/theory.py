"""A predicted exponent alpha from measured noise and curvature (docs/theory.md, "The local theory").

Our reading of the seed study's local theory, for AdamW under the square-root rule (eta proportional to
sqrt(b), b = B / K responses per optimizer step, K steps per rollout):

- noise dominates (b << B_crit): the square-root rule keeps an adaptive optimizer on the same SDE
  (Malladi et al. 2022), so responses to a target do not depend on B: alpha -> 0;
- curvature dominates (b >> B_crit): the trajectory is deterministic, Adam moves ~eta per step, steps to
  a target fall as 1/eta ~ b^(-1/2) and responses grow as b^(1/2): alpha -> 0.5.

The interpolation R_T ~ (b + B_crit)^(1/2) has both limits; its local slope is
alpha(B) = 1/2 * (b / B_crit) / (1 + b / B_crit), half of McCandlish et al.'s (2018) slope for an
optimally tuned step. Over a condition's sizes the **predicted alpha** is the least-squares slope of
1/2 * log(B / K + B_crit) on log B (what the power-law fit would return if R_T followed the
interpolation exactly). B_crit = tr(H Sigma) / G'HG from the trainer's ``curv/`` instruments (a ratio of
means over a run's measured rollouts, as for B_noise), or B_noise = tr Sigma / |G|^2 in its place (the
simple noise scale, equal to B_crit when H is isotropic), both reported.

Assumptions: a locally quadratic loss; one B_crit per run; the K steps of a rollout treated as K
independent minibatch steps; eta below the curvature's stability limit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np


def local_alpha(b: np.ndarray | float, b_crit: np.ndarray | float) -> np.ndarray:
    """d log R_T / d log B at minibatch size ``b`` = B / K: 1/2 * (b / B_crit) / (1 + b / B_crit)."""
    ratio = np.asarray(b, float) / np.asarray(b_crit, float)
    return 0.5 * ratio / (1.0 + ratio)


def predicted_alpha(sizes: Iterable[float], b_crit: np.ndarray | float, K: float) -> np.ndarray:
    """Least-squares slope of 1/2 * log(B / K + B_crit) on log B over ``sizes``, per value of ``b_crit``
    (an array of bootstrap values gives an array of exponents). NaN for a non-positive B_crit or fewer
    than two distinct sizes."""
    x = np.log(np.asarray(list(sizes), float))
    bc = np.atleast_1d(np.asarray(b_crit, float))
    xc = x - x.mean()
    den = float((xc * xc).sum())
    out = np.full(bc.shape, np.nan)
    ok = np.isfinite(bc) & (bc > 0)
    if den <= 0 or not ok.any():
        return out
    y = 0.5 * np.log(np.exp(x)[None, :] / K + bc[ok, None])
    out[ok] = (y * xc[None, :]).sum(1) / den
    return out


def _num(v) -> float:
    """A metrics value as a float (non-finite values may be written as strings); NaN if not a number."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def run_scales(rows: Iterable[dict]) -> dict[str, float]:
    """A run's B_crit and B_noise from its training rows: ratios of means over the rollouts where both
    parts are finite (``curv/trace_hsigma`` / ``curv/gHg_abs``; ``noise/trace_cov`` /
    ``noise/grad_norm_sq``), since single-rollout denominators can be near zero or negative."""
    rows = list(rows)
    out: dict[str, float] = {}
    for name, num, den in (
        ("b_crit", "curv/trace_hsigma", "curv/gHg_abs"),
        ("b_noise", "noise/trace_cov", "noise/grad_norm_sq"),
    ):
        pairs = [(_num(r.get(num)), _num(r.get(den))) for r in rows]
        pairs = [(a, d) for a, d in pairs if math.isfinite(a) and math.isfinite(d)]
        mean_d = sum(d for _, d in pairs) / len(pairs) if pairs else math.nan
        mean_a = sum(a for a, _ in pairs) / len(pairs) if pairs else math.nan
        out[name] = mean_a / mean_d if pairs and mean_d > 0 else math.nan
        out[f"{name}_rollouts"] = float(len(pairs))
    return out


def paired_difference(fitted: np.ndarray, predicted: np.ndarray, level: float = 0.95) -> dict[str, float]:
    """The difference fitted - predicted alpha over paired bootstrap resamples (the same resampled runs
    give both values, so their shared run-to-run variation cancels): median, percentile interval and
    whether the interval covers 0 (``agrees``)."""
    diff = np.asarray(fitted, float) - np.asarray(predicted, float)
    diff = diff[np.isfinite(diff)]
    if diff.size == 0:
        return {"difference": math.nan, "low": math.nan, "high": math.nan, "agrees": math.nan}
    q = (1 - level) / 2
    low, high = np.quantile(diff, [q, 1 - q])
    return {
        "difference": float(np.median(diff)),
        "low": float(low),
        "high": float(high),
        "agrees": float(low <= 0 <= high),
    }
