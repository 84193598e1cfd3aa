"""The figures of one condition (:func:`plot_condition`), one function per figure, and the
responses-to-B panel (:func:`scaling_panel`) the cross-condition figures reuse. :mod:`analysis.figures.plots`
lists every file; the look is :mod:`analysis.figures.plot_style`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

from analysis.data.clock_tables import condition_slug, target_label  # noqa: E402
from analysis.data.symbols import describe  # noqa: E402
from analysis.figures.plot_style import (  # noqa: E402
    DPI,
    LINES,
    MARKERS,
    STYLE,
    bound,
    human,
    jitter,
    legend_outside,
    log_y,
    save,
    short,
    size_axis,
    size_colours,
    unit_words,
)
from analysis.fits.competing import competing_events  # noqa: E402
from analysis.fits.gof import residuals  # noqa: E402
from analysis.fits.noise_scale import NoisePrediction, predicted_curve  # noqa: E402
from analysis.fits.sigmoid import sigmoid  # noqa: E402
from analysis.fits.survival import aalen_johansen, kaplan_meier  # noqa: E402

# ---- the responses-to-B panel -------------------------------------------------------------------


def scaling_panel(ax, runs, clock, fit, colour, label, marker="o", line="-", prediction=None) -> None:
    """One clock against B: the runs (reached: filled, with a bar down to the evaluation before the
    crossing; never reached: open with an upward arrow), the fitted line with its bootstrap band and
    the noise-scale prediction; the legend entry gives the exponent and its interval."""
    B = runs["B"].to_numpy(float)
    R = runs[clock].to_numpy(float)
    good = np.isfinite(R) & (R > 0)
    obs = _scaling_points(ax, runs, clock, B, R, good, colour, marker)
    text = label
    if fit is not None and np.isfinite(fit.exponent):
        text += _scaling_fit(ax, fit, B, good, obs, colour, line, prediction)
    elif fit is not None:
        text += ": not identified"
    ax.plot([], [], marker=marker, ls=line, color=colour, label=text)


def _scaling_points(ax, runs, clock, B, R, good, colour, marker) -> np.ndarray:
    """The runs' markers; returns the mask of runs that reached the event (uncensored)."""
    cens = runs[f"{clock}:censored"].to_numpy(bool)
    lower = runs[f"{clock}:lower"].to_numpy(float) if f"{clock}:lower" in runs else np.full(B.shape, np.nan)
    offsets = jitter(B)
    obs, cen = good & ~cens, good & cens
    xo = (B * offsets)[obs]
    ax.scatter(xo, R[obs], s=14, color=colour, marker=marker, zorder=3, linewidths=0)
    has_lo = obs & np.isfinite(lower)
    if has_lo.any():
        lo_vals = np.where(lower[has_lo] > 0, lower[has_lo], R[has_lo] * 0.5)
        ax.vlines((B * offsets)[has_lo], lo_vals, R[has_lo], color=colour, lw=0.6, alpha=0.6, zorder=2)
    if cen.any():
        xc, rc = (B * offsets)[cen], R[cen]
        ax.scatter(
            xc, rc, s=14, facecolors="none", edgecolors=[colour], marker=marker, zorder=3, linewidths=0.8
        )
        ax.errorbar(
            xc, rc * 1.04, yerr=[np.zeros_like(rc), 0.3 * rc], lolims=True, fmt="none", ecolor=colour, lw=0.6
        )
    return obs


def _scaling_fit(ax, fit, B, good, obs, colour, line, prediction) -> str:
    """The fitted line (solid where some run reached the event, dotted where extrapolated), its 95 %
    bootstrap band and the noise-scale prediction; returns the legend text after the label."""
    reached = sorted(set(B[obs]))
    lx_all = np.log(np.geomspace(B[good].min() / 1.15, B[good].max() * 1.15, 60))
    inside = (lx_all >= math.log(min(reached)) - 0.15) & (lx_all <= math.log(max(reached)) + 0.15)
    yfit = np.exp(fit.intercept + fit.exponent * lx_all)
    ax.plot(np.exp(lx_all[inside]), yfit[inside], color=colour, lw=1.3, ls=line)
    if (~inside).any():
        for part in (lx_all < math.log(min(reached))), (lx_all > math.log(max(reached))):
            if part.any():
                ax.plot(np.exp(lx_all[part]), yfit[part], color=colour, lw=0.8, ls=":", alpha=0.8)
    finite = np.isfinite(fit.boot_slopes) & np.isfinite(fit.boot_intercepts)
    if finite.sum() >= 10:
        lx = lx_all[inside]
        pred = fit.boot_intercepts[finite, None] + fit.boot_slopes[finite, None] * lx[None, :]
        low, high = np.percentile(pred, [2.5, 97.5], axis=0)
        ax.fill_between(np.exp(lx), np.exp(low), np.exp(high), color=colour, alpha=0.15, lw=0)
    if prediction is not None and np.isfinite(prediction.b_noise):
        grid = np.exp(lx_all)
        anchor = math.exp(float(np.mean(np.log(B[good]))))
        curve = predicted_curve(
            grid,
            prediction.b_noise,
            prediction.K,
            anchor,
            math.exp(fit.intercept + fit.exponent * math.log(anchor)),
        )
        ax.plot(
            grid,
            curve,
            color=colour,
            lw=0.9,
            ls="-.",
            alpha=0.9,
            label=f"noise-scale prediction: slope {prediction.implied:.2f} "
            f"[{bound(prediction.low)}, {bound(prediction.high)}]",
        )
    return f" = {fit.exponent:.3f} [{bound(fit.ci_low)}, {bound(fit.ci_high)}]"


