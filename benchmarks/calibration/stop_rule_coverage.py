"""Coverage of the interval a study stops on: the stop rule replayed on a pool of real runs.

    python benchmarks/calibration/stop_rule_coverage.py --pool benchmarks/data/reference_pool.tar.xz \
        --truth-seeds 0-9 --start-seeds 5 --widths 0.12 0.2 0.3 --size-horizon-factor 2

``rlvr-study`` adds seeds to a condition until its requested interval (the common α) is as narrow as
asked, and reports the interval it stopped on. Stopping once a width is met selects the narrow intervals
of their distribution (those whose seeds happened to scatter little), so the stopped interval can hold
the truth less often than a design of the same size fixed in advance. :mod:`pool_coverage` checks fixed
designs; this script checks the rule. Per condition and draw, the design seeds (the pool's seeds other
than ``--truth-seeds``) are put in a random order; the first ``--start-seeds`` are the pilot (the first
``--pilot-seeds`` of them fix the per-size horizons with ``--size-horizon-factor``, as a study does),
then seeds are added **one at a time** — a study adds several per round, so one at a time gives the
rule every chance to stop early: the worst case — and the first prefix whose common α is at most
``W`` wide is where a study with width ``W`` stops; a draw that never meets ``W`` ends at its last look
(every design seed, or ``--max-seeds``: a budget end). ``--truth complement`` draws the order from every
seed and takes each draw's truth from the seeds after its last look (a fresh split per draw, as in
:mod:`pool_coverage`). Every prefix is fitted as ``rlvr-study`` fits it (``--bootstrap`` seed-block
resamples, isotonic crossings), so all widths are replayed from the same fits.

``--rules sequential two_stage`` replays a second rule on the same fits: the two-stage rule of
``rlvr-study`` (``stop_rule: two_stage``, :mod:`rlvr_study.two_stage`) fixes the seeds at the first
look, n0 (w0 / W)^2 rounded up (n0 seeds at the first look, w0 their width; at most the last look), and
reports the interval at that count whatever its width: it never looks at a later width, so it cannot
select the narrow ones. ``--replicates`` (with ``--truth complement``) also runs each rule on the seeds
after the last look, in their own random order, as a second study on disjoint seeds (what
``rlvr-study --replicate 1`` is), and prints how often the two stopped points each lie in the other's
interval (``agree``), also among the draws where both met the width (``agree_met``, ``both_met``).

Output, one row per condition and width: the share of draws that met the width and their mean seeds at
the stop, the coverage of the truth (the common α of the truth seeds, every run) by the stopped
intervals with its binomial 95 % interval, the same among the draws that met the width, and beside them
the coverage of fixed designs of the same draws at the start and at every design seed (what
:mod:`pool_coverage` measures) and ``expected``: the coverage an exact interval of the stopped median
width would show against a truth this noisy. ``--out`` writes the rows as CSV.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pool_coverage import (  # noqa: E402
    _binomial_ci,
    _expected,
    estimates,
    every_seed_drawn,
    parse_seeds,
    size_horizons,
    split,
    top_crossings,
    write_table,
)

from analysis.data.clock_tables import ClockOptions, build_tables  # noqa: E402
from analysis.data.load import load_source  # noqa: E402
from analysis.data.pool import unpack  # noqa: E402
from rlvr_study.two_stage import seeds_for  # noqa: E402

_STATE: dict = {}
COLUMNS = [
    "condition", "rule", "width", "draws", "met", "mean_seeds", "coverage", "coverage_low", "coverage_high",
    "coverage_met", "median_width", "expected", "coverage_start", "coverage_all", "truth", "truth_width",
    "agree", "agree_met", "both_met",
]  # fmt: skip


def _init(state: dict) -> None:
    _STATE.update(state)


def _prefixes(
    condition: str, order: list[int], last: int, draw: int
) -> list[tuple[int, float, float, float]]:
    """(seeds, point, low, high) of the common α of every prefix of ``order`` from the first look to
    ``last`` seeds, each read to the per-size horizons of its first ``pilot`` seeds."""
    s = _STATE
    pilot = {(condition, x) for x in order[: s["pilot"]]}
    out = []
    for k in range(min(s["start"], last), last + 1):
        chosen = {(condition, x) for x in order[:k]}
        records = [s["records"][i] for i, key in enumerate(s["keys"]) if key in chosen]
        if s["size_factor"]:
            records, _ = size_horizons(records, s["top"], pilot, s["key_of"], s["size_factor"])
        out.append((k, *_common(estimates(records, s["options"], s["n_boot"], seed=draw))))
    return out


def _one_draw(draw: int) -> dict:
    """condition -> [(seeds, point, low, high)] of the common α of every prefix of a random seed order
    (up to ``max_seeds``); with a complement truth also ``(condition, "truth")`` -> the common α of the
    seeds after the last prefix, and with ``replicates`` ``(condition, "replicate")`` -> the prefixes of
    those seeds' own order (a second study on disjoint seeds)."""
    s = _STATE
    rng = np.random.default_rng([s["seed"], draw])
    out: dict = {}
    for condition, seeds in sorted(s["design_seeds"].items()):
        order = [int(x) for x in rng.permutation(sorted(seeds))]
        last = min(len(order), s["max_seeds"] or len(order))
        if s["complement"]:
            held_out = {(condition, x) for x in order[last:]}
            truth = [r for r, key in zip(s["records"], s["keys"]) if key in held_out]
            out[(condition, "truth")] = _common(
                estimates(truth, s["options"], s["n_boot"], seed=10_000 + draw)
            )
            if s.get("replicates") and len(order) - last >= s["start"]:
                rest = order[last:]
                out[(condition, "replicate")] = _prefixes(
                    condition, rest, min(last, len(rest)), 20_000 + draw
                )
        out[condition] = _prefixes(condition, order, last, draw)
    return out


