"""``rlvr-grid``: list a grid before launching it (nothing is started, nothing is submitted).

    rlvr-grid sweeps=demo
    rlvr-grid sweeps=two_clock lr.ref_lr=1e-6,1e-5 seed=0,1

Takes the same arguments as ``rlvr-train -m``: the sweep file's ``hydra.sweeper.params`` plus any
comma-separated overrides on the command line. For every job it composes and validates the config
(Hydra composes once per set of config-group choices; each job's value overrides are applied to that
tree with Hydra's own functions: :class:`JobComposer`; 1,000 jobs in ~11 s, benchmarks/speed/grid_listing.py)
and prints the task and the derived numbers (B, P, G, K, eta(B), response budget), the run directory with its current
state (new / running / preempted / completed / failed; ended runs are skipped on re-launch) and a rough
cost: budget responses x (prompt + max new tokens) x 8 x parameters (forward + backward FLOPs of the
policy passes), converted to time with ``--flops-per-second`` (default: what the embedded model reaches
on 2 CPU threads here).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import itertools
import json
import pickle
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf, open_dict

from rlvr_scaling.compose import compose, initialized, to_config
from rlvr_scaling.run_names import run_dirname

if TYPE_CHECKING:
    from rlvr_scaling.config import Config

# ~250 responses/s (evaluation included) of the 1M-parameter default on 2 CPU threads, 24-token sequences.
EMBEDDED_FLOPS_PER_S = 5.0e10


def sweep_jobs(overrides: list[str], base: DictConfig | None = None) -> list[list[str]]:
    """The override lists of the jobs ``rlvr-train -m <overrides>`` would launch (nothing composed but
    the base config, to read the sweep file's ``hydra.sweeper.params``).

    Mirrors Hydra's basic sweeper: the sweep file's params first, then the command line, one axis per
    key (a later value for the same key replaces the earlier one, so ``seed=0`` narrows a sweep file's
    ``seed: 0,1``); the jobs are the product of the axes. ``base``: the config composed from the
    non-sweep overrides, when the caller has it already. With ``hydra/sweeper=rlvr_list`` the jobs are
    that sweeper's (``hydra_plugins/rlvr_list_sweeper``: its job list, each job after the command line).
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    plain = [o.input_line for o in parser.parse_overrides(overrides) if not o.is_sweep_override()]
    if base is None:
        base = compose(plain, hydra=True)
    if base.hydra.sweeper.get("_target_") == "hydra_plugins.rlvr_list_sweeper.ListSweeper":
        from hydra_plugins.rlvr_list_sweeper import expand_jobs, read_jobs

        return expand_jobs(read_jobs(base.hydra.sweeper.jobs), overrides, base.hydra.sweeper.get("params"))
    params = [f"{key}={value}" for key, value in (base.hydra.sweeper.get("params") or {}).items()]
    axes: dict[str, list[str]] = {}
    for o in parser.parse_overrides(params + list(overrides)):
        key = o.get_key_element()
        # the sweeper's own spelling, which reaches the run directory's name (false -> False)
        values = o.sweep_string_iterator() if o.is_sweep_override() else [o.get_value_element_as_str()]
        axes[key] = [f"{key}={v}" for v in values]
    return [list(combo) for combo in itertools.product(*axes.values())]


@dataclass(frozen=True)
class Job:
    """One job of a grid: its override list, its run directory and its typed config (not validated)."""

    overrides: tuple[str, ...]
    run_dir: Path
    config: Config


def list_jobs(overrides: list[str]) -> list[Job]:
    """Every job of :func:`sweep_jobs`, composed: each equals :func:`compose_one` of its override list
    (tests/core/test_grid_listing.py), at one Hydra composition per distinct set of config-group
    choices instead of one per job (:class:`JobComposer`)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    base = compose([o.input_line for o in parsed if not o.is_sweep_override()], hydra=True)
    composer = JobComposer()
    return [composer(job) for job in sweep_jobs(overrides, base=base)]


def compose_one(job: list[str]) -> Job:
    """One job composed by Hydra from scratch (:func:`~rlvr_scaling.compose.compose`)."""
    cfg = compose(job, hydra=True)
    return Job(tuple(job), run_dir_of(cfg), to_config(cfg))


class JobComposer:
    """Composes the jobs of a grid as :func:`compose_one` does, with one Hydra composition per distinct
    list of config-group overrides.

    Hydra composes a job in two stages (``ConfigLoaderImpl._load_configuration_impl``, hydra-core 1.3):
    the config-group overrides (``loss=clipped``) choose the defaults tree, which it loads and merges
    (nearly all of the ~0.5 s a composition takes); then it applies the value overrides (``seed=3``)
    to the merged tree in order, in struct mode, and names the job (``hydra.job.override_dirname``,
    which the run directory's name comes from). Here the first stage runs once per list of group
    overrides and the second, with Hydra's own functions, per job, on a tree kept for those jobs
    (:class:`_Tree`): jobs that share a tree override the same keys in the same order, so each job's
    assignments replace the previous job's. Only the run directory and the typed config come out.

    Outside that case Hydra composes the job from scratch: overrides that add, force-add or delete
    (``+``, ``++``, ``~``), dict values, ``@package``, ``hydra.searchpath``, a key nested in another
    key of the same job, and any job whose second stage fails (so a bad value raises Hydra's error).
    """

    def __init__(self) -> None:
        from hydra.core.global_hydra import GlobalHydra
        from hydra.core.override_parser.overrides_parser import OverridesParser

        with initialized():
            # the config groups as Hydra sees them (conf/, and sweeps/ and slurm/ via the search path)
            self._repo = GlobalHydra.instance().hydra.config_loader.repository
        self._parser = OverridesParser.create()
        self._parsed: dict[str, tuple[Any, bool]] = {}  # override -> (Hydra's Override, is a group)
        self._trees: dict[tuple, _Tree] = {}

    def __call__(self, job: list[str]) -> Job:
        parsed = [self._parse(line) for line in job]
        groups = [o for o, is_group in parsed if is_group]
        values = [o for o, is_group in parsed if not is_group]
        if not _plain(groups, values):
            return compose_one(job)
        key = (tuple(o.input_line for o in groups), tuple(o.key_or_group for o in values))
        tree = self._trees.get(key)
        if tree is None:
            tree = self._trees[key] = _Tree(compose([o.input_line for o in groups], hydra=True), values)
        try:
            tree.apply(values)
            run_dir = tree.run_dir([o for o, _ in parsed if not o.is_hydra_override()])
            return Job(tuple(job), run_dir, tree.typed())
        except Exception:  # noqa: BLE001 - Hydra composes the job afresh and raises its own error
            del self._trees[key]
            return compose_one(job)

    def _parse(self, line: str) -> tuple[Any, bool]:
        if line not in self._parsed:
            o = self._parser.parse_override(line)
            # Hydra's own rule (defaults_list.Overrides): a group that exists, unless the value is a dict
            is_group = not isinstance(o.value(), dict) and self._repo.group_exists(o.key_or_group)
            self._parsed[line] = (o, is_group)
        return self._parsed[line]


def _plain(groups: list, values: list) -> bool:
    """Whether :class:`JobComposer` may apply a job's overrides to a shared tree (its docstring)."""

    def primitive(v) -> bool:
        return v is None or isinstance(v, (str, int, float, bool))

    for o in groups + values:
        if o.is_add() or o.is_force_add() or o.is_delete() or o.package is not None:
            return False
    keys = [o.key_or_group for o in values]
    for o in values:
        v = o.value()
        if not (primitive(v) or (isinstance(v, list) and all(primitive(x) for x in v))):
            return False
        if o.key_or_group == "hydra.searchpath":
            return False
        if any(k.startswith(o.key_or_group + ".") for k in keys):
            return False
    return len(set(keys)) == len(keys)


# An interpolation that only reads the environment: the same value for every job of a listing.
_ENV_ONLY = re.compile(r"\$\{oc\.env:[^${}\\]*\}")
# conf/config.yaml's run directory: hydra.sweep.dir = <prefix>${run.sweep}, and hydra.sweep.subdir =
_SWEEP_DIR = re.compile(r"([^${}\\]*)\$\{run\.sweep\}")
_SWEEP_SUBDIR = "${rlvr.dirname:${hydra.job.override_dirname}}"


class _Tree:
    """One Hydra composition shared by the jobs of :class:`JobComposer` with the same group overrides
    and value keys: ``full`` (with ``hydra:``) and ``app`` (without it, for the typed config).

    Each job's value overrides go to ``app``, its ``hydra.*`` overrides to ``full`` (all of them to
    ``full`` when the run directory is resolved there). The run directory, when ``hydra.sweep`` has
    conf/config.yaml's form and no job overrides it, is ``<prefix><run.sweep>/<run_dirname(name)>``,
    what OmegaConf resolves the two interpolations to; otherwise OmegaConf resolves them in ``full``.
    The typed config converts afresh only the top-level sections that a job's override reaches or that
    hold an interpolation other than an environment read; the others are unpickled from their typed
    values for the tree's first job, whose config is converted whole and compared with the assembly
    (if they differed, every job would be converted whole).
    """

    def __init__(self, full: DictConfig, values: list) -> None:
        self.full = full
        self.app = copy.deepcopy(full)
        with open_dict(self.app):
            del self.app["hydra"]
        keys = [o.key_or_group for o in values]
        # the job's own values can change the naming settings (hydra.job.config.override_dirname.*)
        self._naming = None if any(k == "hydra" or k.startswith("hydra.job") for k in keys) else ()
        sweep = OmegaConf.to_container(full.hydra.sweep, resolve=False)
        match = _SWEEP_DIR.fullmatch(str(sweep["dir"]))
        fixed = not any(k == "hydra" or k.startswith("hydra.sweep") for k in keys)
        self._prefix = match[1] if match and fixed and sweep["subdir"] == _SWEEP_SUBDIR else None
        touched = {k.split(".")[0] for k in keys if not k.startswith("hydra.")}
        self._live = [
            k
            for k in self.app
            if k in touched
            or not OmegaConf.is_config(self.app._get_node(k))
            or not all(_ENV_ONLY.fullmatch(v) for v in _interpolations(self.app._get_node(k)))
        ]
        self._static: bytes | None = None  # the other sections' typed values for the first job, pickled
        self._template: Any = None
        self._partial = False

    def apply(self, values: list) -> None:
        from hydra._internal.config_loader_impl import ConfigLoaderImpl

        to_full = [o for o in values if o.is_hydra_override()] if self._prefix is not None else values
        ConfigLoaderImpl._apply_overrides_to_config(to_full, self.full)
        ConfigLoaderImpl._apply_overrides_to_config(
            [o for o in values if not o.is_hydra_override()], self.app
        )

    def run_dir(self, task_overrides: list) -> Path:
        from hydra._internal.config_loader_impl import get_overrides_dirname

        kv_sep, item_sep, exclude_keys = self._naming_settings()
        name = get_overrides_dirname(
            overrides=task_overrides, kv_sep=kv_sep, item_sep=item_sep, exclude_keys=exclude_keys
        )
        if self._prefix is not None:
            return Path(f"{self._prefix}{self.app.run.sweep}") / run_dirname(name)
        self.full.hydra.job.override_dirname = name
        return run_dir_of(self.full)

    def _naming_settings(self) -> tuple[str, str, list[str]]:
        if self._naming:
            return self._naming
        node = self.full.hydra.job.config.override_dirname
        naming = (node.kv_sep, node.item_sep, OmegaConf.to_container(node.exclude_keys, resolve=True))
        if self._naming is not None:
            self._naming = naming
        return naming

    def typed(self) -> Config:
        if self._static is None:  # the first job: converted whole, and its sections' assembly compared
            whole = OmegaConf.to_object(self.app)
            self._static = pickle.dumps({k: getattr(whole, k) for k in self.app if k not in self._live})
            fields = {f.name for f in dataclasses.fields(whole)} if dataclasses.is_dataclass(whole) else None
            self._template = copy.deepcopy(whole)
            self._partial = fields == set(self.app) and self._assemble() == whole
            return whole
        return self._assemble() if self._partial else OmegaConf.to_object(self.app)

    def _assemble(self) -> Config:
        out = copy.copy(self._template)  # every field is set below
        for k in self._live:
            node = self.app[k]
            setattr(out, k, OmegaConf.to_object(node) if OmegaConf.is_config(node) else node)
        for k, v in pickle.loads(self._static).items():  # a fresh copy for every job
            setattr(out, k, v)
        return out


def _interpolations(node) -> list[str]:
    """The strings of ``node``'s subtree, unresolved, that hold an interpolation."""
    found, stack = [], [OmegaConf.to_container(node, resolve=False)]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, str) and "${" in v:
            found.append(v)
    return found


def run_dir_of(cfg: DictConfig) -> Path:
    """The run directory of a job composed with its ``hydra:`` node: ``hydra.sweep.dir/hydra.sweep.subdir``."""
    return Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="rlvr-grid", description=__doc__.split("\n\n")[0])
    ap.add_argument("overrides", nargs="*", help="Hydra overrides, as for rlvr-train -m")
    ap.add_argument("--flops-per-second", type=float, default=EMBEDDED_FLOPS_PER_S)
    ap.add_argument("--json", action="store_true", help="one JSON object per job instead of a table")
    args = ap.parse_args(argv)

    from rlvr_scaling.config import derive, validate
    from rlvr_scaling.errors import ConfigError

    rows = []
    for job in list_jobs(args.overrides):
        run_dir, typed = job.run_dir, job.config
        try:
            validate(typed)
        except ConfigError as err:
            print(f"rlvr-grid: config error in job {list(job.overrides)}: {err}", file=sys.stderr)
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
                "task": typed.task.name,
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
        f"{'state':<10} {'task':<10} {'B':>6} {'P':>5} {'G':>3} {'K':>3} {'eta(B)':>10} {'budget':>8} {'~min':>6}  run directory"
    )
    for r in rows:
        est = f"{r['est_minutes']:.1f}" if r["est_minutes"] is not None else "?"
        print(
            f"{r['state']:<10} {r['task']:<10} {r['B']:>6} {r['P']:>5} {r['G']:>3} {r['K']:>3} {r['lr']:>10.3g} {r['budget']:>8} {est:>6}  {r['run_dir']}"
        )
    todo = [r for r in rows if r["state"] not in ("completed", "failed")]
    known = [r["est_minutes"] for r in todo if r["est_minutes"] is not None]
    print(
        f"{len(todo)} to run (ended runs are skipped on re-launch); ~{sum(known):.1f} CPU-minutes of embedded-model work"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
