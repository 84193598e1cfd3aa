"""What the analysis computes, as one typed object: every table ``rlvr-analyze`` writes and the fits
behind the figures (:func:`analysis.pipeline.fit_all` fills it; the figures and the report read it)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from analysis.data.clock_tables import Tables
from analysis.fits.fit import FitResult


@dataclass
class Results:
    """Every table ``rlvr-analyze`` writes, and the fits behind the figures. A table left ``None`` was not
    computed: its section of the report and its figures are left out."""

    tables: Tables
    exponents: pd.DataFrame
    fits: dict[tuple[str, str], FitResult]
    comparisons: pd.DataFrame | None = None
    incidence: pd.DataFrame | None = None
    incidence_summary: pd.DataFrame | None = None
    common: pd.DataFrame | None = None
    trend: pd.DataFrame | None = None
    gain: pd.DataFrame | None = None
    hazard: tuple[pd.DataFrame, pd.DataFrame, list[str]] | None = None  # table, fit, notes
    noise: pd.DataFrame | None = None
    theory: pd.DataFrame | None = None
    bcrit: pd.DataFrame | None = None
    bcrit_theory: pd.DataFrame | None = None
    recommend: pd.DataFrame | None = None
    correlations: pd.DataFrame | None = None
    which_b: pd.DataFrame | None = None
    sigmoid: pd.DataFrame | None = None
    model_size: pd.DataFrame | None = (
        None  # per condition with its N: alpha, gamma, B_crit (trend_size.size_rows)
    )
    resampling: dict[str, str] = field(default_factory=dict)  # condition -> bootstrap used
