"""Every section of ``report.md``, each a function returning its lines (:func:`analysis.reporting.markdown.write_report`
puts them in order). The fitting modules return tables only; their sections are rendered here, from those
tables: the exponents, intervals, competing risks, incidences, failure per rollout, the common α, trends,
gain targets, the noise scale, the theory, B_crit, the recommendation, goodness of fit, sigmoids, seeds as
blocks, comparisons, which B, skipped and flagged runs, figures, symbols and method."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.data.clock_tables import target_label
from analysis.data.symbols import SYMBOLS, symbol, value_text
from analysis.fits.bcrit_theory import SOURCES as BCRIT_SOURCES
from analysis.fits.bcrit_theory import bound_text
from analysis.fits.theory import SOURCES as THEORY_SOURCES
from analysis.fits.trend import EXPONENT_BOUND, FEW_DISTINCT, MIN_VERDICT_RESAMPLES
from analysis.fits.which_b import OBJECTIVES
from analysis.reporting.text import exponent_table, markdown_table
from analysis.reporting.text import number_text as _f


def _num(v) -> float:
    """A table value as a float (non-finite values may be written as strings); NaN if not a number."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def summary_lines(source, tables, skipped, messages, options) -> list[str]:
    """The header: source, options, counts of runs and what was left out, notes."""
    runs = tables.runs
    crossing = options.crossing
    n_limited = int(sum(runs[f"{target_label(a)}:resolution_limited"].sum() for a in tables.targets))
    lines = [
        "# Two-clock scaling fits",
        "",
        f"Source: `{source}`; clock: **{options.clock}**; crossings: **{crossing}**; "
        f"failure time: **{options.failure_time}**; bootstrap resamples: {options.n_boot}; "
        f"targets: {', '.join(f'{a:g}' for a in tables.targets)}.",
        "",
        f"- runs analysed: {len(runs)} (in fits: {int(runs['in_fit'].sum())}, "
        f"incomplete: {int(runs['incomplete'].sum())}, of which in fits as right-censored: "
        f"{int((runs['incomplete'] & runs['in_fit']).sum())}); skipped: {len(skipped)}",
        f"- conditions: {runs['condition'].nunique()} (keys that differ: "
        f"{', '.join(f'{symbol(k)} ({k})' for k in tables.varying_keys) or 'none'})",
        f"- resolution-limited target points: {n_limited}"
        + (
            " (interval-censored in the fit, so they widen intervals instead of biasing)"
            if crossing in ("interval", "isotonic")
            else ""
        )
        + f"; runs disagreeing with summary.json: {int(runs['summary_mismatch'].sum())}",
    ]
    if "failure:resolution_limited" in runs:
        failed = ~runs["failure:censored"].astype(bool)
        lines.append(
            f"- failures: {int(failed.sum())}; their onset is interval-censored (the detector's window and "
            f"rollout before the onset row); resolution-limited failure times (interval over 1/4 of the "
            f"onset, or within the first rollouts): {int((failed & runs['failure:resolution_limited']).sum())}"
        )
    if crossing == "interpolate":
        lines.append("- responses-to-target **linearly interpolated** between evaluations (not the default)")
    if crossing == "exact":
        lines.append(
            "- responses-to-target taken at the first evaluation at/above the target as if exact (not the default)"
        )
    lines += [f"- note: {m}" for m in messages]
    return lines


def exponents_lines(exponents, tables) -> list[str]:
    """The exponent table with its method and the theory column."""
    lines: list[str] = []
    header, body = exponent_table(exponents, tables.varying_keys)
    lines += [
        "",
        "## Exponents",
        "",
        "R_T(B) = c·B^α per target and R_F(B) = d·B^γ, censored log-normal maximum likelihood (crossings "
        "interval-censored between evaluations, runs that never reach a target or never fail right-censored); "
        "95 % CI by bootstrap over seeds within each B. Censored runs are counted by cause: the run failed "
        "first / it ended (budget) without the event. The last column is **theory**, not a measurement: "
        "the square-root rule's reference values (α → 0 when gradient noise dominates; α → 0.5 when "
        "curvature dominates and noise is negligible, the step growing as η ∝ √B while updates per response "
        "fall as 1/B; γ ≈ 0 when failure tracks Σ η²).",
        "",
        markdown_table(header, body),
    ]
    return lines


