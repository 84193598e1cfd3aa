"""Power-law fits of the two clocks with interval censoring, right censoring and bootstrap intervals.

Model (per condition and clock), in log space::

    log R_i = log c + alpha * log B_i + sigma * eps_i,      eps_i ~ N(0, 1)

i.e. ``R(B) = c * B**alpha`` with log-normal scatter: a log-normal accelerated-failure-time model. Each
run contributes what is known about its time (all in log space, ``z = (y - log c - alpha x) / sigma``):

* **exact** (failure times; crossings with ``--interpolate`` or ``--exact-crossings``): the normal
  log-density ``log phi(z) - log sigma``;
* **interval-censored** ``(lo, hi]`` (a target crossing, between the last evaluation below the target
  and the first at or above it): ``log(Phi(z_hi) - Phi(z_lo))``; a crossing at the first evaluation
  after the step-0 one has ``lo`` = the step-0 clock, which is 0 on the ``responses`` clock, so it is
  left-censored (``lo = -inf`` in log space: ``log Phi(z_hi)``);
* **right-censored** at ``lo`` (never reached / never failed): the log-survival ``log Phi(-z_lo)``.

This is the standard likelihood for interval-censored data (Turnbull 1976; in the regression form of a
parametric AFT model, e.g. Lindsey & Ryan 1998, *Stat. Med.* 17:219). Dropping censored runs instead
would keep only the fast runs at large B and bias ``alpha`` down; taking the evaluation at or above the
target as if it were the crossing biases ``alpha`` down when evaluations are sparse (the small-B runs,
whose crossings fall early in an evaluation interval, are moved later the most).

Estimation: maximum likelihood (:func:`analysis.fits.censored_normal.interval_mle`, Newton's method in
Olsen's reparametrisation, on all bootstrap replicates at once).

Intervals:

* ``ci_low/ci_high`` (default): bootstrap over seeds within each B (resample the runs of each rollout
  size with replacement, each keeping its own interval or censoring, refit), percentile 95 % interval.
  Two small-sample corrections, both exact for the slope of an uncensored Gaussian fit, scale the
  replicate deviations from the point estimate by
  ``k = sqrt(sum_b n_b d_b^2 / sum_b (n_b - 1) d_b^2) * t_{N-m}(0.975) / z(0.975)``: resampling ``n_b``
  runs within a size shrinks the variance of their mean by ``(n_b - 1) / n_b`` (``d_b`` = log B_b minus
  the mean log B over runs), and the bootstrap sees the scatter through ``N - m`` degrees of freedom
  (N runs, m sizes), so its pivot is Student-t, not normal. Re-checked with interval-censored
  crossings (``benchmarks/calibration/analysis_coverage.py``, 5 sizes x 4 seeds, evaluations every 1/8 of the
  smallest crossing time, figures in ``docs/analysis.md``): without the factor the interval covers
  86.5 % (200 sweeps), with it 94.0 % (300 sweeps); it stays. A resample with informative
  times (exact or interval) at fewer than two sizes has no finite MLE; it counts as +inf or -inf (the
  side the likelihood runs off to), so a sweep that barely constrains the exponent gets an unbounded
  interval rather than a falsely narrow one. When every size has a single run the bootstrap cannot
  vary and the Wald interval is reported instead (``ci_method`` says which).
* ``wald_low/wald_high``: ``alpha ± 1.96 se`` from the observed information of the MLE (delta method
  from Olsen's parameters).

Warnings (not errors): fewer than 3 distinct B, a single seed at some B, most runs censored, sizes where
no run reached the target (the line is extrapolated there); the exponent is NaN with the reason when
it is not identified (every run censored, fewer than two sizes with an informative time).

This module holds the power-law fit, its guards and the difference of two exponents; beside it:
:mod:`analysis.fits.censored_normal` (the maximum likelihood), :mod:`analysis.fits.profile_likelihood`
(the profile-likelihood interval) and :mod:`analysis.fits.survival` (Kaplan–Meier, Aalen–Johansen),
whose public names are importable from here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import stdtrit

from analysis.fits.censored_normal import interval_mle, log_bounds, log_ndtr_diff
from analysis.fits.profile_likelihood import profile_interval, profile_loglik
from analysis.fits.survival import aalen_johansen, kaplan_meier

__all__ = [
    "FitResult",
    "aalen_johansen",
    "difference_interval",
    "fit_power_law",
    "interval_mle",
    "kaplan_meier",
    "log_bounds",
    "log_ndtr_diff",
    "profile_interval",
    "profile_loglik",
    "stratified_weights",
]


_Z975 = 1.959963984540054


@dataclass
class FitResult:
    exponent: float = np.nan
    intercept: float = np.nan  # log c
    sigma: float = np.nan  # scatter of log R around the line
    se: float = np.nan  # Wald standard error of the exponent
    ci_low: float = np.nan
    ci_high: float = np.nan
    ci_method: str = "bootstrap"
    wald_low: float = np.nan
    wald_high: float = np.nan
    profile_low: float = np.nan  # profile-likelihood interval (see profile_interval)
    profile_high: float = np.nan
    degenerate: str = ""  # why the bootstrap alone was not trusted ("" when it was)
    loglik: float = np.nan  # maximised log-likelihood (log-space times)
    n_runs: int = 0
    n_censored: int = 0  # right-censored
    n_interval: int = 0  # interval-censored (finite lower bound)
    n_left: int = 0  # left-censored (crossing at the first evaluation after step 0)
    n_sizes: int = 0
    n_seeds_min: int = 0
    n_boot: int = 0
    n_boot_failed: int = 0
    inflation: float = 1.0  # the small-sample factor k applied to the replicates
    n_clusters: int = 0  # seeds resampled as clusters (0: runs resampled within sizes)
    sizes_unreached: tuple[float, ...] = ()  # sizes without any informative (non-right-censored) time
    warnings: list[str] = field(default_factory=list)
    # bootstrap replicates after inflation (see module docstring); a resample whose exponent is not
    # identified has intercept NaN and slope +-inf (the side the likelihood runs off to)
    boot_intercepts: np.ndarray = field(default_factory=lambda: np.empty(0))
    boot_slopes: np.ndarray = field(default_factory=lambda: np.empty(0))

    @property
    def prefactor(self) -> float:
        return float(np.exp(self.intercept))


def _identified(x: np.ndarray, informative: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Replicates with informative times (exact or with a finite upper bound) at two or more sizes."""
    sizes, inverse = np.unique(x, return_inverse=True)
    onehot = np.zeros((x.size, sizes.size))
    onehot[np.arange(x.size), inverse.ravel()] = informative.astype(float)
    return (W @ onehot > 0).sum(1) >= 2


