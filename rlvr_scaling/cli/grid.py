"""``rlvr-grid``: list a grid before launching it (nothing is started, nothing is submitted).

    rlvr-grid sweeps=demo
    rlvr-grid sweeps=two_clock lr.ref_lr=1e-6,1e-5 seed=0,1

Takes the same arguments as ``rlvr-train -m``: the sweep file's ``hydra.sweeper.params`` plus any
comma-separated overrides on the command line. For every job it composes and validates the config and
prints the derived numbers (B, P, G, K, eta(B), response budget), the run directory with its current
state (new / running / preempted / completed / failed; ended runs are skipped on re-launch) and a rough
cost: budget responses x (prompt + max new tokens) x 8 x parameters (forward + backward FLOPs of the
policy passes), converted to time with ``--flops-per-second`` (default: what the embedded model reaches
on 2 CPU threads here).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

from omegaconf import DictConfig

# ~250 responses/s (evaluation included) of the 1M-parameter default on 2 CPU threads, 24-token sequences.
EMBEDDED_FLOPS_PER_S = 5.0e10


def sweep_jobs(overrides: list[str], base: DictConfig | None = None) -> list[list[str]]:
    """The override lists of the jobs ``rlvr-train -m <overrides>`` would launch (nothing composed but
    the base config, to read the sweep file's ``hydra.sweeper.params``).

    Mirrors Hydra's basic sweeper: the sweep file's params first, then the command line, one axis per
    key (a later value for the same key replaces the earlier one, so ``seed=0`` narrows a sweep file's
    ``seed: 0,1``); the jobs are the product of the axes. ``base``: the config composed from the
    non-sweep overrides, when the caller has it already.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    plain = [o.input_line for o in parser.parse_overrides(overrides) if not o.is_sweep_override()]
    if base is None:
        base = compose_job(plain)
    params = [f"{key}={value}" for key, value in (base.hydra.sweeper.get("params") or {}).items()]
    axes: dict[str, list[str]] = {}
    for o in parser.parse_overrides(params + list(overrides)):
        key = o.get_key_element()
        # the sweeper's own spelling, which reaches the run directory's name (false -> False)
        values = o.sweep_string_iterator() if o.is_sweep_override() else [o.get_value_element_as_str()]
        axes[key] = [f"{key}={v}" for v in values]
    return [list(combo) for combo in itertools.product(*axes.values())]


def compose_job(overrides: list[str]) -> DictConfig:
    """One job's config as Hydra composes it, ``hydra:`` included (launcher, run directory)."""
    from hydra import compose, initialize_config_dir

    from rlvr_scaling.cli.train import CONF_DIR, _register_resolvers
    from rlvr_scaling.config import register_configs

    _register_resolvers()
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=True)


def expand(overrides: list[str]) -> tuple[list[list[str]], list[DictConfig]]:
    """Every job of :func:`sweep_jobs`, composed (:func:`compose_job`)."""
    jobs = sweep_jobs(overrides)
    return jobs, [compose_job(job) for job in jobs]


def run_dir_of(cfg: DictConfig) -> Path:
    """The run directory of a job composed by :func:`expand`: ``hydra.sweep.dir/hydra.sweep.subdir``."""
    return Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="rlvr-grid", description=__doc__.split("\n\n")[0])
    ap.add_argument("overrides", nargs="*", help="Hydra overrides, as for rlvr-train -m")
    ap.add_argument("--flops-per-second", type=float, default=EMBEDDED_FLOPS_PER_S)
    ap.add_argument("--json", action="store_true", help="one JSON object per job instead of a table")
    args = ap.parse_args(argv)

    from omegaconf import OmegaConf

    from rlvr_scaling.config import derive, validate
    from rlvr_scaling.errors import ConfigError

    jobs, composed = expand(args.overrides)
    rows = []
    for job, cfg in zip(jobs, composed):
        run_dir = run_dir_of(cfg)
        OmegaConf.set_struct(cfg, False)
        del cfg["hydra"]
        typed = OmegaConf.to_object(cfg)
        try:
            validate(typed)
        except ConfigError as err:
            print(f"rlvr-grid: config error in job {job}: {err}", file=sys.stderr)
            return 2
        d = derive(typed)
        status = run_dir / "status.json"
        state = json.loads(status.read_text()).get("state", "?") if status.is_file() else "new"
        if typed.model.path == "embedded":
            e = typed.model.embedded
            n_params = (
                e.num_layers * (4 * e.hidden_size**2 + 3 * e.hidden_size * e.intermediate_size)
                + 100 * e.hidden_size
            )
        else:
            n_params = 0
        seq = 16 + typed.rollout.max_new_tokens
        flops = typed.train.max_responses * seq * 8 * n_params
        rows.append(
            {
                "run_dir": str(run_dir),
                "state": state,
                "B": d.responses_per_rollout,
                "P": d.prompts_per_rollout,
                "G": d.group_size,
                "K": d.steps_per_rollout,
                "lr": d.lr,
                "budget": typed.train.max_responses,
                "rollouts": d.rollouts_in_budget,
                "est_minutes": flops / args.flops_per_second / 60 if n_params else None,
            }
        )
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return 0
    print(f"{len(rows)} runs")
    print(
        f"{'state':<10} {'B':>6} {'P':>5} {'G':>3} {'K':>3} {'eta(B)':>10} {'budget':>8} {'~min':>6}  run directory"
    )
    for r in rows:
        est = f"{r['est_minutes']:.1f}" if r["est_minutes"] is not None else "?"
        print(
            f"{r['state']:<10} {r['B']:>6} {r['P']:>5} {r['G']:>3} {r['K']:>3} {r['lr']:>10.3g} {r['budget']:>8} {est:>6}  {r['run_dir']}"
        )
    todo = [r for r in rows if r["state"] not in ("completed", "failed")]
    known = [r["est_minutes"] for r in todo if r["est_minutes"] is not None]
    print(
        f"{len(todo)} to run (ended runs are skipped on re-launch); ~{sum(known):.1f} CPU-minutes of embedded-model work"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
