"""Joint bivariate log-normal model of the two clocks: Owen's-T bivariate CDF, the likelihood against
scipy's bivariate normal, and recovery of α and ρ when failure and slow learning are correlated."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from analysis.data.clock_tables import ClockOptions, build_tables
from analysis.fits.joint import _nll, bvn_cdf, fit_joint
from analysis.synthetic import SyntheticSpec, dependent_normals, records, simulate


@pytest.mark.parametrize("rho", [-0.8, -0.3, 0.0, 0.5, 0.9])
def test_bivariate_cdf_against_scipy(rho):
    rng = np.random.default_rng(0)
    h, k = rng.normal(size=20) * 1.5, rng.normal(size=20) * 1.5
    h[0], k[1] = 0.0, 0.0
    mvn = stats.multivariate_normal([0, 0], [[1, rho], [rho, 1]])
    want = np.array([mvn.cdf([a, b]) for a, b in zip(h, k)])
    np.testing.assert_allclose(bvn_cdf(h, k, rho), want, atol=1e-7)
    np.testing.assert_allclose(
        bvn_cdf(np.array([np.inf, -np.inf, 0.3]), np.array([0.2, 1.0, np.inf]), rho),
        [stats.norm.cdf(0.2), 0.0, stats.norm.cdf(0.3)],
    )


def test_likelihood_terms_against_scipy():
    """One failed run (interval target) and one never-failed run (interval target), by scipy."""
    params = np.array([8.0, 0.3, math.log(0.3), 9.5, 0.0, math.log(0.5), math.atanh(0.6)])
    x = np.log(np.array([64.0, 64.0]))
    tlo, thi = np.log([3000.0, 4000.0]), np.log([3500.0, 5000.0])
    fy, failed = np.log([9000.0, 20000.0]), np.array([True, False])
    mT, mF, sT, sF, rho = 8.0 + 0.3 * x, 9.5 + 0 * x, 0.3, 0.5, 0.6
    # failed: density of F times P(T in (lo, hi] | F)
    zf = (fy[0] - mF[0]) / sF
    cm, cs = mT[0] + rho * sT * zf, sT * math.sqrt(1 - rho**2)
    l0 = (
        stats.norm.logpdf(zf)
        - math.log(sF)
        + math.log(stats.norm.cdf((thi[0] - cm) / cs) - stats.norm.cdf((tlo[0] - cm) / cs))
    )
    # censored: P(T in (lo, hi], F > c) by the bivariate normal CDF
    mvn = stats.multivariate_normal([mT[1], mF[1]], [[sT**2, rho * sT * sF], [rho * sT * sF, sF**2]])
    below = lambda t: stats.norm.cdf((t - mT[1]) / sT) - mvn.cdf([t, fy[1]])  # noqa: E731
    l1 = math.log(below(thi[1]) - below(tlo[1]))
    assert -_nll(params, x, tlo, thi, fy, failed) == pytest.approx(l0 + l1, rel=1e-6)


def _tables(spec):
    # the generator's times are continuous: read with the continuous brackets they were drawn with
    return build_tables(records(spec), ClockOptions(discrete=False)).runs


def test_joint_fit_recovers_alpha_and_rho_under_correlation():
    spec = SyntheticSpec(
        sizes=(32, 64, 128, 256, 512),
        seeds=12,
        alpha=0.3,
        gamma=0.0,
        failure_prefactor=15000.0,
        failure_sigma=0.5,
        budget=40000,
        eval_every=707,
        targets=(0.3,),
        b_noise=None,
    )
    joint = []
    for draw in range(3):
        runs = _tables(replace(spec, rho=0.7, seed=50 + draw))
        res = fit_joint(
            runs["B"],
            runs["target:0.3"],
            runs["target:0.3:censored"],
            runs["target:0.3:lower"],
            runs["failure"],
            runs["failure:censored"],
        )
        assert res["ok"] and res["ci_low"] <= 0.3 <= res["ci_high"]
        assert res["rho"] > 0.3  # the correlation is seen
        joint.append(res["alpha"])
    assert abs(np.mean(joint) - 0.3) < 0.03
    # too little data: a message, not an exception
    runs = _tables(replace(spec, sizes=(32,), seeds=3, seed=1))
    res = fit_joint(
        runs["B"],
        runs["target:0.3"],
        runs["target:0.3:censored"],
        runs["target:0.3:lower"],
        runs["failure"],
        runs["failure:censored"],
    )
    assert not res["ok"] and res["message"]


@pytest.mark.parametrize("kind", ["clayton", "gumbel"])
@pytest.mark.parametrize("tau", [0.49, -0.49])
def test_copula_dependence_keeps_normal_margins_and_kendalls_tau(kind, tau):
    spec = SyntheticSpec(dependence=kind, dependence_param=tau)
    eps, eps_f = dependent_normals(spec, 6000, np.random.default_rng(4))
    assert stats.kstest(eps, "norm").pvalue > 0.01 and stats.kstest(eps_f, "norm").pvalue > 0.01
    assert stats.kendalltau(eps[:3000], eps_f[:3000])[0] == pytest.approx(tau, abs=0.04)
    # not the bivariate normal: Clayton joins the lower tails, Gumbel the upper ones (both ~0.39 for the
    # normal with the same tau, rho = 0.7)
    sign = 1 if tau > 0 else -1
    low = np.mean((eps < -1.645) & (sign * eps_f < -1.645)) / 0.05
    high = np.mean((eps > 1.645) & (sign * eps_f > 1.645)) / 0.05
    assert (low > 0.55 and high < 0.3) if kind == "clayton" else (high > 0.5 and low < 0.35)


def test_frailty_dependence_and_default_unchanged():
    spec = SyntheticSpec(dependence="frailty", dependence_param=0.2, sigma=0.25, failure_sigma=0.5)
    eps, eps_f = dependent_normals(spec, 20000, np.random.default_rng(5))
    log_t, log_f = 0.25 * eps, 0.5 * eps_f
    v = 0.2213  # Var log Z = trigamma(1 / 0.2)
    assert np.var(log_t) == pytest.approx(0.0625 + v, rel=0.05)
    assert np.cov(log_t, log_f)[0, 1] == pytest.approx(v, rel=0.08)
    assert stats.skew(log_t) < -0.2  # log Gamma is skewed: the margins are no longer log-normal
    # the default (bivariate normal) keeps the generator's original draws
    base = SyntheticSpec(rho=0.5, gamma=0.0, seed=3, b_noise=None)
    explicit = replace(base, dependence="normal", dependence_param=0.9)
    assert [r.truth for r in simulate(base)] == [r.truth for r in simulate(explicit)]
    for bad in (replace(base, dependence="copula"), replace(base, dependence="gumbel", dependence_param=1.0)):
        with pytest.raises(ValueError, match="dependence"):
            simulate(bad)


def test_joint_fit_reports_gamma_interval():
    spec = SyntheticSpec(
        sizes=(32, 64, 128, 256, 512),
        seeds=8,
        alpha=0.3,
        gamma=0.0,
        failure_prefactor=15000.0,
        failure_sigma=0.5,
        budget=40000,
        eval_every=707,
        targets=(0.3,),
        b_noise=None,
        seed=9,
    )
    runs = _tables(spec)
    res = fit_joint(
        runs["B"],
        runs["target:0.3"],
        runs["target:0.3:censored"],
        runs["target:0.3:lower"],
        runs["failure"],
        runs["failure:censored"],
    )
    assert res["ok"] and res["gamma_ci_low"] < res["gamma"] < res["gamma_ci_high"]
    assert res["gamma_ci_high"] - res["gamma_ci_low"] == pytest.approx(
        2 * stats.t.ppf(0.975, len(runs) - 7) * res["gamma_se"]
    )
