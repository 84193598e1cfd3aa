"""``isotonic`` (``--isotonic``): the crossing of the accuracy curve smoothed by isotonic regression."""

from __future__ import annotations

import numpy as np

from analysis.data.crossings import Bracket, Curve, first_at_or_above, register, whole_rollouts


@register("isotonic")
def isotonic(curve: Curve, target: float) -> Bracket | None:
    """Interval-censored as ``interval``, on the accuracy curve smoothed by isotonic (non-decreasing)
    least-squares regression (``scipy.optimize.isotonic_regression``, pool-adjacent-violators) over the
    stretch where the curve is meant to rise: every evaluation read (within the horizon and, for a
    failed run, up to its failure time) up to the last one at the peak accuracy, so a later decline is
    never pooled into the rise and cannot hide a crossing. The first evaluation whose smoothed accuracy
    reaches the target and the one before it bound the crossing. It uses every evaluation instead of the
    first noisy one above the target, so an evaluation-noise spike cannot make a crossing early; it
    assumes the underlying curve does not decrease before the crossing (a run that falls back below
    the target after a spike is timed where the pooled curve reaches it)."""
    seen = first_at_or_above(rising_part(curve.accuracy), target)
    return None if seen is None else whole_rollouts(curve, seen)


def rising_part(acc: np.ndarray) -> np.ndarray:
    """The isotonic fit of ``acc`` up to the last evaluation at its peak, NaN after it (and where the
    accuracy is NaN)."""
    out = np.full(acc.shape, np.nan)
    finite = np.flatnonzero(np.isfinite(acc))
    if finite.size:
        peak = finite[np.flatnonzero(acc[finite] == acc[finite].max())[-1]]
        out[: peak + 1] = smoothed_accuracy(acc[: peak + 1])
    return out


def smoothed_accuracy(acc: np.ndarray) -> np.ndarray:
    """Isotonic (non-decreasing) least-squares fit of a run's accuracies in evaluation order; NaN
    evaluations are skipped and stay NaN."""
    from scipy.optimize import isotonic_regression

    out = np.full(acc.shape, np.nan)
    ok = np.isfinite(acc)
    if ok.any():
        out[ok] = isotonic_regression(acc[ok]).x
    return out
