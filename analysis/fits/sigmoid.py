"""Accuracy against compute as ScaleRL fits it: a saturating sigmoid per run and per (condition, B).

Khatri et al. (2025), "The Art of Scaling Reinforcement Learning Compute for LLMs" (ScaleRL), eq. 1:

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)**b)

with ``C`` the compute (here: the analysis clock, responses by default), ``R0`` the starting accuracy,
``A`` the asymptote, ``b`` the scaling exponent (efficiency) and ``C_mid`` the compute at half of the
gain. A study can then say whether B changes the asymptote (A), the efficiency (b, C_mid) or both.
Deviations: ScaleRL fits on mean reward of a held-out set against GPU-hours; we fit validation accuracy
against the chosen clock, and ``R0`` is fixed at the mean accuracy of the step-0 evaluations (the
first evaluation when there is none) rather than fitted; the fit is unweighted least squares on the
evaluations with ``C > 0``.

Fits: per (condition, B) the evaluations of all seeds pooled (least squares on pooled points equals
least squares on the per-clock-value means weighted by their counts), point estimate by
``scipy.optimize.least_squares`` (bounded, trust-region reflective) from a grid of 9 starts
(``C_mid`` at three quantiles of the clock, ``b`` in {0.5, 1, 2}); bootstrap over runs (runs resampled
with replacement, 95 % percentile intervals on A, b and C_mid) and the per-run fits by a batched
Levenberg–Marquardt written here, started at the pooled estimate (thousands of small fits in one numpy
loop; checked against ``least_squares`` in ``tests/analysis/test_analysis_extras.py``). A fit that does
not converge is reported (``converged = False`` and a message), never raised.
"""

from __future__ import annotations

import math
import warnings
import zlib
from dataclasses import replace

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from analysis._parallel import fork_map
from analysis.data.clock_tables import Tables

SIGMOID_COLUMNS = [
    "condition",
    "B",
    "level",
    "run",
    "R0",
    "A",
    "A_low",
    "A_high",
    "b",
    "b_low",
    "b_high",
    "C_mid",
    "C_mid_low",
    "C_mid_high",
    "rmse",
    "n_points",
    "n_boot",
    "n_boot_failed",
    "converged",
    "message",
]
_B_RANGE = (0.05, 20.0)


def sigmoid(C, R0, A, b, C_mid):
    """ScaleRL's saturating curve ``R0 + (A - R0) / (1 + (C_mid / C)**b)``."""
    C = np.asarray(C, float)
    with np.errstate(divide="ignore", over="ignore"):
        return R0 + (A - R0) / (1 + (C_mid / C) ** b)


