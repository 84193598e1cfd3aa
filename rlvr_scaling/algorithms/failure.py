"""Failure detectors: failure is an event, not a crash (docs/design.md §3; choices in docs/failure.md).

Each detector watches the metric rows the trainer produces (training rows after every rollout,
evaluation rows after every evaluation; every row carries the clocks). The first detector that fires
ends the run normally with ``state = failed``, its name, its reason, the clocks at which it *decided*
(``responses``, ``rollout``) and the **onset**: the clocks of the first row of the sustained condition
that made it fire (``onset_responses``, ``onset_rollout``), and the earliest clock at which that condition
can have begun (``onset_lower_responses``: the failure time is interval-censored in (lower, onset]).
The failure clock is fitted on the onset by default; the detection time lags it by the sustain
requirement. A detector's state (:meth:`Detector.state_dict`, saved in every checkpoint) restores
exactly: a resumed run decides as the uninterrupted one.

Design rules, so that the failure clock measures training and not the detector:

- **Sensitivity independent of the rollout size B.** A detector decides from a statistic whose
  distribution does not depend on B at a fixed per-response behaviour: token or response means,
  smoothed over a window measured in *responses* (``window_responses``), never a batch maximum or a sum
  scaled by the batch. A condition must hold for ``sustain_responses`` responses (training rows) or
  ``patience`` consecutive evaluations before it fires, so one noisy row never decides; the defaults
  sustain longer than they smooth, so one outlying rollout, which lifts a windowed mean for one window,
  cannot fire alone.
- **Calibrated against noise.** Collapse detectors fire only on a drop of at least ``z`` binomial
  standard errors of the (smoothed) accuracy or reward, besides the relative drop ``drop_frac``.
- **Relative to the run itself** where an absolute bound would not transfer between models: entropy is
  compared with the run's own starting entropy, truncation with its starting truncation rate.

Detectors (``failure.<name>``; ``null`` drops one):

- ``non_finite``: NaN/Inf in the loss, the gradient norm or the parameters. The trainer catches a
  non-finite loss or gradient before ``optimizer.step`` (the step is not applied), and this detector
  ends the run at that rollout.
- ``accuracy_collapse``: validation accuracy below ``drop_frac`` x its best so far and more than
  ``z`` standard errors sqrt(best (1 - best) / n) below it, once the best exceeded ``min_peak``, on
  ``patience`` consecutive evaluations. n = ``eval/problems``, not ``eval/responses``: the samples of
  one problem are correlated, so problems are the independent units (a conservative standard error),
  for greedy pass@1 (one response a problem) and mean pass@1 over ``eval.samples`` samples alike.
- ``reward_collapse``: the same on ``train/reward_mean`` smoothed (response-weighted) over the last
  rows covering ``window_responses`` responses, with n = the sum of their ``rollout/prompts``, held
  ``sustain_responses``.
- ``kl_blowup``: the drift KL(pi_old || pi_theta) per token after each optimizer step
  (``train/kl_old``, the k3 estimator), smoothed over ``window_responses``, above ``max_kl``.
- ``entropy_collapse``: smoothed token entropy of the rollouts below ``min_frac`` x the run's starting
  entropy (the first full window).
- ``length_blowup``: the smoothed fraction of responses cut at ``rollout.max_new_tokens`` (1 -
  ``train/finished_frac``) above its starting value + ``min_rise``.
- ``mismatch``: the generation engine and the trainer disagree: the smoothed mean |log pi_engine -
  log pi_trainer| per token (``rollout/mismatch_logp_abs_mean``, logged when the trainer recomputes
  pi_old) above ``max_logp_abs_mean``. Quiet when the key is absent.
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
class SustainParams:
    """How long a condition must hold before a detector fires, and how its statistic is smoothed."""

    window_responses: int = 0  # smooth over the last rows covering this many responses (0: raw rows)
    sustain_responses: int = 0  # the condition holds from its onset for at least this many responses
    patience: int = 1  # ... and on at least this many consecutive rows

    def _validate_sustain(self, prefix: str) -> None:
        if self.window_responses < 0 or self.sustain_responses < 0:
            raise ConfigError(f"{prefix}.window_responses and {prefix}.sustain_responses must be >= 0")
        if self.patience < 1:
            raise ConfigError(f"{prefix}.patience must be >= 1 (got {self.patience})")


@dataclass
class CollapseParams(SustainParams):
    drop_frac: float = 0.5  # below this fraction of the best value so far ...
    z: float = 3.0  # ... and more than z binomial standard errors below it
    min_peak: float = 0.1  # armed once the best value exceeds this
    patience: int = 2

    def validate(self, prefix: str) -> None:
        self._validate_sustain(prefix)
        if not 0 < self.drop_frac < 1:
            raise ConfigError(f"{prefix}.drop_frac must be in (0, 1) (got {self.drop_frac})")
        if not 0 <= self.min_peak <= 1:
            raise ConfigError(f"{prefix}.min_peak must be in [0, 1] (got {self.min_peak})")
        if self.z < 0:
            raise ConfigError(f"{prefix}.z must be >= 0 (got {self.z})")


@dataclass
class KLBlowupParams(SustainParams):
    max_kl: float = 0.5  # nats per token
    window_responses: int = 256
    sustain_responses: int = 512

    def validate(self, prefix: str) -> None:
        self._validate_sustain(prefix)
        if not self.max_kl > 0:
            raise ConfigError(f"{prefix}.max_kl must be > 0 (got {self.max_kl})")


@dataclass
class EntropyCollapseParams(SustainParams):
    min_frac: float = 0.05  # below this fraction of the run's starting entropy
    window_responses: int = 512
    sustain_responses: int = 1024

    def validate(self, prefix: str) -> None:
        self._validate_sustain(prefix)
        if not 0 < self.min_frac < 1:
            raise ConfigError(f"{prefix}.min_frac must be in (0, 1) (got {self.min_frac})")


@dataclass
class LengthBlowupParams(SustainParams):
    min_rise: float = 0.5  # truncated fraction above its starting value + this
    window_responses: int = 512
    sustain_responses: int = 1024

    def validate(self, prefix: str) -> None:
        self._validate_sustain(prefix)
        if not 0 < self.min_rise <= 1:
            raise ConfigError(f"{prefix}.min_rise must be in (0, 1] (got {self.min_rise})")


@dataclass
class MismatchParams(SustainParams):
    max_logp_abs_mean: float = 0.2  # nats per token
    window_responses: int = 512
    sustain_responses: int = 1024

    def validate(self, prefix: str) -> None:
        self._validate_sustain(prefix)
        if not self.max_logp_abs_mean > 0:
            raise ConfigError(f"{prefix}.max_logp_abs_mean must be > 0 (got {self.max_logp_abs_mean})")


@dataclass
class FailureConfig:
    non_finite: NonFiniteParams | None = field(default_factory=NonFiniteParams)
    accuracy_collapse: CollapseParams | None = field(default_factory=CollapseParams)
    reward_collapse: CollapseParams | None = field(
        default_factory=lambda: CollapseParams(window_responses=512, sustain_responses=1024, patience=1)
    )
    kl_blowup: KLBlowupParams | None = field(default_factory=KLBlowupParams)
    entropy_collapse: EntropyCollapseParams | None = field(default_factory=EntropyCollapseParams)
    length_blowup: LengthBlowupParams | None = field(default_factory=LengthBlowupParams)
    mismatch: MismatchParams | None = field(default_factory=MismatchParams)

    def validate(self, prefix: str = "failure") -> None:
        for name in DETECTORS:
            params = getattr(self, name)
            if params is not None:
                params.validate(f"{prefix}.{name}")


@dataclass(frozen=True)
class Fired:
    reason: str
    onset_responses: int
    onset_rollout: int
    # the earliest ``responses`` clock at which the condition can have begun (exclusive): the failure
    # time lies in (onset_lower_responses, onset_responses]; None where a state restored from an older
    # checkpoint does not say
    onset_lower_responses: int | None = None


class Detector:
    name: str

    def observe(self, row: dict[str, Any]) -> Fired | None:
        """Return a :class:`Fired` when the detector decides on this row (rows carry the clocks)."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


