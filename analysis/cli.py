"""``rlvr-analyze``: exponents, tables, plots and a report from run directories or wandb.

Examples::

    rlvr-analyze runs/two_clock --out results/two_clock
    rlvr-analyze wandb:my-entity/rlvr-scaling --group two_clock --out results/two_clock
    rlvr-analyze runs/two_clock --clock tokens --targets 0.4 0.5 --ignore-keys train.max_responses
    rlvr-analyze runs/two_clock --out results/two_clock --to-wandb my-entity/rlvr-scaling

Writes into ``--out``: ``runs.csv``/``runs.parquet`` (one row per run), ``evals.csv`` (one row per
evaluation), ``exponents.csv`` (one row per condition and clock), ``comparisons.csv``,
``incidence.csv``/``incidence_summary.csv`` (competing risks), ``common_exponent.csv``,
``noise_scale.csv``, ``theory.csv``, ``bcrit.csv``, ``bcrit_theory.csv``, ``recommend.csv``,
``sigmoid.csv``, ``which_b.csv``, ``seed_correlations.csv``,
``trend.csv``, ``hazard.csv``/``hazard_fit.csv`` (the failure clock per rollout), ``skipped.csv``,
``report.md``, ``report.html`` (the report as one self-contained page with the figures inline and the
provenance) and the PNG/PDF figures
(``docs/analysis.md`` lists every file and column). Exit code 0 even when runs were skipped (they are listed in
``skipped.csv`` and the report); 2 when the source holds no readable run.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings
from pathlib import Path

from analysis._parallel import default_jobs
from analysis.data.clock_tables import CLOCK_CHOICES, ClockOptions, build_tables
from analysis.data.crossings import crossing_names
from analysis.data.load import load_source
from analysis.fits.results import Results
from analysis.fits.which_b import parse_throughput, throughput_point
from analysis.pipeline import Settings, fit_all, write_tables
from analysis.reporting.html_report import provenance, write_html_report
from analysis.reporting.markdown import ReportOptions, source_messages, write_report
from analysis.reporting.text import exponent_table, plain_table


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlvr-analyze",
        description="Fit responses-to-target and responses-to-failure as power laws in the rollout size B.",
    )
    p.add_argument("source", help="folder of run directories (a sweep's output) or wandb:ENTITY/PROJECT")
    p.add_argument(
        "--out", type=Path, default=None, help="output folder (default: analysis-out/<source name>)"
    )
    p.add_argument(
        "--clock", choices=CLOCK_CHOICES, default="responses", help="clock the events are measured on"
    )
    p.add_argument("--targets", type=float, nargs="+", default=None, help="targets (default: eval.targets)")
    p.add_argument(
        "--gain-targets",
        type=float,
        nargs="+",
        default=[],
        metavar="F",
        help="also fit α at each condition's R0 + F*(A - R0), F in (0, 1): a fraction of its achievable "
        "gain (gain.csv; docs/analysis.md)",
    )
    crossing = p.add_mutually_exclusive_group()
    crossing.add_argument(
        "--crossing",
        choices=crossing_names(),
        default="interval",
        metavar="NAME",
        help="the crossing rule that reads R_T from each run's evaluations (analysis.data.crossings: "
        f"{', '.join(crossing_names())}; default interval: interval-censored between evaluations)",
    )
    for flag, name, text in (
        ("--interpolate", "interpolate", "R_T interpolated linearly between evaluations (exact)"),
        ("--exact-crossings", "exact", "R_T = first evaluation at/above the target, as if exact"),
        ("--isotonic", "isotonic", "interval-censored crossing of the isotonic-smoothed accuracy curve"),
    ):
        crossing.add_argument(
            flag, dest="crossing", action="store_const", const=name, help=f"--crossing {name}: {text}"
        )
    p.add_argument(
        "--failure-time",
        choices=("onset", "detection"),
        default="onset",
        help="failure clock at the failure onset (default) or at the detector's decision",
    )
    p.add_argument(
        "--resolution-frac", type=float, default=0.25, help="flag R_T when spacing or B > frac*R_T"
    )
    p.add_argument(
        "--horizon",
        type=_horizon_arg,
        default="auto",
        metavar="auto|none|N|FILE.json",
        help="responses up to which crossings and failures are read (default auto: the horizon the runs "
        "record, per condition the eval.horizon its runs set, else each run's stop (train.max_responses, "
        "or train.stop_at_responses below it); "
        "FILE.json: condition label -> responses, or -> {B: responses})",
    )
    p.add_argument(
        "--continuous-brackets",
        action="store_true",
        help="bracket crossings as (previous evaluation, evaluation] instead of in whole rollouts",
    )
    incomplete = p.add_mutually_exclusive_group()
    incomplete.add_argument(
        "--drop-incomplete",
        action="store_true",
        help="leave running/preempted runs out of the fits (default: right-censored at their last evaluation)",
    )
    incomplete.add_argument(
        "--include-incomplete", action="store_true", help="(the default) fit incomplete runs as censored"
    )
    p.add_argument(
        "--condition-keys", nargs="+", default=None, metavar="KEY", help="keys defining a condition"
    )
    p.add_argument(
        "--ignore-keys", nargs="+", default=[], metavar="KEY", help="keys left out of the condition"
    )
    _fit_arguments(p)
    _output_arguments(p)
    return p


def _fit_arguments(p: argparse.ArgumentParser) -> None:
    """The options of the fits (bootstrap, resampling, sigmoid, joint model, throughput)."""
    p.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples (0: Wald intervals only)")
    p.add_argument(
        "--resample",
        choices=("seeds", "runs"),
        default="seeds",
        help="bootstrap unit: seeds as clusters where every seed has runs at every size (conditions with "
        "the same seeds paired), else runs within each size; 'runs' forces the within-size bootstrap",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed of the bootstrap")
    p.add_argument(
        "--sigmoid-bootstrap", type=int, default=200, help="bootstrap resamples of the sigmoid fits (0: none)"
    )
    p.add_argument(
        "--throughput", nargs="+", type=throughput_point, default=None, metavar="B:RPS",
        help="responses/s at B on your hardware for which_b.csv (default: the runs' wall_seconds clock)",
    )  # fmt: skip
    p.add_argument("--no-sigmoid", action="store_true", help="skip the accuracy-vs-compute sigmoid fits")
    p.add_argument(
        "--no-joint", action="store_true", help="skip the joint (correlated) model of the two clocks"
    )


def _output_arguments(p: argparse.ArgumentParser) -> None:
    """The options of the outputs and the source (figures, wandb, filters, jobs)."""
    p.add_argument("--dpi", type=int, default=300, help="resolution of PNG figures")
    p.add_argument("--compare-all", action="store_true", help="compare every pair of conditions")
    p.add_argument("--no-plots", action="store_true", help="skip the figures")
    p.add_argument("--formats", nargs="+", default=["png", "pdf"], help="figure formats")
    p.add_argument(
        "--from",
        dest="prefer",
        choices=("auto", "dirs", "wandb-offline"),
        default="auto",
        help="for a folder: run directories, wandb offline runs, or auto (run directories if any)",
    )
    p.add_argument("--group", default=None, help="only runs of this wandb group / run.sweep")
    p.add_argument("--tag", action="append", default=[], help="only runs with this wandb tag (repeatable)")
    p.add_argument(
        "--filter", action="append", default=[], metavar="KEY=VALUE", help="only runs whose config matches"
    )
    p.add_argument("--base-url", default=None, help="wandb server for wandb: sources (self-hosted)")
    p.add_argument("--jobs", type=int, default=default_jobs(), help="processes for reading and plotting")
    p.add_argument(
        "--to-wandb",
        nargs="?",
        const="",
        default=None,
        metavar="ENTITY/PROJECT",
        help="also log the analysis as a wandb run (job_type=analysis) in the sweep's group "
        "(default project: the wandb source's, else the runs' logger.project, else rlvr-scaling)",
    )
    p.add_argument("--quiet", action="store_true", help="print only the exponents table")


def run(args: argparse.Namespace, api=None) -> int:
    start = time.perf_counter()
    try:
        opts = clock_options(args)
    except ValueError as err:
        print(f"rlvr-analyze: {err}", file=sys.stderr)
        return 2
    filters = {}
    for item in args.filter:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"rlvr-analyze: --filter expects KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        filters[key] = value
    loaded = load_source(
        args.source,
        prefer=args.prefer,
        group=args.group,
        tags=tuple(args.tag),
        filters=filters,
        base_url=args.base_url,
        api=api,
        jobs=args.jobs,
    )
    tables = build_tables(loaded.runs, opts)
    skipped = loaded.skipped + tables.skipped
    messages = loaded.messages + tables.messages
    if tables.runs.empty:
        print(f"rlvr-analyze: no readable run in {args.source}", file=sys.stderr)
        for m in messages:
            print(f"  {m}", file=sys.stderr)
        for s in skipped[:20]:
            print(f"  skipped {s.run}: {s.reason}", file=sys.stderr)
        return 2
    out = args.out or Path("analysis-out") / (Path(args.source.split(":")[-1]).name or "source")
    out.mkdir(parents=True, exist_ok=True)

    messages = messages + source_messages(tables)
    results = fit_all(tables, loaded.runs, settings(args))
    write_tables(results, out, skipped, gain=bool(args.gain_targets))
    plots, bcrit_figures, figure_warnings = _figures(out, results, args)
    messages = messages + figure_warnings
    options = ReportOptions(
        clock=args.clock,
        crossing=tables.options.crossing,
        failure_time=args.failure_time,
        n_boot=args.bootstrap,
    )
    report_text = write_report(out, args.source, results, skipped, messages, options, plots, bcrit_figures)
    prov = provenance(args.source, loaded.runs, skipped, {**vars(args), "out": str(out)})
    write_html_report(out, report_text, prov)
    _print_summary(args, results, messages, skipped, out, start)
    if args.to_wandb is not None:
        from analysis.reporting.to_wandb import cli_log  # wandb only when asked

        return cli_log(args, out, loaded, results, plots + bcrit_figures, prov)
    return 0


def clock_options(args: argparse.Namespace) -> ClockOptions:
    """The clock tables' options from the command line (ValueError: an unreadable ``--horizon`` file)."""
    horizon = args.horizon
    if isinstance(horizon, str) and horizon.endswith(".json"):
        horizon = read_horizons(horizon)
    return ClockOptions(
        clock=args.clock,
        targets=tuple(args.targets) if args.targets else None,
        crossing=args.crossing,
        failure_time=args.failure_time,
        resolution_frac=args.resolution_frac,
        include_incomplete=not args.drop_incomplete,
        condition_keys=tuple(args.condition_keys) if args.condition_keys else None,
        ignore_keys=tuple(args.ignore_keys),
        horizon=horizon,
        discrete=not args.continuous_brackets,
    )


