"""Gradient-noise instruments, logged for every run under ``noise/``.

From the K minibatch gradients g_1..g_K of one rollout (each a mean over b = B/K responses, taken
before clipping), with their mean g_B (a gradient over the whole rollout of B responses):

    E|g_b|^2 = |G|^2 + tr(Sigma) / b,        E|g_B|^2 = |G|^2 + tr(Sigma) / B

so the unbiased two-batch-size estimators of McCandlish et al. (2018, "An empirical model of
large-batch training", appendix A) are

    |G|^2     ~ (B |g_B|^2 - b mean_k |g_k|^2) / (B - b)
    tr(Sigma) ~ (mean_k |g_k|^2 - |g_B|^2) / (1/b - 1/B)

Logged: ``noise/grad_norm_sq`` (|G|^2), ``noise/trace_cov`` (tr Sigma, per response), ``noise/snr``
(SNR of a minibatch gradient, |G|^2 / (tr Sigma / b)), ``noise/b_noise`` (B_noise = tr Sigma / |G|^2).
Deviation from the i.i.d. setting: in multi-step GRPO the K gradients are taken at successive
parameters (after 0..K-1 updates), so the estimates describe the rollout's trajectory rather than one
point; with small per-rollout updates the difference is second order. Only the first epoch's
gradients are used (later epochs reuse the same responses). The per-rollout estimates are noisy; the
analysis should smooth them. With K = 1 nothing can be estimated and the values are NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .distributed import local_tensor


class NoiseEstimator:
    def __init__(
        self,
        model: torch.nn.Module,
        steps_per_epoch: int,
        reduce_sum: Callable[[float], float] | None = None,
    ):
        """``reduce_sum``: for sharded parameters (FSDP), sums a per-rank partial sum of squares over
        the ranks (each rank sees only its shard of every gradient)."""
        self.steps_per_epoch = steps_per_epoch
        self.reduce_sum = reduce_sum or (lambda x: x)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.sum_grad: list[torch.Tensor] | None = None
        self.sum_sq = 0.0
        self.count = 0
        self.rows = 0
        self.last: dict[str, float] = {}

    def start_rollout(self) -> None:
        self.sum_grad = None
        self.sum_sq, self.count, self.rows = 0.0, 0, 0

    @torch.no_grad()
    def observe(self, rows: int, norm_sq: float | None = None) -> None:
        """Record the current .grad of every parameter as one minibatch gradient of ``rows`` responses
        (``norm_sq``: its global squared norm when the caller has it already, e.g. from clipping)."""
        if self.count >= self.steps_per_epoch:
            return
        grads = [
            local_tensor(p.grad.detach()).float()
            if p.grad is not None
            else torch.zeros_like(local_tensor(p.detach()), dtype=torch.float32)
            for p in self.params
        ]
        if self.sum_grad is None:
            self.sum_grad = [g.clone() for g in grads]
        else:
            torch._foreach_add_(self.sum_grad, grads)
        if norm_sq is None:
            norm_sq = self.reduce_sum(float(torch.stack(torch._foreach_norm(grads)).pow(2).sum()))
        self.sum_sq += norm_sq
        self.count += 1
        self.rows += rows

    @torch.no_grad()
    def finish_rollout(self) -> dict[str, float]:
        k = self.count
        if k < 2 or self.sum_grad is None:
            self.last = {
                "grad_norm_sq": math.nan,
                "trace_cov": math.nan,
                "snr": math.nan,
                "b_noise": math.nan,
            }
            return self.last
        b = self.rows / k
        big = self.rows
        mean_small = self.sum_sq / k
        g_big_sq = self.reduce_sum(float(torch.stack(torch._foreach_norm(self.sum_grad)).pow(2).sum())) / k**2
        grad_sq = (big * g_big_sq - b * mean_small) / (big - b)
        trace = (mean_small - g_big_sq) / (1.0 / b - 1.0 / big)
        self.last = {
            "grad_norm_sq": grad_sq,
            "trace_cov": trace,
            "snr": grad_sq / (trace / b) if trace > 0 else math.inf,
            "b_noise": trace / grad_sq if grad_sq > 0 else math.inf,
        }
        return self.last

    def state_dict(self) -> dict:
        return {"last": self.last}

    def load_state_dict(self, state: dict) -> None:
        self.last = dict(state.get("last", {}))