DETECTORS: Registry[type] = Registry("failure detector")


def _number(row: dict[str, Any], key: str) -> float | None:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


@DETECTORS.register("non_finite")
class NonFinite(Detector):
    """Lower onset bound: the previous training row's ``responses`` (its values were finite)."""

    def __init__(self, params: NonFiniteParams):
        self.keys = list(params.keys)
        self.last: int | None = 0  # responses of the last row that carried one of the keys

    def observe(self, row):
        seen = False
        for key in self.keys:
            value = row.get(key)
            if isinstance(value, float) and not math.isfinite(value):
                return Fired(f"{key} = {value}", int(row["responses"]), int(row["rollout"]), self.last)
            seen = seen or key in row
        if seen:
            self.last = int(row["responses"])
        return None

    def state_dict(self):
        return {"last": self.last}

    def load_state_dict(self, state):
        self.last = state.get("last")  # absent (an older checkpoint): unknown


class _Sustained(Detector):
    """A condition on a (smoothed) statistic of one kind of row, sustained before it fires.

    Subclasses give the row key and ``condition(value, n) -> reason | None``, where n is the number of
    independent units behind the value (``count_key``: the prompts of training rows, the problems of
    evaluation rows; the responses to one prompt are correlated, so they are not independent units).

    Smoothing: the response-weighted mean of the values of the last rows covering ``window_responses``
    responses (``weight_key``; the condition is not evaluated until the window is full), with n the sum
    of their units. Without a window, the row's own value and units. Onset: the first row of the
    current streak of rows on which the condition holds. The streak has lasted the training responses
    its rows cover (a training row covers its rollout's responses, so at large B one rollout can satisfy
    the sustain requirement, as the same responses would at small B), or, for evaluation rows, the
    responses between its first and latest evaluation.

    Lower onset bound: the first responses covered by the (smoothed) statistic of the last row on which
    the condition was evaluated and did not hold, or 0 if there was none. A condition that had begun
    at or before that point would have held on all of that row's data, so it began after it: for
    training rows the start of that row's window (about onset - B - ``window_responses``), for
    evaluations the previous evaluation.

    The state (window, streak, lower bound and the subclass's own values) is what a checkpoint saves;
    a restored detector continues exactly as the uninterrupted one.
    """

    key: str
    weight_key = "rollout/responses"  # responses behind one row (training rows)
    count_key = "rollout/prompts"  # independent units behind one row (a group's responses are correlated)
    instant = False  # rows are instants (evaluations), not spans of training responses

    def __init__(self, params: SustainParams):
        self.p = params
        # (value, responses, independent units, first responses covered); the last is None in entries
        # restored from an older checkpoint, which did not save it
        self.recent: deque[tuple[float, float, float, float | None]] = deque()
        self.streak: list[Any] | None = None  # [onset responses, onset rollout, rows, covered from]
        self.clear_from: float | None = 0.0  # first responses covered by the last row that did not hold

    def value(self, row) -> float | None:
        return _number(row, self.key)

    def condition(self, value: float, n: float) -> str | None:
        raise NotImplementedError

    def observe(self, row):
        value = self.value(row)
        if value is None or math.isnan(value):
            return None
        responses, rollout = int(row["responses"]), int(row["rollout"])
        weight = _number(row, self.weight_key) or 1.0
        units = _number(row, self.count_key) or weight  # a row that does not say: its responses
        start = float(responses) if self.instant else responses - weight
        if self.p.window_responses:
            self.recent.append((value, weight, units, start))
            while (
                len(self.recent) > 1
                and sum(e[1] for e in self.recent) - self.recent[0][1] >= self.p.window_responses
            ):
                self.recent.popleft()
            covered = sum(e[1] for e in self.recent)
            if covered < self.p.window_responses:
                return None
            value = sum(e[0] * e[1] for e in self.recent) / covered
            n = sum(e[2] for e in self.recent)
            start = self.recent[0][3]
        else:
            n = units
        reason = self.condition(value, n)
        if reason is None:
            self.streak = None
            self.clear_from = start
            return None
        if self.streak is None:
            # the responses the streak covers start before its first row when rows are spans
            self.streak = [responses, rollout, 0, responses - (0 if self.instant else int(weight))]
        self.streak[2] += 1
        held = responses - self.streak[3]
        if self.streak[2] >= self.p.patience and held >= self.p.sustain_responses:
            lower = None if self.clear_from is None else int(self.clear_from)
            return Fired(
                f"{reason} (held {self.streak[2]} rows, {held} responses)",
                self.streak[0],
                self.streak[1],
                lower,
            )
        return None

    def state_dict(self):
        return {
            "recent": [list(e) for e in self.recent],
            "streak": self.streak,
            "clear_from": self.clear_from,
            **self._extra_state(),
        }

    def load_state_dict(self, state):
        recent = []
        for e in state.get("recent", []):
            if len(e) == 2:  # (value, responses): units were not saved; they were taken to be responses
                e = [e[0], e[1], e[1]]
            recent.append((e[0], e[1], e[2], e[3] if len(e) > 3 else None))
        self.recent = deque(recent)
        self.streak = state.get("streak")
        # absent (an older checkpoint) or an old entry in the window: the lower bound is unknown
        self.clear_from = state.get("clear_from")
        self._load_extra(state)

    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _load_extra(self, state: dict[str, Any]) -> None:
        pass


