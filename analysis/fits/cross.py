"""Across conditions: a common exponent across targets, and exponents against a varied key.

**Common α across targets** (per condition). The targets of one condition are measured on the same
runs, so their exponents are correlated; :func:`analysis.fits.exponents.fit_conditions` fits every clock
of a condition on the same bootstrap resamples of runs (seed ids where seeds are resampled as clusters),
so replicate ``r`` of every target is one resample. The common exponent is a **fixed-weight** mean of the
k target exponents ``α̂``

    α_c = wᵀ α̂,        w_j ∝ 1 / se_j²  (Σ w_j = 1)

with ``se_j`` each target's model-based (Wald) standard error from the observed information of its
censored likelihood (:func:`analysis.fits.fit.fit_power_law`; where the scatter collapsed and there is
none, the half-width of the interval the fit reports over z(0.975); where that is unbounded too, equal
weights for every target). The weights rest on the likelihood's N − m residual degrees of freedom, not
on the bootstrap the interval is judged on, so they are fixed with respect to it. The interval of
``α_c`` is the percentile interval of the same weights applied to **every** resample's replicates, each
target's stretched to the interval its fit reports (:func:`reported_replicates`): those replicates
already carry the fit's small-sample factor (with seeds as clusters ``sqrt(S / (S - 1)) t_{S-1}(0.975)
/ z(0.975)``), so the combination is the seed-cluster t interval of a fixed linear combination, as each
target's interval is of its own exponent. A resample in which a target is not identified is infinite on
its side (NaN, counted on both sides, where two targets run off in opposite directions), so it widens
the common interval instead of being dropped; the common interval is narrower than the narrowest
target's only by what averaging targets whose errors are not perfectly correlated buys.

Why not GLS: the minimum-distance weights ``Σ⁻¹1 / 1ᵀΣ⁻¹1`` estimated from the covariance ``Σ`` of the
same bootstrap (over 5 seeds, 4 degrees of freedom) pick the combination whose *estimated* variance is
smallest, and the percentile interval then inherits that selection: on synthetic studies of 5 sizes ×
5 seeds and three targets (``benchmarks/calibration/common_alpha_coverage.py``, 500 draws) it covered 88.6 % and
90.2 % at target correlations 0.3 and 0.6 against 94.8–96.6 % per target; the fixed weights cover as the
targets do (figures in docs/analysis.md, "Common α across targets").

**Test of a common α**: the minimum-distance statistic ``χ² = min_a (α̂ - a 1)ᵀ Σ⁻¹ (α̂ - a 1)`` on
``k - 1`` degrees of freedom (Cameron & Trivedi, *Microeconometrics*, §6.7), ``Σ`` the covariance of
the replicates where every target is identified with the fits' t factor taken out (``Σ`` then estimates
the sampling covariance); where the replicates resample S seeds as clusters the covariance has only
S − 1 degrees of freedom and the statistic is referred to Hotelling's T²: ``T² (ν - df + 1) / (df ν) ~
F(df, ν - df + 1)``, ν = S − 1. This replaces a likelihood-ratio test, which would need the joint
likelihood of a run's crossing times of several targets (they are strongly dependent: one curve).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats
from scipy.special import stdtrit

from analysis.data.clock_tables import Tables, target_label
from analysis.fits.fit import FitResult

COMMON_COLUMNS = [
    "condition",
    "targets",
    "n_targets",
    "exponents",
    "exponent_common",
    "ci_low",
    "ci_high",
    "se",
    "chi2",
    "df",
    "p_common",
    "weights",
    "n_boot_used",
    "note",
]
_Z975 = float(stats.norm.ppf(0.975))


def reported_replicates(fit: FitResult, level: float = 0.95) -> np.ndarray:
    """A target's bootstrap replicates stretched to the interval its fit reports.

    Where :func:`analysis.fits.fit.fit_power_law` widened a degenerate bootstrap to the profile-likelihood
    interval, the replicates' percentile interval is narrower than the reported one: each side's
    deviations from the estimate are scaled by the reported half-width over the replicates' one (an
    unbounded reported side makes that side's replicates infinite). Replicates of a resample whose
    exponent is not identified stay +-inf. So a common exponent formed from the replicates can never
    be narrower than its targets' reported evidence allows."""
    reps = np.asarray(fit.boot_slopes, float).copy()
    if not reps.size or not np.isfinite(fit.exponent):
        return reps
    q = (1 - level) / 2
    lo, hi = np.quantile(reps, [q, 1 - q], method="inverted_cdf")
    dev = reps - fit.exponent
    for side, reported, boot in ((dev < 0, fit.ci_low, lo), (dev > 0, fit.ci_high, hi)):
        if not np.isfinite(reported):
            if np.isnan(reported):
                continue
            reps[side & np.isfinite(reps)] = np.sign(reported) * np.inf
            continue
        half_rep, half_boot = abs(reported - fit.exponent), abs(boot - fit.exponent)
        if np.isfinite(half_boot) and half_boot > 0 and half_rep > half_boot * (1 + 1e-9):
            finite = side & np.isfinite(reps)
            reps[finite] = fit.exponent + dev[finite] * (half_rep / half_boot)
    return reps


