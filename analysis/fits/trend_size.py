"""How the exponents and the critical batch move with the model size N: trends per decade of parameters.

A model-size study (docs/study.md, "The model-size study") varies the config group ``model``, which the
runs' configs show as several keys changing together (``model.embedded.hidden_size``, ``num_layers``,
...); none is numeric in the sense of a size, and no one of them varies with the others held fixed, so
:func:`analysis.fits.trend.trend_table` finds no series along any of them. The axis is N, each
condition's parameter count (:mod:`analysis.data.model_size`, ``runs.csv``'s ``model.parameters``).
Where N takes three or more values, :func:`size_trend_table` gives:

* the rows of :func:`analysis.fits.trend.trend_table` along ``model.parameters``: each target's α, the
  common α and the failure clock's γ against log10 N, with the same replicates, intervals, Holm
  correction over the clocks and verdicts as the η_ref trend (every ``model.…`` key is taken as set by
  the model choice and left out of the series; the other varying keys still define series);
* one row per target of **log10 B_crit** against log10 N (``clock`` ``b_crit:<a>``, the values in
  ``exponents``): McCandlish's B_crit of ``bcrit.csv`` with its bootstrap replicates
  (:func:`analysis.fits.bcrit.bcrit_tables`, the power law's resamples, so paired across conditions
  that share seeds), a replicate at an end of the B_crit grid (infinite or 0) kept at that end
  (``GRID_DECADES`` beyond the measured sizes), Holm over the targets of the series. These replicates
  are the bootstrap's, not widened to the profile interval that ``bcrit.csv``'s ``ci_low``/``ci_high``
  joins: the B_crit slope's interval is the percentile one (joined by the seed-cluster t interval with
  few distinct replicates, as every trend's).

Our choice: the slope is per decade of N (log10), as the η_ref trend's is per decade of η_ref.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.data.model_size import MODEL_PREFIX, PARAMETERS_KEY, condition_parameters
from analysis.fits.bcrit import GRID_DECADES
from analysis.fits.trend import COLUMNS, _apply_holm, trend_series, trend_table


def _with_parameters(frame: pd.DataFrame, sizes: dict[str, float]) -> pd.DataFrame:
    out = frame.copy()
    out[PARAMETERS_KEY] = out["condition"].map(sizes).astype(float)
    return out


def size_trend_table(
    tables,
    exponents: pd.DataFrame,
    fits: dict,
    common: pd.DataFrame | None,
    bcrit: pd.DataFrame | None = None,
    bcrit_replicates: dict | None = None,
    level: float = 0.95,
    equivalence: float = 0.1,
    *,
    n_boot: int = 0,
    seed: int = 0,
    resample: str = "seeds",
) -> pd.DataFrame:
    """The trend rows along N (module docstring); empty where N takes fewer than three known values."""
    sizes = condition_parameters(tables.runs)
    known = {c: n for c, n in sizes.items() if math.isfinite(n) and n > 0}
    if exponents.empty or len(set(known.values())) < 3:
        return pd.DataFrame(columns=COLUMNS)
    others = [k for k in tables.varying_keys if not k.startswith(MODEL_PREFIX) and k in exponents.columns]
    exps = _with_parameters(exponents, sizes)
    rows = trend_table(
        exps,
        fits,
        common,
        [PARAMETERS_KEY, *others],
        level,
        equivalence,
        tables=tables,
        n_boot=n_boot,
        seed=seed,
        resample=resample,
        references={},
    )
    rows = rows[rows["key"] == PARAMETERS_KEY]
    b_rows = bcrit_trend_rows(bcrit, bcrit_replicates or {}, sizes, others, level, equivalence)
    parts = [p for p in (rows, pd.DataFrame(b_rows, columns=COLUMNS)) if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)


def bcrit_trend_rows(
    bcrit: pd.DataFrame | None,
    replicates: dict,
    sizes: dict[str, float],
    others: list[str],
    level: float = 0.95,
    equivalence: float = 0.1,
) -> list[dict]:
    """One row per series and target: log10 B_crit against log10 N (module docstring)."""
    if bcrit is None or bcrit.empty:
        return []
    b = _with_parameters(bcrit, sizes)
    b = b[np.isfinite(b[PARAMETERS_KEY]) & (b[PARAMETERS_KEY] > 0)]
    keys = [k for k in others if k in b.columns]
    groups = b.groupby(keys, dropna=False, sort=True) if keys else [((), b)]
    rows = []
    for series_values, group in groups:
        series_values = series_values if isinstance(series_values, tuple) else (series_values,)
        series = ", ".join(f"{k}={v}" for k, v in zip(keys, series_values)) or "all"
        for clock, part in group.groupby("clock", sort=True):
            if part[PARAMETERS_KEY].nunique() < 3 or part[PARAMETERS_KEY].duplicated().any():
                continue
            rows.append(_bcrit_row(part, clock, series, replicates, level, equivalence))
    _apply_holm(rows, level)
    return rows


def _grid_bounds(part: pd.DataFrame) -> tuple[float, float]:
    """log10 of the B_crit grid's ends (``GRID_DECADES`` beyond the sizes every condition measured)."""
    sizes = [float(b) for text in part["alpha_local"].fillna("") for b in _sizes_of(text)]
    if not sizes:
        return -GRID_DECADES, 6.0
    return math.log10(min(sizes)) - GRID_DECADES, math.log10(max(sizes)) + GRID_DECADES


