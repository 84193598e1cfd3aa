"""Responses an adaptive study spends against a uniform grid that reaches the same width of α's 95 %
interval (docs/study.md, "Adaptive against uniform").

Two strategies on the same runs (common random numbers: run ``seed k`` at size B is the same draw in
both), per draw of a sweep:

- **adaptive**: ``rlvr-study``'s loop. A pilot of ``pilot_seeds`` seeds at every size, then rounds:
  the runs so far are fitted and planned by the functions ``rlvr-study`` calls after each round
  (``analysis.fits.exponents.fit_conditions`` as :func:`rlvr_study.measure.measure` and
  :func:`rlvr_study.plan.pilot_conditions` fit a folder, then :func:`rlvr_study.measure.measurement`,
  :func:`rlvr_study.plan.pilots_from_fits` and :func:`rlvr_study.rounds.plan_round`), the round's runs are
  drawn, and the loop stops where ``run_study`` (``rlvr_study/cli.py``) stops: every width met,
  ``max_rounds`` rounds run (the pilot included), or no run planned (the budget spent);
- **uniform**: the same pilot, then one more seed at every size at a time, each grid fitted the same way,
  until the width is at most the goal or ``--max-seeds`` seeds per size.

Reported per setting and goal: the fraction of draws that reached the goal, the responses spent (median
and quartiles over all draws; a draw that did not reach the goal counts what it spent until it stopped),
the runs and fits, the median final width, and the coverage of the final intervals (the true α inside;
both stopping rules look at the interval they stop on, so both can cost coverage). ``adaptive /
uniform``: ratio of the median responses, and the median of the per-draw ratios over draws where both
reached the goal.

Synthetic settings (``analysis.synthetic`` runs through ``analysis.data.clock_tables.build_tables``, so crossings,
their brackets and the resolution flags are measured as from run directories; no failures):

- ``study-like``: α = 0.2, σ = 0.21 (the scatter of log R measured on ``make study``), c = 1500, B = 32 …
  512 (G = 8), the trainer's geometric evaluations (from 64 responses, 4 per doubling), a budget of
  6,144 responses per run (about 25 % of the runs at B = 512 and 6 % at 256 end censored);
- ``coarse``: the same law, evaluations every 1,024 responses (brackets of a third of the crossing at
  B = 32) and a budget of 5,120 (about half the runs at B = 512 and a quarter at 256 censored).

``--pool FOLDER`` instead draws runs without replacement from real run directories (one condition,
``--pool-filter key=value``): each draw is a random order of the seeds, the same order at every size (a
seed stays a block), and a strategy that asks for more seeds than the folder holds at a size gets what is
left. The true α is unknown there: ``coverage`` counts final intervals that contain the estimate from
every run of the folder (it shares runs with each draw, so it is not an independent coverage)::

    python benchmarks/study/study_vs_uniform.py --draws 40 --bootstrap 200
    python benchmarks/study/study_vs_uniform.py --pool runs/study --pool-filter lr.ref_lr=3e-05 --pool-target 0.25 --goals 0.25 0.2
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.data.clock_tables import ClockOptions, Tables, build_tables, target_label
from analysis.fits.exponents import fit_conditions
from analysis.synthetic import SyntheticSpec, records
from rlvr_study.measure import measurement
from rlvr_study.plan import Schedule, eval_grid, pilots_from_fits, run_responses
from rlvr_study.rounds import StopReason, plan_round, round_budget, stop_before_round
from rlvr_study.study_file import Study, parse_study


# ---------------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class Setting:
    """A synthetic sweep: the law, the sizes, the evaluation schedule and the run budget."""

    name: str
    alpha: float
    sigma: float
    prefactor: float  # c: median responses to the target at B = 1
    budget: int  # train.max_responses
    schedule: Schedule
    sizes: tuple[int, ...] = (32, 64, 128, 256, 512)  # B
    group_size: int = 8
    seed_corr: float = 0.0  # share of the scatter that belongs to the seed (analysis.synthetic)
    target: float = 0.3


SETTINGS = {
    "study-like": Setting("study-like", 0.2, 0.21, 1500, 6144, Schedule("geometric", 2048, 64, 4)),
    "coarse": Setting("coarse", 0.2, 0.21, 1500, 5120, Schedule("linear", 1024)),
}


def _spec(setting: Setting, size: int, seeds: int, draw: int, salt: int) -> SyntheticSpec:
    """The runs of one size in one draw: seeds ``0 .. seeds-1`` (a longer list keeps the first runs)."""
    s = setting.schedule
    if s.kind == "geometric":  # the trainer's points first * 2^(k/n), while their spacing stays < every
        every, growth = s.first, 2.0 ** (1.0 / s.points_per_doubling)
    else:
        every, growth = s.every, 1.0
    config = (
        ("eval.schedule", s.kind),
        ("eval.every_responses", int(s.every)),
        ("eval.first_responses", int(s.first)),
        ("eval.points_per_doubling", int(s.points_per_doubling)),
    )
    return SyntheticSpec(
        sizes=(size,),
        seeds=seeds,
        alpha=setting.alpha,
        prefactor=setting.prefactor,
        sigma=setting.sigma,
        gamma=None,
        b_noise=None,
        targets=(setting.target,),
        budget=setting.budget,
        eval_every=int(every),
        eval_growth=growth,
        group_size=setting.group_size,
        seed_corr=setting.seed_corr,
        seed_stream=draw,
        seed=int(np.random.SeedSequence([salt, draw, size]).generate_state(1)[0]),
        overrides=config,
    )


def check_schedule(setting: Setting) -> None:
    """The synthetic runs evaluate where the trainer's schedule (``rlvr_study.plan.eval_grid``) would:
    the planner's information assumes that grid."""
    for size in setting.sizes:
        run = records(_spec(setting, size, 1, 0, 0))[0]
        got = [float(r["responses"]) for r in run.rows if "eval/accuracy" in r][1:]
        want = list(eval_grid(size, setting.budget, setting.schedule))
        if got != want:
            raise SystemExit(f"{setting.name}: B={size}: synthetic evaluations {got} != schedule {want}")