def _bounded_quantiles(values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of replicates that may be +-inf or NaN (a combination of +inf and -inf):
    NaN counts as -inf for the lower end and +inf for the upper end, so an unidentified replicate can
    only widen the interval."""
    q = (1 - level) / 2
    low = np.quantile(np.where(np.isnan(values), -np.inf, values), q, method="inverted_cdf")
    high = np.quantile(np.where(np.isnan(values), np.inf, values), 1 - q, method="inverted_cdf")
    return float(low), float(high)


#: how the targets' exponents are weighted in the common α (module docstring)
WEIGHTINGS = ("inverse-variance", "equal")


def target_weights(fits: list[FitResult], weighting: str = "inverse-variance") -> tuple[np.ndarray, str]:
    """Fixed weights of the common α (summing to 1) and a note: ``inverse-variance`` from each target's
    Wald standard error (the reported interval's half-width over z where the Wald one is missing), equal
    where some target has neither; ``equal``: 1 / k each."""
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
    k = len(fits)
    equal = np.full(k, 1.0 / k)
    if weighting == "equal":
        return equal, ""
    se = []
    for f in fits:
        s = f.se
        if not (np.isfinite(s) and s > 0):
            s = (f.ci_high - f.ci_low) / (2 * _Z975)
        se.append(s if np.isfinite(s) and s > 0 else np.nan)
    se = np.asarray(se, float)
    if not np.isfinite(se).all():
        return equal, "a target without a finite standard error: equal weights"
    w = 1 / se**2
    return w / w.sum(), ""


def _t_factor(fit: FitResult) -> float:
    """The Student-t part of a fit's small-sample factor (:func:`analysis.fits.fit._inflation`),
    ``t_df(0.975) / z(0.975)`` with df = S - 1 seed clusters or N - m runs; 1 without inflation."""
    if fit.inflation == 1.0:
        return 1.0
    df = fit.n_clusters - 1 if fit.n_clusters else fit.n_runs - fit.n_sizes
    return float(stdtrit(df, 0.975)) / _Z975 if df >= 1 else 1.0


def _equality_test(est: np.ndarray, cov: np.ndarray, clusters: int, out: dict) -> tuple[float, int, float]:
    """``(statistic, df, p)`` of the test of one α for every target (module docstring)."""
    inv = np.linalg.pinv(cov)
    one = np.ones(est.size)
    info = float(one @ inv @ one)
    df = est.size - 1
    if not info > 0:
        return np.nan, df, np.nan
    resid = est - float(one @ inv @ est) / info  # the minimising a: the GLS combination
    stat = float(max(resid @ inv @ resid, 0.0))
    if not clusters:
        return stat, df, float(stats.chi2.sf(stat, df))
    # the covariance comes from S resampled seeds (nu = S - 1 degrees of freedom): Hotelling's T^2
    # reference, T^2 (nu - df + 1) / (df nu) ~ F(df, nu - df + 1), instead of chi^2
    nu = clusters - 1
    if nu - df + 1 < 1:
        out["note"] = (out["note"] + "; " if out["note"] else "") + f"{clusters} seeds: too few to test"
        return stat, df, np.nan
    return stat, df, float(stats.f.sf(stat * (nu - df + 1) / (df * nu), df, nu - df + 1))


def common_exponent(fits: list[FitResult], weighting: str = "inverse-variance") -> dict:
    """Fixed-weight common exponent of several targets' fits with paired bootstrap replicates, its
    interval and the test of one α (module docstring).

    The interval comes from **every** resample (:func:`reported_replicates`: the targets' replicates as
    their reported intervals have them, unidentified ones infinite), so resamples where a target is not
    identified widen it instead of being dropped (dropping them keeps the well-behaved resamples and
    makes the common interval narrower than its evidence); the test comes from the resamples in which
    every target is identified. ``weighting``: :data:`WEIGHTINGS`."""
    use = [f for f in fits if np.isfinite(f.exponent) and f.boot_slopes.size]
    out = {"n_targets": len(use), "note": ""}
    if len(use) < 2:
        out["note"] = "needs two targets with an identified exponent and bootstrap replicates"
        return out
    m = min(f.boot_slopes.size for f in use)
    reps = np.stack([reported_replicates(f)[:m] for f in use], 1)  # [m, k]
    finite = np.isfinite(reps).all(1)
    out["n_boot_used"] = int(finite.sum())
    if finite.sum() < 50:
        out["note"] = f"only {int(finite.sum())} resamples with every target identified"
        return out
    est = np.array([f.exponent for f in use])
    w, out["note"] = target_weights(use, weighting)
    common = float(w @ est)
    # the covariance of the replicates without the fits' t factor: the sampling covariance estimate
    tau = np.array([_t_factor(f) for f in use])
    cov = np.cov(reps[finite], rowvar=False) / np.outer(tau, tau)
    chi2, df, p_value = _equality_test(est, cov, min(f.n_clusters for f in use), out)
    with np.errstate(invalid="ignore"):
        combined = np.where(w[None, :] != 0, reps * w[None, :], 0.0).sum(1)  # inf - inf: NaN
    q = _bounded_quantiles(combined)
    if finite.sum() < m:
        share = 1 - finite.sum() / m
        out["note"] = (out["note"] + "; " if out["note"] else "") + (
            f"{share:.1%} of resamples with a target not identified (kept as unbounded)"
        )
    out.update(
        exponents=" ".join(f"{e:.4f}" for e in est),
        exponent_common=common,
        ci_low=float(q[0]),
        ci_high=float(q[1]),
        se=float(math.sqrt(max(float(w @ cov @ w), 0.0))),
        chi2=chi2,
        df=df,
        p_common=p_value,
        weights=" ".join(f"{x:.3f}" for x in w),
    )
    return out


def common_exponent_table(tables: Tables, fits: dict) -> pd.DataFrame:
    """One row per condition with two or more targets: the common α and the test of equality."""
    rows = []
    if len(tables.targets) < 2:
        return pd.DataFrame(columns=COMMON_COLUMNS)
    for condition in sorted(tables.runs["condition"].unique()):
        labels = [target_label(a) for a in tables.targets]
        got = [(a, fits.get((condition, label))) for a, label in zip(tables.targets, labels)]
        got = [(a, f) for a, f in got if f is not None and np.isfinite(f.exponent)]
        res = common_exponent([f for _, f in got])
        res["condition"] = condition
        res["targets"] = " ".join(f"{a:g}" for a, _ in got)
        rows.append(res)
    return pd.DataFrame(rows, columns=COMMON_COLUMNS)


def numeric(values) -> bool:
    try:
        arr = np.asarray([float(v) for v in values], float)
    except (TypeError, ValueError):
        return False
    return bool(np.isfinite(arr).all())


def series_by_key(exponents: pd.DataFrame, key: str, varying: list[str]) -> list[tuple[dict, pd.DataFrame]]:
    """Rows of the exponents table split into series along ``key``: one series per combination of the
    other varying keys, each sorted by ``key`` (numerically when it is numeric)."""
    others = [k for k in varying if k != key and k in exponents.columns]
    out = []
    groups = exponents.groupby(others, dropna=False, sort=True) if others else [((), exponents)]
    as_number = numeric(exponents[key])  # one axis type for every series of the figure
    positions = {label: i for i, label in enumerate(key_categories(exponents[key]))}
    for values, group in groups:
        values = values if isinstance(values, tuple) else (values,)
        if as_number:
            group = group.assign(_x=group[key].astype(float)).sort_values("_x")
        else:
            # categories (text, null, or numbers mixed with either) at fixed positions 0, 1, ...: one
            # numeric axis for every series, labelled with key_categories
            group = group.assign(_x=[float(positions[category_label(v)]) for v in group[key]])
            group = group.sort_values("_x")
        out.append((dict(zip(others, values)), group))
    return out


def category_label(value) -> str:
    """The axis label of a condition value: numbers as %g, None/NaN as ``null``, anything else as text."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "null"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g}"
    try:
        return f"{float(value):g}" if str(value).strip().lower() not in ("nan", "none") else "null"
    except (TypeError, ValueError):
        return str(value)


def key_categories(values) -> list[str]:
    """Distinct labels of a key's values in axis order: numbers ascending, then text, then null."""
    labels = {category_label(v) for v in values}

    def order(label: str):
        if label == "null":
            return (2, 0.0, label)
        try:
            return (0, float(label), label)
        except ValueError:
            return (1, 0.0, label)

    return sorted(labels, key=order)
