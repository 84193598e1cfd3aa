"""Two replicates of one study, compared: ``python -m analysis.replicates RESULTS_A RESULTS_B``.

Each argument is an ``rlvr-analyze --out`` folder of the same study run on disjoint seeds (``make study``
and ``make study ARGS="--replicate 1" STUDY=runs/reference-r1``). For every condition both fitted, the
table puts side by side the common α (``common_exponent.csv``) and, for failure-clock conditions, γ
(``exponents.csv``), and for each trend along a numeric key (``trend.csv``: the common α's and each
target's) the slope and whether each replicate's interval holds the reference slope.

Two ways to say "they agree", and why both are printed (docs/study.md, "Do two replicates agree?"):

- **mutual inclusion**: each point inside the other's 95 % interval. Two exact, independent intervals
  of equal width pass this with probability P(|Z| < 1.96 / sqrt 2) = 0.83 per quantity, so a study
  with four rates and γ passes at all five only 40 % of the time even when nothing is wrong; it is
  a description, not a test.
- **difference test**: z = (a - b) / sqrt(se_a^2 + se_b^2), each se read from its reported interval
  as its width over 2 t_{n-1}(0.975) (n: the seeds in the fit, from ``runs.csv``; 1.96 where unknown:
  the seed-cluster t interval the study reports, ``analysis/fits/cross.py``), two-sided p from t with
  Welch-Satterthwaite degrees of freedom (the normal where a seed count is unknown), Holm's
  adjustment over the quantities compared; a difference is **resolved** where the adjusted p < 0.05.
  This is our reading of a replication check: it holds its 5 % false-alarm rate over the family
  where the intervals hold their 95 %. An unbounded interval gives no se and no test.

A trend's verdict agrees where both replicates place the reference slope on the same side (inside
both intervals, or outside both); where a replicate has no interval for it (the common α's trend with
fewer than three rates left, a rate left out where its common-α test rejects), that trend is *not
tested* there, and the per-target trends, which every rate enters, carry the comparison. Unreadable or
missing files are reported, never fatal.
"""

from __future__ import annotations

import argparse
import math
import numbers
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import stdtrit
from scipy.stats import norm
from scipy.stats import t as t_dist

from analysis.fits.trend import holm

COLUMNS = ["quantity", "a", "a_low", "a_high", "a_seeds", "b", "b_low", "b_high", "b_seeds", "inside",
           "z", "p", "p_holm", "resolved"]  # fmt: skip


def _read(folder: Path, name: str, notes: list[str]) -> pd.DataFrame:
    path = folder / name
    try:
        return pd.read_csv(path)
    except (OSError, ValueError) as err:  # missing, empty or unparsable: said, not fatal
        notes.append(f"{path}: not read ({type(err).__name__})")
        return pd.DataFrame()


def _seeds(folder: Path, notes: list[str]) -> dict[str, int]:
    """Seeds per condition among the runs the fits used (``runs.csv``)."""
    runs = _read(folder, "runs.csv", notes)
    if runs.empty or not {"condition", "seed"} <= set(runs.columns):
        return {}
    if "in_fit" in runs.columns:
        runs = runs[runs["in_fit"].astype(bool)]
    return {str(c): int(n) for c, n in runs.groupby("condition")["seed"].nunique().items()}


def quantities(folder: Path, notes: list[str]) -> dict[str, tuple[float, float, float, int]]:
    """quantity -> (point, low, high, seeds): each condition's common α and each failure clock's γ."""
    seeds = _seeds(folder, notes)
    out: dict[str, tuple[float, float, float, int]] = {}
    common = _read(folder, "common_exponent.csv", notes)
    for r in common.to_dict("records") if not common.empty else []:
        if np.isfinite(r.get("exponent_common", math.nan)):
            c = str(r["condition"])
            out[f"common α {c}"] = (r["exponent_common"], r["ci_low"], r["ci_high"], seeds.get(c, 0))
            if r.get("p_common", math.nan) < 0.05:  # the study then asks for each target's α instead
                notes.append(f"{folder}: common α {c}: the common-α test rejects (p = {r['p_common']:.2g})")
    exps = _read(folder, "exponents.csv", notes)
    if not exps.empty and "clock" in exps.columns:
        for r in exps[exps["clock"] == "failure"].to_dict("records"):
            if np.isfinite(r.get("exponent", math.nan)):
                c = str(r["condition"])
                out[f"γ {c}"] = (r["exponent"], r["ci_low"], r["ci_high"], seeds.get(c, 0))
    return out


