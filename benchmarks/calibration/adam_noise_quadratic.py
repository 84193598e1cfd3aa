"""The Adam-aware noise scale against a critical batch known by simulation (``rlvr_scaling/noisy_quadratic.py``).

A noisy quadratic with diagonal noise is trained by ``torch.optim.AdamW`` at six batch sizes around the
expected B_crit; the samples-to-target curve, fitted with McCandlish's form
(``analysis.fits.bcrit.fit_mccandlish``), gives B_crit with its profile-likelihood interval. Beside it: the
Adam-aware B_noise = tr(P Sigma) / G'PG (P from the optimizer's own state) and the SGD trace
tr Sigma / |G|^2, both from the two-half estimators on the steps before each run's crossing, pooled over
the batch sizes. Scenarios:

* ``single``: 100 coordinates starting at standard-normal distances, every coordinate's own noise scale
  ``20 * noise^2`` (relative noise, so it does not drift as the run converges), β1 = 0, the rate a fixed
  fraction (0.1) of the step's expected-optimal one: the derivation's assumptions (``docs/theory.md``,
  "B_noise for Adam"); the test's setting at full size;
* ``two_groups``: 10 coordinates at scale 1 and 1,000 at scale 0.01 (a few high-signal directions among
  many small ones), the same noise scale everywhere;
* ``heterogeneous``: as ``two_groups`` with the 10 large coordinates at 10 and the 1,000 small ones at
  100 (x noise^2): the SGD trace weights coordinates by G_i^2, Adam's by about |G_i|;
* ``momentum``: ``single`` with torch's default β1 = 0.9;
* ``fixed_lr``: ``single`` with one learning rate per batch size, the best of a grid (β1 = 0.9), as a
  study runs.

    python benchmarks/calibration/adam_noise_quadratic.py                        # all scenarios, noise 1, 2, 4
    python benchmarks/calibration/adam_noise_quadratic.py --scenarios single --noise 1 2 4 --seeds 8
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from analysis.fits.bcrit_simulated import simulated_critical_batch as critical_batch
from rlvr_scaling.noisy_quadratic import NoisyQuadratic, sweep

GROUPS = {
    "single": [(100, 1.0, 1.0, 20.0)],
    "two_groups": [(10, 1.0, 1.0, 20.0), (1000, 1.0, 0.01, 20.0)],
    "heterogeneous": [(10, 1.0, 1.0, 10.0), (1000, 1.0, 0.01, 100.0)],
}
RELATIVE_BATCHES = (0.15, 0.5, 1.5, 5.0, 15.0, 50.0)  # times 20 * noise^2


def run(scenario: str, noise: float, seeds: int, target: float) -> dict:
    groups = GROUPS.get(scenario, GROUPS["single"])
    problem = NoisyQuadratic.groups(groups, noise)
    batches = [max(1, round(f * 20 * noise**2)) for f in RELATIVE_BATCHES]
    beta1 = 0.9 if scenario in ("momentum", "fixed_lr") else 0.0
    if scenario == "fixed_lr":
        lrs = np.geomspace(3e-4, 0.3, 13)
        sims = sweep(problem, batches, lrs, seeds, target, 20000, betas=(beta1, 0.999), measure_every=4)
    else:
        sims = sweep(
            problem, batches, [0.1], seeds, target, 20000, betas=(beta1, 0.999), greedy=True, measure_every=4
        )
    return critical_batch(sims)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--scenarios", nargs="+", default=["single", "two_groups", "heterogeneous", "momentum", "fixed_lr"]
    )
    p.add_argument("--noise", type=float, nargs="+", default=[1.0, 2.0, 4.0])
    p.add_argument("--seeds", type=int, default=8)
    p.add_argument("--target", type=float, default=0.1, help="target loss as a fraction of the start")
    args = p.parse_args()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    print("scenario | noise | simulated B_crit [95 %] | Adam tr(PΣ)/G'PG | ratio | SGD trΣ/|G|² | ratio")
    for scenario in args.scenarios:
        for noise in args.noise if scenario in GROUPS else args.noise[:1]:
            out = run(scenario, noise, args.seeds, args.target)
            b, adam, sgd = out["b_crit"], out["b_noise_adam"], out["b_noise_sgd"]
            print(
                f"{scenario} | {noise:g} | {b:.1f} [{out['b_crit_low']:.1f}, {out['b_crit_high']:.1f}] | "
                f"{adam:.1f} | {adam / b:.2f} | {sgd:.1f} | {sgd / b:.2f}",
                flush=True,
            )
            per_b = ", ".join(f"b={r['b']}: {r['samples']:.0f} (Adam {r['adam']:.1f})" for r in out["per_b"])
            print(f"    samples to target: {per_b}")
    print(f"{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