# ------------------------------------------------------------------------------------------- sources
class SyntheticSource:
    """The runs of one draw of a setting, generated as they are asked for; seed k at size B is the same
    run for every strategy."""

    def __init__(self, setting: Setting, draw: int, salt: int = 0):
        self.setting, self.draw, self.salt = setting, draw, salt
        self.generated = {b: 0 for b in setting.sizes}
        self.parts: dict[int, pd.DataFrame] = {}
        self.template: Tables | None = None

    def capacity(self, p: int) -> int:
        return 10**9

    def _grow(self, size: int, n: int) -> None:
        n = max(n, 2 * self.generated[size], 8)
        tables = build_tables(
            records(_spec(self.setting, size, n, self.draw, self.salt)),
            ClockOptions(targets=(self.setting.target,)),
        )
        self.parts[size] = tables.runs
        self.template = tables
        self.generated[size] = n

    def tables(self, have: dict[int, set[int]]) -> Tables:
        g = self.setting.group_size
        for p, seeds in have.items():
            if seeds and max(seeds) >= self.generated[p * g]:
                self._grow(p * g, max(seeds) + 1)
        parts = [
            self.parts[p * g][self.parts[p * g]["seed"].isin(seeds)] for p, seeds in have.items() if seeds
        ]
        return dataclasses.replace(self.template, runs=pd.concat(parts, ignore_index=True))


class PoolSource:
    """Runs drawn without replacement from a folder's runs (one condition), in one random seed order
    shared by the sizes: relabelled seed j is the folder's seed ``order[j]`` at every size."""

    def __init__(self, tables: Tables, draw: int):
        self.full = tables
        ids = np.array(sorted({int(s) for s in tables.runs["seed"]}))
        self.order = np.random.default_rng([7, draw]).permutation(ids)
        self.have_at = {
            int(p): {int(s) for s in tables.runs.loc[tables.runs["P"] == p, "seed"]}
            for p in tables.runs["P"].unique()
        }

    def capacity(self, p: int) -> int:
        """Seeds a strategy can have at size P: the first of the order that the folder holds there."""
        n = 0
        while n < self.order.size and int(self.order[n]) in self.have_at[p]:
            n += 1
        return n

    def tables(self, have: dict[int, set[int]]) -> Tables:
        runs = self.full.runs
        parts = []
        for p, seeds in have.items():
            original = {int(self.order[j]): j for j in seeds}
            part = runs[(runs["P"] == p) & runs["seed"].isin(list(original))].copy()
            part["seed"] = [original[int(s)] for s in part["seed"]]
            parts.append(part)
        return dataclasses.replace(self.full, runs=pd.concat(parts, ignore_index=True))