def interval_se(low: float, high: float, seeds: int) -> float:
    """The standard error a reported 95 % interval implies (module docstring); NaN where unbounded."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return math.nan
    crit = float(stdtrit(seeds - 1, 0.975)) if seeds >= 2 else 1.959964
    return (high - low) / (2 * crit)


def difference(
    a: tuple[float, float, float, int], b: tuple[float, float, float, int]
) -> tuple[bool, float, float]:
    """Two (point, low, high, seeds): whether each point lies in the other's interval, and the
    difference's z and two-sided p (module docstring; NaN where an interval is unbounded)."""
    (pa, la, ha, na), (pb, lb, hb, nb) = a, b
    sa, sb = interval_se(la, ha, na), interval_se(lb, hb, nb)
    se = math.hypot(sa, sb)
    inside = bool(lb <= pa <= hb and la <= pb <= ha)
    if not (np.isfinite(se) and se > 0):
        return inside, math.nan, math.nan
    z = (pa - pb) / se
    if na >= 2 and nb >= 2:  # Welch-Satterthwaite degrees of freedom of the two seed-cluster variances
        df = se**4 / (sa**4 / (na - 1) + sb**4 / (nb - 1))
        return inside, z, float(2 * t_dist.sf(abs(z), df))
    return inside, z, float(2 * norm.sf(abs(z)))


def compare(a: Path, b: Path, level: float = 0.05) -> tuple[pd.DataFrame, list[str]]:
    """The comparison table (:data:`COLUMNS`, a row per quantity both replicates fitted) and notes."""
    notes: list[str] = []
    qa, qb = quantities(a, notes), quantities(b, notes)
    rows = []
    for q in sorted(set(qa) & set(qb)):
        (pa, la, ha, na), (pb, lb, hb, nb) = qa[q], qb[q]
        inside, z, p = difference(qa[q], qb[q])
        rows.append(
            {"quantity": q, "a": pa, "a_low": la, "a_high": ha, "a_seeds": na, "b": pb, "b_low": lb,
             "b_high": hb, "b_seeds": nb, "inside": inside, "z": z, "p": p}
        )  # fmt: skip
    for q in sorted(set(qa) ^ set(qb)):
        notes.append(f"{q}: fitted in only one replicate")
    table = pd.DataFrame(rows, columns=COLUMNS)
    table["p_holm"] = holm(table["p"]) if len(table) else []
    table["resolved"] = table["p_holm"] < level
    return table, notes


def _tested(r: dict, side: str) -> bool | None:
    """Whether the reference lies inside a replicate's trend interval; None where it has no interval."""
    low, high, inside = (
        r.get(f"slope_low_{side}"),
        r.get(f"slope_high_{side}"),
        r.get(f"reference_inside_{side}"),
    )
    if not all(isinstance(x, numbers.Real) and np.isfinite(x) for x in (low, high)) or inside is None:
        return None
    if isinstance(inside, float) and not np.isfinite(inside):
        return None
    return bool(inside)


