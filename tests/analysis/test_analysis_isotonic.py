"""Isotonic crossings: one noisy evaluation above the target does not make the crossing early."""

import numpy as np

from analysis.data.clock_tables import ClockOptions, build_tables
from analysis.data.crossings.isotonic import smoothed_accuracy
from analysis.data.load import RunRecord


def _record(accuracies, every=100, b=32):
    rows = []
    for i, a in enumerate(accuracies):
        rows.append(
            {
                "rollout": i,
                "responses": i * every,
                "tokens": 0,
                "optimizer_steps": 0,
                "wall_seconds": 0.0,
                "eval/accuracy": a,
            }
        )
    config = {
        "seed": 0,
        "rollout": {"prompts_per_rollout": b // 8, "group_size": 8},
        "eval": {"targets": [0.3]},
    }
    status = {"state": "completed", "failure": None}
    summary = {"derived": {"responses_per_rollout": b}}
    return RunRecord(
        run="r",
        name="r",
        source="dir",
        path="r",
        group="g",
        config=config,
        rows=rows,
        summary=summary,
        status=status,
        notes=[],
    )


def test_smoothed_accuracy_is_the_isotonic_fit():
    acc = np.array([0.1, 0.35, 0.2, 0.25, 0.3, np.nan, 0.4])
    got = smoothed_accuracy(acc)
    assert np.isnan(got[5])
    ok = ~np.isnan(acc)
    assert np.all(np.diff(got[ok]) >= 0)
    # pool adjacent violators: 0.35, 0.2, 0.25 pool to their mean; 0.3 is above it and stays
    np.testing.assert_allclose(got[1:5], [0.8 / 3] * 3 + [0.3])


def test_isotonic_crossing_ignores_an_early_spike():
    acc = [0.1, 0.15, 0.32, 0.18, 0.2, 0.24, 0.27, 0.31, 0.33, 0.35]  # spike at eval 2, true crossing ~7
    raw = build_tables([_record(acc)], ClockOptions(crossing="interval")).runs.iloc[0]
    iso = build_tables([_record(acc)], ClockOptions(crossing="isotonic")).runs.iloc[0]
    # brackets in whole rollouts of B = 32: the first rollout after the evaluation below the target
    assert raw["target:0.3"] == 200 and raw["target:0.3:lower"] == 128
    assert iso["target:0.3"] == 700 and iso["target:0.3:lower"] == 608
    assert not iso["target:0.3:censored"]
