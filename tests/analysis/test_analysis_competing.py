"""Competing risks: Aalen–Johansen against a hand-worked example, event assignment, incidence tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.data.clock_tables import build_tables
from analysis.fits.competing import competing_events, incidence_tables
from analysis.fits.fit import aalen_johansen
from analysis.synthetic import SyntheticSpec, records


def test_aalen_johansen_by_hand():
    # times 1 (reached), 2 (failed), 2 (censored), 3 (reached), 4 (censored), 5 (failed)
    aj = aalen_johansen([1, 2, 2, 3, 4, 5], [1, 2, 0, 1, 0, 2])
    np.testing.assert_allclose(aj["time"], [0, 1, 2, 3, 5])
    np.testing.assert_array_equal(aj["at_risk"], [6, 6, 5, 3, 1])
    # by hand: F1 = 1/6 at t=1, + S(3-) * 1/3 = (2/3)(1/3) at t=3; F2 = (5/6)(1/5) at t=2, + (4/9) * 1 at t=5
    np.testing.assert_allclose(aj["cif"][:, 0], [0, 1 / 6, 1 / 6, 7 / 18, 7 / 18])
    np.testing.assert_allclose(aj["cif"][:, 1], [0, 0, 1 / 6, 1 / 6, 11 / 18])
    np.testing.assert_allclose(aj["survival"], [1, 5 / 6, 2 / 3, 4 / 9, 0])
    np.testing.assert_allclose(aj["cif"].sum(1) + aj["survival"], 1.0)  # every run is in one state
    np.testing.assert_array_equal(aj["censored"], [0, 0, 1, 0, 0])


def test_aalen_johansen_without_censoring_is_the_empirical_fraction():
    rng = np.random.default_rng(0)
    t = rng.exponential(size=40)
    k = rng.integers(1, 3, size=40)
    aj = aalen_johansen(t, k)
    for j, time in enumerate(aj["time"]):
        assert aj["cif"][j, 0] == pytest.approx(((t <= time) & (k == 1)).mean())
        assert aj["cif"][j, 1] == pytest.approx(((t <= time) & (k == 2)).mean())


def test_aalen_johansen_matches_lifelines_when_installed():
    lifelines = pytest.importorskip("lifelines")  # optional cross-check; not a project dependency
    t = np.array([1, 2, 3, 3, 4, 6, 7, 8, 9, 10], float)
    k = np.array([1, 2, 0, 1, 2, 1, 0, 2, 1, 0])
    fitter = lifelines.AalenJohansenFitter(calculate_variance=False, jitter_level=0)
    fitter.fit(t, k, event_of_interest=1)
    ours = aalen_johansen(t, k)
    want = fitter.cumulative_density_.iloc[:, 0]
    for time, value in want.items():
        j = np.searchsorted(ours["time"], time, side="right") - 1
        assert ours["cif"][j, 0] == pytest.approx(value)


def _tables(spec):
    return build_tables(records(spec))


def test_events_and_incidence_from_runs():
    spec = SyntheticSpec(
        sizes=(32, 256),
        seeds=6,
        alpha=0.3,
        gamma=0.0,
        failure_prefactor=9000.0,
        failure_sigma=0.5,
        budget=30000,
        targets=(0.3,),
        seed=3,
        detection_delay=2,
    )
    tables = _tables(spec)
    runs = tables.runs
    times, causes = competing_events(runs, 0.3)
    failed_first = (runs["target:0.3:censored_by"] == "failure").to_numpy()
    assert (causes[failed_first] == 2).all()
    # failure times are onsets, so a crossing seen between onset and detection counts as failed first
    assert (runs["failure:onset"] < runs["failure:detection"]).where(~runs["failure:censored"]).dropna().all()
    assert np.isin(causes, [0, 1, 2]).all() and (causes == 2).sum() >= failed_first.sum()
    curves, summary = incidence_tables(tables)
    assert set(summary["B"]) == {32.0, 256.0}
    assert (
        summary["n_reached"] + summary["n_failed_first"] + summary["n_censored_budget"] == summary["n_runs"]
    ).all()
    last = curves.groupby(["condition", "B", "target"]).tail(1).reset_index(drop=True)
    np.testing.assert_allclose(last["cif_reached"], summary["cif_reached_end"])
    # no budget censoring here: the incidences end at the observed fractions
    done = summary[summary["n_censored_budget"] == 0]
    np.testing.assert_allclose(done["cif_reached_end"], done["n_reached"] / done["n_runs"])
    assert isinstance(curves, pd.DataFrame) and (np.diff(curves["cif_reached"].to_numpy()) >= -1).all()
