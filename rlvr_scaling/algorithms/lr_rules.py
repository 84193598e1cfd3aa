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

``snr`` (OBLR-PO, Huang, Sheng & Zheng 2026; preset ``lr=snr``): the step size follows the gradient
signal-to-noise ratio. For an L-smooth objective and a step -eta * g_b on a minibatch gradient with
E g_b = G and tr Cov g_b = tr Sigma / b, the descent lemma gives
E[L(theta - eta g_b)] <= L(theta) - eta |G|^2 + (L eta^2 / 2) (|G|^2 + tr Sigma / b), minimised by

    eta* = (1 / L) * SNR_b / (1 + SNR_b),        SNR_b = |G|^2 / (tr Sigma / b),  b = B / K.

Our rule (the paper's exact estimator and constants are not available to us; this is our reading):
eta = eta_max * clip(SNR_b / (1 + SNR_b), min_factor, max_factor), with eta_max = ref_lr *
(B / ref_responses) ** power standing in for 1 / L (power 0 by default: SNR_b grows with b, so the rule
supplies its own batch-size dependence, linear in B while noise dominates and flat once SNR_b >> 1).
|G|^2 and tr Sigma come from the trainer's gradient-noise instruments (``source: minibatch``: the
two-batch-size estimates ``noise/grad_norm_sq`` and ``noise/trace_cov``, from this rollout's gradients at
theta_old when ``noise.at_theta_old`` is on (the default), else from the previous rollout's K minibatch
gradients; ``source: per_sample``: the current rollout's exact per-sample estimates at
theta_old, ``noise/per_sample_*``). Each is smoothed across rollouts by a bias-corrected exponential
moving average (decay ``smoothing``) before the ratio is taken, since single-rollout estimates are noisy
and |G|^2 can come out negative (clamped at 0). Warm-up: until ``warmup_rollouts`` estimates have been
seen, eta = eta_max * min_factor. The rule is composable with any baseline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..registry import Registry


@dataclass
class PowerLRParams:
    """eta(B) = ref_lr * (B / ref_responses) ** power."""

    rule: str = "power"
    ref_lr: float = 3e-6
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
    def __init__(
        self, params: PowerLRParams, responses_per_rollout: int, steps_per_rollout: int | None = None
    ):
        self.params = params
        self.base_lr = params.ref_lr * (responses_per_rollout / params.ref_responses) ** params.power

    def lr(self, noise: dict[str, float] | None = None) -> float:
        return self.base_lr

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass

    def stats(self) -> dict[str, float]:
        return {}


SNR_SOURCES = ("minibatch", "per_sample")


@dataclass
class SNRLRParams:
    """eta = eta_max * clip(SNR_b / (1 + SNR_b), min_factor, max_factor) (OBLR-PO's SNR-adaptive rule)."""

    rule: str = "snr"
    ref_lr: float = 3e-5  # eta_max at B = ref_responses (stands in for 1 / L)
    ref_responses: int = 32
    power: float = 0.0  # eta_max(B) = ref_lr * (B / ref_responses) ** power
    source: str = "minibatch"  # minibatch (previous rollout's K gradients) | per_sample (this rollout's)
    smoothing: float = 0.9  # EMA decay of |G|^2 and tr Sigma across rollouts (0 = no smoothing)
    min_factor: float = 0.02  # lower bound of eta / eta_max (also the warm-up factor)
    max_factor: float = 1.0  # upper bound of eta / eta_max
    warmup_rollouts: int = 2  # estimates to see before the SNR drives the step size

    def validate(self, prefix: str = "lr") -> None:
        PowerLRParams(self.rule, self.ref_lr, self.ref_responses, self.power).validate(prefix)
        if self.source not in SNR_SOURCES:
            raise ConfigError(
                f"{prefix}.source must be one of {', '.join(SNR_SOURCES)} (got {self.source!r})"
            )
        if not 0 <= self.smoothing < 1:
            raise ConfigError(f"{prefix}.smoothing must be in [0, 1) (got {self.smoothing})")
        if not 0 < self.min_factor <= self.max_factor <= 1:
            raise ConfigError(
                f"{prefix}.min_factor and {prefix}.max_factor need 0 < min_factor <= max_factor <= 1 "
                f"(got {self.min_factor}, {self.max_factor})"
            )
        if self.warmup_rollouts < 0:
            raise ConfigError(f"{prefix}.warmup_rollouts must be >= 0 (got {self.warmup_rollouts})")