# ------------------------------------------------------------------------------------------ strategies
@dataclass
class Outcome:
    responses: float
    runs: int
    fits: int  # fits made (rounds for the adaptive study, grids for the uniform one)
    width: float
    low: float
    high: float
    exponent: float
    reached: bool
    reason: str
    seeds: dict[int, int] = field(default_factory=dict)  # runs per P at the stop
    notes: list[str] = field(default_factory=list)  # the planner's notes, every round

    def covers(self, alpha: float) -> bool:
        return bool(self.low <= alpha <= self.high)


def _fit(study: Study, tables: Tables):
    """What ``rlvr-study`` computes after a round: the fit of ``measure`` (the same one
    ``pilot_conditions`` makes: same tables, resamples and seed), its measurement and the pilots."""
    exps, _ = fit_conditions(tables, n_boot=study.bootstrap, joint_model=False)
    return exps, measurement(study, tables, exps)


def _outcome(m, exps, fits: int, reached: bool, reason: str, have, notes=()) -> Outcome:
    row = m.widths.iloc[0]
    fit = exps[exps["clock"] == row["clock"]].iloc[0]
    return Outcome(
        responses=m.responses,
        runs=len(m.runs),
        fits=fits,
        width=float(row["width"]),
        low=float(fit["ci_low"]),
        high=float(fit["ci_high"]),
        exponent=float(row["exponent"]),
        reached=reached,
        reason=reason,
        seeds={p: len(s) for p, s in have.items()},
        notes=list(notes),
    )


def adaptive(study: Study, source, run_budget: float) -> Outcome:
    """``rlvr-study``'s rounds (``run_study``) with runs drawn from ``source`` instead of launched."""
    have = {p: set(range(min(study.pilot_seeds, source.capacity(p)))) for p in study.sizes}
    rounds = 1
    notes: list[str] = []
    while True:
        tables = source.tables(have)
        exps, m = _fit(study, tables)
        budget = round_budget(study, m.responses, 0.0)  # a simulation keeps no clock: no hours spent
        stop = stop_before_round(study, m, rounds, budget)
        reason = stop.describe(study, m) if stop is not None else None
        if stop is None:
            pilots = pilots_from_fits(tables, exps)
            plan = plan_round(study, m, pilots, run_budget, budget)
            notes += [f"round {rounds}: {n}" for n in plan.notes]
            added = 0
            for launch in plan.launches:
                for p in launch.sizes:
                    new = {s for s in launch.seeds if s < source.capacity(p)}
                    added += len(new - have[p])
                    have[p] |= new
            if not plan.launches:
                reason = (plan.stop or StopReason.NOTHING_TO_ADD).describe(study, m)
            elif not added:
                reason = "pool exhausted"
        if reason is not None:
            return _outcome(m, exps, rounds, stop is StopReason.WIDTHS_MET, reason, have, notes)
        rounds += 1


def uniform(study: Study, source, goals, max_seeds: int) -> dict[float, Outcome]:
    """Equal seeds at every size, one more at every size at a time, until each goal is met; the grids
    are the same for every goal, so one pass serves them all (the first grid at or below each goal)."""
    out: dict[float, Outcome] = {}
    cap = min([max_seeds] + [source.capacity(p) for p in study.sizes])
    n = min(study.pilot_seeds, cap)
    fits = 0
    while True:
        have = {p: set(range(n)) for p in study.sizes}
        exps, m = _fit(study, source.tables(have))
        fits += 1
        width = float(m.widths["width"].iloc[0])
        for goal in goals:
            if goal not in out and width <= goal:
                out[goal] = _outcome(m, exps, fits, True, "width met", have)
        if len(out) == len(goals) or n >= cap:
            for goal in goals:
                out.setdefault(goal, _outcome(m, exps, fits, False, f"{n} seeds per size", have))
            return out
        n += 1