def stratified_weights(groups: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Resampling counts ``[n_boot, n]``: within each group, draw its runs with replacement."""
    n = groups.size
    W = np.zeros((n_boot, n))
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        m = idx.size
        draws = rng.integers(0, m, size=(n_boot, m)) + (np.arange(n_boot) * m)[:, None]
        W[:, idx] = np.bincount(draws.ravel(), minlength=n_boot * m).reshape(n_boot, m)
    return W


def fit_power_law(
    sizes,
    values,
    censored,
    *,
    lower=None,
    n_boot: int = 1000,
    rng: np.random.Generator | int | None = None,
    level: float = 0.95,
    inflate: bool = True,
    weights: np.ndarray | None = None,
    profile: bool = True,
    n_clusters: int | None = None,
) -> FitResult:
    """Fit ``values = c * sizes**alpha`` with right and interval censoring (module docstring).

    ``values``: the time (the censoring time when ``censored``; the upper bound of the interval when
    ``lower`` is given). ``lower``: lower bounds of the observed times (NaN or equal: exact; ``<= 0``:
    left-censored). ``weights``: resampling counts ``[n_boot, n]`` to use instead of drawing them (so
    that several clocks of one condition share their resamples); columns of dropped rows are ignored.
    ``profile``: also compute the profile-likelihood interval and use it where the bootstrap is
    degenerate (:func:`_guard_degenerate`). ``n_clusters``: the ``weights`` resample this many clusters
    (seeds, :mod:`analysis.fits.seed_blocks`) rather than runs within sizes; the small-sample factor follows.
    """
    rng = np.random.default_rng(rng)
    B = np.asarray(sizes, float)
    R = np.asarray(values, float)
    c = np.asarray(censored, bool)
    L = np.full(B.shape, np.nan) if lower is None else np.asarray(lower, float)
    keep = np.isfinite(B) & np.isfinite(R) & (B > 0) & (R > 0)
    B, R, c, L = B[keep], R[keep], c[keep], L[keep]
    if weights is not None:
        weights = np.asarray(weights, float)[:, keep]
    res = FitResult(n_runs=int(B.size), n_censored=int(c.sum()))
    if keep.size > B.size:
        res.warnings.append(f"{keep.size - B.size} run(s) without a positive finite value left out")
    if B.size == 0:
        res.warnings.append("no runs")
        return res
    lo, hi = log_bounds(R, c, L)
    res.n_interval = int((~c & np.isfinite(lo) & (lo < hi)).sum())
    res.n_left = int((~c & ~np.isfinite(lo)).sum())
    uniq, counts = np.unique(B, return_counts=True)
    if not _design_checks(res, B, c, uniq, counts):
        return res
    x = np.log(B)
    xm = x.mean()
    X = np.column_stack([np.ones_like(x), x - xm])
    fit = interval_mle(X, lo, hi, want_cov=True)
    if not fit["ok"][0]:
        res.warnings.append("maximum-likelihood fit did not converge: exponent not identified")
        return res
    b1 = float(fit["beta"][0, 1])
    res.exponent, res.intercept, res.sigma = b1, float(fit["beta"][0, 0] - b1 * xm), float(fit["sigma"][0])
    res.loglik = float(fit["loglik"][0])
    _, g1, t = fit["theta"][0]
    jac = np.array([0.0, 1.0 / t, -g1 / t**2]) * fit["y_scale"]
    var = float(jac @ fit["cov"][0] @ jac)
    z = _z(level)
    if np.isfinite(var) and var >= 0:
        res.se = float(np.sqrt(var))
        res.wald_low, res.wald_high = res.exponent - z * res.se, res.exponent + z * res.se
    # bootstrap over seeds within each B
    dev = np.log(uniq) - x.mean()
    num, den = (counts * dev**2).sum(), ((counts - 1) * dev**2).sum()
    if n_boot <= 0 or den <= 0:
        return _without_bootstrap(res, x, lo, hi, fit, n_boot, profile, level)
    res.n_clusters = int(n_clusters or 0)
    k = _inflation(inflate, n_clusters, B.size - uniq.size, num, den, level, z)
    res.inflation = k
    W = weights if weights is not None else stratified_weights(np.searchsorted(uniq, B), n_boot, rng)
    n_boot = W.shape[0]
    informative = np.isfinite(hi)
    ok = _identified(x, informative, W)
    boot = interval_mle(X, lo, hi, W, ok=ok, start=fit["theta"][0])
    bok = boot["ok"]
    bb1 = boot["beta"][:, 1]
    bb0 = boot["beta"][:, 0] - bb1 * xm
    res.n_boot, res.n_boot_failed = n_boot, int((~bok).sum())
    slopes = res.exponent + k * (bb1 - res.exponent)
    res.boot_intercepts = res.intercept + k * (bb0 - res.intercept)
    if res.n_boot_failed:
        slopes[~bok] = _unbounded_direction(x, ~informative, W[~bok])
        tail = (1 - level) / 2
        if res.n_boot_failed > tail * n_boot:
            res.warnings.append(
                f"{res.n_boot_failed}/{n_boot} bootstrap resamples not identified (events at fewer "
                "than 2 sizes): the interval is unbounded on that side"
            )
    res.boot_slopes = slopes
    q = np.quantile(slopes, [(1 - level) / 2, (1 + level) / 2], method="inverted_cdf")
    res.ci_low, res.ci_high = float(q[0]), float(q[1])
    if profile:
        _guard_degenerate(res, x, lo, hi, B, uniq, fit, level)
    return res


def _design_checks(res: FitResult, B, c, uniq, counts) -> bool:
    """Fill the design's counts and warnings into ``res``; False where the exponent cannot be
    identified (every run censored, or events at fewer than 2 sizes)."""
    res.n_sizes, res.n_seeds_min = int(uniq.size), int(counts.min())
    reached = np.array([(~c[B == b]).any() for b in uniq])
    res.sizes_unreached = tuple(float(b) for b in uniq[~reached])
    if uniq.size < 3:
        res.warnings.append(f"only {uniq.size} distinct B (< 3): exponent poorly determined")
    if (counts == 1).any():
        res.warnings.append(f"single seed at B={', '.join(f'{b:g}' for b in uniq[counts == 1])}")
    if c.all():
        res.warnings.append("all runs censored: exponent not identified")
        return False
    if np.unique(B[~c]).size < 2:
        res.warnings.append("events observed at fewer than 2 distinct B: exponent not identified")
        return False
    if res.sizes_unreached:
        res.warnings.append(
            f"no run reached it at B={', '.join(f'{b:g}' for b in res.sizes_unreached)}: "
            "only censored lower bounds there, the line is extrapolated"
        )
    if c.mean() > 0.5:
        res.warnings.append(f"{c.mean():.0%} of runs censored: the fit leans on the model")
    return True


def _without_bootstrap(res: FitResult, x, lo, hi, fit, n_boot: int, profile: bool, level: float) -> FitResult:
    """The Wald interval where the bootstrap cannot vary (one run per size, or ``n_boot`` 0), and the
    profile interval instead where the scatter collapsed."""
    res.ci_method = "wald"
    res.ci_low, res.ci_high = res.wald_low, res.wald_high
    if n_boot > 0:
        res.warnings.append("one run per B: bootstrap cannot vary, Wald interval reported")
    if profile and _sigma_collapsed(res, lo, hi, bool(fit["stalled"][0])):
        plow, phigh = profile_interval(x, lo, hi, res.exponent, res.loglik, level=level)
        res.profile_low, res.profile_high = plow, phigh
        res.se, res.wald_low, res.wald_high = np.nan, np.nan, np.nan
        res.ci_low, res.ci_high, res.ci_method = plow, phigh, "profile"
        res.degenerate = "the scatter σ collapsed: σ not identified"
        res.warnings.append(f"{res.degenerate}; profile-likelihood interval reported")
    return res


def _inflation(
    inflate: bool, n_clusters: int | None, df: int, num: float, den: float, level: float, z: float
) -> float:
    """The factor on the bootstrap's deviations that corrects its small-sample narrowness."""
    if inflate and n_clusters:
        # seeds resampled as clusters: resampling S clusters shrinks the variance of their mean by
        # (S - 1) / S, and the pivot of a mean of S cluster statistics is Student-t with S - 1 df
        S = int(n_clusters)
        return float(np.sqrt(S / (S - 1)) * float(stdtrit(S - 1, 0.5 + level / 2)) / z) if S > 1 else np.inf
    if inflate:
        # df: degrees of freedom of the within-size scatter the bootstrap sees
        return float(np.sqrt(num / den) * float(stdtrit(df, 0.5 + level / 2)) / z)
    return 1.0


def _sigma_collapsed(res: FitResult, lo: np.ndarray, hi: np.ndarray, stalled: bool) -> bool:
    """The scatter is not identified: the line search stalled, or sigma fell far below the width of the
    crossing intervals (every interval holds the line, so the likelihood rises as sigma -> 0)."""
    finite = np.isfinite(lo) & np.isfinite(hi) & (hi > lo)
    width = float(np.median(hi[finite] - lo[finite])) if finite.any() else np.nan
    return bool(stalled or (np.isfinite(width) and res.sigma < 0.05 * width))


def _guard_degenerate(res, x, lo, hi, B, uniq, fit, level) -> None:
    """Replace a bootstrap interval that cannot be trusted by its union with the profile-likelihood one.

    The within-size bootstrap treats each run's (lo, hi] as a type: when all runs of a size share one
    evaluation interval (quantised crossings), resampling them changes nothing, so the percentile
    interval shrinks towards [alpha, alpha] although the crossings' positions inside their intervals
    are unknown; when the intervals also lie on a line the MLE of sigma runs to 0, the observed
    information is near singular and the Wald interval explodes. Three signals: (i) no within-size
    spread at any size, (ii) sigma collapsed or the line search stalled, (iii) a bootstrap interval
    less than half as wide as the profile-likelihood interval. The profile interval handles all three
    (at sigma -> 0 its likelihood is flat over every line that passes through all intervals).
    """
    rows = np.column_stack([lo, hi])
    spread = [np.unique(rows[B == b], axis=0).shape[0] > 1 for b in uniq]
    collapsed = _sigma_collapsed(res, lo, hi, bool(fit["stalled"][0]))
    plow, phigh = profile_interval(x, lo, hi, res.exponent, res.loglik, level=level)
    res.profile_low, res.profile_high = plow, phigh
    boot_width = res.ci_high - res.ci_low
    prof_width = phigh - plow
    wald_width = res.wald_high - res.wald_low
    if np.isfinite(prof_width) and prof_width > 0 and not wald_width <= 10 * prof_width:
        collapsed = True  # the observed information is near singular (sigma on its way to 0)
    reasons = []
    if collapsed:
        reasons.append("the scatter σ collapsed (every crossing interval holds one line): σ not identified")
    if not any(spread):
        reasons.append("no within-size spread (every run of a size crossed in the same evaluation interval)")
    elif np.isfinite(prof_width) and np.isfinite(boot_width) and boot_width < 0.5 * prof_width:
        reasons.append(
            f"bootstrap interval {boot_width:.3g} wide, under half the profile-likelihood one ({prof_width:.3g})"
        )
    if not reasons:
        return
    res.degenerate = "; ".join(reasons)
    if collapsed:
        res.se = np.nan  # the observed information is near singular: the Wald interval means nothing
        res.wald_low = res.wald_high = np.nan
    res.ci_low = float(np.nanmin([res.ci_low, plow]))
    res.ci_high = float(np.nanmax([res.ci_high, phigh]))
    res.ci_method = "bootstrap+profile" if res.ci_method == "bootstrap" else f"{res.ci_method}+profile"
    res.warnings.append(
        f"bootstrap degenerate ({res.degenerate}): interval widened to the profile likelihood "
        f"[{plow:.3g}, {phigh:.3g}]"
    )


def _unbounded_direction(x: np.ndarray, censored: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Where the slope of a non-identified resample runs off to: +inf when its censored runs sit at
    larger B than its events (their lower bounds pull the line up there), -inf when at smaller B;
    a resample without events goes either way (alternately +inf and -inf)."""
    wo, wc = W * ~censored, W * censored
    with np.errstate(invalid="ignore", divide="ignore"):
        lean = (wc @ x) / wc.sum(1) - (wo @ x) / wo.sum(1)
    out = np.where(lean > 0, np.inf, -np.inf)
    undecided = ~np.isfinite(lean) | (lean == 0)
    out[undecided] = np.where(np.arange(undecided.sum()) % 2 == 0, np.inf, -np.inf)
    return out


def _z(level: float) -> float:
    """The two-sided normal quantile of ``level`` (1.96 at 0.95)."""
    return _Z975 if level == 0.95 else float(np.sqrt(2) * _erfinv(level))


def _erfinv(p: float) -> float:
    from scipy.special import erfinv

    return float(erfinv(p))


def difference_interval(a: FitResult, b: FitResult, level: float = 0.95) -> tuple[float, float, float, float]:
    """Bootstrap percentile interval and p-value of ``b.exponent - a.exponent``.

    The two bootstraps are independent (different runs), so replicate ``r`` of one is paired with
    replicate ``r`` of the other. Returns ``(low, high, p_boot, se_wald)``.
    """
    m = min(a.boot_slopes.size, b.boot_slopes.size)
    se = float(np.hypot(a.se, b.se))
    if m < 10:
        return np.nan, np.nan, np.nan, se
    with np.errstate(invalid="ignore"):
        diff = b.boot_slopes[:m] - a.boot_slopes[:m]
    unknown = np.isnan(diff)  # inf - inf: either way
    diff[unknown] = np.where(np.arange(unknown.sum()) % 2 == 0, np.inf, -np.inf)
    low, high = np.quantile(diff, [(1 - level) / 2, (1 + level) / 2], method="inverted_cdf")
    p = float(min(1.0, 2 * min((diff <= 0).mean(), (diff >= 0).mean())))
    if a.degenerate or b.degenerate:
        # a degenerate bootstrap understates its own spread (FitResult.degenerate): widen the difference
        # to its union with the normal interval built from each fit's reported (widened) interval
        z = _z(level)
        half = [(f.ci_high - f.ci_low) / (2 * z) for f in (a, b)]
        se = float(np.hypot(*half))
        d = b.exponent - a.exponent
        low, high = min(low, d - z * se), max(high, d + z * se)
        if not np.isfinite(se):
            low, high = -np.inf, np.inf
    return float(low), float(high), p, se