def degenerate_lines(exponents) -> list[str]:
    """Intervals the bootstrap alone could not give (widened by the profile likelihood)."""
    lines: list[str] = []
    if "degenerate" in exponents:
        degenerate = exponents[exponents["degenerate"].fillna("").astype(str).str.len() > 0]
        if len(degenerate):
            lines += ["", "### Intervals the bootstrap alone could not give", ""]
            lines += [
                f"- **warning** `{r.condition}` {r.clock}: {r.degenerate}; reported interval "
                f"[{_f(r.ci_low)}, {_f(r.ci_high)}] = bootstrap ∪ profile likelihood "
                f"[{_f(r.profile_low)}, {_f(r.profile_high)}] ({r.ci_method})"
                for r in degenerate.itertuples()
            ]
    return lines


def unreached_lines(exponents) -> list[str]:
    """Sizes where no run reached a target: the line is extrapolated there."""
    lines: list[str] = []
    unreached = exponents[exponents["sizes_unreached"].astype(str).str.len() > 0]
    if len(unreached):
        lines += ["", "### Sizes where no run reached the target", ""]
        lines += [
            f"- **warning** `{r.condition}` {r.clock}: no run reached it at B = {r.sizes_unreached}; only "
            "censored lower bounds there — the fitted line is extrapolated (dotted in the figures), not drawn "
            "through data"
            for r in unreached.itertuples()
        ]
    return lines


