"""The look shared by every figure: resolution, font sizes, markers and line styles, one colour per
condition (the same in every figure of a study) and per rollout size, axis formats, the legend outside
the axes, and saving every format with one tight bounding box. :mod:`analysis.figures.plots` lists the figures.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator  # noqa: E402

DPI = 300
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINES = ("-", "--", ":", "-.")
STYLE = {
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def condition_order(runs: pd.DataFrame, varying: list[str]) -> list[str]:
    """Conditions ordered by the values of the varying keys (numbers numerically), then by label: a
    function of the conditions only, not of the order the runs were found in."""
    firsts = runs.groupby("condition", sort=True).first()

    def key(cond):
        out = []
        for k in varying:
            v = firsts.loc[cond].get(k) if k in firsts.columns else None
            try:
                out.append((0, float(v), ""))
            except (TypeError, ValueError):
                out.append((1, 0.0, str(v)))
        return (*out, cond)

    return sorted(firsts.index, key=key)


def condition_colours(conditions) -> dict[str, tuple]:
    """One colour per condition, in the given order: the same in every figure of a study."""
    names = list(dict.fromkeys(conditions))
    cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    return {c: cmap(i % cmap.N) for i, c in enumerate(names)}


def size_colours(sizes) -> dict[float, tuple]:
    """One colour per rollout size (viridis, small to large)."""
    sizes = sorted(sizes)
    cmap = plt.get_cmap("viridis")
    return {b: cmap(i / max(len(sizes) - 1, 1) * 0.9) for i, b in enumerate(sizes)}


def save(fig, out: Path, stem: str, formats: tuple[str, ...], dpi: int = DPI) -> list[str]:
    """Save in every format with one tight bounding box (legends sit outside the axes), computed once
    instead of once per format."""
    names = []
    bbox = fig.get_tightbbox(fig.canvas.get_renderer()).padded(0.1)
    for fmt in formats:
        name = f"{stem}.{fmt}"
        fig.savefig(out / name, dpi=dpi, bbox_inches=bbox)
        names.append(name)
    plt.close(fig)
    return names


def human(value: float, _pos=None) -> str:
    """An axis label with a k/M/G/T suffix (a matplotlib formatter)."""
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= div:
            return f"{value / div:g}{suffix}"
    return f"{value:g}"


def short(value: float) -> str:
    """Three significant digits with a k/M/G suffix, for legends."""
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= div:
            return f"{value / div:.3g}{suffix}"
    return f"{value:.3g}"


def sci(value: float, _pos=None) -> str:
    """``3e-06`` as mathtext ``3×10⁻⁶``; plain numbers between 0.01 and 1000 as they are."""
    if value == 0 or 0.01 <= abs(value) < 1000:
        return f"{value:g}"
    exp = int(math.floor(math.log10(abs(value))))
    mant = value / 10**exp
    mant_text = "" if abs(mant - 1) < 1e-9 else f"{mant:g}\\times"
    return f"${mant_text}10^{{{exp}}}$"


def bound(value: float) -> str:
    """An interval end for a legend; infinite ends as ∞."""
    return f"{value:.3f}" if np.isfinite(value) else ("∞" if value > 0 else "-∞" if value < 0 else "–")


def log_y(ax) -> None:
    """Log y axis with plain labels; minor ticks labelled when the range spans less than a decade."""
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    ax.yaxis.set_major_formatter(FuncFormatter(human))
    if hi / max(lo, 1e-300) < 10:
        ax.yaxis.set_minor_formatter(FuncFormatter(human))
    else:
        ax.yaxis.set_minor_formatter(NullFormatter())


def size_axis(ax, sizes) -> None:
    """The B axis: log base 2 with a tick at every size."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(sizes)))
    ax.xaxis.set_major_formatter(FuncFormatter(human))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("rollout size B (responses per rollout)")


def legend_outside(ax) -> None:
    """The legend to the right of the axes (figures are saved with a tight box around it)."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False, borderaxespad=0.0)


def unit_words(unit: str) -> str:
    """A clock's name in words, for axis labels."""
    return {
        "responses": "responses",
        "optimizer_steps": "optimizer steps",
        "wall_seconds": "wall seconds",
    }.get(unit, unit)


def jitter(B: np.ndarray, width: float = 0.22) -> np.ndarray:
    """Multiplicative x offsets spreading the runs of one size over +-width/2 in log B (a fixed band,
    however many seeds there are)."""
    s = pd.Series(B)
    rank = s.groupby(B).cumcount().to_numpy(float)
    n = s.groupby(B).transform("size").to_numpy(float)
    return np.exp(width * (np.where(n > 1, rank / np.maximum(n - 1, 1), 0.5) - 0.5))


def condition_axis(ax, on_eta: bool, eta_num, conditions) -> None:
    """The x-axis of a per-condition figure: log η_ref ticks at the conditions' rates (``on_eta``), else
    one category tick per condition label."""
    if on_eta:
        ax.set_xscale("log")
        ax.set_xticks(sorted(set(eta_num)))
        ax.set_xticklabels([sci(v) for v in sorted(set(eta_num))])
        ax.minorticks_off()
        ax.set_xlabel(r"reference learning rate $\eta_{\rm ref}$")
    else:
        ax.set_xticks(range(len(conditions)))
        ax.set_xticklabels(conditions, rotation=30, ha="right", fontsize=6)
        ax.set_xlabel("condition")
