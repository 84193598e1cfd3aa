"""Values read from a run's metrics rows and config: a number or NaN, a column of numbers, a clock at a
given responses, the targets the config declares. Shared by the clock tables' modules
(:mod:`analysis.data.clock_tables`)."""

from __future__ import annotations

import math
from typing import Any

from analysis.data.load import as_float, get_path, is_number

_NUMBER_TYPES = (int, float)


def num(value: Any) -> float:
    number = as_float(value)
    return math.nan if number is None else number


def column_of(rows: list[dict[str, Any]], key: str) -> list[float]:
    """``[num(row.get(key)) for row in rows]``, fast for the common case of plain numbers."""
    nan = math.nan
    return [
        float(v) if type(v) in _NUMBER_TYPES else num(v) if v is not None else nan
        for v in (r.get(key) for r in rows)
    ]


def config_targets(config: dict[str, Any]) -> list[float]:
    targets = get_path(config, "eval.targets", [])
    return [float(t) for t in targets if is_number(t)] if isinstance(targets, list) else []


def clock_at(rows: list[dict[str, Any]], responses: float, clock: str) -> float:
    """``clock`` in the last metrics row with ``responses <= responses`` (the first row if none)."""
    row_at = rows[0]
    for row in reversed(rows):
        if float(row["responses"]) <= responses:
            row_at = row
            break
    return num(row_at.get(clock))
