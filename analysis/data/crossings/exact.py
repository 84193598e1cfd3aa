"""``exact`` (``--exact-crossings``): the first evaluation at or above the target taken as the time."""

from __future__ import annotations

from analysis.data.crossings import Bracket, Curve, first_at_or_above, register


@register("exact", brackets=False)
def exact(curve: Curve, target: float) -> Bracket | None:
    """The responses of the first evaluation with ``eval/accuracy >= target``, taken as if it were the
    crossing (biased late by up to one evaluation spacing, most where evaluations are sparse: kept for
    comparison with older analyses). Reads the accuracies up to that evaluation, within the horizon."""
    seen = first_at_or_above(curve.accuracy, target)
    return None if seen is None else Bracket(seen)
