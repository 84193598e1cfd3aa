"""A round's launches: which seeds each (condition, size) has used and takes next (docs/study.md, "A round").

:func:`seeds_used` reads them from the study folder's measurement; :func:`group_launches` turns the runs
a round adds into multiruns of whole seed ranges (:class:`Launch`). ``rlvr_study.rounds`` plans the
round and re-exports these names.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from rlvr_study.measure import Measurement


@dataclass
class Launch:
    """One multirun of a round: a condition, its new seeds, the sizes that get them."""

    condition: int
    seeds: list[int]
    sizes: list[int]  # prompts per rollout

    @property
    def n_runs(self) -> int:
        return len(self.seeds) * len(self.sizes)


def seeds_used(m: Measurement) -> dict[tuple[int, int], set[int]]:
    """(condition, P) -> the seeds the folder's runs of that condition and size used."""
    used: dict[tuple[int, int], set[int]] = {}
    for r in m.runs.itertuples():
        if r.cond is not None and not pd.isna(r.cond):
            used.setdefault((int(r.cond), int(r.P)), set()).add(int(r.seed))
    return used


def runs_held(m: Measurement) -> dict[tuple[int, int], int]:
    """(condition, P) -> how many runs of that condition and size the folder holds."""
    return {k: len(v) for k, v in seeds_used(m).items()}


def group_launches(
    additions: dict[tuple[int, int], int], used: dict[tuple[int, int], set[int]], first_seed: int = 0
) -> list[Launch]:
    """Runs to add per (condition, P) as multiruns: each (condition, P) takes the next unused seeds
    (from ``first_seed`` where it has none).
    Sizes of a condition whose new seeds start at the same number share multiruns in layers: with 10
    new runs at P = 4 and 11 at P = 32, seeds 2..11 at both sizes, then seed 12 at P = 32."""
    by_start: dict[tuple[int, int], dict[int, int]] = {}
    for (cond, p), k in sorted(additions.items()):
        if k <= 0:
            continue
        have = used.get((cond, p), set())
        start = max(have) + 1 if have else first_seed
        by_start.setdefault((cond, start), {})[p] = k
    out = []
    for (cond, start), counts in sorted(by_start.items()):
        done = 0
        for level in sorted(set(counts.values())):
            sizes = sorted(p for p, k in counts.items() if k >= level)
            out.append(Launch(cond, list(range(start + done, start + level)), sizes))
            done = level
    return out
