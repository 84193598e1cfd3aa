"""``report.md``: its sections in order (each rendered by :mod:`analysis.reporting.sections`), and the notes on
what the source can support.

``report.md`` gathers, for a reader who has not seen the code: counts of runs and why some were left
out, the exponents with the theory references, warnings for sizes where no run reached a target, the
competing-risk sensitivity (bounds and the joint model), the Aalen–Johansen incidences, the common
exponent across targets, the noise-scale verdicts, goodness of fit, the sigmoid fits, comparisons,
skipped and flagged runs, the figures and the table of symbols.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from analysis.data.clock_tables import Tables
from analysis.data.load import SkippedRun
from analysis.fits.results import Results
from analysis.reporting import sections as s
from analysis.reporting.sections_size import size_lines


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


@dataclass(frozen=True)
class ReportOptions:
    """The options the report's header states (``rlvr-analyze``'s ``--clock``, crossing mode,
    ``--failure-time``, ``--bootstrap``)."""

    clock: str = "responses"
    crossing: str = "interval"
    failure_time: str = "onset"
    n_boot: int | None = None


def write_report(
    out: Path,
    source: str,
    results: Results,
    skipped: list[SkippedRun],
    messages: list[str],
    options: ReportOptions,
    plots: list[str],
    bcrit_figures: list[str] = (),
) -> str:
    """Write ``report.md`` from the analysis's ``results`` and return its text, one section per
    function of :mod:`analysis.reporting.sections`, in this order. A table of ``results`` left ``None`` leaves its
    section out; ``bcrit_figures`` are the B_crit figures shown in their section."""
    r, tables, exponents = results, results.tables, results.exponents
    sections = [
        s.summary_lines(source, tables, skipped, messages, options),
        s.exponents_lines(exponents, tables),
        s.degenerate_lines(exponents),
        s.unreached_lines(exponents),
        s.competing_lines(exponents),
        s.incidence_lines(r.incidence_summary),
        s.hazard_lines(r.hazard),
        s.common_lines(r.common),
        s.trend_lines(r.trend),
        size_lines(r.model_size),
        s.gain_lines(r.gain),
        s.noise_lines(r.noise, exponents),
        _unless_none(r.theory, s.theory_lines),
        _unless_none(r.bcrit, lambda t: s.bcrit_lines(t, bcrit_figures)),
        _unless_none(r.bcrit_theory, s.bcrit_theory_lines),
        _unless_none(r.recommend, s.recommend_lines),
        s.goodness_of_fit_lines(exponents),
        s.sigmoid_lines(r.sigmoid),
        s.warnings_lines(exponents),
        _unless_none(r.correlations, lambda t: s.blocks_lines(t, r.resampling)),
        _unless_none(r.comparisons, s.comparisons_lines),
        s.which_b_lines(r.which_b),
        s.skipped_lines(skipped),
        s.run_notes_lines(tables.runs),
        s.plots_lines(plots),
        s.symbols_and_method_lines(),
    ]
    text = "\n".join(line for section in sections for line in section)
    (out / "report.md").write_text(text)
    return text


def _unless_none(table, lines) -> list[str]:
    """``lines(table)``, or no lines for a table that was not computed."""
    return [] if table is None else lines(table)
