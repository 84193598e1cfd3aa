"""The policy loss of multi-step GRPO: an objective (``loss.name``, registry :data:`OBJECTIVES`) plus
the optional KL term, aggregated with minibatch-level weights.

Notation: response i of a minibatch has completion tokens t = 1..|y_i|, one advantage A_i, and the
per-token ratio rho_it = pi_theta(y_it) / pi_old(y_it), where pi_old is the behaviour policy of the
rollout (the engine's log-probs or the trainer's recomputation with the weights that generated it:
the current ones, or the stale ones under ``rollout.staleness``). Objectives (each returns per-token
losses l_it that the aggregation below weighs):

``ppo`` (default; PPO's clipped surrogate per token, as in GRPO):

    l_it = -min(rho_it * A_i, clip(rho_it, 1 - eps_low, 1 + eps_high) * A_i) + beta * k3_it

with eps_low = ``clip``, eps_high = ``clip_high`` (default: ``clip``; DAPO's "clip-higher" when larger),
k3 = exp(q) - q - 1, q = log pi_ref - log pi_theta (Schulman's unbiased, non-negative KL estimator;
GRPO's KL term). ``loss.clip: null`` removes the clip (plain importance-weighted policy gradient, the
"unclipped" runs). With one step per rollout (rho = 1) and no clip, the gradient equals REINFORCE with
the chosen baseline.

``loss.dual_clip: c`` (Ye et al. 2020, "Mastering Complex Control in MOBA Games with Deep
Reinforcement Learning", dual-clip PPO; c > 1, the paper uses c = 3): for A < 0 the clipped objective is
bounded below by c * A,

    l_it = -max(min(rho A, clip(rho) A), c A)   if A < 0,   the PPO loss otherwise,

so a token whose ratio has grown past c under a negative advantage stops contributing (its loss is the
constant -c A) instead of pushing with an unbounded weight rho. Applies to ``ppo``, ``gspo`` and
``gspo_token`` (to the sequence ratio there); it needs ``loss.clip``. ``loss/dual_clip_frac`` is the
fraction of tokens where the bound is active.

``gspo`` (Zheng et al. 2025, "Group Sequence Policy Optimization"): one length-normalised ratio per
response, clipped at the sequence level,

    s_i = exp( (1/|y_i|) sum_t log rho_it ),     L_i = -min(s_i A_i, clip(s_i, 1 - eps_low, 1 + eps_high) A_i),

and every token of response i carries L_i (l_it = L_i). The paper's clip ranges are tiny because s_i is
a geometric mean: eps_low = 3e-4, eps_high = 4e-4 (``conf/loss/gspo.yaml``). ``gspo_token`` is the
paper's GSPO-token variant: s_it = sg[s_i] * pi_theta(y_it) / sg[pi_theta(y_it)] (value s_i, gradient
s_i * grad log pi_theta(y_it)), clipped per token at the value s_i; with one advantage per response
its gradient equals GSPO's (the paper's remark; tested). Both need whole responses in one micro-batch,
which the optimizer guarantees (micro-batches split rows, never tokens).

``cispo`` (MiniMax-M1, 2025: "clipped IS-weight policy optimisation"): REINFORCE with the truncated
importance weight under stop-gradient, per token, no token dropped,

    l_it = -sg[ clip(rho_it, 1 - eps_low, 1 + eps_high) ] * A_i * log pi_theta(y_it),

gradient -clip(rho_it) A_i grad log pi_theta(y_it) whatever rho is (PPO's clip zeroes the gradient
of a token outside the trust region; CISPO keeps it with a bounded weight). The paper imposes no lower
bound (eps_low "large"): ``conf/loss/cispo.yaml`` sets clip = 1 (weight >= 0, i.e. no lower bound).
The paper does not publish eps_high; we take 0.28, DAPO's clip-higher value. ``clip: null`` gives the
untruncated weight (the unclipped policy gradient's gradient). The value ``loss/policy`` is the
objective above (it contains log pi, so it is not comparable with the ``ppo`` value);
``loss/clip_frac`` is the fraction of tokens whose weight was truncated (their gradient is kept).

Aggregation (``loss.aggregation``) defines the normaliser; it is computed over the whole minibatch
once, so splitting a minibatch into micro-batches (gradient accumulation) or skipping rows whose
gradient is zero leaves the gradient unchanged. The loss is sum_it w_it * l_it with:

- ``token_mean``: w_it = 1 / (completion tokens in the minibatch) (DAPO-style).
- ``sequence_mean``: w_it = 1 / (n |y_i|): mean over responses of each response's token mean (original
  GRPO).
- ``constant``: w_it = 1 / (n L) with L = ``constant_normalizer`` (default ``rollout.max_new_tokens``),
  as in Dr. GRPO.

For a sequence-level loss (``gspo``), the weight of response i is W_i = sum_t w_it: ``sequence_mean``
gives W_i = 1/n, the paper's (1/G) sum_i L_i (the default in ``conf/loss/gspo.yaml``); ``token_mean``
weighs each response by its share of the minibatch's tokens (|y_i| / N_tokens); ``constant`` by
|y_i| / (n L). Because every aggregation's w_it is constant within a response, at ratio 1 (the first
step on fresh data) the gradients of ``gspo``, ``gspo_token``, ``cispo`` and ``ppo`` coincide under the
same aggregation; they differ once the policy has moved (steps 2..K, staleness, engine mismatch).
``loss/clip_frac`` counts tokens: for ``gspo`` every token of a clipped response.

Every objective has one signature, ``objective(cfg, batch, on) -> ([n, T] per-token losses, stats)``
with ``on`` the [n, T] mask of tokens in the loss; the KL term, the aggregation and the drift statistics
(:func:`kl_old_sums`) are shared.

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
DUAL_CLIP_OBJECTIVES = ("ppo", "gspo", "gspo_token")


@dataclass
class LossConfig:
    name: str = "ppo"  # the objective (registry OBJECTIVES): ppo | gspo | gspo_token | cispo
    clip: float | None = 0.2  # eps_low of the ratio clip (cispo: of the IS weight); null disables clipping
    clip_high: float | None = None  # eps_high (DAPO "clip-higher"); null = same as clip
    dual_clip: float | None = None  # c > 1: dual-clip lower bound c * A for A < 0 (ppo, gspo*); null = off
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
        if self.dual_clip is not None:
            if self.name not in DUAL_CLIP_OBJECTIVES:
                raise ConfigError(
                    f"{prefix}.dual_clip applies to {', '.join(DUAL_CLIP_OBJECTIVES)}, not to "
                    f"{prefix}.name={self.name!r} (its importance weight is bounded by clip_high already)"
                )
            if self.clip is None:
                raise ConfigError(
                    f"{prefix}.dual_clip needs {prefix}.clip set (it bounds the clipped objective)"
                )
            if not self.dual_clip > 1:
                raise ConfigError(f"{prefix}.dual_clip must be > 1 (got {self.dual_clip}); the paper uses 3")
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


def clipped_surrogate(
    cfg: LossConfig, ratio: torch.Tensor, adv: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """-min(ratio A, clip(ratio) A), bounded by -c A for A < 0 under ``dual_clip``; ``ratio`` and ``adv``
    broadcast (per token or per sequence). Returns (loss, clipped, dual): the masks of entries whose
    gradient the clip or the dual-clip bound zeroes (None without a clip)."""
    surrogate = ratio * adv
    if cfg.clip is None:
        return -surrogate, None, None
    high = cfg.clip if cfg.clip_high is None else cfg.clip_high
    clipped = torch.clamp(ratio, 1.0 - cfg.clip, 1.0 + high) * adv
    with torch.no_grad():
        clipped_mask = ((ratio < 1 - cfg.clip) & (adv < 0)) | ((ratio > 1 + high) & (adv > 0))
    objective = torch.minimum(surrogate, clipped)
    if cfg.dual_clip is None:
        return -objective, clipped_mask, None
    bound = cfg.dual_clip * adv
    with torch.no_grad():
        dual_mask = (adv < 0) & (objective < bound)
    return -torch.where(adv < 0, torch.maximum(objective, bound), objective), clipped_mask, dual_mask


def _clip_stats(clipped, dual, on: torch.Tensor) -> dict[str, torch.Tensor]:
    """Token counts of the clip masks (broadcast to [n, T] when per sequence)."""
    stats: dict[str, torch.Tensor] = {}
    for key, mask in (("clip_sum", clipped), ("dual_clip_sum", dual)):
        if mask is not None:
            stats[key] = (mask.expand_as(on) & on).double().sum()
    return stats


@OBJECTIVES.register("ppo")
def ppo_objective(cfg: LossConfig, b: LossBatch, on: torch.Tensor):
    """Per-token PPO-clipped surrogate (module docstring); returns ([n, T] losses, token-sum stats)."""
    ratio = torch.exp(b.logp - b.old_logp)
    adv = b.advantages.to(b.logp.dtype)[:, None]
    loss, clipped, dual = clipped_surrogate(cfg, ratio, adv)
    return loss, _clip_stats(clipped, dual, on)


def sequence_log_ratio(b: LossBatch, on: torch.Tensor) -> torch.Tensor:
    """(1/|y_i|) sum_t log(pi_theta / pi_old)(y_it) over each response's tokens in the loss, [n]."""
    log_ratio = torch.where(on, b.logp - b.old_logp, torch.zeros_like(b.logp))
    return log_ratio.sum(dim=1) / on.sum(dim=1).clamp(min=1).to(b.logp.dtype)


