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

Estimation: maximum likelihood by Newton's method in Olsen's (1978) reparametrisation
``theta = (beta / sigma, 1 / sigma)``. Each contribution is log-concave in ``theta``: the exact one as
in the Tobit model, and ``log(Phi(b) - Phi(a))`` is jointly concave in ``(a, b)`` (the normal density is
log-concave; Prékopa's theorem) with ``a, b`` linear in ``theta``. So Newton with step halving converges
from the least-squares start on interval midpoints. The Newton iterations run on all bootstrap
replicates at once (numpy, replicates as a leading axis; a replicate is a weight vector of resampling
counts); exact rows enter through sufficient statistics and interval rows are collapsed to their
distinct ``(x, lo, hi)`` (crossings are quantised to the evaluation grid, so seeds at one B share a few
intervals), which keeps 1,000 resamples of 1,000 runs well under a second per fit. The general design
matrix serves the goodness-of-fit models too (a free mean per size, a broken power law:
:mod:`analysis.fits.gof`). Written by hand rather than with ``scipy.optimize`` because of that batching;
``tests/analysis/test_analysis_fit.py`` checks it against ``scipy.optimize.minimize`` on the same
likelihood.

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
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import log_ndtr, stdtrit

_Z975 = 1.959963984540054
_LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)


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


def log_ndtr_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``log(Phi(b) - Phi(a))`` for ``a < b`` (either may be infinite), accurate in both tails."""
    with np.errstate(invalid="ignore", over="ignore"):
        flip = (a + b) > 0  # both in the upper tail: Phi(b) - Phi(a) = Phi(-a) - Phi(-b)
    lo, hi = np.where(flip, -b, a), np.where(flip, -a, b)
    lhi, llo = log_ndtr(hi), log_ndtr(lo)
    with np.errstate(divide="ignore", invalid="ignore"):
        return lhi + np.log(-np.expm1(llo - lhi))


def _solve(H: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Solve ``H x = g`` for a batch of small systems; singular ones give NaN."""
    try:
        with np.errstate(all="ignore"):
            out = np.linalg.solve(H, g[..., None])[..., 0]
    except np.linalg.LinAlgError:
        out = np.full(g.shape, np.nan)
        for i in range(H.shape[0]):
            try:
                out[i] = np.linalg.solve(H[i], g[i])
            except np.linalg.LinAlgError:
                pass
    cond_bad = ~np.isfinite(out).all(1)
    out[cond_bad] = np.nan
    return out


