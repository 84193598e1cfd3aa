"""The failure clock per rollout: a discrete-time hazard beside the power law R_F(B) = d·B^γ.

The policy changes only at rollout boundaries, so a run's failure time is a whole number of rollouts.
Per run (responses clock, B responses per rollout):

* a failed run whose onset is at ``failure`` = R responses failed **at rollout k = ⌈R / B⌉**: it survived
  k − 1 rollouts and failed in the k-th, which counts as at risk and failed. Its onset is known only to
  the interval (``failure:lower``, ``failure``] (docs/failure.md), so the failing rollout lies in
  ``[k_lo, k]`` with ``k_lo = ⌊lower / B⌋ + 1`` (``k_lo = k`` for an exact time; ``k_lo = 1`` for a
  left-censored one, lower = 0); with whole-rollout brackets (``failure:lower_inclusive``, the
  default of ``analysis.data.clock_tables``) ``failure:lower`` is the first rollout's end itself, ``k_lo = lower / B``. The likelihood sums over that range:
  ``P(k_lo ≤ T ≤ k) = S(k_lo − 1) − S(k)``;
* a run that did not fail (or is incomplete and kept in the fits) completed ``n = ⌊R_end / B⌋``
  rollouts without failing: right-censored, ``S(n)``.

**Discrete hazard per rollout.** With a constant hazard h per rollout, ``S(k) = (1 − h)^k``. Writing
``μ = −log(1 − h)`` (the integrated hazard of one rollout), a failed run contributes
``−(k_lo − 1)μ + log(1 − e^{−(k − k_lo + 1)μ})`` and a censored one ``−nμ``. For exact onsets this is
the binomial likelihood of the person-period data (one Bernoulli trial per rollout at risk, the failing
rollout a success), so the per-size MLE is ``failures / rollouts_at_risk``; with interval-censored
onsets it is maximised numerically. Intervals are likelihood-ratio intervals (χ²₁, 95 %).

**Across sizes: a cloglog model.** ``cloglog(h) = log(−log(1 − h)) = log μ = a + b·log B``, fitted by
maximum likelihood on the same contributions (the binomial GLM with a complementary log-log link on
the person-period data, with the sum over the range for interval-censored onsets). The cloglog link
makes ``b`` a continuous-time exponent: if failures arrive at a constant rate λ(B) per response, the
integrated hazard of one rollout is ``μ = λ(B)·B`` exactly whatever the rollout's length, so
``cloglog(h) = log λ(B) + log B``. With ``R_F`` exponential, its median and mean scale as ``1/λ(B)``; a
power law ``R_F ∝ B^γ`` then gives **b = 1 − γ**, i.e. ``γ = 1 − b`` (``gamma_constant_hazard`` in
``hazard_fit.csv``). This reading is the project's: it holds for a constant hazard in time; the
log-normal γ of :mod:`analysis.fits.fit` also allows a hazard that changes along the run, so the two agree
only when the failure rate is roughly constant over a run. ``b = 1`` (γ = 0) is "the same responses to
failure at every B"; ``b = 0`` (γ = 1) "the same number of rollouts to failure".
The slope's interval is the profile likelihood (χ²₁) and, beside it, a percentile bootstrap over runs
within each size (robust to a hazard that differs between seeds, which the profile assumes away).

**Unstable at the first updates.** A run whose failure onset is within its first
``FIRST_UPDATES`` = 2 rollouts (``failure ≤ 2·B`` responses) is reported as its own outcome per
condition and size beside η(B) (the ``lr`` column), with a Clopper–Pearson interval over runs (each run
is one Bernoulli trial). ``first_update_possible`` counts the runs whose onset interval *reaches* into
the first two rollouts (``k_lo ≤ 2``), an upper bound on that outcome when onsets are interval-censored.

**γ apart from that outcome.** ``exponents.csv`` keeps γ fitted on all runs, unchanged. The
``after_first_updates`` rows of ``hazard_fit.csv`` refit both the cloglog slope and γ on the runs that
survived the first two rollouts, **left-truncated** at 2·B: each contribution is conditioned on
``R_F > 2B`` (divided by ``S(2B)``; interval lower ends raised to 2B), so keeping only the survivors
does not select the slow runs at the sizes where many fail early. γ there is the censored log-normal
model of :mod:`analysis.fits.fit` with that truncation, its interval the profile likelihood (F(1, N − 2) as
in :func:`analysis.fits.profile_likelihood.profile_interval`).

Everything is on the ``responses`` clock; with another ``--clock`` (or ``--failure-time detection``,
whose exact times are used as given) the tables say so in their note.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.optimize import brentq, minimize
from scipy.special import log_ndtr, stdtrit
from scipy.stats import beta as beta_dist

from analysis.fits.censored_normal import log_ndtr_diff
from analysis.fits.fit import stratified_weights
from analysis.fits.seed_blocks import resample_weights

FIRST_UPDATES = 2  # rollouts: "unstable at the first updates" fails within these
_CHI2_1 = 3.841458820694124  # chi^2_1 0.95 quantile
_ETA_MIN, _ETA_MAX = -40.0, 12.0  # log mu bounds: h from ~4e-18 to 1 (no overflow in exp)
_SLOPE_MAX = 25.0  # |b| beyond this is taken as unbounded (the likelihood runs off to infinity)
_A_MAX = 60.0  # the box of the intercept (log B centred) in the Newton iterations

HAZARD_COLUMNS = [
    "condition",
    "B",
    "eta",
    "runs",
    "rollouts_at_risk",
    "failures",
    "hazard",
    "ci_low",
    "ci_high",
    "first_update_failures",
    "first_update_frac",
    "first_update_low",
    "first_update_high",
    "first_update_possible",
    "runs_after_first_updates",
    "hazard_after_first_updates",
    "after_ci_low",
    "after_ci_high",
    "detectors",
    "note",
]
FIT_COLUMNS = [
    "condition",
    "sample",
    "n_runs",
    "n_failures",
    "n_sizes",
    "slope",
    "slope_low",
    "slope_high",
    "boot_low",
    "boot_high",
    "n_boot",
    "resampling",
    "intercept",
    "gamma_constant_hazard",
    "gamma_constant_hazard_low",
    "gamma_constant_hazard_high",
    "gamma",
    "gamma_low",
    "gamma_high",
    "gamma_method",
    "note",
]


# ---- per-run rollout times ------------------------------------------------------------------------


def rollout_times(runs: pd.DataFrame) -> pd.DataFrame:
    """Each run's failure clock in rollouts: ``failed``, ``k_hi`` (the onset's rollout, or the rollouts
    completed by a run that did not fail), ``k_lo`` (the earliest rollout the failure can have begun
    in; = ``k_hi`` for exact onsets), ``first_update`` (onset ≤ 2·B) and ``first_update_possible``
    (``k_lo ≤ 2``). Needs ``B``, ``failure``, ``failure:lower``, ``failure:censored``."""
    B = runs["B"].to_numpy(float)
    R = runs["failure"].to_numpy(float)
    failed = ~runs["failure:censored"].astype(bool).to_numpy()
    lower = runs["failure:lower"].to_numpy(float) if "failure:lower" in runs else np.full(len(runs), np.nan)
    eps = 1e-9
    with np.errstate(invalid="ignore", divide="ignore"):
        onset_k = np.maximum(np.ceil(R / B - eps), 1.0)
        completed = np.floor(R / B + eps)
        # whole-rollout brackets (analysis.data.clock_tables, the default) give the first rollout the failure can
        # have been in; continuous ones the responses after which it began
        inclusive = (
            runs["failure:lower_inclusive"].fillna(False).astype(bool).to_numpy()
            if "failure:lower_inclusive" in runs
            else np.zeros(len(runs), bool)
        )
        first = np.where(
            inclusive,
            np.ceil(np.maximum(lower, 0.0) / B - eps),
            np.floor(np.maximum(lower, 0.0) / B + eps) + 1,
        )
        lo_k = np.where(np.isfinite(lower) & (lower < R), first, onset_k)
    k_hi = np.where(failed, onset_k, completed)
    k_lo = np.where(failed, np.clip(lo_k, 1.0, onset_k), completed)
    out = pd.DataFrame(
        {
            "failed": failed,
            "k_lo": k_lo,
            "k_hi": k_hi,
            "first_update": failed & (onset_k <= FIRST_UPDATES),
            "first_update_possible": failed & (k_lo <= FIRST_UPDATES),
        },
        index=runs.index,
    )
    return out


def truncate(times: pd.DataFrame, t0: int = FIRST_UPDATES) -> pd.DataFrame:
    """The runs that survived ``t0`` rollouts (onset rollout > t0, or > t0 rollouts completed), their
    times shifted to start after rollout ``t0``: conditioning a constant-hazard run on ``T > t0`` is
    restarting its clock there, and an interval reaching below ``t0 + 1`` is cut there."""
    keep = times["k_hi"] > t0
    t = times[keep].copy()
    t["k_lo"] = np.where(t["failed"], np.maximum(t["k_lo"], t0 + 1) - t0, t["k_hi"] - t0)
    t["k_hi"] = t["k_hi"] - t0
    return t


# ---- the likelihood in eta = log mu = cloglog(h) ---------------------------------------------------


def _terms(eta, c, w, failed):
    """Per-run log-likelihood and its first two derivatives in ``eta`` (arrays broadcast together).

    ``c``: rollouts survived for sure (k_lo − 1 for a failure, n for a censored run); ``w``: the
    width of the failure's range in rollouts (k − k_lo + 1). ``log(1 − e^{−wμ})`` is concave in eta
    (its derivative ``t/(e^t − 1)``, t = wμ, falls with t), so the whole likelihood is concave."""
    eta = np.clip(eta, _ETA_MIN, _ETA_MAX)
    mu = np.exp(eta)
    t = np.where(failed, w * mu, 1.0)
    small = t < 1e-6
    em = np.exp(-t)
    one_minus = -np.expm1(-t)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_event = np.log(one_minus)
        g = np.where(small, 1.0 - t / 2.0, t * em / one_minus)  # t / (e^t - 1)
        dg = np.where(small, -0.5 + t / 6.0, (em * (1.0 - t) - em * em) / one_minus**2)  # g'(t)
    ll = -c * mu + np.where(failed, log_event, 0.0)
    d1 = -c * mu + np.where(failed, g, 0.0)
    d2 = -c * mu + np.where(failed, t * dg, 0.0)
    return ll, d1, d2


def _newton(x, c, w, failed, W, fixed_slope=None, max_iter=200):
    """Maximise ``sum_i W[r, i] * l_i(a + b x_i)`` for every replicate r (rows of ``W``) by Newton's
    method with step halving (the likelihood is concave). ``fixed_slope`` (``[R]``): profile the
    intercept at those slopes. Returns ``(a [R], b [R], loglik [R])``; a slope that runs past
    ±``_SLOPE_MAX`` is returned as ±inf."""
    R = W.shape[0]
    a = np.zeros(R)
    b = np.zeros(R) if fixed_slope is None else np.asarray(fixed_slope, float).copy()
    rate = (W @ failed.astype(float)) / np.maximum(W @ np.maximum(c + w * failed, 1.0), 1e-12)
    a[:] = np.log(np.clip(rate, 1e-6, 1.0))

    def total(a_, b_):
        ll, d1, d2 = _terms(a_[:, None] + b_[:, None] * x[None, :], c, w, failed)
        return (W * ll).sum(1), W * d1, W * d2

    ll, d1, d2 = total(a, b)
    for _ in range(max_iter):
        ga, gb = d1.sum(1), (d1 * x).sum(1)
        haa, hab, hbb = d2.sum(1), (d2 * x).sum(1), (d2 * x * x).sum(1)
        if fixed_slope is None:
            det = haa * hbb - hab * hab
            ok = det > 1e-14 * np.maximum(1.0, haa * hbb)
            da = np.where(ok, -(hbb * ga - hab * gb) / np.where(ok, det, 1.0), -ga / np.minimum(haa, -1e-12))
            db = np.where(ok, -(haa * gb - hab * ga) / np.where(ok, det, 1.0), 0.0)
        else:
            da, db = -ga / np.minimum(haa, -1e-12), np.zeros(R)
        scale = np.minimum(1.0, 5.0 / np.maximum(np.abs(da) + np.abs(db), 1e-300))  # cap the step
        step = np.ones(R) * scale
        for _half in range(30):
            # a box keeps a replicate whose likelihood runs off to infinity (a hazard of 0 or 1 at all
            # sizes but one) finite; its slope ends beyond _SLOPE_MAX and is reported as infinite
            na = np.clip(a + step * da, -_A_MAX, _A_MAX)
            nb = np.clip(b + step * db, -_SLOPE_MAX - 1, _SLOPE_MAX + 1)
            new_ll, nd1, nd2 = total(na, nb)
            better = new_ll >= ll - 1e-12
            if better.all():
                break
            step = np.where(better, step, step / 2)
        moved = np.where(better, np.abs(na - a) + np.abs(nb - b), 0.0)
        a, b = np.where(better, na, a), np.where(better, nb, b)
        ll = np.where(better, new_ll, ll)
        d1 = np.where(better[:, None], nd1, d1)
        d2 = np.where(better[:, None], nd2, d2)
        if (moved < 1e-10).all():
            break
    b = np.where(np.abs(b) > _SLOPE_MAX, np.copysign(np.inf, b), b)
    return a, b, ll


def _arrays(times: pd.DataFrame):
    failed = times["failed"].to_numpy(bool)
    k_lo, k_hi = times["k_lo"].to_numpy(float), times["k_hi"].to_numpy(float)
    c = np.where(failed, k_lo - 1.0, k_hi)
    w = np.where(failed, k_hi - k_lo + 1.0, 0.0)
    return c, w, failed


def loglik(times: pd.DataFrame, sizes, a: float, b: float) -> float:
    """The log-likelihood of the cloglog model ``log μ = a + b log B`` (module docstring)."""
    c, w, failed = _arrays(times)
    ll, _, _ = _terms(a + b * np.log(np.asarray(sizes, float)), c, w, failed)
    return float(ll.sum())


# ---- per size: the hazard and its likelihood-ratio interval ----------------------------------------


def _h(eta: float) -> float:
    return float(-np.expm1(-np.exp(eta))) if np.isfinite(eta) else (0.0 if eta < 0 else 1.0)


def size_hazard(times: pd.DataFrame) -> tuple[float, float, float]:
    """``(h, ci_low, ci_high)``: the constant per-rollout hazard of one size's runs (MLE) and its 95 %
    likelihood-ratio interval; (NaN, NaN, NaN) without a rollout at risk."""
    c, w, failed = _arrays(times)
    if not len(c) or (c + w).sum() <= 0:
        return math.nan, math.nan, math.nan

    def ll(eta: float) -> float:
        return float(_terms(np.asarray(eta), c, w, failed)[0].sum())

    if not failed.any():
        n = c.sum()  # l = -n mu: the MLE is h = 0 and the bound is mu = chi2/2/n
        return 0.0, 0.0, float(-np.expm1(-_CHI2_1 / 2 / n))
    x = np.zeros_like(c)
    a, _, top = _newton(x, c, w, failed, np.ones((1, c.size)), fixed_slope=np.zeros(1))
    eta_hat, top = float(a[0]), float(top[0])
    if eta_hat >= _ETA_MAX - 1e-6:  # every run failed in its first possible rollout: h = 1
        eta_hat, top = math.inf, ll(_ETA_MAX)
    cut = top - _CHI2_1 / 2
    lo_eta = (
        _ETA_MIN if ll(_ETA_MIN) >= cut else brentq(lambda e: ll(e) - cut, _ETA_MIN, min(eta_hat, _ETA_MAX))
    )
    if not np.isfinite(eta_hat) or ll(_ETA_MAX) >= cut:
        hi = 1.0
    else:
        hi = _h(brentq(lambda e: ll(e) - cut, eta_hat, _ETA_MAX))
    return _h(eta_hat), (0.0 if lo_eta <= _ETA_MIN else _h(lo_eta)), hi


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval of k successes in n trials."""
    if n <= 0:
        return math.nan, math.nan
    alpha = 1 - level
    low = 0.0 if k == 0 else float(beta_dist.ppf(alpha / 2, k, n - k + 1))
    high = 1.0 if k == n else float(beta_dist.ppf(1 - alpha / 2, k + 1, n - k))
    return low, high


