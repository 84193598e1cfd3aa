"""The critical batch read from the clocks: McCandlish's form fitted to responses-to-target.

McCandlish et al. (2018, "An empirical model of large-batch training", eq. 2.11) relate the samples a
run needs to reach a loss to the batch it uses::

    R(B) = R_min * (1 + B / B_crit)

R_min: the samples at a batch far below B_crit (where larger batches cost nothing extra); B_crit: the
batch above which every doubling of B costs about a doubling of samples. Its local exponent
``d log R / d log B = B / (B + B_crit)`` runs from 0 (noise dominates) to 1 (curvature dominates). Here B
is the rollout size in responses and R the responses to a target accuracy; with K optimizer steps per
rollout the per-step critical batch is ``B_crit / K`` (``b_crit_per_step``), the unit of the gradient
noise scales of ``docs/theory.md``. Our reading: McCandlish et al. state the form for an optimally tuned
step size; the runs follow a fixed learning-rate rule, so B_crit here is that of the rule the runs used.

**Likelihood.** The same log-normal accelerated-failure-time model as the power law
(:mod:`analysis.fits.fit`), with the line replaced by McCandlish's curve::

    log R_i = log R_min + log(1 + B_i / B_crit) + sigma * eps_i

and the same censoring (exact, interval-censored, left-censored, right-censored rows: the bounds of
:func:`analysis.fits.censored_normal.log_bounds`), on **the power law's rows**: the early sizes
:func:`analysis.fits.exponents.early_sizes` leaves out of a target's power-law fit (sizes where most
crossings come within the first rollouts) leave this fit too, so both forms are fitted to the same runs
and at most one size whose crossings sit near the ``R >= B`` floor enters. One change to the bounds:
a crossing **at the floor** (:func:`at_floor`: reached with the run's first rollout, bracket ``[B, r]``,
on the responses clock) enters **left-censored**, ``R <= r``. Its lower end B is the floor of the
discrete clock, not information about the learning curve: a run that learns in 100 responses and one
that needs B both cross with their first rollout, so taking ``[B, r]`` (or the exact ``R = B`` where an
evaluation follows the first rollout) as the crossing makes R rise with B where the latent crossings are
flat, and McCandlish's curve reads that rise as a finite B_crit (``benchmarks/calibration/bcrit_floor.py``). Our
choice: the power law's own fit (``exponents.csv``) keeps the ``[B, r]`` bracket; here the floor rows
are censored for both forms compared. For a fixed B_crit the offset ``log(1 + B / B_crit)`` is known and the
model is the censored-normal intercept model that :func:`analysis.fits.censored_normal.interval_mle` fits, for every
bootstrap replicate at once; the likelihood is profiled over a grid of ``log B_crit`` reaching
``GRID_DECADES`` decades beyond the measured sizes on both sides (``GRID_POINTS`` points, refined by a
parabola through the best grid point and its neighbours). A maximum at the upper end of the grid means
B_crit = +inf (the curve is flat over the sizes: R = R_min), at the lower end B_crit = 0 (R proportional
to B); the likelihood is flat beyond both ends, so nothing is lost by stopping there.

**Intervals.** The fit's own bootstrap resamples (:func:`analysis.fits.exponents.condition_resamples`: seeds as
clusters where :mod:`analysis.fits.seed_blocks` applies, else runs within sizes; replicate ``r`` here uses the
runs replicate ``r`` of the power law used), their deviations from the estimate in ``log B_crit`` scaled
by the power-law fit's small-sample factor (``inflation``), percentile 95 % interval; and the
profile-likelihood interval ``{B_crit : 2 (l_max - l_p) <= F(1, N - 2)}`` (as
:func:`analysis.fits.profile_likelihood.profile_interval`). ``ci_low``/``ci_high`` are the union of the
two (``ci_method`` says which bound came from which): the percentile interval of a ratio-like parameter
from a few seeds is too narrow on its own (``benchmarks/calibration/bcrit_coverage.py``). An interval that reaches
an end of the grid is **unbounded** there: ``ci_high = inf`` (no evidence that larger B costs more
samples) or ``ci_low = 0``; a resample with informative times at fewer than two sizes counts as +inf or 0
(the side the power law's own resample runs off to).

**Not identified.** ``identified`` says what the interval bounds: ``yes`` (both ends finite),
``open above`` (``ci_high`` = inf: the sizes show no cost of a larger B, B_crit is at least ``ci_low``
and may be infinite; the point estimate is then not a measurement of B_crit), ``open below``
(``ci_low`` = 0) or ``no`` (both, or no fit: events at fewer than two sizes).

**Model comparison.** ``delta_aicc`` = AICc(McCandlish) - AICc(power law) over identical runs and
bounds: the power law is refitted here (:func:`power_loglik`, point estimate) on the rows and the
floor-censored bounds McCandlish's curve is fitted to, so ``loglik_power`` can differ from the
``exponents.csv`` fit's by the floor rows. Both have three parameters (``R_min, B_crit, sigma`` and
``c, alpha, sigma``), so it is the difference of -2 log-likelihoods; below -2 McCandlish's curve is
preferred, above +2 the power law.

``bcrit.csv`` (:func:`bcrit_table`), the report section (:func:`bcrit_lines`) and the figure
``b_crit_from_clocks`` (:func:`analysis.figures.plots_bcrit.plot_bcrit`); ``docs/analysis.md`` lists the columns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import brentq, minimize_scalar
from scipy.special import stdtrit

from analysis.fits.censored_normal import interval_mle, log_bounds
from analysis.fits.fit import _identified, _unbounded_direction

GRID_DECADES = 3.0  # the log B_crit grid reaches this many decades beyond the measured sizes
GRID_POINTS = 41
N_PARAMS = 3  # R_min, B_crit, sigma (the power law: c, alpha, sigma)


@dataclass
class BcritFit:
    b_crit: float = math.nan  # responses per rollout; inf: flat over the sizes, 0: R proportional to B
    ci_low: float = math.nan
    ci_high: float = math.nan
    ci_method: str = ""
    boot_low: float = math.nan  # bootstrap percentile interval (inflated in log B_crit)
    boot_high: float = math.nan
    profile_low: float = math.nan  # profile-likelihood interval
    profile_high: float = math.nan
    r_min: float = math.nan
    r_min_low: float = math.nan
    r_min_high: float = math.nan
    sigma: float = math.nan
    loglik: float = math.nan
    loglik_power: float = math.nan  # the power law's on the same rows and bounds (the comparison's)
    identified: str = ""  # yes | open above | open below | no (module docstring, "Not identified")
    n_runs: int = 0
    n_floor: int = 0  # crossings at the R >= B floor, left-censored
    n_sizes: int = 0
    n_boot: int = 0
    n_boot_unbounded: int = 0  # replicates at an end of the grid or not identified
    sizes: tuple[float, ...] = ()
    boot_b_crit: np.ndarray = field(default_factory=lambda: np.empty(0))  # inflated replicates
    warnings: list[str] = field(default_factory=list)


def aicc(loglik: float, n: int, k: int = N_PARAMS) -> float:
    """Akaike's criterion with the small-sample correction (Hurvich & Tsai 1989)."""
    if not math.isfinite(loglik) or n - k - 1 <= 0:
        return math.nan
    return 2 * k - 2 * loglik + 2 * k * (k + 1) / (n - k - 1)


