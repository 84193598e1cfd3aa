"""Joint bivariate log-normal model of the two clocks: Owen's-T bivariate CDF, the likelihood against
scipy's bivariate normal, and recovery of α and ρ when failure and slow learning are correlated."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from analysis.clocks import build_tables
from analysis.joint import _nll, bvn_cdf, fit_joint
from analysis.synthetic import SyntheticSpec, records


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
    return build_tables(records(spec)).runs


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
