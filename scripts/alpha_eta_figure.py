"""The alpha(eta_ref) figure of docs/study.md from an ``rlvr-analyze`` output folder of the reference study.

    python scripts/alpha_eta_figure.py results/study docs/figures/alpha_vs_eta_ref.png

Clipped conditions: the common alpha across targets (filled, with its 95 % interval) where the
common-alpha test does not reject, every target's alpha beside it (small, faint); unclipped
conditions: the failure clock's gamma (triangles). The seed study's two published exponents with
K = 8 (0.15 at eta_ref = 1e-6, 0.44 at 1e-5, its own model and task) stand in a panel of their own, as a
labelled reference: a learning rate means different things on two models, so the two are not drawn on
one eta axis (docs/theory.md gives eta in units of Adam's edge of stability, which two models can share).
Both panels show the theory's limits 0 (noise-dominated) and 0.5 (curvature-dominated). The slope of the common alpha
per decade of eta_ref comes from ``trend.csv``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd

from analysis.figures.plot_style import STYLE, plt

SEED_STUDY = ((1e-6, 0.15), (1e-5, 0.44))  # alpha with K = 8 steps per rollout (the seed study)


def _bars(centre: pd.Series, low: pd.Series, high: pd.Series) -> list[pd.Series]:
    """Error-bar lengths; an open end (±inf, or none) runs off the axes instead of vanishing."""
    low = low.where(low.map(math.isfinite), centre - 5.0)
    high = high.where(high.map(math.isfinite), centre + 5.0)
    return [centre - low, high - centre]


def main(argv: list[str]) -> int:
    src, dest = Path(argv[0]), Path(argv[1])
    exps = pd.read_csv(src / "exponents.csv")
    common = pd.read_csv(src / "common_exponent.csv") if (src / "common_exponent.csv").exists() else None
    trend = pd.read_csv(src / "trend.csv") if (src / "trend.csv").exists() else None
    clipped = exps["loss.clip"].notna() if "loss.clip" in exps else pd.Series(True, index=exps.index)
    plt.rcParams.update(STYLE)
    fig, (ax, ref) = plt.subplots(
        1, 2, figsize=(5.6, 3.0), sharey=True, gridspec_kw={"width_ratios": [4.6, 1.0], "wspace": 0.08}
    )
    targets = exps[clipped & exps["clock"].str.startswith("target:")]
    for k, (_clock, rows) in enumerate(targets.groupby("clock")):
        rows = rows.sort_values("lr.ref_lr")
        x = rows["lr.ref_lr"].astype(float) * (1.0 + 0.06 * (k - 1))
        ax.errorbar(
            x,
            rows["exponent"],
            yerr=_bars(rows["exponent"], rows["ci_low"], rows["ci_high"]),
            fmt="o",
            ms=2.5,
            lw=0.6,
            alpha=0.35,
            color="0.35",
            label="α per target" if k == 0 else None,
        )
    if common is not None and len(common):
        lr = exps.drop_duplicates("condition").set_index("condition")["lr.ref_lr"]
        c = common[common["condition"].isin(exps.loc[clipped, "condition"])].copy()
        c["lr"] = c["condition"].map(lr).astype(float)
        c = c.sort_values("lr")
        ok = c["p_common"].fillna(0) >= 0.05
        for mask, label, face in (
            (ok, "common α (targets agree)", "C0"),
            (~ok, "common α (test rejects)", "white"),
        ):
            part = c[mask]
            if len(part):
                ax.errorbar(
                    part["lr"],
                    part["exponent_common"],
                    yerr=_bars(part["exponent_common"], part["ci_low"], part["ci_high"]),
                    fmt="o",
                    ms=5,
                    lw=1.2,
                    capsize=2,
                    color="C0",
                    mfc=face,
                    label=label,
                )
    gam = exps[~clipped & (exps["clock"] == "failure")]
    if len(gam):
        ax.errorbar(
            gam["lr.ref_lr"].astype(float),
            gam["exponent"],
            yerr=_bars(gam["exponent"], gam["ci_low"], gam["ci_high"]),
            fmt="^",
            ms=5,
            lw=1.2,
            capsize=2,
            color="C3",
            label="γ, unclipped (failure clock)",
        )
    # the seed study on its own axis: its two rates, labelled, never placed on this model's eta axis
    ref.plot(range(len(SEED_STUDY)), [a for _, a in SEED_STUDY], "s--", color="C1", mfc="white", ms=5, lw=0.8)
    ref.set_xticks(range(len(SEED_STUDY)), [f"{eta:g}" for eta, _ in SEED_STUDY], fontsize=6)
    ref.set_xlim(-0.6, len(SEED_STUDY) - 0.4)
    ref.set_title("seed study\n(its model; reference)", fontsize=7)
    ref.set_xlabel("its η_ref", fontsize=7)
    for a in (ax, ref):
        a.axhline(0.0, color="0.6", lw=0.5, ls=":")
        a.axhline(0.5, color="0.6", lw=0.5, ls=":")
    ax.set_ylim(-0.6, 1.0)  # an open interval runs off the axes
    ax.set_xscale("log")
    ax.set_xlabel("η_ref (learning rate at the reference rollout size)")
    ax.set_ylabel("exponent")
    title = "α(η_ref), clipped, K = 8, square-root rule"
    if trend is not None and len(trend):
        row = trend[(trend["key"] == "lr.ref_lr") & (trend["clock"] == "common")]
        row = row[row["series"].astype(str).str.contains("0.2")] if len(row) > 1 else row
        if len(row):
            r = row.iloc[0]
            title += f"\nslope {r['slope']:.3f} [{r['slope_low']:.3f}, {r['slope_high']:.3f}] per decade: {r['trend']}"
    ax.set_title(title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, frameon=False, fontsize=6)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(dest, dpi=200, bbox_inches="tight")
    print(f"wrote {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
