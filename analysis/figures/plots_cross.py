"""Figures across conditions: exponents against each varied key (and the paper-style α and γ against
η_ref), exponents against the target level, and every condition's responses-to-target in one panel.
See :mod:`analysis.figures.plots` for the list of files; the look is :mod:`analysis.figures.plot_style`'s.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402

from analysis.data.clock_tables import condition_slug, target_label  # noqa: E402
from analysis.data.symbols import describe, symbol  # noqa: E402
from analysis.figures.plot_style import (  # noqa: E402
    DPI,
    LINES,
    MARKERS,
    STYLE,
    condition_colours,
    condition_order,
    legend_outside,
    save,
    sci,
)
from analysis.figures.plots_condition import finish_scaling, scaling_panel  # noqa: E402
from analysis.fits.cross import key_categories, numeric, series_by_key  # noqa: E402


def cross_tasks(tables, exponents) -> list[tuple[str, object]]:
    """The cross-condition figures as independent tasks: ``("key", key)``, ``("target", a)`` and
    ``("levels", None)`` (exponent against the target level, drawn even for a single condition)."""
    levels = [("levels", None)] if len(tables.targets) >= 2 else []
    if tables.runs["condition"].nunique() < 2:
        return levels
    varying = [k for k in tables.varying_keys if k in exponents.columns]
    keys = [("key", k) for k in varying if exponents[k].nunique(dropna=False) >= 2]
    return keys + [("target", a) for a in tables.targets] + levels


def plot_cross(
    out, tables, exponents, fits, formats=("png", "pdf"), colours=None, dpi=DPI, only=None
) -> list[str]:
    """Figures across conditions (module docstring); nothing when there is a single condition.
    ``only``: a subset of :func:`cross_tasks` to draw (default: all)."""
    names: list[str] = []
    conditions = condition_order(tables.runs, tables.varying_keys)
    tasks = cross_tasks(tables, exponents) if only is None else only
    if not tasks:
        return names
    colours = colours or condition_colours(conditions)
    with plt.rc_context(STYLE):
        for key in [arg for kind, arg in tasks if kind == "key"]:
            names += _plot_key(out, key, tables, exponents, conditions, colours, formats, dpi)
        if any(kind == "levels" for kind, _ in tasks):
            names += _plot_levels(out, tables, exponents, conditions, colours, formats, dpi)
        for a in [arg for kind, arg in tasks if kind == "target"]:
            names += _plot_target(out, a, tables, exponents, fits, conditions, colours, formats, dpi)
    return names


def _plot_key(out, key, tables, exponents, conditions, colours, formats, dpi) -> list[str]:
    """``exponents_vs_<key>`` (``alpha_gamma_vs_eta_ref`` for ``lr.ref_lr``): α per target (left) and
    γ (right) against the key, one colour per condition."""
    paper = key == "lr.ref_lr"
    varying = [k for k in tables.varying_keys if k in exponents.columns]
    as_number = numeric(exponents[key])  # the axis type, decided once for every series
    fig, axes = plt.subplots(1, 2, figsize=(7.0, 3.0))
    for ax, which in zip(axes, ("target", "failure")):
        shown = _key_series(ax, key, which, tables, exponents, varying, colours, as_number)
        _key_axes(ax, key, which, tables, exponents, shown, as_number)
    for cond in conditions:
        axes[1].plot(
            [],
            [],
            "o",
            color=colours[cond],
            label=describe([k for k in varying], _first(tables.runs, cond), True),
        )
    axes[0].legend(loc="upper left", bbox_to_anchor=(0.0, -0.22), frameon=False, ncol=2)
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    title = "Exponents against " + symbol(key, True)
    fig.suptitle(title + (" (α: responses to target, γ: responses to failure)" if paper else ""), fontsize=9)
    fig.tight_layout()
    stem = "alpha_gamma_vs_eta_ref" if paper else f"exponents_vs_{condition_slug(key)}"
    return save(fig, out, stem, formats, dpi)


def _key_series(ax, key, which, tables, exponents, varying, colours, as_number) -> list[float]:
    """The exponents of one side (``target`` or ``failure``) against ``key`` with their intervals;
    returns the x values shown."""
    clocks = [target_label(a) for a in tables.targets] + ["failure"]
    shown: list[float] = []
    for _values, group in series_by_key(exponents, key, varying):
        for i, clock in enumerate(c for c in clocks if (c == "failure") == (which == "failure")):
            rows = group[group["clock"] == clock]
            if which == "target" and "n_censored_failure" in rows:
                # a responses-to-target exponent where most runs failed before the target
                # measures the failures, not the learning: left out of the figure (it
                # stays in exponents.csv and the report, with the competing-risk bounds)
                rows = rows[~(rows["n_censored_failure"] > 0.5 * rows["n_runs"])]
            if rows.empty:
                continue
            shown += [float(v) for v in rows["_x"]]
            x = rows["_x"].to_numpy(float)
            if which == "target":  # targets side by side, not on top of each other
                shift = i - 0.5 * (len(tables.targets) - 1)
                x = x * 1.06**shift if as_number else x + 0.06 * shift
            y = rows["exponent"].to_numpy(float)
            lo = rows["ci_low"].to_numpy(float)
            hi = rows["ci_high"].to_numpy(float)
            ax.plot(x, y, color="grey", lw=0.6, ls=LINES[i % len(LINES)], zorder=1)
            for xi, yi, lo_i, hi_i, cond in zip(x, y, lo, hi, rows["condition"]):
                if not np.isfinite(yi):
                    continue
                l_, h_ = (
                    (lo_i if np.isfinite(lo_i) else yi - 10),
                    (hi_i if np.isfinite(hi_i) else yi + 10),
                )
                ax.errorbar(
                    [xi],
                    [yi],
                    yerr=[[yi - l_], [h_ - yi]],
                    fmt=MARKERS[i % len(MARKERS)],
                    color=colours[cond],
                    ms=4,
                    capsize=2,
                    lw=0.8,
                    zorder=3,
                )
        ax.set_ylim(*_exp_limits(exponents, which))
    return shown


def _key_axes(ax, key, which, tables, exponents, shown, as_number) -> None:
    """Reference lines, labels and the key's axis (log for positive numbers, categories for text)."""
    ax.axhline(0, color="black", lw=0.5)
    if which == "target":
        ax.axhline(0.5, color="grey", lw=0.5, ls="--", label="α = 0.5 (theory: curvature-dominated)")
        for i, a in enumerate(tables.targets):
            ax.plot([], [], MARKERS[i % len(MARKERS)], color="grey", label=f"α(a = {a:g})")
        ax.set_ylabel("exponent α of responses to target")
    else:
        ax.set_ylabel("exponent γ of responses to failure")
    if as_number and (exponents[key].astype(float) > 0).all():
        ax.set_xscale("log")
        vals = sorted(set(shown)) or sorted(set(exponents[key].astype(float)))
        ax.xaxis.set_major_locator(FixedLocator(vals))
        ax.xaxis.set_major_formatter(FuncFormatter(sci))
        ax.xaxis.set_minor_locator(NullLocator())
    elif not as_number:
        labels = key_categories(exponents[key])
        ax.set_xticks(range(len(labels)), labels)
        ax.set_xlim(-0.5, len(labels) - 0.5)
    ax.set_xlabel(f"{symbol(key, True)} ({key})")
    ax.grid(True, alpha=0.25)


