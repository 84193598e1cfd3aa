"""Crossing rules: how a run's evaluation curve gives the responses at which it crossed a target.

A rule is one function ``rule(curve, target) -> Bracket | None`` registered under a name with
:func:`register`; ``rlvr-analyze --crossing NAME``, the study file's ``crossing:`` and the report take
those names (:func:`crossing_names`). The tables (:mod:`analysis.data.clock_tables`) hand a rule a
:class:`Curve` that holds only the evaluations the run is read at: at or before its **horizon** and, for
a failed run, at or before its failure time (the run is at risk of reaching a target until it fails),
so no rule can read past the horizon. The rule returns where the crossing was first seen and what it
knows of the time before it (:class:`Bracket`); the tables turn that into the runs table's columns on
the chosen clock, flag resolution-limited brackets and censor a run with no bracket at its last
evaluation read (docs/analysis.md, "Crossing rules").

Adding a rule is one module in this package (found and imported by :func:`crossing_rules`) and its
test::

    from analysis.data.crossings import Bracket, Curve, first_at_or_above, register, whole_rollouts

    @register("my_rule")
    def my_rule(curve: Curve, target: float) -> Bracket | None:
        '''What it reads (never past curve.horizon: the curve stops there).'''
        seen = first_at_or_above(curve.accuracy, target)
        return None if seen is None else whole_rollouts(curve, seen)

A rule registered from anywhere else (a test, a user's module imported before the analysis runs) is
found the same way. ``brackets=False`` marks a rule that gives a time taken as exact (no interval): a
study (``rlvr-study``) plans on interval-censored crossings and accepts only bracketing rules.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Curve:
    """The evaluations of one run that a rule may read, in the run's order."""

    responses: np.ndarray  # responses clock of each evaluation (at or before ``horizon``)
    accuracy: np.ndarray  # eval/accuracy (NaN: an evaluation without a number; it never crosses)
    size: float  # the rollout size B: the policy changes only every B responses
    horizon: float  # responses up to which the run is read (inf: no horizon); every evaluation is within it
    discrete: bool = True  # brackets in whole rollouts (False: continuous, ``--continuous-brackets``)


@dataclass(frozen=True)
class Bracket:
    """Where a crossing lies. ``seen``: index (into the curve) of the evaluation at which the crossing is
    first seen, the upper end. ``lower``: responses at or after which it happened (whole rollouts; after
    which with continuous brackets); NaN: no interval, the time is taken as exact. ``fraction``: an exact
    time that fraction of the way from the evaluation before ``seen`` to ``seen`` (on any clock; NaN:
    none, the time is ``seen``'s)."""

    seen: int
    lower: float = math.nan
    fraction: float = math.nan


Rule = Callable[[Curve, float], "Bracket | None"]


@dataclass(frozen=True)
class CrossingRule:
    """A registered rule: its name, its function, whether it gives intervals (``brackets``) and the
    first paragraph of its docstring (what it reads)."""

    name: str
    read: Rule
    brackets: bool
    summary: str


_RULES: dict[str, CrossingRule] = {}


def register(name: str, *, brackets: bool = True) -> Callable[[Rule], Rule]:
    """Decorator: register ``rule`` under ``name`` (a name already taken by another function is an
    error; the same function registered again, as on a module reload, replaces it)."""

    def add(rule: Rule) -> Rule:
        old = _RULES.get(name)
        where = (rule.__module__, rule.__qualname__)
        if old is not None and (old.read.__module__, old.read.__qualname__) != where:
            raise ValueError(f"crossing rule {name!r} is already registered ({old.read.__module__})")
        doc = (rule.__doc__ or "").strip().split("\n\n")[0]
        _RULES[name] = CrossingRule(name, rule, brackets, " ".join(doc.split()))
        return rule

    return add


_LOADED = False


def crossing_rules() -> dict[str, CrossingRule]:
    """Every registered rule by name: this package's modules (imported on the first call) and any
    registered elsewhere."""
    global _LOADED
    if not _LOADED:
        for info in pkgutil.iter_modules(__path__):
            importlib.import_module(f"{__name__}.{info.name}")
        _LOADED = True
    return dict(sorted(_RULES.items()))


def crossing_names(brackets_only: bool = False) -> tuple[str, ...]:
    """The registered rules' names (``brackets_only``: those that give intervals)."""
    return tuple(n for n, r in crossing_rules().items() if r.brackets or not brackets_only)


def crossing_rule(name: str) -> CrossingRule:
    """The rule registered as ``name``; ValueError naming the known ones otherwise."""
    rules = crossing_rules()
    if name not in rules:
        raise ValueError(f"crossing must be one of {', '.join(rules)}, got {name!r}")
    return rules[name]


# ---- helpers the rules share -------------------------------------------------------------------------


def first_at_or_above(accuracy: np.ndarray, target: float) -> int | None:
    """Index of the first evaluation with accuracy at or above ``target`` (NaN never is), else None."""
    hits = np.asarray(accuracy) >= target
    return int(np.argmax(hits)) if hits.any() else None


def rollout_after(responses: float, size: float) -> float:
    """The responses at the end of the first rollout that ends after ``responses`` (a multiple of the
    rollout size B, at least B): the earliest time of an event known to come after ``responses``,
    since the policy changes only at rollout boundaries."""
    return size * (math.floor(max(responses, 0.0) / size + 1e-9) + 1)


def whole_rollouts(curve: Curve, seen: int) -> Bracket:
    """The bracket of a crossing first seen at evaluation ``seen`` and not before: between the
    evaluation before it and ``seen``. In whole rollouts (``curve.discrete``): the crossing came with one
    of the rollouts after the evaluation before (the first of them at the earliest, at least B: nothing
    happens before the first update), so ``lower = min(r_seen, r_before + B)`` and ``lower == r_seen``
    is an exact time (an evaluation after every rollout). Continuous: ``(r_before, r_seen]``, from 0 at
    the first evaluation."""
    r = curve.responses
    if curve.discrete:
        before = float(r[seen - 1]) if seen > 0 else 0.0
        return Bracket(seen, min(float(r[seen]), rollout_after(before, curve.size)))
    return Bracket(seen, float(r[seen - 1]) if seen > 0 else 0.0)
