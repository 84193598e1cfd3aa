"""The profile likelihood of a power law's exponent: its log-likelihood maximised over the intercept and
the scatter at each slope (:func:`profile_loglik`), and the interval it gives with an F(1, N - 2)
reference (:func:`profile_interval`), which :func:`analysis.fits.fit.fit_power_law` reports where the
bootstrap is degenerate."""

from __future__ import annotations

import numpy as np
from scipy.special import stdtrit

from analysis.fits.censored_normal import interval_mle


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
