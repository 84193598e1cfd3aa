"""The exponents of every condition and clock, and comparisons between conditions (the Markdown and
stdout forms of these tables are in :mod:`analysis.reporting.markdown`).

``exponents.csv`` has one row per condition and clock (``target:<a>`` or ``failure``) with the
condition's config keys as columns and the fit of :func:`analysis.fits.fit.fit_power_law`. Next to every
exponent stand the **theory** reference values of the square-root learning-rate rule
(``lr.rule=power``, ``lr.power=0.5``); they are labelled as theory, not measurements:

* ``theory_noise_dominated`` = 0 and ``theory_curvature_dominated`` = 0.5 for target clocks: when
  gradient noise dominates, the square-root rule keeps progress per response constant in B (alpha -> 0);
  when curvature dominates (noise negligible), the step grows as eta ∝ sqrt(B) while the number of
  updates per response falls as 1/B, so progress per response falls as B**-0.5 and alpha -> 0.5. (A
  step that could not grow at all would give alpha -> 1: each update would buy the progress of one
  fixed step.)
* ``theory`` for the failure clock: if failure tracks the accumulated ``sum eta^2`` over updates, then
  with ``K/B`` updates per response and ``eta ∝ B**p`` the sum after R responses is ``∝ R * B**(2p-1)``,
  so ``R_F ∝ B**(1-2p)``: gamma = 0 under the square-root rule (given for any power rule ``p``).

The references are exponents on the ``responses`` clock; on other clocks they are left empty (on
``optimizer_steps``, for instance, every exponent is the responses one minus 1, since steps = responses
× K / B).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis._parallel import fork_map
from analysis.data.clock_tables import Tables, target_label
from analysis.fits.fit import FitResult, difference_interval, fit_power_law
from analysis.fits.gof import GoodnessOfFit, goodness_of_fit
from analysis.fits.joint import fit_joint
from analysis.fits.seed_blocks import resample_weights

STAT_COLUMNS = [
    "clock",
    "exponent",
    "ci_low",
    "ci_high",
    "n_runs",
    "n_censored",
    "n_censored_failure",
    "n_censored_budget",
    "n_interval",
    "n_left",
    "n_sizes",
    "sizes_unreached",
    "sizes_early",
    "prefactor",
    "sigma",
    "wald_low",
    "wald_high",
    "profile_low",
    "profile_high",
    "ci_method",
    "degenerate",
    "resampling",
    "inflation",
    "n_seeds_min",
    "n_resolution_limited",
    "n_incomplete",
    "n_boot",
    "n_boot_failed",
    "exponent_never",
    "ci_low_never",
    "ci_high_never",
    "exponent_at_failure",
    "ci_low_at_failure",
    "ci_high_at_failure",
    "sensitivity_low",
    "sensitivity_high",
    "exponent_joint",
    "ci_low_joint",
    "ci_high_joint",
    "rho_joint",
    "lof_stat",
    "lof_df",
    "lof_p",
    "aic_line",
    "aic_broken",
    "delta_aic",
    "knee",
    "slope_below",
    "slope_above",
    "clock_unit",
    "crossing",
    "failure_time",
    "interpolated",
    "theory_noise_dominated",
    "theory_curvature_dominated",
    "theory",
    "warnings",
]


def clocks_of(tables: Tables) -> list[str]:
    return [target_label(a) for a in tables.targets] + ["failure"]


def theory_values(clock: str, rule, power) -> tuple[float, float, float]:
    """``(noise_dominated, curvature_dominated, theory)`` reference exponents; NaN where none applies."""
    sqrt_rule = rule == "power" and power == 0.5
    if clock == "failure":
        return math.nan, math.nan, (1.0 - 2.0 * power) if rule == "power" and np.isfinite(power) else math.nan
    return (0.0, 0.5, math.nan) if sqrt_rule else (math.nan, math.nan, math.nan)


def budget_on_clock(runs: pd.DataFrame) -> np.ndarray:
    """Each run's budget (``train.max_responses``) on the analysis clock: exact on ``responses``, else
    scaled by the run's own clock per response at its end; the largest final clock of the condition when
    the budget is unknown."""
    budget = runs["budget"].to_numpy(float)
    final = runs["final_responses"].to_numpy(float)
    unit = runs["clock_unit"].iloc[0] if len(runs) else "responses"
    if unit != "responses":
        end = runs["failure"].where(runs["failure:censored"]).to_numpy(float)  # final clock of unfailed runs
        rate = np.nanmedian(end / final) if np.isfinite(end / final).any() else np.nan
        budget = budget * rate
    fallback = (
        np.nanmax(runs[[c for c in runs.columns if c == "failure"]].to_numpy(float)) if len(runs) else np.nan
    )
    return np.where(np.isfinite(budget) & (budget > 0), budget, fallback)


def _sensitivity_data(fitted: pd.DataFrame, clock: str, kind: str):
    """Times of ``clock`` with failed-first runs treated as never reaching (``never``: right-censored at
    the budget) or as reaching at their failure (``at_failure``: interval (last evaluation, failure])."""
    values = fitted[clock].to_numpy(float).copy()
    censored = fitted[f"{clock}:censored"].to_numpy(bool).copy()
    lower = fitted[f"{clock}:lower"].to_numpy(float).copy()
    failed_first = (fitted[f"{clock}:censored_by"] == "failure").to_numpy()
    if kind == "never":
        values[failed_first] = np.maximum(budget_on_clock(fitted)[failed_first], values[failed_first])
    else:
        # (last evaluation while at risk, failure time]: the crossing would have come right at the failure
        at = fitted["failure"].to_numpy(float)
        last = fitted[f"{clock}:last_below"].to_numpy(float) if f"{clock}:last_below" in fitted else values
        lower[failed_first] = np.minimum(last[failed_first], at[failed_first])
        values[failed_first] = at[failed_first]
        censored[failed_first] = False
    return values, censored, lower


def fit_conditions(
    tables: Tables,
    n_boot: int = 1000,
    seed: int = 0,
    joint_model: bool = True,
    jobs: int = 1,
    resample: str = "seeds",
) -> tuple[pd.DataFrame, dict[tuple[str, str], FitResult]]:
    """Fit every condition and clock; returns the exponents table and the fits (for plots).

    Within a condition every clock uses the same bootstrap resamples of runs (so the replicates of two
    targets are paired: :mod:`analysis.fits.cross` tests a common exponent with them). Target clocks are
    also fitted with the runs that failed first treated as never reaching the target (``*_never``) and
    as reaching it at their failure (``*_at_failure``): the two extreme assumptions about the unseen
    crossing of a failed run (Peterson 1976 bounds for dependent competing risks), whose intervals'
    envelope is ``sensitivity_low/high``. The cause-specific fit (``exponent``) treats failure as
    independent censoring; with ``joint_model`` the bivariate log-normal model of both clocks
    (:mod:`analysis.fits.joint`) estimates α with the correlation ρ of the two times (``*_joint``), for
    target clocks of conditions where some run failed first. Conditions are fitted in ``jobs`` forked
    processes (the results do not depend on it: each condition has its own bootstrap stream).
    ``resample``: ``seeds`` (seeds as clusters where they are blocks, conditions with the same seeds
    paired; :mod:`analysis.fits.seed_blocks`) or ``runs`` (within each size); ``resampling`` in the table says
    which each condition used.
    """
    runs = tables.runs
    key_columns = [c for c in tables.varying_keys if c in runs.columns]
    conditions = sorted(runs["condition"].unique())
    job = _FitJob(tables, n_boot, seed, joint_model, key_columns, resample)
    parts = fork_map(_fit_condition, conditions, jobs if len(conditions) > 1 else 1, shared=job)
    rows, fits = [], {}
    for part_rows, part_fits in parts:
        rows += part_rows
        fits.update(part_fits)
    return pd.DataFrame(rows, columns=["condition", *key_columns, *STAT_COLUMNS]), fits


@dataclass(frozen=True)
class _FitJob:
    """What every condition's fit of :func:`fit_conditions` shares."""

    tables: Tables
    n_boot: int
    seed: int
    joint_model: bool
    key_columns: list[str]
    resample: str