def _bounds(L: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of ``(A, log b, log C_mid)``."""
    lo = np.array([0.0, math.log(_B_RANGE[0]), L.min() - 5.0])
    hi = np.array([1.0, math.log(_B_RANGE[1]), L.max() + 5.0])
    return lo, hi


def fit_point(C, y, R0, w=None) -> tuple[np.ndarray, bool, str]:
    """Least-squares ``(A, b, C_mid)`` with multi-start ``least_squares``; ``(params, ok, message)``."""
    C, y = np.asarray(C, float), np.asarray(y, float)
    w = np.ones_like(y) if w is None else np.asarray(w, float)
    good = (C > 0) & np.isfinite(y) & (w > 0)
    C, y, w = C[good], y[good], w[good]
    if C.size < 4 or np.unique(C).size < 3:
        return (
            np.full(3, np.nan),
            False,
            f"too few evaluations after step 0 ({np.unique(C).size} clock values)",
        )
    L = np.log(C)
    lo, hi = _bounds(L)
    sw = np.sqrt(w)

    def resid(p):
        A, lb, lm = p
        return sw * (y - (R0 + (A - R0) / (1 + np.exp(np.exp(lb) * (lm - L)))))

    A0 = float(np.clip(np.max(y), lo[0] + 1e-6, hi[0] - 1e-6))
    starts = np.array(
        [[A0, math.log(b0), float(np.quantile(L, q))] for q in (0.25, 0.5, 0.75) for b0 in (0.5, 1.0, 2.0)]
    )
    starts = np.clip(starts, lo + 1e-9, hi - 1e-9)
    # the 9 starts in one batched pass, then scipy polishes the best one (and is the reference)
    cand, conv = fit_batched(L, np.tile(y, (9, 1)), np.tile(w, (9, 1)), R0, starts, (lo, hi), max_iter=60)
    costs = np.array(
        [np.sum(w * (y - sigmoid(C, R0, *c)) ** 2) if ok else np.inf for c, ok in zip(cand, conv)]
    )
    first = cand[int(np.argmin(costs))] if np.isfinite(costs).any() else None
    start = (
        np.clip([first[0], math.log(first[1]), math.log(first[2])], lo + 1e-9, hi - 1e-9)
        if first is not None
        else starts[4]
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = least_squares(resid, start, bounds=(lo, hi), method="trf", x_scale="jac")
    except (ValueError, FloatingPointError) as err:
        return np.full(3, np.nan), False, f"least_squares failed: {err}"
    if not r.success:
        return np.full(3, np.nan), False, f"least_squares did not converge: {r.message}"
    return np.array([r.x[0], math.exp(r.x[1]), math.exp(r.x[2])]), True, ""


def fit_batched(L, Y, Wt, R0, start, bounds, max_iter=200, tol=1e-9) -> tuple[np.ndarray, np.ndarray]:
    """Levenberg–Marquardt for many curves at once.

    ``L`` ``[n]`` or ``[M, n]`` log clock values, ``Y`` and ``Wt`` ``[M, n]`` values and weights (0 pads),
    ``R0`` ``[M]``, ``start`` ``[M, 3]`` or ``[3]`` in ``(A, log b, log C_mid)``; parameters are kept in
    ``bounds`` (a step is clipped to them). A curve has converged when a step lowers its weighted sum of
    squares by less than ``tol`` relatively, or no damping finds a lower one. Returns
    ``(params [M, 3] as (A, b, C_mid), converged [M])``.
    """
    Y, Wt = np.asarray(Y, float), np.asarray(Wt, float)
    M = Y.shape[0]
    L = np.array(np.broadcast_to(np.asarray(L, float), Y.shape))
    R0 = np.array(np.broadcast_to(np.asarray(R0, float), (M,)))
    th = np.array(np.broadcast_to(np.asarray(start, float), (M, 3)))
    lo, hi = bounds

    def evaluate(th, rows):
        A, b, lm = th[:, :1], np.exp(th[:, 1:2]), th[:, 2:3]
        d = lm - L[rows]
        e = np.exp(np.clip(b * d, -700, 700))
        s = 1 / (1 + e)
        gain = A - R0[rows, None]
        r = Y[rows] - (R0[rows, None] + gain * s)
        ds = -(s * s) * e * b * gain  # d f / d(log C_mid)
        J = np.stack([s, ds * d, ds], -1)  # d f / d(A, log b, log C_mid)
        return r, J, (Wt[rows] * r * r).sum(1)

    rows = np.arange(M)
    r, J, cost = evaluate(th, rows)
    lam = np.full(M, 1e-3)
    converged = np.zeros(M, bool)
    active = np.flatnonzero(np.isfinite(cost))
    for _ in range(max_iter):
        if active.size == 0:
            break
        Ja, ra, wa = J[active], r[active], Wt[active]
        JW = Ja * wa[..., None]
        JTJ = (JW[..., :, None] * Ja[..., None, :]).sum(1)
        g = (JW * ra[..., None]).sum(1)
        # a parameter held at a bound by a gradient pointing outwards is fixed for this step
        # (projected Levenberg–Marquardt); otherwise the clipped step crawls along the bound
        tha = th[active]
        held = ((tha >= hi - 1e-12) & (g > 0)) | ((tha <= lo + 1e-12) & (g < 0))
        free = (~held).astype(float)
        JTJ = JTJ * free[:, :, None] * free[:, None, :] + np.eye(3)[None] * (1 - free)[:, None, :]
        g = g * free
        diag = np.maximum(np.diagonal(JTJ, axis1=1, axis2=2), 1e-12)
        damp = JTJ + lam[active, None, None] * (np.eye(3)[None] * diag[:, None, :])
        with np.errstate(all="ignore"):
            try:
                step = np.linalg.solve(damp, g[..., None])[..., 0]
            except np.linalg.LinAlgError:
                step = np.stack([np.linalg.lstsq(dm, v, rcond=None)[0] for dm, v in zip(damp, g)])
        cand = np.clip(th[active] + step, lo, hi)
        r_new, J_new, cost_new = evaluate(cand, active)
        better = np.isfinite(cost_new) & (cost_new < cost[active])
        rel = (cost[active] - cost_new) / np.maximum(cost[active], 1e-300)
        moved = np.abs(cand - th[active]).max(1)
        idx = active[better]
        th[idx], r[idx], J[idx], cost[idx] = cand[better], r_new[better], J_new[better], cost_new[better]
        lam[idx] = np.maximum(lam[idx] / 3, 1e-12)
        lam[active[~better]] *= 4
        stop = (better & (rel < tol)) | (moved < 1e-10) | (lam[active] > 1e12)
        converged[active[stop]] = True
        active = active[~stop]
    conv = converged & np.isfinite(cost)
    out = np.column_stack([th[:, 0], np.exp(th[:, 1]), np.exp(th[:, 2])])
    out[~conv] = np.nan
    return out, conv


def curves_of(
    evals: pd.DataFrame, clock: str
) -> tuple[np.ndarray, dict[str, tuple[np.ndarray, np.ndarray]], float]:
    """Per run ``(clock values, accuracies)`` after step 0 and the starting accuracy R0."""
    per_run, starts = {}, []
    for run, g in evals.groupby("run", sort=True):
        C, y = g[clock].to_numpy(float), g["eval/accuracy"].to_numpy(float)
        if C.size:
            first = np.argmin(C)
            starts.append(y[first])
        keep = (C > 0) & np.isfinite(C) & np.isfinite(y)
        per_run[run] = (C[keep], y[keep])
    R0 = float(np.nanmean(starts)) if starts else math.nan
    values = np.unique(np.concatenate([c for c, _ in per_run.values()])) if per_run else np.empty(0)
    return values, per_run, R0


def pooled_counts(values: np.ndarray, curves: dict, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Counts and sums of the accuracies per run (rows, in ``names`` order) at every distinct clock value
    of ``values`` (columns): the pooled curve is ``sums.sum(0) / counts.sum(0)``."""
    index = {v: j for j, v in enumerate(values)}
    cnt = np.zeros((len(names), values.size))
    tot = np.zeros((len(names), values.size))
    for i, name in enumerate(names):
        C, y = curves[name]
        j = np.fromiter((index[c] for c in C), int, C.size)
        np.add.at(cnt[i], j, 1.0)
        np.add.at(tot[i], j, y)
    return cnt, tot


def _one_condition(condition: str, job: tuple) -> pd.DataFrame:
    tables, n_boot, seed, per_run = job
    runs = tables.runs[tables.runs["condition"] == condition]
    evals = tables.evals[tables.evals["condition"] == condition] if len(tables.evals) else tables.evals
    return sigmoid_table(replace(tables, runs=runs, evals=evals), n_boot, seed, per_run)


def sigmoid_tables(
    tables: Tables, n_boot: int = 200, seed: int = 0, per_run: bool = True, jobs: int = 1
) -> pd.DataFrame:
    """:func:`sigmoid_table` with the conditions spread over ``jobs`` forked processes (same result)."""
    conditions = sorted(tables.runs["condition"].unique())
    if jobs <= 1 or len(conditions) < 2:
        return sigmoid_table(tables, n_boot, seed, per_run)
    parts = fork_map(_one_condition, conditions, jobs, shared=(tables, n_boot, seed, per_run))
    return pd.concat(parts, ignore_index=True)


def sigmoid_table(tables: Tables, n_boot: int = 200, seed: int = 0, per_run: bool = True) -> pd.DataFrame:
    """The sigmoid fits of every (condition, B), with bootstrap intervals, and of every run."""
    rows: list[dict] = []
    runs = tables.runs[tables.runs["in_fit"]]
    evals = tables.evals[tables.evals["run"].isin(runs["run"])] if len(tables.evals) else tables.evals
    unit = runs["clock_unit"].iloc[0] if len(runs) else "responses"
    clock = unit if unit in evals.columns else "responses"
    for (condition, size), group in runs.groupby(["condition", "B"], sort=True):
        ev = evals[evals["run"].isin(group["run"])]
        values, curves, R0 = curves_of(ev, clock)
        names = sorted(curves)
        row = {"condition": condition, "B": size, "level": "B", "run": "", "R0": R0}
        if not np.isfinite(R0) or values.size == 0:
            rows.append(row | {"converged": False, "message": "no evaluations", "n_points": 0})
            continue
        cnt, tot = pooled_counts(values, curves, names)
        n_c, s_c = cnt.sum(0), tot.sum(0)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(n_c > 0, s_c / n_c, np.nan)
        params, ok, message = fit_point(values, mean, R0, n_c)
        row.update(n_points=int(n_c.sum()), converged=ok, message=message)
        if ok:
            A, b, C_mid = params
            pred = sigmoid(values, R0, A, b, C_mid)
            resid_ss = (
                (tot - cnt * pred) ** 2 / np.maximum(cnt, 1)
            ).sum()  # sum over runs of squared residuals
            row.update(A=A, b=b, C_mid=C_mid, rmse=float(math.sqrt(max(resid_ss, 0.0) / max(n_c.sum(), 1))))
            L = np.log(values)
            bounds = _bounds(L)
            start = np.array([A, math.log(b), math.log(C_mid)])
            if n_boot > 0 and len(names) >= 2:
                rng = np.random.default_rng([seed, zlib.crc32(f"{condition}|{size:g}".encode())])
                draws = rng.integers(0, len(names), size=(n_boot, len(names)))
                Wr = np.zeros((n_boot, len(names)))
                np.add.at(Wr, (np.repeat(np.arange(n_boot), len(names)), draws.ravel()), 1.0)
                nb, sb = Wr @ cnt, Wr @ tot
                with np.errstate(invalid="ignore", divide="ignore"):
                    Yb = np.where(nb > 0, sb / nb, 0.0)
                boot, conv = fit_batched(L, Yb, nb, R0, start, bounds)
                row.update(n_boot=n_boot, n_boot_failed=int((~conv).sum()))
                if conv.sum() >= 10:
                    q = np.quantile(boot[conv], [0.025, 0.975], axis=0)
                    row.update(
                        A_low=q[0, 0],
                        A_high=q[1, 0],
                        b_low=q[0, 1],
                        b_high=q[1, 1],
                        C_mid_low=q[0, 2],
                        C_mid_high=q[1, 2],
                    )
            if per_run:
                n_max = max(len(curves[n][0]) for n in names)
                Lr = np.zeros((len(names), n_max))
                Yr = np.zeros((len(names), n_max))
                Wt = np.zeros((len(names), n_max))
                for i, name in enumerate(names):
                    C, y = curves[name]
                    Lr[i, : C.size], Yr[i, : C.size], Wt[i, : C.size] = np.log(C), y, 1.0
                r0_run = []
                for name in names:
                    g = ev[ev["run"] == name]
                    r0_run.append(float(g["eval/accuracy"].iloc[int(np.argmin(g[clock].to_numpy(float)))]))
                enough = (Wt > 0).sum(1) >= 4
                fits, conv = fit_batched(Lr, Yr, Wt, np.array(r0_run), start, bounds)
                for i, name in enumerate(names):
                    ok_i = bool(conv[i] and enough[i])
                    rows.append(
                        {
                            "condition": condition,
                            "B": size,
                            "level": "run",
                            "run": name,
                            "R0": r0_run[i],
                            "A": fits[i, 0] if ok_i else math.nan,
                            "b": fits[i, 1] if ok_i else math.nan,
                            "C_mid": fits[i, 2] if ok_i else math.nan,
                            "n_points": int(Wt[i].sum()),
                            "converged": ok_i,
                            "message": ""
                            if ok_i
                            else ("too few evaluations" if not enough[i] else "did not converge"),
                        }
                    )
        rows.append(row)
    table = pd.DataFrame(rows, columns=SIGMOID_COLUMNS)
    return table.sort_values(
        ["condition", "B", "level", "run"], ascending=[True, True, True, True], kind="stable"
    ).reset_index(drop=True)
