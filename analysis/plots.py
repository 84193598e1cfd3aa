"""Figures for a study, written as 300-dpi PNG and vector PDF (matplotlib, Agg).

Per condition (``<condition>`` as in the tables):

* ``rt_vs_B_<condition>``: responses-to-target against B (log-log), one marker and line style per
  target in the condition's colour; reached runs filled at the evaluation that saw the crossing with a
  bar down to the evaluation before it (the interval the fit uses), runs that never reached it open
  with an upward arrow; the fitted line solid over the sizes where some run reached the target and
  dotted where it is extrapolated; its 95 % bootstrap band; the noise-scale prediction (dash-dot).
* ``rf_vs_B_<condition>``: the same for responses-to-failure.
* ``accuracy_vs_responses_<condition>``: validation accuracy against the clock, one colour per B.
* ``accuracy_vs_compute_<condition>``: the ScaleRL sigmoid of each B over the mean accuracy per
  evaluation (log clock axis).
* ``survival_failure_<condition>``: Kaplan–Meier curves of the failure clock, one per B.
* ``incidence_<condition>``: Aalen–Johansen cumulative incidence of reaching each target before
  failing (solid) and of failing first (dashed), one colour per B.
* ``residuals_<condition>``: conditional-mean standardised residuals of each fit against B.

Across conditions: ``exponents_vs_<key>`` for every key that varies (exponent with its 95 % interval
against the key, one colour per condition, the same colours in every figure), ``alpha_gamma_vs_eta_ref``
(α per target and γ against η_ref, the paper-style figure) when ``lr.ref_lr`` varies, and
``rt_vs_B_all_<target>`` (every condition's responses-to-target in one panel) and, with two or more
targets, ``exponents_vs_target`` (α against the target level, even for a single condition). Titles and axes name the
quantities in words and symbols (:mod:`analysis.symbols`); legends sit outside the axes.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator  # noqa: E402

from analysis._parallel import fork_map  # noqa: E402
from analysis.clocks import condition_slug, target_label  # noqa: E402
from analysis.competing import competing_events  # noqa: E402
from analysis.fit import aalen_johansen, kaplan_meier  # noqa: E402
from analysis.gof import residuals  # noqa: E402
from analysis.noise_scale import predicted_curve  # noqa: E402
from analysis.sigmoid import sigmoid  # noqa: E402
from analysis.symbols import describe  # noqa: E402

DPI = 300
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
_LINES = ("-", "--", ":", "-.")
_STYLE = {
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


def _size_colours(sizes) -> dict[float, tuple]:
    sizes = sorted(sizes)
    cmap = plt.get_cmap("viridis")
    return {b: cmap(i / max(len(sizes) - 1, 1) * 0.9) for i, b in enumerate(sizes)}


def _save(fig, out: Path, stem: str, formats: tuple[str, ...], dpi: int = DPI) -> list[str]:
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


def _human(value: float, _pos=None) -> str:
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= div:
            return f"{value / div:g}{suffix}"
    return f"{value:g}"


def _short(value: float) -> str:
    """Three significant digits with a k/M/G suffix, for legends."""
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= div:
            return f"{value / div:.3g}{suffix}"
    return f"{value:.3g}"


def _sci(value: float, _pos=None) -> str:
    """``3e-06`` as mathtext ``3×10⁻⁶``; plain numbers between 0.01 and 1000 as they are."""
    if value == 0 or 0.01 <= abs(value) < 1000:
        return f"{value:g}"
    exp = int(math.floor(math.log10(abs(value))))
    mant = value / 10**exp
    mant_text = "" if abs(mant - 1) < 1e-9 else f"{mant:g}\\times"
    return f"${mant_text}10^{{{exp}}}$"


def _bound(value: float) -> str:
    return f"{value:.3f}" if np.isfinite(value) else ("∞" if value > 0 else "-∞" if value < 0 else "–")


def _log_y(ax) -> None:
    """Log y axis with plain labels; minor ticks labelled when the range spans less than a decade."""
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    ax.yaxis.set_major_formatter(FuncFormatter(_human))
    if hi / max(lo, 1e-300) < 10:
        ax.yaxis.set_minor_formatter(FuncFormatter(_human))
    else:
        ax.yaxis.set_minor_formatter(NullFormatter())


def _size_axis(ax, sizes) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(sizes)))
    ax.xaxis.set_major_formatter(FuncFormatter(_human))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("rollout size B (responses per rollout)")


def _legend_outside(ax) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False, borderaxespad=0.0)


def _unit_words(unit: str) -> str:
    return {
        "responses": "responses",
        "optimizer_steps": "optimizer steps",
        "wall_seconds": "wall seconds",
    }.get(unit, unit)


def _jitter(B: np.ndarray, width: float = 0.22) -> np.ndarray:
    """Multiplicative x offsets spreading the runs of one size over +-width/2 in log B (a fixed band,
    however many seeds there are)."""
    s = pd.Series(B)
    rank = s.groupby(B).cumcount().to_numpy(float)
    n = s.groupby(B).transform("size").to_numpy(float)
    return np.exp(width * (np.where(n > 1, rank / np.maximum(n - 1, 1), 0.5) - 0.5))


def _scaling_panel(ax, runs, clock, fit, colour, label, marker="o", line="-", prediction=None) -> None:
    B = runs["B"].to_numpy(float)
    R = runs[clock].to_numpy(float)
    cens = runs[f"{clock}:censored"].to_numpy(bool)
    lower = runs[f"{clock}:lower"].to_numpy(float) if f"{clock}:lower" in runs else np.full(B.shape, np.nan)
    good = np.isfinite(R) & (R > 0)
    jitter = _jitter(B)
    obs, cen = good & ~cens, good & cens
    xo = (B * jitter)[obs]
    ax.scatter(xo, R[obs], s=14, color=colour, marker=marker, zorder=3, linewidths=0)
    has_lo = obs & np.isfinite(lower)
    if has_lo.any():
        lo_vals = np.where(lower[has_lo] > 0, lower[has_lo], R[has_lo] * 0.5)
        ax.vlines((B * jitter)[has_lo], lo_vals, R[has_lo], color=colour, lw=0.6, alpha=0.6, zorder=2)
    if cen.any():
        xc, rc = (B * jitter)[cen], R[cen]
        ax.scatter(
            xc, rc, s=14, facecolors="none", edgecolors=[colour], marker=marker, zorder=3, linewidths=0.8
        )
        ax.errorbar(
            xc, rc * 1.04, yerr=[np.zeros_like(rc), 0.3 * rc], lolims=True, fmt="none", ecolor=colour, lw=0.6
        )
    text = label
    if fit is not None and np.isfinite(fit.exponent):
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
        text += f" = {fit.exponent:.3f} [{_bound(fit.ci_low)}, {_bound(fit.ci_high)}]"
        if prediction is not None and np.isfinite(prediction.get("b_noise", np.nan)):
            grid = np.exp(lx_all)
            anchor = math.exp(float(np.mean(np.log(B[good]))))
            curve = predicted_curve(
                grid,
                prediction["b_noise"],
                prediction["K"],
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
                label=f"noise-scale prediction: slope {prediction['implied']:.2f} "
                f"[{_bound(prediction['low'])}, {_bound(prediction['high'])}]",
            )
    elif fit is not None:
        text += ": not identified"
    ax.plot([], [], marker=marker, ls=line, color=colour, label=text)


def _finish_scaling(ax, title, ylabel, sizes) -> None:
    _size_axis(ax, sizes)
    _log_y(ax)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.plot([], [], "o", mfc="none", color="grey", label="never reached (true value above)")
    ax.plot([], [], ":", color="grey", label="extrapolated (no run reached it there)")
    ax.grid(True, which="major", alpha=0.25)
    _legend_outside(ax)


def plot_condition(out, condition, tables, fits, formats=("png", "pdf"), extra=None, dpi=DPI) -> list[str]:
    """Write the figures of one condition; returns the file names."""
    extra = extra or {}
    runs = tables.runs[(tables.runs["condition"] == condition) & tables.runs["in_fit"]]
    evals = tables.evals[tables.evals["condition"] == condition] if len(tables.evals) else tables.evals
    if runs.empty:
        return []
    slug = condition_slug(condition)
    colour = extra.get("colours", {}).get(condition, "C0")
    unit = runs["clock_unit"].iloc[0]
    words = describe(tables.varying_keys, runs.iloc[0].to_dict(), math_text=True)
    sizes = sorted(runs["B"].unique())
    names: list[str] = []
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(4.2, 3.2))
        pred = extra.get("noise", {}).get(condition)
        for i, a in enumerate(tables.targets):
            label = target_label(a)
            if (condition, label) not in fits:  # a target these runs do not time
                continue
            _scaling_panel(
                ax,
                runs,
                label,
                fits.get((condition, label)),
                colour,
                f"α(a = {a:g})",
                _MARKERS[i % len(_MARKERS)],
                _LINES[i % len(_LINES)],
                pred if i == 0 else None,
            )
        _finish_scaling(ax, f"Responses to target, {words}", f"{_unit_words(unit)} to reach target a", sizes)
        names += _save(fig, out, f"rt_vs_B_{slug}", formats, dpi)

        fig, ax = plt.subplots(figsize=(4.2, 3.2))
        _scaling_panel(ax, runs, "failure", fits.get((condition, "failure")), colour, "γ")
        _finish_scaling(ax, f"Responses to failure, {words}", f"{_unit_words(unit)} to failure", sizes)
        names += _save(fig, out, f"rf_vs_B_{slug}", formats, dpi)

        bcol = _size_colours(sizes)
        clock = unit if unit in evals.columns else "responses"
        fig, ax = plt.subplots(figsize=(4.2, 3.2))
        in_fit = evals["run"].isin(runs["run"])
        for b, group in evals[in_fit].groupby("B"):
            segments = [
                np.column_stack([g[clock].to_numpy(float), g["eval/accuracy"].to_numpy(float)])
                for _, g in group.groupby("run", sort=False)
            ]
            ax.add_collection(LineCollection(segments, colors=[bcol[b]], linewidths=0.7, alpha=0.6))
            ax.plot([], [], color=bcol[b], label=f"B = {b:g}")
        for a in tables.targets:
            ax.axhline(a, ls="--", lw=0.6, color="grey")
        ax.autoscale()
        ax.xaxis.set_major_formatter(FuncFormatter(_human))
        ax.set_xlabel(_unit_words(unit))
        ax.set_ylabel("validation accuracy")
        ax.set_title(f"Validation accuracy, {words}")
        _legend_outside(ax)
        names += _save(fig, out, f"accuracy_vs_responses_{slug}", formats, dpi)

        sig = extra.get("sigmoid")
        if sig is not None and len(sig):
            fig, ax = plt.subplots(figsize=(4.2, 3.2))
            pooled = sig[(sig["condition"] == condition) & (sig["level"] == "B")]
            for b, group in evals[in_fit].groupby("B"):
                pts = group[group[clock] > 0].groupby(clock)["eval/accuracy"].mean()
                ax.scatter(pts.index, pts.to_numpy(), s=5, color=bcol[b], alpha=0.6, linewidths=0)
                row = pooled[pooled["B"] == b]
                text = f"B = {b:g}"
                if len(row) and bool(row["converged"].iloc[0]):
                    r = row.iloc[0]
                    grid = np.geomspace(max(pts.index.min(), 1e-9), pts.index.max() * 1.5, 100)
                    ax.plot(grid, sigmoid(grid, r["R0"], r["A"], r["b"], r["C_mid"]), color=bcol[b], lw=1.2)
                    text += f": A = {r['A']:.2f}, b = {r['b']:.2f}, C_mid = {_short(r['C_mid'])}"
                ax.plot([], [], color=bcol[b], label=text)
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(_human))
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel(f"{_unit_words(unit)} (compute C)")
            ax.set_ylabel("validation accuracy (mean over seeds)")
            ax.set_title(f"Accuracy vs compute, sigmoid fits, {words}")
            _legend_outside(ax)
            names += _save(fig, out, f"accuracy_vs_compute_{slug}", formats, dpi)

        fig, ax = plt.subplots(figsize=(4.2, 3.2))
        for b, group in runs.groupby("B"):
            values = group["failure"].to_numpy(float)
            events = ~group["failure:censored"].to_numpy(bool)
            t, s = kaplan_meier(values, events)
            end = np.nanmax(values) if values.size else t[-1]
            ax.step(np.append(t, end), np.append(s, s[-1]), where="post", color=bcol[b], label=f"B = {b:g}")
            censored_at = values[~events & np.isfinite(values)]
            at = s[np.searchsorted(t, censored_at, side="right") - 1]
            ax.plot(censored_at, at, "|", color=bcol[b], ms=6)
        ax.set_ylim(-0.02, 1.02)
        ax.xaxis.set_major_formatter(FuncFormatter(_human))
        ax.set_xlabel(f"{_unit_words(unit)} (failure clock)")
        ax.set_ylabel("fraction of runs not yet failed")
        ax.set_title(f"Kaplan–Meier survival of the failure clock, {words} (| censored)")
        _legend_outside(ax)
        names += _save(fig, out, f"survival_failure_{slug}", formats, dpi)

        n_t = len(tables.targets)
        if n_t:
            fig, axes = plt.subplots(1, n_t, figsize=(3.0 * n_t + 1.2, 3.0), squeeze=False, sharey=True)
            for j, a in enumerate(tables.targets):
                ax = axes[0, j]
                for b, group in runs.groupby("B"):
                    times, causes = competing_events(group, a)
                    aj = aalen_johansen(times, causes)
                    end = np.nanmax(times) if np.isfinite(times).any() else aj["time"][-1]
                    tt = np.append(aj["time"], end)
                    ax.step(
                        tt,
                        np.append(aj["cif"][:, 0], aj["cif"][-1, 0]),
                        where="post",
                        color=bcol[b],
                        label=f"B = {b:g}" if j == 0 else None,
                    )
                    ax.step(
                        tt, np.append(aj["cif"][:, 1], aj["cif"][-1, 1]), where="post", color=bcol[b], ls="--"
                    )
                ax.set_ylim(-0.02, 1.02)
                ax.xaxis.set_major_formatter(FuncFormatter(_human))
                ax.set_xlabel(_unit_words(unit))
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
            fig.suptitle(f"Reaching the target before failing, {words}", fontsize=9)
            fig.tight_layout()
            names += _save(fig, out, f"incidence_{slug}", formats, dpi)

        fig, ax = plt.subplots(figsize=(4.2, 3.2))
        kinds = {"exact": "o", "interval": "s", "left": "v", "right": "^"}
        for i, clock_name in enumerate([target_label(a) for a in tables.targets] + ["failure"]):
            fit = fits.get((condition, clock_name))
            if fit is None or not np.isfinite(fit.exponent) or not np.isfinite(fit.sigma):
                continue
            lower = runs[f"{clock_name}:lower"] if f"{clock_name}:lower" in runs else None
            Bs, r, kind = residuals(fit, runs["B"], runs[clock_name], runs[f"{clock_name}:censored"], lower)
            shift = np.exp(0.06 * (i - 1))
            col = plt.get_cmap("tab10")(i % 10)
            for k, m in kinds.items():
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
        for k, m in kinds.items():
            ax.scatter(
                [],
                [],
                marker=m,
                color="grey",
                s=12,
                label={
                    "exact": "exact time",
                    "interval": "interval-censored",
                    "left": "left-censored",
                    "right": "right-censored",
                }[k],
            )
        ax.axhline(0, color="black", lw=0.6)
        _size_axis(ax, sizes)
        ax.set_ylabel("standardised residual E[z | data]")
        ax.set_title(f"Residuals of the power-law fits, {words}")
        _legend_outside(ax)
        names += _save(fig, out, f"residuals_{slug}", formats, dpi)
    return names


_STATE: tuple = ()  # (out, tables, fits, formats, extra, dpi, exponents) for forked workers


def _plot_one(task: tuple[str, object]) -> tuple[list[str], list[str]]:
    """One figure task: ``(file names, warnings)``. A figure that cannot be drawn is skipped with a
    warning naming it and the error; it never stops the other figures, the tables or the report."""
    out, tables, fits, formats, extra, dpi, exponents = _STATE
    kind, arg = task
    try:
        if kind == "condition":
            return plot_condition(out, arg, tables, fits, formats, extra, dpi), []
        from analysis.plots_cross import plot_cross

        return plot_cross(out, tables, exponents, fits, formats, extra["colours"], dpi, only=[task]), []
    except Exception as err:  # noqa: BLE001 - any failure of one figure is reported, never raised
        plt.close("all")
        what = f"{kind} {arg}" if arg is not None else kind
        return [], [f"figure '{what}' skipped: {type(err).__name__}: {err}"]


def plot_all(
    out, tables, fits, formats=("png", "pdf"), jobs=1, exponents=None, extra=None, dpi=DPI, warnings=None
) -> list[str]:
    """Every condition's figures and the cross-condition ones, as independent tasks spread over
    ``jobs`` forked processes (the heaviest, the per-condition sets, first). A figure that fails is
    skipped; its warning is appended to ``warnings`` (a list) when given."""
    global _STATE
    extra = dict(extra or {})
    extra.setdefault("colours", condition_colours(condition_order(tables.runs, tables.varying_keys)))
    tasks: list[tuple[str, object]] = [("condition", c) for c in sorted(tables.runs["condition"].unique())]
    if exponents is not None:
        from analysis.plots_cross import cross_tasks

        tasks += cross_tasks(tables, exponents)
    _STATE = (out, tables, fits, formats, extra, dpi, exponents)
    try:
        per_task = fork_map(_plot_one, tasks, jobs)
    finally:
        _STATE = ()
    if warnings is not None:
        warnings.extend(w for _, ws in per_task for w in ws)
    return [name for names, _ in per_task for name in names]