def early_sizes(fitted: pd.DataFrame, clock: str, opts) -> list[float]:
    """The sizes left out of one target's fit because most of their crossings come within the first
    ``opts.early_rollouts`` rollouts, all but the smallest such size (``opts.max_early_sizes``): a
    crossing within a few rollouts is bounded below by the R >= B floor, not by the learning curve,
    so no exponent may rest on such crossings at more than one size."""
    limit = getattr(opts, "max_early_sizes", 1) if opts is not None else 1
    rollouts = getattr(opts, "early_rollouts", 4) if opts is not None else 4
    if limit is None:
        return []
    early = []
    for b, runs in fitted.groupby("B", sort=True):
        reached = ~runs[f"{clock}:censored"].astype(bool) & (runs[clock] > 0)
        if reached.sum() > 0.5 * len(runs) and (runs.loc[reached, clock] <= rollouts * b).sum() > 0.5 * len(
            runs
        ):
            early.append(float(b))
    return early[limit:]


def condition_resamples(
    tables: Tables, condition: str, n_boot: int, seed: int, resample: str = "seeds"
) -> tuple[pd.DataFrame, np.ndarray | None, str, int | None, str]:
    """``(fitted runs, W [n_boot, n_fitted] or None, resampling used, clusters, note)`` of one condition:
    the bootstrap resamples every clock's fit of :func:`fit_conditions` uses (replicate ``r`` of
    ``FitResult.boot_slopes`` is the fit with weights ``W[r]``), so a statistic computed from the same
    rows of ``W`` is paired with the fit replicate by replicate (:mod:`analysis.fits.theory`)."""
    group = tables.runs[tables.runs["condition"] == condition]
    fitted = group[group["in_fit"]]
    if n_boot > 0 and len(fitted):
        return fitted, *resample_weights(fitted, n_boot, seed, resample, condition)
    return fitted, None, "none", None, ""


