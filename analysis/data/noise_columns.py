"""The runs table's noise columns: the gradient-noise scale (``noise:``, McCandlish et al. 2018) and the
curvature's B_crit (``curv:``) of one run, each a ratio of means over its training rows."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from analysis.data.row_values import column_of

NOISE_KEYS = ("noise/trace_cov", "noise/grad_norm_sq", "noise/b_noise")


def noise_summary(rows: list[dict[str, Any]], until: float = math.inf) -> dict[str, float]:
    """Gradient-noise scale of one run from its training rows with ``responses <= until``.

    ``noise:b_noise`` = mean tr Sigma / mean |G|^2 over the rows where both are finite (McCandlish et
    al. 2018, eq. 2.7 with the appendix-A estimators the trainer logs: a ratio of means, since the
    per-rollout |G|^2 estimate can be near 0 or negative and a mean of per-rollout ratios is dominated
    by those rollouts); ``noise:b_noise_median`` = median of the finite per-rollout ``noise/b_noise``;
    NaN when the run logs no usable estimate (K = 1, or a mean |G|^2 that is not positive).
    """
    train = [r for r in rows if "eval/accuracy" not in r and float(r["responses"]) <= until]
    trace = np.array(column_of(train, "noise/trace_cov"))
    grad = np.array(column_of(train, "noise/grad_norm_sq"))
    ratio = np.array(column_of(train, "noise/b_noise"))
    both = np.isfinite(trace) & np.isfinite(grad)
    mean_t = float(trace[both].mean()) if both.any() else math.nan
    mean_g = float(grad[both].mean()) if both.any() else math.nan
    finite = ratio[np.isfinite(ratio)]
    return {
        "noise:b_noise": mean_t / mean_g if both.any() and mean_g > 0 else math.nan,
        "noise:b_noise_median": float(np.median(finite)) if finite.size else math.nan,
        "noise:trace_cov_mean": mean_t,
        "noise:grad_norm_sq_mean": mean_g,
        "noise:n_rows": int(both.sum()),
        **curvature_summary(train),
    }


def curvature_summary(train: list[dict[str, Any]]) -> dict[str, float]:
    """B_crit of one run from its training rows (the trainer's ``curv/`` rows, every
    ``noise.curvature_every_rollouts``): ``curv:b_crit`` = mean ``curv/trace_hsigma`` / mean
    ``curv/gHg_abs`` over the rows where both are finite (a ratio of means, as for ``noise:b_noise``);
    NaN when the run logged none (curvature off, or too short to reach the cadence)."""
    trace = np.array(column_of(train, "curv/trace_hsigma"))
    ghg = np.array(column_of(train, "curv/gHg_abs"))
    both = np.isfinite(trace) & np.isfinite(ghg)
    mean_t = float(trace[both].mean()) if both.any() else math.nan
    mean_g = float(ghg[both].mean()) if both.any() else math.nan
    return {
        "curv:b_crit": mean_t / mean_g if both.any() and mean_g > 0 else math.nan,
        "curv:trace_hsigma_mean": mean_t,
        "curv:gHg_abs_mean": mean_g,
        "curv:n_rows": int(both.sum()),
    }
