"""The critical batch of a simulated problem (the noisy quadratic of ``rlvr_scaling/noisy_quadratic.py``):
McCandlish's form fitted to the simulated samples to target beside the noise scales measured along the runs
(``docs/theory.md``, "B_noise for Adam")."""

from __future__ import annotations

import math

import numpy as np

from analysis.fits.bcrit import fit_mccandlish

_SIM_KEYS = ("adam_trace", "adam_signal", "sgd_trace", "sgd_signal")


def simulated_critical_batch(sims) -> dict:
    """B_crit of a noisy quadratic's simulations (``rlvr_scaling.noisy_quadratic.Simulation`` per batch,
    ``docs/theory.md``, "B_noise for Adam") from the simulated curve (McCandlish's form fitted to the samples to target at the optimal
    learning rate of each batch, :meth:`Simulation.min_steps`) beside the noise scales measured before the crossings of
    those runs, pooled over all batches as ratios of means (Adam-aware and SGD trace), and per batch."""
    B, R, per_b = [], [], []
    pooled = {k: 0.0 for k in _SIM_KEYS}
    for sim in sims:
        j = sim.best()
        lr, steps = sim.min_steps()
        B.append(sim.b)
        R.append(steps * sim.b)
        totals = {k: float(sim.sums[k][j].sum()) for k in _SIM_KEYS}
        for k in _SIM_KEYS:
            pooled[k] += totals[k] / max(float(sim.count[j].sum()), 1.0)
        per_b.append(
            {
                "b": sim.b,
                "lr": lr,
                "samples": steps * sim.b,
                "adam": totals["adam_trace"] / totals["adam_signal"]
                if totals["adam_signal"] > 0
                else math.inf,
                "sgd": totals["sgd_trace"] / totals["sgd_signal"] if totals["sgd_signal"] > 0 else math.inf,
            }
        )
    # the simulated minima are exact step counts, not crossings seen on an evaluation schedule: no floor rule
    fit = fit_mccandlish(np.array(B, float), np.array(R, float), np.zeros(len(B), bool), floor=False)
    return {
        "b_crit": fit.b_crit,
        "b_crit_low": fit.profile_low,
        "b_crit_high": fit.profile_high,
        "b_noise_adam": pooled["adam_trace"] / pooled["adam_signal"]
        if pooled["adam_signal"] > 0
        else math.inf,
        "b_noise_sgd": pooled["sgd_trace"] / pooled["sgd_signal"] if pooled["sgd_signal"] > 0 else math.inf,
        "per_b": per_b,
    }
