"""Check: ``rlvr-analyze`` writes the same outputs before and after a change that should not alter them.

Two synthetic sweeps: three conditions with failures (one with a detection delay and noisy
evaluations, one with a geometric evaluation schedule and no failures), a preempted run and an
unreadable run; and four conditions with numeric, null and text values of the varied keys. Each is
analysed with figures (``--formats png --jobs 1``), and the first once more with ``--clock tokens
--isotonic``. ``--compare`` then requires every CSV and ``report.md`` byte for byte, the same stdout
(except the timing line) and stderr, and the same file list (PNGs and the parquet file are counted when
they also match byte for byte, which is not required).

    python benchmarks/checks/analysis_identity.py write /tmp/ident/sweeps       # the sweeps (once)
    git archive REV analysis | tar -x -C /tmp/old                        # the code before the change
    PYTHONPATH=/tmp/old python benchmarks/checks/analysis_identity.py analyze /tmp/ident/sweeps /tmp/ident/before
    PYTHONPATH=$PWD python benchmarks/checks/analysis_identity.py analyze /tmp/ident/sweeps /tmp/ident/after
    python benchmarks/checks/analysis_identity.py compare /tmp/ident/before /tmp/ident/after

Analyse into the same output path for both (``analyze`` writes to ``<sweeps>/../out`` and copies), so
that the paths printed in the outputs agree.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import subprocess
import sys
from pathlib import Path

RUNS = {
    "A": ["--formats", "png", "--jobs", "1", "--dpi", "60", "--bootstrap", "200"],
    "A_iso": ["--isotonic", "--clock", "tokens", "--no-plots", "--jobs", "1", "--bootstrap", "200"],
    "B": ["--formats", "png", "--jobs", "1", "--dpi", "60", "--bootstrap", "200"],
}


def write(root: Path) -> None:
    from analysis.synthetic import SyntheticSpec, write_sweep

    sizes = (32, 64, 128, 256)
    write_sweep(
        root / "A",
        [
            SyntheticSpec(sizes=sizes, seeds=3, gamma=0.0, seed=1, overrides=(("lr.ref_lr", 1e-6),)),
            SyntheticSpec(
                sizes=sizes,
                seeds=3,
                gamma=0.2,
                seed=2,
                acc_noise=0.02,
                detection_delay=2,
                overrides=(("lr.ref_lr", 1e-5),),
            ),  # fmt: skip
            SyntheticSpec(
                sizes=sizes, seeds=3, gamma=None, seed=3, eval_growth=1.3, overrides=(("lr.ref_lr", 3e-5),)
            ),
        ],
    )
    run_dir = sorted(p for p in (root / "A").iterdir() if p.name.startswith("B256"))[0]
    status = json.loads((run_dir / "status.json").read_text())
    status["state"] = "preempted"
    (run_dir / "status.json").write_text(json.dumps(status))
    broken = root / "A" / "broken_run"
    broken.mkdir()
    shutil.copy(root / "A" / "B32_seed0_ref_lr1e-06" / "config.yaml", broken / "config.yaml")
    (broken / "metrics.jsonl").write_text('{"a": 1}\nnot json\n')
    (broken / "status.json").write_text('{"state": "completed"}\n')
    specs = []
    for i, (clip, lr, name) in enumerate(
        [(0.2, 1e-6, "clipped"), (0.2, 1e-5, "clipped"), (None, 1e-5, "unclipped"), (None, 3e-5, "unclipped")]
    ):
        overrides = (("loss.clip", clip), ("lr.ref_lr", lr), ("loss.name", name))
        specs.append(SyntheticSpec(sizes=(32, 64, 128), seeds=2, gamma=None, seed=i, overrides=overrides))
    write_sweep(root / "B", specs)


def analyze(sweeps: Path, dest: Path) -> None:
    work = sweeps.parent / "out"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for name, args in RUNS.items():
        source = sweeps / name.split("_")[0]
        cmd = [sys.executable, "-m", "analysis.cli", str(source), "--out", str(work / name), *args]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        (work / f"{name}.stdout").write_text(done.stdout)
        (work / f"{name}.stderr").write_text(done.stderr)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(work, dest)


def compare(before: Path, after: Path) -> int:
    problems, n_text, n_binary, binary_same = [], 0, 0, 0
    for name in RUNS:
        b, a = before / name, after / name
        names_b, names_a = sorted(p.name for p in b.iterdir()), sorted(p.name for p in a.iterdir())
        if names_b != names_a:
            problems.append(f"{name}: file lists differ: {sorted(set(names_b) ^ set(names_a))}")
        for f in names_b:
            if f not in names_a:
                continue
            same = filecmp.cmp(b / f, a / f, shallow=False)
            if f.endswith((".csv", ".md")):
                n_text += 1
                if not same:
                    problems.append(f"{name}/{f} differs")
            else:
                n_binary += 1
                binary_same += same
        out_b, out_a = ((d / f"{name}.stdout").read_text().splitlines() for d in (before, after))
        if [x for x in out_b if " wrote " not in x] != [x for x in out_a if " wrote " not in x]:
            problems.append(f"{name}: stdout differs")
        if (before / f"{name}.stderr").read_text() != (after / f"{name}.stderr").read_text():
            problems.append(f"{name}: stderr differs")
    print(
        f"{n_text} CSV/report.md files compared byte for byte; {binary_same}/{n_binary} PNG/parquet identical"
    )
    for p in problems:
        print("DIFFERENT:", p)
    print("identical" if not problems else f"{len(problems)} difference(s)")
    return 1 if problems else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="verb", required=True)
    sub.add_parser("write").add_argument("sweeps", type=Path)
    a = sub.add_parser("analyze")
    a.add_argument("sweeps", type=Path)
    a.add_argument("dest", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = p.parse_args()
    if args.verb == "write":
        write(args.sweeps)
        return 0
    if args.verb == "analyze":
        analyze(args.sweeps, args.dest)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    raise SystemExit(main())
