"""``b_crit_from_clocks``: the critical batch read from the clocks (``bcrit.csv``,
:mod:`analysis.fits.bcrit`) with its 95 % interval per condition and target."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from analysis.figures.plot_style import DPI, STYLE, condition_axis, save  # noqa: E402


def _num(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


STEM = "b_crit_from_clocks"


def plot_bcrit(out, table: pd.DataFrame, formats=("png", "pdf"), dpi: int | None = None) -> list[str]:
    """``b_crit_from_clocks``: B_crit with its 95 % interval per condition (against η_ref when every
    condition has its own), one panel per target; an unbounded end is an arrow to the panel's edge, the
    measured sizes a grey band. Nothing when no B_crit was estimated."""
    if table is None or table.empty or not table["b_crit"].map(_num).notna().any():
        return []
    clocks = list(dict.fromkeys(table["clock"]))
    conditions = list(dict.fromkeys(table["condition"]))
    eta = pd.to_numeric(
        table.groupby("condition", sort=False)["eta_ref"].first().reindex(conditions), errors="coerce"
    )
    eta_num = eta.to_numpy(float)
    on_eta = bool(
        np.isfinite(eta_num).all() and (eta_num > 0).all() and np.unique(eta_num).size == len(conditions)
    )
    x_of = dict(zip(conditions, eta_num if on_eta else np.arange(len(conditions), dtype=float)))
    finite = [v for c in ("b_crit", "ci_low", "ci_high") for v in table[c].map(_num) if 0 < v < math.inf]
    lo_edge = min(finite) / 4 if finite else 1.0
    hi_edge = max(finite) * 4 if finite else 10.0
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(
            1, len(clocks), figsize=(3.0 * len(clocks) + 0.4, 3.0), squeeze=False, sharey=True
        )
        for ax, clock in zip(axes[0], clocks):
            part = table[table["clock"] == clock]
            for _, r in part.iterrows():
                x = x_of[r["condition"]]
                sizes = (
                    [float(s.split(":")[0]) for s in str(r["alpha_local"]).split("; ")]
                    if r["alpha_local"]
                    else []
                )
                if sizes:
                    w = 0.15 if not on_eta else 0.0
                    ax.fill_between(
                        [x * 0.9, x * 1.1] if on_eta else [x - 0.3 - w, x + 0.3 + w],
                        min(sizes),
                        max(sizes),
                        color="0.9",
                        zorder=0,
                        lw=0,
                    )
                b, low, high = (_num(r[c]) for c in ("b_crit", "ci_low", "ci_high"))
                y = min(max(b, lo_edge), hi_edge) if not math.isnan(b) else math.nan
                if math.isnan(y):
                    continue
                ylo = min(max(low, lo_edge), hi_edge) if not math.isnan(low) else y
                yhi = min(max(high, lo_edge), hi_edge) if not math.isnan(high) else y
                ax.plot([x, x], [ylo, yhi], color="black", lw=0.8)
                ax.plot([x], [y], "o", color="black", ms=4, mfc="white" if not 0 < b < math.inf else "black")
                if high == math.inf:
                    ax.annotate(
                        "", (x, hi_edge), (x, hi_edge / 2), arrowprops={"arrowstyle": "->", "lw": 0.8}
                    )
                if low == 0:
                    ax.annotate(
                        "", (x, lo_edge), (x, lo_edge * 2), arrowprops={"arrowstyle": "->", "lw": 0.8}
                    )
            ax.set_yscale("log")
            ax.set_ylim(lo_edge / 1.5, hi_edge * 1.5)
            ax.set_title(f"target {clock.split(':', 1)[-1]}", fontsize=8)
            condition_axis(ax, on_eta, eta_num, conditions)
        axes[0][0].set_ylabel(r"$B_{\rm crit}$ (responses per rollout, 95 %)")
        fig.suptitle(
            "Critical batch from the clocks: R_T = R_min (1 + B / B_crit); grey: measured sizes", fontsize=9
        )
        fig.tight_layout()
        return save(fig, out, STEM, formats, dpi or DPI)
