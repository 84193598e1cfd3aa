"""The random parts of a synthetic run beyond its time scale: the joint law of the noises of the time to
target and the time to failure (:func:`dependent_normals`: bivariate normal, Clayton and Gumbel copulas,
shared gamma frailty) and the per-rollout gradient-noise instruments (:func:`noise_row`)."""

from __future__ import annotations

import math

import numpy as np

from analysis.synthetic.spec import SyntheticSpec

DEPENDENCE = ("normal", "clayton", "gumbel", "frailty")


def check_dependence(spec: SyntheticSpec) -> None:
    if spec.dependence not in DEPENDENCE:
        raise ValueError(f"dependence={spec.dependence!r}: expected one of {', '.join(DEPENDENCE)}")
    if spec.dependence in ("clayton", "gumbel") and not -1 < spec.dependence_param < 1:
        raise ValueError(f"dependence_param={spec.dependence_param} (Kendall's tau) must lie in (-1, 1)")
    if spec.dependence == "frailty" and not spec.dependence_param > 0:
        raise ValueError(f"dependence_param={spec.dependence_param} (frailty variance) must be > 0")
    if spec.dependence == "normal" and not -1 <= spec.rho <= 1:
        raise ValueError(f"rho={spec.rho} must lie in [-1, 1]")


def dependent_normals(spec: SyntheticSpec, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` draws of the noises ``(eps, eps')`` of the time to target and the time to failure under
    ``spec.dependence`` (module docstring). Copulas are sampled by the Marshall–Olkin frailty construction
    (Marshall & Olkin 1988): ``U_i = psi(E_i / V)`` with ``E_i ~ Exp(1)`` and ``V`` the variable whose
    Laplace transform is the generator ``psi``: Clayton ``psi(t) = (1 + t)**(-1 / theta)``,
    ``V ~ Gamma(1 / theta)``, ``theta = 2 tau / (1 - tau)``; Gumbel ``psi(t) = exp(-t**(1 / theta))``,
    ``V`` positive stable of index ``1 / theta`` (Kanter's 1975 representation), ``theta = 1 / (1 - tau)``;
    then ``eps = Phi^-1(U_1)``, ``eps' = Phi^-1(U_2)``. The normal case is the bivariate normal with
    correlation ``spec.rho``."""
    from scipy.special import digamma, ndtri

    check_dependence(spec)
    kind, tau = spec.dependence, spec.dependence_param
    if kind == "normal":
        eps = rng.standard_normal(n)
        return eps, spec.rho * eps + math.sqrt(1.0 - spec.rho**2) * rng.standard_normal(n)
    if kind == "frailty":
        shape = 1.0 / tau
        log_z = np.log(rng.gamma(shape, tau, n)) - (digamma(shape) + math.log(tau))
        eps, eps_f = rng.standard_normal(n), rng.standard_normal(n)
        return eps + log_z / spec.sigma, eps_f + log_z / spec.failure_sigma
    e = rng.exponential(size=(2, n))
    a = abs(tau)
    if a == 0:
        u = np.exp(-e)
    elif kind == "clayton":
        theta = 2 * a / (1 - a)
        v = rng.gamma(1 / theta, 1.0, n)
        u = (1 + e / v) ** (-1 / theta)
    else:
        alpha = 1 - a  # 1 / theta
        ang, w = rng.uniform(0, math.pi, n), rng.exponential(size=n)
        v = (np.sin(alpha * ang) / np.sin(ang) ** (1 / alpha)) * (np.sin((1 - alpha) * ang) / w) ** (
            (1 - alpha) / alpha
        )
        u = np.exp(-((e / v) ** alpha))
    u = np.clip(u, 1e-300, 1 - 1e-16)
    eps, eps_f = ndtri(u[0]), ndtri(u[1])
    return eps, (-eps_f if tau < 0 else eps_f)


def noise_row(
    spec: SyntheticSpec, size: int, k: int, rng: np.random.Generator, run_seed: int = 0
) -> dict[str, float]:
    """Per-rollout noise instruments as the K-minibatch estimator gives them (rlvr_scaling/noise.py):
    ``tr Sigma`` estimated from K minibatch gradients (chi-square with K - 1 degrees of freedom around
    the truth), ``|G|^2`` unbiased with the estimator's sampling noise, NaN when K = 1."""
    K = spec.steps_per_rollout
    if K < 2:
        return {
            name: math.nan for name in ("noise/grad_norm_sq", "noise/trace_cov", "noise/snr", "noise/b_noise")
        }
    grad_sq = 1e-3 * math.exp(-k * size / (4.0 * spec.budget))  # the gradient shrinks as training goes
    trace = spec.b_noise * grad_sq
    b = size / K
    trace_hat = trace * rng.chisquare(K - 1) / (K - 1)
    grad_hat = grad_sq + math.sqrt(2.0 / K) * (trace / b) * rng.standard_normal()
    row = {
        "noise/grad_norm_sq": grad_hat,
        "noise/trace_cov": trace_hat,
        "noise/snr": grad_hat / (trace_hat / b) if trace_hat > 0 else math.inf,
        "noise/b_noise": trace_hat / grad_hat if grad_hat > 0 else math.inf,
    }
    if spec.adam_b_noise is not None:  # Adam's, over all prompts (own stream: the others' draws unchanged)
        own = np.random.default_rng([spec.seed, size, run_seed, k, 31])
        signal = 0.05 * math.exp(-k * size / (4.0 * spec.budget))
        trace = spec.adam_b_noise * signal
        signal_hat = signal + math.sqrt(2.0) * (trace / size) * own.standard_normal()
        trace_hat = trace * own.chisquare(8) / 8
        row.update(
            {
                "noise/adam_grad_norm_sq": signal_hat,
                "noise/adam_trace_cov": trace_hat,
                "noise/adam_b_noise": trace_hat / signal_hat if signal_hat > 0 else math.inf,
            }
        )
    return row
