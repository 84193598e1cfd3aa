"""A balanced round's seeds by value per cost, paired across conditions (docs/study.md, "A round").

A balanced study adds whole seeds: one run at every size of a condition, seeds numbered from the study's
``first_seed``. :func:`paired_round` chooses the round as one **level** ``L`` and a set of conditions:
every condition of the set ends the round holding seeds ``first_seed .. first_seed + L - 1`` at every
size, so every condition that gets seeds in a round holds the same seed set after it and comparisons
between them stay paired (seeds share data order and sampling numbers across conditions; the pairing
cancels the seed's share of the scatter, ``analysis.fits.cross``). A condition the round leaves out
keeps its seeds, a prefix of the others'.

1. **The pilot first.** While a condition holds fewer than ``pilot_seeds`` seeds, the round only completes
   pilots: the most pilot seeds that every such condition can get within the budget; where not even one
   more seed for each fits, the conditions whose next seed narrows the most per second (below) get it,
   and the round says which were left out.
2. **Value per cost.** Otherwise every level from the lowest open condition's next seed up to the most
   seeds any condition wants is tried; at each, the conditions that want seeds are taken in the order of
   their *value per second* while the round fits in its budget, and the level whose set buys the most value
   wins (the level the full plan wants, with every open condition, where the budget pays for it).

**Value** of raising a condition from ``S`` to ``L`` seeds: the summed relative excess of its open
intervals, ``max(w / goal - 1, 0)``, that the extra seeds are predicted to remove, with ``w`` scaled by
``t_{L-1}(0.975) / sqrt(L - 1)`` over the same at ``S``: the seed-cluster interval the report prints
(a t pivot on the seeds minus one, ``analysis.fits.fit``) narrows that way with seeds at a fixed scatter.
An unbounded interval counts as :data:`UNBOUNDED_RATIO` times its goal. Seeds the planner wants beyond
the point where the predicted median width meets the goal (its assurance asks for more) are worth
:data:`WANTED_SEED_VALUE` each, so they are bought last, and only where the budget leaves room. This
scoring is a choice of ours: it spends where the intervals shrink most per second of wall time, and it
does not chase an interval whose goal the budget could never reach in preference to one it can.
**Cost**: the wall seconds of the missing runs (each at the median of its condition and size's ended runs,
:func:`rlvr_study.rounds.cost_model`), responses where no run recorded its wall time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from scipy.special import stdtrit

#: an unbounded interval is valued as if it were this many times its goal
UNBOUNDED_RATIO = 5.0
#: the value of a seed the planner wants past the point where the predicted median width meets the goal
WANTED_SEED_VALUE = 1e-3


@dataclass(frozen=True)
class OpenInterval:
    """A requested interval still wider than its goal."""

    condition: int
    width: float  # inf: unbounded
    goal: float


@dataclass(frozen=True)
class SeedCost:
    """What raising one condition to a level costs: its missing runs, their responses and wall seconds."""

    runs: int
    responses: float
    seconds: float  # over the runs that run at once
    price: float  # what value per cost divides by: the seconds, or the responses where no wall time is known


@dataclass
class PairedRound:
    """The round :func:`paired_round` chooses."""

    level: int = 0  # seeds each chosen condition holds after the round (from first_seed)
    conditions: list[int] = field(default_factory=list)
    runs: int = 0
    responses: float = 0.0
    seconds: float = 0.0
    value: float = 0.0
    cut: bool = False  # the budget (or max_runs_per_round) kept the round below what the plan wants
    notes: list[str] = field(default_factory=list)
    # with ``at_most_wanted``, a chosen condition that wants fewer seeds than the level ends the round on
    # those (a prefix of the others'): condition -> its seeds after the round, where below ``level``
    levels: dict[int, int] = field(default_factory=dict)


def cluster_scale(seeds: int) -> float:
    """``t_{S-1}(0.975) / sqrt(S - 1)``: the seed-cluster interval's width per unit of scatter with ``S``
    seeds (infinite below 2)."""
    return float(stdtrit(seeds - 1, 0.975) / math.sqrt(seeds - 1)) if seeds >= 2 else math.inf


def predicted_ratio(width: float, goal: float, now: int, then: int) -> float:
    """Width over goal after raising an interval's seeds from ``now`` to ``then`` (module docstring)."""
    ratio = width / goal if math.isfinite(width) else UNBOUNDED_RATIO
    if then <= now:
        return ratio
    if now < 2:  # no pivot yet: the scatter's scale is unknown, only the seeds' square root
        return ratio * math.sqrt(max(now, 1) / then)
    return ratio * cluster_scale(then) / cluster_scale(now)


def seeds_to_goal(width: float, goal: float, now: int) -> int:
    """The fewest seeds at which an interval of ``width`` on ``now`` seeds is predicted to meet ``goal``
    (:func:`predicted_ratio`), at most double ``now``."""
    then = max(now, 1)
    while then < 2 * max(now, 1) and predicted_ratio(width, goal, now, then) > 1:
        then += 1
    return then


def seed_value(intervals: list[OpenInterval], now: int, then: int, wanted: int) -> float:
    """The value of raising a condition (its open ``intervals``) from ``now`` to ``then`` seeds, of which
    the planner wants ``wanted`` (module docstring)."""
    upto = min(then, max(wanted, now))
    value = sum(
        max(predicted_ratio(i.width, i.goal, now, now) - 1, 0.0)
        - max(predicted_ratio(i.width, i.goal, now, upto) - 1, 0.0)
        for i in intervals
    )
    return value + WANTED_SEED_VALUE * (upto - now)


