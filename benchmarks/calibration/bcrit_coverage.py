"""Coverage of B_crit read from the clocks (``analysis/fits/bcrit.py``) and the model comparison, on synthetic
sweeps with a known answer.

Each draw simulates one condition (``analysis.synthetic``: interval-censored crossings on the evaluation
grid, right-censoring at the budget) whose responses-to-target follow McCandlish's
``R_min (1 + B / B_crit)``, fits it with the power law's resamples (runs within sizes; with ``--seeds``
>= 5 and ``--blocks`` seeds as clusters), and counts how often ``[ci_low, ci_high]`` covers the true
B_crit (also for the bootstrap and profile intervals alone); then draws power-law sweeps
(``R = c B^alpha``) and counts how often McCandlish's form is preferred by more than 2 AICc units.

    python benchmarks/calibration/bcrit_coverage.py --draws 100
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from _intervals import covers

from analysis.fits.bcrit import aicc, fit_mccandlish
from analysis.fits.fit import fit_power_law
from analysis.fits.seed_blocks import resample_weights
from analysis.synthetic import SyntheticSpec, simulate

SIZES = (32, 64, 128, 256, 512)


def measured(spec: SyntheticSpec, target: float):
    """``(B, value, censored, lower, seed)`` of every run as the analysis reads them (the truth file's
    measured clocks)."""
    runs = simulate(spec)
    label = f"target:{target:g}"
    B = np.array([r.truth["B"] for r in runs], float)
    value = np.array([r.truth[label][0] for r in runs], float)
    cens = np.array([r.truth[label][1] for r in runs], bool)
    lower = np.array([r.truth[f"{label}:lower"] for r in runs], float)
    seed = np.array([r.truth["seed"] for r in runs])
    return B, value, cens, lower, seed


def one(spec: SyntheticSpec, n_boot: int, blocks: bool, draw: int) -> dict:
    import pandas as pd

    B, value, cens, lower, seed = measured(spec, spec.targets[0])
    runs = pd.DataFrame({"B": B, "seed": seed})
    W, _used, clusters, _ = resample_weights(runs, n_boot, draw, "seeds" if blocks else "runs", f"draw{draw}")
    power = fit_power_law(B, value, cens, lower=lower, n_boot=n_boot, weights=W, n_clusters=clusters)
    fit = fit_mccandlish(B, value, cens, lower=lower, weights=W, inflation=power.inflation)
    delta = aicc(fit.loglik, fit.n_runs) - aicc(power.loglik, power.n_runs)
    return {"fit": fit, "power": power, "delta": delta}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draws", type=int, default=100)
    p.add_argument("--seeds", type=int, default=4, help="runs per size")
    p.add_argument("--boot", type=int, default=200)
    p.add_argument("--blocks", action="store_true", help="seeds as clusters (needs --seeds >= 5)")
    p.add_argument("--b-crit", type=float, nargs="+", default=[64.0, 256.0])
    p.add_argument("--alpha", type=float, nargs="+", default=[0.1, 0.3, 0.6])
    p.add_argument(
        "--first-seed", type=int, default=1000, help="draws use seeds first-seed, first-seed+1, ..."
    )
    args = p.parse_args()
    common = dict(sizes=SIZES, seeds=args.seeds, gamma=None, b_noise=None, targets=(0.3,), eval_every=256)
    t0 = time.perf_counter()
    for b_crit in args.b_crit:
        fits = []
        for d in range(args.draws):
            seed = args.first_seed + d
            spec = SyntheticSpec(b_crit=b_crit, prefactor=2000.0, budget=120000, seed=seed, **common)
            fits.append(one(spec, args.boot, args.blocks, seed)["fit"])
        hits = {
            name: int(covers([getattr(f, low) for f in fits], [getattr(f, high) for f in fits], b_crit).sum())
            for name, low, high in (
                ("union", "ci_low", "ci_high"),
                ("bootstrap", "boot_low", "boot_high"),
                ("profile", "profile_low", "profile_high"),
            )
        }
        unbounded = sum(not math.isfinite(f.ci_high) or f.ci_low == 0 for f in fits)
        widths = [math.log10(f.ci_high / f.ci_low) for f in fits if math.isfinite(f.ci_high) and f.ci_low > 0]
        cov = ", ".join(f"{k} {v}/{args.draws}" for k, v in hits.items())
        print(
            f"McCandlish B_crit={b_crit:g} ({args.seeds} seeds x {len(SIZES)} sizes, {args.boot} resamples): "
            f"covered {cov}; unbounded {unbounded}/{args.draws}; median width of the bounded ones "
            f"{np.median(widths) if widths else math.nan:.2f} decades"
        )
    for alpha in args.alpha:
        prefer = 0
        deltas = []
        for d in range(args.draws):
            seed = args.first_seed + d
            spec = SyntheticSpec(alpha=alpha, prefactor=1000.0, budget=120000, seed=seed, **common)
            out = one(spec, args.boot, args.blocks, seed)
            deltas.append(out["delta"])
            prefer += out["delta"] < -2
        print(
            f"power law alpha={alpha:g}: McCandlish preferred by > 2 AICc units in {prefer}/{args.draws} "
            f"(median delta_aicc {np.nanmedian(deltas):+.2f})"
        )
    print(f"{time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