def _common(est: dict) -> tuple[float, float, float]:
    """The common α of an estimate of **one** condition's runs (its label is the tables' own: with one
    condition no key varies, so it is not the pool's condition name)."""
    found = [v for k, v in est.items() if k.endswith("|common")]
    return tuple(found[0]) if len(found) == 1 else (math.nan,) * 3


def stopped(prefixes: list[tuple[int, float, float, float]], width: float) -> tuple[tuple, bool]:
    """The prefix a study with this width stops on (the first at most ``width`` wide, else the last) and
    whether it met the width."""
    for p in prefixes:
        if np.isfinite(p[2]) and np.isfinite(p[3]) and p[3] - p[2] <= width:
            return p, True
    return prefixes[-1], False


def planned(
    prefixes: list[tuple[int, float, float, float]], width: float, assurance: float = 0.8
) -> tuple[tuple, bool]:
    """The prefix the two-stage rule (``rlvr-study``'s ``stop_rule: two_stage``) ends on: the seeds
    fixed at the first look from its width by :func:`rlvr_study.two_stage.seeds_for` (met with
    probability ``assurance``), at most the last look, whatever the width there; and whether it claims the width
    met: at most ``width`` wide **and** at the seeds it planned (a plan the last look cut short claims
    nothing, as ``rlvr-study`` reports such a condition open)."""
    k0, _, lo, hi = prefixes[0]
    last = prefixes[-1][0]
    w0 = hi - lo if np.isfinite(lo) and np.isfinite(hi) else math.inf
    ratio = w0 / width if width > 0 else (math.inf if w0 > 0 else 0.0)
    # the study's own plan (an unbounded first look: UNBOUNDED_FACTOR x k0)
    want = seeds_for(k0, ratio, assurance)
    n = min(want, last)
    p = next(x for x in prefixes if x[0] == n)
    return p, bool(want <= last and np.isfinite(p[2]) and np.isfinite(p[3]) and p[3] - p[2] <= width)