@dataclass
class _ClockFit:
    """One clock's fits within a condition (what its row of ``exponents.csv`` is made from)."""

    fit: FitResult
    early: list[float]
    sens: dict  # "never" / "at_failure" -> FitResult (target clocks with failed-first runs)
    joint: dict
    gof: GoodnessOfFit
    limited: int = 0
    by_failure: int = 0
    by_budget: int = 0
    n_incomplete: int = 0
    interpolated: bool = False  # some crossing of this target was interpolated (a rule's exact time)


def _fit_condition(condition: str, job: _FitJob) -> tuple[list[dict], dict]:
    """Every clock of one condition (the body of :func:`fit_conditions`)."""
    tables = job.tables
    group = tables.runs[tables.runs["condition"] == condition]
    rows, fits = [], {}
    fitted, W, used, clusters, note = condition_resamples(
        tables, condition, job.n_boot, job.seed, job.resample
    )
    explicit = tables.options is not None and tables.options.targets is not None
    declared = {float(t) for text in group.get("declared_targets", []) for t in str(text).split()}
    for clock in clocks_of(tables):
        is_target = clock != "failure"
        if is_target and not explicit and declared and float(clock.split(":", 1)[1]) not in declared:
            continue  # a target these runs do not time (another condition's eval.targets)
        if is_target and not explicit and not declared and "declared_targets" in group:
            continue  # the runs time no target at all (eval.targets: [])
        cf = _fit_clock(condition, clock, job, group, fitted, W, clusters, fits)
        resampling = used + (f" ({note})" if note else "")
        rows.append(_exponent_row(condition, clock, job, group.iloc[0], cf, resampling))
    return rows, fits