def finish_scaling(ax, title, ylabel, sizes) -> None:
    """Axes, title, the legend's key to open markers and dotted lines, and the legend outside."""
    size_axis(ax, sizes)
    log_y(ax)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.plot([], [], "o", mfc="none", color="grey", label="never reached (true value above)")
    ax.plot([], [], ":", color="grey", label="extrapolated (no run reached it there)")
    ax.grid(True, which="major", alpha=0.25)
    legend_outside(ax)


@dataclass(frozen=True)
class FigureData:
    """What the figures draw besides the clock tables and the fits: a colour per condition (the same in
    every figure), the noise scale's prediction per condition, the sigmoid fits (``sigmoid.csv``) and the
    predicted α (``theory.csv``); ``None``: not computed, the figure or curve is left out."""

    colours: dict = field(default_factory=dict)
    noise: dict[str, NoisePrediction] = field(default_factory=dict)
    sigmoid: pd.DataFrame | None = None
    theory: pd.DataFrame | None = None


# ---- one condition's figures --------------------------------------------------------------------


@dataclass(frozen=True)
class _Condition:
    """What every figure of one condition draws from."""

    out: Path
    condition: str
    tables: object
    fits: dict
    formats: tuple[str, ...]
    data: FigureData
    dpi: int
    runs: pd.DataFrame  # the condition's runs in the fits
    evals: pd.DataFrame  # the condition's evaluations
    in_fit: pd.Series  # evaluations of runs in the fits
    slug: str
    colour: object
    unit: str
    clock: str  # evals' column of the clock (the unit, else responses)
    words: str  # the condition in words and symbols, for titles
    sizes: list
    bcol: dict  # colour per B

    def save(self, fig, stem: str) -> list[str]:
        return save(fig, self.out, f"{stem}_{self.slug}", self.formats, self.dpi)


def plot_condition(
    out, condition, tables, fits, formats=("png", "pdf"), data: FigureData | None = None, dpi=DPI
) -> list[str]:
    """Write the figures of one condition; returns the file names. ``data``: the colours and the fits
    beside the clocks (default: none of them, the condition in the first colour)."""
    data = data or FigureData()
    runs = tables.runs[(tables.runs["condition"] == condition) & tables.runs["in_fit"]]
    evals = tables.evals[tables.evals["condition"] == condition] if len(tables.evals) else tables.evals
    if runs.empty:
        return []
    unit = runs["clock_unit"].iloc[0]
    sizes = sorted(runs["B"].unique())
    c = _Condition(
        out=out,
        condition=condition,
        tables=tables,
        fits=fits,
        formats=formats,
        data=data,
        dpi=dpi,
        runs=runs,
        evals=evals,
        in_fit=evals["run"].isin(runs["run"]),
        slug=condition_slug(condition),
        colour=data.colours.get(condition, "C0"),
        unit=unit,
        clock=unit if unit in evals.columns else "responses",
        words=describe(tables.varying_keys, runs.iloc[0].to_dict(), math_text=True),
        sizes=sizes,
        bcol=size_colours(sizes),
    )
    names: list[str] = []
    with plt.rc_context(STYLE):
        for figure in (
            _responses_to_target,
            _responses_to_failure,
            _accuracy_vs_responses,
            _accuracy_vs_compute,
            _survival_failure,
            _incidence,
            _residuals,
        ):
            names += figure(c)
    return names


