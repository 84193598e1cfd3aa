"""The loader's record types, shared by every source (:mod:`analysis.data.load` for run directories,
:mod:`analysis.data.wandb_io` for wandb): one run as read (:class:`RunRecord`), a run that could not be read
(:class:`SkippedRun`, raised as :class:`RunReadError`), what a source gave (:class:`LoadResult`), and
the one check every source's metrics rows go through (:func:`validate_rows`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunRecord:
    """One run as read from any source, before clocks are computed.

    ``status`` and ``summary`` follow the run-directory files (``status.json``, ``summary.json``);
    wandb sources fill them from ``run.summary`` (``state``, ``failure``, ``derived``).
    """

    run: str  # identifier: path relative to SOURCE, or entity/project/id
    path: str
    source: str  # "dir" | "wandb-offline" | "wandb-api"
    config: dict[str, Any]
    rows: list[dict[str, Any]]  # metrics rows, validated and in clock order
    status: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    name: str | None = None
    group: str | None = None
    tags: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SkippedRun:
    run: str
    path: str
    reason: str


@dataclass
class LoadResult:
    runs: list[RunRecord]
    skipped: list[SkippedRun]
    messages: list[str] = field(default_factory=list)  # source-level remarks for the report


class RunReadError(Exception):
    """A run that cannot be analysed at all; the message is the reason reported."""


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def validate_rows(raw: list[Any], notes: list[str]) -> list[dict[str, Any]]:
    """Rows in clock order, up to the first one that is not an object or has no valid ``responses``.

    A ``responses`` clock that goes back (to r) is a resumed run whose log was not rewound (wandb
    history, a resumed offline run): the earlier rows at ``responses >= r`` are superseded by the new
    ones, as the trainer itself does for ``metrics.jsonl``, and a note says so.
    """
    rows: list[dict[str, Any]] = []
    last = -math.inf
    for index, row in enumerate(raw):
        if not isinstance(row, dict):
            notes.append(f"metrics: row {index} is not an object; truncated there")
            break
        responses = row.get("responses")
        if not is_number(responses) or not math.isfinite(responses):
            notes.append(f"metrics: row {index} has invalid 'responses' ({responses!r}); truncated there")
            break
        if responses < last:
            keep = len(rows)
            while keep and rows[keep - 1]["responses"] >= responses:
                keep -= 1
            notes.append(
                f"metrics: 'responses' goes back to {responses:g} at row {index} (resumed run?); "
                f"{len(rows) - keep} earlier row(s) superseded"
            )
            del rows[keep:]
        last = responses
        rows.append(row)
    return rows
