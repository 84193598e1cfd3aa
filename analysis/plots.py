"""Figures for a study, one set per condition, each written as PNG and PDF (matplotlib, Agg).

* ``rt_vs_B_<condition>``: responses-to-target vs B on log-log axes, one colour per target; observed
  runs filled, censored runs open with an upward arrow (the true value lies above); the fitted line
  ``c·B^α`` and its 95 % bootstrap band.
* ``rf_vs_B_<condition>``: the same for responses-to-failure.
* ``accuracy_vs_responses_<condition>``: validation accuracy against the clock, one colour per B,
  one thin line per run, targets dashed.
* ``survival_failure_<condition>``: Kaplan–Meier curves of the failure clock, one per B.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator  # noqa: E402

from analysis._parallel import fork_map  # noqa: E402
from analysis.clocks import Tables, condition_slug, target_label  # noqa: E402
from analysis.fit import FitResult, kaplan_meier  # noqa: E402

_TARGET_COLOURS = plt.get_cmap("tab10").colors


def _size_colours(sizes) -> dict[float, tuple]:
    sizes = sorted(sizes)
    cmap = plt.get_cmap("viridis")
    return {b: cmap(i / max(len(sizes) - 1, 1) * 0.9) for i, b in enumerate(sizes)}


def _save(fig, out: Path, stem: str, formats: tuple[str, ...]) -> list[str]:
    names = []
    for fmt in formats:
        name = f"{stem}.{fmt}"
        fig.savefig(out / name, dpi=110)
        names.append(name)
    plt.close(fig)
    return names


def _scaling_panel(ax, runs: pd.DataFrame, clock: str, fit: FitResult | None, colour, label: str) -> None:
    B = runs["B"].to_numpy(float)
    R = runs[clock].to_numpy(float)
    cens = runs[f"{clock}:censored"].to_numpy(bool)
    good = np.isfinite(R) & (R > 0)
    jitter = np.exp(0.04 * (pd.Series(B).groupby(B).cumcount().to_numpy() - 1))
    xo, xc = (B * jitter)[good & ~cens], (B * jitter)[good & cens]
    ax.scatter(xo, R[good & ~cens], s=18, color=colour, zorder=3)
    if xc.size:
        rc = R[good & cens]
        ax.scatter(xc, rc, s=18, facecolors="none", edgecolors=[colour], zorder=3)
        ax.errorbar(
            xc,
            rc * 1.04,
            yerr=[np.zeros_like(rc), 0.3 * rc],
            lolims=True,
            fmt="none",
            ecolor=colour,
            color=colour,
            lw=0.8,
            capsize=2.5,
        )
    text = label
    if fit is not None and np.isfinite(fit.exponent):
        grid = np.geomspace(B[good].min() / 1.2, B[good].max() * 1.2, 50)
        lx = np.log(grid)
        ax.plot(grid, np.exp(fit.intercept + fit.exponent * lx), color=colour, lw=1.5)
        finite = np.isfinite(fit.boot_slopes) & np.isfinite(fit.boot_intercepts)
        if finite.sum() >= 10:
            pred = fit.boot_intercepts[finite, None] + fit.boot_slopes[finite, None] * lx[None, :]
            low, high = np.percentile(pred, [2.5, 97.5], axis=0)
            ax.fill_between(grid, np.exp(low), np.exp(high), color=colour, alpha=0.2, lw=0)
        text += f": {fit.exponent:.3f} [{_bound(fit.ci_low)}, {_bound(fit.ci_high)}]"
    elif fit is not None:
        text += ": not identified"
    ax.plot([], [], "o", color=colour, label=text)


def _human(value: float, _pos=None) -> str:
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= div:
            return f"{value / div:g}{suffix}"
    return f"{value:g}"


def _bound(value: float) -> str:
    return f"{value:.3f}" if np.isfinite(value) else ("∞" if value > 0 else "-∞" if value < 0 else "–")


def _finish_loglog(ax, title: str, ylabel: str, sizes) -> None:
    # plain-text tick labels: the default log-axis labels are mathtext, slow to lay out
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(FixedLocator(sorted(sizes)))
    ax.xaxis.set_major_formatter(FuncFormatter(_human))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(_human))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("rollout size B (responses per rollout)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.plot([], [], "o", mfc="none", color="grey", label="censored (true value above)")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, which="major", alpha=0.3)


def plot_condition(
    out: Path,
    condition: str,
    tables: Tables,
    fits: dict[tuple[str, str], FitResult],
    formats: tuple[str, ...] = ("png", "pdf"),
) -> list[str]:
    """Write the four figures of one condition; returns the file names."""
    runs = tables.runs[(tables.runs["condition"] == condition) & tables.runs["in_fit"]]
    evals = tables.evals[tables.evals["condition"] == condition]
    slug = condition_slug(condition)
    unit = runs["clock_unit"].iloc[0] if len(runs) else "responses"
    names: list[str] = []
    if runs.empty:
        return names

    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    for i, a in enumerate(tables.targets):
        label = target_label(a)
        _scaling_panel(ax, runs, label, fits.get((condition, label)), _TARGET_COLOURS[i % 10], f"α({a:g})")
    _finish_loglog(ax, f"responses-to-target, {condition}", f"{unit} to target", runs["B"].unique())
    names += _save(fig, out, f"rt_vs_B_{slug}", formats)

    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    _scaling_panel(ax, runs, "failure", fits.get((condition, "failure")), "C3", "γ")
    _finish_loglog(ax, f"responses-to-failure, {condition}", f"{unit} to failure", runs["B"].unique())
    names += _save(fig, out, f"rf_vs_B_{slug}", formats)

    colours = _size_colours(runs["B"].unique())
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    in_fit = evals["run"].isin(runs["run"])
    clock = unit if unit in evals.columns else "responses"
    for b, group in evals[in_fit].groupby("B"):
        segments = [
            np.column_stack([g[clock].to_numpy(float), g["eval/accuracy"].to_numpy(float)])
            for _, g in group.groupby("run", sort=False)
        ]
        ax.add_collection(LineCollection(segments, colors=[colours[b]], linewidths=0.8, alpha=0.6))
        ax.plot([], [], color=colours[b], label=f"B={b:g}")
    for a in tables.targets:
        ax.axhline(a, ls="--", lw=0.8, color="grey")
    ax.autoscale()
    ax.xaxis.set_major_formatter(FuncFormatter(_human))
    ax.set_xlabel(unit)
    ax.set_ylabel("validation accuracy")
    ax.set_title(f"accuracy vs {unit}, {condition}", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    names += _save(fig, out, f"accuracy_vs_responses_{slug}", formats)

    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    for b, group in runs.groupby("B"):
        values = group["failure"].to_numpy(float)
        events = ~group["failure:censored"].to_numpy(bool)
        t, s = kaplan_meier(values, events)
        end = np.nanmax(values) if values.size else t[-1]
        ax.step(np.append(t, end), np.append(s, s[-1]), where="post", color=colours[b], label=f"B={b:g}")
        censored_at = values[~events & np.isfinite(values)]
        at = s[np.searchsorted(t, censored_at, side="right") - 1]
        ax.plot(censored_at, at, "|", color=colours[b], ms=7)
    ax.set_ylim(-0.02, 1.02)
    ax.xaxis.set_major_formatter(FuncFormatter(_human))
    ax.set_xlabel(f"{unit} (failure clock)")
    ax.set_ylabel("fraction of runs not yet failed (Kaplan–Meier)")
    ax.set_title(f"survival of the failure clock, {condition} (| censored)", fontsize=9)
    ax.legend(fontsize=7, loc="lower left")
    names += _save(fig, out, f"survival_failure_{slug}", formats)
    return names


_STATE: tuple = ()  # (out, tables, fits, formats) for forked workers


def _plot_one(condition: str) -> list[str]:
    out, tables, fits, formats = _STATE
    return plot_condition(out, condition, tables, fits, formats)


def plot_all(
    out: Path, tables: Tables, fits, formats: tuple[str, ...] = ("png", "pdf"), jobs: int = 1
) -> list[str]:
    """Every condition's figures, conditions spread over ``jobs`` forked processes."""
    global _STATE
    _STATE = (out, tables, fits, formats)
    try:
        per_condition = fork_map(_plot_one, sorted(tables.runs["condition"].unique()), jobs)
    finally:
        _STATE = ()
    return [name for names in per_condition for name in names]