# ---- across sizes: the cloglog slope ---------------------------------------------------------------


def cloglog_fit(times: pd.DataFrame, sizes, n_boot: int = 0, seed: int = 0, weights=None) -> dict:
    """The cloglog model ``log μ = a + b log B`` over one condition's runs: ``slope`` b, ``intercept``
    a (at log B = 0), the profile-likelihood interval ``slope_low``/``slope_high`` (χ²₁, 95 %; a side
    that does not close within ±25 is infinite), and with ``n_boot`` the percentile interval over
    resamples of runs within each size (``boot_low``/``boot_high``). ``note`` says why the slope is
    not identified (fewer than two sizes, no failure). ``weights`` (``[n_boot, n_runs]`` resampling
    counts, e.g. seed blocks from :func:`analysis.fits.seed_blocks.resample_weights`) replace the within-size
    resamples."""
    B = np.asarray(sizes, float)
    out = dict(slope=math.nan, slope_low=math.nan, slope_high=math.nan, boot_low=math.nan)
    out.update(boot_high=math.nan, n_boot=0, intercept=math.nan, note="")
    c, w, failed = _arrays(times)
    if np.unique(B).size < 2:
        out["note"] = "fewer than two sizes"
        return out
    if not failed.any():
        out["note"] = "no failure"
        return out
    x = np.log(B)
    xm = float(x.mean())
    xc = x - xm
    a, b, ll = _newton(xc, c, w, failed, np.ones((1, c.size)))
    slope, top = float(b[0]), float(ll[0])
    out["slope"] = slope
    out["intercept"] = float(a[0]) - slope * xm if np.isfinite(slope) else math.nan
    if not np.isfinite(slope):
        out["note"] = "slope not identified: the hazard is 0 or 1 at all sizes but one"
        out["slope_low"], out["slope_high"] = (-math.inf, math.inf)
    else:
        out["slope_low"], out["slope_high"] = _profile_interval(xc, c, w, failed, slope, top)
    if weights is not None or n_boot > 0:
        W = weights if weights is not None else stratified_weights(B, n_boot, np.random.default_rng(seed))
        _, bb, _ = _newton(xc, c, w, failed, W)
        has = (W @ failed.astype(float)) > 0
        bb = np.where(has, bb, np.nan)  # a resample without a failure has no slope
        bb = np.sort(bb[~np.isnan(bb)])
        if bb.size:
            out["boot_low"] = float(bb[int(np.floor(0.025 * (bb.size - 1)))])
            out["boot_high"] = float(bb[int(np.ceil(0.975 * (bb.size - 1)))])
        out["n_boot"] = int(bb.size)
    return out


