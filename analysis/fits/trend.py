"""How an exponent moves along a numeric condition key: the slope of α (or γ) against log10 of the key.

The seed study's headline is a curve, not a point: with K = 8 steps per rollout, α rose from 0.15 to
0.44 when η_ref went from 1e-6 to 1e-5. For every numeric condition key with at least three positive
values (the other varying keys held fixed: one *series* per combination), and for every clock (each
target's α, the common α across targets of ``analysis.fits.cross``, and the failure clock's γ), this module
fits

    exponent(v) = a + s · log10(v)

by weighted least squares (weights 1 / the bootstrap variance of each condition's exponent) and gives
s a percentile interval from the bootstrap replicates: replicate r of every condition enters replicate
r of the slope. That is right whether the conditions were resampled independently (then the r-th
replicates are independent draws, and their combination is a draw from the product) or paired on
shared seeds (``analysis.fits.seed_blocks``: then the pairing is kept, and a seed effect shared by the
conditions cancels in the slope). The same replicates give the difference between neighbouring values
with its interval.

**Which replicates.** Those behind the intervals the report prints, and with the fit's choices inside
them (:mod:`analysis.fits.trend_replicates`): a target's early sizes (the sizes its power-law fit leaves out
because most crossings come within the first rollouts) are chosen again in every resample, so a
condition whose choice could have gone either way carries that in its replicates
(``frac_reselected``: the largest share of a condition's resamples whose choice differs from the full
data's); then each condition's replicates are stretched to its reported interval
(:func:`analysis.fits.cross.reported_replicates`: a degenerate bootstrap widened to the profile
likelihood enters with that width, not with the narrow spread of its raw replicates, which would give
it a weight hundreds of times a normal condition's). Without the tables (``trend_table(tables=None)``)
the fits' replicates are used with the choice held fixed, stretched likewise.

**Few distinct resamples.** With S seeds resampled as clusters and paired across the conditions, the
replicates take at most C(2S - 1, S) distinct values (126 for 5 seeds), however many are drawn: the
2.5 % tail of the slope rests on a handful of seed draws. ``n_distinct`` reports the count; below
``FEW_DISTINCT`` (500) the interval is the union of the percentile interval and the seed-cluster t
interval ``slope ± z * s``, ``s`` the replicates' spread from their quartiles (IQR / 1.349, which the
ties and the few unidentified replicates do not move). Each condition's replicates carry its fit's
small-sample factor ``sqrt(S / (S - 1)) t_{S-1} / z`` (:func:`analysis.fits.fit.fit_power_law`), so
``z * s`` is ``t_{S-1} sqrt(S / (S - 1))`` times the raw bootstrap spread: the t pivot of a mean over S
seeds; the p-value is the larger of the two (``interval_method`` says which interval was used).

**The seed paper's value.** The two-clock paper (``docs/design.md``, "the result the project set out to
test") found α rising from 0.15 to 0.44 as η_ref went from 1e-6 to 1e-5 with K = 8: +0.29 per decade
of η_ref (``SEED_PAPER_SLOPE``). ``trend_table``'s ``references`` (default: that value for
``lr.ref_lr``) is tested on every α row of that key: ``reference_inside`` says whether the slope's
interval contains it, and the report prints the sentence with the interval.

The verdict (``trend``): ``rise`` or ``fall`` when the slope's interval excludes 0 **and** its
bootstrap p-value survives Holm's correction over the clocks of the series (each target's α and the
common α are tests of one question: does the exponent move with the key?); ``flat`` when every
neighbouring difference's interval lies within ±``equivalence`` (default 0.1: an equivalence bound, not
the absence of evidence); ``unresolved`` otherwise. Three rules keep a verdict from resting on
selection or Monte-Carlo noise:

* replicates whose exponent is not identified (``±inf``: events at fewer than two sizes in that
  resample) are **kept**, bounded at ±``EXPONENT_BOUND`` (2: beyond any exponent a clock of these
  studies takes), and ``frac_unidentified`` reports their share; dropping them would condition the
  slope on the resamples where every condition is well measured;
* a condition whose common-α test rejects (p < 0.05: its targets' exponents differ) enters the
  ``common`` series not at all — it is measured per target only, and the note says so;
* no verdict other than ``unresolved`` rests on fewer than ``MIN_VERDICT_RESAMPLES`` (2,000)
  replicates: with 400 the Monte-Carlo error of a 2.5 % endpoint is comparable to the distance of a
  borderline bound from 0.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.special import ndtr

from analysis.fits.cross import numeric
from analysis.fits.trend_replicates import condition_replicates

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
    "p_value",
    "p_holm",
    "frac_unidentified",
    "n_boot_used",
    "n_distinct",
    "interval_method",
    "frac_reselected",
    "reference",
    "reference_inside",
    "note",
]
#: unidentified replicates (+-inf) enter the slope at this exponent (module docstring)
EXPONENT_BOUND = 2.0
#: the fewest bootstrap replicates behind a rise, fall or flat verdict
MIN_VERDICT_RESAMPLES = 2000
#: below this many distinct slope replicates the seed-cluster t interval joins the percentile one
FEW_DISTINCT = 500
#: the two-clock paper's slope of α per decade of η_ref: 0.15 -> 0.44 from 1e-6 to 1e-5 at K = 8
SEED_PAPER_SLOPE = 0.29
#: the reference slopes tested by default, per key
REFERENCES = {"lr.ref_lr": SEED_PAPER_SLOPE}


def _replicates_common(row, replicates, condition: str) -> tuple[float, np.ndarray]:
    """The common α of ``condition`` and its replicates (the weighted targets' replicates;
    ``replicates(condition, clock)`` gives a target's, or None)."""
    targets = str(row["targets"]).split()
    weights = (
        np.array([float(w) for w in str(row["weights"]).split()]) if isinstance(row["weights"], str) else None
    )
    use = [replicates(condition, f"target:{t}") for t in targets]
    if weights is None or any(r is None or not r.size for r in use) or len(use) != weights.size:
        return math.nan, np.empty(0)
    m = min(r.size for r in use)
    reps = np.stack([r[:m] for r in use], 1)
    with np.errstate(invalid="ignore"):
        combined = np.where(weights[None, :] != 0, reps * weights[None, :], 0.0).sum(1)
    return float(row["exponent_common"]), combined


def bounded(
    replicates: np.ndarray, bound: float = EXPONENT_BOUND, low: float | None = None
) -> tuple[np.ndarray, float]:
    """Replicates with the unidentified ones kept at ±``bound`` (NaN, a combination of +inf and -inf,
    alternately at either bound) and finite ones clipped to it; returns them and the unidentified
    share. ``low``: a lower bound other than ``-bound`` (a quantity not centred on 0, such as
    log10 B_crit)."""
    low = -bound if low is None else low
    r = np.asarray(replicates, float).copy()
    nan = np.isnan(r)
    unidentified = float((~np.isfinite(r)).mean()) if r.size else 0.0
    r[nan] = np.where(np.arange(int(nan.sum())) % 2 == 0, bound, low)
    return np.clip(r, low, bound), unidentified


def _slope(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """WLS slopes of the rows of ``y`` ([..., n]) on ``x`` ([n]) with weights ``w``."""
    xc = x - (w * x).sum() / w.sum()
    yc = y - (y * w).sum(-1, keepdims=True) / w.sum()
    return (w * xc * yc).sum(-1) / (w * xc * xc).sum()


def trend_series(
    values, estimates, replicates, level: float = 0.95, equivalence: float = 0.1, bounds=None
) -> dict:
    """Slope of ``estimates`` on log10 ``values`` with its replicate interval, and the neighbouring
    differences (module docstring). ``replicates``: one array per value (the conditions' bootstrap
    replicates, paired by index). ``bounds``: ``(low, high)`` at which unidentified replicates are kept
    (default ±``EXPONENT_BOUND``, an exponent's)."""
    low, high = bounds if bounds is not None else (-EXPONENT_BOUND, EXPONENT_BOUND)
    order = np.argsort(values)
    x = np.log10(np.asarray(values, float)[order])
    y = np.asarray(estimates, float)[order]
    reps = [np.asarray(replicates[i], float) for i in order]
    out = {"slope": math.nan, "slope_low": math.nan, "slope_high": math.nan, "diff_low_min": math.nan}
    out.update(diff_high_max=math.nan, trend="unresolved", p_value=math.nan, frac_unidentified=math.nan)
    out.update(n_boot_used=0, n_distinct=0, interval_method="", note="")
    m = min((r.size for r in reps), default=0)
    if m == 0 or not np.isfinite(y).all():
        out["note"] = "an exponent or its bootstrap replicates are missing"
        return out
    kept = [bounded(r[:m], high, low) for r in reps]
    Y = np.stack([k[0] for k in kept], 1)
    out["frac_unidentified"] = float(max(k[1] for k in kept))
    out["n_boot_used"] = int(len(Y))
    if len(Y) < 50:
        out["note"] = f"only {len(Y)} bootstrap replicates"
        return out
    var = Y.var(0, ddof=1)
    w = 1 / np.maximum(var, 1e-12)
    q = (1 - level) / 2
    boot = _slope(x, Y, w)
    out["slope"] = float(_slope(x, y, w))
    _slope_interval(out, boot, level)
    diffs = np.diff(Y, axis=1)
    lows, highs = np.quantile(diffs, q, axis=0), np.quantile(diffs, 1 - q, axis=0)
    out["diff_low_min"], out["diff_high_max"] = float(lows.min()), float(highs.max())
    if len(Y) < MIN_VERDICT_RESAMPLES:
        out["note"] = f"{len(Y)} resamples: a verdict needs at least {MIN_VERDICT_RESAMPLES}"
    elif out["slope_low"] > 0:
        out["trend"] = "rise"
    elif out["slope_high"] < 0:
        out["trend"] = "fall"
    elif lows.min() > -equivalence and highs.max() < equivalence:
        out["trend"] = "flat"
    notes = [out["note"]] if out["note"] else []
    if out["frac_unidentified"] > 0:
        notes.append(
            f"{out['frac_unidentified']:.1%} of a condition's replicates not identified (kept at {_bounds_text(low, high)})"
        )
    if out["interval_method"] != "percentile":
        notes.append(
            f"{out['n_distinct']} distinct slope replicates (< {FEW_DISTINCT}: seeds resampled as clusters): "
            "the seed-cluster t interval joins the percentile one"
        )
    out["note"] = "; ".join(notes)
    return out


def _bounds_text(low: float, high: float) -> str:
    return f"±{high:g}" if low == -high else f"{low:g} / {high:g}"


def _slope_interval(out: dict, boot: np.ndarray, level: float) -> None:
    """The slope's interval and p-value from its replicates ``boot`` (module docstring, "Few distinct
    resamples"): the percentile interval, joined by the seed-cluster t interval where the replicates take
    fewer than ``FEW_DISTINCT`` distinct values."""
    q = (1 - level) / 2
    out["slope_low"], out["slope_high"] = (float(v) for v in np.quantile(boot, [q, 1 - q]))
    # two-sided bootstrap p-value of slope = 0 (the share of replicates on the other side of 0)
    out["p_value"] = float(min(1.0, 2 * min((boot <= 0).mean(), (boot >= 0).mean())))
    out["n_distinct"] = int(np.unique(np.round(boot, 12)).size)
    out["interval_method"] = "percentile"
    if out["n_distinct"] >= FEW_DISTINCT:
        return
    q25, q75 = np.quantile(boot, [0.25, 0.75])
    spread = float(q75 - q25) / 1.3489795003921634
    z = float(np.sqrt(2) * _erfinv(level))
    slope = out["slope"]
    out["slope_low"] = min(out["slope_low"], slope - z * spread)
    out["slope_high"] = max(out["slope_high"], slope + z * spread)
    if spread > 0:
        out["p_value"] = max(out["p_value"], float(2 * ndtr(-abs(slope) / spread)))
    elif slope == 0:
        out["p_value"] = 1.0
    out["interval_method"] = "percentile ∪ seed-cluster t"


def _erfinv(p: float) -> float:
    from scipy.special import erfinv

    return float(erfinv(p))


def reference_test(row: dict, references: dict | None) -> None:
    """Fill ``reference`` and ``reference_inside`` of one α row (target or common clock) whose key has a
    reference slope (module docstring): inside when the slope's interval contains it."""
    ref = (references or {}).get(row["key"])
    row["reference"], row["reference_inside"] = math.nan, None
    if ref is None or row["clock"] == "failure":
        return
    row["reference"] = float(ref)
    low, high = row.get("slope_low", math.nan), row.get("slope_high", math.nan)
    if isinstance(low, float) and isinstance(high, float) and not (math.isnan(low) or math.isnan(high)):
        row["reference_inside"] = bool(low <= ref <= high)


def holm(p_values) -> np.ndarray:
    """Holm's step-down adjustment of a family of p-values (NaN entries are left out and stay NaN)."""
    p = np.asarray(p_values, float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * p[i]))
        out[i] = running
    return out


def _apply_holm(rows: list[dict], level: float) -> None:
    """Holm over the clocks of each (key, series) family of alpha (targets and common; gamma alone):
    a rise or fall whose adjusted p-value is not below 1 - level becomes unresolved."""
    families: dict[tuple, list[dict]] = {}
    for r in rows:
        kind = "failure" if r["clock"] == "failure" else "alpha"
        families.setdefault((r["key"], r["series"], kind), []).append(r)
    for family in families.values():
        adjusted = holm([r.get("p_value", math.nan) for r in family])
        for r, p in zip(family, adjusted):
            r["p_holm"] = float(p)
            if r["trend"] in ("rise", "fall") and not p < 1 - level:
                why = f"{r['trend']} not significant after Holm over {len(family)} clocks"
                r["note"] = "; ".join(x for x in [r.get("note", ""), why] if x)
                r["trend"] = "unresolved"


def trend_table(
    exponents: pd.DataFrame,
    fits: dict,
    common: pd.DataFrame | None,
    varying: list[str],
    level: float = 0.95,
    equivalence: float = 0.1,
    *,
    tables=None,
    n_boot: int = 0,
    seed: int = 0,
    resample: str = "seeds",
    references: dict | None = None,
) -> pd.DataFrame:
    """One row per numeric key with three or more positive values, series and clock (module docstring).

    ``tables``, ``n_boot``, ``seed``, ``resample``: those of :func:`analysis.fits.exponents.fit_conditions`,
    so each target's replicates are rebuilt with its early sizes chosen in every resample (None: the
    fits' replicates, the choice held fixed). ``references``: key -> a reference slope per decade
    tested on that key's α rows (default ``REFERENCES``: the seed paper's +0.29 per decade of η_ref)."""
    references = REFERENCES if references is None else references
    cache: dict[tuple[str, str], tuple[np.ndarray, float, str] | None] = {}

    def replicates(condition: str, clock: str) -> np.ndarray | None:
        if (condition, clock) not in cache:
            fit = fits.get((condition, clock))
            cache[(condition, clock)] = (
                None
                if fit is None
                else condition_replicates(tables, condition, clock, fit, n_boot, seed, resample)
            )
        got = cache[(condition, clock)]
        return None if got is None else got[0]

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
            for clock in [*exponents["clock"].unique(), "common"]:
                row = _series_row(key, series, clock, group, fits, commons, replicates, level, equivalence)
                if row is None:
                    continue
                reselected = [cache.get((c, t)) for c in group.index for t in _clocks_of(row, commons, c)]
                row["frac_reselected"] = max((r[1] for r in reselected if r is not None), default=0.0)
                held = {r[2] for r in reselected if r is not None and r[2]}
                if held:
                    row["note"] = "; ".join(x for x in [row.get("note", ""), *sorted(held)] if x)
                reference_test(row, references)
                rows.append(row)
    _apply_holm(rows, level)
    return pd.DataFrame(rows, columns=COLUMNS)


def _clocks_of(row: dict, commons: pd.DataFrame, condition: str) -> list[str]:
    """The clocks whose replicates went into ``row`` for ``condition`` (a common row: its targets')."""
    if row["clock"] != "common":
        return [row["clock"]]
    if condition not in commons.index:
        return []
    return [f"target:{t}" for t in str(commons.loc[condition].get("targets", "")).split()]


def _series_row(key, series, clock, group, fits, commons, replicates, level, equivalence) -> dict | None:
    """The trend row of one key, series and clock (None when no condition has an exponent)."""
    est, reps, notes, used = [], [], [], []
    for condition in group.index:
        if clock == "common":
            if condition not in commons.index or not math.isfinite(
                float(commons.loc[condition].get("exponent_common", math.nan))
            ):
                est.append(math.nan)
                reps.append(np.empty(0))
                used.append(condition)
                continue
            row = commons.loc[condition]
            p = float(row.get("p_common", math.nan))
            if math.isfinite(p) and p < 0.05:
                # the targets disagree: this condition is measured per target only
                notes.append(
                    f"left out at {key}={group.loc[condition, key]}: its common-α test rejects "
                    f"(p = {p:.2g}), see the per-target rows"
                )
                continue
            e, r = _replicates_common(row, replicates, condition)
        else:
            fit = fits.get((condition, clock))
            e = fit.exponent if fit is not None else math.nan
            got = replicates(condition, clock) if fit is not None else None
            r = got if got is not None else np.empty(0)
        est.append(e)
        reps.append(r)
        used.append(condition)
    if not np.isfinite(est).any():
        return None
    values = group.loc[used, key].astype(float).to_numpy()
    base = {"key": key, "series": series, "clock": clock, "n_values": len(used)}
    if len(used) < 3:
        return {
            **base,
            "values": " ".join(f"{v:g}" for v in sorted(values)),
            "exponents": "",
            "trend": "unresolved",
            "note": "; ".join([f"{len(used)} value(s) left (< 3)", *notes]),
        }
    res = trend_series(values, est, reps, level, equivalence)
    order = np.argsort(values)
    note = "; ".join(x for x in [res.pop("note"), *notes] if x)
    return {
        **base,
        "values": " ".join(f"{values[i]:g}" for i in order),
        "exponents": " ".join(f"{est[i]:.3f}" for i in order),
        **res,
        "note": note,
    }
