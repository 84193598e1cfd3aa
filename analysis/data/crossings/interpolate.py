"""``interpolate`` (``--interpolate``): linear interpolation between the evaluations around the crossing."""

from __future__ import annotations

from analysis.data.crossings import Bracket, Curve, first_at_or_above, register


@register("interpolate", brackets=False)
def interpolate(curve: Curve, target: float) -> Bracket | None:
    """The time at which the straight line between the last evaluation below the target and the first
    with ``eval/accuracy >= target`` reaches it, taken as exact; the first evaluation's own time where
    there is no evaluation before it or the accuracy did not rise. Reads the accuracies up to that
    evaluation, within the horizon."""
    seen = first_at_or_above(curve.accuracy, target)
    if seen is None:
        return None
    acc = curve.accuracy
    if seen > 0 and acc[seen] > acc[seen - 1]:
        return Bracket(seen, fraction=(target - acc[seen - 1]) / (acc[seen] - acc[seen - 1]))
    return Bracket(seen)