def settings(args: argparse.Namespace) -> Settings:
    """The fits' settings from the command line."""
    return Settings(
        n_boot=args.bootstrap,
        seed=args.seed,
        joint_model=not args.no_joint,
        jobs=args.jobs,
        resample=args.resample,
        compare_all=args.compare_all,
        throughput=parse_throughput(args.throughput) if args.throughput else None,
        sigmoid_boot=None if args.no_sigmoid else args.sigmoid_bootstrap,
        gain_targets=tuple(args.gain_targets),
    )


def _figures(out: Path, results: Results, args) -> tuple[list[str], list[str], list[str]]:
    """``(figures, B_crit figures, warnings)``: every figure (none with ``--no-plots``); one that cannot
    be drawn is skipped with a warning and never stops the tables or the report."""
    if args.no_plots:
        return [], [], []
    from analysis.figures.plots import plot_all  # matplotlib only when figures are wanted
    from analysis.figures.plots_bcrit import plot_bcrit

    formats, figure_warnings = tuple(args.formats), []
    tables = results.tables
    plots = plot_all(out, results, formats, jobs=args.jobs, dpi=args.dpi, warnings=figure_warnings)
    plots += _hazard_figure(out, tables, results.hazard, formats, args.dpi, figure_warnings)
    bcrit_figures: list[str] = []
    try:
        bcrit_figures = plot_bcrit(out, results.bcrit, formats, args.dpi)
    except Exception as err:  # noqa: BLE001 - a figure that cannot be drawn never stops the analysis
        figure_warnings.append(f"figure 'b_crit_from_clocks' skipped: {type(err).__name__}: {err}")
    for w in figure_warnings:
        print(f"rlvr-analyze: warning: {w}", file=sys.stderr)
    return plots, bcrit_figures, figure_warnings


