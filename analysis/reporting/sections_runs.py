"""The sections of ``report.md`` about the runs and their exponents: the header, the exponent table and its
flags (degenerate, unreached, warnings), goodness of fit, sigmoids, skipped and flagged runs, figures, symbols
and method."""

from __future__ import annotations

import numpy as np

from analysis.data.clock_tables import target_label
from analysis.data.crossings import crossing_rule
from analysis.data.symbols import SYMBOLS, symbol
from analysis.reporting.text import exponent_table, markdown_table
from analysis.reporting.text import number_text as _f


def _brackets(crossing: str) -> bool:
    """Whether the named crossing rule gives intervals (registered with ``brackets=True``)."""
    try:
        return crossing_rule(crossing).brackets
    except ValueError:
        return False


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
            if _brackets(crossing)
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
