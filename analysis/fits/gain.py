"""Targets as fractions of a condition's achievable gain (docs/analysis.md, "Targets as fractions of
the gain").

An absolute accuracy target near a condition's plateau times the ceiling, not the rate: a condition
whose curve flattens just above the target crosses it late, or never, at every size, and its α then
says "lower ceiling" where the question was "slower". A *gain target* ``f`` sits at the same fraction
of every condition's own gain,

    level(f) = R0 + f * (A - R0),

with ``R0`` the condition's starting accuracy (the mean of its runs' first evaluations, as in
:mod:`analysis.fits.sigmoid`) and ``A`` its asymptote: ScaleRL's sigmoid (Khatri et al. 2025, eq. 1) fitted
jointly to the pooled evaluations of every size of the condition, with ``A`` (and ``R0``) shared and the
efficiency ``b`` and midpoint ``C_mid`` free per size. Sharing ``A`` across sizes is this module's
reading of "the condition's achievable gain"; the per-size asymptotes stay in ``sigmoid.csv``. Only the
evaluations the clocks read enter the fit: up to each run's horizon (the end of the rollout that reaches
it) and, for a run that failed, up to its failure onset.

A's 95 % interval is a percentile bootstrap over runs (resampled within each size, ``n_boot`` fits
started at the point estimate). α at a gain target is fitted exactly like an absolute target, at the
level from the point estimate of ``A``; the level's own uncertainty is carried into the reported
interval by refitting at the levels from ``A_low`` and ``A_high`` and taking the envelope of the three
intervals (``ci_low_gain``, ``ci_high_gain``): conservative, since it adds the two sources of error
side by side instead of in quadrature.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
import zlib

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from analysis.data.clock_tables import Tables, build_tables, target_label
from analysis.data.horizon import horizon_end
from analysis.fits.exponents import fit_conditions
from analysis.fits.sigmoid import curves_of, pooled_counts

GAIN_COLUMNS = [
    "condition",
    "fraction",
    "R0",
    "A",
    "A_low",
    "A_high",
    "level",
    "level_low",
    "level_high",
    "exponent",
    "ci_low",
    "ci_high",
    "ci_low_gain",
    "ci_high_gain",
    "n_runs",
    "n_censored",
    "n_sizes",
    "sizes_early",
    "n_boot",
    "n_points",
    "message",
]

_LOG_B = (math.log(0.05), math.log(20.0))  # the bounds of analysis.fits.sigmoid, on log b


def read_evaluations(runs: pd.DataFrame, evals: pd.DataFrame) -> pd.DataFrame:
    """The evaluations the clocks read: responses up to each run's horizon (in whole rollouts) and up to
    its failure onset (on the responses clock) when it failed."""
    if evals.empty:
        return evals
    info = runs.set_index("run")
    horizon = info["horizon"].astype(float) if "horizon" in info else pd.Series(math.inf, index=info.index)
    limit = pd.Series(horizon_end(horizon.to_numpy(), info["B"].to_numpy(float)), index=info.index)
    if "failure" in info and "failure:censored" in info and (info.get("clock_unit") == "responses").all():
        failed = ~info["failure:censored"].astype(bool)
        limit[failed] = np.minimum(limit[failed], info.loc[failed, "failure"].astype(float))
    return evals[evals["responses"].to_numpy(float) <= limit.reindex(evals["run"]).to_numpy(float)]


def _pooled(evals: pd.DataFrame, runs: pd.DataFrame):
    """Per size: (log clock values, counts [runs, values], sums [runs, values]) of the pooled curve
    (:func:`analysis.fits.sigmoid.pooled_counts` on the responses clock)."""
    out = []
    for size, group in runs.groupby("B", sort=True):
        values, curves, _ = curves_of(evals[evals["run"].isin(group["run"])], "responses")
        if values.size < 3:
            continue
        # runs with an evaluation after step 0 only (one that failed in its first rollout has none)
        cnt, tot = pooled_counts(values, curves, [n for n in sorted(curves) if curves[n][0].size])
        out.append((float(size), np.log(values), cnt, tot))
    return out


def _fit_shared(parts, weights, R0: float, start: np.ndarray | None):
    """Least squares of the sigmoid with ``A`` shared and ``(log b, log C_mid)`` per size on the pooled
    means; ``weights``: per part a vector of run weights (the bootstrap's counts). Returns the
    parameters ``[A, log b_1, log C_mid_1, ...]`` or None."""
    Ls, Ys, Ws = [], [], []
    for (_size, L, cnt, tot), w in zip(parts, weights):
        n = w @ cnt
        s = w @ tot
        keep = n > 0
        Ls.append(L[keep])
        Ys.append(s[keep] / n[keep])
        Ws.append(np.sqrt(n[keep]))
    k = len(parts)
    lo = np.concatenate([[0.0], *[[_LOG_B[0], L.min() - 5.0] for L in Ls]])
    hi = np.concatenate([[1.0], *[[_LOG_B[1], L.max() + 5.0] for L in Ls]])
    if start is None:
        top = max(float(np.max(y)) for y in Ys)
        start = np.concatenate(
            [[min(max(top, R0 + 1e-3), 1.0 - 1e-6)], *[[0.0, float(np.median(L))] for L in Ls]]
        )
    start = np.clip(start, lo + 1e-9, hi - 1e-9)

    def resid(p):
        A = p[0]
        out = []
        for j in range(k):
            b, lm = math.exp(p[1 + 2 * j]), p[2 + 2 * j]
            out.append(Ws[j] * (Ys[j] - (R0 + (A - R0) / (1.0 + np.exp(b * (lm - Ls[j]))))))
        return np.concatenate(out)

    try:
        with warnings.catch_warnings(), np.errstate(over="ignore"):
            warnings.simplefilter("ignore")
            r = least_squares(resid, start, bounds=(lo, hi), method="trf", x_scale="jac")
    except (ValueError, FloatingPointError):
        return None
    return r.x if r.success else None


def achievable_gain(runs: pd.DataFrame, evals: pd.DataFrame, n_boot: int = 200, seed: int = 0) -> dict:
    """``R0``, ``A`` and A's 95 % bootstrap interval of one condition (see the module docstring)."""
    evals = read_evaluations(runs, evals)
    R0 = curves_of(evals, "responses")[2]  # the mean first evaluation, as sigmoid.csv's R0
    parts = _pooled(evals, runs)
    out = {"R0": R0, "A": math.nan, "A_low": math.nan, "A_high": math.nan, "n_boot": 0, "n_points": 0}
    if not math.isfinite(R0) or not parts:
        return out | {"message": "too few evaluations after step 0 for the sigmoid"}
    out["n_points"] = int(sum(p[2].sum() for p in parts))
    point = _fit_shared(parts, [np.ones(p[2].shape[0]) for p in parts], R0, None)
    if point is None:
        return out | {"message": "the shared-asymptote sigmoid did not converge"}
    out["A"] = float(point[0])
    if n_boot > 0:
        condition = str(runs["condition"].iloc[0])
        rng = np.random.default_rng([seed, zlib.crc32(f"gain|{condition}".encode())])
        boot = []
        for _ in range(n_boot):
            w = [
                np.bincount(rng.integers(0, p[2].shape[0], p[2].shape[0]), minlength=p[2].shape[0])
                for p in parts
            ]
            x = _fit_shared(parts, [wi.astype(float) for wi in w], R0, point)
            if x is not None:
                boot.append(x[0])
        out["n_boot"] = len(boot)
        if len(boot) >= 10:
            out["A_low"], out["A_high"] = (float(v) for v in np.quantile(boot, [0.025, 0.975]))
    if out["A"] <= R0:
        return out | {"message": "no gain: the shared asymptote is not above the start (A <= R0)"}
    message = "A at its bound 1: the curves have not flattened within the horizon" if out["A"] > 0.999 else ""
    return out | {"message": message}


def _level(R0: float, A: float, f: float) -> float:
    """R0 + f (A - R0); NaN without a gain (A unknown, or not above R0)."""
    return round(R0 + f * (A - R0), 4) if math.isfinite(A) and math.isfinite(R0) and A > R0 else math.nan


def gain_table(
    records,
    tables: Tables,
    fractions,
    n_boot: int = 1000,
    seed: int = 0,
    gain_boot: int = 200,
    resample: str = "seeds",
) -> pd.DataFrame:
    """α at every gain target ``f`` of every condition (one row per condition and fraction)."""
    fractions = [float(f) for f in fractions]
    if not fractions or tables.runs.empty or tables.options is None or tables.options.clock != "responses":
        return pd.DataFrame(columns=GAIN_COLUMNS)
    gains = {}
    levels: set[float] = set()
    for condition, runs in tables.runs.groupby("condition", sort=True):
        fitted = runs[runs["in_fit"]]
        gains[condition] = achievable_gain(fitted, tables.evals, gain_boot, seed)
        g = gains[condition]
        for f in fractions:
            levels |= {_level(g["R0"], g[a], f) for a in ("A", "A_low", "A_high")}
    levels = {v for v in levels if math.isfinite(v)}
    if levels:
        opts = dataclasses.replace(tables.options, targets=tuple(sorted(levels)))
        wide = build_tables(records, opts)
    rows = []
    for condition, g in gains.items():
        own = {f: [_level(g["R0"], g[a], f) for a in ("A", "A_low", "A_high")] for f in fractions}
        wanted = sorted({v for vs in own.values() for v in vs if math.isfinite(v)})
        exps = pd.DataFrame()
        if wanted:
            sub = dataclasses.replace(
                wide,
                runs=wide.runs[wide.runs["condition"] == condition].reset_index(drop=True),
                targets=wanted,
            )
            exps, _ = fit_conditions(sub, n_boot=n_boot, seed=seed, joint_model=False, resample=resample)
        by_clock = {r.clock: r for r in exps.itertuples()} if not exps.empty else {}
        for f in fractions:
            mid, low, high = own[f]
            r = by_clock.get(target_label(mid)) if math.isfinite(mid) else None
            ends = [by_clock.get(target_label(v)) for v in (mid, low, high) if math.isfinite(v)]
            ends = [e for e in ends if e is not None]
            row = {"condition": condition, "fraction": f, **{k: g[k] for k in ("R0", "A", "A_low", "A_high")}}
            row |= {"level": mid, "level_low": low, "level_high": high, "n_boot": g["n_boot"]}
            row |= {"n_points": g["n_points"], "message": g["message"]}
            if r is not None:
                row |= {
                    "exponent": r.exponent,
                    "ci_low": r.ci_low,
                    "ci_high": r.ci_high,
                    "n_runs": r.n_runs,
                    "n_censored": r.n_censored,
                    "n_sizes": r.n_sizes,
                    "sizes_early": r.sizes_early,
                }
                if not math.isfinite(r.exponent):
                    row["message"] = row["message"] or (
                        f"no exponent at the level ({r.n_censored} of {r.n_runs} runs censored)"
                    )
                    row |= {"ci_low_gain": -math.inf, "ci_high_gain": math.inf}
                elif len(ends) == 3 and all(math.isfinite(v) for v in (low, high)):
                    # a level with no interval (not reached, not identified) leaves that side open
                    lows = [e.ci_low if e.ci_low == e.ci_low else -math.inf for e in ends]
                    highs = [e.ci_high if e.ci_high == e.ci_high else math.inf for e in ends]
                    row["ci_low_gain"], row["ci_high_gain"] = float(min(lows)), float(max(highs))
                else:  # no interval on A: its uncertainty is unknown, so the level's is unbounded
                    row |= {"ci_low_gain": -math.inf, "ci_high_gain": math.inf}
            rows.append(row)
    return pd.DataFrame(rows, columns=GAIN_COLUMNS)