class _IntervalModel:
    """Weighted log-likelihood of ``y ~ N(X beta, sigma^2)`` with ``y`` known exactly or in ``(lo, hi]``,
    in Olsen's parameters ``theta = (beta / sigma, 1 / sigma)``; rows of ``W`` are replicate weights."""

    def __init__(self, X: np.ndarray, lo: np.ndarray, hi: np.ndarray, W: np.ndarray):
        self.p = X.shape[1]
        exact = lo == hi
        Wo, Xo, yo = W[:, exact], X[exact], lo[exact]
        self.S0 = Wo.sum(1)
        self.XX = np.einsum("mn,np,nq->mpq", Wo, Xo, Xo)
        self.Xy = Wo @ (Xo * yo[:, None])
        self.yy = Wo @ (yo * yo)
        Xi, li, hi_ = X[~exact], lo[~exact], hi[~exact]
        if Xi.shape[0]:
            key = np.column_stack([Xi, li, hi_])
            uniq, inverse = np.unique(key, axis=0, return_inverse=True)
            onehot = np.zeros((Xi.shape[0], uniq.shape[0]))
            onehot[np.arange(Xi.shape[0]), inverse.ravel()] = 1.0
            self.Wi = W[:, ~exact] @ onehot  # [M, nu]
            Xu, lu, hu = uniq[:, : self.p], uniq[:, self.p], uniq[:, self.p + 1]
        else:
            self.Wi = np.zeros((W.shape[0], 0))
            Xu, lu, hu = np.zeros((0, self.p)), np.zeros(0), np.zeros(0)
        self.has_lo, self.has_hi = np.isfinite(lu), np.isfinite(hu)
        self.Fa = np.column_stack([-Xu, np.where(self.has_lo, lu, 0.0)])  # d z_lo / d theta
        self.Fb = np.column_stack([-Xu, np.where(self.has_hi, hu, 0.0)])
        P = self.p + 1
        self.FaFa = (self.Fa[:, :, None] * self.Fa[:, None, :]).reshape(-1, P * P)
        self.FbFb = (self.Fb[:, :, None] * self.Fb[:, None, :]).reshape(-1, P * P)
        self.FaFb = (
            (self.Fa[:, :, None] * self.Fb[:, None, :]) + (self.Fb[:, :, None] * self.Fa[:, None, :])
        ).reshape(-1, P * P)

    def _z(self, th):
        za = np.where(self.has_lo, th @ self.Fa.T, -np.inf)
        zb = np.where(self.has_hi, th @ self.Fb.T, np.inf)
        return za, zb

    def _exact_ll(self, th, rows):
        g, t = th[:, : self.p], th[:, self.p]
        quad = t * t * self.yy[rows] - 2 * t * np.einsum("mp,mp->m", g, self.Xy[rows])
        quad = quad + np.einsum("mp,mpq,mq->m", g, self.XX[rows], g)
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.S0[rows] * (np.log(t) - _LOG_SQRT_2PI) - 0.5 * quad

    def loglik(self, th, rows):
        ll = self._exact_ll(th, rows)
        if self.Wi.shape[1]:
            za, zb = self._z(th)
            w = self.Wi[rows]
            ld = log_ndtr_diff(za, zb)
            ll = ll + np.where(w > 0, w * ld, 0.0).sum(1)
        return ll

    def derivs(self, th, rows):
        """Log-likelihood ``[m]``, gradient ``[m, P]`` and Hessian ``[m, P, P]`` at ``th``."""
        p, P = self.p, self.p + 1
        ll = self._exact_ll(th, rows)
        g, t = th[:, :p], th[:, p]
        XX, Xy = self.XX[rows], self.Xy[rows]
        grad = np.concatenate(
            [
                t[:, None] * Xy - np.einsum("mpq,mq->mp", XX, g),
                (self.S0[rows] / t - (t * self.yy[rows] - (g * Xy).sum(1)))[:, None],
            ],
            1,
        )
        H = np.zeros((th.shape[0], P, P))
        H[:, :p, :p] = -XX
        H[:, :p, p] = Xy
        H[:, p, :p] = Xy
        H[:, p, p] = -self.S0[rows] / (t * t) - self.yy[rows]
        if self.Wi.shape[1]:
            za, zb = self._z(th)
            w = self.Wi[rows]
            ld = log_ndtr_diff(za, zb)
            with np.errstate(invalid="ignore", over="ignore"):
                pa = np.where(self.has_lo, np.exp(-0.5 * za * za - _LOG_SQRT_2PI - ld), 0.0)
                pb = np.where(self.has_hi, np.exp(-0.5 * zb * zb - _LOG_SQRT_2PI - ld), 0.0)
                haa = np.where(self.has_lo, za * pa, 0.0) - pa * pa
                hbb = -np.where(self.has_hi, zb * pb, 0.0) - pb * pb
            hab = pa * pb
            w = np.where(np.isfinite(ld), w, 0.0)
            ll = ll + np.where(w > 0, w * ld, 0.0).sum(1)
            grad = grad + (w * pb) @ self.Fb - (w * pa) @ self.Fa
            H = H + ((w * haa) @ self.FaFa + (w * hbb) @ self.FbFb + (w * hab) @ self.FaFb).reshape(-1, P, P)
        return ll, grad, H


