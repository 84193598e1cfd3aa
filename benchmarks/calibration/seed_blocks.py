"""Benchmark: coverage and width of the 95 % intervals of alpha and of a difference between two
conditions, for the seed (cluster) bootstrap and the within-size run bootstrap, when seeds are blocks.

Each draw simulates two conditions (alpha 0.30 and 0.40) that share their seeds: one seed's log
crossing times correlate by ``c`` between the two conditions at one size and by ``c / 2`` between sizes
(:class:`analysis.synthetic.SyntheticSpec`: ``seed_corr = seed_size_corr = c / 2``; the part shared
between sizes is an offset that leaves a balanced slope unchanged, the part shared at one size moves
both conditions' slopes alike, which a paired comparison cancels), 5 sizes x 5 seeds each, evaluations every 1/8
of the smallest median crossing, no failures. Both are fitted through :func:`analysis.fits.exponents.fit_conditions`
and compared through :func:`analysis.fits.exponents.compare_conditions` (paired when the seeds are resampled as
clusters: the two conditions draw the same seeds). Printed per correlation and bootstrap: coverage of
alpha and of the difference, their median widths. ``--unequal`` keeps the second half of the seeds at
the extreme sizes only (what an adaptive study's rounds leave), so seeds hold runs at different sizes.

    python benchmarks/calibration/seed_blocks.py --draws 200
    python benchmarks/calibration/seed_blocks.py --draws 200 --seeds 10 --unequal
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _intervals import covers

from analysis.data.clock_tables import build_tables
from analysis.fits.exponents import compare_conditions, fit_conditions
from analysis.synthetic import SyntheticSpec, records

ALPHAS = (0.30, 0.40)


def one_draw(c: float, draw: int, n_boot: int, seeds: int, unequal: bool = False) -> dict[str, tuple]:
    specs = [
        SyntheticSpec(
            sizes=(32, 64, 128, 256, 512),
            seeds=seeds,
            alpha=a,
            prefactor=2000.0,
            sigma=0.25,
            gamma=None,
            budget=60000,
            eval_every=707,
            targets=(0.3,),
            b_noise=None,
            seed_corr=c / 2,
            seed_size_corr=c / 2,
            seed_stream=draw,
            seed=1000 * draw + i,
            overrides=(("lr.ref_lr", 1e-6 * (i + 1)),),
        )
        for i, a in enumerate(ALPHAS)
    ]
    recs = records(*specs)
    if unequal:
        # an adaptive study's design: the seeds past the first ``keep`` ran at the extreme sizes only
        keep = max(2, seeds // 2)
        recs = [
            r for r in recs
            if int(r.config["seed"]) < keep or r.config["rollout"]["prompts_per_rollout"] * 8 in (32, 512)
        ]  # fmt: skip
    tables = build_tables(recs)
    out = {}
    for mode in ("seeds", "runs"):
        exp, fits = fit_conditions(tables, n_boot=n_boot, seed=draw, joint_model=False, resample=mode)
        row = exp[(exp["clock"] == "target:0.3")].sort_values("lr.ref_lr").iloc[0]
        comp = compare_conditions(exp, fits, tables.varying_keys)
        d = comp[comp["clock"] == "target:0.3"].iloc[0]
        out[mode] = (row["ci_low"], row["ci_high"], d["ci_low"], d["ci_high"])
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--draws", type=int, default=200)
    p.add_argument("--bootstrap", type=int, default=400)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--corr", type=float, nargs="+", default=[0.0, 0.5, 0.8])
    p.add_argument(
        "--unequal",
        action="store_true",
        help="seed sets differ between sizes: the second half of the seeds at B = 32 and 512 only",
    )
    args = p.parse_args(argv)
    print(
        f"alpha {ALPHAS[0]} vs {ALPHAS[1]}, 5 sizes x {args.seeds} seeds{' (unequal sets)' if args.unequal else ''}, "
        f"{args.draws} draws, "
        f"{args.bootstrap} resamples"
    )
    print("corr  bootstrap  cover(alpha)  width(alpha)  cover(diff)  width(diff)")
    for c in args.corr:
        start = time.perf_counter()
        res = {"seeds": [], "runs": []}
        for draw in range(args.draws):
            for mode, v in one_draw(c, draw, args.bootstrap, args.seeds, args.unequal).items():
                res[mode].append(v)
        for mode, vals in res.items():
            v = np.array(vals, float)
            cover_a = np.mean(covers(v[:, 0], v[:, 1], ALPHAS[0]))
            cover_d = np.mean(covers(v[:, 2], v[:, 3], ALPHAS[1] - ALPHAS[0]))
            print(
                f"{c:4.1f}  {mode:9s}  {cover_a:11.1%}  {np.median(v[:, 1] - v[:, 0]):12.3f}  "
                f"{cover_d:10.1%}  {np.median(v[:, 3] - v[:, 2]):11.3f}"
            )
        print(f"      ({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
