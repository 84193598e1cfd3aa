"""Joint model of the two clocks: bivariate log-normal times with correlation rho (dependent competing
risks), fitted by maximum likelihood.

The cause-specific fit of :mod:`analysis.fits.fit` treats a run that failed before reaching the target as
independently censored. When slow learning and failure are correlated that biases α
(``benchmarks/calibration/analysis_coverage.py``: +0.027 at rho = +0.7, -0.021 at rho = -0.7). This model writes
both times of a run as one draw::

    (log T, log F) ~ N2((a_T + α x, a_F + γ x), (σ_T, σ_F), ρ),      x = log B

and uses what each run shows of both (standardised ``z`` below, ``s = sqrt(1 - ρ²)``):

* failed at ``f`` (exact): ``log φ(z_F)/σ_F + log P(T in (l, u] | z_F)`` with
  ``T | z_F ~ N(μ_T + ρ σ_T z_F, σ_T² s²)``; a target never reached before the run stopped has
  ``u = ∞``;
* never failed, right-censored at ``c``: ``log P(T in (l, u], F > c)``
  ``= log([Φ(z_u) - Φ2(z_u, z_c; ρ)] - [Φ(z_l) - Φ2(z_l, z_c; ρ)])`` with the bivariate normal
  distribution function ``Φ2`` from Owen's T function (Owen 1956, eq. 2.1; ``scipy.special.owens_t``).

This is the bivariate normal competing-risks model in the accelerated-failure-time form (dependent
competing risks are identified only through such a parametric form: Tsiatis 1975; Basu & Ghosh 1978
show the bivariate normal is identified from (min, cause)). **It is a sensitivity analysis, not a bias
fix.** A run shows its failure time whether or not it reached the target first (semi-competing risks,
Fine, Jiang & Chappell 2001), but its target time only when that came first: how a run that failed
first would have gone on learning — the part that moves α — is never seen, and ρ carries it over from
the runs where both times are seen only through the bivariate normal form. If that form is wrong, so
are ρ and α joint. ``benchmarks/calibration/analysis_coverage.py --dependence`` checks it on data whose dependence
is not bivariate normal (Clayton and Gumbel copulas, a shared gamma frailty; docs/analysis.md): there
it stayed close (|bias| <= 0.010 against 0.021-0.033 for the cause-specific α; coverage 91.5 % under
the frailty, 93.5-97.5 % under the copulas), which shows robustness to those alternatives, not
identification. Estimation:
``scipy.optimize.minimize`` (L-BFGS-B) on ``(a_T, α, log σ_T, a_F, γ, log σ_F, atanh ρ)`` from the
two separate fits and ρ = 0; the interval of α is Wald, from the observed information by central
finite differences, with a Student-t quantile on N - 7 degrees of freedom (a bootstrap of this fit
costs ~50 ms per resample, too slow for every run of the CLI). Columns ``exponent_joint``, ``ci_low_joint``, ``ci_high_joint``, ``rho_joint`` in exponents.csv.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import optimize, stats
from scipy.special import log_ndtr, ndtr, owens_t

from analysis.fits.censored_normal import log_bounds, log_ndtr_diff

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def bvn_cdf(h: np.ndarray, k: np.ndarray, rho: float) -> np.ndarray:
    """``P(X <= h, Y <= k)`` for standard bivariate normal with correlation ``rho`` (Owen's T form)."""
    h, k = np.broadcast_arrays(np.asarray(h, float), np.asarray(k, float))
    out = np.empty(h.shape)
    inf_h, inf_k = ~np.isfinite(h), ~np.isfinite(k)
    out[inf_h & (h < 0)] = 0.0
    out[inf_k & (k < 0)] = 0.0
    both_pos = inf_h & (h > 0) & inf_k & (k > 0)
    out[both_pos] = 1.0
    only_h = inf_h & (h > 0) & ~inf_k
    out[only_h] = ndtr(k[only_h])
    only_k = inf_k & (k > 0) & ~inf_h
    out[only_k] = ndtr(h[only_k])
    fin = ~inf_h & ~inf_k
    if fin.any():
        hh = np.where(h[fin] == 0, 1e-12, h[fin])
        kk = np.where(k[fin] == 0, 1e-12, k[fin])
        s = math.sqrt(max(1 - rho * rho, 1e-300))
        t1 = owens_t(hh, (kk - rho * hh) / (hh * s))
        t2 = owens_t(kk, (hh - rho * kk) / (kk * s))
        beta = np.where(hh * kk > 0, 0.0, 0.5)
        out[fin] = np.clip(0.5 * ndtr(hh) + 0.5 * ndtr(kk) - t1 - t2 - beta, 0.0, 1.0)
    return out


def _nll(params, x, tlo, thi, fy, failed):
    aT, al, lsT, aF, ga, lsF, zr = params
    sT, sF, rho = math.exp(lsT), math.exp(lsF), math.tanh(zr)
    s = math.sqrt(1 - rho * rho)
    mT, mF = aT + al * x, aF + ga * x
    zl, zu = (tlo - mT) / sT, (thi - mT) / sT
    zf = (fy - mF) / sF
    ll = np.zeros(x.size)
    if failed.any():
        zfi = zf[failed]
        a = (zl[failed] - rho * zfi) / s
        b = (zu[failed] - rho * zfi) / s
        ll[failed] = -0.5 * zfi * zfi - _LOG_SQRT_2PI - lsF + log_ndtr_diff(a, b)
    cens = ~failed
    if cens.any():
        zc = zf[cens]
        upper = ndtr(zu[cens]) - bvn_cdf(zu[cens], zc, rho)
        lower = ndtr(zl[cens]) - bvn_cdf(zl[cens], zc, rho)
        p = upper - lower
        # when both tails are tiny, fall back on the independent-case expression for stability
        p = np.where(p > 1e-300, p, np.exp(log_ndtr_diff(zl[cens], zu[cens]) + log_ndtr(-zc)))
        ll[cens] = np.log(np.maximum(p, 1e-300))
    value = -ll.sum()
    return value if np.isfinite(value) else 1e300


def fit_joint(sizes, t_values, t_censored, t_lower, f_values, f_censored, start=None) -> dict:
    """Joint ML fit (module docstring) of one condition and target; returns ``alpha``, ``se``,
    ``ci_low``, ``ci_high``, ``rho``, ``gamma`` (with ``gamma_se``, ``gamma_ci_low``, ``gamma_ci_high``:
    the same Wald interval), ``ok`` and ``message``."""
    B = np.asarray(sizes, float)
    keep = (
        np.isfinite(B)
        & (B > 0)
        & np.isfinite(np.asarray(t_values, float))
        & (np.asarray(t_values, float) > 0)
    )
    keep &= np.isfinite(np.asarray(f_values, float)) & (np.asarray(f_values, float) > 0)
    x = np.log(B[keep])
    tlo, thi = log_bounds(
        np.asarray(t_values, float)[keep],
        np.asarray(t_censored, bool)[keep],
        np.asarray(t_lower, float)[keep],
    )
    fy = np.log(np.asarray(f_values, float)[keep])
    failed = ~np.asarray(f_censored, bool)[keep]
    out = {
        "alpha": np.nan,
        "se": np.nan,
        "ci_low": np.nan,
        "ci_high": np.nan,
        "rho": np.nan,
        "gamma": np.nan,
        "gamma_se": np.nan,
        "gamma_ci_low": np.nan,
        "gamma_ci_high": np.nan,
        "ok": False,
        "message": "",
    }
    if np.unique(x[np.isfinite(thi)]).size < 2 or failed.sum() < 2 or np.unique(x).size < 2:
        out["message"] = "needs reached targets at two sizes and two failures"
        return out
    if start is None:
        mid = np.where(np.isfinite(thi), np.where(np.isfinite(tlo), 0.5 * (tlo + thi), thi), tlo)
        bT = np.polyfit(x, mid, 1)
        bF = np.polyfit(x, fy, 1)
        start = [
            bT[1],
            bT[0],
            math.log(max(np.std(mid - np.polyval(bT, x)), 0.05)),
            bF[1],
            bF[0],
            math.log(max(np.std(fy - np.polyval(bF, x)), 0.05)),
            0.0,
        ]
    args = (x, tlo, thi, fy, failed)
    bounds = [(None, None), (None, None), (-7, 3), (None, None), (None, None), (-7, 3), (-3.8, 3.8)]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        res = optimize.minimize(
            _nll,
            start,
            args=args,
            method="L-BFGS-B",
            bounds=bounds,
            options={"maxiter": 500, "ftol": 1e-12, "gtol": 1e-8},
        )
        if not np.isfinite(res.fun) or res.fun >= 1e299:
            out["message"] = f"optimizer failed: {res.message}"
            return out
        p = res.x
        h = 1e-4
        n = p.size
        H = np.empty((n, n))
        f0 = _nll(p, *args)
        for i in range(n):
            for j in range(i, n):
                ei, ej = np.eye(n)[i] * h, np.eye(n)[j] * h
                if i == j:
                    H[i, i] = (_nll(p + ei, *args) - 2 * f0 + _nll(p - ei, *args)) / h**2
                else:
                    H[i, j] = H[j, i] = (
                        _nll(p + ei + ej, *args)
                        - _nll(p + ei - ej, *args)
                        - _nll(p - ei + ej, *args)
                        + _nll(p - ei - ej, *args)
                    ) / (4 * h * h)
    try:
        cov = np.linalg.inv(H)
        se = float(math.sqrt(cov[1, 1])) if cov[1, 1] > 0 else np.nan
        se_gamma = float(math.sqrt(cov[4, 4])) if cov[4, 4] > 0 else np.nan
    except np.linalg.LinAlgError:
        se = se_gamma = np.nan
    out.update(
        alpha=float(p[1]),
        gamma=float(p[4]),
        gamma_se=se_gamma,
        rho=float(math.tanh(p[6])),
        se=se,
        ok=bool(np.isfinite(se)),
    )
    n_reached_sizes = np.unique(x[np.isfinite(thi)]).size
    if n_reached_sizes < 3:
        out["message"] = (
            f"targets reached at only {n_reached_sizes} sizes: the interval leans on the bivariate form"
        )
    if np.isfinite(se):
        # Student-t quantile on N - 7 degrees of freedom: the Wald pivot of a 7-parameter fit to a
        # few dozen runs is heavier-tailed than normal (coverage 88.7 % with z at rho = +0.7, 20 runs)
        q = float(stats.t.ppf(0.975, max(x.size - 7, 1)))
        out["ci_low"], out["ci_high"] = p[1] - q * se, p[1] + q * se
        out["gamma_ci_low"], out["gamma_ci_high"] = p[4] - q * se_gamma, p[4] + q * se_gamma
    else:
        out["message"] = "observed information not positive definite"
    return out