def _fit_clock(condition, clock, job: _FitJob, group, fitted, W, clusters, fits: dict) -> _ClockFit:
    """Fit one clock of one condition (and, for a target with failed-first runs, its two sensitivity
    fits and the joint model); the fits are added to ``fits``."""
    tables, n_boot = job.tables, job.n_boot
    crossing = tables.options.crossing if tables.options else "interval"
    is_target = clock != "failure"
    B = fitted["B"].to_numpy(float)
    lower = fitted[f"{clock}:lower"] if is_target or f"{clock}:lower" in fitted else None
    early = early_sizes(fitted, clock, tables.options) if is_target else []
    fc = fitted
    if early:  # the early sizes' runs leave this target's fits (their weights' columns are ignored)
        fc = fitted.assign(**{clock: fitted[clock].where(~fitted["B"].isin(early))})
    fit = fit_power_law(
        B, fc[clock], fc[f"{clock}:censored"], lower=lower, n_boot=n_boot, weights=W, n_clusters=clusters
    )
    _fit_warnings(fit, fc, fitted, group, clock, early, is_target)
    n_incomplete = int(fc["incomplete"].sum()) if "incomplete" in fitted else 0
    fits[(condition, clock)] = fit
    limited = by_failure = by_budget = 0
    sens = {}
    if is_target:
        observed = fc[~fc[f"{clock}:censored"] & (fc[clock] > 0)]
        limited = int(observed[f"{clock}:resolution_limited"].sum())
        if limited and crossing != "interval":
            fit.warnings.append(f"{limited} resolution-limited point(s)")
        cause = fc[f"{clock}:censored_by"]
        by_failure = int((cause == "failure").sum())
        by_budget = int((cause == "budget").sum())
        for kind in ("never", "at_failure"):
            if by_failure:
                v, c, lo = _sensitivity_data(fc, clock, kind)
                other = fit_power_law(B, v, c, lower=lo, n_boot=n_boot, weights=W, n_clusters=clusters)
                fits[(condition, f"{clock}:{kind}")] = other
            else:
                other = fit
            sens[kind] = other
    else:
        by_budget = int(fc["failure:censored"].sum())
        if "failure:resolution_limited" in fitted:
            limited = int((~fc["failure:censored"] & fc["failure:resolution_limited"]).sum())
    gof = (
        goodness_of_fit(B, fc[clock], fc[f"{clock}:censored"], lower)
        if np.isfinite(fit.exponent)
        else GoodnessOfFit(note="exponent not identified")
    )
    joint = {}
    if is_target and by_failure and job.joint_model:
        joint = fit_joint(
            B, fc[clock], fc[f"{clock}:censored"], fc[f"{clock}:lower"], fc["failure"], fc["failure:censored"]
        )
        if joint.get("message"):
            fit.warnings.append(f"joint model: {joint['message']}")
    interpolated = is_target and bool(fitted[f"{clock}:interpolated"].any())
    return _ClockFit(fit, early, sens, joint, gof, limited, by_failure, by_budget, n_incomplete, interpolated)


def _fit_warnings(fit: FitResult, fc, fitted, group, clock: str, early: list[float], is_target: bool) -> None:
    """The warnings about which runs a clock's fit used (step-0 crossings, early sizes, incomplete
    runs), in the order the report prints them."""
    if is_target:
        at_zero = int((~fc[f"{clock}:censored"] & (fc[clock] <= 0)).sum())
        if at_zero:
            fit.warnings.insert(
                0,
                f"target already met at the step-0 evaluation in {at_zero} of {len(fitted)} run(s): left out",
            )
    if early:
        fit.warnings.insert(
            0,
            f"B={', '.join(f'{b:g}' for b in early)} left out: most crossings there come within the "
            "first rollouts (near the R >= B floor); at most one such size enters a fit",
        )
    left_out = len(group) - len(fitted)
    if left_out:
        fit.warnings.append(f"{left_out} incomplete run(s) left out (--drop-incomplete)")
    n_incomplete = int(fc["incomplete"].sum()) if "incomplete" in fitted else 0
    if n_incomplete:
        fit.warnings.append(f"{n_incomplete} incomplete run(s) right-censored at their last evaluation")


