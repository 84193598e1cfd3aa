"""The clocks' B_crit beside the gradients' B_noise, for Adam and for SGD, per condition and target.

``bcrit_theory.csv`` (beside ``theory.csv``, whose columns are unchanged): per condition and target clock

* the critical batch read from the clocks (:mod:`analysis.fits.bcrit`, McCandlish's R_min (1 + B / B_crit)),
  per rollout and per optimizer step (÷ K);
* the gradient noise scales measured by the trainer (``docs/theory.md``, "B_noise for Adam"): Adam's
  ``tr(P Sigma) / G'PG`` from ``noise/adam_trace_cov`` / ``noise/adam_grad_norm_sq`` and SGD's trace
  ``tr Sigma / |G|^2`` from ``noise/all_*`` (all prompts) or, where a run did not log those, the one-point
  ``noise/trace_cov`` / ``noise/grad_norm_sq``; per run the means over its training rows **before the
  target's crossing** (responses at most the last evaluation below the target; every row for a run that
  never reached it), per condition the ratio of the means over its runs (each run one unit), with a
  **Fieller** 95 % interval for that ratio (Fieller 1954: the set of rho with
  ``(mean_n - rho mean_d)^2 <= t^2 Var(mean_n - rho mean_d)``, run-to-run variances, Student-t with
  R - 1 degrees of freedom; unbounded above when the mean denominator is not significantly positive);
* the α each implies over the condition's sizes: the least-squares slope of ``log(1 + B / B_c)`` on
  ``log B`` with B_c the clocks' B_crit, or K x B_noise (McCandlish's form with the measured scale);
* the rate in units of Adam's edge of stability: the median over the measurements before the crossing
  of ``curv/adam_edge`` = eta * lambda_max(P H) / (2 (1 + beta1) / (1 - beta1)) (``edge``; 1 = at the edge);
* paired comparisons over the power-law fit's own resamples (replicate r of the clocks' B_crit and of
  B_noise from the same runs or seeds): the ratio clocks / gradients (per step) and the difference of
  the implied α, median and 95 % percentile interval; they **agree** when the ratio's interval covers 1.

Our reading: McCandlish's B_crit and the noise scale coincide for a step tuned at every point with an
isotropic (preconditioned) Hessian; the runs follow a fixed learning-rate rule and Adam's momentum
averages noise across steps (``docs/theory.md``), so disagreement names an assumption to test, not an
error.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import stdtrit

SOURCES = {  # source -> (numerator, denominator, label), the first pair a run carries
    "adam": [("noise/adam_trace_cov", "noise/adam_grad_norm_sq", "noise/adam_*")],
    "sgd": [
        ("noise/all_trace_cov", "noise/all_grad_norm_sq", "noise/all_*"),
        ("noise/trace_cov", "noise/grad_norm_sq", "noise/*"),
    ],
}

THEORY_COLUMNS = [
    "condition",
    "clock",
    "target",
    "eta_ref",
    "K",
    "n_runs",
    "b_crit",
    "b_crit_low",
    "b_crit_high",
    "b_crit_per_step",
    "alpha_clocks",
    *(
        f"{c}_{s}"
        for s in SOURCES
        for c in (
            "b_noise",
            "b_noise_low",
            "b_noise_high",
            "keys",
            "runs",
            "rows",
            "alpha",
            "ratio",
            "ratio_low",
            "ratio_high",
            "alpha_diff",
            "alpha_diff_low",
            "alpha_diff_high",
            "agrees",
        )
    ),
    "edge",
    "edge_rows",
    "note",
]


def _num(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def before_crossing(rows: list[dict], target: float) -> list[dict]:
    """A run's training rows at or before its last evaluation below ``target`` (all rows when no evaluation
    reached it): the measurements surely taken before the crossing."""
    evals = [r for r in rows if "eval/accuracy" in r]
    hit = next((i for i, r in enumerate(evals) if _num(r["eval/accuracy"]) >= target), None)
    until = math.inf if hit is None else (_num(evals[hit - 1]["responses"]) if hit > 0 else -math.inf)
    return [r for r in rows if "eval/accuracy" not in r and _num(r.get("responses")) <= until]


def run_means(rows: list[dict], source: str) -> tuple[float, float, int, str]:
    """``(mean numerator, mean denominator, rows, keys used)`` over ``rows`` where both are finite, from the
    first key pair of ``source`` the rows carry; NaN when none."""
    for num_key, den_key, label in SOURCES[source]:
        pairs = [(_num(r.get(num_key)), _num(r.get(den_key))) for r in rows]
        pairs = [(a, b) for a, b in pairs if math.isfinite(a) and math.isfinite(b)]
        if pairs:
            arr = np.array(pairs)
            return float(arr[:, 0].mean()), float(arr[:, 1].mean()), len(pairs), label
    return math.nan, math.nan, 0, ""


def fieller(num: np.ndarray, den: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """Ratio of means ``mean(num) / mean(den)`` over units (runs) and its Fieller interval; an end that
    does not exist (the denominator's mean not significantly positive) is +inf (or the interval is
    ``(-inf, inf)`` when nothing is bounded)."""
    num, den = np.asarray(num, float), np.asarray(den, float)
    n = num.size
    if n == 0 or not den.mean() > 0:
        return math.nan, math.nan, math.nan
    ratio = float(num.mean() / den.mean())
    if n < 2:
        return ratio, -math.inf, math.inf
    t = float(stdtrit(n - 1, 0.5 + level / 2))
    vnn, vdd = num.var(ddof=1) / n, den.var(ddof=1) / n
    vnd = float(np.cov(num, den, ddof=1)[0, 1]) / n
    mn, md = num.mean(), den.mean()
    a = md * md - t * t * vdd
    b = -2 * (mn * md - t * t * vnd)
    c = mn * mn - t * t * vnn
    disc = b * b - 4 * a * c
    if a <= 0:  # the denominator is not significantly positive: unbounded
        low = (-b - math.sqrt(disc)) / (2 * a) if disc >= 0 else -math.inf
        return ratio, (min(low, ratio) if math.isfinite(low) else -math.inf), math.inf
    root = math.sqrt(max(disc, 0.0))
    return ratio, float((-b - root) / (2 * a)), float((-b + root) / (2 * a))


def implied_alpha(sizes, scale) -> np.ndarray:
    """Least-squares slope of ``log(1 + B / scale)`` on ``log B`` over ``sizes`` (per value of ``scale``;
    inf gives 0, 0 gives 1)."""
    x = np.log(np.asarray(sizes, float))
    xc = x - x.mean()
    den = float((xc * xc).sum())
    scale = np.atleast_1d(np.asarray(scale, float))
    out = np.full(scale.shape, np.nan)
    if den <= 0:
        return out
    ok = np.isfinite(scale) & (scale > 0)
    y = np.log1p(np.exp(x)[None, :] / scale[ok, None])
    out[ok] = (y * xc[None, :]).sum(1) / den
    out[np.isposinf(scale)] = 0.0
    out[scale == 0] = 1.0
    return out


def _interval(values: np.ndarray, level: float) -> tuple[float, float, float]:
    v = values[~np.isnan(values)]
    if v.size == 0:
        return math.nan, math.nan, math.nan
    q = np.quantile(v, [(1 - level) / 2, (1 + level) / 2], method="inverted_cdf")
    return float(np.median(v)), float(q[0]), float(q[1])


def compare(fit, sizes, K: float, per_run: dict, W, level: float = 0.95) -> dict:
    """The columns of one row: ``fit`` the clocks' :class:`analysis.fits.bcrit.BcritFit` (its replicates
    ``boot_b_crit`` from the resamples ``W``), ``per_run[source]`` = arrays (numerator, denominator) of the
    runs' pre-crossing means (NaN where a run has none), aligned with ``W``'s columns."""
    out: dict = {}
    per_step = fit.b_crit / K
    out["alpha_clocks"] = (
        float(implied_alpha(sizes, fit.b_crit)[0]) if not math.isnan(fit.b_crit) else math.nan
    )
    boot_clock = np.asarray(getattr(fit, "boot_b_crit", np.empty(0)), float) / K
    edges = per_run.get("edge", np.empty(0))
    out["edge"] = float(np.median(edges)) if edges.size else math.nan
    out["edge_rows"] = int(edges.size)
    for source in SOURCES:
        num, den, rows, keys = per_run[source]
        has = np.isfinite(num) & np.isfinite(den)
        ratio, low, high = fieller(num[has], den[has], level) if has.any() else (math.nan,) * 3
        out.update(
            {
                f"b_noise_{source}": ratio,
                f"b_noise_low_{source}": low,
                f"b_noise_high_{source}": high,
                f"keys_{source}": keys,
                f"runs_{source}": int(has.sum()),
                f"rows_{source}": int(rows),
                f"alpha_{source}": float(implied_alpha(sizes, K * ratio)[0]) if ratio > 0 else math.nan,
            }
        )
        for c in ("ratio", "ratio_low", "ratio_high", "alpha_diff", "alpha_diff_low", "alpha_diff_high"):
            out[f"{c}_{source}"] = math.nan
        out[f"agrees_{source}"] = None
        if not (ratio > 0) or math.isnan(per_step):
            continue
        out[f"ratio_{source}"] = per_step / ratio
        if W is None or boot_clock.size != W.shape[0]:
            continue
        Wh = np.asarray(W, float)[:, has]
        total = Wh.sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            n_r, d_r = Wh @ num[has] / total, Wh @ den[has] / total
            noise_r = np.where(d_r > 0, n_r / d_r, np.inf)
            noise_r[total <= 0] = np.nan
            ratios = boot_clock / noise_r
            ratios[np.isnan(boot_clock) | np.isnan(noise_r)] = np.nan
            diffs = implied_alpha(sizes, boot_clock * K) - implied_alpha(sizes, K * noise_r)
        _, rlo, rhi = _interval(ratios, level)
        _, dlo, dhi = _interval(diffs, level)
        out[f"ratio_low_{source}"], out[f"ratio_high_{source}"] = rlo, rhi
        out[f"alpha_diff_{source}"] = out["alpha_clocks"] - out[f"alpha_{source}"]
        out[f"alpha_diff_low_{source}"], out[f"alpha_diff_high_{source}"] = dlo, dhi
        out[f"agrees_{source}"] = bool(rlo <= 1 <= rhi) if not math.isnan(rlo) else None
    return out


def per_run_means(fitted, records: dict, target: float) -> dict:
    """``source -> (numerators, denominators, total rows, keys)`` of the fitted runs' pre-crossing means."""
    out = {}
    names = fitted["run"].tolist() if "run" in fitted else [None] * len(fitted)
    for source in SOURCES:
        num, den, rows, keys = [], [], 0, set()
        for name in names:
            got = (
                run_means(before_crossing(records.get(name, []), target), source) if name else (math.nan,) * 2
            )
            num.append(got[0])
            den.append(got[1])
            if len(got) > 2:
                rows += got[2]
                if got[3]:
                    keys.add(got[3])
        out[source] = (np.array(num, float), np.array(den, float), rows, "+".join(sorted(keys)))
    edges = [
        _num(r.get("curv/adam_edge"))
        for name in names
        if name
        for r in before_crossing(records.get(name, []), target)
    ]
    out["edge"] = np.array([e for e in edges if math.isfinite(e)], float)
    return out


def bound_text(value) -> str:
    """A B_crit bound: ``∞`` and ``0`` spelled out (an unbounded interval is never a fake number)."""
    v = _num(value)
    if math.isnan(v):
        return "–"
    if math.isinf(v):
        return "∞"
    return "0" if v == 0 else f"{v:.3g}"