def log_grid(sizes) -> np.ndarray:
    """The ``log B_crit`` grid of a condition's sizes (module docstring)."""
    x = np.log(np.asarray(sizes, float))
    pad = GRID_DECADES * math.log(10)
    return np.linspace(x.min() - pad, x.max() + pad, GRID_POINTS)


def profile(B, lo, hi, grid, W=None) -> tuple[np.ndarray, np.ndarray]:
    """Profile log-likelihood ``[M, G]`` of McCandlish's curve at each ``log B_crit`` of ``grid`` and the
    maximising ``log R_min`` ``[M, G]``, for every weight row of ``W`` (``[M, n]``; one row of ones when
    None). Where every interval holds a common curve (no exact time) the supremum, 0, is returned (the
    scatter runs to 0, as in :func:`analysis.fits.profile_likelihood.profile_loglik`)."""
    B, lo, hi = (np.asarray(v, float) for v in (B, lo, hi))
    W = np.ones((1, B.size)) if W is None else np.asarray(W, float)
    M, G = W.shape[0], grid.size
    ll, mu = np.full((M, G), np.nan), np.full((M, G), np.nan)
    X = np.ones((B.size, 1))
    exact = lo == hi
    start = None
    for j, u in enumerate(grid):
        off = np.log1p(B / math.exp(u))
        fit = interval_mle(X, lo - off, hi - off, W, start=start)
        ok = fit["ok"]
        ll[:, j] = fit["loglik"]
        mu[:, j] = fit["beta"][:, 0]
        if not ok.all() and not exact.any():
            used = W > 0
            lows = np.where(used, (lo - off)[None, :], -np.inf).max(1)
            highs = np.where(used, (hi - off)[None, :], np.inf).min(1)
            feasible = lows < highs
            ll[:, j] = np.where(~ok & feasible, 0.0, ll[:, j])
            mu[:, j] = np.where(
                ~ok & feasible, 0.5 * (np.maximum(lows, -50) + np.minimum(highs, 50)), mu[:, j]
            )
    return ll, mu


