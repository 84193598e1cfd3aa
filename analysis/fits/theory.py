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

Beside the fit (:func:`theory_table` -> ``theory.csv``, :func:`theory_lines` -> the report's section
"Predicted vs fitted α"): per condition B_crit and B_noise are ratios of means over its fitted runs
(``runs.csv`` ``curv:*`` and ``noise:*`` columns), resampled with the fit's own bootstrap weights
(:func:`analysis.fits.exponents.condition_resamples`), so fitted and predicted alpha come from the same runs
in every replicate and their difference is paired (``docs/theory.md`` lists the columns and rules).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from analysis.fits.fit import _z


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
    whether the interval covers 0 (``agrees``). A replicate whose fit is not identified (slope +-inf,
    :class:`analysis.fits.fit.FitResult`) stays in as +-inf, so the interval is unbounded on that side rather
    than falsely narrow; replicates without a prediction (NaN) are left out."""
    with np.errstate(invalid="ignore"):
        diff = np.asarray(fitted, float) - np.asarray(predicted, float)
    diff = diff[~np.isnan(diff)]
    if diff.size == 0:
        return {"difference": math.nan, "low": math.nan, "high": math.nan, "agrees": math.nan}
    q = (1 - level) / 2
    low, high = np.quantile(diff, [q, 1 - q], method="inverted_cdf")
    return {
        "difference": float(np.median(diff)),
        "low": float(low),
        "high": float(high),
        "agrees": float(low <= 0 <= high),
    }


# ---- the predicted exponent beside the fit, per condition and target (theory.csv, report.md) ------------

SOURCES = (
    ("b_crit", "B_crit", "curv:trace_hsigma_mean", "curv:gHg_abs_mean"),
    ("b_noise", "B_noise", "noise:trace_cov_mean", "noise:grad_norm_sq_mean"),
)

THEORY_COLUMNS = [
    "condition",
    "eta_ref",
    "clock",
    "K",
    "n_runs",
    "measured",
    "resampling",
    "n_boot",
    "inflation",
    "fitted",
    "fitted_low",
    "fitted_high",
    *(f"{name}{suffix}" for name, *_ in SOURCES for suffix in ("_runs", "", "_low", "_high")),
    *(
        f"{what}_{name}{suffix}"
        for name, *_ in SOURCES
        for what, suffixes in (("predicted", ("", "_low", "_high")), ("diff", ("", "_low", "_high")))
        for suffix in suffixes
    ),
    *(f"agrees_{name}" for name, *_ in SOURCES),
    "note",
]


def scale_replicates(num, den, W: np.ndarray | None) -> tuple[float, np.ndarray]:
    """A condition's B_crit (or B_noise) from its runs' mean numerators and denominators: the ratio of
    the means over the runs where both are finite (as ``noise_scale.csv``), and the same ratio under
    each resample ``W [n_boot, n_runs]`` (counts per run). A resample whose mean denominator is not
    positive gives +inf (the noise-dominated limit, as in ``noise_scale.csv``), one that draws no run
    with a measurement gives NaN."""
    num, den = np.asarray(num, float), np.asarray(den, float)
    has = np.isfinite(num) & np.isfinite(den)
    point = math.nan
    if has.any() and den[has].mean() > 0:
        point = float(num[has].mean() / den[has].mean())
    if W is None:
        return point, np.empty(0)
    Wh = np.asarray(W, float)[:, has]
    total = Wh.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        n, d = Wh @ num[has] / total, Wh @ den[has] / total
        reps = np.where(d > 0, n / d, np.inf)
    reps[total <= 0] = np.nan
    return point, reps


def alpha_of_scale(sizes, scale, K: float) -> np.ndarray:
    """:func:`predicted_alpha`, with B_crit = +inf giving 0 (the noise-dominated limit)."""
    scale = np.atleast_1d(np.asarray(scale, float))
    out = predicted_alpha(sizes, scale, K)
    out[np.isposinf(scale)] = 0.0
    return out


def compare_to_fit(fit, sizes, K: float, num, den, W: np.ndarray | None, level: float = 0.95) -> dict:
    """The predicted alpha of one source (B_crit or B_noise) beside one fit, paired replicate by replicate.

    ``W``: the resamples of the fit (:func:`analysis.fits.exponents.condition_resamples`), so replicate ``r`` of
    the prediction uses the runs that replicate ``r`` of ``fit.boot_slopes`` used. The fit's replicates
    are scaled around its estimate by the small-sample factor ``fit.inflation``
    (:mod:`analysis.fits.fit`); the predicted replicates are scaled by the same factor around the predicted
    value, so that fitted, predicted and their difference are on one footing. The difference's interval
    is the percentile interval of the replicate differences; where the fit's bootstrap was degenerate it
    is widened to its union with the normal interval from the two reported intervals (as
    :func:`analysis.fits.fit.difference_interval`)."""
    nan = math.nan
    scale, reps = scale_replicates(num, den, W)
    q = [(1 - level) / 2, (1 + level) / 2]
    out = {"scale": scale, "scale_low": nan, "scale_high": nan, "predicted": nan}
    out.update(predicted_low=nan, predicted_high=nan, diff=nan, diff_low=nan, diff_high=nan, agrees=None)
    out["runs"] = int((np.isfinite(np.asarray(num, float)) & np.isfinite(np.asarray(den, float))).sum())
    if not math.isfinite(scale):
        return out
    p_hat = float(alpha_of_scale(sizes, scale, K)[0])
    out["predicted"] = p_hat
    finite = reps[~np.isnan(reps)]
    if finite.size == 0 or not math.isfinite(p_hat):
        return out
    out["scale_low"], out["scale_high"] = (float(v) for v in np.quantile(finite, q, method="inverted_cdf"))
    k = float(getattr(fit, "inflation", 1.0))
    k = k if math.isfinite(k) and k > 0 else 1.0
    pred = p_hat + k * (alpha_of_scale(sizes, reps, K) - p_hat)
    ok = pred[~np.isnan(pred)]
    low, high = np.quantile(ok, q, method="inverted_cdf")
    # the interpolation's slope lies in [0, 1/2] whatever B_crit: the inflated interval is clipped to it
    out["predicted_low"], out["predicted_high"] = max(float(low), 0.0), min(float(high), 0.5)
    slopes = np.asarray(getattr(fit, "boot_slopes", np.empty(0)), float)
    if slopes.size != pred.size or not math.isfinite(getattr(fit, "exponent", nan)):
        return out
    d = paired_difference(slopes, pred, level)
    low, high = d["low"], d["high"]
    if getattr(fit, "degenerate", ""):
        z = _z(level)
        se = math.hypot(
            (fit.ci_high - fit.ci_low) / (2 * z), (out["predicted_high"] - out["predicted_low"]) / (2 * z)
        )
        centre = fit.exponent - p_hat
        low, high = (
            (min(low, centre - z * se), max(high, centre + z * se))
            if math.isfinite(se)
            else (-math.inf, math.inf)
        )
    out.update(diff=d["difference"], diff_low=low, diff_high=high, agrees=bool(low <= 0 <= high))
    return out


def theory_table(
    tables, exponents: pd.DataFrame, fits: dict, n_boot: int, seed: int, resample: str = "seeds"
) -> pd.DataFrame:
    """``theory.csv``: per condition and target clock the fitted alpha, the predicted alpha from B_crit
    and from B_noise with their intervals, and the paired difference fitted - predicted (``docs/theory.md``).

    ``n_boot``, ``seed`` and ``resample`` must be those of :func:`analysis.fits.exponents.fit_conditions`: the
    resamples are recomputed with the function the fit used (same stream), and the replicates pair up.
    """
    from analysis.fits.exponents import condition_resamples  # the fit's resamples (report imports the fits)

    rows = []
    targets = exponents[exponents["clock"] != "failure"]
    for condition, group in targets.groupby("condition", sort=True):
        fitted, W, used, _clusters, note = condition_resamples(tables, condition, n_boot, seed, resample)
        K = float(np.nanmedian(fitted["K"].to_numpy(float))) if fitted["K"].notna().any() else math.nan
        notes = [] if math.isfinite(K) and K > 0 else ["K unknown: taken as 1"]
        K = K if math.isfinite(K) and K > 0 else 1.0
        sizes = fitted["B"].to_numpy(float)
        eta = fitted["lr.ref_lr"].iloc[0] if "lr.ref_lr" in fitted and len(fitted) else math.nan
        for r in group.itertuples():
            fit = fits.get((condition, r.clock))
            row = {
                "condition": condition,
                "eta_ref": eta,
                "clock": r.clock,
                "K": K,
                "n_runs": len(fitted),
                "resampling": used + (f" ({note})" if note else ""),
                "n_boot": 0 if W is None else int(W.shape[0]),
                "inflation": getattr(fit, "inflation", math.nan),
                "fitted": r.exponent,
                "fitted_low": r.ci_low,
                "fitted_high": r.ci_high,
            }
            have = []
            for name, _label, num_col, den_col in SOURCES:
                num = fitted[num_col].to_numpy(float) if num_col in fitted else np.full(len(fitted), np.nan)
                den = fitted[den_col].to_numpy(float) if den_col in fitted else np.full(len(fitted), np.nan)
                c = compare_to_fit(fit, sizes, K, num, den, W)
                row.update(
                    {
                        f"{name}_runs": c["runs"],
                        name: c["scale"],
                        f"{name}_low": c["scale_low"],
                        f"{name}_high": c["scale_high"],
                        f"predicted_{name}": c["predicted"],
                        f"predicted_{name}_low": c["predicted_low"],
                        f"predicted_{name}_high": c["predicted_high"],
                        f"diff_{name}": c["diff"],
                        f"diff_{name}_low": c["diff_low"],
                        f"diff_{name}_high": c["diff_high"],
                        f"agrees_{name}": c["agrees"],
                    }
                )
                if math.isfinite(c["predicted"]):
                    have.append(name)
                elif c["runs"]:
                    notes.append(f"{name}: mean denominator not positive in the {c['runs']} run(s) measured")
            row["measured"] = "+".join(have) or "none"
            if fit is not None and getattr(fit, "degenerate", ""):
                notes.append("fit bootstrap degenerate: difference interval widened")
            row["note"] = "; ".join(notes)
            rows.append(row)
    return pd.DataFrame(rows, columns=THEORY_COLUMNS)