def _exponent_row(condition: str, clock: str, job: _FitJob, first, cf: _ClockFit, resampling: str) -> dict:
    """One row of ``exponents.csv`` (``STAT_COLUMNS``)."""
    tables, fit, sens, joint, gof = job.tables, cf.fit, cf.sens, cf.joint, cf.gof
    is_target = clock != "failure"
    crossing = tables.options.crossing if tables.options else "interval"
    lows = [fit.ci_low] + [f.ci_low for f in sens.values()]
    highs = [fit.ci_high] + [f.ci_high for f in sens.values()]
    noise, curvature, theory = theory_values(clock, first.get("lr_rule"), first.get("lr_power"))
    if first["clock_unit"] != "responses":  # the references are exponents on the responses clock
        noise = curvature = theory = math.nan
    row = {"condition": condition}
    row.update({k: first[k] for k in job.key_columns})
    row.update(
        clock=clock,
        exponent=fit.exponent,
        ci_low=fit.ci_low,
        ci_high=fit.ci_high,
        n_runs=fit.n_runs,
        n_censored=fit.n_censored,
        n_censored_failure=cf.by_failure,
        n_censored_budget=cf.by_budget,
        n_interval=fit.n_interval,
        n_left=fit.n_left,
        n_sizes=fit.n_sizes,
        sizes_unreached=" ".join(f"{b:g}" for b in fit.sizes_unreached),
        sizes_early=" ".join(f"{b:g}" for b in cf.early),
        prefactor=fit.prefactor,
        sigma=fit.sigma,
        wald_low=fit.wald_low,
        wald_high=fit.wald_high,
        profile_low=fit.profile_low,
        profile_high=fit.profile_high,
        ci_method=fit.ci_method,
        degenerate=fit.degenerate,
        resampling=resampling,
        inflation=fit.inflation,
        n_seeds_min=fit.n_seeds_min,
        n_resolution_limited=cf.limited,
        n_incomplete=cf.n_incomplete,
        n_boot=fit.n_boot,
        n_boot_failed=fit.n_boot_failed,
        exponent_never=sens["never"].exponent if sens else math.nan,
        ci_low_never=sens["never"].ci_low if sens else math.nan,
        ci_high_never=sens["never"].ci_high if sens else math.nan,
        exponent_at_failure=sens["at_failure"].exponent if sens else math.nan,
        ci_low_at_failure=sens["at_failure"].ci_low if sens else math.nan,
        ci_high_at_failure=sens["at_failure"].ci_high if sens else math.nan,
        sensitivity_low=_nan_extreme(lows, np.nanmin),
        sensitivity_high=_nan_extreme(highs, np.nanmax),
        exponent_joint=joint.get("alpha", math.nan),
        ci_low_joint=joint.get("ci_low", math.nan),
        ci_high_joint=joint.get("ci_high", math.nan),
        rho_joint=joint.get("rho", math.nan),
        lof_stat=gof.lof_stat,
        lof_df=gof.lof_df,
        lof_p=gof.lof_p,
        aic_line=gof.aic_line,
        aic_broken=gof.aic_broken,
        delta_aic=gof.delta_aic,
        knee=gof.knee,
        slope_below=gof.slope_below,
        slope_above=gof.slope_above,
        clock_unit=first["clock_unit"],
        crossing=crossing if is_target else "exact",
        failure_time=tables.options.failure_time if tables.options else "onset",
        interpolated=cf.interpolated,
        theory_noise_dominated=noise,
        theory_curvature_dominated=curvature,
        theory=theory,
        warnings="; ".join(fit.warnings),
    )
    return row


def _nan_extreme(values: list[float], func) -> float:
    arr = np.asarray(values, float)
    return float(func(arr)) if (~np.isnan(arr)).any() else math.nan


def compare_conditions(
    exponents: pd.DataFrame, fits: dict, varying: list[str], all_pairs: bool = False
) -> pd.DataFrame:
    """Differences of exponents between conditions, per clock, with bootstrap and Wald intervals.

    By default only pairs of conditions that differ in exactly one config key are compared (e.g.
    ``lr.ref_lr`` 1e-6 vs 1e-5 with everything else equal); ``all_pairs`` compares every pair.
    """
    columns = [
        "clock",
        "condition_a",
        "condition_b",
        "differs_in",
        "value_a",
        "value_b",
        "exponent_a",
        "exponent_b",
        "difference",
        "ci_low",
        "ci_high",
        "p_boot",
        "wald_low",
        "wald_high",
    ]
    rows = []
    cols = [k for k in varying if k in exponents.columns]
    for clock, group in exponents.groupby("clock", sort=False):
        recs = group.to_dict("records")
        for a, b in itertools.combinations(recs, 2):
            differ = [k for k in cols if not _same(a[k], b[k])]
            if not all_pairs and len(differ) != 1:
                continue
            if len(differ) == 1 and _less(b[differ[0]], a[differ[0]]):
                a, b = b, a  # a is the smaller value of the key that changes
            fa, fb = fits[(a["condition"], clock)], fits[(b["condition"], clock)]
            low, high, p, se = difference_interval(fa, fb)
            diff = fb.exponent - fa.exponent
            rows.append(
                {
                    "clock": clock,
                    "condition_a": a["condition"],
                    "condition_b": b["condition"],
                    "differs_in": ",".join(differ),
                    "value_a": ",".join(str(a[k]) for k in differ),
                    "value_b": ",".join(str(b[k]) for k in differ),
                    "exponent_a": fa.exponent,
                    "exponent_b": fb.exponent,
                    "difference": diff,
                    "ci_low": low,
                    "ci_high": high,
                    "p_boot": p,
                    "wald_low": diff - 1.959963984540054 * se,
                    "wald_high": diff + 1.959963984540054 * se,
                }
            )
    return pd.DataFrame(rows, columns=columns)


def _less(a, b) -> bool:
    try:
        return float(a) < float(b)
    except (TypeError, ValueError):
        return False


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b or (a is None and b is None)
