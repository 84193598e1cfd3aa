"""Exponent tables, comparisons between conditions, and the files written into the output folder.

``exponents.csv`` has one row per condition and clock (``target:<a>`` or ``failure``) with the
condition's config keys as columns and the fit of :func:`analysis.fit.fit_power_law`. Next to every
exponent stand the **theory** reference values of the square-root learning-rate rule
(``lr.rule=power``, ``lr.power=0.5``); they are labelled as theory, not measurements:

* ``theory_noise_dominated`` = 0 and ``theory_curvature_dominated`` = 0.5 for target clocks: when
  gradient noise dominates, the square-root rule keeps progress per response constant in B (alpha -> 0);
  when curvature dominates, the step cannot grow with sqrt(B) and each update buys progress of a
  single step, so alpha -> 0.5;
* ``theory`` for the failure clock: if failure tracks the accumulated ``sum eta^2`` over updates, then
  with ``K/B`` updates per response and ``eta ∝ B**p`` the sum after R responses is ``∝ R * B**(2p-1)``,
  so ``R_F ∝ B**(1-2p)``: gamma = 0 under the square-root rule (given for any power rule ``p``).
"""

from __future__ import annotations

import itertools
import math
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from analysis._parallel import fork_map
from analysis.clocks import Tables, target_label
from analysis.fit import FitResult, difference_interval, fit_power_law, stratified_weights
from analysis.gof import GoodnessOfFit, goodness_of_fit
from analysis.joint import fit_joint
from analysis.load import SkippedRun
from analysis.symbols import SYMBOLS, symbol, value_text

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
    "prefactor",
    "sigma",
    "wald_low",
    "wald_high",
    "ci_method",
    "inflation",
    "n_seeds_min",
    "n_resolution_limited",
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


def condition_rng(seed: int, condition: str) -> np.random.Generator:
    """The bootstrap stream of one condition: keyed by its label, not by its position among others."""
    return np.random.default_rng([seed, zlib.crc32(condition.encode())])


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
        at = fitted["failure"].to_numpy(float)
        lower[failed_first] = values[failed_first]
        values[failed_first] = np.maximum(at[failed_first], values[failed_first])
        censored[failed_first] = False
    return values, censored, lower


def fit_conditions(
    tables: Tables,
    n_boot: int = 1000,
    seed: int = 0,
    interpolated: bool = False,
    joint_model: bool = True,
    jobs: int = 1,
) -> tuple[pd.DataFrame, dict[tuple[str, str], FitResult]]:
    """Fit every condition and clock; returns the exponents table and the fits (for plots).

    Within a condition every clock uses the same bootstrap resamples of runs (so the replicates of two
    targets are paired: :mod:`analysis.cross` tests a common exponent with them). Target clocks are
    also fitted with the runs that failed first treated as never reaching the target (``*_never``) and
    as reaching it at their failure (``*_at_failure``): the two extreme assumptions about the unseen
    crossing of a failed run (Peterson 1976 bounds for dependent competing risks), whose intervals'
    envelope is ``sensitivity_low/high``. The cause-specific fit (``exponent``) treats failure as
    independent censoring; with ``joint_model`` the bivariate log-normal model of both clocks
    (:mod:`analysis.joint`) estimates α with the correlation ρ of the two times (``*_joint``), for
    target clocks of conditions where some run failed first. Conditions are fitted in ``jobs`` forked
    processes (the results do not depend on it: each condition has its own bootstrap stream).
    """
    global _FIT_STATE
    runs = tables.runs
    key_columns = [c for c in tables.varying_keys if c in runs.columns]
    conditions = sorted(runs["condition"].unique())
    _FIT_STATE = (tables, n_boot, seed, interpolated, joint_model, key_columns)
    try:
        parts = fork_map(_fit_condition, conditions, jobs if len(conditions) > 1 else 1)
    finally:
        _FIT_STATE = ()
    rows, fits = [], {}
    for part_rows, part_fits in parts:
        rows += part_rows
        fits.update(part_fits)
    return pd.DataFrame(rows, columns=["condition", *key_columns, *STAT_COLUMNS]), fits


