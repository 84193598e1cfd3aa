"""Learning-rate rules: the step size used for a rollout of size B.

``power`` (presets ``lr=sqrt`` default, ``lr=linear``, ``lr=constant``):
    eta(B) = ref_lr * (B / ref_responses) ** power, with power 0.5, 1 or 0.
    ``ref_lr`` is the "small-batch learning rate" eta_ref, ``ref_responses`` the reference rollout
    size B_ref. The square-root rule (power 0.5) is the one whose sample efficiency the two-clock study
    measures.

A rule is an object built once per run from its params and B; the trainer asks it for the learning
rate of each optimizer step, passing the gradient-noise statistics of the current rollout (adaptive
rules use them; ``power`` ignores them). Linear warm-up over ``optim.warmup_rollouts`` is applied by
the trainer on top of any rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..registry import Registry


@dataclass
class PowerLRParams:
    """eta(B) = ref_lr * (B / ref_responses) ** power."""

    rule: str = "power"
    ref_lr: float = 1e-6
    ref_responses: int = 32
    power: float = 0.5

    def validate(self, prefix: str = "lr") -> None:
        if not self.ref_lr > 0:
            raise ConfigError(f"{prefix}.ref_lr must be > 0 (got {self.ref_lr})")
        if self.ref_responses < 1:
            raise ConfigError(f"{prefix}.ref_responses must be >= 1 (got {self.ref_responses})")
        if not 0 <= self.power <= 2:
            raise ConfigError(f"{prefix}.power must be in [0, 2] (got {self.power})")


class PowerRule:
    def __init__(self, params: PowerLRParams, responses_per_rollout: int):
        self.params = params
        self.base_lr = params.ref_lr * (responses_per_rollout / params.ref_responses) ** params.power

    def lr(self, noise: dict[str, float] | None = None) -> float:
        return self.base_lr

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


LR_RULES: Registry[type] = Registry("lr rule")
LR_RULES.register("power")(PowerRule)
PARAMS: dict[str, type] = {"power": PowerLRParams}


def build_lr_rule(params, responses_per_rollout: int):
    return LR_RULES.get(params.rule)(params, responses_per_rollout)