def interval_mle(
    X, lo, hi, weights=None, ok=None, max_iter=60, tol=1e-9, want_cov=False, start=None
) -> dict[str, np.ndarray]:
    """Censored-normal MLE of ``y = X beta + sigma eps`` with ``y`` in ``(lo, hi]`` (``lo == hi``: exact;
    ``lo = -inf``: left-censored; ``hi = inf``: right-censored), for every weight row of ``weights``.

    Returns a dict of arrays over replicates: ``beta`` ``[M, p]``, ``sigma``, ``ok`` (False where the
    MLE does not exist or did not converge; those entries are NaN), ``loglik``, ``theta`` (Olsen's
    parameters for standardised ``y``), ``y_scale`` and ``y_mean`` (the standardisation) and, with
    ``want_cov``, ``cov``: the inverse observed information of ``theta``. ``ok`` (input) marks
    replicates known not to be identified; ``start`` (Olsen parameters, e.g. the point estimate's
    ``theta``) replaces the least-squares start, which saves Newton iterations for bootstrap replicates.
    """
    X = np.asarray(X, float)
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    n, p = X.shape
    W = np.ones((1, n)) if weights is None else np.asarray(weights, float)
    M = W.shape[0]
    mid = np.where(np.isfinite(lo) & np.isfinite(hi), 0.5 * (lo + hi), np.where(np.isfinite(lo), lo, hi))
    ym = mid.mean() if n else 0.0
    ys = mid.std() if n and mid.std() > 0 else 1.0
    los, his = (lo - ym) / ys, (hi - ym) / ys
    model = _IntervalModel(X, los, his, W)
    ok = np.ones(M, bool) if ok is None else np.asarray(ok, bool).copy()
    P = p + 1
    if start is None:
        mids = (mid - ym) / ys
        A = np.einsum("mn,np,nq->mpq", W, X, X) + 1e-9 * np.eye(p)
        beta = _solve(A, W @ (X * mids[:, None]))
        with np.errstate(invalid="ignore"):
            resid = mids[None, :] - beta @ X.T
            s = np.sqrt(np.maximum((W * resid * resid).sum(1) / np.maximum(W.sum(1), 1), 0.0025))
        theta = np.concatenate([beta / s[:, None], 1 / s[:, None]], 1)
    else:
        theta = np.tile(np.asarray(start, float), (M, 1))
    ok &= np.isfinite(theta).all(1)
    theta[~ok] = np.nan
    active = np.flatnonzero(ok)
    converged = np.zeros(M, bool)
    stalled = np.zeros(M, bool)  # stopped because no step ascended while the decrement was not small
    for _ in range(max_iter):
        if active.size == 0:
            break
        th = theta[active]
        ll0, grad, H = model.derivs(th, active)
        step = -_solve(H, grad)
        decrement = (grad * step).sum(1)  # g^T (-H)^{-1} g, the Newton decrement
        bad = ~np.isfinite(decrement) | ~np.isfinite(ll0)
        done = (decrement < tol) & ~bad
        converged[active[done]] = True
        ok[active[bad]] = False
        keep = ~(done | bad)
        active, th, step, ll0 = active[keep], th[keep], step[keep], ll0[keep]
        if active.size == 0:
            break
        scale = np.ones(active.size)
        new = th + step
        # in the quadratic region of a concave log-likelihood (small Newton decrement) the full step
        # is taken without checking it: saves a likelihood evaluation per replicate and iteration
        pending = np.flatnonzero(decrement[keep] >= 1e-3)
        for _ in range(40):
            if pending.size == 0:
                break
            cand = th[pending] + scale[pending, None] * step[pending]
            good = cand[:, p] > 0
            ll1 = np.full(pending.size, -np.inf)
            if good.any():
                ll1[good] = model.loglik(cand[good], active[pending[good]])
            accept = ll1 >= ll0[pending] - 1e-12 * np.abs(ll0[pending])
            new[pending[accept]] = cand[accept]
            pending = pending[~accept]
            if pending.size == 0:
                break
            scale[pending] *= 0.5
        new[pending] = th[pending]  # no ascent possible: at the optimum up to rounding ...
        converged[active[pending]] = True
        stalled[active[pending]] = True  # ... or on a ridge running off to sigma -> 0 (a stalled search)
        theta[active] = new
        huge = np.abs(new).max(1) > 1e8
        ok[active[huge]] = False
        active = active[~np.isin(active, active[pending]) & ~huge]
    ok &= converged
    theta[~ok] = np.nan
    t = theta[:, p]
    beta = theta[:, :p] / t[:, None] * ys
    beta[:, 0] += ym  # X's first column is the intercept's
    out = {
        "beta": beta,
        "sigma": ys / t,
        "ok": ok,
        "theta": theta,
        "y_scale": ys,
        "y_mean": ym,
        "stalled": stalled & ok,
    }
    loglik = np.full(M, np.nan)
    if ok.any():
        # log-likelihood of the unstandardised y: each density term gains -log(ys)
        loglik[ok] = model.loglik(theta[ok], np.flatnonzero(ok)) - model.S0[ok] * np.log(ys)
    out["loglik"] = loglik
    cov = np.full((M, P, P), np.nan)
    if want_cov and ok.any():
        _, _, H = model.derivs(theta[ok], np.flatnonzero(ok))
        cov[ok] = np.stack([_solve(-H, np.broadcast_to(e, (H.shape[0], P)).copy()) for e in np.eye(P)], 2)
    out["cov"] = cov
    return out


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


