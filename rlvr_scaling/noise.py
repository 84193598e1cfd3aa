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

**Per-sample noise at theta_old** (:class:`PerSampleNoise`, ``noise.per_sample``): the same two
quantities from the rollout's N per-sample gradients at theta_old, before the first step
(:func:`~rlvr_scaling.per_sample.noise_from_norms`), logged as ``noise/per_sample_*``. The trainer runs
it between the log-prob phase and the K steps and hands its estimate to the optimizer explicitly
(``lr.source=per_sample`` reads it for this rollout's steps).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .distributed import local_tensor
from .errors import ConfigError
from .noise_config import HVP_KINDS, NOISE_MODES, NoiseParams  # noqa: F401 (the schema, also importable here)
from .per_sample import PerSampleGradients, noise_from_norms


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


class PerSampleNoise:
    """The exact per-sample noise instrument at theta_old (``noise/per_sample_*``).

    Whether it runs is decided (and checked) at start-up: ``noise.per_sample`` on, or auto on a model
    with at most ``noise.max_parameters`` parameters that the exact machinery supports;
    ``lr.source=per_sample`` needs it and makes it run every rollout. ``exact``: the machinery the
    advantage phase already built, shared rather than hooked twice.
    """

    def __init__(self, cfg, model, device, n_params: int, exact: PerSampleGradients | None = None):
        self.cfg, self.device = cfg, device
        noise = getattr(cfg, "noise", None) or NoiseParams()
        noise.validate()
        on = noise.per_sample == "on" or (noise.per_sample == "auto" and n_params <= noise.max_parameters)
        if on and exact is None:
            try:
                exact = PerSampleGradients(model)
            except ConfigError:
                if noise.per_sample == "on":
                    raise
                on = False
        self.on = on
        self.exact = exact
        self.every = noise.every_rollouts
        if getattr(cfg.lr, "source", None) == "per_sample":
            if not self.on:
                raise ConfigError(
                    "lr.source=per_sample needs the per-sample noise instrument (noise.per_sample=on, or "
                    "auto on a model with at most noise.max_parameters parameters)"
                )
            self.every = 1  # the LR rule reads a fresh estimate every rollout
        k = cfg.optim.steps_per_rollout
        self.minibatch = cfg.rollout.prompts_per_rollout * cfg.rollout.group_size / k
        self.chunk = cfg.optim.micro_batch_responses or max(
            cfg.rollout.prompts_per_rollout * cfg.rollout.group_size // k, 64
        )

    def describe(self) -> str:
        return f"per-sample noise: {f'every {self.every} rollout(s)' if self.on else 'off'}"

    def due(self, rollout: int) -> bool:
        """Whether the instrument runs on this rollout (0-based index)."""
        return self.on and rollout % self.every == 0

    def estimate(self, gen, advantages, old_logp, ref_logp) -> dict[str, float]:
        """Per-sample noise estimates of the first step's gradient at theta_old (see noise_from_norms),
        keyed ``per_sample_<name>``.

        g_i = N * sum_t w_it * grad l_it at ratio 1, with w_it the loss's token weights over the whole
        rollout, so that the rollout gradient is mean_i g_i: grad l_it = (-A_i + beta * (1 - pi_ref/pi)) *
        grad log pi(o_it) (the clip is inactive at ratio 1; the k3 term's gradient).
        """
        from .algorithms.loss import token_weights

        cfg = self.cfg
        comp = gen.completion_mask[:, gen.prompt_width :]
        n = len(gen)
        constant = cfg.loss.constant_normalizer or cfg.rollout.max_new_tokens
        w = token_weights(comp, cfg.loss.aggregation, constant) * n
        coef = -advantages.float()[:, None] * torch.ones_like(w)
        if cfg.loss.kl_coef > 0 and ref_logp is not None:
            coef = coef + cfg.loss.kl_coef * (1.0 - torch.exp(ref_logp - old_logp))
        coef = torch.where(comp, w * coef, torch.zeros_like(w))
        if not bool((coef != 0).any()):
            out = noise_from_norms(torch.zeros(n, dtype=torch.float64), 0.0, self.minibatch)
        else:
            res = self.exact.compute(
                gen.input_ids,
                gen.attention_mask,
                gen.prompt_width,
                coef,
                cfg.rollout.temperature,
                self.device,
                self.chunk,
            )
            out = noise_from_norms(res.norms_sq, res.sum_norm_sq, self.minibatch)
        return {f"per_sample_{k}": v for k, v in out.items()}


# ---- B_noise for Adam: the noise scale of the preconditioned update (docs/theory.md) ---------------------


def adam_preconditioner(optimizer: torch.optim.Optimizer, params) -> list[torch.Tensor] | None:
    """``P = 1 / (sqrt(v_hat) + eps)`` per parameter from an Adam/AdamW optimizer's own state:
    ``v_hat = exp_avg_sq / (1 - beta2^t)`` (torch's bias correction, ``t`` its ``step``), ``eps`` that of
    the parameter's group. A parameter the optimizer does not train gets P = 0 (its update is 0). None
    before the first step (no state yet) or when no parameter is the optimizer's (a sharded copy: the
    state belongs to the shards)."""
    groups = {id(p): g for g in optimizer.param_groups for p in g["params"]}
    if not any(id(p) in groups for p in params):
        return None
    out = []
    for p in params:
        group = groups.get(id(p))
        if group is None:
            out.append(torch.zeros_like(local_tensor(p.detach()), dtype=torch.float32))
            continue
        state = optimizer.state.get(p)
        if not state or "exp_avg_sq" not in state:
            return None
        t = float(state["step"])
        beta2 = group["betas"][1]
        v_hat = local_tensor(state["exp_avg_sq"].detach()).float() / (1.0 - beta2**t)
        out.append(1.0 / (v_hat.sqrt() + group["eps"]))
    return out


def two_half_estimates(mean_a, mean_b, n_a: float, n_b: float, weight=None) -> dict:
    """Unbiased ``G'XG`` and ``tr(X Sigma)`` per sample from the means of two independent halves of a
    batch (``n_a`` and ``n_b`` i.i.d. samples; ``X = diag(weight)``, the identity when None), over the last
    axis (leading axes are independent batches):

        E[M_A' X M_B] = G'XG,       E[(M_A - M_B)' X (M_A - M_B)] = tr(X Sigma) (1/n_a + 1/n_b)

    The cross product of the two half means is the unbiased signal: no sample meets itself, so no
    noise term enters (unlike |mean|^2). With prompts as the unit (responses of a prompt correlated),
    the halves are sets of whole prompts and ``Sigma`` is the covariance of one prompt's mean gradient;
    :func:`rlvr_scaling.noise_cells.cell_estimates` splits it further into within and between prompts."""
    w = 1.0 if weight is None else weight
    diff = mean_a - mean_b
    return {
        "signal": (mean_a * w * mean_b).sum(-1),
        "trace": (diff * w * diff).sum(-1) / (1.0 / n_a + 1.0 / n_b),
    }
