"""How an exponent moves along a numeric condition key: the slope of α (or γ) against log10 of the key.

The seed study's headline is a curve, not a point: with K = 8 steps per rollout, α rose from 0.15 to
0.44 when η_ref went from 1e-6 to 1e-5. For every numeric condition key with at least three positive
values (the other varying keys held fixed: one *series* per combination), and for every clock (each
target's α, the common α across targets of ``analysis.cross``, and the failure clock's γ), this module
fits

    exponent(v) = a + s · log10(v)

by weighted least squares (weights 1 / the bootstrap variance of each condition's exponent) and gives
s a percentile interval from the bootstrap replicates: replicate r of every condition enters replicate
r of the slope. That is right whether the conditions were resampled independently (then the r-th
replicates are independent draws, and their combination is a draw from the product) or paired on
shared seeds (``analysis.blocks``: then the pairing is kept, and a seed effect shared by the
conditions cancels in the slope). The same replicates give the difference between neighbouring values
with its interval.

The verdict (``trend``): ``rise`` or ``fall`` when the slope's interval excludes 0; ``flat`` when every
neighbouring difference's interval lies within ±``equivalence`` (default 0.1: an equivalence bound, not
the absence of evidence); ``unresolved`` otherwise.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.cross import numeric

COLUMNS = [
    "key",
    "series",
    "clock",
    "n_values",
    "values",
    "exponents",
    "slope",
    "slope_low",
    "slope_high",
    "diff_low_min",
    "diff_high_max",
    "trend",
    "n_boot_used",
    "note",
]


def _replicates_common(row, fits: dict, condition: str) -> tuple[float, np.ndarray]:
    """The common α of ``condition`` and its replicates (the weighted targets' replicates)."""
    targets = str(row["targets"]).split()
    weights = (
        np.array([float(w) for w in str(row["weights"]).split()]) if isinstance(row["weights"], str) else None
    )
    use = [fits.get((condition, f"target:{t}")) for t in targets]
    if weights is None or any(f is None or not f.boot_slopes.size for f in use) or len(use) != weights.size:
        return math.nan, np.empty(0)
    m = min(f.boot_slopes.size for f in use)
    reps = np.stack([f.boot_slopes[:m] for f in use], 1) @ weights
    return float(row["exponent_common"]), reps


def _slope(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """WLS slopes of the rows of ``y`` ([..., n]) on ``x`` ([n]) with weights ``w``."""
    xc = x - (w * x).sum() / w.sum()
    yc = y - (y * w).sum(-1, keepdims=True) / w.sum()
    return (w * xc * yc).sum(-1) / (w * xc * xc).sum()


def trend_series(values, estimates, replicates, level: float = 0.95, equivalence: float = 0.1) -> dict:
    """Slope of ``estimates`` on log10 ``values`` with its replicate interval, and the neighbouring
    differences (module docstring). ``replicates``: one array per value (the conditions' bootstrap
    replicates, paired by index)."""
    order = np.argsort(values)
    x = np.log10(np.asarray(values, float)[order])
    y = np.asarray(estimates, float)[order]
    reps = [np.asarray(replicates[i], float) for i in order]
    out = {"slope": math.nan, "slope_low": math.nan, "slope_high": math.nan, "diff_low_min": math.nan}
    out.update(diff_high_max=math.nan, trend="unresolved", n_boot_used=0, note="")
    m = min((r.size for r in reps), default=0)
    if m == 0 or not np.isfinite(y).all():
        out["note"] = "an exponent or its bootstrap replicates are missing"
        return out
    Y = np.stack([r[:m] for r in reps], 1)
    Y = Y[np.isfinite(Y).all(1)]
    out["n_boot_used"] = int(len(Y))
    if len(Y) < 50:
        out["note"] = f"only {len(Y)} replicates with every exponent identified"
        return out
    var = Y.var(0, ddof=1)
    w = 1 / np.maximum(var, 1e-12)
    q = (1 - level) / 2
    boot = _slope(x, Y, w)
    out["slope"] = float(_slope(x, y, w))
    out["slope_low"], out["slope_high"] = (float(v) for v in np.quantile(boot, [q, 1 - q]))
    diffs = np.diff(Y, axis=1)
    lows, highs = np.quantile(diffs, q, axis=0), np.quantile(diffs, 1 - q, axis=0)
    out["diff_low_min"], out["diff_high_max"] = float(lows.min()), float(highs.max())
    if out["slope_low"] > 0:
        out["trend"] = "rise"
    elif out["slope_high"] < 0:
        out["trend"] = "fall"
    elif lows.min() > -equivalence and highs.max() < equivalence:
        out["trend"] = "flat"
    return out


def trend_table(
    exponents: pd.DataFrame,
    fits: dict,
    common: pd.DataFrame | None,
    varying: list[str],
    level: float = 0.95,
    equivalence: float = 0.1,
) -> pd.DataFrame:
    """One row per numeric key with three or more positive values, series and clock (module docstring)."""
    rows = []
    keys = [k for k in varying if k in exponents.columns]
    by_condition = exponents.drop_duplicates("condition").set_index("condition")
    commons = common.set_index("condition") if common is not None and len(common) else pd.DataFrame()
    for key in keys:
        vals = by_condition[key]
        if not numeric(vals.dropna()) or vals.isna().any():
            continue
        if (vals.astype(float) <= 0).any() or vals.astype(float).nunique() < 3:
            continue
        others = [k for k in keys if k != key]
        groups = by_condition.groupby(others, dropna=False, sort=True) if others else [((), by_condition)]
        for series_values, group in groups:
            series_values = series_values if isinstance(series_values, tuple) else (series_values,)
            if group[key].astype(float).nunique() < 3 or group[key].astype(float).duplicated().any():
                continue
            series = ", ".join(f"{k}={v}" for k, v in zip(others, series_values)) or "all"
            clocks = [c for c in exponents["clock"].unique()]
            for clock in [*clocks, "common"]:
                est, reps, notes = [], [], []
                for condition in group.index:
                    if clock == "common":
                        if condition not in commons.index or not math.isfinite(
                            float(commons.loc[condition].get("exponent_common", math.nan))
                        ):
                            est.append(math.nan)
                            reps.append(np.empty(0))
                            continue
                        row = commons.loc[condition]
                        e, r = _replicates_common(row, fits, condition)
                        p = float(row.get("p_common", math.nan))
                        if math.isfinite(p) and p < 0.05:
                            notes.append(f"the common-α test rejects at {key}={group.loc[condition, key]}")
                    else:
                        fit = fits.get((condition, clock))
                        e = fit.exponent if fit is not None else math.nan
                        r = fit.boot_slopes if fit is not None else np.empty(0)
                    est.append(e)
                    reps.append(r)
                if not np.isfinite(est).any():
                    continue
                res = trend_series(group[key].astype(float).to_numpy(), est, reps, level, equivalence)
                order = np.argsort(group[key].astype(float).to_numpy())
                note = "; ".join(x for x in [res.pop("note"), *notes] if x)
                rows.append(
                    {
                        "key": key,
                        "series": series,
                        "clock": clock,
                        "n_values": len(group),
                        "values": " ".join(f"{float(group[key].iloc[i]):g}" for i in order),
                        "exponents": " ".join(f"{est[i]:.3f}" for i in order),
                        **res,
                        "note": note,
                    }
                )
    return pd.DataFrame(rows, columns=COLUMNS)


def trend_lines(trend: pd.DataFrame, equivalence: float = 0.1) -> list[str]:
    """The report.md section."""
    from analysis.markdown import markdown_table

    if trend is None or trend.empty:
        return []

    def f(v) -> str:
        return f"{v:.3f}" if isinstance(v, float) and math.isfinite(v) else "–"

    lines = [
        "",
        "## Exponents along a numeric key",
        "",
        "Slope of the exponent against log10 of the key, by weighted least squares, with a percentile "
        "interval from the conditions' bootstrap replicates (paired where the conditions share seeds); "
        f"`flat` means every neighbouring difference's 95 % interval lies within ±{equivalence:g} "
        "(`analysis/trend.py`).",
        "",
    ]
    rows = [
        [
            r.key,
            r.series,
            r.clock,
            r.values,
            r.exponents,
            f"{f(r.slope)} [{f(r.slope_low)}, {f(r.slope_high)}]",
            f"[{f(r.diff_low_min)}, {f(r.diff_high_max)}]",
            f"**{r.trend}**",
            r.note if isinstance(r.note, str) else "",
        ]
        for r in trend.itertuples()
    ]
    lines.append(
        markdown_table(
            [
                "key",
                "series",
                "clock",
                "values",
                "exponents",
                "slope per decade",
                "neighbour Δ range",
                "trend",
                "note",
            ],
            rows,
        )
    )
    return lines
