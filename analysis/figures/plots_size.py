"""``model_size``: α (each target's and the common one) and B_crit against the model size N, with their
95 % intervals (:func:`analysis.fits.trend_size.size_rows`); γ beside them where failures were fitted."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from analysis.data.model_size import PARAMETERS_KEY  # noqa: E402
from analysis.figures.plot_style import DPI, STYLE, save  # noqa: E402

STEM = "model_size"


def _errorbars(ax, part: pd.DataFrame, label: str, log: bool, shift: float) -> None:
    x = part[PARAMETERS_KEY].to_numpy(float) * shift
    y, low, high = (
        pd.to_numeric(part[c], errors="coerce").to_numpy(float) for c in ("value", "ci_low", "ci_high")
    )
    ok = np.isfinite(y) & ((y > 0) if log else True)
    if not ok.any():
        return
    finite = y[ok]
    edge_lo, edge_hi = (finite.min() / 10, finite.max() * 10) if log else (finite.min() - 1, finite.max() + 1)
    low = np.clip(np.where(np.isfinite(low), low, edge_lo), edge_lo, None)
    high = np.clip(np.where(np.isfinite(high), high, edge_hi), None, edge_hi)
    ax.errorbar(
        x[ok], y[ok], yerr=[y[ok] - low[ok], high[ok] - y[ok]], fmt="o-", ms=3, lw=0.8, capsize=2, label=label
    )


def panels(table: pd.DataFrame) -> list[str]:
    """The quantities with a value at some N (a γ whose rows are all empty, no run having failed, gets
    no panel)."""
    values = pd.to_numeric(table["value"], errors="coerce")
    return [q for q in ("alpha", "gamma", "b_crit") if np.isfinite(values[table["quantity"] == q]).any()]


def plot_size(out, table: pd.DataFrame, formats=("png", "pdf"), dpi: int | None = None) -> list[str]:
    """Panels α(N), γ(N) (when fitted) and B_crit(N) on a log N axis; nothing without two sizes."""
    if table is None or table.empty or table[PARAMETERS_KEY].nunique() < 2:
        return []
    quantities = panels(table)
    titles = {"alpha": "α (responses to target ∝ B^α)", "gamma": "γ (responses to failure ∝ B^γ)"}
    titles["b_crit"] = r"$B_{\rm crit}$ (responses per rollout)"
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(
            1, len(quantities), figsize=(3.3 * len(quantities) + 0.6, 3.0), squeeze=False
        )
        for ax, q in zip(axes[0], quantities):
            part = table[table["quantity"] == q]
            clocks = list(dict.fromkeys(part["clock"]))
            for j, clock in enumerate(clocks):
                shift = 1.0 + 0.04 * (j - (len(clocks) - 1) / 2)  # side by side at one N
                _errorbars(ax, part[part["clock"] == clock], clock, q == "b_crit", shift)
            ax.set_xscale("log")
            if q == "b_crit":
                ax.set_yscale("log")
            ax.set_xlabel("N (parameters)")
            ax.set_title(titles[q], fontsize=8)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=6, frameon=False)
        fig.suptitle("Model size: exponents and critical batch per N (95 % intervals)", fontsize=9)
        fig.tight_layout()
        names = save(fig, out, STEM, formats, dpi or DPI)
        plt.close(fig)
        return names
