"""``interval`` (the default): the crossing lies between the last evaluation below the target and the
first at or above it."""

from __future__ import annotations

from analysis.data.crossings import Bracket, Curve, first_at_or_above, register, whole_rollouts


@register("interval")
def interval(curve: Curve, target: float) -> Bracket | None:
    """Interval-censored between the last evaluation below the target and the first with
    ``eval/accuracy >= target`` (in whole rollouts: ``[r_before + B, r]``, so a crossing at the first
    evaluation after step 0 is bracketed in ``[B, r]``, never left-censored at 0). Reads each
    evaluation's accuracy up to the first at or above the target, within the horizon."""
    seen = first_at_or_above(curve.accuracy, target)
    return None if seen is None else whole_rollouts(curve, seen)