def competing_lines(exponents) -> list[str]:
    """Sensitivity of α to runs that failed first: bounds and the joint model."""
    lines: list[str] = []
    targets_rows = exponents[(exponents["clock"] != "failure") & (exponents["n_censored_failure"] > 0)]
    if len(targets_rows):
        lines += [
            "",
            "## Competing risks: sensitivity of α to runs that failed first",
            "",
            "The cause-specific fit (α) treats a run that failed before reaching the target as censored at its "
            "failure time (a crossing seen after the onset counts as failed first, as in the incidence below), "
            "which assumes failure and slow learning are independent. Bounds: **never** — "
            "the failed runs would never have reached it (right-censored at the budget); **at failure** — they "
            "would have reached it right at their failure onset (interval between their last evaluation and "
            "the onset). The envelope of the three 95 % intervals is the sensitivity interval. The joint model "
            "fits both clocks as one bivariate log-normal draw with correlation ρ (`analysis/fits/joint.py`, Wald "
            "interval): a sensitivity analysis, not a bias fix — no run shows its time to target after it "
            "failed, so ρ is identified only by the bivariate normal form, and α joint is right only if that "
            "form holds (under other dependence see docs/analysis.md).",
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
    return lines


def incidence_lines(inc) -> list[str]:
    """The Aalen–Johansen incidences per condition, B and target."""
    lines: list[str] = []
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
    return lines


def hazard_lines(hazard) -> list[str]:
    """The failure clock per rollout: hazard per size, first-update failures against η(B), the
    cloglog slope and γ apart from the first-update outcome (``analysis/fits/hazard.py``)."""
    if hazard is None:
        return []
    table, fit, notes = hazard
    lines = [
        "",
        "## The failure clock per rollout",
        "",
        "The policy changes only at rollout boundaries, so a failure happens at a whole rollout: a run whose "
        "onset is at k·B responses survived k − 1 rollouts and failed in the k-th; an interval-censored onset "
        "gives a range of rollouts, over which the likelihood sums. h(B) is the constant hazard per rollout "
        "(95 % likelihood-ratio interval); **unstable at the first updates** is a failure onset within the first "
        "2 rollouts (≤ 2·B responses), a per-run outcome (Clopper–Pearson interval), shown against the per-step "
        "rate η(B); *possible* counts the onsets whose interval reaches into those 2 rollouts. The hazard after "
        "the first updates is that of the runs that survived them, counted from rollout 3. Detectors: which one "
        "ended each failed run. Tables: `hazard.csv`, `hazard_fit.csv`.",
        "",
    ]
    lines += [f"- note: {n}" for n in notes]
    if table is None or table.empty:
        return lines
    rows = [
        [
            r.condition,
            f"{r.B:g}",
            _f(r.eta),
            str(r.runs),
            str(r.rollouts_at_risk),
            str(r.failures),
            f"{_f(r.hazard)} [{_f(r.ci_low)}, {_f(r.ci_high)}]",
            f"{r.first_update_failures}/{r.runs} = {_f(r.first_update_frac, 2)} "
            f"[{_f(r.first_update_low, 2)}, {_f(r.first_update_high, 2)}]",
            str(r.first_update_possible),
            f"{_f(r.hazard_after_first_updates)} [{_f(r.after_ci_low)}, {_f(r.after_ci_high)}]",
            str(r.detectors) if isinstance(r.detectors, str) and r.detectors else "–",
        ]
        for r in table.itertuples()
    ]
    header = [
        "condition",
        "B",
        "η(B)",
        "runs",
        "rollouts at risk",
        "failures",
        "h per rollout",
        "failed in first 2 rollouts",
        "possible",
        "h after first updates",
        "detectors",
    ]
    lines.append(markdown_table(header, rows))
    return lines + hazard_fit_lines(fit)


def hazard_fit_lines(fit) -> list[str]:
    """The cloglog slope across sizes and gamma apart from the first-update outcome (``hazard_fit.csv``)."""
    lines: list[str] = []
    if fit is not None and len(fit):
        lines += [
            "",
            "cloglog(h) = a + b·log B across sizes (maximum likelihood; b: profile-likelihood 95 % interval, and "
            "the percentile bootstrap, seed blocks where they apply, else runs within each size: `resampling` in "
            "`hazard_fit.csv`; with 3 runs per size the bootstrap covers about 83 %, the profile 93 %, "
            "docs/failure.md). For a hazard constant in time, b = 1 − γ "
            "(the integrated hazard of a rollout is λ(B)·B): γ = 1 − b is that reading. γ (log-normal) is "
            "the fit of `exponents.csv` on all runs (unchanged) and, on the runs that survived the first "
            "updates, the same model left-truncated at 2·B (profile-likelihood interval).",
            "",
        ]
        fit_rows = [
            [
                r.condition,
                "all runs" if r.sample == "all" else "after first updates",
                f"{r.n_failures}/{r.n_runs}",
                f"{_f(r.slope)} [{_f(r.slope_low)}, {_f(r.slope_high)}]",
                f"[{_f(r.boot_low)}, {_f(r.boot_high)}]" if r.n_boot else "–",
                f"{_f(r.gamma_constant_hazard)} [{_f(r.gamma_constant_hazard_low)}, "
                f"{_f(r.gamma_constant_hazard_high)}]",
                f"{_f(r.gamma)} [{_f(r.gamma_low)}, {_f(r.gamma_high)}]",
                str(r.note) if isinstance(r.note, str) else "",
            ]
            for r in fit.itertuples()
        ]
        lines.append(
            markdown_table(
                [
                    "condition",
                    "runs",
                    "failed",
                    "slope b (profile)",
                    "b (bootstrap)",
                    "γ = 1 − b",
                    "γ (log-normal)",
                    "note",
                ],
                fit_rows,
            )
        )
    return lines


def common_lines(common) -> list[str]:
    """The common α across targets and the test of equality."""
    lines: list[str] = []
    if common is not None and len(common):
        lines += [
            "",
            "## A common α across targets",
            "",
            "Fixed-weight mean of the target exponents (inverse-variance weights from their Wald errors), its "
            "interval the seed-cluster t interval of that mean over the targets' paired replicates (a resample "
            "where a target is not identified widens it); χ² (Hotelling's T² with seeds as clusters) tests "
            "that every target has the same α (`analysis/fits/cross.py`).",
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
    return lines


def noise_lines(noise, exponents) -> list[str]:
    """The noise-scale prediction beside each fitted α."""
    lines: list[str] = []
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
    return lines


def goodness_of_fit_lines(exponents) -> list[str]:
    """Lack of fit and the broken power law's ΔAIC."""
    lines: list[str] = []
    lines += [
        "",
        "## Goodness of fit",
        "",
        "Lack of fit: likelihood ratio of the line against a free mean per size, as an F statistic on "
        "(sizes − 2, runs − sizes) df. ΔAIC = AICc(broken power law with a knee B_k) − AICc(line): "
        "below −2 favours a knee (a critical batch size), above 2 the line. Residual plots: `residuals_*`.",
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
    return lines


def sigmoid_lines(sig) -> list[str]:
    """The ScaleRL sigmoid fits per condition and B."""
    lines: list[str] = []
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
    return lines


def warnings_lines(exponents) -> list[str]:
    """The fits' warnings."""
    lines: list[str] = []
    warned = exponents[exponents["warnings"].astype(bool)]
    if len(warned):
        lines += ["", "### Warnings", ""]
        lines += [f"- `{r.condition}` {r.clock}: {r.warnings}" for r in warned.itertuples()]
    return lines


def comparisons_lines(comparisons) -> list[str]:
    """Differences of exponents between conditions."""
    lines: list[str] = []
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
    return lines


def skipped_lines(skipped) -> list[str]:
    """Runs that could not be read, with the reason."""
    lines: list[str] = []
    if skipped:
        lines += ["", "## Skipped runs", ""]
        lines += [f"- `{s.run}`: {s.reason}" for s in skipped]
    return lines


def run_notes_lines(runs) -> list[str]:
    """Runs that were read with notes (truncated, resumed, mismatches)."""
    lines: list[str] = []
    flagged = runs[runs["notes"].astype(bool)]
    if len(flagged):
        lines += ["", "## Runs with notes", ""]
        lines += [f"- `{r.run}` ({r.state}): {r.notes}" for r in flagged.itertuples()]
    return lines


def plots_lines(plots) -> list[str]:
    """The PNG figures, inline."""
    lines: list[str] = []
    if plots:
        lines += ["", "## Plots", ""]
        lines += [f"![{p}]({p})" for p in plots if p.endswith(".png")]
    return lines


def symbols_and_method_lines() -> list[str]:
    """The table of symbols and the method in words."""
    lines: list[str] = []
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
        "Each run is read up to its horizon H, one for everything it contributes (the `eval.horizon` its "
        "condition's runs record, else its budget `train.max_responses`; `--horizon`). A target crossing is "
        "read by the crossing rule named above (`analysis/data/crossings/`: a rule sees only the evaluations "
        "within H). Under the default rule, `interval`, it lies between the last evaluation below the target "
        "and the first at or above it, in whole rollouts [previous evaluation + B, evaluation] (exact where the "
        "two meet), and enters the likelihood as interval-censored: a crossing at the first evaluation after "
        "step 0 is bracketed [B, r], never left-censored at 0 (`--continuous-brackets`: (previous evaluation, "
        "evaluation], left-censored at the first). Runs that never reach it within H are right-censored at "
        "their last evaluation within H, runs that failed first at their failure time. Responses-to-failure "
        "is the clock at the failure onset, interval-censored between the earliest time the detector's window "
        "allows and the onset row, in whole rollouts (or the detection, exact, with `--failure-time "
        "detection`); a failure counts only if its detector decided at or before H, so runs that did not fail "
        "by then are right-censored at their final clock within H, incomplete runs too (`--drop-incomplete` "
        "leaves them out). Both are recomputed from metrics.jsonl and checked against summary.json. The fit is "
        "log R = log c + α log B + σ ε, ε ~ N(0,1) (log-normal accelerated failure time). Bootstrap replicates "
        "are inflated by the small-sample factors of `analysis/fits/fit.py`; see `docs/analysis.md`.",
        "",
    ]
    return lines


# ---- exponents along a numeric key (analysis/fits/trend.py) ------------------------------------------------


def trend_lines(trend: pd.DataFrame, equivalence: float = 0.1) -> list[str]:
    """The report.md section."""

    if trend is None or trend.empty:
        return []

    def f(v) -> str:
        return f"{v:.3f}" if isinstance(v, float) and math.isfinite(v) else "–"

    lines = [
        "",
        "## Exponents along a numeric key",
        "",
        "Slope of the exponent against log10 of the key, by weighted least squares, with a percentile "
        "interval from the conditions' bootstrap replicates (paired where the conditions share seeds): the "
        "replicates behind the intervals printed above (a degenerate fit's widened to its profile interval), "
        "each target's early sizes chosen again in every resample; with fewer than "
        f"{FEW_DISTINCT} distinct slope replicates (seeds resampled as clusters: 126 for 5 seeds) the "
        "seed-cluster t interval joins the percentile one. "
        "A rise or fall needs its slope's interval to exclude 0 and its p-value to survive Holm's "
        "correction over the clocks of the series (p Holm); "
        f"`flat` means every neighbouring difference's 95 % interval lies within ±{equivalence:g}; "
        f"no verdict on fewer than {MIN_VERDICT_RESAMPLES} resamples; unidentified replicates kept at "
        f"±{EXPONENT_BOUND:g} (`analysis/fits/trend.py`).",
        "",
    ]
    rows = [
        [
            r.key,
            r.series,
            r.clock,
            r.values,
            r.exponents,
            f"{f(r.slope)} [{f(r.slope_low)}, {f(r.slope_high)}]",
            f"[{f(r.diff_low_min)}, {f(r.diff_high_max)}]",
            f(r.p_holm),
            f"**{r.trend}**",
            r.note if isinstance(r.note, str) else "",
        ]
        for r in trend.itertuples()
    ]
    lines.append(
        markdown_table(
            [
                "key",
                "series",
                "clock",
                "values",
                "exponents",
                "slope per decade",
                "neighbour Δ range",
                "p Holm",
                "trend",
                "note",
            ],
            rows,
        )
    )
    return lines + _reference_lines(trend)


def _reference_lines(trend: pd.DataFrame) -> list[str]:
    """One computed sentence per α row with a reference slope (``trend.csv``'s ``reference``): the seed
    paper's +0.29 per decade of η_ref inside or outside the slope's interval."""
    if "reference" not in trend.columns:
        return []
    rows = trend[trend["reference"].map(_num).notna()]
    if rows.empty:
        return []

    def f(v) -> str:
        v = _num(v)
        return "∞" if v == math.inf else "−∞" if v == -math.inf else "–" if math.isnan(v) else f"{v:+.3f}"

    lines = [
        "",
        "Reference slopes tested (`trend.csv`: `reference`, `reference_inside`); the default, on η_ref "
        "(`lr.ref_lr`), is the two-clock paper's: α rose from 0.15 to 0.44 as η_ref went from 1e-6 to 1e-5 "
        "with K = 8, +0.29 per decade (`docs/design.md` §3).",
        "",
    ]
    for r in rows.itertuples():
        inside = r.reference_inside
        if inside is None or (isinstance(inside, float) and math.isnan(inside)):
            verdict = "not tested (no interval)"
        else:
            verdict = "**inside** the interval" if bool(inside) else "**outside** the interval (excluded)"
        lines.append(
            f"- {r.key}, {r.series}, {r.clock}: slope {f(r.slope)} [{f(r.slope_low)}, {f(r.slope_high)}] per "
            f"decade; the reference {f(r.reference)} is {verdict}."
        )
    return lines


# ---- targets as fractions of the achievable gain (analysis/fits/gain.py) -----------------------------------


def gain_lines(gain: pd.DataFrame) -> list[str]:
    """The report.md section: A beside α at every gain target."""
    if gain is None or gain.empty:
        return []

    def f(v, d=3) -> str:
        if isinstance(v, float) and math.isinf(v):
            return "∞" if v > 0 else "−∞"
        return f"{v:.{d}f}" if isinstance(v, (int, float)) and math.isfinite(v) else "–"

    rows = [
        [
            r.condition,
            f"{r.fraction:g}",
            f(r.R0),
            f"{f(r.A)} [{f(r.A_low)}, {f(r.A_high)}]",
            f"{f(r.level)} [{f(r.level_low)}, {f(r.level_high)}]",
            f"{f(r.exponent)} [{f(r.ci_low)}, {f(r.ci_high)}]",
            f"[{f(r.ci_low_gain)}, {f(r.ci_high_gain)}]",
            r.message or "",
        ]
        for r in gain.itertuples()
    ]
    header = [
        "condition",
        "f",
        "R0",
        "A [95 %]",
        "level [95 %]",
        "α at the level [95 %]",
        "α with A's error",
        "note",
    ]
    return [
        "",
        "## Targets as fractions of the achievable gain",
        "",
        "Each condition's target `f` sits at R0 + f·(A − R0): R0 its starting accuracy, A the asymptote of "
        "its sigmoid fitted with A shared by every size (within the horizon, before any failure). α is "
        "fitted at the level from A's estimate; the last interval is the envelope of the fits at the "
        "levels from A's 95 % bounds, so a condition that is slower and one that only plateaus lower are "
        "told apart (`analysis/fits/gain.py`, `gain.csv`).",
        "",
        markdown_table(header, rows),
    ]


# ---- predicted vs fitted α (analysis/fits/theory.py) -------------------------------------------------------


def _num_text(value, digits: int = 3) -> str:
    v = _num(value)
    return "–" if math.isnan(v) else f"{v:.{digits}g}"


def _interval_text(point, low, high) -> str:
    return f"{_num_text(point)} [{_num_text(low)}, {_num_text(high)}]"


def _verdict(row, name: str) -> str:
    if math.isnan(_num(row[f"predicted_{name}"])):
        return "not measured"
    agrees = row[f"agrees_{name}"]
    if math.isnan(_num(row["fitted"])):
        return "no fitted α"
    if agrees is None or (isinstance(agrees, float) and math.isnan(agrees)):
        return "no paired interval"
    return "agree" if bool(agrees) else "**disagree**"


def theory_lines(table: pd.DataFrame) -> list[str]:
    """The report's section "Predicted vs fitted α": one line per condition and target, then a sentence
    per η_ref saying whether the predictions agree with the fit."""

    lines = [
        "",
        "## Predicted vs fitted α",
        "",
        "The local theory (`docs/theory.md`): under the square-root rule, responses to a target grow as "
        "(B/K + B_crit)^½, so the predicted α is the least-squares slope of ½·log(B/K + B_crit) on log B over "
        "the condition's sizes (0 when noise dominates, 0.5 when curvature does); B_crit = mean tr(HΣ) / mean "
        "GᵀHG from the `curv/` rows, and in its place B_noise = mean tr Σ / mean |G|² from the `noise/` rows "
        "(the B_noise of `noise_scale.csv`). The predictions use the fit's bootstrap resamples (same runs or "
        "seeds, replicate by replicate), so fitted − predicted is a paired difference; they **agree** when its "
        "95 % interval covers 0. Not measured: the runs logged no `curv/` (or `noise/`) rows, or the pooled "
        "denominator (mean GᵀHG, or mean |G|²: unbiased estimates that can come out ≤ 0 when the signal is small) "
        "is not positive. `theory.csv`.",
        "",
    ]
    if table is None or table.empty:
        return lines + ["No target clock was fitted."]
    rows = []
    for _, r in table.iterrows():
        cells = [r["condition"], r["clock"]]
        for name, *_ in THEORY_SOURCES:
            measured = not math.isnan(_num(r[f"predicted_{name}"]))
            cells.append(
                _interval_text(r[name], r[f"{name}_low"], r[f"{name}_high"]) if measured else "not measured"
            )
            cells.append(
                _interval_text(
                    r[f"predicted_{name}"], r[f"predicted_{name}_low"], r[f"predicted_{name}_high"]
                )
                if measured
                else "not measured"
            )
        cells.append(_interval_text(r["fitted"], r["fitted_low"], r["fitted_high"]))
        for name, *_ in THEORY_SOURCES:
            verdict = _verdict(r, name)
            if verdict == "not measured":
                cells.append(verdict)
            else:
                diff = _interval_text(r[f"diff_{name}"], r[f"diff_{name}_low"], r[f"diff_{name}_high"])
                cells.append(f"{diff} {verdict}")
        rows.append(cells)
    header = ["condition", "target", "B_crit", "α from B_crit", "B_noise", "α from B_noise", "fitted α"]
    header += ["fitted − α(B_crit)", "fitted − α(B_noise)"]
    lines.append(markdown_table(header, rows))
    lines += ["", "By η_ref:", ""]
    eta = table["eta_ref"].map(lambda v: value_text(v if _is_value(v) else None))
    several = table.groupby(eta)["condition"].nunique()
    order = sorted(eta.unique(), key=lambda v: (math.isnan(_num(v)), _num(v), v))
    for value in order:
        part = table[eta == value]
        clauses = []
        for name, label, *_ in THEORY_SOURCES:
            groups: dict[str, list[str]] = {}
            for _, r in part.iterrows():
                where = r["clock"].split(":", 1)[-1]
                where = f"{where} ({r['condition']})" if several[value] > 1 else where
                groups.setdefault(_verdict(r, name).strip("*"), []).append(where)
            said = [
                f"{VERDICT_WORDS.get(verdict, verdict)} at target{'s' if len(at) > 1 else ''} {', '.join(at)}"
                for verdict, at in groups.items()
            ]
            clauses.append(f"the α predicted from {label} " + " and ".join(said))
        lines.append(f"- η_ref = {value}: " + "; ".join(clauses) + ".")
    return lines


VERDICT_WORDS = {
    "agree": "agrees with the fit",
    "disagree": "**disagrees** with the fit",
    "not measured": "is not measured",
    "no fitted α": "has no fitted α to compare with (exponent not identified)",
    "no paired interval": "has no paired interval (no bootstrap of the fit)",
}


def _is_value(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


# ---- the critical batch from the clocks (analysis/fits/bcrit.py, bcrit_theory.py) and the recommendation
# (analysis/fits/recommend.py) ----------------------------------------------------------------------------


def _bcrit_cell(r) -> str:
    """B_crit with its interval; an interval open above says so (B_crit not identified there)."""
    interval = f"[{bound_text(r['ci_low'])}, {bound_text(r['ci_high'])}]"
    if math.isinf(_num(r["ci_high"])):
        return f"not identified: ≥ {bound_text(r['ci_low'])} (estimate {bound_text(r['b_crit'])}) {interval}"
    return f"{bound_text(r['b_crit'])} {interval}"


def bcrit_lines(table: pd.DataFrame | None, figures=()) -> list[str]:
    """The report's section "Critical batch from the clocks": one table line per condition and target, the
    count of unbounded intervals and the figure (``figures``: the files :func:`analysis.figures.plots_bcrit.plot_bcrit` wrote)."""

    lines = [
        "",
        "## Critical batch from the clocks (McCandlish)",
        "",
        "R_T(B) = R_min·(1 + B/B_crit) fitted to each condition's responses-to-target on the power law's "
        "runs (its early sizes left out) with its censoring and resamples, a crossing with the first rollout "
        "(at the R ≥ B floor) left-censored (`docs/analysis.md`); B_crit in responses per rollout (per "
        "optimizer step: ÷ K). The local exponent B/(B + B_crit) is given at the smallest and largest size. "
        "ΔAICc = AICc(McCandlish) − AICc(power law) on the same runs and bounds: below −2 the curve is "
        "preferred, above +2 the line. An interval reaching ∞ means the sizes show no cost of larger B: B_crit "
        "is **not identified** above (at least the lower bound; the estimate is not a measurement); reaching 0, "
        "that R_T grows like B. `bcrit.csv`.",
        "",
    ]
    if table is None or table.empty:
        return lines + ["No target clock was fitted."]
    rows = []
    for _, r in table.iterrows():
        sizes = [s.split(":")[0] for s in str(r["alpha_local"]).split("; ")] if r["alpha_local"] else []
        local = (
            f"{_num(r['alpha_local_min']):.2f} (B={sizes[0]}) – {_num(r['alpha_local_max']):.2f} (B={sizes[-1]})"
            if sizes and math.isfinite(_num(r["alpha_local_min"]))
            else "–"
        )
        rows.append(
            [
                r["condition"],
                r["clock"].split(":", 1)[-1],
                _bcrit_cell(r),
                f"{bound_text(r['r_min'])}",
                local,
                f"{_num(r['alpha_power']):.3f}" if math.isfinite(_num(r["alpha_power"])) else "–",
                f"{_num(r['delta_aicc']):+.1f} ({r['preferred']})"
                if math.isfinite(_num(r["delta_aicc"]))
                else "–",
            ]
        )
    header = ["condition", "target", "B_crit [95 %]", "R_min", "local α", "power-law α", "ΔAICc"]
    lines.append(markdown_table(header, rows))
    unbounded = table[np.isinf(table["ci_high"].map(_num)) | (table["ci_low"].map(_num) == 0)]
    if len(unbounded):
        lines += [
            "",
            f"Unbounded intervals: {len(unbounded)} of {len(table)} row(s) (the sizes measured do not bound "
            f"B_crit on that side; open above, B_crit not identified: {int(np.isinf(unbounded['ci_high'].map(_num)).sum())}).",
        ]
    lines += [f"\n![{f}]({f})" for f in figures if f.endswith(".png")]
    return lines


def bcrit_theory_lines(table) -> list[str]:
    """The report's section: the clocks' B_crit per step beside Adam's and SGD's B_noise, with the paired
    ratio and which agree."""

    lines = [
        "",
        "## The clocks' B_crit against the gradients' B_noise (Adam and SGD)",
        "",
        "B_crit per optimizer step (the clocks' McCandlish fit ÷ K) beside the noise scales measured before "
        "each target's crossing: Adam's tr(PΣ)/GᵀPG (`noise/adam_*`) and SGD's tr Σ/|G|² (`noise/all_*`, else "
        "`noise/*`), ratios of means over runs with Fieller 95 % intervals; the ratio clocks/gradients is "
        "paired over the fit's resamples and they **agree** when its interval covers 1 (`docs/theory.md`). "
        "`bcrit_theory.csv`.",
        "",
    ]
    if table is None or table.empty:
        return lines + ["No target clock was fitted."]
    rows = []
    for _, r in table.iterrows():
        cells = [r["condition"], str(r["clock"]).split(":", 1)[-1], bound_text(r["b_crit_per_step"])]
        for source in BCRIT_SOURCES:
            if math.isnan(_num(r[f"b_noise_{source}"])):
                cells += ["not measured", "–"]
                continue
            cells.append(
                f"{bound_text(r[f'b_noise_{source}'])} [{bound_text(r[f'b_noise_low_{source}'])}, "
                f"{bound_text(r[f'b_noise_high_{source}'])}]"
            )
            agrees = r[f"agrees_{source}"]
            verdict = (
                "" if agrees is None or agrees != agrees else (" agree" if bool(agrees) else " **disagree**")
            )
            cells.append(
                f"{_num(r[f'ratio_{source}']):.3g} [{_num(r[f'ratio_low_{source}']):.3g}, "
                f"{_num(r[f'ratio_high_{source}']):.3g}]{verdict}"
            )
        edge = _num(r.get("edge"))
        cells.append(
            f"{edge:.3g} ({int(_num(r.get('edge_rows')))} rows)" if math.isfinite(edge) else "not measured"
        )
        rows.append(cells)
    header = ["condition", "target", "B_crit/K (clocks)", "B_noise Adam", "clocks/Adam", "B_noise SGD"]
    header += ["clocks/SGD", "η in edge units"]
    lines.append(markdown_table(header, rows))
    return lines


def recommend_lines(table: pd.DataFrame | None) -> list[str]:
    """The report's section "Recommendation": per target and budget unit the measured (B, η_ref) that
    reaches the target soonest, its cost with the interval, how often it stays best, the runner-up."""

    lines = [
        "",
        "## Recommendation: the measured (B, η_ref) that reaches each target soonest",
        "",
        "Among the sizes and conditions measured, the cost to the target from each condition's power law "
        "(`exponents.csv`) times the cost of a response at B on the budget's clock (the runs' own clock per "
        "rollout, as `which_b.csv`); 95 % interval of that cost over the fit's resamples and `p_best`, the "
        "share of resamples in which it stays the cheapest. `recommend.csv`.",
        "",
    ]
    if table is None or table.empty:
        return lines + ["No target clock was fitted on the responses clock."]
    rows = []
    for _, r in table.iterrows():
        rows.append(
            [
                str(r["clock"]).split(":", 1)[-1],
                r["budget"],
                f"B = {r['B']:g}, {r['condition']}",
                f"{r['value']:.4g} [{r['value_low']:.4g}, {r['value_high']:.4g}]",
                f"{r['p_best']:.2f}" if r["p_best"] == r["p_best"] else "–",
                f"B = {r['runner_up_B']:g}, {r['runner_up']} ({r['runner_up_value']:.4g})"
                if r["runner_up"]
                else "–",
            ]
        )
    lines.append(markdown_table(["target", "budget", "soonest", "cost [95 %]", "p_best", "runner-up"], rows))
    return lines


# ---- seeds as blocks (analysis/fits/seed_blocks.py) --------------------------------------------------------


def blocks_lines(correlations: pd.DataFrame, resampling: dict[str, str]) -> list[str]:
    """The report's section on seeds as blocks: which bootstrap each condition used and the measured
    correlations of seed residuals (``resampling``: condition -> "seeds" | "runs" [+ note])."""
    lines = ["", "## Seeds as blocks", ""]
    used = pd.Series(resampling, dtype=object)
    if len(used):
        n_seeds = int(sum(str(v).startswith("seeds") for v in used))
        lines.append(
            f"Bootstrap: seeds resampled as clusters (each drawn seed brings its runs at every size; "
            f"conditions with the same seeds paired) in {n_seeds} of {len(used)} condition(s); runs within "
            "sizes elsewhere."
        )
        lines += [f"- `{c}`: {v}" for c, v in used.items() if not str(v).startswith("seeds")]
    if correlations.empty:
        lines.append(
            "Seed correlations: not measurable (needs ≥ 3 seeds shared between sizes or conditions)."
        )
        return lines
    for kind, words in (("sizes", "between sizes"), ("conditions", "between conditions at one size")):
        part = correlations[correlations["kind"] == kind]
        if len(part):
            lines.append(
                f"- correlation of a seed's residuals {words}: mean {part['correlation'].mean():+.2f} "
                f"(range {part['correlation'].min():+.2f} to {part['correlation'].max():+.2f} over "
                f"{len(part)} fit(s) or pair(s)); `seed_correlations.csv`"
            )
    return lines


# ---- which B (analysis/fits/which_b.py) --------------------------------------------------------------------


def _g(value) -> str:
    return "–" if value is None or not np.isfinite(value) else f"{value:.3g}"


def which_b_lines(table: pd.DataFrame | None) -> list[str]:
    """The report's section on the best B (Markdown lines; empty without rows)."""
    if table is None or table.empty:
        return []

    lines = [
        "",
        "## Which B: time and FLOPs to each target",
        "",
        "time_to_target(B) = R_T(B) / throughput(B), with R_T from the fit and the cost of a response from the "
        "runs' own clocks (per rollout = fixed + per-response cost, non-negative least squares) or the "
        "`--throughput` curve; the best B over the measured sizes with a 95 % bootstrap interval (the fit's "
        "replicates). An optimum at an edge may lie beyond the measured sizes (`analysis/fits/which_b.py`).",
        "",
    ]
    body = []
    for r in table.itertuples():
        edge = f" (**{r.at_edge} edge**)" if r.at_edge else ""
        unit, scale = "", 1.0
        if r.objective == "wall_seconds":
            unit, scale = next(
                (u, f)
                for u, f in ((" h", 3600.0), (" min", 60.0), (" s", 1.0))
                if r.value_best >= f or f == 1.0
            )
        body.append(
            [
                r.condition,
                r.clock,
                OBJECTIVES.get(r.objective, r.objective),
                f"{r.B_best:.0f}{edge} [{_g(r.B_low)}, {_g(r.B_high)}]",
                f"{_g(r.value_best / scale)} [{_g(r.value_low / scale)}, {_g(r.value_high / scale)}]{unit}",
                f"{_g(r.value_at_min_B / scale)} / {_g(r.value_at_max_B / scale)}{unit}",
                r.cost_model,
            ]
        )
    lines.append(
        markdown_table(
            [
                "condition",
                "clock",
                "objective",
                "best B [95 % CI]",
                "at best B",
                "at min / max B",
                "cost model",
            ],
            body,
        )
    )
    return lines
