"""Numbers and tables as text: the exponent table printed on stdout and the Markdown tables of
``report.md`` (:mod:`analysis.reporting.sections`)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.data.symbols import symbol, value_text


def number_text(value, digits: int = 3) -> str:
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
            theory = f"γ≈{number_text(r['theory'], 2)}" if np.isfinite(r["theory"]) else "–"
        elif np.isfinite(r["theory_noise_dominated"]):
            theory = f"α→{number_text(r['theory_noise_dominated'], 1)} (noise) / {number_text(r['theory_curvature_dominated'], 1)} (curv.)"
        else:
            theory = "–"
        body.append(
            [
                *([value_text(r[k]) for k in varying] if varying else [str(r["condition"])]),
                r["clock"],
                number_text(r["exponent"]),
                f"[{number_text(r['ci_low'])}, {number_text(r['ci_high'])}]" + _method_mark(r["ci_method"]),
                f"[{number_text(r['wald_low'])}, {number_text(r['wald_high'])}]",
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


# ---- small helpers shared by the report's sections -----------------------------------------------------
def _num(v) -> float:
    """A table value as a float (non-finite values may be written as strings); NaN if not a number."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


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


VERDICT_WORDS = {
    "agree": "agrees with the fit",
    "disagree": "**disagrees** with the fit",
    "not measured": "is not measured",
    "no fitted α": "has no fitted α to compare with (exponent not identified)",
    "no paired interval": "has no paired interval (no bootstrap of the fit)",
}


def _is_value(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def _g(value) -> str:
    return "–" if value is None or not np.isfinite(value) else f"{value:.3g}"
