"""``hazard_per_rollout``: the failure clock per rollout (:mod:`analysis.fits.hazard`), two panels.

* left: the discrete hazard per rollout h(B) of each condition and size with its 95 % likelihood-ratio
  interval (log-log), and the fitted cloglog line ``h = 1 − exp(−exp(a + b log B))`` over the sizes;
  a size with no failure is drawn as its upper bound (a downward triangle); open markers and the
  dashed line: the same for the runs that survived the first two rollouts, counted from the third;
* right: the fraction of runs unstable at the first updates (failure onset within the first two
  rollouts) against η(B), the per-step learning rate of that size, with Clopper–Pearson intervals.

One colour per condition, the same as in every other figure. The look is :mod:`analysis.figures.plot_style`'s.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from analysis.figures.plot_style import DPI, STYLE, save, sci, size_axis  # noqa: E402

STEM = "hazard_per_rollout"


def plot_hazard(
    out, hazard: pd.DataFrame, fit: pd.DataFrame, colours: dict, formats=("png", "pdf"), dpi: int = DPI
) -> list[str]:
    """The figure (module docstring); nothing when the hazard table is empty."""
    if hazard is None or hazard.empty:
        return []
    with plt.rc_context(STYLE):
        fig, (left, right) = plt.subplots(1, 2, figsize=(7.4, 3.0))
        floor = _floor(hazard)
        for cond, part in hazard.groupby("condition", sort=False):
            colour = colours.get(cond, "black")
            B = part["B"].to_numpy(float)
            h = part["hazard"].to_numpy(float)
            lo, hi = part["ci_low"].to_numpy(float), part["ci_high"].to_numpy(float)
            seen = h > 0
            left.errorbar(
                B[seen],
                h[seen],
                yerr=[h[seen] - np.maximum(lo[seen], floor), hi[seen] - h[seen]],
                fmt="o",
                color=colour,
                ms=4,
                capsize=2,
                lw=0.8,
                label=cond,
            )
            left.plot(B[~seen], hi[~seen], "v", color=colour, ms=4, mfc="none")
            ha = part["hazard_after_first_updates"].to_numpy(float)
            alo, ahi = part["after_ci_low"].to_numpy(float), part["after_ci_high"].to_numpy(float)
            shown = np.isfinite(ha) & (ha > 0)
            left.errorbar(
                B[shown] * 1.08, ha[shown], yerr=[ha[shown] - np.maximum(alo[shown], floor), ahi[shown] - ha[shown]],
                fmt="o", color=colour, mfc="white", ms=4, capsize=2, lw=0.6,
            )  # fmt: skip
            for sample, style in (("all", "-"), ("after_first_updates", "--")):
                row = fit[(fit["condition"] == cond) & (fit["sample"] == sample)] if len(fit) else fit
                if len(row) and np.isfinite(row["slope"].iloc[0]):
                    a, b = float(row["intercept"].iloc[0]), float(row["slope"].iloc[0])
                    grid = np.geomspace(B.min(), B.max(), 50)
                    left.plot(grid, -np.expm1(-np.exp(a + b * np.log(grid))), style, color=colour, lw=0.8)
            eta = part["eta"].to_numpy(float)
            frac = part["first_update_frac"].to_numpy(float)
            flo, fhi = part["first_update_low"].to_numpy(float), part["first_update_high"].to_numpy(float)
            ok = np.isfinite(eta) & (eta > 0)
            right.errorbar(
                eta[ok], frac[ok], yerr=[frac[ok] - flo[ok], fhi[ok] - frac[ok]],
                fmt="o-", color=colour, ms=4, capsize=2, lw=0.8,
            )  # fmt: skip
        left.set_yscale("log")
        left.set_ylim(bottom=floor)
        size_axis(left, sorted(hazard["B"].unique()))
        left.set_ylabel("hazard per rollout h(B) (95 % interval)")
        left.set_title("Failure per rollout (open, dashed: after the first 2 rollouts)", fontsize=8)
        etas = sorted(v for v in hazard["eta"].unique() if math.isfinite(v) and v > 0)
        if etas:
            right.set_xscale("log")
            right.set_xticks(etas)
            right.set_xticklabels([sci(float(f"{v:.2g}")) for v in etas], rotation=30, ha="right")
            right.minorticks_off()
        right.set_ylim(-0.03, 1.03)
        right.set_xlabel(r"per-step learning rate $\eta(B)$")
        right.set_ylabel("fraction failing in the first 2 rollouts")
        right.set_title("Unstable at the first updates", fontsize=8)
        handles, labels = left.get_legend_handles_labels()
        if len(labels) > 1 or (labels and labels[0] != "all"):
            right.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
        fig.tight_layout()
        return save(fig, out, STEM, formats, dpi)


def _floor(hazard: pd.DataFrame) -> float:
    """The bottom of the log axis: the power of ten below the smallest positive value drawn."""
    values = hazard[["hazard", "ci_low", "ci_high"]].to_numpy(float).ravel()
    positive = values[np.isfinite(values) & (values > 0)]
    return float(10 ** math.floor(math.log10(positive.min()))) if positive.size else 1e-4