_FIT_STATE: tuple = ()  # (tables, n_boot, seed, interpolated, joint_model, key_columns) for forked workers


def _fit_condition(condition: str) -> tuple[list[dict], dict]:
    """Every clock of one condition (the body of :func:`fit_conditions`)."""
    tables, n_boot, seed, interpolated, joint_model, key_columns = _FIT_STATE
    runs = tables.runs
    group = runs[runs["condition"] == condition]
    crossing = tables.options.crossing_mode if tables.options else "interval"
    rows, fits = [], {}
    fitted = group[group["in_fit"]]
    first = group.iloc[0]
    B = fitted["B"].to_numpy(float)
    W = None
    if n_boot > 0 and len(fitted):
        uniq = np.unique(B)
        W = stratified_weights(np.searchsorted(uniq, B), n_boot, condition_rng(seed, condition))
    for clock in clocks_of(tables):
        is_target = clock != "failure"
        lower = fitted[f"{clock}:lower"] if is_target else None
        fit = fit_power_law(
            B, fitted[clock], fitted[f"{clock}:censored"], lower=lower, n_boot=n_boot, weights=W
        )
        if is_target:
            at_zero = int((~fitted[f"{clock}:censored"] & (fitted[clock] <= 0)).sum())
            if at_zero:
                fit.warnings.insert(
                    0,
                    f"target already met at the step-0 evaluation in {at_zero} of {len(fitted)} run(s): left out",
                )
        left_out = len(group) - len(fitted)
        if left_out:
            fit.warnings.append(f"{left_out} incomplete run(s) left out (--include-incomplete)")
        fits[(condition, clock)] = fit
        limited = by_failure = by_budget = 0
        sens = {}
        if is_target:
            observed = fitted[~fitted[f"{clock}:censored"] & (fitted[clock] > 0)]
            limited = int(observed[f"{clock}:resolution_limited"].sum())
            if limited and crossing != "interval":
                fit.warnings.append(f"{limited} resolution-limited point(s)")
            cause = fitted[f"{clock}:censored_by"]
            by_failure, by_budget = int((cause == "failure").sum()), int((cause == "budget").sum())
            for kind in ("never", "at_failure"):
                if by_failure:
                    v, c, lo = _sensitivity_data(fitted, clock, kind)
                    other = fit_power_law(B, v, c, lower=lo, n_boot=n_boot, weights=W)
                    fits[(condition, f"{clock}:{kind}")] = other
                else:
                    other = fit
                sens[kind] = other
        else:
            by_budget = int(fitted["failure:censored"].sum())
        gof = (
            goodness_of_fit(B, fitted[clock], fitted[f"{clock}:censored"], lower if is_target else None)
            if np.isfinite(fit.exponent)
            else GoodnessOfFit(note="exponent not identified")
        )
        joint = {}
        if is_target and by_failure and joint_model:
            joint = fit_joint(
                B,
                fitted[clock],
                fitted[f"{clock}:censored"],
                fitted[f"{clock}:lower"],
                fitted["failure"],
                fitted["failure:censored"],
            )
            if joint.get("message"):
                fit.warnings.append(f"joint model: {joint['message']}")
        lows = [fit.ci_low] + [f.ci_low for f in sens.values()]
        highs = [fit.ci_high] + [f.ci_high for f in sens.values()]
        noise, curvature, theory = theory_values(clock, first.get("lr_rule"), first.get("lr_power"))
        row = {"condition": condition}
        row.update({k: first[k] for k in key_columns})
        row.update(
            clock=clock,
            exponent=fit.exponent,
            ci_low=fit.ci_low,
            ci_high=fit.ci_high,
            n_runs=fit.n_runs,
            n_censored=fit.n_censored,
            n_censored_failure=by_failure,
            n_censored_budget=by_budget,
            n_interval=fit.n_interval,
            n_left=fit.n_left,
            n_sizes=fit.n_sizes,
            sizes_unreached=" ".join(f"{b:g}" for b in fit.sizes_unreached),
            prefactor=fit.prefactor,
            sigma=fit.sigma,
            wald_low=fit.wald_low,
            wald_high=fit.wald_high,
            ci_method=fit.ci_method,
            inflation=fit.inflation,
            n_seeds_min=fit.n_seeds_min,
            n_resolution_limited=limited,
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
            interpolated=(interpolated or crossing == "interpolate") and is_target,
            theory_noise_dominated=noise,
            theory_curvature_dominated=curvature,
            theory=theory,
            warnings="; ".join(fit.warnings),
        )
        rows.append(row)
    return rows, fits


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