def trend_verdicts(a: Path, b: Path, notes: list[str]) -> pd.DataFrame:
    """Each trend both replicates report (the common α's and each target's, per key and series): the
    slopes and whether the reference is inside each interval (None: no interval, not tested);
    ``same_verdict`` None where either is not tested."""
    out = []
    ta, tb = _read(a, "trend.csv", notes), _read(b, "trend.csv", notes)
    if ta.empty or tb.empty or "clock" not in ta.columns or "clock" not in tb.columns:
        return pd.DataFrame()
    both = ta.merge(tb, on=["key", "series", "clock"], suffixes=("_a", "_b"))
    both = both[both["clock"].astype(str).str.match(r"^(common|target:)")]
    # the common α's trend first, then the targets in order
    both = both.assign(_order=(both["clock"] != "common")).sort_values(["key", "series", "_order", "clock"])
    for r in both.to_dict("records"):
        inside = [_tested(r, "a"), _tested(r, "b")]
        same = None if None in inside else inside[0] == inside[1]
        out.append(
            {"key": r["key"], "series": r["series"], "clock": r["clock"], "reference": r.get("reference_a"),
             "slope_a": r["slope_a"], "low_a": r["slope_low_a"], "high_a": r["slope_high_a"],
             "slope_b": r["slope_b"], "low_b": r["slope_low_b"], "high_b": r["slope_high_b"],
             "inside_a": inside[0], "inside_b": inside[1], "same_verdict": same}
        )  # fmt: skip
    return pd.DataFrame(out)


def _fmt(x: float) -> str:
    return "∞" if x == math.inf else "−∞" if x == -math.inf else f"{x:.3f}"


def _trend_line(r) -> str:
    """One trend's verdicts (:func:`trend_verdicts`), as the report prints it."""

    def one(name: str, slope: float, low: float, high: float, inside: bool | None) -> str:
        if inside is None:
            return f"{name} no interval"
        return f"{name} {slope:+.3f} [{low:+.3f}, {high:+.3f}] ({'inside' if inside else 'outside'})"

    what = "the common α" if r.clock == "common" else f"α at {str(r.clock).removeprefix('target:')}"
    verdict = {True: "the same verdict.", False: "**different verdicts**.", None: "not tested in both."}
    return (
        f"Trend of {what} along {r.key} ({r.series}), per decade: "
        f"{one('A', r.slope_a, r.low_a, r.high_a, r.inside_a)}, {one('B', r.slope_b, r.low_b, r.high_b, r.inside_b)}; "
        f"the reference {r.reference:+.2f}: " + verdict[r.same_verdict]
    )


def report(table: pd.DataFrame, trends: pd.DataFrame, notes: list[str]) -> str:
    lines = ["| quantity | A [95 %] (seeds) | B [95 %] (seeds) | each inside the other's | z | p (Holm) |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for r in table.itertuples():
        z = f"{r.z:+.2f}" if np.isfinite(r.z) else "–"
        p = f"{r.p:.3f} ({r.p_holm:.3f})" if np.isfinite(r.p) else "– (unbounded)"
        lines.append(
            f"| {r.quantity} | {_fmt(r.a)} [{_fmt(r.a_low)}, {_fmt(r.a_high)}] ({r.a_seeds}) | {_fmt(r.b)} "
            f"[{_fmt(r.b_low)}, {_fmt(r.b_high)}] ({r.b_seeds}) | {'yes' if r.inside else '**no**'} | {z} | {p} |"
        )
    n, inside, resolved = len(table), int(table["inside"].sum()), int(table["resolved"].sum())
    lines.append("")
    lines.append(
        f"Each point inside the other's interval: {inside} of {n} (exact equal-width intervals: 83 % each, "
        f"{0.834**n:.0%} for all {n}). Differences resolved after Holm: {resolved} of {n}"
        + (" — the replicates agree." if n and not resolved else ".")
    )
    for r in trends.itertuples() if not trends.empty else []:
        lines.append(_trend_line(r))
    lines += [f"note: {x}" for x in notes]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analysis.replicates", description=__doc__.split("\n")[0])
    ap.add_argument("a", type=Path, help="rlvr-analyze --out folder of one replicate")
    ap.add_argument("b", type=Path, help="the same of the other replicate")
    ap.add_argument("--out", type=Path, default=None, help="also write the table as CSV")
    args = ap.parse_args(argv)
    table, notes = compare(args.a, args.b)
    trends = trend_verdicts(args.a, args.b, notes)
    print(report(table, trends, notes))
    if args.out is not None:
        table.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
