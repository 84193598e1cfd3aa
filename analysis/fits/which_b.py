"""Which rollout size B reaches a target soonest in wall time, and cheapest in FLOPs.

Responses are one clock; a team pays in wall time and GPU-hours, and larger rollouts generate more
responses per second. With the fit ``R_T(B) = c B^alpha`` (responses to the target) and the cost of a
response at ``B`` on another clock::

    time_to_target(B) = R_T(B) * seconds_per_response(B) = R_T(B) / throughput(B)

**Throughput.** From the runs' own ``wall_seconds`` clock: the clock per rollout, at each run's last
evaluation, fitted as ``s0 + s1 B`` by non-negative least squares over the runs of the condition (a fixed
cost per rollout, the latency of generation, the weight sync and the K optimizer steps' overhead, plus a
cost per response), so ``seconds_per_response(B) = s0 / B + s1``; or a curve for your hardware,
``--throughput B:rps ...`` (responses per second at each B, interpolated log-log, held constant beyond
the ends). The same model on the ``flops`` clock gives the FLOPs to the target (the hardware-independent
cost).

With the linear model the optimum has a closed form for ``0 < alpha < 1``: ``time ∝ s0 B^(alpha-1) +
s1 B^alpha`` is smallest at ``B* = (s0 / s1) (1 - alpha) / alpha``; it does not depend on ``c``. The
table takes the argmin over a geometric grid of 200 sizes within the condition's measured range
(within the supplied curve's range too), and flags an optimum at an edge of that range (the true one may
lie beyond: measure there before trusting it). The 95 % interval comes from the fit's bootstrap
replicates (:attr:`analysis.fits.fit.FitResult.boot_slopes`, ``boot_intercepts``): the argmin and the minimum
of each replicate, percentiles; the throughput model is held fixed (it is measured on every rollout of
every run, with far less noise than the crossing times). Only on the ``responses`` clock (the fits'
clock must be responses for ``R_T`` to be one).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar, nnls

N_GRID = 200
OBJECTIVES = {"wall_seconds": "wall time", "flops": "FLOPs"}


def throughput_point(item) -> tuple[float, float]:
    """``"64:120"`` -> ``(64.0, 120.0)`` (rollout size, responses per second); ValueError otherwise."""
    if isinstance(item, tuple):
        return item
    b, sep, rps = str(item).partition(":")
    try:
        point = (float(b), float(rps))
    except ValueError:
        point = None
    if not sep or point is None or not (point[0] > 0 and point[1] > 0):
        raise ValueError(f"--throughput expects B:RPS with positive numbers, got {item!r}")
    return point


def parse_throughput(items) -> np.ndarray:
    """``["64:120", "256:400"]`` -> sorted ``[[B, responses per second], ...]`` (sizes distinct)."""
    points = sorted(throughput_point(item) for item in items)
    if len({b for b, _ in points}) < len(points):
        raise ValueError("--throughput gives one size twice")
    return np.array(points, float)


def seconds_per_response_fixed(points: np.ndarray):
    """Seconds per response from a user curve: responses/s interpolated in log-log, constant beyond."""
    lb, lr = np.log(points[:, 0]), np.log(points[:, 1])
    return lambda b: float(np.exp(-np.interp(np.log(b), lb, lr)))


def rollout_clock_fit(tables, condition: str, clock: str) -> tuple[float, float] | None:
    """``(c0, c1)`` with ``clock per rollout = c0 + c1 B``: non-negative least squares over the runs of
    ``condition`` (each run's last evaluation row); None when the runs do not log the clock or span a
    single size."""
    ev = tables.evals
    if ev is None or ev.empty or clock not in ev.columns or "rollout" not in ev.columns:
        return None
    ev = ev[(ev["condition"] == condition) & np.isfinite(ev[clock]) & (ev["rollout"] > 0)]
    if ev.empty:
        return None
    last = ev.groupby("run").tail(1)
    B = last["B"].to_numpy(float)
    per = last[clock].to_numpy(float) / last["rollout"].to_numpy(float)
    if np.unique(B).size < 2:
        return None
    (c0, c1), _ = nnls(np.column_stack([np.ones_like(B), B]), per)
    return (float(c0), float(c1)) if c0 + c1 > 0 else None


def seconds_per_response_model(tables, condition: str, throughput: np.ndarray | None = None):
    """The cost of a response in wall seconds at B (a callable), from ``throughput`` when given, else
    from the condition's ``wall_seconds`` clock; None when neither is available."""
    if throughput is not None:
        return seconds_per_response_fixed(throughput)
    fit = rollout_clock_fit(tables, condition, "wall_seconds")
    if fit is None:
        return None
    c0, c1 = fit
    return lambda b: (c0 + c1 * b) / b


def optimum_b(alpha: float, per_response, low: float, high: float) -> float:
    """The B in ``[low, high]`` minimising ``B^alpha * per_response(B)`` (continuous)."""
    res = minimize_scalar(
        lambda lb: alpha * lb + math.log(per_response(math.exp(lb))),
        bounds=(math.log(low), math.log(high)),
        method="bounded",
        options={"xatol": 1e-6},
    )
    return float(math.exp(res.x))


def b_width_to_alpha_width(factor: float, alpha: float, per_response, sizes) -> float:
    """The width of alpha's 95 % interval that gives ``B*`` within a factor ``factor`` (its interval
    spans ``log factor`` in log B), by the delta method: ``d log B* / d alpha`` numerically; inf when
    there is no throughput model or the optimum is at an edge of ``sizes`` (the width of alpha then does
    not move it)."""
    if per_response is None:
        return math.inf
    low, high = float(np.min(sizes)), float(np.max(sizes))
    h = 0.01
    b0 = optimum_b(alpha, per_response, low, high)
    if b0 <= low * 1.001 or b0 >= high / 1.001:
        return math.inf
    slope = (math.log(optimum_b(alpha + h, per_response, low, high)) - math.log(
        optimum_b(alpha - h, per_response, low, high)
    )) / (2 * h)  # fmt: skip
    return math.log(factor) / abs(slope) if slope else math.inf


def _edge(b: float, grid: np.ndarray) -> str:
    if b <= grid[0]:
        return "lower"
    if b >= grid[-1]:
        return "upper"
    return ""


def which_b_table(
    tables, fits: dict, throughput: np.ndarray | None = None, level: float = 0.95
) -> pd.DataFrame:
    """One row per condition, target and objective (wall time, FLOPs): the best B with its bootstrap
    interval, the time (or FLOPs) to the target there and at the smallest and largest measured B."""
    columns = [
        "condition",
        "clock",
        "objective",
        "B_best",
        "B_low",
        "B_high",
        "at_edge",
        "frac_boot_at_edge",
        "value_best",
        "value_low",
        "value_high",
        "value_at_min_B",
        "value_at_max_B",
        "B_min",
        "B_max",
        "cost_model",
        "n_boot",
    ]
    rows = []
    if tables.options is not None and tables.options.clock != "responses":
        return pd.DataFrame(rows, columns=columns)
    runs = tables.runs
    q = [(1 - level) / 2, (1 + level) / 2]
    for (condition, clock), fit in sorted(fits.items()):
        if not clock.startswith("target:") or clock.count(":") > 1 or not np.isfinite(fit.exponent):
            continue
        sizes = runs.loc[(runs["condition"] == condition) & runs["in_fit"], "B"].to_numpy(float)
        low, high = float(sizes.min()), float(sizes.max())
        for objective in OBJECTIVES:
            if objective == "wall_seconds" and throughput is not None:
                per = seconds_per_response_fixed(throughput)
                low_o, high_o = max(low, throughput[0, 0]), min(high, throughput[-1, 0])
                model = "user curve " + " ".join(f"{b:g}:{r:g}" for b, r in throughput)
            else:
                fitted = rollout_clock_fit(tables, condition, objective)
                if fitted is None:
                    continue
                c0, c1 = fitted
                per = lambda b, c0=c0, c1=c1: (c0 + c1 * b) / b  # noqa: E731
                low_o, high_o = low, high
                model = f"{objective} per rollout = {c0:.4g} + {c1:.4g}·B"
            if not low_o < high_o:
                continue
            grid = np.geomspace(low_o, high_o, N_GRID)
            log_per = np.log([per(b) for b in grid])
            lg = np.log(grid)
            curve = fit.intercept + fit.exponent * lg + log_per
            best = int(np.argmin(curve))
            a_r, s_r = fit.boot_intercepts, fit.boot_slopes
            ok = np.isfinite(a_r) & np.isfinite(s_r)
            row = {
                "condition": condition,
                "clock": clock,
                "objective": objective,
                "B_best": float(grid[best]),
                "at_edge": _edge(grid[best], grid),
                "value_best": float(np.exp(curve[best])),
                "value_at_min_B": float(np.exp(curve[0])),
                "value_at_max_B": float(np.exp(curve[-1])),
                "B_min": low_o,
                "B_max": high_o,
                "cost_model": model,
                "n_boot": int(ok.sum()),
            }
            if ok.sum() >= 10:
                curves = a_r[ok, None] + s_r[ok, None] * lg[None, :] + log_per[None, :]  # [n_boot, grid]
                idx = curves.argmin(1)
                row["B_low"], row["B_high"] = np.quantile(grid[idx], q, method="inverted_cdf")
                mins = np.exp(curves[np.arange(idx.size), idx])
                row["value_low"], row["value_high"] = np.quantile(mins, q)
                row["frac_boot_at_edge"] = float(((idx == 0) | (idx == grid.size - 1)).mean())
            rows.append(row)
    return pd.DataFrame(rows, columns=columns)
