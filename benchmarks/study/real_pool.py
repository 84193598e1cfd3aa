"""Run the pool of real runs that ``benchmarks/study/real_coverage.py`` draws study-sized designs from
(docs/study.md, "Calibration on real runs").

The pool is the reference study's clipped grid (``sweeps/two_clock``, K = 8, square-root rule,
``noise.curvature_every_rollouts=32``) at a few η_ref, every size ``--sizes`` and seeds ``--seeds``,
every run trained to its condition's horizon and never stopped at its targets: the design of a study's
later rounds, whole seeds at every size. The horizons are the ones a study fixed after its pilot
(``--horizons runs/reference/horizons.json``, matched to the conditions by η_ref) or given by hand
(``--horizon 3.16e-05=4096``). The jobs are ordered seed by seed (every size and condition of seed k
before seed k + 1), so a pool stopped early holds whole seed blocks; re-running resumes it (finished runs
are skipped, interrupted ones resume from their checkpoints).

``--reuse FOLDER`` hard-links the runs of those conditions and seeds that a study already ran (its
pilot trained past the horizon; a run read to its horizon does not depend on how far it went on:
``tests/study/test_horizon_real.py``) instead of running them again::

    python benchmarks/study/real_pool.py runs/pool --lr 3.16e-6 3.16e-5 --seeds 0-23 \\
        --horizons runs/reference/horizons.json --reuse runs/reference
    python benchmarks/study/real_coverage.py runs/pool --targets 0.22 0.25 0.28 --isotonic --adaptive

``real_coverage.py`` reads each condition to the horizon its runs record (``eval.horizon`` of the
pool's jobs; the default ``--horizon auto`` of ``rlvr-analyze``); ``horizons.json`` records them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

BASE = ["sweeps=two_clock", "noise.curvature_every_rollouts=32"]


def seeds_arg(text: str) -> list[int]:
    """``0-23`` or ``0,1,5``."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
    return out


def study_horizons(path: Path) -> dict[float, float]:
    """η_ref -> horizon from a study's ``horizons.json`` (condition label -> responses; a condition with
    a horizon per size, ``{B: responses}``, gives its largest: the pool's runs then reach every size's)."""
    fixed = json.loads(path.read_text())
    out = {}
    for label, h in fixed.items():
        m = re.search(r"lr\.ref_lr=([0-9.eE+-]+)", label)
        if m and "loss=unclipped" not in label and "clip=null" not in label:
            out[float(m.group(1))] = float(max(h.values()) if isinstance(h, dict) else h)
    return out


def jobs(lrs, seeds, sizes, horizons, skip=frozenset()) -> list[list[str]]:
    """The pool's jobs, seed by seed; ``skip``: (η_ref, seed, P) already in the pool."""
    return [
        [
            "loss=clipped",
            f"lr.ref_lr={lr:g}",
            "train.stop_at_targets=false",
            f"eval.horizon={int(horizons[lr])}",
            f"train.max_responses={int(horizons[lr])}",
            f"seed={seed}",
            f"rollout.prompts_per_rollout={p}",
        ]
        for seed in seeds
        for lr in lrs
        for p in sizes
        if (lr, seed, p) not in skip
    ]


def reuse(source: Path, folder: Path, lrs, seeds) -> set[tuple[float, int, int]]:
    """Hard-link ``source``'s finished clipped runs at these η_ref and seeds into ``folder`` (one per
    η_ref, seed and size); returns their (η_ref, seed, P)."""
    done: set[tuple[float, int, int]] = set()
    for run in sorted(source.iterdir()):
        lr = re.search(r"lr\.ref_lr=([0-9.eE+-]+)", run.name)
        seed = re.search(r"seed=(\d+)", run.name)
        size = re.search(r"prompts_per_rollout=(\d+)", run.name)
        if not (run.is_dir() and "loss=clipped" in run.name and lr and seed and size):
            continue
        match = [x for x in lrs if math.isclose(float(lr.group(1)), x, rel_tol=1e-3)]
        key = (match[0], int(seed.group(1)), int(size.group(1))) if match else None
        if key is None or key[1] not in seeds or key in done:
            continue
        status = run / "status.json"
        if not status.is_file() or json.loads(status.read_text()).get("state") != "completed":
            continue
        target = folder / run.name
        if not target.exists():
            subprocess.run(["cp", "-al", str(run), str(target)], check=True)
        done.add(key)
    return done


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", type=Path)
    p.add_argument("--lr", type=float, nargs="+", default=[3.16e-6, 3.16e-5], help="η_ref of the conditions")
    p.add_argument("--seeds", type=seeds_arg, default=seeds_arg("0-23"))
    p.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 16, 32, 64], help="prompts per rollout")
    p.add_argument("--horizons", type=Path, help="a study's horizons.json")
    p.add_argument("--horizon", action="append", default=[], metavar="LR=RESPONSES")
    p.add_argument("--reuse", type=Path, help="a study folder whose finished runs of these conditions count")
    p.add_argument("--n-jobs", type=int, default=2, help="runs at a time (joblib)")
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args(argv)

    horizons = study_horizons(args.horizons) if args.horizons else {}
    for item in args.horizon:
        lr, _, h = item.partition("=")
        horizons[float(lr)] = float(h)
    matched = {}
    for lr in args.lr:
        found = [h for k, h in horizons.items() if math.isclose(k, lr, rel_tol=1e-3)]
        if not found:
            print(f"real_pool: no horizon for lr.ref_lr={lr:g} (--horizons or --horizon)", file=sys.stderr)
            return 2
        matched[lr] = found[0]
    args.folder.mkdir(parents=True, exist_ok=True)
    labels = {f"lr.ref_lr={lr:g}": h for lr, h in matched.items()}
    (args.folder / "horizons.json").write_text(json.dumps(labels, indent=1))
    skip: set = set()
    if args.reuse:
        skip = reuse(args.reuse, args.folder, args.lr, set(args.seeds))
        print(f"reused {len(skip)} finished run(s) of {args.reuse}")
    todo = jobs(args.lr, args.seeds, args.sizes, matched, frozenset(skip))
    job_file = args.folder / "pool_jobs.yaml"
    job_file.write_text(yaml.safe_dump(todo, default_flow_style=None))
    cmd = [
        str(Path(sys.executable).with_name("rlvr-train")),
        "-m",
        *BASE,
        "run.sweep=pool",
        "hydra/sweeper=rlvr_list",
        f"hydra.sweeper.jobs={job_file.resolve()}",
        f"hydra.sweep.dir={args.folder.resolve()}",
        f"hydra.launcher.n_jobs={args.n_jobs}",
    ]
    responses = sum(float(j[3].split("=")[1]) for j in todo)
    print(f"pool: horizons {matched}; {len(todo)} run(s) to go, at most {responses:,.0f} responses")
    print(" ".join(cmd), flush=True)
    if args.dry_run:
        return 0
    return subprocess.run(cmd, env=os.environ.copy()).returncode


if __name__ == "__main__":
    raise SystemExit(main())
