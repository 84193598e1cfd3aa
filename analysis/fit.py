"""Power-law fits of the two clocks with censoring and bootstrap intervals.

Model (per condition and clock), in log space::

    log R_i = log c + alpha * log B_i + sigma * eps_i,      eps_i ~ N(0, 1)

i.e. ``R(B) = c * B**alpha`` with log-normal scatter: a log-normal accelerated-failure-time model, which
for right-censored data is the Tobit model in log space. A run observed at ``R_i`` contributes the
normal log-density of its residual; a run right-censored at ``R_i`` (never reached the target / never
failed) contributes the log-survival ``log Phi(-(log R_i - log c - alpha log B_i) / sigma)``. Dropping
censored runs instead would keep only the fast runs at large B and bias ``alpha`` down
(``tests/analysis/test_analysis_fit.py::test_dropping_censored_runs_is_biased_and_tobit_is_not``).

Estimation: maximum likelihood by Newton's method in Olsen's (1978) reparametrisation
``(g0, g1, t) = (log c, alpha, 1) / sigma``, in which the Tobit log-likelihood is globally concave, so
Newton with step halving converges from the OLS start on the uncensored runs. The Newton iterations
run on all bootstrap replicates at once (numpy, replicates as a leading axis; a replicate is a weight
vector of resampling counts), which is what makes 1,000 resamples of 1,000 runs take well under a
second.

Intervals:

* ``ci_low/ci_high`` (default): bootstrap over seeds within each B (resample the runs of each rollout
  size with replacement, refit), percentile 95 % interval. Two small-sample corrections, both exact
  for the slope of an uncensored Gaussian fit, scale the replicate deviations from the point estimate
  by ``k = sqrt(sum_b n_b d_b^2 / sum_b (n_b - 1) d_b^2) * t_{N-m}(0.975) / z(0.975)``:
  resampling ``n_b`` runs within a size shrinks the variance of their mean by ``(n_b - 1) / n_b``
  (``d_b`` = log B_b minus the mean log B over runs), and the bootstrap sees the scatter through
  ``N - m`` degrees of freedom (N runs, m sizes), so its pivot is Student-t, not normal. Without them
  the plain percentile interval covered 83 % instead of 95 % with 3 seeds at 4 sizes (400 synthetic
  sweeps; with them 95 %, see also ``benchmarks/analysis_coverage.py``). A resample
  with events at fewer than two sizes has no finite MLE; it counts as +inf or -inf (the side the
  likelihood runs off to), so a sweep that barely constrains the exponent gets an unbounded interval
  rather than a falsely narrow one. When every size has a single run the bootstrap cannot vary and
  the Wald interval is reported instead (``ci_method`` says which).
* ``wald_low/wald_high``: ``alpha ± 1.96 se`` from the observed information of the MLE (delta method
  from Olsen's parameters).

Warnings (not errors): fewer than 3 distinct B, a single seed at some B, most runs censored; the
exponent is NaN with the reason when it is not identified (every run censored, fewer than two sizes
with an observed event).
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
    n_runs: int = 0
    n_censored: int = 0
    n_sizes: int = 0
    n_seeds_min: int = 0
    n_boot: int = 0
    n_boot_failed: int = 0
    warnings: list[str] = field(default_factory=list)
    # bootstrap replicates after inflation (see module docstring); a resample whose exponent is not
    # identified has intercept NaN and slope +-inf (the side the likelihood runs off to)
    boot_intercepts: np.ndarray = field(default_factory=lambda: np.empty(0))
    boot_slopes: np.ndarray = field(default_factory=lambda: np.empty(0))

    @property
    def prefactor(self) -> float:
        return float(np.exp(self.intercept))


def _solve3(H: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Solve ``H x = g`` for a batch of 3x3 systems by the adjugate; singular systems give NaN."""
    a, b, c = H[:, 0, 0], H[:, 0, 1], H[:, 0, 2]
    d, e, f = H[:, 1, 0], H[:, 1, 1], H[:, 1, 2]
    gg, h, i = H[:, 2, 0], H[:, 2, 1], H[:, 2, 2]
    cof = np.stack(
        [
            np.stack([e * i - f * h, c * h - b * i, b * f - c * e], -1),
            np.stack([f * gg - d * i, a * i - c * gg, c * d - a * f], -1),
            np.stack([d * h - e * gg, b * gg - a * h, a * e - b * d], -1),
        ],
        1,
    )
    det = a * cof[:, 0, 0] + b * cof[:, 1, 0] + c * cof[:, 2, 0]
    scale = np.abs(H).max(axis=(1, 2)) ** 3 + 1e-300
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.einsum("mij,mj->mi", cof, g) / det[:, None]
    out[np.abs(det) <= 1e-13 * scale] = np.nan
    return out


