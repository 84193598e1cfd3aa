"""The Python API for notebooks: the common path of ``rlvr-analyze`` as five calls.

::

    from analysis import api

    runs = api.load_runs("runs/reference")                 # folders or "wandb:ENTITY/PROJECT"
    runs.frame                                         # DataFrame: one row per run (config flattened)
    tables = api.clocks_table(runs, crossing="isotonic")   # R_T per target and R_F per run, censoring
    fits = api.fit_conditions(tables, n_boot=1000)     # fits.exponents: the exponents.csv table
    one = api.fit_condition(tables, "lr.ref_lr=3e-05")     # the same fit for one condition
    api.plot_exponents(tables, fits, "lr.ref_lr", out="figures")  # the α/γ against η_ref figure

These names, their keyword arguments and the columns of the tables they return are the stable
interface (``docs/analysis.md``, section *Python API*; ``docs/analysis_api.ipynb`` runs them). They are
thin wrappers over the modules the CLI uses (:mod:`analysis.data.load`, :mod:`analysis.data.clock_tables`,
:mod:`analysis.fits.exponents`, :mod:`analysis.figures.plots`), so a notebook gets the same numbers and figures as
``rlvr-analyze`` with the same options: same bootstrap seed, same condition labels, same files.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from analysis.data.clock_tables import ClockOptions, Tables, build_tables
from analysis.data.load import LoadResult, RunRecord, SkippedRun, flatten_config, load_source
from analysis.fits.exponents import fit_conditions as _fit_conditions
from analysis.fits.fit import FitResult

__all__ = [
    "Fits",
    "Runs",
    "clocks_table",
    "fit_condition",
    "fit_conditions",
    "load_runs",
    "plot_condition",
    "plot_exponents",
]


@dataclass
class Runs:
    """Runs read from one source: the records (config + metrics rows), what was skipped and why."""

    source: str
    records: list[RunRecord]
    skipped: list[SkippedRun] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)

    @property
    def frame(self) -> pd.DataFrame:
        """One row per run: ``run``, ``name``, ``group``, ``source``, ``path``, ``state``, ``rows``
        (metrics rows), then every config key flattened (``lr.ref_lr``, ``rollout.prompts_per_rollout``, …)."""
        rows = [
            {
                "run": r.run,
                "name": r.name,
                "group": r.group,
                "source": r.source,
                "path": r.path,
                "state": (r.status or {}).get("state"),
                "rows": len(r.rows),
                **flatten_config(r.config),
            }
            for r in self.records
        ]
        return pd.DataFrame(rows)

    @property
    def metrics(self) -> pd.DataFrame:
        """Every metrics row of every run (``metrics.jsonl`` / wandb history), with a ``run`` column."""
        return pd.DataFrame([{"run": r.run, **row} for r in self.records for row in r.rows])

    def __len__(self) -> int:
        return len(self.records)


@dataclass
class Fits:
    """The exponents of each condition and clock: ``exponents`` is the ``exponents.csv`` table
    (``condition``, the varying keys, ``clock``, ``exponent``, ``ci_low``, ``ci_high``, ``n_runs``, …;
    docs/analysis.md lists every column) and ``results`` the fits per ``(condition, clock)``."""

    exponents: pd.DataFrame
    results: dict[tuple[str, str], FitResult]


def load_runs(
    source: str | Path,
    *,
    group: str | None = None,
    tags: Iterable[str] = (),
    filters: dict[str, str] | None = None,
    prefer: str = "auto",
    base_url: str | None = None,
    jobs: int = 1,
) -> Runs:
    """Read runs from a folder of run directories (or wandb offline runs) or ``wandb:ENTITY/PROJECT``.

    ``group``/``tags``/``filters`` select runs as ``--group``/``--tag``/``--filter KEY=VALUE`` do;
    ``prefer`` is ``--from`` (``auto``, ``dirs``, ``wandb-offline``). Unreadable runs are listed in
    ``skipped``, never raised.
    """
    loaded: LoadResult = load_source(
        str(source),
        prefer=prefer,
        group=group,
        tags=tuple(tags),
        filters=filters,
        base_url=base_url,
        jobs=jobs,
    )
    return Runs(str(source), loaded.runs, loaded.skipped, loaded.messages)


def clocks_table(
    runs: Runs | Sequence[RunRecord],
    *,
    clock: str = "responses",
    targets: Iterable[float] | None = None,
    crossing: str = "interval",
    failure_time: str = "onset",
    ignore_keys: Iterable[str] = (),
    condition_keys: Iterable[str] | None = None,
    include_incomplete: bool = False,
    horizon: float | str | None = "auto",
) -> Tables:
    """Responses-to-target and responses-to-failure of every run, with its condition.

    ``tables.runs`` has one row per run (``condition``, ``B``, ``seed``, ``target:<a>`` and
    ``target:<a>:censored``/``:lower``, ``failure``/``failure:censored``, ``in_fit``, …) and
    ``tables.evals`` one row per evaluation. Options as the CLI's: ``crossing`` is a crossing rule's
    name (:mod:`analysis.data.crossings`: ``interval``, the default, ``isotonic``, ``exact``,
    ``interpolate``, or a registered one: ``--crossing``); ``horizon`` is the responses up to which
    crossings and failures are read (``"auto"``: the horizon the runs record, ``--horizon``).
    """
    records = runs.records if isinstance(runs, Runs) else list(runs)
    opts = ClockOptions(
        clock=clock,
        targets=tuple(targets) if targets is not None else None,
        crossing=crossing,
        failure_time=failure_time,
        include_incomplete=include_incomplete,
        condition_keys=tuple(condition_keys) if condition_keys is not None else None,
        ignore_keys=tuple(ignore_keys),
        horizon=horizon,
    )
    return build_tables(records, opts)


def fit_conditions(
    tables: Tables, *, n_boot: int = 1000, seed: int = 0, joint_model: bool = True, jobs: int = 1
) -> Fits:
    """Fit R_T(B) = c·B^α per target and R_F(B) = d·B^γ for every condition (censored log-normal
    likelihood, bootstrap over seeds within each B: ``--bootstrap``, ``--seed``, ``--no-joint``)."""
    exponents, results = _fit_conditions(tables, n_boot=n_boot, seed=seed, joint_model=joint_model, jobs=jobs)
    return Fits(exponents, results)


def fit_condition(
    tables: Tables, condition: str, *, n_boot: int = 1000, seed: int = 0, joint_model: bool = True
) -> Fits:
    """The fits of one condition (a label of ``tables.runs["condition"]``): the same numbers as its rows
    of :func:`fit_conditions` (each condition has its own bootstrap stream)."""
    runs = tables.runs
    if condition not in set(runs["condition"]):
        known = ", ".join(sorted(runs["condition"].unique()))
        raise ValueError(f"no condition {condition!r}; the conditions are: {known}")
    evals = tables.evals
    one = replace(
        tables,
        runs=runs[runs["condition"] == condition],
        evals=evals[evals["condition"] == condition] if len(evals) else evals,
    )
    return fit_conditions(one, n_boot=n_boot, seed=seed, joint_model=joint_model)


def _paths(out: Path, names: list[str]) -> list[Path]:
    return [out / name for name in names]


def plot_exponents(
    tables: Tables,
    fits: Fits,
    key: str = "lr.ref_lr",
    *,
    out: str | Path = ".",
    formats: Sequence[str] = ("png",),
    dpi: int = 150,
) -> list[Path]:
    """The exponents against a config key that varies between conditions, α per target and γ with
    95 % intervals; for ``lr.ref_lr`` the paper-style ``alpha_gamma_vs_eta_ref`` figure. Writes the
    files into ``out`` (as ``rlvr-analyze`` does) and returns their paths."""
    from analysis.figures.plots_cross import plot_cross  # matplotlib only when drawing

    if key not in tables.varying_keys:
        raise ValueError(f"{key!r} does not vary between conditions; varying: {tables.varying_keys}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    names = plot_cross(
        out, tables, fits.exponents, fits.results, tuple(formats), dpi=dpi, only=[("key", key)]
    )
    return _paths(out, names)


def plot_condition(
    tables: Tables,
    fits: Fits,
    condition: str,
    *,
    out: str | Path = ".",
    formats: Sequence[str] = ("png",),
    dpi: int = 150,
) -> list[Path]:
    """One condition's figures (R_T and R_F against B with the fitted lines, accuracy curves, survival,
    incidence, residuals) into ``out``; returns their paths."""
    from analysis.figures.plots import FigureData, condition_colours, condition_order
    from analysis.figures.plots import plot_condition as _plot_condition

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    colours = condition_colours(condition_order(tables.runs, tables.varying_keys))
    names = _plot_condition(
        out, condition, tables, fits.results, tuple(formats), FigureData(colours=colours), dpi=dpi
    )
    return _paths(out, names)