def _profile_interval(xc, c, w, failed, slope, top) -> tuple[float, float]:
    cut = top - _CHI2_1 / 2
    ones = np.ones((1, c.size))

    def prof(s: float) -> float:
        return float(_newton(xc, c, w, failed, ones, fixed_slope=np.array([s]))[2][0]) - cut

    bounds = []
    for direction in (-1.0, 1.0):
        inner, step = slope, 0.05
        outer = slope + direction * step
        while abs(outer - slope) <= _SLOPE_MAX and prof(outer) >= 0:
            inner, step = outer, step * 2
            outer = slope + direction * step
        if abs(outer - slope) > _SLOPE_MAX:
            bounds.append(direction * math.inf)
            continue
        lo, hi = sorted((inner, outer))
        bounds.append(float(brentq(prof, lo, hi, xtol=1e-6)))
    return bounds[0], bounds[1]


# ---- γ on the runs that survived the first updates: left-truncated log-normal AFT ------------------


def _truncated_negll(params, x, lo, hi, trunc):
    """Negative log-likelihood of ``log R = l + g x + s ε`` for runs known to lie in (lo, hi] (log
    space; ``hi = inf``: right-censored at ``lo``), each conditioned on ``log R > trunc``."""
    log_d, gam, log_s = params
    s = math.exp(log_s)
    m = log_d + gam * x
    z_lo, z_hi, z_t = (lo - m) / s, (hi - m) / s, (trunc - m) / s
    exact = lo == hi
    with np.errstate(invalid="ignore", divide="ignore"):
        interval = np.where(np.isinf(hi), log_ndtr(-z_lo), log_ndtr_diff(z_lo, z_hi))
    point = -0.5 * z_hi**2 - log_s - 0.5 * math.log(2 * math.pi)  # log density of log R
    ll = np.where(exact, point, interval) - log_ndtr(-z_t)
    return -float(np.sum(ll))