def _responses_to_target(c: _Condition) -> list[str]:
    """``rt_vs_B``: every target's responses-to-target against B, the noise-scale prediction with the
    first."""
    fig, ax = plt.subplots(figsize=(4.2, 3.2))
    pred = c.data.noise.get(c.condition)
    for i, a in enumerate(c.tables.targets):
        label = target_label(a)
        if (c.condition, label) not in c.fits:  # a target these runs do not time
            continue
        scaling_panel(
            ax,
            c.runs,
            label,
            c.fits.get((c.condition, label)),
            c.colour,
            f"α(a = {a:g})",
            MARKERS[i % len(MARKERS)],
            LINES[i % len(LINES)],
            pred if i == 0 else None,
        )
    finish_scaling(ax, f"Responses to target, {c.words}", f"{unit_words(c.unit)} to reach target a", c.sizes)
    return c.save(fig, "rt_vs_B")


def _responses_to_failure(c: _Condition) -> list[str]:
    """``rf_vs_B``: responses-to-failure against B."""
    fig, ax = plt.subplots(figsize=(4.2, 3.2))
    scaling_panel(ax, c.runs, "failure", c.fits.get((c.condition, "failure")), c.colour, "γ")
    finish_scaling(ax, f"Responses to failure, {c.words}", f"{unit_words(c.unit)} to failure", c.sizes)
    return c.save(fig, "rf_vs_B")


def _accuracy_vs_responses(c: _Condition) -> list[str]:
    """``accuracy_vs_responses``: every run's validation accuracy, one colour per B."""
    fig, ax = plt.subplots(figsize=(4.2, 3.2))
    for b, group in c.evals[c.in_fit].groupby("B"):
        segments = [
            np.column_stack([g[c.clock].to_numpy(float), g["eval/accuracy"].to_numpy(float)])
            for _, g in group.groupby("run", sort=False)
        ]
        ax.add_collection(LineCollection(segments, colors=[c.bcol[b]], linewidths=0.7, alpha=0.6))
        ax.plot([], [], color=c.bcol[b], label=f"B = {b:g}")
    for a in c.tables.targets:
        ax.axhline(a, ls="--", lw=0.6, color="grey")
    ax.autoscale()
    ax.xaxis.set_major_formatter(FuncFormatter(human))
    ax.set_xlabel(unit_words(c.unit))
    ax.set_ylabel("validation accuracy")
    ax.set_title(f"Validation accuracy, {c.words}")
    legend_outside(ax)
    return c.save(fig, "accuracy_vs_responses")


def _accuracy_vs_compute(c: _Condition) -> list[str]:
    """``accuracy_vs_compute``: the ScaleRL sigmoid of each B over the mean accuracy per evaluation
    (only with sigmoid fits)."""
    sig = c.data.sigmoid
    if sig is None or not len(sig):
        return []
    fig, ax = plt.subplots(figsize=(4.2, 3.2))
    pooled = sig[(sig["condition"] == c.condition) & (sig["level"] == "B")]
    for b, group in c.evals[c.in_fit].groupby("B"):
        pts = group[group[c.clock] > 0].groupby(c.clock)["eval/accuracy"].mean()
        ax.scatter(pts.index, pts.to_numpy(), s=5, color=c.bcol[b], alpha=0.6, linewidths=0)
        row = pooled[pooled["B"] == b]
        text = f"B = {b:g}"
        if len(row) and bool(row["converged"].iloc[0]):
            r = row.iloc[0]
            grid = np.geomspace(max(pts.index.min(), 1e-9), pts.index.max() * 1.5, 100)
            ax.plot(grid, sigmoid(grid, r["R0"], r["A"], r["b"], r["C_mid"]), color=c.bcol[b], lw=1.2)
            text += f": A = {r['A']:.2f}, b = {r['b']:.2f}, C_mid = {short(r['C_mid'])}"
        ax.plot([], [], color=c.bcol[b], label=text)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(human))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(f"{unit_words(c.unit)} (compute C)")
    ax.set_ylabel("validation accuracy (mean over seeds)")
    ax.set_title(f"Accuracy vs compute, sigmoid fits, {c.words}")
    legend_outside(ax)
    return c.save(fig, "accuracy_vs_compute")


def _survival_failure(c: _Condition) -> list[str]:
    """``survival_failure``: Kaplan–Meier curves of the failure clock, one per B (ticks: censored)."""
    fig, ax = plt.subplots(figsize=(4.2, 3.2))
    for b, group in c.runs.groupby("B"):
        values = group["failure"].to_numpy(float)
        events = ~group["failure:censored"].to_numpy(bool)
        t, s = kaplan_meier(values, events)
        end = np.nanmax(values) if values.size else t[-1]
        ax.step(np.append(t, end), np.append(s, s[-1]), where="post", color=c.bcol[b], label=f"B = {b:g}")
        censored_at = values[~events & np.isfinite(values)]
        at = s[np.searchsorted(t, censored_at, side="right") - 1]
        ax.plot(censored_at, at, "|", color=c.bcol[b], ms=6)
    ax.set_ylim(-0.02, 1.02)
    ax.xaxis.set_major_formatter(FuncFormatter(human))
    ax.set_xlabel(f"{unit_words(c.unit)} (failure clock)")
    ax.set_ylabel("fraction of runs not yet failed")
    ax.set_title(f"Kaplan–Meier survival of the failure clock, {c.words} (| censored)")
    legend_outside(ax)
    return c.save(fig, "survival_failure")