def _sizes_of(text: str) -> list[str]:
    """The B of ``alpha_local``'s ``B: alpha [low, high]`` items (``; ``-separated)."""
    return [item.split(":", 1)[0].strip() for item in str(text).split(";") if ":" in item]


def _bcrit_row(part: pd.DataFrame, clock: str, series: str, replicates: dict, level, equivalence) -> dict:
    part = part.sort_values(PARAMETERS_KEY)
    values = part[PARAMETERS_KEY].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        est = np.log10(part["b_crit"].to_numpy(float))
        reps = [
            np.log10(np.asarray(replicates.get((c, clock), np.empty(0)), float)) for c in part["condition"]
        ]
    est = np.where(np.isfinite(est), est, np.nan)
    res = trend_series(values, est, reps, level, equivalence, bounds=_grid_bounds(part))
    return {
        "key": PARAMETERS_KEY,
        "series": series,
        "clock": f"b_crit:{clock.split(':', 1)[1]}",
        "n_values": len(values),
        "values": " ".join(f"{v:g}" for v in values),
        "exponents": " ".join(f"{v:.3f}" for v in est),
        **res,
        "frac_reselected": 0.0,
        "reference": math.nan,
        "reference_inside": None,
    }


def size_rows(
    tables, exponents: pd.DataFrame, common: pd.DataFrame | None, bcrit: pd.DataFrame | None
) -> pd.DataFrame:
    """Per condition with a known N: each target's α, the common α, γ (where a failure clock was fitted)
    and each target's B_crit, with their 95 % intervals (the report's and the figure's table); empty
    where N takes fewer than two known values."""
    sizes = condition_parameters(tables.runs)
    known = {c: n for c, n in sizes.items() if math.isfinite(n) and n > 0}
    columns = ["condition", PARAMETERS_KEY, "quantity", "clock", "value", "ci_low", "ci_high"]
    if len(set(known.values())) < 2:
        return pd.DataFrame(columns=columns)
    rows = []
    for r in exponents[exponents["condition"].isin(known)].itertuples():
        quantity = "gamma" if r.clock == "failure" else "alpha"
        rows.append([r.condition, known[r.condition], quantity, r.clock, r.exponent, r.ci_low, r.ci_high])
    for r in (common if common is not None else pd.DataFrame(columns=["condition"])).itertuples():
        if r.condition in known:
            rows.append(
                [r.condition, known[r.condition], "alpha", "common", r.exponent_common, r.ci_low, r.ci_high]
            )
    for r in (bcrit if bcrit is not None else pd.DataFrame(columns=["condition"])).itertuples():
        if r.condition in known:
            rows.append([r.condition, known[r.condition], "b_crit", r.clock, r.b_crit, r.ci_low, r.ci_high])
    out = pd.DataFrame(rows, columns=columns)
    return out.sort_values([PARAMETERS_KEY, "quantity", "clock"], kind="stable").reset_index(drop=True)
