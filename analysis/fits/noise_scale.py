"""The gradient-noise-scale prediction of where batch-size returns diminish, beside the fitted law.

McCandlish, Kaplan, Amodei et al. (2018), "An empirical model of large-batch training", eq. 2.11 and
§2.3: with an optimally tuned step size, the examples needed to reach a given loss grow with the batch
size as ``E = E_min (1 + batch / B_noise)`` (and the steps as ``S = S_min (1 + B_noise / batch)``),
where ``B_noise = tr Sigma / |G|^2`` is the simple noise scale of per-example gradients. On log-log
axes the local slope of responses-to-target against the batch is therefore

    d log R_T / d log batch = (batch / B_noise) / (1 + batch / B_noise),

0 well below ``B_noise`` (perfect scaling) and 1 well above it (no gain per update).

Our reading for multi-step GRPO: one rollout of B responses is split into K minibatches of B/K, and
each optimizer step sees one minibatch, so McCandlish's batch (examples per update) is ``b = B / K``
and the critical rollout size is ``K * B_noise``; with K fixed in a condition the slope in B equals
the slope in b. The trainer logs ``noise/trace_cov`` and ``noise/grad_norm_sq`` per response
(``rlvr_scaling/curvature.py``: two-batch-size estimators in the spirit of McCandlish's appendix A from
gradients taken at theta_old; runs written before that release logged the K minibatch gradients' estimates,
taken at successive parameters, under these names), so ``B_noise`` here is in responses. Deviations we
accept and report: the learning rate follows the configured rule, not the per-batch optimum the
derivation assumes; ``B_noise`` drifts during training (we use one value per run, a ratio of means
over its training rows up to failure, :func:`analysis.data.noise_columns.noise_summary`).

Per condition: ``B_noise`` = mean over runs of their mean tr Sigma / mean over runs of their mean
|G|^2, a percentile bootstrap interval over runs; the **implied exponent** is the least-squares slope
of ``log(1 + B_i / (K B_noise))`` against ``log B_i`` over the condition's runs (what the power-law
fit would return if responses-to-target followed the prediction exactly), with the interval from the
``B_noise`` bootstrap. Prediction and fit **agree** when their 95 % intervals overlap.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.data.clock_tables import Tables

NOISE_COLUMNS = [
    "condition",
    "level",
    "B",
    "K",
    "n_runs",
    "n_runs_with_noise",
    "b_noise",
    "b_noise_low",
    "b_noise_high",
    "b_noise_median",
    "b_crit_rollout",
    "implied_exponent",
    "implied_low",
    "implied_high",
]


def implied_exponent(sizes: np.ndarray, b_noise: np.ndarray, K: float) -> np.ndarray:
    """Least-squares slope of ``log(1 + B / (K b_noise))`` on ``log B`` over ``sizes``, per ``b_noise``."""
    x = np.log(np.asarray(sizes, float))
    bn = np.atleast_1d(np.asarray(b_noise, float))
    xc = x - x.mean()
    den = (xc * xc).sum()
    if den <= 0:
        return np.full(bn.shape, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = np.log1p(np.exp(x)[None, :] / (K * bn[:, None]))
    return (y * xc[None, :]).sum(1) / den


def predicted_curve(
    grid: np.ndarray, b_noise: float, K: float, anchor_B: float, anchor_R: float
) -> np.ndarray:
    """``E_min (1 + B / (K B_noise))`` through ``(anchor_B, anchor_R)`` (the prediction gives the shape,
    not the level)."""
    shape = 1 + np.asarray(grid, float) / (K * b_noise)
    return anchor_R * shape / (1 + anchor_B / (K * b_noise))


def _ratio(trace: np.ndarray, grad: np.ndarray, W: np.ndarray | None = None) -> np.ndarray:
    if W is None:
        W = np.ones((1, trace.size))
    with np.errstate(invalid="ignore", divide="ignore"):
        num, den = W @ trace / W.sum(1), W @ grad / W.sum(1)
        return np.where(den > 0, num / den, np.nan)


def noise_table(tables: Tables, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """B_noise and the implied exponent per condition (``level`` = ``condition``) and per size (``B``)."""
    rows = []
    runs = tables.runs[tables.runs["in_fit"]]
    if "noise:b_noise" not in runs.columns:
        return pd.DataFrame(columns=NOISE_COLUMNS)
    for condition, group in runs.groupby("condition", sort=True):
        K = float(np.nanmedian(group["K"].to_numpy(float))) if group["K"].notna().any() else 1.0
        K = K if math.isfinite(K) and K > 0 else 1.0
        has = group["noise:trace_cov_mean"].notna() & group["noise:grad_norm_sq_mean"].notna()
        parts = [("condition", math.nan, group)] + [("B", b, g) for b, g in group.groupby("B", sort=True)]
        rng = np.random.default_rng([seed, zlib.crc32(condition.encode())])
        for level, size, part in parts:
            use = part[has.loc[part.index]]
            row = {"condition": condition, "level": level, "B": size, "K": K, "n_runs": len(part)}
            row["n_runs_with_noise"] = len(use)
            trace = use["noise:trace_cov_mean"].to_numpy(float)
            grad = use["noise:grad_norm_sq_mean"].to_numpy(float)
            bn = float(_ratio(trace, grad)[0]) if len(use) else math.nan
            low = high = math.nan
            imp = imp_low = imp_high = math.nan
            sizes = group["B"].to_numpy(float)
            if len(use) >= 2 and n_boot > 0:
                draws = rng.integers(0, len(use), size=(n_boot, len(use)))
                W = np.zeros((n_boot, len(use)))
                np.add.at(W, (np.repeat(np.arange(n_boot), len(use)), draws.ravel()), 1.0)
                boot = _ratio(trace, grad, W)
                boot = np.where(np.isfinite(boot), boot, np.inf)  # mean |G|^2 <= 0: noise-dominated
                low, high = (float(v) for v in np.quantile(boot, [0.025, 0.975], method="inverted_cdf"))
                if level == "condition" and np.isfinite(bn):
                    imps = implied_exponent(sizes, boot, K)
                    imps = np.where(np.isfinite(imps), imps, 0.0)  # B_noise = inf: slope 0
                    imp_low, imp_high = (float(v) for v in np.quantile(imps, [0.025, 0.975]))
            if level == "condition" and np.isfinite(bn):
                imp = float(implied_exponent(sizes, np.array([bn]), K)[0])
            med = use["noise:b_noise_median"].to_numpy(float)
            row.update(
                b_noise=bn,
                b_noise_low=low,
                b_noise_high=high,
                b_noise_median=float(np.nanmedian(med)) if np.isfinite(med).any() else math.nan,
                b_crit_rollout=K * bn,
                implied_exponent=imp,
                implied_low=imp_low,
                implied_high=imp_high,
            )
            rows.append(row)
    return pd.DataFrame(rows, columns=NOISE_COLUMNS)


def agreement(exponents: pd.DataFrame, noise: pd.DataFrame) -> pd.DataFrame:
    """Add ``noise_exponent``, ``noise_low``, ``noise_high`` and ``noise_agrees`` (95 % intervals
    overlap) to the target rows of the exponents table."""
    out = exponents.copy()
    cond = noise[noise["level"] == "condition"].set_index("condition")
    for col in ("noise_exponent", "noise_low", "noise_high"):
        out[col] = np.nan
    out["noise_agrees"] = pd.Series([None] * len(out), dtype="object")
    for i, r in out.iterrows():
        if r["clock"] == "failure" or r["condition"] not in cond.index:
            continue
        n = cond.loc[r["condition"]]
        out.at[i, "noise_exponent"] = n["implied_exponent"]
        out.at[i, "noise_low"] = n["implied_low"]
        out.at[i, "noise_high"] = n["implied_high"]
        if all(np.isfinite([n["implied_low"], n["implied_high"]])) and not (
            np.isnan(r["ci_low"]) or np.isnan(r["ci_high"])
        ):
            out.at[i, "noise_agrees"] = bool(
                n["implied_low"] <= r["ci_high"] and r["ci_low"] <= n["implied_high"]
            )
    return out


@dataclass(frozen=True)
class NoisePrediction:
    """One condition's noise-scale prediction (a ``level == "condition"`` row of ``noise_scale.csv``):
    B_noise, K and the implied exponent with its 95 % interval."""

    b_noise: float
    K: float
    implied: float
    low: float
    high: float


def noise_predictions(noise: pd.DataFrame | None) -> dict[str, NoisePrediction]:
    """Per condition, the noise scale's prediction the per-condition figures draw."""
    if noise is None:
        return {}
    cond = noise[noise["level"] == "condition"]
    return {
        c.condition: NoisePrediction(c.b_noise, c.K, c.implied_exponent, c.implied_low, c.implied_high)
        for c in cond.itertuples()
    }