def _plot_target(out, a, tables, exponents, fits, conditions, colours, formats, dpi) -> list[str]:
    """``rt_vs_B_all_<target>``: every condition's responses-to-target and fitted line in one panel."""
    varying = [k for k in tables.varying_keys if k in exponents.columns]
    clock = target_label(a)
    fig, ax = plt.subplots(figsize=(4.6, 3.2))
    for i, cond in enumerate(conditions):
        runs = tables.runs[(tables.runs["condition"] == cond) & tables.runs["in_fit"]]
        if runs.empty or (cond, clock) not in fits:  # no fit: the runs do not time this target
            continue
        label = describe(varying, runs.iloc[0].to_dict(), True) + ": α"
        scaling_panel(
            ax, runs, clock, fits.get((cond, clock)), colours[cond], label, MARKERS[i % len(MARKERS)]
        )
    finish_scaling(
        ax,
        f"Responses to target a = {a:g}, all conditions",
        "responses to reach target",
        sorted(tables.runs["B"].unique()),
    )
    return save(fig, out, f"rt_vs_B_all_{condition_slug(f'{a:g}')}", formats, dpi)


def _plot_levels(out, tables, exponents, conditions, colours, formats, dpi) -> list[str]:
    """α against the target level a, one colour per condition, 95 % intervals."""
    varying = [k for k in tables.varying_keys if k in exponents.columns]
    fig, ax = plt.subplots(figsize=(4.6, 3.2))
    n = len(conditions)
    for i, cond in enumerate(conditions):
        rows = exponents[(exponents["condition"] == cond) & (exponents["clock"] != "failure")]
        a = np.array([float(c.split(":", 1)[1]) for c in rows["clock"]])
        y = rows["exponent"].to_numpy(float)
        lo, hi = rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float)
        x = a + 0.004 * (i - 0.5 * (n - 1))
        fin = np.isfinite(y)
        lo = np.where(np.isfinite(lo), lo, y - 10)
        hi = np.where(np.isfinite(hi), hi, y + 10)
        label = describe(varying, _first(tables.runs, cond), True) if varying else "all runs"
        ax.errorbar(
            x[fin],
            y[fin],
            yerr=[y[fin] - lo[fin], hi[fin] - y[fin]],
            fmt="o-",
            color=colours[cond],
            ms=4,
            capsize=2,
            lw=0.8,
            label=label,
        )
    ax.set_ylim(*_exp_limits(exponents, "target"))
    ax.axhline(0, color="black", lw=0.5)
    ax.xaxis.set_major_locator(FixedLocator(sorted(tables.targets)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.set_xlabel("target accuracy a")
    ax.set_ylabel("exponent α of responses to target")
    ax.set_title("Exponent against the target level")
    ax.grid(True, alpha=0.25)
    legend_outside(ax)
    return save(fig, out, "exponents_vs_target", formats, dpi)


def _first(runs: pd.DataFrame, condition: str) -> dict:
    return runs[runs["condition"] == condition].iloc[0].to_dict()


def _exp_limits(exponents: pd.DataFrame, which: str) -> tuple[float, float]:
    rows = exponents[(exponents["clock"] == "failure") == (which == "failure")]
    if which == "target" and "n_censored_failure" in rows:  # the fits the figure leaves out
        rows = rows[~(rows["n_censored_failure"] > 0.5 * rows["n_runs"])]
    vals = pd.concat([rows["exponent"], rows["ci_low"], rows["ci_high"]]).to_numpy(float)
    vals = vals[np.isfinite(vals)]
    if not vals.size:
        return -0.5, 1.0
    lo, hi = min(vals.min(), 0.0), max(vals.max(), 0.5 if which == "target" else 0.1)
    pad = 0.08 * (hi - lo)
    return max(lo - pad, -3.0), min(hi + pad, 3.0)
