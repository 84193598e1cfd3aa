"""A noisy quadratic trained by torch's AdamW: a problem whose critical batch is known by simulation.

Loss ``L(theta) = 1/2 sum_i h_i theta_i^2`` with per-sample gradients ``g = G + sd * xi``, ``G = H theta``,
``xi ~ N(0, I)``: diagonal noise with per-coordinate standard deviation ``sd_i = s_i + kappa_i |G_i|``
(additive, or relative to the gradient: then each coordinate's noise scale ``sd_i^2 / G_i^2 = kappa_i^2``
stays put as the run approaches the optimum, so one B_crit describes the whole run), so a minibatch of b
samples has gradient ``G + sd * xi / sqrt(b)``. Many independent runs go at once: one parameter tensor of
shape ``[seeds, d]`` per learning rate, each in its own AdamW parameter group (AdamW acts coordinate by
coordinate, so the rows are independent runs). Each run stops counting at the first step whose loss is
at or below the target; the **samples to target** at batch b are steps x b, and their curve over b
(at the best learning rate of a grid for each b) gives the critical batch directly
(``analysis.fits.bcrit_simulated.simulated_critical_batch``: McCandlish's ``samples = S_min (1 + b / B_crit)`` fitted).

Along every run, before each step, the two-half estimators of :mod:`rlvr_scaling.noise` measure the
noise scales from the step's own minibatch (split into halves A and B, the half means drawn exactly):
the Adam-aware ``tr(P Sigma) / G'PG`` with ``P = diag(1 / (sqrt(v_hat) + eps))`` from the optimizer's state
(:func:`rlvr_scaling.noise.adam_preconditioner`) and the SGD trace ``tr Sigma / |G|^2``, summed over the
steps before the run's crossing (``docs/theory.md``, "B_noise for Adam"). ``benchmarks/calibration/adam_noise_quadratic.py``
runs it at several noise levels; ``tests/core/test_adam_noise.py`` a fast setting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .noise import adam_preconditioner, two_half_estimates


@dataclass(frozen=True)
class NoisyQuadratic:
    h: tuple[float, ...]  # curvatures
    s: tuple[float, ...]  # per-sample noise standard deviation of each coordinate (additive)
    theta0: tuple[float, ...]  # start
    kappa: tuple[float, ...] = ()  # relative noise: standard deviation kappa_i |G_i| on top of s_i

    @classmethod
    def groups(cls, groups, noise: float = 1.0, seed: int = 0) -> NoisyQuadratic:
        """Coordinates in groups ``(count, h, theta_scale, b_group)``: starts ``theta_scale * z`` (``z``
        standard normal, drawn once from ``seed``: unequal distances, so no sign step lands every
        coordinate at the optimum) and relative noise ``kappa = noise * sqrt(b_group)``: each coordinate's
        own noise scale ``s_i^2 / G_i^2`` is ``b_group * noise^2`` wherever the run is (it does not drift
        as the gradient shrinks)."""
        rng = np.random.default_rng(seed)
        h, k, t = [], [], []
        for count, hi, scale, bi in groups:
            h += [hi] * count
            t += [float(v) for v in scale * rng.standard_normal(count)]
            k += [noise * math.sqrt(bi)] * count
        return cls(h=tuple(h), s=(0.0,) * len(h), theta0=tuple(t), kappa=tuple(k))

    def tensors(self):
        return (torch.tensor(v, dtype=torch.float64) for v in (self.h, self.s, self.theta0))

    def noise_sd(self, G: torch.Tensor) -> torch.Tensor:
        """Per-sample standard deviation of each coordinate at gradient ``G``: ``s_i + kappa_i |G_i|``."""
        s = torch.tensor(self.s, dtype=torch.float64)
        if not self.kappa:
            return s.expand_as(G)
        return s + torch.tensor(self.kappa, dtype=torch.float64) * G.abs()

    def loss0(self) -> float:
        h, _, t = self.tensors()
        return float(0.5 * (h * t * t).sum())


@dataclass
class Simulation:
    b: int
    lrs: np.ndarray  # [n_lr]
    steps: np.ndarray  # [n_lr, seeds] steps to target (inf: not reached within max_steps)
    sums: dict[str, np.ndarray]  # per run [n_lr, seeds]: sums over the measured steps before its crossing
    count: np.ndarray  # [n_lr, seeds] measured steps before the crossing

    def best(self) -> int:
        """Index of the learning rate with the fewest median steps (reached runs only)."""
        med = np.median(self.steps, axis=1)
        return int(np.argmin(np.where(np.isfinite(med), med, np.inf)))

    def min_steps(self) -> tuple[float, float]:
        """``(learning rate, median steps)`` at the optimum over the learning rate: a parabola in
        ``(log lr, log steps)`` through the best grid point and its neighbours (the grid's own best where
        it lies at an end or the neighbours did not reach)."""
        med = np.median(self.steps, axis=1)
        j = self.best()
        x, y = np.log(self.lrs), np.log(med)
        if 0 < j < med.size - 1 and np.isfinite(y[j - 1 : j + 2]).all():
            a, b, c = np.polyfit(x[j - 1 : j + 2], y[j - 1 : j + 2], 2)
            if a > 0:
                xm = float(np.clip(-b / (2 * a), x[j - 1], x[j + 1]))
                return math.exp(xm), math.exp(float(np.polyval([a, b, c], xm)))
        return float(self.lrs[j]), float(med[j])


KEYS = ("adam_trace", "adam_signal", "sgd_trace", "sgd_signal")


def simulate(
    problem: NoisyQuadratic,
    b: int,
    lrs,
    seeds: int,
    target_frac: float,
    max_steps: int,
    seed: int = 0,
    betas=(0.9, 0.999),
    eps: float = 1e-8,
    measure: int = 256,
    measure_every: int = 4,
    greedy: bool = False,
) -> Simulation:
    """Train ``seeds`` runs per learning rate of ``lrs`` at batch ``b`` with ``torch.optim.AdamW``
    (weight decay 0) until the loss is at most ``target_frac`` of its start (module docstring); every
    ``measure_every`` steps (from the second on: Adam has no state before) the noise scales are measured
    on ``measure`` fresh samples split into two halves.

    ``greedy``: the learning rates are multipliers of the step's expected-optimal rate
    ``eta* = G'PG / E[g_b' P H P g_b] = G'PG / (G'PHPG + tr(PHP Sigma) / b)`` (from the true G, H, Sigma and
    the optimizer's current P; at the first step ``P = 1 / sqrt(E g_b^2)``), set on every run before every
    step: McCandlish's assumption of a step tuned at every point, under which his form is exact for a
    fixed preconditioner (``docs/theory.md``)."""
    gen = torch.Generator().manual_seed(seed)
    h, s, t0 = problem.tensors()
    lrs = np.asarray(lrs, float)
    if greedy:  # one parameter (and group) per run: each run its own rate at every step
        params = [torch.nn.Parameter(t0.clone()[None]) for _ in lrs for _ in range(seeds)]
        rates = [float(lr) for lr in lrs for _ in range(seeds)]
    else:
        params = [torch.nn.Parameter(t0.repeat(seeds, 1).clone()) for _ in lrs]
        rates = [float(lr) for lr in lrs]
    opt = torch.optim.AdamW(
        [{"params": [p], "lr": lr} for p, lr in zip(params, rates)],
        betas=betas,
        eps=eps,
        weight_decay=0.0,
    )
    target = target_frac * problem.loss0()
    n_lr = lrs.size
    steps = np.full((n_lr, seeds), np.inf)
    sums = {k: np.zeros((n_lr, seeds)) for k in KEYS}
    count = np.zeros((n_lr, seeds))
    half = measure / 2
    for step in range(max_steps):
        with torch.no_grad():
            theta = torch.stack([p.detach() for p in params]).reshape(lrs.size, seeds, -1)  # [n_lr, seeds, d]
            loss = 0.5 * (h * theta * theta).sum(-1)
            running = torch.from_numpy(~np.isfinite(steps))
            crossed = (loss <= target) & running
            steps[crossed.numpy()] = step
            running = running & ~crossed
            if not bool(running.any()):
                break
            G = h * theta
            sd = problem.noise_sd(G)
            due = step % measure_every == 0
            P = adam_preconditioner(opt, params) if due or greedy else None
            Pt = torch.stack([p.double() for p in P]).reshape(theta.shape) if P is not None else None
            if Pt is not None and due:
                # a measurement at this point: two independent halves of `measure` samples (means drawn
                # exactly), P from the optimizer's state before this step
                ma = G + sd * torch.randn(theta.shape, generator=gen, dtype=torch.float64) / math.sqrt(half)
                mb = G + sd * torch.randn(theta.shape, generator=gen, dtype=torch.float64) / math.sqrt(half)
                live = running.numpy()
                for name, weight in (("adam", Pt), ("sgd", None)):
                    est = two_half_estimates(ma, mb, half, half, weight)
                    sums[f"{name}_trace"][live] += est["trace"].numpy()[live]
                    sums[f"{name}_signal"][live] += est["signal"].numpy()[live]
                count[live] += 1
            if greedy:
                var = G * G + sd * sd / b  # E g_b^2 per coordinate
                Pg = Pt if Pt is not None else 1.0 / (var.sqrt() + eps)
                best = (Pg * G * G).sum(-1) / (h * Pg * Pg * var).sum(-1)  # [n_lr, seeds]
                for group, rate in zip(opt.param_groups, (torch.from_numpy(lrs)[:, None] * best).reshape(-1)):
                    group["lr"] = float(rate)
            grad = G + sd * torch.randn(theta.shape, generator=gen, dtype=torch.float64) / math.sqrt(b)
            grad = grad.reshape(len(params), *params[0].shape)
            for i, p in enumerate(params):
                p.grad = grad[i].to(p.dtype).clone()
        opt.step()
    return Simulation(b=b, lrs=lrs, steps=steps, sums=sums, count=count)


def sweep(problem, batches, lrs, seeds, target_frac, max_steps, seed=0, **kwargs) -> list[Simulation]:
    """:func:`simulate` at every batch of ``batches`` (each with its own stream; ``kwargs`` passed on)."""
    return [
        simulate(problem, b, lrs, seeds, target_frac, max_steps, seed=seed + 7919 * i, **kwargs)
        for i, b in enumerate(batches)
    ]
