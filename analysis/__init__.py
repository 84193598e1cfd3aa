"""Fit the two clocks of a batch-size scaling study from logged runs.

The package in floors, each importing only the floors below it (``tests/core/test_import_graph.py``):

    data/       load (run directories | wandb offline | wandb API) -> RunRecord list + skipped list;
                clock_tables.build_tables -> runs table, evals table (interval bounds, failure onset,
                censoring causes, noise); symbols (config keys as symbols)
    fits/       exponents.fit_conditions (fit, gof, joint) -> exponents (interval-censored MLE +
                bootstrap, sensitivity bounds, joint model, lack of fit); competing / cross /
                noise_scale / sigmoid / hazard / theory / bcrit / which_b / ... -> the other tables;
                results.Results -> all of them in one typed object
    figures/    plots.plot_all(Results) -> PNG/PDF
    reporting/  markdown.write_report(Results) (every section in sections.py) -> report.md;
                html_report -> report.html; to_wandb -> a wandb analysis run

On top: :mod:`analysis.pipeline` (``fit_all`` -> ``Results``, ``write_tables`` -> the CSV files), the
command line :mod:`analysis.cli`, the notebook API :mod:`analysis.api`, :mod:`analysis.synthetic`
(synthetic sweeps) and :mod:`analysis._parallel` (forked workers, used by every floor).

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
from analysis.data.clock_tables import build_tables
from analysis.data.load import LoadResult, RunRecord, SkippedRun, load_source
from analysis.fits.fit import FitResult, fit_power_law
from analysis.fits.survival import aalen_johansen, kaplan_meier

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