class _Collapse(_Sustained):
    """A drop of the (smoothed) value below ``drop_frac`` x its best and ``z`` SEs below it."""

    def __init__(self, params: CollapseParams):
        super().__init__(params)
        self.best = -math.inf

    def condition(self, value, n):
        p = self.p
        best = self.best
        self.best = max(self.best, value)
        if not best > p.min_peak:
            return None
        se = math.sqrt(max(best * (1.0 - best), 0.0) / max(n, 1.0))
        if value < p.drop_frac * best and best - value > p.z * se:
            return f"{self.key} {value:.4f} < {p.drop_frac} x best {best:.4f} (-{(best - value) / max(se, 1e-12):.1f} SE)"
        return None

    def _extra_state(self):
        return {"best": self.best}

    def _load_extra(self, state):
        self.best = state.get("best", -math.inf)


@DETECTORS.register("accuracy_collapse")
class AccuracyCollapse(_Collapse):
    key = "eval/accuracy"
    weight_key = "eval/responses"
    count_key = "eval/problems"
    instant = True


@DETECTORS.register("reward_collapse")
class RewardCollapse(_Collapse):
    key = "train/reward_mean"


@DETECTORS.register("kl_blowup")
class KLBlowup(_Sustained):
    key = "train/kl_old"

    def condition(self, value, n):
        return f"train/kl_old {value:.4g} > {self.p.max_kl}" if value > self.p.max_kl else None


