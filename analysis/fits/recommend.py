"""``recommend.csv``: per target and budget unit, the measured (B, η_ref) that reaches the target soonest.

Among every condition's measured sizes (the (B, condition) pairs the study ran), the cost of reaching a
target is the power-law fit's ``R_T(B) = c B^alpha`` (responses; ``exponents.csv``) times the cost of a
response at B on the budget's clock: 1 on ``responses``, and on ``wall_seconds`` (or ``flops``) the
condition's own clock per rollout fitted as ``c0 + c1 B`` (:func:`analysis.fits.which_b.rollout_clock_fit`,
as ``which_b.csv``). The recommendation is the cheapest pair; its interval is the 95 % percentile
interval of its cost over the fit's bootstrap replicates (``boot_intercepts``, ``boot_slopes``: the
replicate's curve at that B), and ``p_best`` the fraction of replicates in which it stays the cheapest
(replicate r of every condition together: paired where conditions share seeds, :mod:`analysis.fits.seed_blocks`).
The runner-up and its cost are given beside it. Only measured pairs are candidates (no extrapolation
beyond the sizes run); the throughput model is held fixed, as in ``which_b.csv``. ``rlvr-plan`` can
take the row's B and η_ref as the next study's centre.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.fits.which_b import rollout_clock_fit

BUDGETS = ("responses", "wall_seconds", "flops")
COLUMNS = [
    "clock",
    "budget",
    "condition",
    "eta_ref",
    "B",
    "value",
    "value_low",
    "value_high",
    "p_best",
    "runner_up",
    "runner_up_B",
    "runner_up_value",
    "n_candidates",
    "n_boot",
]


def _candidates(tables, fits: dict, clock: str, budget: str) -> list[tuple]:
    """``(condition, eta_ref, B, log cost per response at B, fit)`` of every measured pair."""
    runs = tables.runs
    out = []
    for (condition, c), fit in sorted(fits.items()):
        if c != clock or not np.isfinite(fit.exponent):
            continue
        mine = runs[(runs["condition"] == condition) & runs["in_fit"]]
        eta = mine["lr.ref_lr"].iloc[0] if "lr.ref_lr" in mine and len(mine) else math.nan
        per = None
        if budget != "responses":
            model = rollout_clock_fit(tables, condition, budget)
            if model is None:
                continue
            per = model
        for b in sorted(set(mine["B"].to_numpy(float))):
            log_per = 0.0 if per is None else math.log((per[0] + per[1] * b) / b)
            out.append((condition, eta, b, log_per, fit))
    return out


def recommend_table(tables, fits: dict, level: float = 0.95) -> pd.DataFrame:
    """One row per target clock and budget unit (module docstring); empty off the ``responses`` clock."""
    rows = []
    if tables.options is not None and tables.options.clock != "responses":
        return pd.DataFrame(rows, columns=COLUMNS)
    clocks = sorted({c for _, c in fits if c.startswith("target:") and c.count(":") == 1})
    q = [(1 - level) / 2, (1 + level) / 2]
    for clock in clocks:
        for budget in BUDGETS:
            cands = _candidates(tables, fits, clock, budget)
            if not cands:
                continue
            log_cost = np.array([f.intercept + f.exponent * math.log(b) + lp for _, _, b, lp, f in cands])
            order = np.argsort(log_cost)
            best = int(order[0])
            condition, eta, b, lp, fit = cands[best]
            n_boot = min(f.boot_slopes.size for *_, f in cands)
            row = {
                "clock": clock,
                "budget": budget,
                "condition": condition,
                "eta_ref": eta,
                "B": b,
                "value": float(math.exp(log_cost[best])),
                "value_low": math.nan,
                "value_high": math.nan,
                "p_best": math.nan,
                "runner_up": cands[int(order[1])][0] if len(cands) > 1 else "",
                "runner_up_B": cands[int(order[1])][2] if len(cands) > 1 else math.nan,
                "runner_up_value": float(math.exp(log_cost[order[1]])) if len(cands) > 1 else math.nan,
                "n_candidates": len(cands),
                "n_boot": n_boot,
            }
            if n_boot:
                with np.errstate(invalid="ignore", over="ignore"):
                    reps = np.stack(
                        [
                            f.boot_intercepts[:n_boot] + f.boot_slopes[:n_boot] * math.log(b) + lp
                            for _, _, b, lp, f in cands
                        ]
                    )  # [candidates, n_boot]; a non-identified replicate is NaN (its intercept)
                mine = reps[best]
                finite = mine[np.isfinite(mine)]
                if finite.size:
                    lo, hi = np.quantile(finite, q, method="inverted_cdf")
                    row["value_low"], row["value_high"] = float(math.exp(lo)), float(math.exp(hi))
                filled = np.where(np.isfinite(reps), reps, np.inf)
                usable = np.isfinite(filled).any(0)
                if usable.any():
                    row["p_best"] = float((filled[:, usable].argmin(0) == best).mean())
            rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)