def _incidence(c: _Condition) -> list[str]:
    """``incidence``: Aalen–Johansen incidence of reaching each target first (solid) and of failing
    first (dashed), one panel per target, one colour per B."""
    n_t = len(c.tables.targets)
    if not n_t:
        return []
    fig, axes = plt.subplots(1, n_t, figsize=(3.0 * n_t + 1.2, 3.0), squeeze=False, sharey=True)
    for j, a in enumerate(c.tables.targets):
        ax = axes[0, j]
        for b, group in c.runs.groupby("B"):
            times, causes = competing_events(group, a)
            aj = aalen_johansen(times, causes)
            end = np.nanmax(times) if np.isfinite(times).any() else aj["time"][-1]
            tt = np.append(aj["time"], end)
            ax.step(
                tt,
                np.append(aj["cif"][:, 0], aj["cif"][-1, 0]),
                where="post",
                color=c.bcol[b],
                label=f"B = {b:g}" if j == 0 else None,
            )
            ax.step(tt, np.append(aj["cif"][:, 1], aj["cif"][-1, 1]), where="post", color=c.bcol[b], ls="--")
        ax.set_ylim(-0.02, 1.02)
        ax.xaxis.set_major_formatter(FuncFormatter(human))
        ax.set_xlabel(unit_words(c.unit))
        ax.set_title(f"target a = {a:g}")
    axes[0, 0].set_ylabel("cumulative incidence (Aalen–Johansen)")
    axes[0, -1].plot([], [], color="grey", label="reached target first")
    axes[0, -1].plot([], [], color="grey", ls="--", label="failed first")
    handles, labels = [], []
    for ax in axes[0]:
        h, lab = ax.get_legend_handles_labels()
        handles += h
        labels += lab
    fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 0.95), frameon=False)
    fig.suptitle(f"Reaching the target before failing, {c.words}", fontsize=9)
    fig.tight_layout()
    return c.save(fig, "incidence")


_RESIDUAL_KINDS = {"exact": "o", "interval": "s", "left": "v", "right": "^"}
_RESIDUAL_WORDS = {
    "exact": "exact time",
    "interval": "interval-censored",
    "left": "left-censored",
    "right": "right-censored",
}


def _residuals(c: _Condition) -> list[str]:
    """``residuals``: conditional-mean standardised residuals of every fit against B, with the mean per
    size; one colour per clock, one marker per kind of observation."""
    fig, ax = plt.subplots(figsize=(4.2, 3.2))
    for i, clock_name in enumerate([target_label(a) for a in c.tables.targets] + ["failure"]):
        fit = c.fits.get((c.condition, clock_name))
        if fit is None or not np.isfinite(fit.exponent) or not np.isfinite(fit.sigma):
            continue
        runs = c.runs
        lower = runs[f"{clock_name}:lower"] if f"{clock_name}:lower" in runs else None
        Bs, r, kind = residuals(fit, runs["B"], runs[clock_name], runs[f"{clock_name}:censored"], lower)
        shift = np.exp(0.06 * (i - 1))
        col = plt.get_cmap("tab10")(i % 10)
        for k, m in _RESIDUAL_KINDS.items():
            sel = kind == k
            if sel.any():
                ax.scatter(
                    Bs[sel] * shift,
                    r[sel],
                    s=12,
                    marker=m,
                    color=col,
                    linewidths=0,
                    alpha=0.8 if k != "right" else 0.4,
                )
        means = pd.Series(r).groupby(Bs).mean()
        ax.plot(
            means.index * shift,
            means.to_numpy(),
            color=col,
            lw=0.8,
            label=f"{'γ' if clock_name == 'failure' else 'α(a = ' + clock_name.split(':')[1] + ')'}: mean per B",
        )
    for k, m in _RESIDUAL_KINDS.items():
        ax.scatter([], [], marker=m, color="grey", s=12, label=_RESIDUAL_WORDS[k])
    ax.axhline(0, color="black", lw=0.6)
    size_axis(ax, c.sizes)
    ax.set_ylabel("standardised residual E[z | data]")
    ax.set_title(f"Residuals of the power-law fits, {c.words}")
    legend_outside(ax)
    return c.save(fig, "residuals")