def truncated_gamma(runs: pd.DataFrame, t0: int = FIRST_UPDATES) -> dict:
    """γ of ``R_F = d·B^γ`` (log-normal, censored as in :mod:`analysis.fits.fit`) on the runs that survived
    ``t0`` rollouts, each conditioned on ``R_F > t0·B`` (left truncation); interval from the profile
    likelihood with the F(1, N − 2) reference of
    :func:`analysis.fits.profile_likelihood.profile_interval`."""
    out = dict(gamma=math.nan, gamma_low=math.nan, gamma_high=math.nan, gamma_method="", n_runs=0)
    times = rollout_times(runs)
    keep = (times["k_hi"] > t0).to_numpy()
    r = runs[keep]
    out["n_runs"] = int(keep.sum())
    B = r["B"].to_numpy(float)
    failed = ~r["failure:censored"].astype(bool).to_numpy()
    if np.unique(B[failed]).size < 2:
        out["gamma_method"] = "not identified: failures at fewer than two sizes"
        return out
    R = r["failure"].to_numpy(float)
    L = r["failure:lower"].to_numpy(float) if "failure:lower" in r else np.full(len(r), np.nan)
    trunc = np.log(t0 * B)
    with np.errstate(divide="ignore", invalid="ignore"):
        hi = np.where(failed, np.log(R), np.inf)
        lo_raw = np.where(np.isfinite(L) & (L < R), np.log(np.maximum(L, 1e-300)), np.log(R))
        lo = np.where(failed, np.maximum(lo_raw, np.where(lo_raw < np.log(R), trunc, -np.inf)), np.log(R))
    x = np.log(B)
    xm = float(x.mean())
    xc = x - xm
    y0 = np.where(failed, hi, lo)
    slope0, icpt0 = np.polyfit(xc, y0, 1) if np.unique(xc).size > 1 else (0.0, float(y0.mean()))
    start = np.array([icpt0, slope0, math.log(max(np.std(y0), 0.3))])
    best = minimize(_truncated_negll, start, args=(xc, lo, hi, trunc), method="BFGS")
    gam, top = float(best.x[1]), -float(best.fun)
    out["gamma"] = gam
    df = len(r) - 2
    if df < 1:
        out["gamma_low"], out["gamma_high"] = -math.inf, math.inf
        out["gamma_method"] = "profile (too few runs: unbounded)"
        return out
    crit = float(stdtrit(df, 0.975)) ** 2
    cut = top - crit / 2

    def prof(g: float) -> float:
        f = lambda p: _truncated_negll((p[0], g, p[1]), xc, lo, hi, trunc)  # noqa: E731
        res = minimize(f, [best.x[0], best.x[2]], method="BFGS")
        value = -float(res.fun) - cut
        return value if math.isfinite(value) else -1.0  # a failed fit counts as outside

    bounds_out = []
    for direction in (-1.0, 1.0):
        inner, step = gam, 0.05
        outer = gam + direction * step
        while abs(outer - gam) <= 32 and prof(outer) >= 0:
            inner, step = outer, step * 2
            outer = gam + direction * step
        if abs(outer - gam) > 32:
            bounds_out.append(direction * math.inf)
            continue
        a_, b_ = sorted((inner, outer))
        bounds_out.append(float(brentq(prof, a_, b_, xtol=1e-4)))
    out["gamma_low"], out["gamma_high"] = bounds_out
    out["gamma_method"] = "profile, left-truncated at 2B"
    return out


