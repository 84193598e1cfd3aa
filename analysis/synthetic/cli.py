"""Synthetic runs with known exponents, to test the analysis and to validate a setup.

The command line ``python -m analysis.synthetic OUT [--alpha ...]``: one condition's sweep written as run
directories (:func:`analysis.synthetic.write.write_sweep`), the model in :mod:`analysis.synthetic`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from analysis.synthetic.draws import DEPENDENCE
from analysis.synthetic.spec import SyntheticSpec
from analysis.synthetic.write import write_sweep


def _parse_value(text: str) -> Any:
    """``1e-5`` is a float here (YAML 1.1 would read it as a string); otherwise YAML rules."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return yaml.safe_load(text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis.synthetic", description=__doc__.split("\n")[0])
    p.add_argument("out", type=Path, help="folder to write run directories into")
    d = SyntheticSpec()
    p.add_argument("--alpha", type=float, default=d.alpha, help="exponent of responses-to-target")
    p.add_argument("--prefactor", type=float, default=d.prefactor, help="c in c*B**alpha (first target)")
    p.add_argument(
        "--b-crit", type=float, default=None, help="McCandlish sweep: R_T = c (1 + B / b_crit) (no --alpha)"
    )
    p.add_argument("--sigma", type=float, default=d.sigma, help="log-normal scatter of R_T")
    p.add_argument("--gamma", type=float, default=d.gamma, help="exponent of responses-to-failure")
    p.add_argument("--no-failure", action="store_true", help="runs never fail")
    p.add_argument("--failure-prefactor", type=float, default=d.failure_prefactor)
    p.add_argument("--failure-sigma", type=float, default=d.failure_sigma)
    p.add_argument("--rho", type=float, default=d.rho, help="correlation of log R_T and log R_F")
    p.add_argument("--dependence", choices=DEPENDENCE, default=d.dependence, help="law of the two noises")
    p.add_argument(
        "--dependence-param", type=float, default=d.dependence_param, help="Kendall's tau or frailty variance"
    )
    p.add_argument("--detection-delay", type=int, default=d.detection_delay, help="rollouts onset->detection")
    p.add_argument("--b-noise", type=float, default=d.b_noise, help="true gradient-noise scale")
    p.add_argument("--eval-growth", type=float, default=d.eval_growth, help=">1: geometric evaluations")
    p.add_argument("--sizes", type=int, nargs="+", default=list(d.sizes), help="rollout sizes B")
    p.add_argument("--seeds", type=int, default=d.seeds, help="runs per size")
    p.add_argument("--targets", type=float, nargs="+", default=list(d.targets))
    p.add_argument("--budget", type=int, default=d.budget, help="train.max_responses")
    p.add_argument("--eval-every", type=int, default=d.eval_every, help="eval.every_responses")
    p.add_argument("--acc-noise", type=float, default=d.acc_noise)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--sweep", default=d.sweep, help="run.sweep (wandb group)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="condition config key")
    p.add_argument("--train-rows", choices=("eval", "all"), default=d.train_rows)
    p.add_argument("--wandb", action="store_true", help="also write wandb offline runs under OUT/_wandb")
    args = p.parse_args(argv)
    overrides = []
    for item in args.set:
        key, _, value = item.partition("=")
        overrides.append((key, _parse_value(value)))
    spec = SyntheticSpec(
        sizes=tuple(args.sizes),
        seeds=args.seeds,
        alpha=args.alpha,
        b_crit=args.b_crit,
        prefactor=args.prefactor,
        sigma=args.sigma,
        gamma=None if args.no_failure else args.gamma,
        failure_prefactor=args.failure_prefactor,
        failure_sigma=args.failure_sigma,
        rho=args.rho,
        dependence=args.dependence,
        dependence_param=args.dependence_param,
        detection_delay=args.detection_delay,
        b_noise=args.b_noise,
        eval_growth=args.eval_growth,
        targets=tuple(args.targets),
        budget=args.budget,
        eval_every=args.eval_every,
        acc_noise=args.acc_noise,
        seed=args.seed,
        overrides=tuple(overrides),
        sweep=args.sweep,
        train_rows=args.train_rows,
    )
    runs = write_sweep(args.out, spec, wandb=args.wandb)
    print(f"wrote {len(runs)} runs to {args.out} (truth in {args.out / 'synthetic_truth.json'})")
    return 0
