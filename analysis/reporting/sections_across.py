"""The sections of ``report.md`` that look across targets and conditions: the common α, comparisons, trends
along a key, gain targets and seeds as blocks."""

from __future__ import annotations

import math

import pandas as pd

from analysis.fits.trend import EXPONENT_BOUND, FEW_DISTINCT, MIN_VERDICT_RESAMPLES
from analysis.reporting.text import _num, markdown_table
from analysis.reporting.text import number_text as _f


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