def _f(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float) and math.isinf(value):
        return "∞" if value > 0 else "-∞"
    if isinstance(value, float):
        return (
            f"{value:.{digits}g}" if abs(value) >= 1000 or (0 < abs(value) < 1e-3) else f"{value:.{digits}f}"
        )
    return str(value)


def exponent_table(exponents: pd.DataFrame, varying: list[str]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the human-readable exponent table (varying keys only, named by symbol)."""
    header = [
        *([symbol(k) for k in varying] or ["condition"]),
        "clock",
        "exponent",
        "95% CI",
        "Wald CI",
        "runs",
        "censored (failure/budget)",
        "sizes",
        "theory (sqrt rule)",
    ]
    body = []
    for r in exponents.to_dict("records"):
        if r["clock"] == "failure":
            theory = f"γ≈{_f(r['theory'], 2)}" if np.isfinite(r["theory"]) else "–"
        elif np.isfinite(r["theory_noise_dominated"]):
            theory = f"α→{_f(r['theory_noise_dominated'], 1)} (noise) / {_f(r['theory_curvature_dominated'], 1)} (curv.)"
        else:
            theory = "–"
        body.append(
            [
                *([value_text(r[k]) for k in varying] if varying else [str(r["condition"])]),
                r["clock"],
                _f(r["exponent"]),
                f"[{_f(r['ci_low'])}, {_f(r['ci_high'])}]" + (" (Wald)" if r["ci_method"] == "wald" else ""),
                f"[{_f(r['wald_low'])}, {_f(r['wald_high'])}]",
                str(r["n_runs"]),
                f"{r['n_censored']} ({r['n_censored_failure']}/{r['n_censored_budget']})",
                str(r["n_sizes"]),
                theory,
            ]
        )
    return header, body


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    esc = [[c.replace("|", "\\|") for c in row] for row in [header, *rows]]
    lines = ["| " + " | ".join(esc[0]) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in esc[1:]]
    return "\n".join(lines)


def plain_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


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
    """Write ``report.md`` and return its text. ``extra``: ``incidence_summary``, ``common``, ``noise``,
    ``sigmoid`` tables when computed."""
    extra = extra or {}
    runs = tables.runs
    crossing = options.get("crossing", "interval")
    n_limited = int(sum(runs[f"{target_label(a)}:resolution_limited"].sum() for a in tables.targets))
    lines = [
        "# Two-clock scaling fits",
        "",
        f"Source: `{source}`; clock: **{options.get('clock', 'responses')}**; crossings: **{crossing}**; "
        f"failure time: **{options.get('failure_time', 'onset')}**; bootstrap resamples: {options.get('n_boot')}; "
        f"targets: {', '.join(f'{a:g}' for a in tables.targets)}.",
        "",
        f"- runs analysed: {len(runs)} (in fits: {int(runs['in_fit'].sum())}, "
        f"incomplete: {int(runs['incomplete'].sum())}); skipped: {len(skipped)}",
        f"- conditions: {runs['condition'].nunique()} (keys that differ: "
        f"{', '.join(f'{symbol(k)} ({k})' for k in tables.varying_keys) or 'none'})",
        f"- resolution-limited target points: {n_limited}"
        + (
            " (interval-censored in the fit, so they widen intervals instead of biasing)"
            if crossing == "interval"
            else ""
        )
        + f"; runs disagreeing with summary.json: {int(runs['summary_mismatch'].sum())}",
    ]
    if crossing == "interpolate":
        lines.append("- responses-to-target **linearly interpolated** between evaluations (not the default)")
    if crossing == "exact":
        lines.append(
            "- responses-to-target taken at the first evaluation at/above the target as if exact (not the default)"
        )
    lines += [f"- note: {m}" for m in messages]
    header, body = exponent_table(exponents, tables.varying_keys)
    lines += [
        "",
        "## Exponents",
        "",
        "R_T(B) = c·B^α per target and R_F(B) = d·B^γ, censored log-normal maximum likelihood (crossings "
        "interval-censored between evaluations, runs that never reach a target or never fail right-censored); "
        "95 % CI by bootstrap over seeds within each B. Censored runs are counted by cause: the run failed "
        "first / it ended (budget) without the event. The last column is **theory**, not a measurement: "
        "the square-root rule's reference values (α → 0 noise-dominated, α → 0.5 curvature-dominated; "
        "γ ≈ 0 when failure tracks Σ η²).",
        "",
        markdown_table(header, body),
    ]
    unreached = exponents[exponents["sizes_unreached"].astype(str).str.len() > 0]
    if len(unreached):
        lines += ["", "### Sizes where no run reached the target", ""]
        lines += [
            f"- **warning** `{r.condition}` {r.clock}: no run reached it at B = {r.sizes_unreached}; only "
            "censored lower bounds there — the fitted line is extrapolated (dotted in the figures), not drawn "
            "through data"
            for r in unreached.itertuples()
        ]
    targets_rows = exponents[(exponents["clock"] != "failure") & (exponents["n_censored_failure"] > 0)]
    if len(targets_rows):
        lines += [
            "",
            "## Competing risks: sensitivity of α to runs that failed first",
            "",
            "The cause-specific fit (α) treats a run that failed before reaching the target as censored at its "
            "last evaluation, which assumes failure and slow learning are independent. Bounds: **never** — "
            "the failed runs would never have reached it (right-censored at the budget); **at failure** — they "
            "would have reached it right at their failure onset (interval between their last evaluation and "
            "the onset). The envelope of the three 95 % intervals is the sensitivity interval. The joint model "
            "fits both clocks as one bivariate log-normal draw with correlation ρ (`analysis/joint.py`, Wald "
            "interval): a model-based correction for dependent failure, valid if that form holds.",
            "",
        ]
        rows = [
            [
                r.condition,
                r.clock,
                f"{r.n_censored_failure}/{r.n_runs}",
                f"{_f(r.exponent)} [{_f(r.ci_low)}, {_f(r.ci_high)}]",
                f"{_f(r.exponent_never)} [{_f(r.ci_low_never)}, {_f(r.ci_high_never)}]",
                f"{_f(r.exponent_at_failure)} [{_f(r.ci_low_at_failure)}, {_f(r.ci_high_at_failure)}]",
                f"[{_f(r.sensitivity_low)}, {_f(r.sensitivity_high)}]",
                f"{_f(r.exponent_joint)} [{_f(r.ci_low_joint)}, {_f(r.ci_high_joint)}], ρ = {_f(r.rho_joint, 2)}",
            ]
            for r in targets_rows.itertuples()
        ]
        lines.append(
            markdown_table(
                [
                    "condition",
                    "clock",
                    "failed first",
                    "α cause-specific",
                    "α never",
                    "α at failure",
                    "envelope",
                    "α joint model",
                ],
                rows,
            )
        )
    inc = extra.get("incidence_summary")
    if inc is not None and len(inc):
        lines += [
            "",
            "## Reaching the target before failing (Aalen–Johansen)",
            "",
            "Per condition, B and target: runs that reached it first, failed first, or ended by budget; the "
            "cumulative incidence of reaching it (before failing) and of failing first at the end of follow-up. "
            "Curves in `incidence.csv` and the `incidence_*` figures.",
            "",
        ]
        rows = [
            [
                r.condition,
                f"{r.B:g}",
                f"{r.target:g}",
                str(r.n_runs),
                str(r.n_reached),
                str(r.n_failed_first),
                str(r.n_censored_budget + r.n_censored_incomplete),
                _f(r.cif_reached_end),
                _f(r.cif_failed_end),
            ]
            for r in inc.itertuples()
        ]
        lines.append(
            markdown_table(
                [
                    "condition",
                    "B",
                    "target",
                    "runs",
                    "reached",
                    "failed first",
                    "censored (budget)",
                    "CIF reached",
                    "CIF failed",
                ],
                rows,
            )
        )
    common = extra.get("common")
    if common is not None and len(common):
        lines += [
            "",
            "## A common α across targets",
            "",
            "Minimum-distance (GLS) combination of the target exponents with their joint bootstrap covariance; "
            "χ² tests that every target has the same α (`analysis/cross.py`).",
            "",
        ]
        rows = [
            [
                r.condition,
                str(r.targets),
                str(r.exponents) if isinstance(r.exponents, str) else "–",
                f"{_f(r.exponent_common)} [{_f(r.ci_low)}, {_f(r.ci_high)}]",
                f"{_f(r.chi2)} (df {r.df if r.df == r.df else '–'})",
                _f(r.p_common),
                str(r.note) if isinstance(r.note, str) else "",
            ]
            for r in common.itertuples()
        ]
        lines.append(
            markdown_table(["condition", "targets", "α per target", "common α", "χ²", "p", "note"], rows)
        )
    noise = extra.get("noise")
    if noise is not None and len(noise) and "noise_agrees" in exponents.columns:
        lines += [
            "",
            "## Noise-scale prediction beside the fit",
            "",
            "B_noise = tr Σ / |G|² (McCandlish et al. 2018) from the logged instruments, per response; with K "
            "minibatches per rollout the predicted local slope of log R_T against log B is "
            "(B/K/B_noise)/(1 + B/K/B_noise), and its least-squares slope over the sizes of the fit is the "
            "implied exponent. They agree when the 95 % intervals overlap.",
            "",
        ]
        cond = noise[noise["level"] == "condition"].set_index("condition")
        rows = []
        for r in exponents[exponents["clock"] != "failure"].itertuples():
            if r.condition not in cond.index:
                continue
            n = cond.loc[r.condition]
            verdict = {True: "agree", False: "**disagree**"}.get(r.noise_agrees, "–")
            rows.append(
                [
                    r.condition,
                    r.clock,
                    f"{_f(n['b_noise'])} [{_f(n['b_noise_low'])}, {_f(n['b_noise_high'])}]",
                    _f(n["b_crit_rollout"]),
                    f"{_f(r.noise_exponent)} [{_f(r.noise_low)}, {_f(r.noise_high)}]",
                    f"{_f(r.exponent)} [{_f(r.ci_low)}, {_f(r.ci_high)}]",
                    verdict,
                ]
            )
        if rows:
            lines.append(
                markdown_table(
                    ["condition", "clock", "B_noise", "K·B_noise", "implied α", "fitted α", "verdict"], rows
                )
            )
        else:
            lines.append(
                "No run logged usable noise instruments (`noise/trace_cov`, `noise/grad_norm_sq`; NaN at K = 1)."
            )
    lines += [
        "",
        "## Goodness of fit",
        "",
        "Lack of fit: likelihood ratio of the line against a free mean per size (χ², df = sizes − 2). "
        "ΔAIC = AIC(broken power law with a knee B_k) − AIC(line): below −2 favours a knee (a critical "
        "batch size), above 2 the line. Residual plots: `residuals_*`.",
        "",
    ]
    rows = [
        [
            r.condition,
            r.clock,
            f"{_f(r.lof_stat)} (df {r.lof_df})" if np.isfinite(r.lof_stat) else "–",
            _f(r.lof_p),
            _f(r.delta_aic),
            _f(r.knee),
            f"{_f(r.slope_below)} / {_f(r.slope_above)}" if np.isfinite(r.knee) else "–",
        ]
        for r in exponents.itertuples()
    ]
    lines.append(
        markdown_table(
            [
                "condition",
                "clock",
                "lack-of-fit LR",
                "p",
                "ΔAIC (knee − line)",
                "knee B_k",
                "slopes below/above",
            ],
            rows,
        )
    )
    sig = extra.get("sigmoid")
    if sig is not None and len(sig):
        pooled = sig[sig["level"] == "B"]
        lines += [
            "",
            "## Accuracy against compute (ScaleRL sigmoid)",
            "",
            "R(C) = R0 + (A − R0)/(1 + (C_mid/C)^b) on the evaluations of all seeds of each (condition, B); "
            "95 % bootstrap intervals over runs. A is the asymptote, b and C_mid the efficiency. Per-run fits "
            "in `sigmoid.csv`.",
            "",
        ]
        rows = [
            [
                r.condition,
                f"{r.B:g}",
                _f(r.R0),
                f"{_f(r.A)} [{_f(r.A_low)}, {_f(r.A_high)}]",
                f"{_f(r.b)} [{_f(r.b_low)}, {_f(r.b_high)}]",
                f"{_f(r.C_mid)} [{_f(r.C_mid_low)}, {_f(r.C_mid_high)}]",
                "yes" if r.converged else f"no: {r.message}",
            ]
            for r in pooled.itertuples()
        ]
        lines.append(markdown_table(["condition", "B", "R0", "A", "b", "C_mid", "converged"], rows))
    warned = exponents[exponents["warnings"].astype(bool)]
    if len(warned):
        lines += ["", "### Warnings", ""]
        lines += [f"- `{r.condition}` {r.clock}: {r.warnings}" for r in warned.itertuples()]
    if len(comparisons):
        lines += ["", "## Comparisons between conditions", ""]
        rows = [
            [
                r.clock,
                f"{r.differs_in}: {r.value_a} → {r.value_b}",
                _f(r.exponent_a),
                _f(r.exponent_b),
                _f(r.difference),
                f"[{_f(r.ci_low)}, {_f(r.ci_high)}]",
                "<0.001" if r.p_boot < 0.001 else _f(r.p_boot),
            ]
            for r in comparisons.itertuples()
        ]
        lines.append(markdown_table(["clock", "change", "a", "b", "b − a", "95% CI", "p (bootstrap)"], rows))
    if skipped:
        lines += ["", "## Skipped runs", ""]
        lines += [f"- `{s.run}`: {s.reason}" for s in skipped]
    flagged = runs[runs["notes"].astype(bool)]
    if len(flagged):
        lines += ["", "## Runs with notes", ""]
        lines += [f"- `{r.run}` ({r.state}): {r.notes}" for r in flagged.itertuples()]
    if plots:
        lines += ["", "## Plots", ""]
        lines += [f"![{p}]({p})" for p in plots if p.endswith(".png")]
    lines += [
        "",
        "## Symbols",
        "",
        markdown_table(
            ["symbol", "config key", "meaning"], [[SYMBOLS[k][0], k, SYMBOLS[k][2]] for k in SYMBOLS]
        ),
        "",
        "## Method",
        "",
        "A target crossing lies between the last evaluation below the target and the first at or above it and "
        "enters the likelihood as interval-censored (left-censored when it is the first evaluation after step 0); "
        "runs that never reach it are right-censored at their last evaluation. Responses-to-failure is the clock "
        "at the failure onset (or the detection, `--failure-time`); runs that never fail are right-censored at "
        "their final clock. Both are recomputed from metrics.jsonl and checked against summary.json. The fit is "
        "log R = log c + α log B + σ ε, ε ~ N(0,1) (log-normal accelerated failure time). Bootstrap replicates "
        "are inflated by the small-sample factors of `analysis/fit.py`; see `docs/analysis.md`.",
        "",
    ]
    text = "\n".join(lines)
    (out / "report.md").write_text(text)
    return text
