"""Failure detectors: failure is an event, not a crash (DESIGN.md §3).

Each detector watches the metric rows the trainer produces (training rows after every rollout,
evaluation rows after every evaluation). The first detector that fires ends the run normally with
``state = failed``, its name, its reason and the clocks. Detectors are configured as a dict keyed by
name (``failure.<name>``); setting one to ``null`` drops it.

- ``non_finite``: NaN/Inf in the loss, the gradient norm or the parameters.
- ``accuracy_collapse``: validation accuracy below ``drop_frac`` x its best so far, once the best has
  exceeded ``min_peak``, for ``patience`` consecutive evaluations.
- ``reward_collapse``: the same on the training reward mean, smoothed over the last rollouts that
  cover ``window_responses`` responses (1024 by default, the same window at every rollout size).
- ``kl_blowup``: the mean k3 KL between the policy after a step and the rollout policy
  (``train/kl_old``) above ``max_kl``.
- ``entropy_collapse``: mean token entropy of the rollout (``train/entropy``) below ``min_entropy``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ..registry import Registry


@dataclass
class NonFiniteParams:
    keys: list[str] = field(default_factory=lambda: ["loss/policy", "opt/grad_norm", "train/param_norm"])

    def validate(self, prefix: str) -> None:
        if not self.keys:
            raise ConfigError(f"{prefix}.keys must not be empty")


@dataclass
class CollapseParams:
    drop_frac: float = 0.5
    min_peak: float = 0.1
    patience: int = 1
    window: int = 1  # smooth over this many rows (evaluations or rollouts)
    # Smooth over the last rows covering at least this many responses instead (0: use ``window``).
    # A window in responses means the same at every rollout size: a few-rollout window at small B is
    # noise, and a false collapse would bias the failure clock towards small B.
    window_responses: int = 0

    def validate(self, prefix: str) -> None:
        if not 0 < self.drop_frac < 1:
            raise ConfigError(f"{prefix}.drop_frac must be in (0, 1) (got {self.drop_frac})")
        if not 0 <= self.min_peak <= 1:
            raise ConfigError(f"{prefix}.min_peak must be in [0, 1] (got {self.min_peak})")
        if self.patience < 1 or self.window < 1 or self.window_responses < 0:
            raise ConfigError(f"{prefix}.patience and {prefix}.window must be >= 1, window_responses >= 0")


@dataclass
class KLBlowupParams:
    max_kl: float = 1.0

    def validate(self, prefix: str) -> None:
        if not self.max_kl > 0:
            raise ConfigError(f"{prefix}.max_kl must be > 0 (got {self.max_kl})")


@dataclass
class EntropyCollapseParams:
    min_entropy: float = 1e-3

    def validate(self, prefix: str) -> None:
        if not self.min_entropy > 0:
            raise ConfigError(f"{prefix}.min_entropy must be > 0 (got {self.min_entropy})")


@dataclass
class FailureConfig:
    non_finite: NonFiniteParams | None = field(default_factory=NonFiniteParams)
    accuracy_collapse: CollapseParams | None = field(default_factory=CollapseParams)
    reward_collapse: CollapseParams | None = field(
        default_factory=lambda: CollapseParams(window_responses=1024)
    )
    kl_blowup: KLBlowupParams | None = field(default_factory=KLBlowupParams)
    entropy_collapse: EntropyCollapseParams | None = field(default_factory=EntropyCollapseParams)

    def validate(self, prefix: str = "failure") -> None:
        for name in DETECTORS:
            params = getattr(self, name)
            if params is not None:
                params.validate(f"{prefix}.{name}")


class Detector:
    name: str

    def observe(self, row: dict[str, Any]) -> str | None:
        """Return a reason when the detector fires on this row, else None."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


DETECTORS: Registry[type] = Registry("failure detector")


@DETECTORS.register("non_finite")
class NonFinite(Detector):
    def __init__(self, params: NonFiniteParams):
        self.keys = list(params.keys)

    def observe(self, row):
        for key in self.keys:
            value = row.get(key)
            if isinstance(value, float) and not math.isfinite(value):
                return f"{key} = {value}"
        return None


class _Collapse(Detector):
    key: str

    def __init__(self, params: CollapseParams):
        self.p = params
        self.best = -math.inf
        self.below = 0
        # (value, weight) pairs; weight = responses of the row when smoothing in responses
        self.recent: deque[tuple[float, float]] = deque(
            maxlen=None if params.window_responses else params.window
        )

    def observe(self, row):
        value = row.get(self.key)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return None
        if self.p.window_responses:
            self.recent.append((float(value), float(row.get("rollout/responses", 1))))
            while (
                len(self.recent) > 1
                and sum(w for _, w in self.recent) - self.recent[0][1] >= self.p.window_responses
            ):
                self.recent.popleft()
            full = sum(w for _, w in self.recent) >= self.p.window_responses
        else:
            self.recent.append((float(value), 1.0))
            full = len(self.recent) == self.recent.maxlen
        if not full:
            return None
        smoothed = sum(v * w for v, w in self.recent) / sum(w for _, w in self.recent)
        armed = self.best > self.p.min_peak
        if armed and smoothed < self.p.drop_frac * self.best:
            self.below += 1
        else:
            self.below = 0
        self.best = max(self.best, smoothed)
        if self.below >= self.p.patience:
            return f"{self.key} {smoothed:.4f} < {self.p.drop_frac} x best {self.best:.4f}"
        return None

    def state_dict(self):
        return {"best": self.best, "below": self.below, "recent": list(self.recent)}

    def load_state_dict(self, state):
        # entries absent from an older checkpoint keep their initial values
        self.best, self.below = state.get("best", self.best), state.get("below", self.below)
        self.recent.extend(tuple(x) for x in state.get("recent", []))


@DETECTORS.register("accuracy_collapse")
class AccuracyCollapse(_Collapse):
    key = "eval/accuracy"


@DETECTORS.register("reward_collapse")
class RewardCollapse(_Collapse):
    key = "train/reward_mean"


@DETECTORS.register("kl_blowup")
class KLBlowup(Detector):
    def __init__(self, params: KLBlowupParams):
        self.max_kl = params.max_kl

    def observe(self, row):
        kl = row.get("train/kl_old")
        if kl is not None and kl > self.max_kl:
            return f"train/kl_old {kl:.4g} > {self.max_kl}"
        return None


@DETECTORS.register("entropy_collapse")
class EntropyCollapse(Detector):
    def __init__(self, params: EntropyCollapseParams):
        self.min_entropy = params.min_entropy

    def observe(self, row):
        h = row.get("train/entropy")
        if h is not None and h < self.min_entropy:
            return f"train/entropy {h:.4g} < {self.min_entropy}"
        return None


class FailureMonitor:
    """Runs every configured detector on each row; remembers the first that fired."""

    def __init__(self, config: FailureConfig):
        self.detectors = {
            name: DETECTORS.get(name)(getattr(config, name))
            for name in DETECTORS
            if getattr(config, name) is not None
        }

    def observe(self, row: dict[str, Any]) -> tuple[str, str] | None:
        for name, detector in self.detectors.items():
            reason = detector.observe(row)
            if reason is not None:
                return name, reason
        return None

    def state_dict(self) -> dict[str, Any]:
        return {name: d.state_dict() for name, d in self.detectors.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, d in self.detectors.items():
            if name in state:
                d.load_state_dict(state[name])