def _greedy(
    candidates: list[int],
    level: int,
    value: Callable[[int, int], float],
    cost: Callable[[int, int], SeedCost],
    fits: Callable[[float, float, int], bool],
) -> PairedRound:
    """The candidates in the order of value per second at ``level``, each taken while the round fits."""

    def per_cost(c: int) -> float:
        spend = cost(c, level)
        return value(c, level) / spend.price if spend.price > 0 else math.inf

    out = PairedRound(level=level)
    for c in sorted(candidates, key=lambda c: (-per_cost(c), cost(c, level).price, c)):
        spend = cost(c, level)
        if not fits(out.responses + spend.responses, out.seconds + spend.seconds, out.runs + spend.runs):
            out.cut = True
            continue
        out.conditions.append(c)
        out.runs += spend.runs
        out.responses += spend.responses
        out.seconds += spend.seconds
        out.value += value(c, level)
    out.conditions.sort()
    return out


def _pilot_round(
    seeds: dict[int, int],
    pilot_seeds: int,
    value: Callable[[int, int], float],
    cost: Callable[[int, int], SeedCost],
    fits: Callable[[float, float, int], bool],
) -> PairedRound:
    """The pilot first: the most pilot seeds every condition below ``pilot_seeds`` can get (module
    docstring, step 1)."""
    short = sorted(c for c, s in seeds.items() if s < pilot_seeds)
    for level in range(pilot_seeds, min(seeds[c] for c in short), -1):
        chosen = [c for c in short if seeds[c] < level]
        spend = [cost(c, level) for c in chosen]
        runs, responses, seconds = (
            sum(getattr(x, k) for x in spend) for k in ("runs", "responses", "seconds")
        )
        if fits(responses, seconds, runs):
            note = f"the pilot's {pilot_seeds} seeds at every size are not complete: seeds up to {level} for every condition first"
            out = PairedRound(level, chosen, runs, responses, seconds, 0.0, level < pilot_seeds, [note])
            if level < pilot_seeds:
                out.notes.append(
                    f"budget: the pilot's seeds {level + 1}..{pilot_seeds} follow in later rounds"
                )
            return out
    level = min(seeds[c] for c in short) + 1
    out = _greedy([c for c in short if seeds[c] < level], level, value, cost, fits)
    out.cut = True
    left = [c for c in short if seeds[c] < level and c not in out.conditions]
    out.notes.append(
        f"budget: one more pilot seed for every condition does not fit; seed {level} goes to conditions "
        f"{out.conditions or 'none'} (most narrowing per second), not to {left}"
    )
    return out


def paired_round(
    seeds: dict[int, int],
    wanted: dict[int, int],
    intervals: list[OpenInterval],
    cost: Callable[[int, int], SeedCost],
    fits: Callable[[float, float, int], bool],
    pilot_seeds: int,
    at_most_wanted: bool = False,
) -> PairedRound:
    """The round (module docstring). ``seeds``: condition -> whole seeds it holds (every condition of the
    study); ``wanted``: condition -> the seeds its open intervals want (the planner's; the pilot's
    ``pilot_seeds`` at least); ``intervals``: the open intervals; ``cost(c, L)``: what raising ``c`` to
    ``L`` seeds costs; ``fits(responses, seconds, runs)``: whether a round of that size fits the budget.
    ``at_most_wanted`` (the two-stage rule, :mod:`rlvr_study.two_stage`): a condition that wants fewer
    seeds than the level is raised to those only (its seeds a prefix of the others'), never past them."""
    by_cond: dict[int, list[OpenInterval]] = {}
    for i in intervals:
        by_cond.setdefault(i.condition, []).append(i)

    def value(c: int, level: int) -> float:
        return seed_value(by_cond.get(c, []), seeds[c], level, wanted.get(c, 0))

    if any(s < pilot_seeds for s in seeds.values()):
        return _pilot_round(seeds, pilot_seeds, value, cost, fits)
    open_ = [c for c in sorted(seeds) if wanted.get(c, 0) > seeds[c]]
    if not open_:
        return PairedRound()
    top = max(wanted[c] for c in open_)
    best: PairedRound | None = None
    for level in range(min(seeds[c] for c in open_) + 1, top + 1):
        # a condition is raised to the level (or, ``at_most_wanted``, to the seeds it wants if fewer)
        capped = {c: min(level, wanted[c]) if at_most_wanted else level for c in open_}
        trial = _greedy(
            [c for c in open_ if seeds[c] < level],
            level,
            lambda c, _level, capped=capped: value(c, capped[c]),
            lambda c, _level, capped=capped: cost(c, capped[c]),
            fits,
        )
        trial.levels = {c: capped[c] for c in trial.conditions if capped[c] < level}
        if trial.conditions and (best is None or trial.value > best.value * (1 + 1e-9)):
            best = trial
    if best is None:
        out = PairedRound(cut=True)
        out.notes.append(f"budget: no condition's next seed fits (conditions {open_} want more)")
        return out
    best.cut = best.cut or best.level < top
    left = [c for c in open_ if c not in best.conditions]
    if best.cut:
        best.notes.append(
            f"budget: the plan wants {top} seeds for conditions {open_}; the round pays for seeds up to "
            f"{best.level} for conditions {best.conditions}, the most narrowing per second it can buy"
            + (f" (conditions {left} get none this round)" if left else "")
        )
    return best