class _Tobit:
    """Log-likelihood pieces for replicate weight rows ``W[m]`` (observed via sufficient statistics)."""

    def __init__(self, x, y, censored, W):
        obs = ~censored
        Wo, xo, yo = W[:, obs], x[obs], y[obs]
        self.S = np.stack([Wo.sum(1), Wo @ xo, Wo @ (xo * xo), Wo @ yo, Wo @ (xo * yo), Wo @ (yo * yo)], 1)
        self.Wc = W[:, censored]
        self.Fc = np.stack([np.ones(censored.sum()), x[censored], -y[censored]], 1)  # [nc, 3]
        self.Fc2 = (self.Fc[:, :, None] * self.Fc[:, None, :]).reshape(-1, 9)  # [nc, 9]

    def _observed_ll(self, th, rows):
        S0, Sx, Sxx, Sy, Sxy, Syy = self.S[rows].T
        g0, g1, t = th.T
        return S0 * (np.log(t) - _LOG_SQRT_2PI) - 0.5 * (
            t * t * Syy + g0 * g0 * S0 + g1 * g1 * Sxx - 2 * t * g0 * Sy - 2 * t * g1 * Sxy + 2 * g0 * g1 * Sx
        )

    def loglik(self, th, rows):
        ll = self._observed_ll(th, rows)
        if self.Fc.shape[0]:
            u = th @ self.Fc.T  # [m, nc]: g0 + g1 x - t c
            ll = ll + (self.Wc[rows] * log_ndtr(u)).sum(1)
        return ll

    def derivs(self, th, rows):
        """Log-likelihood, gradient ``[m, 3]`` and Hessian ``[m, 3, 3]`` at ``th``."""
        ll = self._observed_ll(th, rows)
        S0, Sx, Sxx, Sy, Sxy, Syy = self.S[rows].T
        g0, g1, t = th.T
        grad = np.stack(
            [
                t * Sy - g0 * S0 - g1 * Sx,
                t * Sxy - g0 * Sx - g1 * Sxx,
                S0 / t - (t * Syy - g0 * Sy - g1 * Sxy),
            ],
            1,
        )
        H = np.stack(
            [
                np.stack([-S0, -Sx, Sy], 1),
                np.stack([-Sx, -Sxx, Sxy], 1),
                np.stack([Sy, Sxy, -S0 / (t * t) - Syy], 1),
            ],
            1,
        )
        if self.Fc.shape[0]:
            u = th @ self.Fc.T
            log_cdf = log_ndtr(u)
            lam = np.exp(-0.5 * u * u - _LOG_SQRT_2PI - log_cdf)  # inverse Mills ratio phi/Phi
            w = self.Wc[rows]
            ll = ll + (w * log_cdf).sum(1)
            grad = grad + (w * lam) @ self.Fc
            H = H + ((w * (-lam * (u + lam))) @ self.Fc2).reshape(-1, 3, 3)
        return ll, grad, H


