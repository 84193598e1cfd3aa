"""The policy loss of multi-step GRPO: an objective (``loss.name``, registry :data:`OBJECTIVES`) plus
the optional KL term, aggregated with minibatch-level weights.

``ppo`` (default): per completion token t of response i, with ratio rho = pi_theta / pi_old (pi_old =
the policy that generated the rollout: the engine's behaviour log-probs or the trainer's recomputation
before the first of the K steps):

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

Every objective has one signature, ``objective(cfg, batch, on) -> ([n, T] per-token losses, stats)``;
the KL term, the aggregation and the drift statistics (:func:`kl_old_sums`) are shared.

Truncated importance sampling (``loss.tis``: ``token`` | ``sequence``, cap ``loss.tis_cap``): when
the generation engine's pi_engine differs from the recomputed pi_old (vLLM in bf16 against the
trainer), every objective's per-token loss is multiplied by the detached weight w_it =
min(pi_old / pi_engine, C) (token level) or w_i = min(prod_t pi_old / pi_engine, C) (sequence level)
before aggregation; the KL term is not weighted. Yao et al. 2025, "Your efficient RL framework secretly
brings you off-policy RL training"; as verl and OpenRLHF apply it. The weights are computed in
:mod:`rlvr_scaling.logprobs` and reach the loss as ``LossBatch.is_weights``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..errors import ConfigError
from ..registry import Registry

AGGREGATIONS = ("token_mean", "sequence_mean", "constant")
TIS_LEVELS = ("token", "sequence")


@dataclass
class LossConfig:
    name: str = "ppo"  # the objective (registry OBJECTIVES): ppo = per-token clipped surrogate
    clip: float | None = 0.2  # PPO ratio clip epsilon; null disables clipping
    clip_high: float | None = None  # upper clip epsilon (DAPO "clip-higher"); null = same as clip
    kl_coef: float = 0.0  # beta of the k3 KL to the frozen reference; 0 = no reference model
    aggregation: str = "token_mean"  # token_mean | sequence_mean | constant
    constant_normalizer: int | None = None  # L for aggregation=constant; null = rollout.max_new_tokens
    # truncated importance sampling against the engine's mismatch: null | token | sequence; the loss
    # of each token is weighted by min(pi_old / pi_engine, tis_cap) (detached; pi_old recomputed)
    tis: str | None = None
    tis_cap: float = 2.0  # C, the truncation of the importance weight (2 in Yao et al. 2025)

    def validate(self, prefix: str = "loss") -> None:
        if self.name not in OBJECTIVES:
            raise ConfigError(
                f"{prefix}.name: unknown loss {self.name!r}; valid: {', '.join(OBJECTIVES.names())}"
            )
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
        if self.tis is not None and self.tis not in TIS_LEVELS:
            raise ConfigError(f"{prefix}.tis must be null, token or sequence (got {self.tis!r})")
        if not self.tis_cap >= 1:
            raise ConfigError(f"{prefix}.tis_cap must be >= 1 (got {self.tis_cap})")


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


@dataclass
class LossBatch:
    """What a loss sees for the rows of one micro-batch (tensors on the training device)."""

    logp: torch.Tensor  # [n, T] log pi_theta of the taken tokens (with gradient)
    old_logp: torch.Tensor  # [n, T] log pi_old (the behaviour policy of the rollout)
    advantages: torch.Tensor  # [n]
    weights: torch.Tensor  # [n, T] from token_weights over the whole minibatch (0 off-completion)
    ref_logp: torch.Tensor | None = None  # [n, T] log pi_ref, when the KL term is on
    # [n, T] truncated importance weights min(pi_old / pi_engine, C) (loss.tis; detached), multiplying
    # the objective's per-token loss; None = no correction
    is_weights: torch.Tensor | None = None


Objective = Callable[[LossConfig, LossBatch, torch.Tensor], tuple[torch.Tensor, dict[str, torch.Tensor]]]
OBJECTIVES: Registry[Objective] = Registry("loss")


@OBJECTIVES.register("ppo")
def ppo_objective(cfg: LossConfig, b: LossBatch, on: torch.Tensor):
    """Per-token PPO-clipped surrogate (module docstring); returns ([n, T] losses, token-sum stats)."""
    log_ratio = b.logp - b.old_logp
    ratio = torch.exp(log_ratio)
    adv = b.advantages.to(b.logp.dtype)[:, None]
    surrogate = ratio * adv
    stats: dict[str, torch.Tensor] = {}
    if cfg.clip is None:
        return -surrogate, stats
    high = cfg.clip if cfg.clip_high is None else cfg.clip_high
    clipped = torch.clamp(ratio, 1.0 - cfg.clip, 1.0 + high) * adv
    with torch.no_grad():
        clipped_frac = ((ratio < 1 - cfg.clip) & (adv < 0)) | ((ratio > 1 + high) & (adv > 0))
        stats["clip_sum"] = clipped_frac[on].double().sum()
    return -torch.minimum(surrogate, clipped), stats


def policy_loss(cfg: LossConfig, b: LossBatch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The minibatch loss sum_it w_it * l_it of the configured objective plus the KL term, and detached
    statistics as sums over this micro-batch's tokens (``tokens``, ``kl_old_sum``, ``clip_sum``, ...):
    summed over micro-batches and ranks and divided once, they do not depend on how a minibatch is
    split."""
    on = b.weights > 0
    per_token, stats = OBJECTIVES.get(cfg.name)(cfg, b, on)
    if b.is_weights is not None:  # truncated IS against the engine mismatch (module docstring)
        per_token = per_token * b.is_weights.detach().to(per_token.dtype)
    if cfg.kl_coef > 0 and b.ref_logp is not None:
        q = b.ref_logp - b.logp
        k3 = torch.exp(q) - q - 1.0
        per_token = per_token + cfg.kl_coef * k3
        stats["kl_ref"] = (k3.detach() * b.weights).sum()
    # where(): padding positions may hold non-finite values that a zero weight would not cancel.
    loss = torch.where(on, per_token * b.weights, torch.zeros_like(per_token)).sum()
    with torch.no_grad():
        stats["policy"] = loss.detach()
        stats.update(kl_old_sums(b.logp.detach(), b.old_logp, on))
    return loss, stats


def kl_old_sums(logp: torch.Tensor, old_logp: torch.Tensor, on: torch.Tensor) -> dict[str, torch.Tensor]:
    """Sums for the k3 estimate of KL(pi_old || pi_theta) on tokens sampled from pi_old.

    With rho = pi_theta / pi_old at a sampled token, k3 = rho - 1 - log rho >= 0 and
    E_{pi_old}[k3] = E[rho] - 1 - E[log rho] = KL(pi_old || pi_theta) per token (E[rho] = 1 under pi_old);
    summed over a response's tokens it is unbiased for the sequence-level KL (tower property).
    Returns ``tokens`` (count), ``kl_old_sum`` (sum of k3 over tokens), ``rows`` (responses with a
    token) and ``kl_old_seq_sum`` (sum over responses of their summed k3). The token mean
    ``kl_old_sum / tokens`` is bounded by the largest k3 divided by the token count only through its
    mean, not a batch maximum, so its distribution does not depend on the rollout size.
    """
    log_ratio = (logp - old_logp).double()
    k3 = torch.where(on, torch.expm1(log_ratio) - log_ratio, torch.zeros_like(log_ratio))
    rows = on.any(dim=1)
    return {
        "tokens": on.sum().to(torch.float64),
        "kl_old_sum": k3.sum(),
        "rows": rows.sum().to(torch.float64),
        "kl_old_seq_sum": k3.sum(dim=1)[rows].sum(),
    }
