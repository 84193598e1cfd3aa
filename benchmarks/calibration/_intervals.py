"""What the calibration scripts share: whether intervals cover a known truth."""

from __future__ import annotations

import numpy as np


def covers(low, high, truth) -> np.ndarray:
    """Per interval ``[low, high]``: whether it holds ``truth`` (bounds included). A NaN bound (an interval
    the fit could not give) does not cover; an infinite one covers on its side."""
    low, high = np.asarray(low, float), np.asarray(high, float)
    return (low <= truth) & (truth <= high)