def make_study(sizes_p, goal: float, budget: float, bootstrap: int, max_rounds: int, target: float) -> Study:
    return parse_study(
        {
            "name": "vs_uniform",
            "sizes": [int(p) for p in sizes_p],
            "targets": [target],
            "width": goal,
            "budget": {"responses": float(budget)},
            "pilot_seeds": 2,
            "max_rounds": max_rounds,
            "bootstrap": bootstrap,
        }
    )


# ------------------------------------------------------------------------------------------- report
def compare(sources, sizes_p, goals, alpha, budget, run_budget, args) -> list[dict]:
    """Both strategies on every draw's source, summarised per goal."""
    results = {g: {"adaptive": [], "uniform": []} for g in goals}
    for source in sources:
        study = make_study(sizes_p, goals[0], budget, args.bootstrap, args.max_rounds, args.target)
        for goal, o in uniform(study, source, goals, args.max_seeds).items():
            results[goal]["uniform"].append(o)
        for goal in goals:
            study.width = goal
            results[goal]["adaptive"].append(adaptive(study, source, run_budget))
    rows = []
    for goal in goals:
        a, u = results[goal]["adaptive"], results[goal]["uniform"]
        paired = [x.responses / y.responses for x, y in zip(a, u) if x.reached and y.reached]
        for name, outs in (("adaptive", a), ("uniform", u)):
            spent = np.array([o.responses for o in outs])
            rows.append(
                {
                    "goal": goal,
                    "strategy": name,
                    "draws": len(outs),
                    "reached": np.mean([o.reached for o in outs]),
                    "responses": np.median(spent),
                    "q1": np.quantile(spent, 0.25),
                    "q3": np.quantile(spent, 0.75),
                    "runs": np.median([o.runs for o in outs]),
                    "fits": np.median([o.fits for o in outs]),
                    "width": np.median([o.width for o in outs]),
                    "coverage": np.mean([o.covers(alpha) for o in outs]),
                    "coverage_reached": (
                        np.mean([o.covers(alpha) for o in outs if o.reached])
                        if any(o.reached for o in outs)
                        else math.nan
                    ),
                    "ratio": np.median(spent) / np.median([o.responses for o in u]),
                    "paired": np.median(paired) if paired else math.nan,
                    "reasons": pd.Series([o.reason for o in outs]).value_counts().to_dict(),
                    "dropped": sum(any("resolution-limited" in n for n in o.notes) for o in outs),
                    "seeds": {p: float(np.median([o.seeds[p] for o in outs])) for p in sizes_p},
                }
            )
    return rows


def _k(x: float) -> str:
    return f"{x / 1000:,.0f}k" if x >= 10000 else f"{x / 1000:,.1f}k"


