"""Nonparametric survival estimators of censored clocks: Kaplan–Meier (:func:`kaplan_meier`) and the
Aalen–Johansen cumulative incidence of competing causes (:func:`aalen_johansen`), for the figures and
:mod:`analysis.fits.competing`."""

from __future__ import annotations

import numpy as np


def kaplan_meier(times, events) -> tuple[np.ndarray, np.ndarray]:
    """Kaplan–Meier survival curve: ``S(t) = prod_{t_i <= t} (1 - d_i / n_i)``.

    ``events[i]`` is True when run ``i`` failed at ``times[i]`` and False when it was censored there
    (censored runs count as at risk at their own time). Returns the step function's knots
    ``(t, S)`` starting at ``(0, 1)``; ``S[j]`` holds from ``t[j]`` until ``t[j+1]``.
    """
    t = np.asarray(times, float)
    e = np.asarray(events, bool)
    order = np.argsort(t, kind="stable")
    t, e = t[order], e[order]
    event_times = np.unique(t[e])
    at_risk = t.size - np.searchsorted(t, event_times, side="left")
    deaths = np.searchsorted(t[e], event_times, side="right") - np.searchsorted(
        t[e], event_times, side="left"
    )
    surv = np.cumprod(1.0 - deaths / at_risk)
    return np.concatenate([[0.0], event_times]), np.concatenate([[1.0], surv])


def aalen_johansen(times, causes, n_causes: int = 2) -> dict[str, np.ndarray]:
    """Aalen–Johansen cumulative incidence of each competing cause (Aalen & Johansen 1978).

    ``causes[i]`` is 0 for a run censored at ``times[i]`` and ``k`` in ``1..n_causes`` for a run whose
    first event was cause ``k`` at ``times[i]``. At the distinct event times ``t_j``, with ``n_j`` runs
    at risk (time >= t_j; runs censored at ``t_j`` count as at risk, as in Kaplan–Meier) and ``d_kj``
    events of cause k::

        F_k(t) = sum_{t_j <= t} S(t_j-) * d_kj / n_j,      S(t) = prod_{t_j <= t} (1 - d_j / n_j)

    with ``S`` the Kaplan–Meier curve of "no event yet" (any cause). Without censoring ``F_k`` is the
    empirical fraction of runs whose first event was k by t. Hand-written (a dozen lines of numpy)
    rather than ``lifelines.AalenJohansenFitter``, which would be a new dependency and breaks ties by
    jittering the times; ``tests/analysis/test_analysis_competing.py`` checks it against a hand-worked
    example. Returns arrays over the grid ``time`` (0 and the distinct event times): ``at_risk``,
    ``events`` ``[n_t, n_causes]``, ``censored`` (runs censored exactly at that time), ``survival``
    and ``cif`` ``[n_t, n_causes]`` (the values from that time until the next); events at time 0 are
    counted in the first row.
    """
    t = np.asarray(times, float)
    k = np.asarray(causes, int)
    ok = np.isfinite(t)
    t, k = t[ok], k[ok]
    grid = np.unique(np.concatenate([[0.0], t[k > 0]]))
    at_risk = (t[None, :] >= grid[:, None]).sum(1)
    events = np.stack(
        [((t[None, :] == grid[:, None]) & (k[None, :] == c)).sum(1) for c in range(1, n_causes + 1)], 1
    )
    d = events.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        hazard = np.where(at_risk > 0, d / np.maximum(at_risk, 1), 0.0)
        surv = np.cumprod(1.0 - hazard)
        before = np.concatenate([[1.0], surv[:-1]])
        cif = np.cumsum(
            before[:, None] * np.where(at_risk[:, None] > 0, events / np.maximum(at_risk, 1)[:, None], 0.0), 0
        )
    censored = np.array([int(((t == g) & (k == 0)).sum()) for g in grid])
    return {
        "time": grid,
        "at_risk": at_risk,
        "events": events,
        "censored": censored,
        "survival": surv,
        "cif": cif,
    }