# ---- the tables ------------------------------------------------------------------------------------


def _detectors(runs: pd.DataFrame, failed: np.ndarray) -> str:
    counts = runs.loc[failed, "failure:detector"].fillna("unknown").astype(str).value_counts()
    return " ".join(f"{k}:{v}" for k, v in sorted(counts.items()))


def _clock_note(runs: pd.DataFrame) -> str:
    unit = str(runs["clock_unit"].iloc[0]) if "clock_unit" in runs and len(runs) else "responses"
    return (
        "" if unit == "responses" else f"the failure clock is on '{unit}': rollouts need the responses clock"
    )


def hazard_tables(
    tables, exponents: pd.DataFrame | None = None, n_boot: int = 0, seed: int = 0, resample: str = "runs"
) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """``(hazard, hazard_fit, notes)`` for every condition of ``tables`` (runs in the fits only).

    ``hazard``: one row per condition and size (columns ``HAZARD_COLUMNS`` plus the varying condition
    keys after ``condition``); ``hazard_fit``: two rows per condition, ``sample`` = ``all`` (γ copied
    from the failure row of ``exponents``, unchanged) and ``after_first_updates`` (left-truncated at
    two rollouts). The slope's bootstrap uses :func:`analysis.fits.seed_blocks.resample_weights` with
    ``resample`` (``seeds``: seed ids as blocks where every seed has runs at every size, else runs
    within each size; ``resampling`` says which). A sweep without failures gives empty tables and a
    note; never raises on a valid runs table."""
    runs = tables.runs
    keys = [k for k in tables.varying_keys if k in runs]
    notes: list[str] = []
    empty = (
        pd.DataFrame(columns=["condition", *keys, *HAZARD_COLUMNS[1:]]),
        pd.DataFrame(columns=["condition", *keys, *FIT_COLUMNS[1:]]),
    )
    if runs.empty or "failure:censored" not in runs:
        return *empty, ["no runs with a failure clock: the hazard tables are empty"]
    clock = _clock_note(runs)
    if clock:
        return *empty, [f"hazard tables empty: {clock}"]
    fitted = runs[runs["in_fit"].astype(bool)] if "in_fit" in runs else runs
    timed = np.isfinite(fitted["failure"].to_numpy(float)) & (fitted["B"].to_numpy(float) > 0)
    if not timed.all():
        notes.append(f"{int((~timed).sum())} run(s) without a failure clock or B left out")
        fitted = fitted[timed]
    if not (~fitted["failure:censored"].astype(bool)).any():
        return *empty, [*notes, "no run failed: the hazard tables (hazard.csv, hazard_fit.csv) are empty"]
    gam = {}
    if exponents is not None and len(exponents):
        for r in exponents[exponents["clock"] == "failure"].itertuples():
            gam[r.condition] = (r.exponent, r.ci_low, r.ci_high, getattr(r, "ci_method", ""))
    rows, fit_rows = [], []
    for cond, group in fitted.groupby("condition", sort=True):
        key_values = {k: group[k].iloc[0] for k in keys}
        times = rollout_times(group)
        after_all = truncate(times)
        for size, part in group.groupby("B", sort=True):
            t = times.loc[part.index]
            ta = after_all.loc[after_all.index.intersection(part.index)]
            failed = t["failed"].to_numpy()
            h, lo, hi = size_hazard(t)
            ha, alo, ahi = size_hazard(ta) if len(ta) else (math.nan,) * 3
            k1 = int(t["first_update"].sum())
            flo, fhi = clopper_pearson(k1, len(t))
            eta = pd.to_numeric(part["lr"], errors="coerce").median() if "lr" in part else math.nan
            rows.append(
                {
                    "condition": cond,
                    **key_values,
                    "B": float(size),
                    "eta": float(eta),
                    "runs": len(t),
                    "rollouts_at_risk": int(t["k_hi"].sum()),
                    "failures": int(failed.sum()),
                    "hazard": h,
                    "ci_low": lo,
                    "ci_high": hi,
                    "first_update_failures": k1,
                    "first_update_frac": k1 / len(t),
                    "first_update_low": flo,
                    "first_update_high": fhi,
                    "first_update_possible": int(t["first_update_possible"].sum()),
                    "runs_after_first_updates": len(ta),
                    "hazard_after_first_updates": ha,
                    "after_ci_low": alo,
                    "after_ci_high": ahi,
                    "detectors": _detectors(part, failed),
                    "note": "interval-censored onsets" if (t["k_lo"] < t["k_hi"])[t["failed"]].any() else "",
                }
            )
        for sample, t, sub in (
            ("all", times, group),
            ("after_first_updates", after_all, group.loc[after_all.index]),
        ):
            W, used = None, "none"
            if n_boot > 0 and len(sub):
                mode = resample if "seed" in sub else "runs"
                W, used, _, _ = resample_weights(sub, n_boot, seed, mode, f"{cond}:{sample}")
            fit = cloglog_fit(t, sub["B"], weights=W)
            if sample == "all":
                g = gam.get(cond, (math.nan, math.nan, math.nan, ""))
            else:
                tg = truncated_gamma(group)
                g = (tg["gamma"], tg["gamma_low"], tg["gamma_high"], tg["gamma_method"])
            fit_rows.append(
                {
                    "condition": cond,
                    **key_values,
                    "sample": sample,
                    "n_runs": len(t),
                    "n_failures": int(t["failed"].sum()),
                    "n_sizes": int(sub["B"].nunique()),
                    **{
                        k: fit[k]
                        for k in ("slope", "slope_low", "slope_high", "boot_low", "boot_high", "n_boot")
                    },
                    "resampling": used,
                    "intercept": fit["intercept"],
                    "gamma_constant_hazard": 1 - fit["slope"],
                    "gamma_constant_hazard_low": 1 - fit["slope_high"],
                    "gamma_constant_hazard_high": 1 - fit["slope_low"],
                    "gamma": g[0],
                    "gamma_low": g[1],
                    "gamma_high": g[2],
                    "gamma_method": g[3] if sample != "all" else f"exponents.csv ({g[3]}), all runs",
                    "note": fit["note"],
                }
            )
    hazard = pd.DataFrame(rows, columns=["condition", *keys, *HAZARD_COLUMNS[1:]])
    hazard_fit = pd.DataFrame(fit_rows, columns=["condition", *keys, *FIT_COLUMNS[1:]])
    return hazard, hazard_fit, notes