def print_table(label: str, rows: list[dict], sizes_b) -> None:
    print(
        f"\n{label}\n\n| goal | strategy | reached | responses, median [quartiles] | runs | fits "
        "| median seeds per size | final width | coverage (reached) | adaptive / uniform (paired) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = f"{r['ratio']:.2f} ({r['paired']:.2f})" if r["strategy"] == "adaptive" else ""
        seeds = " ".join(f"{b:g}:{n:g}" for b, n in zip(sizes_b, r["seeds"].values()))
        cov = f"{r['coverage']:.0%} ({r['coverage_reached']:.0%})"
        print(
            f"| {r['goal']:g} | {r['strategy']} | {r['reached']:.0%} | {_k(r['responses'])} "
            f"[{_k(r['q1'])}, {_k(r['q3'])}] | {r['runs']:g} | {r['fits']:g} | {seeds} | {r['width']:.3f} "
            f"| {cov} | {ratio} |"
        )
    for r in rows:
        if r["strategy"] == "adaptive":
            stops = ", ".join(f"{k} {v}" for k, v in r["reasons"].items())
            print(
                f"\nadaptive stops at {r['goal']:g}: {stops}; sizes dropped as resolution-limited "
                f"in {r['dropped']} of {r['draws']} draws"
            )


def pool_tables(folder: str, filters: list[str], target: float) -> Tables:
    from analysis.data.load import load_source

    tables = build_tables(load_source(folder).runs, ClockOptions(targets=(target,)))
    runs = tables.runs
    for item in filters:
        key, _, value = item.partition("=")
        if key not in runs:
            raise SystemExit(f"--pool-filter: no column {key!r} in the runs table")
        try:
            runs = runs[np.isclose(pd.to_numeric(runs[key], errors="coerce"), float(value))]
        except ValueError:
            runs = runs[runs[key].astype(str) == value]
    if runs["condition"].nunique() != 1:
        raise SystemExit(f"--pool: {runs['condition'].nunique()} conditions left; narrow with --pool-filter")
    return dataclasses.replace(tables, runs=runs.reset_index(drop=True))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--draws", type=int, default=40, help="sweeps drawn per setting")
    p.add_argument(
        "--bootstrap", type=int, default=200, help="resamples of every fit (the study's bootstrap)"
    )
    p.add_argument(
        "--goals", type=float, nargs="+", default=[0.2, 0.12], help="requested widths of α's 95 %% interval"
    )
    p.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    p.add_argument(
        "--max-rounds", type=int, default=5, help="the study's max_rounds (pilot included; its default)"
    )
    p.add_argument("--max-seeds", type=int, default=40, help="the uniform grid's cap on seeds per size")
    p.add_argument("--seed-corr", type=float, default=0.0, help="share of the scatter owned by the seed")
    p.add_argument("--pool", help="a run folder: draw real runs from it instead of synthetic ones")
    p.add_argument("--pool-filter", nargs="*", default=[], help="key=value columns selecting one condition")
    p.add_argument("--pool-target", type=float, default=0.25, help="the target fitted in the pool")
    args = p.parse_args(argv)
    goals = sorted(set(args.goals), reverse=True)
    if args.pool:
        args.target = args.pool_target
        tables = pool_tables(args.pool, args.pool_filter, args.pool_target)
        study = make_study(sorted(tables.runs["P"].unique()), goals[0], 1.0, args.bootstrap, 1, args.target)
        exps, m = _fit(study, tables)
        alpha = float(m.widths["exponent"].iloc[0])
        run_budget = float(np.nanmedian(tables.runs["budget"]))
        sizes_p = [int(x) for x in sorted(tables.runs["P"].unique())]
        sizes_b = [float(tables.runs.loc[tables.runs["P"] == q, "B"].iloc[0]) for q in sizes_p]
        counts = tables.runs.groupby("P").size().to_dict()
        print(
            f"pool {args.pool} {' '.join(args.pool_filter)}: {len(tables.runs)} runs "
            f"({', '.join(f'P={q}: {n}' for q, n in counts.items())}), {target_label(args.target)}: "
            f"α̂ = {alpha:.3f}, width {float(m.widths['width'].iloc[0]):.3f} with every run"
        )
        budget = float(tables.runs["final_responses"].sum())
        t0 = time.perf_counter()
        rows = compare(
            [PoolSource(tables, d) for d in range(args.draws)],
            sizes_p,
            goals,
            alpha,
            budget,
            run_budget,
            args,
        )
        print_table(
            f"pool, {args.draws} draws, {args.bootstrap} resamples ({time.perf_counter() - t0:.0f} s)",
            rows,
            sizes_b,
        )
        return 0
    args.target = 0.3
    for k, name in enumerate(args.settings):
        setting = dataclasses.replace(SETTINGS[name], seed_corr=args.seed_corr)
        check_schedule(setting)
        sizes_p = [b // setting.group_size for b in setting.sizes]
        per_grid = sum(run_responses(b, setting.budget) for b in setting.sizes)
        t0 = time.perf_counter()
        rows = compare(
            [SyntheticSource(setting, d, salt=k) for d in range(args.draws)],
            sizes_p,
            goals,
            setting.alpha,
            args.max_seeds * per_grid,
            setting.budget,
            args,
        )
        s = setting.schedule
        evals = (
            f"geometric evals from {s.first:g}, {s.points_per_doubling}/doubling"
            if s.kind == "geometric"
            else f"evals every {s.every:g}"
        )
        label = (
            f"{name}: α = {setting.alpha}, σ = {setting.sigma}, B = {setting.sizes[0]}..{setting.sizes[-1]}, "
            f"{evals}, budget {setting.budget} per run; {args.draws} draws, {args.bootstrap} resamples "
            f"({time.perf_counter() - t0:.0f} s)"
        )
        print_table(label, rows, setting.sizes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
