"""The clock fields of a hand-written metrics row, shared by the analysis tests that build run
directories row by row."""

from __future__ import annotations


def clocks(responses: int, b: int = 64) -> dict:
    """Every clock of a row at ``responses`` responses of a run with B = ``b`` (K = 8)."""
    return {
        "rollout": responses // b,
        "responses": responses,
        "tokens": responses * 10,
        "optimizer_steps": responses // b * 8,
        "wall_seconds": responses / 100,
        "flops": responses * 1e6,
        "eval_responses": 0,
    }
