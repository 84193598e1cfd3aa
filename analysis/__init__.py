"""Fit the two clocks of a batch-size scaling study from logged runs.

Pipeline (pure functions over tables, docs/design.md §3 and §6)::

    load (run directories | wandb offline | wandb API) -> RunRecord list + skipped list
    clocks.build_tables                                 -> runs table, evals table (interval bounds,
                                                           failure onset, censoring causes, noise)
    report.fit_conditions (fit, gof, joint)             -> exponents (interval-censored MLE + bootstrap,
                                                           sensitivity bounds, joint model, lack of fit)
    competing / cross / noise_scale / sigmoid           -> incidences, common α, noise-scale prediction,
                                                           accuracy-vs-compute fits
    report / plots                                      -> CSV, Markdown, PNG/PDF

The package never imports the trainer; the run-directory contract of docs/design.md §6 is the interface.
Entry point: ``rlvr-analyze SOURCE --out DIR`` (:mod:`analysis.cli`); from Python, the stable API of
:mod:`analysis.api` (``load_runs``, ``clocks_table``, ``fit_conditions``, ``fit_condition``,
``plot_exponents``, ``plot_condition``), re-exported here.
"""

from analysis import api
from analysis.api import (
    Fits,
    Runs,
    clocks_table,
    fit_condition,
    fit_conditions,
    load_runs,
    plot_condition,
    plot_exponents,
)
from analysis.clocks import build_tables
from analysis.fit import FitResult, aalen_johansen, fit_power_law, kaplan_meier
from analysis.load import LoadResult, RunRecord, SkippedRun, load_source

__all__ = [
    "FitResult",
    "Fits",
    "Runs",
    "api",
    "clocks_table",
    "fit_condition",
    "fit_conditions",
    "load_runs",
    "plot_condition",
    "plot_exponents",
    "LoadResult",
    "RunRecord",
    "SkippedRun",
    "aalen_johansen",
    "build_tables",
    "fit_power_law",
    "kaplan_meier",
    "load_source",
]
