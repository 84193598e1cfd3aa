"""The alpha(eta_ref) figure of docs/study.md from an ``rlvr-analyze`` output folder of the reference study.

    python scripts/alpha_eta_figure.py results/study docs/figures/alpha_vs_eta_ref.png

Clipped conditions: the common alpha across targets (filled, with its 95 % interval) where the
common-alpha test does not reject, every target's alpha beside it (small, faint); unclipped
conditions: the failure clock's gamma (triangles). The seed study's two published exponents with
K = 8 (0.15 at eta_ref = 1e-6, 0.44 at 1e-5, its own model and task) are drawn for comparison, with
the theory's limits 0 (noise-dominated) and 0.5 (curvature-dominated). The slope of the common alpha
per decade of eta_ref comes from ``trend.csv``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd

from analysis.plot_style import STYLE, plt

SEED_STUDY = ((1e-6, 0.15), (1e-5, 0.44))  # alpha with K = 8 steps per rollout (the seed study)


def main(argv: list[str]) -> int:
    src, dest = Path(argv[0]), Path(argv[1])
    exps = pd.read_csv(src / "exponents.csv")
    common = pd.read_csv(src / "common_exponent.csv") if (src / "common_exponent.csv").exists() else None
    trend = pd.read_csv(src / "trend.csv") if (src / "trend.csv").exists() else None
    clipped = exps["loss.clip"].notna() if "loss.clip" in exps else pd.Series(True, index=exps.index)
    plt.rcParams.update(STYLE)
    fig, ax = plt.subplots(figsize=(4.6, 3.0))
    targets = exps[clipped & exps["clock"].str.startswith("target:")]
    for k, (clock, rows) in enumerate(targets.groupby("clock")):
        rows = rows.sort_values("lr.ref_lr")
        x = rows["lr.ref_lr"].astype(float) * (1.0 + 0.06 * (k - 1))
        ax.errorbar(
            x,
            rows["exponent"],
            yerr=[rows["exponent"] - rows["ci_low"], rows["ci_high"] - rows["exponent"]],
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
        for mask, label, face in ((ok, "common α (targets agree)", "C0"), (~ok, "common α (test rejects)", "white")):
            part = c[mask]
            if len(part):
                ax.errorbar(
                    part["lr"],
                    part["exponent_common"],
                    yerr=[part["exponent_common"] - part["ci_low"], part["ci_high"] - part["exponent_common"]],
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
        hi = gam["ci_high"].where(gam["ci_high"].map(math.isfinite), gam["exponent"] + 1.0)
        ax.errorbar(
            gam["lr.ref_lr"].astype(float),
            gam["exponent"],
            yerr=[gam["exponent"] - gam["ci_low"], hi - gam["exponent"]],
            fmt="^",
            ms=5,
            lw=1.2,
            capsize=2,
            color="C3",
            label="γ, unclipped (failure clock)",
        )
    xs, ys = zip(*SEED_STUDY)
    ax.plot(xs, ys, "s--", color="C1", mfc="white", ms=5, lw=0.8, label="seed study (its model), K = 8")
    ax.axhline(0.0, color="0.6", lw=0.5, ls=":")
    ax.axhline(0.5, color="0.6", lw=0.5, ls=":")
    top = max(ax.get_ylim()[1], 0.6)
    ax.set_ylim(max(ax.get_ylim()[0], -0.6), min(top, 1.5))  # an unbounded gamma runs off the top
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
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(dest, dpi=200, bbox_inches="tight")
    print(f"wrote {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
