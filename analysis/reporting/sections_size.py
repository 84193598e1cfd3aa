"""The section of ``report.md`` for a study that varies the model: each size's α, γ and B_crit, and
where their trends per decade of N are (``analysis/fits/trend_size.py``)."""

from __future__ import annotations

import pandas as pd

from analysis.data.model_size import PARAMETERS_KEY
from analysis.reporting.text import markdown_table
from analysis.reporting.text import number_text as _f


def size_lines(table: pd.DataFrame | None) -> list[str]:
    """One row per model size and clock (:func:`analysis.fits.trend_size.size_rows`); nothing when the
    conditions do not differ in N."""
    if table is None or table.empty:
        return []
    lines = [
        "",
        "## Model size",
        "",
        "Per model size N (parameters, `runs.csv`'s `model.parameters`): each target's α, the common α, "
        "the failure clock's γ where failures were fitted, and B_crit (responses per rollout) with their "
        "95 % intervals. Their slopes per decade of N are the `model.parameters` rows of "
        '"Exponents along a numeric key" (`b_crit:<a>`: log10 B_crit); figure `model_size`.',
        "",
    ]
    names = {"alpha": "α", "gamma": "γ", "b_crit": "B_crit"}
    rows = [
        [
            f"{int(r[PARAMETERS_KEY]):,}",
            r["condition"],
            names.get(r["quantity"], r["quantity"]),
            r["clock"],
            _f(r["value"]),
            f"[{_f(r['ci_low'])}, {_f(r['ci_high'])}]",
        ]
        for _, r in table.iterrows()
    ]
    lines.append(markdown_table(["N", "condition", "quantity", "clock", "value", "95% CI"], rows))
    return lines
