"""Figures for a study, written as 300-dpi PNG and vector PDF (matplotlib, Agg).

Per condition (``<condition>`` as in the tables):

* ``rt_vs_B_<condition>``: responses-to-target against B (log-log), one marker and line style per
  target in the condition's colour; reached runs filled at the evaluation that saw the crossing with a
  bar down to the evaluation before it (the interval the fit uses), runs that never reached it open
  with an upward arrow; the fitted line solid over the sizes where some run reached the target and
  dotted where it is extrapolated; its 95 % bootstrap band; the noise-scale prediction (dash-dot).
* ``rf_vs_B_<condition>``: the same for responses-to-failure.
* ``accuracy_vs_responses_<condition>``: validation accuracy against the clock, one colour per B.
* ``accuracy_vs_compute_<condition>``: the ScaleRL sigmoid of each B over the mean accuracy per
  evaluation (log clock axis).
* ``survival_failure_<condition>``: Kaplan–Meier curves of the failure clock, one per B.
* ``incidence_<condition>``: Aalen–Johansen cumulative incidence of reaching each target before
  failing (solid) and of failing first (dashed), one colour per B.
* ``residuals_<condition>``: conditional-mean standardised residuals of each fit against B.

Across conditions: ``exponents_vs_<key>`` for every key that varies (exponent with its 95 % interval
against the key, one colour per condition, the same colours in every figure), ``alpha_gamma_vs_eta_ref``
(α per target and γ against η_ref, the paper-style figure) when ``lr.ref_lr`` varies, and
``rt_vs_B_all_<target>`` (every condition's responses-to-target in one panel) and, with two or more
targets, ``exponents_vs_target`` (α against the target level, even for a single condition), and
``alpha_predicted_vs_fitted`` (the fitted α beside the α predicted from B_crit and B_noise,
:mod:`analysis.figures.plots_theory`) when ``theory.csv`` has a prediction. Titles and axes name the
quantities in words and symbols (:mod:`analysis.data.symbols`); legends sit outside the axes.

This module is the figure list (:func:`plot_all`) above the two that draw them:
:mod:`analysis.figures.plots_condition` (per condition) and :mod:`analysis.figures.plots_cross` (across conditions);
the look they share (resolution, colours, markers, legend placement, saving) is
:mod:`analysis.figures.plot_style`.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from analysis._parallel import fork_map  # noqa: E402
from analysis.figures.plot_style import DPI, condition_colours, condition_order  # noqa: E402
from analysis.figures.plots_condition import FigureData, plot_condition  # noqa: E402
from analysis.figures.plots_cross import cross_tasks, plot_cross  # noqa: E402
from analysis.figures.plots_size import plot_size  # noqa: E402
from analysis.figures.plots_theory import has_prediction, plot_theory  # noqa: E402
from analysis.fits.noise_scale import noise_predictions  # noqa: E402
from analysis.fits.results import Results  # noqa: E402

__all__ = [
    "DPI",
    "FigureData",
    "condition_colours",
    "condition_order",
    "cross_tasks",
    "figure_data",
    "plot_all",
    "plot_condition",
    "plot_cross",
]


def _plot_one(task: tuple[str, object], job: tuple) -> tuple[list[str], list[str]]:
    """One figure task: ``(file names, warnings)``. A figure that cannot be drawn is skipped with a
    warning naming it and the error; it never stops the other figures, the tables or the report."""
    out, results, data, formats, dpi = job
    kind, arg = task
    try:
        if kind == "condition":
            return plot_condition(out, arg, results.tables, results.fits, formats, data, dpi), []
        if kind == "theory":
            return plot_theory(out, data.theory, formats, dpi), []
        if kind == "model_size":
            return plot_size(out, results.model_size, formats, dpi), []
        return (
            plot_cross(
                out,
                results.tables,
                results.exponents,
                results.fits,
                formats,
                data.colours,
                dpi,
                only=[task],
            ),
            [],
        )
    except Exception as err:  # noqa: BLE001 - any failure of one figure is reported, never raised
        plt.close("all")
        what = f"{kind} {arg}" if arg is not None else kind
        return [], [f"figure '{what}' skipped: {type(err).__name__}: {err}"]


def figure_data(results: Results) -> FigureData:
    """The colours and the fits the figures draw beside the clocks, from the analysis's results."""
    tables = results.tables
    return FigureData(
        colours=condition_colours(condition_order(tables.runs, tables.varying_keys)),
        noise=noise_predictions(results.noise),
        sigmoid=results.sigmoid,
        theory=results.theory,
    )


def plot_all(out, results: Results, formats=("png", "pdf"), jobs=1, dpi=DPI, warnings=None) -> list[str]:
    """Every condition's figures and the cross-condition ones from the analysis's ``results``, as
    independent tasks spread over ``jobs`` forked processes (the heaviest, the per-condition sets,
    first). A figure that fails is skipped; its warning is appended to ``warnings`` (a list) when given."""
    tables, data = results.tables, figure_data(results)
    tasks: list[tuple[str, object]] = [("condition", c) for c in sorted(tables.runs["condition"].unique())]
    tasks += cross_tasks(tables, results.exponents)
    if has_prediction(data.theory):
        tasks.append(("theory", None))
    if results.model_size is not None and len(results.model_size):
        tasks.append(("model_size", None))
    per_task = fork_map(_plot_one, tasks, jobs, shared=(out, results, data, formats, dpi))
    if warnings is not None:
        warnings.extend(w for _, ws in per_task for w in ws)
    return [name for names, _ in per_task for name in names]
