"""``report.md``: its sections in order (each rendered by :mod:`analysis.sections`), and the notes on
what the source can support.

``report.md`` gathers, for a reader who has not seen the code: counts of runs and why some were left
out, the exponents with the theory references, warnings for sizes where no run reached a target, the
competing-risk sensitivity (bounds and the joint model), the Aalen–Johansen incidences, the common
exponent across targets, the noise-scale verdicts, goodness of fit, the sigmoid fits, comparisons,
skipped and flagged runs, the figures and the table of symbols.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis import sections as s
from analysis.clocks import Tables
from analysis.load import SkippedRun


def source_messages(tables: Tables) -> list[str]:
    """Plain statements about what the source can and cannot support (one condition, one size)."""
    runs = tables.runs
    out = []
    n_cond = runs["condition"].nunique()
    sizes = sorted(runs["B"].unique())
    if len(sizes) == 1:
        out.append(
            f"the source has a single rollout size (B = {sizes[0]:g}): an exponent needs runs at two or "
            "more sizes (three or more to test the line); the runs, incidence and sigmoid tables are "
            "still written, the exponents are empty"
        )
    if n_cond == 1:
        out.append(
            "the source has a single condition: there is nothing to compare across conditions "
            "(comparisons.csv and the cross-condition figures are empty); pass --condition-keys or "
            "--ignore-keys if runs that should differ were merged"
        )
    return out


def write_report(
    out: Path,
    source: str,
    tables: Tables,
    exponents: pd.DataFrame,
    comparisons: pd.DataFrame,
    skipped: list[SkippedRun],
    messages: list[str],
    options: dict,
    plots: list[str],
    extra: dict | None = None,
) -> str:
    """Write ``report.md`` and return its text, one function per section below. ``extra``:
    ``incidence_summary``, ``common``, ``noise``, ``sigmoid`` tables, ``hazard`` (the tables and notes
    of :func:`analysis.hazard.hazard_tables`) and the lines of the ``theory``, ``blocks`` and
    ``which_b`` sections when computed."""
    extra = extra or {}
    sections = [
        s.summary_lines(source, tables, skipped, messages, options),
        s.exponents_lines(exponents, tables),
        s.degenerate_lines(exponents),
        s.unreached_lines(exponents),
        s.competing_lines(exponents),
        s.incidence_lines(extra.get("incidence_summary")),
        s.hazard_lines(extra.get("hazard")),
        s.common_lines(extra.get("common")),
        extra.get("trend") or [],  # exponents along a numeric key (sections.trend_lines)
        extra.get("gain") or [],  # targets as fractions of the gain (sections.gain_lines)
        s.noise_lines(extra.get("noise"), exponents),
        extra.get("theory") or [],  # predicted vs fitted α (sections.theory_lines)
        extra.get("bcrit") or [],  # McCandlish's B_crit from the clocks (sections.bcrit_lines)
        s.goodness_of_fit_lines(exponents),
        s.sigmoid_lines(extra.get("sigmoid")),
        s.warnings_lines(exponents),
        extra.get("blocks") or [],  # seeds as blocks (sections.blocks_lines)
        s.comparisons_lines(comparisons),
        extra.get("which_b") or [],  # the best B in wall time and FLOPs (sections.which_b_lines)
        s.skipped_lines(skipped),
        s.run_notes_lines(tables.runs),
        s.plots_lines(plots),
        s.symbols_and_method_lines(),
    ]
    text = "\n".join(line for section in sections for line in section)
    (out / "report.md").write_text(text)
    return text
