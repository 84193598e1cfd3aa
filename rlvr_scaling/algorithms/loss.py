"""The policy loss of multi-step GRPO.

Per completion token t of response i, with ratio rho = pi_theta / pi_old (pi_old = the policy that
generated the rollout; its log-probs are recomputed by the trainer before the first of the K steps):

    l_it = -min(rho * A_i, clip(rho, 1 - eps_low, 1 + eps_high) * A_i) + beta * k3_it

with k3 = exp(q) - q - 1, q = log pi_ref - log pi_theta (Schulman's unbiased, non-negative KL
estimator; GRPO's KL term). ``loss.clip: null`` removes the clip (plain importance-weighted policy
gradient, the "unclipped" runs). With one step per rollout (rho = 1) and no clip, the gradient equals
REINFORCE with the chosen baseline.

Aggregation (``loss.aggregation``) defines the normaliser; it is computed over the whole minibatch
once, so splitting a minibatch into micro-batches (gradient accumulation) or skipping rows whose
gradient is zero leaves the gradient unchanged:

- ``token_mean``: sum over tokens / number of completion tokens in the minibatch (DAPO-style).
- ``sequence_mean``: mean over responses of each response's token mean (original GRPO).
- ``constant``: sum over tokens / (responses in minibatch * L) with L = ``constant_normalizer``
  (default ``rollout.max_new_tokens``), as in Dr. GRPO.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import ConfigError

AGGREGATIONS = ("token_mean", "sequence_mean", "constant")


@dataclass
class LossConfig:
    clip: float | None = 0.2  # PPO ratio clip epsilon; null disables clipping
    clip_high: float | None = None  # upper clip epsilon (DAPO "clip-higher"); null = same as clip
    kl_coef: float = 0.0  # beta of the k3 KL to the frozen reference; 0 = no reference model
    aggregation: str = "token_mean"  # token_mean | sequence_mean | constant
    constant_normalizer: int | None = None  # L for aggregation=constant; null = rollout.max_new_tokens

    def validate(self, prefix: str = "loss") -> None:
        if self.clip is not None and not self.clip > 0:
            raise ConfigError(f"{prefix}.clip must be > 0 or null (got {self.clip})")
        if self.clip_high is not None and (self.clip is None or not self.clip_high > 0):
            raise ConfigError(
                f"{prefix}.clip_high needs loss.clip set and must be > 0 (got {self.clip_high})"
            )
        if self.kl_coef < 0:
            raise ConfigError(f"{prefix}.kl_coef must be >= 0 (got {self.kl_coef})")
        if self.aggregation not in AGGREGATIONS:
            raise ConfigError(
                f"{prefix}.aggregation must be one of {', '.join(AGGREGATIONS)} (got {self.aggregation!r})"
            )
        if self.constant_normalizer is not None and self.constant_normalizer < 1:
            raise ConfigError(f"{prefix}.constant_normalizer must be >= 1 (got {self.constant_normalizer})")


def token_weights(mask: torch.Tensor, aggregation: str, constant: int) -> torch.Tensor:
    """Per-token weights w_it such that loss = sum_it w_it * l_it over a whole minibatch.

    mask: [n, T] completion-token mask of the *whole* minibatch. Returns [n, T].
    """
    mask = mask.to(torch.float32)
    n = mask.shape[0]
    if aggregation == "token_mean":
        return mask / mask.sum().clamp(min=1.0)
    if aggregation == "sequence_mean":
        return mask / mask.sum(dim=1, keepdim=True).clamp(min=1.0) / max(n, 1)
    return mask / float(max(n, 1) * constant)


def policy_loss(
    logp: torch.Tensor,  # [n, T] log pi_theta of the taken tokens
    old_logp: torch.Tensor,  # [n, T] log pi_old
    advantages: torch.Tensor,  # [n]
    weights: torch.Tensor,  # [n, T] from token_weights (zero outside completions)
    clip: float | None,
    clip_high: float | None = None,
    ref_logp: torch.Tensor | None = None,  # [n, T] log pi_ref, when kl_coef > 0
    kl_coef: float = 0.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Weighted sum of per-token losses (see module docstring) and detached statistics."""
    log_ratio = logp - old_logp
    ratio = torch.exp(log_ratio)
    adv = advantages.to(logp.dtype)[:, None]
    surrogate = ratio * adv
    if clip is not None:
        high = clip if clip_high is None else clip_high
        clipped = torch.clamp(ratio, 1.0 - clip, 1.0 + high) * adv
        per_token = -torch.minimum(surrogate, clipped)
    else:
        per_token = -surrogate
    stats: dict[str, torch.Tensor] = {}
    if kl_coef > 0 and ref_logp is not None:
        q = ref_logp - logp
        k3 = torch.exp(q) - q - 1.0
        per_token = per_token + kl_coef * k3
        stats["kl_ref"] = (k3.detach() * weights).sum()
    # where(): padding positions may hold non-finite values that a zero weight would not cancel.
    loss = torch.where(weights > 0, per_token * weights, torch.zeros_like(per_token)).sum()
    with torch.no_grad():
        on = weights > 0
        stats["policy"] = loss.detach()
        # k3 estimate of KL(pi_old || pi_theta) on the minibatch's tokens (the "KL to the rollout policy")
        # and the clipped fraction, as sums over tokens with their count: summed over micro-batches and
        # ranks and divided once, they are token means that do not depend on how a minibatch is split.
        k3_old = torch.exp(-log_ratio) + log_ratio - 1.0
        stats["tokens"] = on.sum().to(torch.float64)
        stats["kl_old_sum"] = k3_old[on].double().sum()
        if clip is not None:
            high = clip if clip_high is None else clip_high
            clipped_frac = ((ratio < 1 - clip) & (adv < 0)) | ((ratio > 1 + high) & (adv > 0))
            stats["clip_sum"] = clipped_frac[on].double().sum()
    return loss, stats