def tobit_mle(x, y, censored, weights=None, max_iter=60, tol=1e-9, want_cov=False, start=None):
    """Censored-normal MLE of ``y = b0 + b1 x + sigma eps`` for every weight row (bootstrap replicate).

    Returns ``(b0, b1, sigma, ok, cov, theta, y_scale)`` with arrays over replicates: ``ok`` is False
    where the MLE does not exist or did not converge (those entries are NaN); ``theta`` holds Olsen's
    parameters for centred ``x`` and standardised ``y`` and ``cov`` (with ``want_cov``) their inverse
    observed information. ``start`` (Olsen parameters, e.g. the point estimate's ``theta``) replaces
    the OLS start, which saves Newton iterations for bootstrap replicates.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    censored = np.asarray(censored, bool)
    W = np.ones((1, x.size)) if weights is None else np.asarray(weights, float)
    xm, ym = x.mean(), y.mean()
    ys = y.std() if y.std() > 0 else 1.0
    xc, yc = x - xm, (y - ym) / ys
    model = _Tobit(xc, yc, censored, W)
    M = W.shape[0]
    S0, Sx, Sxx, Sy, Sxy, Syy = model.S.T
    # identified only with observed events at two or more distinct sizes
    sizes, inverse = np.unique(xc, return_inverse=True)
    onehot = np.zeros((x.size, sizes.size))
    onehot[np.arange(x.size), inverse] = (~censored).astype(float)
    ok = (W @ onehot > 0).sum(1) >= 2
    with np.errstate(divide="ignore", invalid="ignore"):
        den = S0 * Sxx - Sx * Sx
        b1 = np.where(den > 0, (S0 * Sxy - Sx * Sy) / den, 0.0)
        b0 = (Sy - b1 * Sx) / S0
        rss = Syy - 2 * b0 * Sy - 2 * b1 * Sxy + b0 * b0 * S0 + 2 * b0 * b1 * Sx + b1 * b1 * Sxx
        s = np.sqrt(np.maximum(rss / S0, 0.0025))
    theta = np.stack([b0 / s, b1 / s, 1 / s], 1) if start is None else np.tile(start, (M, 1))
    theta[~ok] = np.nan
    active = np.flatnonzero(ok)
    converged = np.zeros(M, bool)
    for _ in range(max_iter):
        if active.size == 0:
            break
        th = theta[active]
        ll0, grad, H = model.derivs(th, active)
        step = -_solve3(H, grad)
        decrement = (grad * step).sum(1)  # g^T (-H)^{-1} g, the Newton decrement
        bad = ~np.isfinite(decrement)
        done = (decrement < tol) & ~bad
        converged[active[done]] = True
        ok[active[bad]] = False
        keep = ~(done | bad)
        active, th, step, ll0 = active[keep], th[keep], step[keep], ll0[keep]
        if active.size == 0:
            break
        scale = np.ones(active.size)
        new = th + step
        pending = np.arange(active.size)
        for _ in range(40):
            cand = th[pending] + scale[pending, None] * step[pending]
            good = cand[:, 2] > 0
            ll1 = np.full(pending.size, -np.inf)
            if good.any():
                ll1[good] = model.loglik(cand[good], active[pending[good]])
            accept = ll1 >= ll0[pending] - 1e-12 * np.abs(ll0[pending])
            new[pending[accept]] = cand[accept]
            pending = pending[~accept]
            if pending.size == 0:
                break
            scale[pending] *= 0.5
        new[pending] = th[pending]  # no ascent possible: at the optimum up to rounding
        converged[active[pending]] = True
        theta[active] = new
        huge = np.abs(new).max(1) > 1e8
        ok[active[huge]] = False
        active = active[~np.isin(active, active[pending]) & ~huge]
    ok &= converged
    theta[~ok] = np.nan
    g0, g1, t = theta.T
    b1 = g1 / t * ys
    b0 = ym + ys * g0 / t - b1 * xm
    sigma = ys / t
    cov = np.full((M, 3, 3), np.nan)
    if want_cov and ok.any():
        _, _, H = model.derivs(theta[ok], np.flatnonzero(ok))
        cov[ok] = np.stack([_solve3(-H, np.broadcast_to(e, (H.shape[0], 3))) for e in np.eye(3)], 2)
    return b0, b1, sigma, ok, cov, theta, ys


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
    n_boot: int = 1000,
    rng: np.random.Generator | int | None = None,
    level: float = 0.95,
    inflate: bool = True,
) -> FitResult:
    """Fit ``values = c * sizes**alpha`` with right-censoring; see the module docstring for the method."""
    rng = np.random.default_rng(rng)
    B = np.asarray(sizes, float)
    R = np.asarray(values, float)
    c = np.asarray(censored, bool)
    keep = np.isfinite(B) & np.isfinite(R) & (B > 0) & (R > 0)
    B, R, c = B[keep], R[keep], c[keep]
    res = FitResult(n_runs=int(B.size), n_censored=int(c.sum()))
    if keep.size > B.size:
        res.warnings.append(f"{keep.size - B.size} run(s) without a positive finite value left out")
    if B.size == 0:
        res.warnings.append("no runs")
        return res
    uniq, counts = np.unique(B, return_counts=True)
    res.n_sizes, res.n_seeds_min = int(uniq.size), int(counts.min())
    if uniq.size < 3:
        res.warnings.append(f"only {uniq.size} distinct B (< 3): exponent poorly determined")
    if (counts == 1).any():
        res.warnings.append(f"single seed at B={', '.join(f'{b:g}' for b in uniq[counts == 1])}")
    if c.all():
        res.warnings.append("all runs censored: exponent not identified")
        return res
    if np.unique(B[~c]).size < 2:
        res.warnings.append("events observed at fewer than 2 distinct B: exponent not identified")
        return res
    if c.mean() > 0.5:
        res.warnings.append(f"{c.mean():.0%} of runs censored: the fit leans on the model")
    x, y = np.log(B), np.log(R)
    b0, b1, sigma, ok, cov, theta, ys = tobit_mle(x, y, c, want_cov=True)
    if not ok[0]:
        res.warnings.append("maximum-likelihood fit did not converge: exponent not identified")
        return res
    res.exponent, res.intercept, res.sigma = float(b1[0]), float(b0[0]), float(sigma[0])
    _, g1, t = theta[0]
    jac = np.array([0.0, 1.0 / t, -g1 / t**2]) * ys
    var = float(jac @ cov[0] @ jac)
    z = _Z975 if level == 0.95 else float(np.sqrt(2) * _erfinv(level))
    if np.isfinite(var) and var >= 0:
        res.se = float(np.sqrt(var))
        res.wald_low, res.wald_high = res.exponent - z * res.se, res.exponent + z * res.se
    # bootstrap over seeds within each B
    dev = np.log(uniq) - x.mean()
    num, den = (counts * dev**2).sum(), ((counts - 1) * dev**2).sum()
    if n_boot <= 0 or den <= 0:
        res.ci_method = "wald"
        res.ci_low, res.ci_high = res.wald_low, res.wald_high
        if n_boot > 0:
            res.warnings.append("one run per B: bootstrap cannot vary, Wald interval reported")
        return res
    k = 1.0
    if inflate:
        df = B.size - uniq.size  # degrees of freedom of the within-size scatter the bootstrap sees
        k = np.sqrt(num / den) * float(stdtrit(df, 0.5 + level / 2)) / z
    W = stratified_weights(np.searchsorted(uniq, B), n_boot, rng)
    bb0, bb1, _, bok, _, _, _ = tobit_mle(x, y, c, W, start=theta[0])
    res.n_boot, res.n_boot_failed = n_boot, int((~bok).sum())
    slopes = res.exponent + k * (bb1 - res.exponent)
    res.boot_intercepts = res.intercept + k * (bb0 - res.intercept)
    if res.n_boot_failed:
        slopes[~bok] = _unbounded_direction(x, c, W[~bok])
        tail = (1 - level) / 2
        if res.n_boot_failed > tail * n_boot:
            res.warnings.append(
                f"{res.n_boot_failed}/{n_boot} bootstrap resamples not identified (events at fewer "
                "than 2 sizes): the interval is unbounded on that side"
            )
    res.boot_slopes = slopes
    q = np.quantile(slopes, [(1 - level) / 2, (1 + level) / 2], method="inverted_cdf")
    res.ci_low, res.ci_high = float(q[0]), float(q[1])
    return res


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
