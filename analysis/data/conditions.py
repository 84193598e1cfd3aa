"""Conditions: which config keys make a run's condition, the condition labels (``key=value`` of the
varying keys), a file-name-safe form of a label, and the config columns of the runs table."""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

import pandas as pd

from analysis.data.clock_options import ClockOptions
from analysis.data.load import DEFAULT_IGNORED_KEYS, is_number, key_matches


def _canonical(value: Any) -> tuple:
    """Grouping identity of a flattened config value: 8 and 8.0 are one setting, True and 1 are not."""
    if isinstance(value, bool) or value is None:
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", float(value)) if value == value else ("n", "nan")
    return ("s", str(value))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return "null" if value is None else str(value)


def condition_slug(label: str) -> str:
    """A file-name-safe form of a condition label (long labels end in a short hash)."""
    slug = re.sub(r"[^A-Za-z0-9._=+-]+", "_", label).strip("_") or "all"
    if len(slug) > 80:
        slug = slug[:64] + "_" + hashlib.sha1(label.encode()).hexdigest()[:8]
    return slug


def config_column(values: list[Any]) -> list[Any] | pd.Series:
    """Numbers stay numeric, booleans boolean, anything mixed becomes text (Parquet needs one type)."""
    present = [v for v in values if v is not None]
    if (
        present
        and len(present) == len(values)
        and all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    ):
        return pd.Series(values, dtype="int64")
    if present and all(is_number(v) for v in present):
        return pd.Series([math.nan if v is None else float(v) for v in values], dtype="float64")
    if present and all(isinstance(v, bool) for v in present) and len(present) == len(values):
        return pd.Series(values, dtype="bool")
    return pd.Series([None if v is None else _fmt(v) for v in values], dtype="object")


def condition_labels(
    flats: list[dict[str, Any]], opts: ClockOptions
) -> tuple[list[str], list[str], list[str]]:
    """The condition keys, those that vary, and each run's condition label (``key=value`` for each
    varying key joined by ``__``, ``all`` when nothing varies)."""
    all_keys = sorted({k for flat in flats for k in flat})
    if opts.condition_keys is not None:
        keys = [k for k in all_keys if any(key_matches(k, p) for p in opts.condition_keys)]
    else:
        ignored = DEFAULT_IGNORED_KEYS + tuple(opts.ignore_keys)
        keys = [k for k in all_keys if not any(key_matches(k, p) for p in ignored)]
    canon = [tuple(_canonical(flat.get(k)) for k in keys) for flat in flats]
    varying = [k for i, k in enumerate(keys) if len({c[i] for c in canon}) > 1]
    labels: dict[tuple, str] = {}
    for flat, c in zip(flats, canon):
        if c not in labels:
            label = "__".join(f"{k}={_fmt(flat.get(k))}" for k in varying) or "all"
            while label in labels.values():
                label += "+"
            labels[c] = label
    return keys, varying, [labels[c] for c in canon]