def _print_summary(args, results: Results, messages, skipped, out: Path, start: float) -> None:
    """The exponents table on stdout, widened intervals on stderr, and (without ``--quiet``) the notes,
    skipped runs, warnings, common α and failure per rollout."""
    exponents, tables = results.exponents, results.tables
    header, rows = exponent_table(exponents, tables.varying_keys)
    print(plain_table(header, rows))
    degenerate = exponents[exponents["degenerate"].fillna("").astype(str).str.len() > 0]
    for r in degenerate.itertuples():  # printed even with --quiet: the interval is not the bootstrap's
        print(
            f"rlvr-analyze: warning: {r.condition} {r.clock}: {r.degenerate}; interval widened to "
            f"[{r.ci_low:.3g}, {r.ci_high:.3g}] ({r.ci_method})",
            file=sys.stderr,
        )
    if args.quiet:
        return
    for m in messages:
        print(f"note: {m}")
    if skipped:
        print(f"skipped {len(skipped)} run(s) (see skipped.csv):")
        for s in skipped[:10]:
            print(f"  {s.run}: {s.reason}")
    warned = exponents[exponents["warnings"].astype(bool)]
    for r in warned.itertuples():
        print(f"warning: {r.condition} {r.clock}: {r.warnings}")
    for r in results.common.itertuples():
        if r.p_common == r.p_common:
            print(
                f"common α across targets, {r.condition}: {r.exponent_common:.3f} "
                f"[{r.ci_low:.3f}, {r.ci_high:.3f}], test of equality p = {r.p_common:.3g}"
            )
    for line in _hazard_summary(results.hazard):
        print(line)
    n_fit = int(tables.runs["in_fit"].sum())
    print(
        f"{len(tables.runs)} runs ({n_fit} in fits), {tables.runs['condition'].nunique()} condition(s); "
        f"wrote {out} in {time.perf_counter() - start:.1f} s"
    )