class SNRRule:
    """Stateful: smooths the noise estimates once per new rollout (a new estimate dict), see module doc."""

    def __init__(self, params: SNRLRParams, responses_per_rollout: int, steps_per_rollout: int | None = None):
        self.params = params
        self.base_lr = params.ref_lr * (responses_per_rollout / params.ref_responses) ** params.power
        if steps_per_rollout is not None and steps_per_rollout < 2 and params.source == "minibatch":
            raise ConfigError(
                "lr.source=minibatch needs optim.steps_per_rollout >= 2 (the estimate compares the K "
                "minibatch gradients of a rollout); use lr.source=per_sample or another rule"
            )
        self.minibatch = responses_per_rollout / (steps_per_rollout or 1)
        prefix = "" if params.source == "minibatch" else "per_sample_"
        self.keys = (f"{prefix}grad_norm_sq", f"{prefix}trace_cov")
        self.ema_signal = 0.0
        self.ema_trace = 0.0
        self.seen = 0
        self.last_key: list[float] | None = None

    def observe(self, noise: dict[str, float] | None) -> None:
        """Fold a rollout's estimates into the averages, once per distinct estimate."""
        if not noise:
            return
        key = [noise.get(k, math.nan) for k in self.keys]
        if not all(math.isfinite(v) for v in key) or key == self.last_key:
            return
        self.last_key = key
        d = self.params.smoothing
        self.ema_signal = d * self.ema_signal + (1 - d) * key[0]
        self.ema_trace = d * self.ema_trace + (1 - d) * key[1]
        self.seen += 1

    def snr(self) -> float:
        """The smoothed minibatch SNR_b (bias-corrected EMAs), NaN before any estimate."""
        if self.seen == 0:
            return math.nan
        correction = 1 - self.params.smoothing**self.seen
        signal = max(self.ema_signal / correction, 0.0)
        trace = self.ema_trace / correction
        return signal / (trace / self.minibatch) if trace > 0 else math.inf

    def factor(self) -> float:
        p = self.params
        if self.seen < max(p.warmup_rollouts, 1):
            return p.min_factor
        snr = self.snr()
        raw = 1.0 if math.isinf(snr) else snr / (1.0 + snr)
        return min(max(raw, p.min_factor), p.max_factor)

    def lr(self, noise: dict[str, float] | None = None) -> float:
        self.observe(noise)
        return self.base_lr * self.factor()

    def stats(self) -> dict[str, float]:
        return {"snr_smoothed": self.snr(), "snr_factor": self.factor()}

    def state_dict(self) -> dict[str, Any]:
        return {
            "ema_signal": self.ema_signal,
            "ema_trace": self.ema_trace,
            "seen": self.seen,
            "last_key": self.last_key,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        # entries absent from an older checkpoint keep their initial values
        self.ema_signal = float(state.get("ema_signal", self.ema_signal))
        self.ema_trace = float(state.get("ema_trace", self.ema_trace))
        self.seen = int(state.get("seen", self.seen))
        last_key = state.get("last_key", self.last_key)
        self.last_key = None if last_key is None else [float(v) for v in last_key]


LR_RULES: Registry[type] = Registry("lr rule")
LR_RULES.register("power")(PowerRule)
LR_RULES.register("snr")(SNRRule)
PARAMS: dict[str, type] = {"power": PowerLRParams, "snr": SNRLRParams}


def build_lr_rule(params, responses_per_rollout: int, steps_per_rollout: int | None = None):
    """The rule for rollout size B; ``steps_per_rollout`` (K) lets adaptive rules check and use B/K."""
    return LR_RULES.get(params.rule)(params, responses_per_rollout, steps_per_rollout)
