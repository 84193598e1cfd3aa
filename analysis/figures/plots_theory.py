"""``alpha_predicted_vs_fitted``: the fitted α of every condition and target beside the α predicted from
the measured B_crit and B_noise (``theory.csv``, :mod:`analysis.fits.theory`), each with its 95 % interval,
against η_ref when it varies (else one position per condition); one panel per target. The look is
:mod:`analysis.figures.plot_style`'s."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from analysis.figures.plot_style import DPI, STYLE, condition_axis, save  # noqa: E402

STEM = "alpha_predicted_vs_fitted"
SERIES = (  # column prefix, label, marker, colour
    ("fitted", "fitted α", "o", "black"),
    ("predicted_b_crit", "predicted from B_crit", "^", "tab:red"),
    ("predicted_b_noise", "predicted from B_noise", "s", "tab:blue"),
)


def has_prediction(table: pd.DataFrame | None) -> bool:
    """Whether ``theory.csv`` has any predicted α to draw."""
    if table is None or table.empty:
        return False
    cols = [c for c in ("predicted_b_crit", "predicted_b_noise") if c in table]
    return bool(np.isfinite(table[cols].to_numpy(float)).any())


def plot_theory(out, table: pd.DataFrame, formats=("png", "pdf"), dpi: int = DPI) -> list[str]:
    """The figure (module docstring); nothing when no condition has a prediction."""
    if not has_prediction(table):
        return []
    clocks = list(dict.fromkeys(table["clock"]))
    conditions = list(dict.fromkeys(table["condition"]))
    eta = table.groupby("condition", sort=False)["eta_ref"].first().reindex(conditions)
    eta_num = pd.to_numeric(eta, errors="coerce").to_numpy(float)
    on_eta = bool(
        np.isfinite(eta_num).all() and (eta_num > 0).all() and np.unique(eta_num).size == len(conditions)
    )
    x_of = dict(zip(conditions, eta_num if on_eta else np.arange(len(conditions), dtype=float)))
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(
            1, len(clocks), figsize=(3.2 * len(clocks) + 0.4, 3.0), squeeze=False, sharey=True
        )
        for ax, clock in zip(axes[0], clocks):
            part = table[table["clock"] == clock]
            for j, (prefix, label, marker, colour) in enumerate(SERIES):
                shift = j - 1
                xs, ys, los, his = [], [], [], []
                for _, r in part.iterrows():
                    y = float(r[prefix])
                    if not math.isfinite(y):
                        continue
                    x = x_of[r["condition"]]
                    xs.append(x * 1.08**shift if on_eta else x + 0.12 * shift)
                    ys.append(y)
                    lo, hi = float(r[f"{prefix}_low"]), float(r[f"{prefix}_high"])
                    los.append(y - lo if math.isfinite(lo) else 0.0)
                    his.append(hi - y if math.isfinite(hi) else 0.0)
                if xs:
                    ax.errorbar(
                        xs,
                        ys,
                        yerr=[los, his],
                        fmt=marker,
                        color=colour,
                        ms=4,
                        capsize=2,
                        lw=0.8,
                        label=label,
                    )
            for level in (0.0, 0.5):
                ax.axhline(level, color="grey", lw=0.5, ls=":", zorder=0)
            ax.set_title(f"target {clock.split(':', 1)[-1]}", fontsize=8)
            condition_axis(ax, on_eta, eta_num, conditions)
        axes[0][0].set_ylabel("exponent α (95 % interval)")
        handles, labels = axes[0][0].get_legend_handles_labels()
        for ax in axes[0][1:]:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                if lab not in labels:
                    handles.append(h)
                    labels.append(lab)
        axes[0][-1].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
        fig.suptitle("Fitted α beside the α predicted from B_crit and B_noise", fontsize=9)
        fig.tight_layout()
        return save(fig, out, STEM, formats, dpi)