@OBJECTIVES.register("gspo")
def gspo_objective(cfg: LossConfig, b: LossBatch, on: torch.Tensor):
    """GSPO: the clipped surrogate of the sequence ratio s_i, carried by every token of response i."""
    s = torch.exp(sequence_log_ratio(b, on))[:, None]  # [n, 1]
    adv = b.advantages.to(b.logp.dtype)[:, None]
    loss, clipped, dual = clipped_surrogate(cfg, s, adv)
    return loss.expand_as(b.logp), _clip_stats(clipped, dual, on)


@OBJECTIVES.register("gspo_token")
def gspo_token_objective(cfg: LossConfig, b: LossBatch, on: torch.Tensor):
    """GSPO-token: s_it = sg[s_i] * pi_theta(y_it) / sg[pi_theta(y_it)], clipped per token at value s_i."""
    seq = sequence_log_ratio(b, on).detach()[:, None]
    logp = torch.where(on, b.logp, torch.zeros_like(b.logp))
    s = torch.exp(seq + logp - logp.detach())
    adv = b.advantages.to(b.logp.dtype)[:, None]
    loss, clipped, dual = clipped_surrogate(cfg, s, adv)
    return loss, _clip_stats(clipped, dual, on)


@OBJECTIVES.register("cispo")
def cispo_objective(cfg: LossConfig, b: LossBatch, on: torch.Tensor):
    """CISPO: -sg[clip(rho, 1 - eps_low, 1 + eps_high)] * A * log pi_theta, per token, nothing dropped."""
    with torch.no_grad():
        ratio = torch.exp(torch.where(on, b.logp - b.old_logp, torch.zeros_like(b.logp)))
        stats: dict[str, torch.Tensor] = {}
        if cfg.clip is None:
            weight = ratio
        else:
            high = cfg.clip if cfg.clip_high is None else cfg.clip_high
            weight = torch.clamp(ratio, 1.0 - cfg.clip, 1.0 + high)
            stats["clip_sum"] = ((weight != ratio) & on).double().sum()
    adv = b.advantages.to(b.logp.dtype)[:, None]
    logp = torch.where(on, b.logp, torch.zeros_like(b.logp))
    return -(weight * adv) * logp, stats


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