def _argmax_refined(
    ll: np.ndarray, mu: np.ndarray, grid: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: ``(log B_crit, log R_min, max log-likelihood)``, ``log B_crit`` = +-inf at an end of the grid
    (B_crit = inf or 0), refined by a parabola through the best grid point and its neighbours."""
    M, G = ll.shape
    filled = np.where(np.isfinite(ll), ll, -np.inf)
    j = filled.argmax(1)
    rows = np.arange(M)
    top = filled[rows, j]
    u = grid[j].astype(float)
    m = mu[rows, j].astype(float)
    inner = (j > 0) & (j < G - 1) & np.isfinite(top)
    jj = np.clip(j, 1, G - 2)
    a, b, c = filled[rows, jj - 1], filled[rows, jj], filled[rows, jj + 1]
    h = grid[1] - grid[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        curv = a - 2 * b + c
        shift = np.where(inner & np.isfinite(a + c) & (curv < 0), 0.5 * h * (a - c) / curv, 0.0)
    shift = np.clip(shift, -h, h)
    u = np.where(inner, u + shift, u)
    # log R_min moves with the offset: interpolate linearly between the neighbouring grid points
    side = np.where(shift >= 0, jj + 1, jj - 1)
    frac = np.abs(shift) / h
    m = np.where(inner, (1 - frac) * mu[rows, jj] + frac * mu[rows, side], m)
    u = np.where(np.isfinite(top) & (j == G - 1), np.inf, u)
    u = np.where(np.isfinite(top) & (j == 0), -np.inf, u)
    u = np.where(np.isfinite(top), u, np.nan)
    return u, m, np.where(np.isfinite(top), top, np.nan)


def _profile_bounds(B, lo, hi, u0: float, ll: np.ndarray, grid, top: float, df: int, level: float):
    """``{u : 2 (top - l_p(u)) <= t_df^2}`` around the estimate ``u0``: from the grid outwards to the first
    point below the cut, then the crossing by Brent's method on the exact profile; an end of the grid
    inside the set gives -inf / +inf (B_crit = 0 / inf)."""
    if df < 1 or not math.isfinite(top):
        return -math.inf, math.inf
    cut = top - 0.5 * float(stdtrit(df, 0.5 + level / 2)) ** 2

    def excess(u: float) -> float:
        value = float(profile(B, lo, hi, np.array([u]))[0][0, 0])
        return value - cut if math.isfinite(value) else -1.0

    bounds = []
    for direction in (-1, 1):
        if not math.isfinite(u0):  # the estimate itself is at an end of the grid
            start = grid.size - 1 if u0 > 0 else 0
        else:
            start = int(np.searchsorted(grid, u0))
            start = start - 1 if direction < 0 else start
        i, inside_at = start, u0 if math.isfinite(u0) else float(grid[start])
        while 0 <= i < grid.size and np.isfinite(ll[i]) and ll[i] >= cut:
            inside_at = float(grid[i])
            i += direction
        if not 0 <= i < grid.size:
            bounds.append(direction * math.inf)
            continue
        if excess(inside_at) < 0:  # the estimate's own neighbourhood: no room between it and the cut
            bounds.append(inside_at)
            continue
        bounds.append(float(brentq(excess, inside_at, float(grid[i]), xtol=1e-6)))
    return bounds[0], bounds[1]


def at_floor(sizes, values, censored, lower=None) -> np.ndarray:
    """Crossings at the ``R >= B`` floor: reached with the run's first rollout (the bracket's lower end is
    B or less, or an exact time of B or less). Such a crossing says only that the latent time is at most
    its upper end; on the responses clock."""
    B, R = np.asarray(sizes, float), np.asarray(values, float)
    c = np.asarray(censored, bool)
    L = np.full(B.shape, np.nan) if lower is None else np.asarray(lower, float)
    tol = B * (1 + 1e-9)
    with np.errstate(invalid="ignore"):
        return ~c & np.where(np.isfinite(L), L <= tol, R <= tol) & (R > 0)


def power_loglik(B, lo, hi) -> float:
    """The maximised log-likelihood of the power law ``log R = log c + alpha log B + sigma eps`` on the
    given log-space bounds (those McCandlish's curve is fitted to: the comparison's)."""
    x = np.log(np.asarray(B, float))
    fit = interval_mle(np.column_stack([np.ones_like(x), x - x.mean()]), lo, hi)
    return float(fit["loglik"][0]) if fit["ok"][0] else math.nan


def identified_text(low: float, high: float) -> str:
    """``yes`` (both bounds finite and positive), ``open above`` (``high`` = inf: the sizes show no cost
    of a larger B), ``open below`` (``low`` = 0), ``no`` (both, or no interval)."""
    if math.isnan(low) or math.isnan(high):
        return "no"
    up, down = not high < math.inf, not low > 0
    return "no" if up and down else "open above" if up else "open below" if down else "yes"


def fit_mccandlish(
    sizes,
    values,
    censored,
    *,
    lower=None,
    weights: np.ndarray | None = None,
    inflation: float = 1.0,
    level: float = 0.95,
    floor: bool = True,
) -> BcritFit:
    """Fit ``R = R_min (1 + B / B_crit)`` with the power law's censoring (:func:`analysis.fits.fit.fit_power_law`'s
    arguments: ``values`` the time or censoring time, ``lower`` the interval's lower bound) and
    resamples ``weights`` ``[n_boot, n]`` (those of the power-law fit, so replicates pair up);
    ``inflation``: the power-law fit's small-sample factor, applied to the replicates' deviations in
    ``log B_crit``. Rows the power law leaves out (non-positive or non-finite B or time) are left out.
    ``floor``: crossings at the ``R >= B`` floor (:func:`at_floor`) enter left-censored at their upper end
    (module docstring); ``loglik_power`` is the power law's on the same rows and bounds."""
    B = np.asarray(sizes, float)
    R = np.asarray(values, float)
    c = np.asarray(censored, bool)
    L = np.full(B.shape, np.nan) if lower is None else np.asarray(lower, float)
    keep = np.isfinite(B) & np.isfinite(R) & (B > 0) & (R > 0)
    B, R, c, L = B[keep], R[keep], c[keep], L[keep]
    W = None if weights is None else np.asarray(weights, float)[:, keep]
    res = BcritFit(n_runs=int(B.size), identified="no")
    if B.size == 0:
        res.warnings.append("no runs")
        return res
    uniq = np.unique(B)
    res.n_sizes, res.sizes = int(uniq.size), tuple(float(b) for b in uniq)
    if floor:
        pinned = at_floor(B, R, c, L)
        res.n_floor = int(pinned.sum())
        L = np.where(pinned, 0.0, L)  # lower <= 0: left-censored at the upper end (log_bounds)
    if c.all() or np.unique(B[~c]).size < 2:
        res.warnings.append("events at fewer than 2 distinct B: B_crit not identified")
        return res
    lo, hi = log_bounds(R, c, L)
    res.loglik_power = power_loglik(B, lo, hi)
    grid = log_grid(uniq)
    ll, mu = profile(B, lo, hi, grid)
    u, m, top = _argmax_refined(ll, mu, grid)
    if not np.isfinite(top[0]):
        res.warnings.append("maximum-likelihood fit did not converge: B_crit not identified")
        return res
    u0 = float(u[0])
    res.b_crit = math.exp(u0) if math.isfinite(u0) else (math.inf if u0 > 0 else 0.0)
    res.loglik = float(top[0])
    r_min_log = float(m[0])
    res.r_min = math.exp(r_min_log) if u0 > -math.inf else 0.0
    j = int(np.nanargmax(np.where(np.isfinite(ll[0]), ll[0], -np.inf)))
    if math.isfinite(u0) and 0 < j < grid.size - 1:  # the exact maximum between the grid's neighbours
        best = minimize_scalar(
            lambda v: -float(np.nan_to_num(profile(B, lo, hi, np.array([v]))[0][0, 0], nan=-1e300)),
            bounds=(float(grid[j - 1]), float(grid[j + 1])),
            method="bounded",
            options={"xatol": 1e-5},
        )
        if -best.fun >= res.loglik:
            u0, res.loglik = float(best.x), float(-best.fun)
            res.b_crit = math.exp(u0)
    # R_min and the scatter at the estimate (one more intercept fit at the refined B_crit)
    if math.isfinite(u0):
        off = np.log1p(B / res.b_crit)
        one = interval_mle(np.ones((B.size, 1)), lo - off, hi - off)
        if one["ok"][0]:
            res.sigma = float(one["sigma"][0])
            res.r_min = math.exp(float(one["beta"][0, 0]))
            r_min_log = float(one["beta"][0, 0])
    plow, phigh = _profile_bounds(B, lo, hi, u0, ll[0], grid, res.loglik, B.size - 2, level)
    res.profile_low = math.exp(plow) if math.isfinite(plow) else 0.0
    res.profile_high = math.exp(phigh) if math.isfinite(phigh) else math.inf
    res.ci_low, res.ci_high, res.ci_method = res.profile_low, res.profile_high, "profile"
    res.identified = identified_text(res.ci_low, res.ci_high)
    if W is None or W.shape[0] == 0:
        return res
    ok = _identified(np.log(B), np.isfinite(hi), W)
    lb, mb = profile(B, lo, hi, grid, W)
    ub, rb, _ = _argmax_refined(lb, mb, grid)
    lost = ~ok | np.isnan(ub)
    if lost.any():  # the side the power law's resample runs off to: slope +inf -> B_crit 0, -inf -> inf
        slope = _unbounded_direction(np.log(B), ~np.isfinite(hi), W[lost])
        ub[lost] = np.where(slope > 0, -np.inf, np.inf)
        rb[lost] = np.nan
    res.n_boot = int(W.shape[0])
    res.n_boot_unbounded = int((~np.isfinite(ub)).sum())
    k = inflation if math.isfinite(inflation) and inflation > 0 else 1.0
    if math.isfinite(u0):
        with np.errstate(invalid="ignore"):
            ub = np.where(np.isfinite(ub), u0 + k * (ub - u0), ub)
            rb = np.where(np.isfinite(rb), r_min_log + k * (rb - r_min_log), rb)
    q = [(1 - level) / 2, (1 + level) / 2]
    blo, bhi = np.quantile(ub, q, method="inverted_cdf")
    res.boot_b_crit = np.exp(ub)
    res.boot_low, res.boot_high = float(np.exp(blo)), float(np.exp(bhi))
    finite_r = rb[np.isfinite(rb)]
    if finite_r.size:
        rlo, rhi = np.quantile(finite_r, q, method="inverted_cdf")
        res.r_min_low, res.r_min_high = float(np.exp(rlo)), float(np.exp(rhi))
    res.ci_low = float(np.nanmin([res.boot_low, res.profile_low]))
    res.ci_high = float(np.nanmax([res.boot_high, res.profile_high]))
    res.ci_method = "bootstrap+profile"
    res.identified = identified_text(res.ci_low, res.ci_high)
    if res.n_boot_unbounded > (1 - level) / 2 * res.n_boot:
        res.warnings.append(
            f"{res.n_boot_unbounded}/{res.n_boot} resamples put B_crit at 0 or infinity: the interval is "
            "unbounded on that side"
        )
    return res


