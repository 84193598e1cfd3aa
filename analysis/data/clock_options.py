"""The options of the clock tables (:class:`ClockOptions`: which clock, targets, crossing rule, failure
time, horizon, ...), their check, the :class:`Tables` they give and the targets' column label. The
tables themselves: :mod:`analysis.data.clock_tables`."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from analysis.data.crossings import crossing_rule
from analysis.data.load import SkippedRun, is_number

CLOCK_CHOICES = ("responses", "tokens", "flops", "flops_nominal", "wall_seconds", "optimizer_steps")
FAILURE_TIMES = ("onset", "detection")


@dataclass(frozen=True)
class ClockOptions:
    clock: str = "responses"  # which clock the events are measured on
    targets: tuple[float, ...] | None = None  # None: union of every run's eval.targets
    crossing: str = "interval"  # a crossing rule's name (analysis.data.crossings: interval, isotonic, ...)
    failure_time: str = "onset"  # onset | detection: which failure time the failure clock uses
    resolution_frac: float = 0.25  # spacing or B above this fraction of R_T flags the point
    include_incomplete: bool = True  # fit running/preempted/unknown runs as censored at last clock
    condition_keys: tuple[str, ...] | None = None  # None: every key but DEFAULT_IGNORED_KEYS
    ignore_keys: tuple[str, ...] = ()  # extra keys (or parents, or globs) left out of the condition
    # responses up to which crossings and failures are read: "auto" = the horizon the runs record (per
    # condition the ``eval.horizon`` its runs set, else each run's ``train.max_responses``); a number = that
    # horizon for every run; ((condition label, responses), ...) = those conditions' horizons fixed (a
    # study's), "auto" for the others, where responses may be given per rollout size as ((B, responses),
    # ...) or {B: responses} (each run read to its size's); None = every evaluation (no horizon)
    horizon: float | str | tuple | None = "auto"
    discrete: bool = True  # brackets in whole rollouts: [previous evaluation + B, evaluation]
    # a size where most runs cross a target within its first ``early_rollouts`` rollouts is *early*: its
    # crossings sit near the R >= B floor; each target's fit keeps at most ``max_early_sizes`` of them
    # (the smallest), None keeps every size (analysis.fits.exponents.fit_conditions)
    early_rollouts: int = 4
    max_early_sizes: int | None = 1


@dataclass
class Tables:
    runs: pd.DataFrame  # one row per run
    evals: pd.DataFrame  # one row per evaluation
    targets: list[float]
    condition_keys: list[str]
    varying_keys: list[str]  # condition keys that differ between conditions
    skipped: list[SkippedRun]
    messages: list[str] = field(default_factory=list)
    options: ClockOptions | None = None


def target_label(a: float) -> str:
    return f"target:{a:g}"


def check_options(opts: ClockOptions) -> None:
    if opts.clock not in CLOCK_CHOICES:
        raise ValueError(f"clock must be one of {CLOCK_CHOICES}, got {opts.clock!r}")
    crossing_rule(opts.crossing)  # ValueError naming the registered rules
    if opts.failure_time not in FAILURE_TIMES:
        raise ValueError(f"failure_time must be one of {FAILURE_TIMES}, got {opts.failure_time!r}")
    h = opts.horizon
    fixed = isinstance(h, tuple) and all(isinstance(x, tuple) and len(x) == 2 and _responses(x[1]) for x in h)
    if not (h is None or h == "auto" or fixed or (is_number(h) and not isinstance(h, bool) and h > 0)):
        raise ValueError(
            "horizon must be 'auto', None, a positive number of responses or ((condition, responses), ...)"
            " with responses a positive number or ((B, responses), ...)"
            f", got {h!r}"
        )


def _positive(x) -> bool:
    return is_number(x) and not isinstance(x, bool) and x > 0


def _responses(value) -> bool:
    """A fixed horizon of one condition: a positive number, or positive responses per positive rollout
    size as ``((B, responses), ...)`` or ``{B: responses}``."""
    if isinstance(value, dict):
        value = tuple(value.items())
    if isinstance(value, tuple):
        return bool(value) and all(
            isinstance(x, tuple) and len(x) == 2 and _positive(x[0]) and _positive(x[1]) for x in value
        )
    return _positive(value)
