"""Benchmark: ``rlvr-analyze`` on 1,000 synthetic runs with 1,000 bootstrap resamples.

Target: <= 10 s on 2 cores for the whole command, from process start to the last file written. The
sweep is the seed study's shape: two conditions (lr.ref_lr 1e-6 and 1e-5) x 5 rollout sizes x 100
seeds, two targets and the failure clock (6 interval-censored fits x 1,000 resamples, plus the
competing-risk sensitivity fits, the joint model, goodness of fit, noise scale, Aalen–Johansen
incidences, 10 sigmoid fits x 200 resamples and 1,000 per-run sigmoid fits), all figures in 300-dpi PNG
and PDF. Run directories are generated first (not timed). The machine is shared: the load average
before the run is printed, and the CPU seconds of each stage (serial, in-process) do not depend on it.

    python benchmarks/speed/analysis_speed.py            # prints the seconds of each stage and the total
    python benchmarks/speed/analysis_speed.py --keep DIR # keep the sweep and the output in DIR
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from analysis.synthetic import SyntheticSpec, write_sweep


def make_sweep(root: Path, seeds: int = 100) -> int:
    specs = [
        SyntheticSpec(
            sizes=(32, 64, 128, 256, 512),
            seeds=seeds,
            alpha=alpha,
            prefactor=2000.0,
            budget=40000,
            eval_every=1024,
            seed=i,
            overrides=(("lr.ref_lr", ref_lr),),
        )
        for i, (alpha, ref_lr) in enumerate([(0.15, 1e-6), (0.44, 1e-5)])
    ]
    return len(write_sweep(root / "sweep", specs))


def _cpu() -> tuple[float, float]:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def critical_path(sweep: Path, out: Path, n_boot: int, jobs: int) -> str:
    """Run the command's stages in-process and report each one's CPU (main / workers) and its share
    of the critical path on ``jobs`` idle cores."""
    marks = [("start", _cpu())]
    from analysis.data.clock_tables import build_tables
    from analysis.data.load import load_source
    from analysis.figures.plots import plot_all
    from analysis.fits.competing import incidence_tables
    from analysis.fits.cross import common_exponent_table
    from analysis.fits.exponents import compare_conditions, fit_conditions
    from analysis.fits.noise_scale import agreement, noise_table
    from analysis.fits.results import Results
    from analysis.fits.sigmoid import sigmoid_tables
    from analysis.reporting.markdown import ReportOptions, write_report

    marks.append(("imports", _cpu()))
    out.mkdir(parents=True, exist_ok=True)
    loaded = load_source(str(sweep), jobs=jobs)
    marks.append(("load", _cpu()))
    tables = build_tables(loaded.runs)
    marks.append(("clocks/tables", _cpu()))
    exponents, fits = fit_conditions(tables, n_boot=n_boot, jobs=jobs)
    marks.append((f"fits ({len(fits)}, joint model, goodness of fit)", _cpu()))
    noise = noise_table(tables, n_boot=n_boot)
    exponents = agreement(exponents, noise)
    comparisons = compare_conditions(exponents, fits, tables.varying_keys)
    incidence = incidence_tables(tables)
    common = common_exponent_table(tables, fits)
    marks.append(("noise scale, incidence, common α", _cpu()))
    sig = sigmoid_tables(tables, jobs=jobs)
    marks.append(("sigmoid fits", _cpu()))
    tables.runs.to_csv(out / "runs.csv", index=False)
    tables.runs.to_parquet(out / "runs.parquet", index=False)
    tables.evals.to_csv(out / "evals.csv", index=False)
    marks.append(("writing tables", _cpu()))
    results = Results(
        tables,
        exponents,
        fits,
        comparisons=comparisons,
        incidence=incidence[0],
        incidence_summary=incidence[1],
        common=common,
        noise=noise,
        sigmoid=sig,
    )
    plots = plot_all(out, results, jobs=jobs)
    marks.append((f"figures ({len(plots)} files)", _cpu()))
    write_report(out, str(sweep), results, [], [], ReportOptions(), plots)
    marks.append(("report", _cpu()))
    lines, total = ["stage CPU seconds (main / workers) and critical path on idle cores:"], 0.0
    for (_, (m0, w0)), (name, (m1, w1)) in zip(marks, marks[1:]):
        path = (m1 - m0) + (w1 - w0) / max(jobs, 1)
        total += path
        lines.append(f"  {name:40s} {m1 - m0:5.2f} / {w1 - w0:5.2f}  -> {path:5.2f} s")
    lines.append(f"critical path: {total:.1f} s on {jobs} idle cores (target <= 10 s)")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--keep", type=Path, default=None, help="folder to keep the sweep and output in")
    p.add_argument("--seeds", type=int, default=100, help="seeds per size and condition (100 -> 1,000 runs)")
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--jobs", type=int, default=2, help="rlvr-analyze --jobs (worker processes)")
    p.add_argument("--reuse", action="store_true", help="with --keep: reuse the sweep already there")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        t0 = time.perf_counter()
        if args.reuse and (root / "sweep").is_dir():
            n = sum(1 for _ in (root / "sweep").glob("*/metrics.jsonl"))
        else:
            n = make_sweep(root, args.seeds)
        rows = sum(1 for f in (root / "sweep").glob("*/metrics.jsonl") for _ in f.open())
        print(f"generated {n} runs ({rows} metrics rows) in {time.perf_counter() - t0:.1f} s")
        cmd = [
            sys.executable,
            "-m",
            "analysis.cli",
            str(root / "sweep"),
            "--out",
            str(root / "out"),
            "--bootstrap",
            str(args.bootstrap),
            "--quiet",
            "--jobs",
            str(args.jobs),
        ]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        total = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        print(done.stdout)
        if done.returncode:
            print(done.stderr, file=sys.stderr)
            return done.returncode
        print(
            f"rlvr-analyze on {n} runs x {args.bootstrap} bootstrap resamples: {total:.2f} s wall "
            f"(target <= 10 s), {cpu:.2f} s CPU; load average before the run {load:.2f} on {os.cpu_count()} CPUs"
        )
        # stage breakdown in-process with the same --jobs: CPU of this process and of its workers per
        # stage. The CPU seconds do not depend on what else runs on the machine; the critical path
        # (this process's CPU plus the workers' CPU shared over --jobs cores) is the wall time the
        # command would take on idle cores.
        print(critical_path(root / "sweep", Path(tmp) / "staged", args.bootstrap, args.jobs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