def local_alpha(sizes, b_crit) -> np.ndarray:
    """McCandlish's local exponent ``B / (B + B_crit)`` at each size (0 for B_crit = inf, 1 for 0)."""
    B = np.asarray(sizes, float)
    if b_crit == math.inf:
        return np.zeros_like(B)
    return B / (B + b_crit)


# ---- bcrit.csv and the report section --------------------------------------------------------------------


BCRIT_COLUMNS = [
    "condition",
    "clock",
    "target",
    "eta_ref",
    "K",
    "n_runs",
    "n_sizes",
    "sizes_early",
    "n_floor",
    "resampling",
    "n_boot",
    "inflation",
    "b_crit",
    "ci_low",
    "ci_high",
    "ci_method",
    "identified",
    "boot_low",
    "boot_high",
    "profile_low",
    "profile_high",
    "n_boot_unbounded",
    "b_crit_per_step",
    "r_min",
    "r_min_low",
    "r_min_high",
    "sigma",
    "loglik",
    "loglik_power",
    "aicc",
    "aicc_power",
    "delta_aicc",
    "preferred",
    "alpha_power",
    "alpha_local_min",
    "alpha_local_max",
    "alpha_local",
    "note",
]


def preferred(delta: float) -> str:
    """Which form the AICc prefers by more than 2 units (``either`` within 2)."""
    if not math.isfinite(delta):
        return ""
    return "mccandlish" if delta < -2 else "power law" if delta > 2 else "either"


