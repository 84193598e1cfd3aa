"""The sections of ``report.md`` that set the exponents beside theory: the noise scale, predicted against
fitted α, the critical batch from the clocks and from theory, the recommendation, which B."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.data.symbols import value_text
from analysis.fits.bcrit_theory import SOURCES as BCRIT_SOURCES
from analysis.fits.bcrit_theory import bound_text
from analysis.fits.theory import SOURCES as THEORY_SOURCES
from analysis.fits.which_b import OBJECTIVES
from analysis.reporting.text import (
    VERDICT_WORDS,
    _g,
    _interval_text,
    _is_value,
    _num,
    _verdict,
    markdown_table,
)
from analysis.reporting.text import number_text as _f


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