class _RelativeToStart(_Sustained):
    """Compares the smoothed value with the first full window's value (the run's own start)."""

    def __init__(self, params):
        super().__init__(params)
        self.start: float | None = None

    def condition(self, value, n):
        if self.start is None:
            self.start = value
            return None
        return self.relative(value, self.start)

    def relative(self, value: float, start: float) -> str | None:
        raise NotImplementedError

    def _extra_state(self):
        return {"start": self.start}

    def _load_extra(self, state):
        self.start = state.get("start")


@DETECTORS.register("entropy_collapse")
class EntropyCollapse(_RelativeToStart):
    key = "train/entropy"

    def relative(self, value, start):
        bound = self.p.min_frac * start
        return f"train/entropy {value:.4g} < {self.p.min_frac} x start {start:.4g}" if value < bound else None


@DETECTORS.register("length_blowup")
class LengthBlowup(_RelativeToStart):
    key = "train/finished_frac"

    def value(self, row):
        finished = _number(row, self.key)
        return None if finished is None else 1.0 - finished  # the truncated fraction

    def relative(self, value, start):
        bound = start + self.p.min_rise
        return (
            f"truncated fraction {value:.3f} > start {start:.3f} + {self.p.min_rise}"
            if value > bound
            else None
        )


@DETECTORS.register("mismatch")
class Mismatch(_Sustained):
    key = "rollout/mismatch_logp_abs_mean"

    def condition(self, value, n):
        bound = self.p.max_logp_abs_mean
        return f"{self.key} {value:.4g} > {bound}" if value > bound else None


class FailureMonitor:
    """Runs every configured detector on each row; remembers the first that fired."""

    def __init__(self, config: FailureConfig):
        names = sorted(DETECTORS, key=lambda n: n != "non_finite")  # non_finite decides first
        self.detectors = {
            name: DETECTORS.get(name)(getattr(config, name))
            for name in names
            if getattr(config, name) is not None
        }

    def observe(self, row: dict[str, Any]) -> tuple[str, Fired] | None:
        """Every detector sees every row (their state stays current); the first that fires wins."""
        fired = None
        for name, detector in self.detectors.items():
            result = detector.observe(row)
            if result is not None and fired is None:
                fired = (name, result)
        return fired

    def state_dict(self) -> dict[str, Any]:
        return {name: d.state_dict() for name, d in self.detectors.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, d in self.detectors.items():
            if name in state:
                d.load_state_dict(state[name])
