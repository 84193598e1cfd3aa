"""A short budget spent by value per cost and paired seeds, against the condition order it replaced
(docs/study.md, "A round").

A synthetic study shaped like ``make study``: four conditions timed at three targets, B = 32 … 512
(G = 8), a pilot of 5 seeds whose first 2 have run, ``max_rounds`` rounds in all, and a responses budget
that cannot pay for every wanted seed. Condition 0 is slow: its top target lies beyond the budget at the
large sizes (most runs there never reach it), as at η_ref = 1e-6 in the reference study's earlier grid. Both strategies
see the same runs (seed k of a condition at size B is the same draw in both) and are driven by the
functions ``rlvr-study`` calls after each round (:func:`rlvr_study.measure.measurement`,
:func:`rlvr_study.plan.pilots_from_fits`, :func:`rlvr_study.rounds.plan_round`):

- **before**: whole seeds served in condition order (the widest interval's condition first, one seed at a
  time, as long as the next fits), every interval chased, each condition's seeds its own;
- **after**: the round of :mod:`rlvr_study.paired` (pilot everywhere first, one seed level for every
  condition that gets seeds, value per second) on the intervals :func:`rlvr_study.triage.triage` chases.

Reported over draws: conditions whose pilot completed, the distinct seed sets the conditions end on,
intervals met at the end (of the ones chased), the median final width over goal per condition, the
responses spent, and each strategy's final statuses::

    python benchmarks/study/study_allocation.py --draws 4 --bootstrap 100
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time

import numpy as np
import pandas as pd

import rlvr_study.rounds as rounds
from analysis.data.clock_tables import ClockOptions, build_tables
from analysis.fits.exponents import fit_conditions
from analysis.synthetic import SyntheticSpec, records
from rlvr_study.measure import measurement
from rlvr_study.plan import pilots_from_fits
from rlvr_study.study_file import parse_study
from rlvr_study.triage import triage

G = 8
SIZES_B = (32, 64, 128, 256, 512)
TARGETS = (0.22, 0.25, 0.28)
RUN_BUDGET = 8192
# (prefactor, alpha) per condition: condition 0 misses 0.28 at B >= 256 in most runs within the budget
CONDITIONS = [(650.0, 0.25), (300.0, 0.2), (250.0, 0.15), (200.0, 0.3)]


def _specs(draw: int, seeds: int) -> list[SyntheticSpec]:
    return [
        SyntheticSpec(
            sizes=SIZES_B,
            seeds=seeds,
            alpha=a,
            prefactor=c,
            sigma=0.21,
            gamma=None,
            b_noise=None,
            targets=TARGETS,
            acc_start=0.18,
            acc_max=0.34,
            budget=RUN_BUDGET,
            eval_every=64,
            eval_growth=2**0.25,
            group_size=G,
            overrides=(("lr.ref_lr", 10.0 ** (-6 + k / 2)),),
            seed_corr=0.25,
            seed_stream=draw,
            seed=1000 * draw + k,
        )
        for k, (c, a) in enumerate(CONDITIONS)
    ]


def _old_allocate_seeds(study, costs, wanted, have, budget, widths=None):
    """The allocation this release replaced: whole seeds, the widest interval's condition first, one
    seed at a time while it fits (each condition's seeds its own)."""
    deficit = {k: n - have.get(k, 0) for k, n in wanted.runs.items() if n > have.get(k, 0)}
    out = rounds.Allocation({}, 0.0, 0.0)
    wall = {k: costs.seconds[k] / budget.parallel for k in deficit}
    while deficit:
        conds = sorted({c for c, _ in deficit}, key=lambda c: (-wanted.ratios.get(c, math.inf), c))
        for cond in conds:
            seed = [k for k in deficit if k[0] == cond]
            responses = out.responses + sum(costs.responses[k] for k in seed)
            seconds = out.seconds + sum(wall[k] for k in seed)
            if budget.fits(responses, seconds):
                break
        else:
            out.stop = rounds.StopReason.BUDGET_RESPONSES
            return out
        for k in seed:
            out.added[k] = out.added.get(k, 0) + 1
            deficit[k] -= 1
            if deficit[k] == 0:
                del deficit[k]
        out.responses, out.seconds = responses, seconds
    return out


def run_study(study, tables_all, recs, strategy: str, max_rounds: int) -> dict:
    """Rounds from the 2-seed pilot until the study stops; the final state."""
    have = {(c, p): set(range(2)) for c in range(len(CONDITIONS)) for p in study.sizes}
    rounds_done = 1
    original = rounds._allocate_seeds
    if strategy == "before":
        rounds._allocate_seeds = _old_allocate_seeds
    try:
        while True:
            keep = np.zeros(len(tables_all.runs), bool)
            for (c, p), seeds in have.items():
                keep |= (
                    (tables_all.runs["cond_index"] == c)
                    & (tables_all.runs["P"] == p)
                    & tables_all.runs["seed"].isin(seeds)
                )
            tables = dataclasses.replace(tables_all, runs=tables_all.runs[keep].reset_index(drop=True))
            exps, fits = fit_conditions(tables, n_boot=study.bootstrap, joint_model=False)
            m = measurement(study, tables, exps, fits)
            chased = triage(study, m, records=recs) if strategy == "after" else None
            mc = chased.measurement(m) if chased is not None and not chased.widths.empty else m
            budget = rounds.round_budget(study, m.responses, 0.0)
            stop = rounds.stop_before_round(study, mc, rounds_done, budget)
            if stop is None:
                plan = rounds.plan_round(study, mc, pilots_from_fits(tables, exps), RUN_BUDGET, budget)
                for x in plan.launches:
                    for p in x.sizes:
                        have[(x.condition, p)] |= set(x.seeds)
                stop = None if plan.launches else (plan.stop or rounds.StopReason.NOTHING_TO_ADD)
            if stop is not None:
                return {"m": mc, "have": have, "chased": chased, "reason": stop.value}
            rounds_done += 1
    finally:
        rounds._allocate_seeds = original


def summarise(out: dict, study) -> dict:
    have, m = out["have"], out["m"]
    sets = {c: frozenset(frozenset(have[(c, p)]) for p in study.sizes) for c in range(len(CONDITIONS))}
    seeds = {c: min(len(have[(c, p)]) for p in study.sizes) for c in range(len(CONDITIONS))}
    ratio = {int(r.condition): r.width / r.goal for r in m.widths.itertuples()}
    worst = {
        c: max([v for k, v in ratio.items() if k == c], default=math.nan) for c in range(len(CONDITIONS))
    }
    return {
        "pilots": sum(s >= study.pilot_seeds for s in seeds.values()),
        "sets": len(set(sets.values())),  # distinct seed sets among the conditions at the end
        "met": int((m.widths["width"] <= m.widths["goal"]).sum()),
        "chased": len(m.widths),
        "seeds": seeds,
        "worst": worst,
        "responses": float(m.responses),
        "reason": out["reason"],
        "status": {
            i: s.status + (" (a target beyond the horizon)" if s.beyond else "")
            for i, s in out["chased"].statuses.items()
        }
        if out["chased"]
        else {},  # fmt: skip
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=4, help="synthetic studies drawn")
    ap.add_argument(
        "--bootstrap", type=int, default=100, help="resamples of every fit (the study's bootstrap)"
    )
    ap.add_argument("--budget", type=float, default=1.6e6, help="budget.responses of the study")
    ap.add_argument("--max-rounds", type=int, default=4, help="the study's max_rounds (the pilot included)")
    args = ap.parse_args(argv)
    study = parse_study(
        {
            "name": "allocation",
            "sizes": [b // G for b in SIZES_B],
            "targets": list(TARGETS),
            "conditions": [{"lr.ref_lr": 10.0 ** (-6 + k / 2)} for k in range(len(CONDITIONS))],
            "width": 0.12,
            "pilot_seeds": 5,
            "max_rounds": args.max_rounds,
            "bootstrap": args.bootstrap,
            "budget": {"responses": args.budget},
            "gain_targets": [0.5],
        }
    )
    rows = []
    t0 = time.perf_counter()
    for draw in range(args.draws):
        recs = [r for s in _specs(draw, 40) for r in records(s)]
        tables = build_tables(recs, ClockOptions(targets=TARGETS))
        lr = tables.runs["lr.ref_lr"].to_numpy(float)
        tables.runs["cond_index"] = np.rint(2 * (np.log10(lr) + 6)).astype(int)
        for strategy in ("before", "after"):
            s = summarise(run_study(study, tables, recs, strategy, args.max_rounds), study)
            rows.append({"draw": draw, "strategy": strategy, **s})
            print(f"draw {draw} {strategy}: {s}", flush=True)
    df = pd.DataFrame(rows)
    print(
        f"\n{args.draws} draws, {args.bootstrap} resamples, budget {args.budget:g} responses ({time.perf_counter() - t0:.0f} s)\n"
    )
    print(
        "| strategy | pilots complete (of 4) | distinct seed sets at the end | intervals met / chased | seeds per condition (median) | width/goal per condition (median) | responses (median) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, g in df.groupby("strategy", sort=False):
        seeds = " ".join(f"{np.median([s[c] for s in g['seeds']]):g}" for c in range(len(CONDITIONS)))
        worst = " ".join(f"{np.nanmedian([w[c] for w in g['worst']]):.2f}" for c in range(len(CONDITIONS)))
        print(
            f"| {name} | {g['pilots'].mean():.1f} | {g['sets'].mean():.1f} | {g['met'].sum()} / {g['chased'].sum()} "
            f"| {seeds} | {worst} | {np.median(g['responses']) / 1e3:,.0f}k |"
        )
    after = df[df["strategy"] == "after"]
    counts = pd.Series([f"{c}: {v}" for st in after["status"] for c, v in st.items()]).value_counts()
    print("\nafter, condition statuses over draws: " + "; ".join(f"{k} ({n})" for k, n in counts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