def _local_text(sizes, fit: BcritFit) -> str:
    """``B: alpha [low, high]`` at each size; the interval is the image of B_crit's (monotone)."""
    if not math.isfinite(fit.b_crit) and fit.b_crit != math.inf:
        return ""
    parts = []
    for b in sizes:
        a = float(local_alpha([b], fit.b_crit)[0])
        lo = float(local_alpha([b], fit.ci_high)[0]) if not math.isnan(fit.ci_high) else math.nan
        hi = float(local_alpha([b], fit.ci_low)[0]) if not math.isnan(fit.ci_low) else math.nan
        parts.append(f"{b:g}: {a:.3f} [{lo:.3f}, {hi:.3f}]")
    return "; ".join(parts)


def bcrit_table(
    tables,
    exponents: pd.DataFrame,
    fits: dict,
    n_boot: int,
    seed: int,
    resample: str = "seeds",
    jobs: int = 1,
) -> pd.DataFrame:
    """``bcrit.csv``: McCandlish's curve per condition and target clock beside the power law of
    ``exponents.csv`` (same runs, censoring and resamples: ``n_boot``, ``seed`` and ``resample`` must be
    those of :func:`analysis.fits.exponents.fit_conditions`). The condition's varying keys are added as columns;
    conditions are fitted in ``jobs`` forked processes (the result does not depend on it)."""
    return bcrit_tables(tables, exponents, fits, n_boot, seed, resample, jobs)[0]