def _hazard_summary(hazard) -> list[str]:
    """One line per condition: the cloglog slope and the sizes with failures at the first updates."""
    table, fit, notes = hazard
    lines = [f"note: {n}" for n in notes]
    for r in fit[fit["sample"] == "all"].itertuples() if len(fit) else []:
        part = table[(table["condition"] == r.condition) & (table["first_update_failures"] > 0)]
        early = (
            ", ".join(f"B={b.B:g}: {b.first_update_failures}/{b.runs}" for b in part.itertuples()) or "none"
        )
        lines.append(
            f"failure per rollout, {r.condition}: cloglog slope b = {r.slope:.3g} "
            f"[{r.slope_low:.3g}, {r.slope_high:.3g}] (γ = 1 − b for a constant hazard); "
            f"failed in the first 2 rollouts: {early}"
        )
    return lines


def _hazard_figure(out, tables, hazard, formats, dpi, figure_warnings: list[str]) -> list[str]:
    """``hazard_per_rollout`` (:mod:`analysis.figures.plots_hazard`); a figure that fails is skipped with a
    warning, as in :func:`analysis.figures.plots.plot_all`."""
    from analysis.figures.plot_style import condition_colours, condition_order
    from analysis.figures.plots_hazard import plot_hazard

    try:
        colours = condition_colours(condition_order(tables.runs, tables.varying_keys))
        return plot_hazard(out, hazard[0], hazard[1], colours, formats, dpi)
    except Exception as err:  # noqa: BLE001 - one figure never stops the tables or the report
        figure_warnings.append(f"figure 'hazard_per_rollout' skipped: {type(err).__name__}: {err}")
        return []


def _horizon_arg(text: str) -> float | str | None:
    """``--horizon``: ``auto``, ``none``, a positive number of responses, or a JSON file mapping
    condition labels to horizons (``rlvr-study`` writes ``horizons.json`` into its folder)."""
    if text.lower() in ("auto", "none"):
        return None if text.lower() == "none" else "auto"
    if text.endswith(".json"):
        return text  # read by read_horizons before any run is read
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"auto, none, a number of responses or a .json file, got {text!r}"
        ) from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"a positive number of responses, got {text!r}")
    return value


def read_horizons(path: str) -> tuple:
    """``--horizon FILE.json``: ``{condition label: responses}``, where a condition's responses may be
    given per rollout size as ``{B: responses}`` (``rlvr-study`` with ``horizon_per_size``), as
    ``ClockOptions.horizon`` takes it (``((label, responses or ((B, responses), ...)), ...)``);
    ValueError names the file and what is wrong with it."""
    import json

    try:
        mapping = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"--horizon: cannot read {path}: {err}") from None

    def positive(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf

    def size(k) -> float:
        try:
            return float(k)
        except ValueError:
            return math.nan

    def value(v):
        if isinstance(v, dict) and v and all(positive(size(k)) and positive(h) for k, h in v.items()):
            return tuple(sorted((size(k), float(h)) for k, h in v.items()))
        return float(v) if positive(v) else None

    out = {str(k): value(v) for k, v in mapping.items()} if isinstance(mapping, dict) else None
    if out is None or any(v is None for v in out.values()):
        raise ValueError(
            f"--horizon: {path} must map condition labels to positive responses, or to "
            "{rollout size B: positive responses}"
        )
    return tuple(sorted(out.items()))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with warnings.catch_warnings():
        # third-party deprecation and performance notices are not the user's business in a normal run
        # (the analysis's own warnings are printed lines, not Python warnings); RLVR_ANALYZE_WARNINGS=1
        # shows them
        if not os.environ.get("RLVR_ANALYZE_WARNINGS"):
            warnings.simplefilter("ignore")
        return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
