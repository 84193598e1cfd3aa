"""Build everything a run needs from its typed config and train in one run directory.

This is the library's entry: :func:`train` takes a validated :class:`~rlvr_scaling.config.Config` and
a directory. It refuses to mix two different runs in one directory, skips a run that has already
ended (unless ``run.force``), resumes one that has a checkpoint, and always closes its sinks.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from .config import Config, Derived, derive, validate
from .errors import ConfigError
from .rundir import RunDirLock, RunDirLocked, atomic_write_text, ended_state, latest_checkpoint

BOOKKEEPING = ("run", "logger")


@dataclass
class Components:
    task: Any
    model: Any
    tokenizer: Any
    ref_model: Any
    engine: Any
    device: torch.device
    model_dir: str
    dist: Any = None  # distributed.DistEnv (None: one process)
    parallel: Any = None  # distributed.Parallel


def config_dict(cfg: Config) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


# keys that say how a run is read, or how far it goes, never how it trains: a relaunch that differs
# only in them is the same run (a study records the horizon it fixed on its later runs, and extends its
# pilot's runs to it; docs/analysis.md, "The horizon"; docs/study.md, "The pilot's first seeds")
_READING_KEYS = (
    ("eval", "horizon"),
    ("train", "stop_at_targets"),
    ("train", "stop_at_responses"),
    ("train", "stop_at_accuracy"),
)


def _science(d: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in d.items() if k not in BOOKKEEPING}
    for section, key in _READING_KEYS:
        if isinstance(out.get(section), dict) and key in out[section]:
            out[section] = {k: v for k, v in out[section].items() if k != key}
    return out


def _diff(old: Any, new: Any, prefix: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new)):
            out += _diff(old.get(key), new.get(key), f"{prefix}{key}.")
        return out
    return [] if old == new else [f"{prefix.rstrip('.')}: {old!r} -> {new!r}"]


def _added_keys(old: dict, new: dict, prefix: str = "") -> list[str]:
    """Dotted keys of ``new`` that ``old`` lacks (recursing into sections both have)."""
    out = []
    for key, value in new.items():
        if key not in old:
            out.append(prefix + key)
        elif isinstance(value, dict) and isinstance(old[key], dict):
            out += _added_keys(old[key], value, f"{prefix}{key}.")
    return out


_NO_DEFAULT = object()


def schema_default(cfg: Config, dotted: str) -> Any:
    """The schema (dataclass) default of the config key ``dotted``, as ``config_dict`` writes it, or
    ``_NO_DEFAULT`` when it has none (a key inside a free-form dict such as ``task.dataset_config``,
    a required field). The default is the outermost one: ``failure.reward_collapse.window_responses``
    is what ``Config()`` holds there (the ``failure`` section's own default), not the leaf class's
    field default; below a section typed ``Any`` at the root (task, lr, baseline, allocator), the
    default of the class the run uses for it. Never a preset's or the user's value."""
    parts = dotted.split(".")
    node: Any = cfg
    for part in parts[:-1]:  # keys inside a free-form dict field are not schema
        node = getattr(node, part, None) if dataclasses.is_dataclass(node) else None
    if not dataclasses.is_dataclass(node):
        return _NO_DEFAULT
    node = cfg
    for depth in range(len(parts)):
        if not dataclasses.is_dataclass(node):
            return _NO_DEFAULT
        try:
            tree: Any = dataclasses.asdict(type(node)())
        except TypeError:  # a class with required fields has no default instance
            tree = None
        for part in parts[depth:]:
            tree = tree.get(part, _NO_DEFAULT) if isinstance(tree, dict) else _NO_DEFAULT
        if tree is not _NO_DEFAULT and tree != "???":  # "???": omegaconf's MISSING (no default)
            return tree
        node = getattr(node, parts[depth], None)
    return _NO_DEFAULT


def _lookup(d: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        d = d[part]
    return d


def _assign(d: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, name = dotted.split(".")
    for part in parents:
        d = d[part]
    d[name] = value


def reconcile_stored_config(cfg: Config, stored: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Compare a run directory's stored config with ``cfg``. Returns ``(added, diffs)``: ``added``
    lists the keys the stored config lacks whose value in ``cfg`` is their schema default (keys added
    to the project since the run was written: the run is the same run); ``diffs`` names every other
    difference in the science config (bookkeeping sections ``run`` and ``logger`` are not compared)."""
    current = _science(config_dict(cfg))
    stored = copy.deepcopy(_science(stored))
    added, diffs = [], []
    for key in _added_keys(stored, current):
        value, default = _lookup(current, key), schema_default(cfg, key)
        if default is not _NO_DEFAULT and value == default:
            added.append(key)
            _assign(stored, key, copy.deepcopy(value))
        elif default is _NO_DEFAULT:
            diffs.append(f"{key}: absent in the stored config, and it has no schema default (now {value!r})")
        else:
            diffs.append(
                f"{key}: absent in the stored config (added since?), but {value!r} is not its default {default!r}"
            )
    flagged = {d.split(":", 1)[0] for d in diffs}
    diffs += [d for d in _diff(stored, current) if d.split(":", 1)[0] not in flagged]
    return added, diffs


def prepare_run_dir(cfg: Config, run_dir: Path, log=print) -> str | None:
    """Check the directory against the config. Returns the ended state to skip, or None to (re)start.

    A directory written by an older version of the project resumes when its config lacks only keys
    added since whose value here is the schema (dataclass) default; ``config.yaml`` is then rewritten
    with the full config and the added keys are logged. Any other difference is refused.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    current = config_dict(cfg)
    cfg_path, status_path = run_dir / "config.yaml", run_dir / "status.json"
    if cfg.run.force:
        for name in ("metrics.jsonl", "status.json", "summary.json", "metrics.parquet"):
            (run_dir / name).unlink(missing_ok=True)
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
    elif cfg_path.is_file():
        old = yaml.safe_load(cfg_path.read_text()) or {}
        added, diffs = reconcile_stored_config(cfg, old)
        if diffs:
            raise ConfigError(
                f"run directory {run_dir} holds a run with another config ({'; '.join(diffs[:5])}); "
                "choose another hydra.run.dir or pass run.force=true to start it afresh"
            )
        if added:
            # the same run: store the full config (the analysis groups runs by it), ended or not
            atomic_write_text(cfg_path, yaml.safe_dump(current, sort_keys=False))
            log(
                f"[config] {cfg_path} lacked {len(added)} key(s) added since it was written, taken at "
                f"their defaults: {', '.join(f'{k}={_lookup(current, k)!r}' for k in added)}"
            )
        if status_path.is_file():
            try:
                state = json.loads(status_path.read_text()).get("state")
            except json.JSONDecodeError:
                state = None
            if state == "completed" and (further := _goes_further(cfg, run_dir)):
                log(f"[extend] {run_dir}: {further}; it goes on from its last checkpoint")
            elif state in ("completed", "failed"):
                log(f"[skip] {run_dir} already {state} (run.force=true re-runs it)")
                return state
    atomic_write_text(cfg_path, yaml.safe_dump(current, sort_keys=False))
    return None


def _goes_further(cfg: Config, run_dir: Path) -> str | None:
    """Why a completed run would train on under ``cfg`` (None: it would not): it stopped before
    ``cfg``'s stop point (``train.stop_at_responses``, the budget), not at targets or an accuracy
    ``cfg`` stops at, and has a checkpoint to go on from. Extended, it is the run launched to that stop
    (resume is bit-identical: tests/core/test_resume.py, tests/core/test_extend.py)."""
    try:
        status = json.loads((run_dir / "status.json").read_text())
        responses = float(status["clocks"]["responses"])
    except (OSError, KeyError, TypeError, ValueError):
        return None
    if responses >= cfg.train.stop_point or latest_checkpoint(run_dir) is None:
        return None
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        summary = {}
    summary = summary if isinstance(summary, dict) else {}
    if cfg.train.stop_at_targets:
        from .evaluation import target_key

        reached = summary.get("targets") or {}
        keys = [target_key(t) for t in cfg.eval.targets]
        if keys and all((reached.get(k) or {}).get("reached") for k in keys):
            return None
    if cfg.train.stop_at_accuracy is not None:
        best = (summary.get("best") or {}).get("eval/accuracy")
        if best is not None and best >= cfg.train.stop_at_accuracy:
            return None
    return f"completed at {responses:g} responses, now stops at {cfg.train.stop_point}"


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("run.device: cuda requested but no CUDA device is available")
    return torch.device(name)


def build_components(cfg: Config, log=print, dist_env=None) -> Components:
    from .distributed import DistEnv, local_device, wrap
    from .engines import resolve_engine
    from .engines.hf import ENGINES
    from .gguf_models import is_gguf_source
    from .models import check_prompt_format, load_hf, precision_of
    from .tasks import build_task

    dist_env = dist_env or DistEnv()
    device = local_device(resolve_device(cfg.run.device), dist_env)
    task = build_task(cfg.task)
    if cfg.model.path == "embedded":
        from .warm_start import prepare_embedded

        # rank 0 builds (or finds) the cached warm start; the others then load it
        model_dir = None
        if dist_env.is_main:
            model_dir = str(prepare_embedded(cfg.model, task, cfg.task, Path(cfg.run.cache_dir), log=log))
        model_dir = dist_env.broadcast_object(model_dir)
    elif is_gguf_source(cfg.model.path):
        from .gguf_models import prepare_gguf

        # rank 0 converts (or finds) the cached folder; the others then load it
        model_dir = None
        if dist_env.is_main:
            model_dir = str(prepare_gguf(cfg.model.path, cfg.run.cache_dir, log=log))
        model_dir = dist_env.broadcast_object(model_dir)
    else:
        model_dir = cfg.model.path
    mw = cfg.model.master_weights
    model, tokenizer = load_hf(model_dir, cfg.model.dtype, device, cfg.model.trust_remote_code, mw)
    check_prompt_format(tokenizer, cfg.model.prompt_format, model_dir)
    log(f"[precision] {precision_of(cfg.model).describe()}")
    model.eval()
    ref_model = None
    if cfg.loss.kl_coef > 0:
        # the same precision as the policy: at the start pi_ref and pi_theta are the same computation
        ref_model, _ = load_hf(model_dir, cfg.model.dtype, device, cfg.model.trust_remote_code, mw)
        ref_model.eval().requires_grad_(False)
    engine_name = resolve_engine(cfg.rollout.engine, device.type)
    if engine_name != cfg.rollout.engine:
        log(f"[engine] rollout.engine={cfg.rollout.engine} -> {engine_name}")
    # data-parallel wrapping (DDP / FSDP2); the engine generates with the unsharded module
    parallel = wrap(model, dist_env, cfg.run.parallel, device)
    if dist_env.enabled:
        log(f"[parallel] {parallel.strategy} over {dist_env.world_size} ranks ({dist_env.backend})")
    if engine_name == "vllm":
        from .engines.vllm import VLLMEngine  # optional dependency, imported only when asked for

        engine = VLLMEngine.from_config(cfg, model_dir, tokenizer)
        log(f"[engine] vLLM ({engine.dtype}) started in {engine.startup_s:.1f} s")
    else:
        engine = ENGINES.get(engine_name)(
            parallel.full_module,
            tokenizer,
            device,
            cfg.rollout.generation_batch_responses,
            cfg.model.prompt_format,
        )
    return Components(task, model, tokenizer, ref_model, engine, device, model_dir, dist_env, parallel)


def describe(cfg: Config, d: Derived) -> str:
    rule = cfg.lr.rule
    lr_text = (
        f"eta(B) = {cfg.lr.ref_lr:g} * ({d.responses_per_rollout}/{cfg.lr.ref_responses})^{cfg.lr.power:g} = {d.lr:.4g}"
        if rule == "power"
        else f"{rule} (max {d.lr:.4g})"
    )
    ranks = (
        f"; {d.world_size} ranks: <= {d.prompts_per_rank} prompts and <= {d.minibatch_responses_per_rank} "
        "responses of each minibatch per rank"
        if d.world_size > 1
        else ""
    )
    return (
        f"B = P*G = {d.prompts_per_rollout}*{d.group_size} = {d.responses_per_rollout} responses per rollout; "
        f"K = {d.steps_per_rollout} steps of B/K = {d.minibatch_responses} responses (x{d.epochs} epochs); "
        f"{lr_text}; budget {cfg.train.max_responses} responses (~{d.rollouts_in_budget} rollouts){ranks}"
    )


def train(cfg: Config, run_dir: Path, log=print) -> str:
    """Run (or resume, or skip) one training run in ``run_dir``. Returns its final state.

    Data-parallel when launched as N processes (torchrun, SLURM tasks): every process calls this with
    the same config and directory; rank 0 alone writes the directory and logs.
    """
    from . import distributed

    validate(cfg)
    world = distributed.requested_world_size()
    if world > cfg.rollout.prompts_per_rollout:
        raise ConfigError(
            f"rollout.prompts_per_rollout={cfg.rollout.prompts_per_rollout} is smaller than the world size "
            f"{world}: every rank needs at least one prompt (whole groups stay on one rank)"
        )
    derived = derive(cfg, world)
    env = distributed.init(
        resolve_device(cfg.run.device).type, cfg.run.dist_backend, force=cfg.run.parallel != "auto"
    )
    lock = RunDirLock(run_dir)  # taken by rank 0 only, in _claim_run_dir; held until here
    try:
        if not env.is_main:
            log = _quiet
        return _train(cfg, derived, run_dir, env, log, lock)
    finally:
        lock.release()
        distributed.shutdown()


def _quiet(*_args, **_kwargs) -> None:
    pass


def _claim_run_dir(cfg: Config, run_dir: Path, lock: RunDirLock, log) -> str | None:
    """:func:`prepare_run_dir` under the run-directory lock (``run.lock_wait_s``). A run that has
    already ended, and that this config does not extend, is checked and skipped without the lock:
    re-launching a grid never waits on it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    ended = ended_state(run_dir)
    if cfg.run.force or ended is None or (ended == "completed" and _goes_further(cfg, run_dir)):
        lock.acquire(cfg.run.lock_wait_s, log=log)
    return prepare_run_dir(cfg, run_dir, log=log)


def _train(cfg: Config, derived: Derived, run_dir: Path, env, log, lock: RunDirLock) -> str:
    from .trainer import Trainer

    log(f"[run] {run_dir}")
    log(f"[derived] {describe(cfg, derived)}")
    outcome: tuple[str, str | None] = ("ok", None)
    if env.is_main:
        try:
            outcome = ("ok", _claim_run_dir(cfg, run_dir, lock, log))
        except ConfigError as err:
            outcome = ("error", str(err))
        except RunDirLocked as err:
            outcome = ("locked", str(err))
    kind, ended = env.broadcast_object(outcome)
    if kind == "error":
        raise ConfigError(ended)
    if kind == "locked":
        raise RunDirLocked(ended)
    if ended is not None:
        return ended
    if cfg.run.threads:
        torch.set_num_threads(cfg.run.threads)
    torch.manual_seed(cfg.seed)
    components = build_components(cfg, log=log, dist_env=env)
    sinks = []
    name = cfg.run.name or run_dir.name
    if cfg.logger.name == "wandb" and env.is_main:
        from .loggers import WandbSink

        tags = [f"B={derived.responses_per_rollout}", f"K={derived.steps_per_rollout}", f"seed={cfg.seed}"]
        run_id = "r" + hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:12]
        sinks.append(WandbSink(cfg.logger, config_dict(cfg), run_dir, name, cfg.run.sweep, tags, run_id))
    state, failure = "crashed", None
    trainer = None
    try:
        trainer = Trainer(cfg, derived, run_dir, components, sinks=sinks, log=log)
        trainer.log(
            f"[model] {components.model_dir} ({trainer.n_params:,} parameters) on {components.device}"
        )
        state = trainer.run()
        failure = trainer.failure
        log(f"[done] {state} at {trainer.clocks.responses} responses")
        return state
    finally:
        for sink in sinks:
            sink.close(state, failure, derived.as_dict())
        components.task.close()
        # an in-process vLLM engine left to the garbage collector tears down vLLM's process groups
        # whenever it is collected, under the next engine of the same process (in-process multiruns)
        components.engine.close()