def bcrit_tables(
    tables,
    exponents: pd.DataFrame,
    fits: dict,
    n_boot: int,
    seed: int,
    resample: str = "seeds",
    jobs: int = 1,
    records: dict | None = None,
    replicates: dict | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(bcrit.csv, bcrit_theory.csv)``: :func:`bcrit_table` and, from the runs' training rows
    (``records``: run name -> rows, as loaded), the clocks' B_crit beside Adam's and SGD's B_noise
    (:mod:`analysis.fits.bcrit_theory`), paired over the same resamples. ``replicates`` (a dict, filled
    when given): ``(condition, clock) -> the inflated bootstrap replicates of B_crit`` (a trend's input)."""
    from analysis._parallel import fork_map
    from analysis.fits.bcrit_theory import THEORY_COLUMNS

    key_columns = [c for c in tables.varying_keys if c in tables.runs.columns]
    targets = exponents[exponents["clock"] != "failure"]
    groups = [(condition, group) for condition, group in targets.groupby("condition", sort=True)]
    job = (tables, fits, n_boot, seed, resample, key_columns, records or {})
    parts = fork_map(_condition_rows, groups, jobs if len(groups) > 1 else 1, shared=job)
    rows = [row for part, _ in parts for row in part]
    if replicates is not None:
        replicates.update({(r["condition"], r["clock"]): r["_boot"] for r in rows})
    theory = [row for _, part in parts for row in part]
    return (
        pd.DataFrame(rows, columns=["condition", *key_columns, *BCRIT_COLUMNS[1:]]),
        pd.DataFrame(theory, columns=THEORY_COLUMNS),
    )


def _condition_rows(item, job: tuple) -> tuple[list[dict], list[dict]]:
    """The rows of one condition in both tables (the body of :func:`bcrit_tables`)."""
    from analysis.fits.bcrit_theory import compare, per_run_means
    from analysis.fits.exponents import condition_resamples, early_sizes  # the fit's resamples and rows

    condition, group = item
    tables, fits, n_boot, seed, resample, key_columns, records = job
    rows, theory = [], []
    fitted, W, used, _clusters, note = condition_resamples(tables, condition, n_boot, seed, resample)
    K = float(np.nanmedian(fitted["K"].to_numpy(float))) if fitted["K"].notna().any() else math.nan
    eta = fitted["lr.ref_lr"].iloc[0] if "lr.ref_lr" in fitted and len(fitted) else math.nan
    first = fitted.iloc[0] if len(fitted) else {}
    unit = fitted["clock_unit"].iloc[0] if "clock_unit" in fitted and len(fitted) else "responses"
    for r in group.itertuples():
        clock = r.clock
        power = fits.get((condition, clock))
        lower = fitted[f"{clock}:lower"] if f"{clock}:lower" in fitted else None
        # the power law's rows: the early sizes it leaves out leave this fit too (same resamples' columns)
        early = early_sizes(fitted, clock, tables.options)
        values = fitted[clock].where(~fitted["B"].isin(early))
        res = fit_mccandlish(
            fitted["B"].to_numpy(float),
            values.to_numpy(float),
            fitted[f"{clock}:censored"].to_numpy(bool),
            lower=None if lower is None else lower.to_numpy(float),
            weights=W,
            inflation=getattr(power, "inflation", 1.0),
            floor=unit == "responses",
        )
        ll_power = res.loglik_power
        a_m, a_p = aicc(res.loglik, res.n_runs), aicc(ll_power, res.n_runs)
        delta = a_m - a_p
        alphas = local_alpha(res.sizes, res.b_crit) if res.sizes else np.empty(0)
        row = {"condition": condition}
        row.update({k: first.get(k) if len(fitted) else None for k in key_columns})
        row.update(
            clock=clock,
            target=float(clock.split(":", 1)[1]),
            eta_ref=eta,
            K=K,
            n_runs=res.n_runs,
            n_sizes=res.n_sizes,
            sizes_early=" ".join(f"{b:g}" for b in early),
            n_floor=res.n_floor,
            resampling=used + (f" ({note})" if note else ""),
            n_boot=res.n_boot,
            inflation=getattr(power, "inflation", math.nan),
            b_crit=res.b_crit,
            ci_low=res.ci_low,
            ci_high=res.ci_high,
            ci_method=res.ci_method,
            identified=res.identified,
            boot_low=res.boot_low,
            boot_high=res.boot_high,
            profile_low=res.profile_low,
            profile_high=res.profile_high,
            n_boot_unbounded=res.n_boot_unbounded,
            b_crit_per_step=res.b_crit / K if math.isfinite(K) and K > 0 else math.nan,
            r_min=res.r_min,
            r_min_low=res.r_min_low,
            r_min_high=res.r_min_high,
            sigma=res.sigma,
            loglik=res.loglik,
            loglik_power=ll_power,
            aicc=a_m,
            aicc_power=a_p,
            delta_aicc=delta,
            preferred=preferred(delta),
            alpha_power=getattr(power, "exponent", math.nan),
            alpha_local_min=float(alphas.min()) if alphas.size and not np.isnan(alphas).all() else math.nan,
            alpha_local_max=float(alphas.max()) if alphas.size and not np.isnan(alphas).all() else math.nan,
            alpha_local=_local_text(res.sizes, res),
            note="; ".join(res.warnings),
            _boot=res.boot_b_crit,  # not a column: bcrit_tables' replicates
        )
        rows.append(row)
        if not records:
            continue
        k = K if math.isfinite(K) and K > 0 else 1.0
        extra = compare(res, res.sizes, k, per_run_means(fitted, records, row["target"]), W)
        theory.append(
            {
                "condition": condition,
                "clock": clock,
                "target": row["target"],
                "eta_ref": eta,
                "K": K,
                "n_runs": res.n_runs,
                "b_crit": res.b_crit,
                "b_crit_low": res.ci_low,
                "b_crit_high": res.ci_high,
                "b_crit_per_step": res.b_crit / k,
                **extra,
                "note": "" if math.isfinite(K) and K > 0 else "K unknown: taken as 1",
            }
        )
    return rows, theory