RULES = {"sequential": stopped, "two_stage": planned}


def _hit(p: tuple, truth: float) -> bool:
    return bool(np.isfinite(p[2]) and np.isfinite(p[3]) and p[2] <= truth <= p[3])


def summarise(
    truth: dict | None,
    draws: list[dict],
    widths: list[float],
    rules: tuple[str, ...] = ("sequential",),
    assurance: float = 0.8,
) -> pd.DataFrame:
    """The table, a row per condition, rule (:data:`RULES`) and width; ``truth`` None: each draw's own
    truth (``(condition, "truth")``); ``assurance``: the two-stage rule's."""
    rows = []
    for condition in sorted(k for k in draws[0] if isinstance(k, str)) if draws else []:
        fixed = truth.get(f"{condition}|common", (math.nan,) * 3) if truth is not None else None
        pairs = [(d[condition], fixed or d[(condition, "truth")]) for d in draws if d.get(condition)]
        pairs = [(seq, t) for seq, t in pairs if np.isfinite(t[0])]
        if not pairs:
            continue
        point = float(np.mean([t[0] for _, t in pairs]))
        truth_width = float(np.median([t[2] - t[1] for _, t in pairs]))
        for rule, w in [(r, w) for r in rules for w in widths]:
            pick = RULES[rule] if rule != "two_stage" else lambda seq, w: planned(seq, w, assurance)
            picked = [(*pick(seq, w), t[0]) for seq, t in pairs]
            hits = sum(_hit(p, t) for p, _, t in picked)
            met = [(p, t) for p, m, t in picked if m]
            n = len(picked)
            c_lo, c_hi = _binomial_ci(hits, n) if n else (math.nan, math.nan)
            widths_stopped = [p[3] - p[2] for p, _, _ in picked if np.isfinite(p[2]) and np.isfinite(p[3])]
            median_width = float(np.median(widths_stopped)) if widths_stopped else math.inf
            twins = [
                (pick(seq, w), pick(d[(condition, "replicate")], w))
                for d in draws
                if d.get(condition) and d.get((condition, "replicate"))
                for seq in [d[condition]]
            ]
            agree = [(_hit(a, b[1]) and _hit(b, a[1]), ma and mb) for (a, ma), (b, mb) in twins]
            rows.append(
                {
                    "agree": float(np.mean([x for x, _ in agree])) if agree else math.nan,
                    "agree_met": float(np.mean([x for x, m in agree if m])) if any(m for _, m in agree) else math.nan,
                    "both_met": float(np.mean([m for _, m in agree])) if agree else math.nan,
                    "condition": condition, "rule": rule, "width": w, "draws": n, "met": len(met) / n if n else math.nan,
                    "mean_seeds": float(np.mean([p[0] for p, _, _ in picked])) if n else math.nan,
                    "coverage": hits / n if n else math.nan, "coverage_low": c_lo, "coverage_high": c_hi,
                    "coverage_met": sum(_hit(p, t) for p, t in met) / len(met) if met else math.nan,
                    "median_width": median_width, "expected": _expected(truth_width, median_width),
                    "coverage_start": float(np.mean([_hit(seq[0], t[0]) for seq, t in pairs])),
                    "coverage_all": float(np.mean([_hit(seq[-1], t[0]) for seq, t in pairs])),
                    "truth": point, "truth_width": truth_width,
                }
            )  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--pool", nargs="+", required=True, help="pool files (python -m analysis.data.pool pack ...)"
    )
    p.add_argument("--truth-seeds", default="", help="seeds of the truth, e.g. 0-9 (default: larger half)")
    p.add_argument(
        "--truth", choices=["seeds", "complement"], default="seeds",
        help="seeds: one truth from --truth-seeds; complement: each draw's truth from the seeds after its "
        "--max-seeds (a fresh split per draw)",
    )  # fmt: skip
    p.add_argument("--start-seeds", type=int, default=5, help="seeds of the pilot (the first look)")
    p.add_argument("--max-seeds", type=int, default=0, help="the last look (0: every design seed)")
    p.add_argument("--widths", type=float, nargs="+", default=[0.12], help="requested widths to replay")
    p.add_argument(
        "--rules", nargs="+", choices=sorted(RULES), default=["sequential"],
        help="sequential: stop at the first look that meets the width; two_stage: the seeds fixed at the "
        "first look from its width",
    )  # fmt: skip
    p.add_argument(
        "--conditions", nargs="*", default=None, help="only conditions whose name holds one of these"
    )
    p.add_argument(
        "--replicates", action="store_true",
        help="with --truth complement: the held-out seeds also run the rule as a second study on disjoint "
        "seeds; agree: both stopped points inside the other's interval",
    )  # fmt: skip
    p.add_argument("--draws", type=int, default=200)
    p.add_argument("--bootstrap", type=int, default=500)
    p.add_argument("--targets", type=float, nargs="*", default=None)
    p.add_argument("--crossing", default="isotonic")
    p.add_argument("--size-horizon-factor", type=float, default=0.0, help="per-size horizons (0: off)")
    p.add_argument("--pilot-seeds", type=int, default=2, help="the seeds that fix per-size horizons")
    p.add_argument(
        "--assurance", type=float, default=0.8, help="the two-stage plan's (the study file's assurance)"
    )
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="CSV of the rows")
    args = p.parse_args(argv)
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        folders = [str(unpack(f, Path(tmp) / str(i))) for i, f in enumerate(args.pool)]
        records = [r for f in folders for r in load_source(f).runs]
        options = ClockOptions(
            targets=tuple(args.targets) if args.targets else None, crossing=args.crossing, horizon="auto"
        )
        tables = build_tables(records, options)
        truth_seeds, design_seeds = split(tables.runs, parse_seeds(args.truth_seeds))
        complement = args.truth == "complement"
        if complement:
            truth_seeds, design_seeds = every_seed_drawn(truth_seeds, design_seeds)
        if args.conditions:
            keep = [c for c in design_seeds if any(x in c for x in args.conditions)]
            truth_seeds = {c: truth_seeds[c] for c in keep}
            design_seeds = {c: design_seeds[c] for c in keep}
        key_of = {r["run"]: (r["condition"], int(r["seed"])) for _, r in tables.runs.iterrows()}
        keys = [key_of.get(r.run) for r in records]
        truth_records = [
            r for r, k in zip(records, keys) if k and k[0] in truth_seeds and k[1] in truth_seeds[k[0]]
        ]
        truth = None if complement else estimates(truth_records, options, args.bootstrap)
        top = top_crossings(tables)
        for condition in sorted(design_seeds):
            n = len(design_seeds[condition])
            last = min(n, args.max_seeds or n)
            held = (
                f"the {n - last} seeds after each draw's last look"
                if complement
                else sorted(truth_seeds[condition])
            )
            print(
                f"{condition}: truth seeds {held}, design seeds "
                f"{sorted(design_seeds[condition])}: looks at {args.start_seeds}..{last} seeds"
            )
        state = dict(
            records=records, keys=keys, design_seeds=design_seeds, start=args.start_seeds, options=options,
            n_boot=args.bootstrap, seed=args.seed, size_factor=args.size_horizon_factor,
            pilot=args.pilot_seeds, top=top, key_of=key_of, max_seeds=args.max_seeds, complement=complement,
            replicates=args.replicates,
        )  # fmt: skip
        with ProcessPoolExecutor(args.jobs, initializer=_init, initargs=(state,)) as ex:
            draws = list(ex.map(_one_draw, range(args.draws)))
    write_table(
        summarise(truth, draws, args.widths, tuple(args.rules), args.assurance), args.out, t0, width=220
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
