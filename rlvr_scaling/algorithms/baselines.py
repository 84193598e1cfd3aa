"""Baselines and advantages: A_i for response i of prompt q with reward r_i.

Every estimator takes the same inputs (:class:`AdvantageInputs`) and returns one advantage per
response. Groups may have unequal sizes (adaptive allocators), and a reward may be missing (NaN: the
verifier could not score the response): missing rewards get advantage 0 and are excluded from every
group statistic.

Registered estimators (config group ``baseline``):

- ``grpo`` (Shao et al. 2024, DeepSeekMath): A_i = (r_i - mean_q r) / (s + delta) with s chosen by
  ``scale``: ``group_std`` (sample std of the group, Bessel-corrected as in TRL), ``batch_std`` (std of
  all rewards of the rollout) or ``none`` (no division, as in Dr. GRPO, Liu et al. 2025).
- ``rloo`` (Ahmadian et al. 2024): A_i = r_i - mean_{j != i, j in q} r_j. Leave-one-out makes the
  baseline independent of r_i, so the estimator is unbiased; advantages of a group sum to zero.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..errors import ConfigError
from ..registry import Registry


@dataclass
class AdvantageInputs:
    rewards: torch.Tensor  # [N] float64, NaN where unscorable
    group: torch.Tensor  # [N] long, prompt index of each response in [0, n_groups)
    n_groups: int
    greedy_rewards: torch.Tensor | None = None  # [n_groups] reward of a greedy response (ReMax)
    grad_weights: torch.Tensor | None = None  # [N] per-response weights w_i (optimal baseline)


@dataclass
class GRPOParams:
    """Group-normalised advantages (GRPO)."""

    name: str = "grpo"
    scale: str = "group_std"  # group_std | batch_std | none
    eps: float = 1e-6  # delta added to the scale

    def validate(self, prefix: str = "baseline") -> None:
        if self.scale not in ("group_std", "batch_std", "none"):
            raise ConfigError(
                f"{prefix}.scale must be one of group_std, batch_std, none (got {self.scale!r})"
            )
        if self.eps < 0:
            raise ConfigError(f"{prefix}.eps must be >= 0 (got {self.eps})")


@dataclass
class RLOOParams:
    """Leave-one-out baseline (RLOO)."""

    name: str = "rloo"

    def validate(self, prefix: str = "baseline") -> None:
        pass


AdvantageFn = Callable[[object, AdvantageInputs], torch.Tensor]
BASELINES: Registry[AdvantageFn] = Registry("baseline")
PARAMS: dict[str, type] = {"grpo": GRPOParams, "rloo": RLOOParams}
# Inputs a baseline needs beyond rewards, checked at start-up (e.g. {"greedy"}).
NEEDS: dict[str, frozenset[str]] = {"grpo": frozenset(), "rloo": frozenset()}


def group_sums(values: torch.Tensor, group: torch.Tensor, n_groups: int) -> torch.Tensor:
    return torch.zeros(n_groups, dtype=values.dtype).index_add_(0, group, values)


def _valid(inputs: AdvantageInputs) -> tuple[torch.Tensor, torch.Tensor]:
    valid = ~torch.isnan(inputs.rewards)
    return valid, torch.where(valid, inputs.rewards, torch.zeros_like(inputs.rewards))


@BASELINES.register("grpo")
def grpo_advantages(params: GRPOParams, inputs: AdvantageInputs) -> torch.Tensor:
    valid, r = _valid(inputs)
    g, n = inputs.group, inputs.n_groups
    count = group_sums(valid.double(), g, n)  # [n_groups]
    mean = group_sums(r, g, n) / count.clamp(min=1)
    centred = torch.where(valid, r - mean[g], torch.zeros_like(r))
    if params.scale == "none":
        return centred
    if params.scale == "group_std":
        scale = (group_sums(centred**2, g, n) / (count - 1).clamp(min=1)).sqrt()[g]
    else:  # batch_std: one scale for the whole rollout
        rb = r[valid]
        std = rb.std() if rb.numel() > 1 else torch.zeros((), dtype=r.dtype)
        scale = std.expand_as(r)
    return torch.where(valid, centred / (scale + params.eps), torch.zeros_like(r))


@BASELINES.register("rloo")
def rloo_advantages(params: RLOOParams, inputs: AdvantageInputs) -> torch.Tensor:
    valid, r = _valid(inputs)
    g, n = inputs.group, inputs.n_groups
    count = group_sums(valid.double(), g, n)[g]
    total = group_sums(r, g, n)[g]
    loo_mean = (total - r) / (count - 1).clamp(min=1)
    # A group with a single valid response has no leave-one-out baseline: it carries no signal.
    ok = valid & (count > 1)
    return torch.where(ok, r - loo_mean, torch.zeros_like(r))


def compute_advantages(params, inputs: AdvantageInputs) -> torch.Tensor:
    return BASELINES.get(params.name)(params, inputs)
