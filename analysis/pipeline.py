"""The analysis as one pipeline: tables → fits → tables on disk (``rlvr-analyze``, docs/analysis.md).

:func:`fit_all` runs every fit of ``rlvr-analyze`` on the clock tables and returns them in one typed
:class:`~analysis.fits.results.Results`; :func:`write_tables` writes its CSV files. ``analysis/cli.py`` reads
the source and the options, calls these, draws the figures (:func:`analysis.figures.plots.plot_all`) and writes
the report (:func:`analysis.reporting.markdown.write_report`), both from the same ``Results``; ``rlvr_study`` and :mod:`analysis.api` call the same
:func:`analysis.data.clock_tables.build_tables` and :func:`analysis.fits.exponents.fit_conditions` underneath.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis.data.clock_tables import Tables
from analysis.data.load import RunRecord
from analysis.fits.bcrit import bcrit_tables
from analysis.fits.competing import incidence_tables
from analysis.fits.cross import common_exponent_table
from analysis.fits.exponents import compare_conditions, fit_conditions
from analysis.fits.gain import gain_table
from analysis.fits.hazard import hazard_tables
from analysis.fits.noise_scale import agreement, noise_table
from analysis.fits.recommend import recommend_table
from analysis.fits.results import Results
from analysis.fits.seed_blocks import seed_correlations
from analysis.fits.sigmoid import sigmoid_tables
from analysis.fits.theory import theory_table
from analysis.fits.trend import trend_table
from analysis.fits.trend_size import size_rows, size_trend_table
from analysis.fits.which_b import which_b_table


@dataclass(frozen=True)
class Settings:
    """How the fits run (``rlvr-analyze``'s options that change numbers)."""

    n_boot: int = 2000
    seed: int = 0
    joint_model: bool = True
    jobs: int = 1
    resample: str = "seeds"
    compare_all: bool = False
    throughput: list | None = None  # [(B, responses/s)] for which_b.csv; None: the runs' own clocks
    sigmoid_boot: int | None = 200  # None: no sigmoid fits
    gain_targets: tuple[float, ...] = ()


def fit_all(tables: Tables, records: list[RunRecord], settings: Settings) -> Results:
    """Every fit of the analysis on ``tables`` (built from ``records``), in the order each needs."""
    s = settings
    exponents, fits = fit_conditions(
        tables,
        n_boot=s.n_boot,
        seed=s.seed,
        joint_model=s.joint_model,
        jobs=s.jobs,
        resample=s.resample,
    )
    correlations = seed_correlations(tables, fits)
    resampling = dict(zip(exponents["condition"], exponents["resampling"]))
    noise = noise_table(tables, n_boot=s.n_boot, seed=s.seed)
    which_b = which_b_table(tables, fits, s.throughput)
    exponents = agreement(exponents, noise)
    theory = theory_table(tables, exponents, fits, n_boot=s.n_boot, seed=s.seed, resample=s.resample)
    bcrit_replicates: dict = {}
    bcrit, bcrit_theory = bcrit_tables(
        tables,
        exponents,
        fits,
        s.n_boot,
        s.seed,
        s.resample,
        s.jobs,
        {r.run: r.rows for r in records},
        replicates=bcrit_replicates,
    )
    comparisons = compare_conditions(exponents, fits, tables.varying_keys, all_pairs=s.compare_all)
    incidence, incidence_summary = incidence_tables(tables)
    common = common_exponent_table(tables, fits)
    trend = trend_table(
        exponents,
        fits,
        common,
        tables.varying_keys,
        tables=tables,
        n_boot=s.n_boot,
        seed=s.seed,
        resample=s.resample,
    )
    along_n = size_trend_table(
        tables,
        exponents,
        fits,
        common,
        bcrit,
        bcrit_replicates,
        n_boot=s.n_boot,
        seed=s.seed,
        resample=s.resample,
    )
    if len(along_n):
        trend = pd.concat([trend, along_n], ignore_index=True) if len(trend) else along_n
    gain = gain_table(
        records,
        tables,
        s.gain_targets,
        n_boot=s.n_boot,
        seed=s.seed,
        gain_boot=s.sigmoid_boot or 0,
        resample=s.resample,
    )
    hazard = hazard_tables(tables, exponents, n_boot=s.n_boot, seed=s.seed, resample=s.resample)
    sigmoid = (
        None
        if s.sigmoid_boot is None
        else sigmoid_tables(tables, n_boot=s.sigmoid_boot, seed=s.seed, jobs=s.jobs)
    )
    return Results(
        tables=tables,
        exponents=exponents,
        fits=fits,
        comparisons=comparisons,
        incidence=incidence,
        incidence_summary=incidence_summary,
        common=common,
        trend=trend,
        gain=gain,
        hazard=hazard,
        noise=noise,
        theory=theory,
        bcrit=bcrit,
        bcrit_theory=bcrit_theory,
        recommend=recommend_table(tables, fits),
        correlations=correlations,
        which_b=which_b,
        sigmoid=sigmoid,
        model_size=size_rows(tables, exponents, common, bcrit),
        resampling=resampling,
    )


def write_tables(r: Results, out: Path, skipped: list, gain: bool = False) -> None:
    """The CSV (and parquet) files of ``docs/analysis.md``'s output list; ``gain.csv`` only when gain
    targets were asked for."""
    r.tables.runs.to_csv(out / "runs.csv", index=False)
    r.tables.runs.to_parquet(out / "runs.parquet", index=False)
    r.tables.evals.to_csv(out / "evals.csv", index=False)
    frames = {
        "exponents": r.exponents,
        "comparisons": r.comparisons,
        "incidence": r.incidence,
        "incidence_summary": r.incidence_summary,
        "common_exponent": r.common,
        "trend": r.trend,
        "hazard": r.hazard[0],
        "hazard_fit": r.hazard[1],
        "noise_scale": r.noise,
        "theory": r.theory,
        "bcrit": r.bcrit,
        "bcrit_theory": r.bcrit_theory,
        "recommend": r.recommend,
        "seed_correlations": r.correlations,
        "which_b": r.which_b,
    }
    if gain:
        frames["gain"] = r.gain
    if r.sigmoid is not None:
        frames["sigmoid"] = r.sigmoid
    for name, frame in frames.items():
        frame.to_csv(out / f"{name}.csv", index=False)
    pd.DataFrame([s.__dict__ for s in skipped], columns=["run", "path", "reason"]).to_csv(
        out / "skipped.csv", index=False
    )
