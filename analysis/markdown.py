"""The human-readable outputs: the exponent table printed on stdout and ``report.md``.

``report.md`` gathers, for a reader who has not seen the code: counts of runs and why some were left
out, the exponents with the theory references, warnings for sizes where no run reached a target, the
competing-risk sensitivity (bounds and the joint model), the Aalen–Johansen incidences, the common
exponent across targets, the noise-scale verdicts, goodness of fit, the sigmoid fits, comparisons,
skipped and flagged runs, the figures and the table of symbols.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.clocks import Tables, target_label
from analysis.load import SkippedRun
from analysis.symbols import SYMBOLS, symbol, value_text


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
                f"[{_f(r['ci_low'])}, {_f(r['ci_high'])}]" + _method_mark(r["ci_method"]),
                f"[{_f(r['wald_low'])}, {_f(r['wald_high'])}]",
                str(r["n_runs"]),
                f"{r['n_censored']} ({r['n_censored_failure']}/{r['n_censored_budget']})",
                str(r["n_sizes"]),
                theory,
            ]
        )
    return header, body


def _method_mark(method) -> str:
    """A mark after an interval that is not the plain bootstrap one."""
    return {"wald": " (Wald)", "profile": " (profile)"}.get(
        method, " (widened†)" if "+" in str(method) else ""
    )


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
    """Write ``report.md`` and return its text, one function per section below. ``extra``:
    ``incidence_summary``, ``common``, ``noise``, ``sigmoid`` tables, ``hazard`` (the tables and notes
    of :func:`analysis.hazard.hazard_tables`) and the lines of the ``theory``, ``blocks`` and
    ``which_b`` sections when computed."""
    extra = extra or {}
    sections = [
        _summary(source, tables, skipped, messages, options),
        _exponents(exponents, tables),
        _degenerate(exponents),
        _unreached(exponents),
        _competing(exponents),
        _incidence(extra.get("incidence_summary")),
        _hazard(extra.get("hazard")),
        _common(extra.get("common")),
        extra.get("trend") or [],  # exponents along a numeric key (analysis.trend.trend_lines)
        extra.get("gain") or [],  # targets as fractions of the gain (analysis.gain.gain_lines)
        _noise(extra.get("noise"), exponents),
        extra.get("theory") or [],  # predicted vs fitted α (analysis.theory.theory_lines)
        extra.get("bcrit") or [],  # McCandlish's B_crit from the clocks (analysis.bcrit.bcrit_lines)
        _goodness_of_fit(exponents),
        _sigmoid(extra.get("sigmoid")),
        _warnings(exponents),
        extra.get("blocks") or [],  # seeds as blocks (analysis.blocks.markdown_lines)
        _comparisons(comparisons),
        extra.get("which_b") or [],  # the best B in wall time and FLOPs (analysis.which_b.which_b_lines)
        _skipped(skipped),
        _run_notes(tables.runs),
        _plots(plots),
        _symbols_and_method(),
    ]
    text = "\n".join(line for section in sections for line in section)
    (out / "report.md").write_text(text)
    return text


# ---- the sections of report.md, in order; each returns its lines ----------------------------------


def _summary(source, tables, skipped, messages, options) -> list[str]:
    """The header: source, options, counts of runs and what was left out, notes."""
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


def _exponents(exponents, tables) -> list[str]:
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


def _degenerate(exponents) -> list[str]:
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


def _unreached(exponents) -> list[str]:
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


def _competing(exponents) -> list[str]:
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
            "fits both clocks as one bivariate log-normal draw with correlation ρ (`analysis/joint.py`, Wald "
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


def _incidence(inc) -> list[str]:
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


def _hazard(hazard) -> list[str]:
    """The failure clock per rollout: hazard per size, first-update failures against η(B), the
    cloglog slope and γ apart from the first-update outcome (``analysis/hazard.py``)."""
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
    return lines + _hazard_fit(fit)


def _hazard_fit(fit) -> list[str]:
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


def _common(common) -> list[str]:
    """The common α across targets and the test of equality."""
    lines: list[str] = []
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
    return lines


def _noise(noise, exponents) -> list[str]:
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


def _goodness_of_fit(exponents) -> list[str]:
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


def _sigmoid(sig) -> list[str]:
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


def _warnings(exponents) -> list[str]:
    """The fits' warnings."""
    lines: list[str] = []
    warned = exponents[exponents["warnings"].astype(bool)]
    if len(warned):
        lines += ["", "### Warnings", ""]
        lines += [f"- `{r.condition}` {r.clock}: {r.warnings}" for r in warned.itertuples()]
    return lines


def _comparisons(comparisons) -> list[str]:
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


def _skipped(skipped) -> list[str]:
    """Runs that could not be read, with the reason."""
    lines: list[str] = []
    if skipped:
        lines += ["", "## Skipped runs", ""]
        lines += [f"- `{s.run}`: {s.reason}" for s in skipped]
    return lines


def _run_notes(runs) -> list[str]:
    """Runs that were read with notes (truncated, resumed, mismatches)."""
    lines: list[str] = []
    flagged = runs[runs["notes"].astype(bool)]
    if len(flagged):
        lines += ["", "## Runs with notes", ""]
        lines += [f"- `{r.run}` ({r.state}): {r.notes}" for r in flagged.itertuples()]
    return lines


def _plots(plots) -> list[str]:
    """The PNG figures, inline."""
    lines: list[str] = []
    if plots:
        lines += ["", "## Plots", ""]
        lines += [f"![{p}]({p})" for p in plots if p.endswith(".png")]
    return lines


def _symbols_and_method() -> list[str]:
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
        "A target crossing lies between the last evaluation below the target and the first at or above it and "
        "enters the likelihood as interval-censored (left-censored when it is the first evaluation after step 0); "
        "runs that never reach it are right-censored at their last evaluation, runs that failed first at their "
        "failure time. Responses-to-failure is the clock at the failure onset, interval-censored between the "
        "earliest time the detector's window allows and the onset row (or the detection, exact, with "
        "`--failure-time detection`); runs that never fail are right-censored at their final clock, incomplete "
        "runs too (`--drop-incomplete` leaves them out). Both are recomputed from metrics.jsonl and checked against summary.json. The fit is "
        "log R = log c + α log B + σ ε, ε ~ N(0,1) (log-normal accelerated failure time). Bootstrap replicates "
        "are inflated by the small-sample factors of `analysis/fit.py`; see `docs/analysis.md`.",
        "",
    ]
    return lines