def log_bounds(values, censored, lower=None) -> tuple[np.ndarray, np.ndarray]:
    """Log-space ``(lo, hi]`` of each run's time: right-censored at ``values``; otherwise exact, or in
    ``(lower, values]`` when ``lower`` is given and smaller (``lower <= 0``: left-censored)."""
    R = np.asarray(values, float)
    c = np.asarray(censored, bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.log(R)
        if lower is None:
            lo = y.copy()
        else:
            L = np.asarray(lower, float)
            lo = np.where(
                np.isfinite(L) & (L < R), np.where(L > 0, np.log(np.maximum(L, 1e-300)), -np.inf), y
            )
    hi = np.where(c, np.inf, y)
    lo = np.where(c, y, lo)
    return lo, hi


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


def profile_loglik(x, lo, hi, slopes) -> np.ndarray:
    """Profile log-likelihood of the slope: ``max over (log c, sigma)`` of the censored log-normal
    likelihood of ``log R = log c + slope * x + sigma eps`` at each of ``slopes``.

    Where the maximum is at ``sigma -> 0`` (every interval holds a line of that slope and there is no
    exact time) the supremum, 0, is returned; NaN where the fit failed otherwise.
    """
    x, lo, hi = (np.asarray(v, float) for v in (x, lo, hi))
    slopes = np.asarray(slopes, float)
    n = x.size
    out = np.full(slopes.size, np.nan)
    chunk = max(1, 2000 // max(n, 1))
    exact = lo == hi
    for start in range(0, slopes.size, chunk):
        s = slopes[start : start + chunk]
        g = s.size
        with np.errstate(invalid="ignore"):
            LO = (lo[None, :] - s[:, None] * x[None, :]).ravel()
            HI = (hi[None, :] - s[:, None] * x[None, :]).ravel()
        W = np.kron(np.eye(g), np.ones((1, n)))
        fit = interval_mle(np.ones((g * n, 1)), LO, HI, W)
        ll = fit["loglik"]
        bad = ~fit["ok"]
        if bad.any() and not exact.any():
            LOg, HIg = LO.reshape(g, n), HI.reshape(g, n)
            feasible = np.max(LOg, 1) < np.min(HIg, 1)  # some intercept puts every time in its interval
            ll = np.where(bad & feasible, 0.0, ll)
        out[start : start + g] = ll
    return out


def profile_interval(x, lo, hi, slope, loglik, level: float = 0.95) -> tuple[float, float]:
    """Profile-likelihood interval of the slope: ``{s : 2 (l_max - l_p(s)) <= F_{1, N-2}(level)}``.

    ``l_p`` is :func:`profile_loglik`; the reference distribution is F(1, N - 2) = t_{N-2}^2 rather
    than chi^2_1 (the likelihood-ratio statistic of a Gaussian regression slope is exactly a monotone
    function of an F(1, N - 2) statistic; we use its small-sample quantile for the censored model too).
    The slope grid starts at the estimate and widens geometrically to +-32 on each side, then refines
    around the crossing; an interval that does not close within +-32 is infinite on that side.
    """
    x, lo, hi = (np.asarray(v, float) for v in (x, lo, hi))
    df = x.size - 2
    if df < 1 or not np.isfinite(slope):
        return -np.inf, np.inf
    crit = float(stdtrit(df, 0.5 + level / 2)) ** 2
    steps = np.concatenate([[0.0], np.geomspace(0.002, 32.0, 60)])
    grid = np.concatenate([slope - steps[:0:-1], slope + steps])
    ll = profile_loglik(x, lo, hi, grid)
    top = np.nanmax(np.concatenate([ll, [loglik]])) if np.isfinite(ll).any() else loglik
    cut = top - 0.5 * crit
    inside = np.where(np.isfinite(ll), ll >= cut, False)
    centre = steps.size - 1
    inside[centre] = True
    bounds = []
    for direction in (-1, 1):
        i = centre
        while 0 <= i + direction < grid.size and inside[i + direction]:
            i += direction
        if not 0 <= i + direction < grid.size:
            bounds.append(direction * np.inf)
            continue
        a, b = grid[i], grid[i + direction]  # a inside, b outside: refine between them
        fine = np.linspace(a, b, 17)
        fl = profile_loglik(x, lo, hi, fine)
        fin = np.where(np.isfinite(fl), fl >= cut, False)
        fin[0] = True
        j = int(np.argmin(fin)) if not fin.all() else fin.size - 1
        j = max(j, 1)
        la, lb = fl[j - 1] if np.isfinite(fl[j - 1]) else cut, fl[j]
        frac = (la - cut) / (la - lb) if np.isfinite(lb) and la > lb else 1.0
        bounds.append(float(fine[j - 1] + np.clip(frac, 0.0, 1.0) * (fine[j] - fine[j - 1])))
    return float(bounds[0]), float(bounds[1])


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


def kaplan_meier(times, events) -> tuple[np.ndarray, np.ndarray]:
    """Kaplan–Meier survival curve: ``S(t) = prod_{t_i <= t} (1 - d_i / n_i)``.

    ``events[i]`` is True when run ``i`` failed at ``times[i]`` and False when it was censored there
    (censored runs count as at risk at their own time). Returns the step function's knots
    ``(t, S)`` starting at ``(0, 1)``; ``S[j]`` holds from ``t[j]`` until ``t[j+1]``.
    """
    t = np.asarray(times, float)
    e = np.asarray(events, bool)
    order = np.argsort(t, kind="stable")
    t, e = t[order], e[order]
    event_times = np.unique(t[e])
    at_risk = t.size - np.searchsorted(t, event_times, side="left")
    deaths = np.searchsorted(t[e], event_times, side="right") - np.searchsorted(
        t[e], event_times, side="left"
    )
    surv = np.cumprod(1.0 - deaths / at_risk)
    return np.concatenate([[0.0], event_times]), np.concatenate([[1.0], surv])


def aalen_johansen(times, causes, n_causes: int = 2) -> dict[str, np.ndarray]:
    """Aalen–Johansen cumulative incidence of each competing cause (Aalen & Johansen 1978).

    ``causes[i]`` is 0 for a run censored at ``times[i]`` and ``k`` in ``1..n_causes`` for a run whose
    first event was cause ``k`` at ``times[i]``. At the distinct event times ``t_j``, with ``n_j`` runs
    at risk (time >= t_j; runs censored at ``t_j`` count as at risk, as in Kaplan–Meier) and ``d_kj``
    events of cause k::

        F_k(t) = sum_{t_j <= t} S(t_j-) * d_kj / n_j,      S(t) = prod_{t_j <= t} (1 - d_j / n_j)

    with ``S`` the Kaplan–Meier curve of "no event yet" (any cause). Without censoring ``F_k`` is the
    empirical fraction of runs whose first event was k by t. Hand-written (a dozen lines of numpy)
    rather than ``lifelines.AalenJohansenFitter``, which would be a new dependency and breaks ties by
    jittering the times; ``tests/analysis/test_analysis_competing.py`` checks it against a hand-worked
    example. Returns arrays over the grid ``time`` (0 and the distinct event times): ``at_risk``,
    ``events`` ``[n_t, n_causes]``, ``censored`` (runs censored exactly at that time), ``survival``
    and ``cif`` ``[n_t, n_causes]`` (the values from that time until the next); events at time 0 are
    counted in the first row.
    """
    t = np.asarray(times, float)
    k = np.asarray(causes, int)
    ok = np.isfinite(t)
    t, k = t[ok], k[ok]
    grid = np.unique(np.concatenate([[0.0], t[k > 0]]))
    at_risk = (t[None, :] >= grid[:, None]).sum(1)
    events = np.stack(
        [((t[None, :] == grid[:, None]) & (k[None, :] == c)).sum(1) for c in range(1, n_causes + 1)], 1
    )
    d = events.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        hazard = np.where(at_risk > 0, d / np.maximum(at_risk, 1), 0.0)
        surv = np.cumprod(1.0 - hazard)
        before = np.concatenate([[1.0], surv[:-1]])
        cif = np.cumsum(
            before[:, None] * np.where(at_risk[:, None] > 0, events / np.maximum(at_risk, 1)[:, None], 0.0), 0
        )
    censored = np.array([int(((t == g) & (k == 0)).sum()) for g in grid])
    return {
        "time": grid,
        "at_risk": at_risk,
        "events": events,
        "censored": censored,
        "survival": surv,
        "cif": cif,
    }
