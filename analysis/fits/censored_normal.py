"""The censored-normal maximum likelihood under every power-law fit: ``y = X beta + sigma eps``,
``eps ~ N(0, 1)``, with each ``y`` known exactly, in an interval ``(lo, hi]``, left- or right-censored
(:func:`interval_mle`), and the log-space bounds of the runs' times (:func:`log_bounds`). The model and
what each run contributes: :mod:`analysis.fits.fit`.

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
"""

from __future__ import annotations

import numpy as np
from scipy.special import log_ndtr

_LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)


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
