"""The multi-step GRPO trainer: one loop, read top to bottom.

Per rollout (one policy-update cycle of B = P * G responses), in named phases whose bodies live in
their own modules:

    collect      (collect.py)       draw prompts, allocate + generate responses, score them
                                    (dynamic sampling: drop zero-variance groups, draw more)
    advantages   (advantages.py)    the baseline's advantages (+ optimal-baseline weights)
    plan         (optimize.py)      shuffle into K minibatches of B/K (and each rank's share)
    log-probs    (logprobs.py)      pi_old (behaviour or recomputed), pi_ref, entropy
    noise        (noise.py)         per-sample gradient noise at theta_old, when due; handed to
                                    the K steps (the LR rule may read it)
    at theta_old (curvature.py)     the cells' noise, Adam's noise scale, curvature when due (its secant
                                    after the steps); parts: noise_cells, hessian, instrument_budget
    optimize     (optimize.py)      K optimizer steps (loss, LR rule, noise instruments)
    sync         (staleness.py)     the engine gets the weights for the next rollout: the new ones,
                                    or those rollout.staleness updates old
    account      (accounting.py)    clocks and the training row
    then: failure detectors, evaluation when due (evaluation.py), checkpoint when due

Randomness is drawn from generators seeded by (seed, rollout index), so a run resumed from a
checkpoint draws the same numbers as an uninterrupted run and produces the same metrics (up to the
wall-clock fields).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from . import accounting
from .advantages import AdvantagePhase
from .algorithms.baselines import NEEDS
from .algorithms.failure import FailureMonitor
from .clocks import Clocks
from .collect import Collector, derived_seed
from .config import Config, Derived
from .curvature import ThetaOldInstruments
from .distributed import DistEnv, Parallel
from .evaluation import Evaluator, full_needed, sparse_due
from .evaluation import target_key as _target_key
from .logprobs import LogprobPhase
from .noise import PerSampleNoise
from .noise_config import instruments_off_note
from .optimize import PolicyOptimizer
from .policy import completion_logprobs, trim_padding
from .progress import ProgressDisplay
from .rundir import (
    EVAL_PROBLEMS,
    MetricsLog,
    atomic_write_json,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from .samples import SampleLog
from .staleness import BehaviourPolicy

__all__ = ["Trainer", "TrainerState", "derived_seed"]

# The end-of-rollout drift pass's subsample: at most this many responses (and at most B/K).
DRIFT_RESPONSES = 16


@dataclass
class TrainerState:
    """Everything besides tensors that a checkpoint must restore."""

    next_eval_at: int = 0
    targets: dict[str, int | None] = field(default_factory=dict)
    metrics_lines: int = 0
    eval_problem_lines: int = 0  # lines of eval_problems.jsonl the checkpoint covers
    best_accuracy: float | None = None
    last_eval: dict[str, float] = field(default_factory=dict)
    # the screened evaluation schedule (evaluation.py): full minus screen accuracy at each full
    # evaluation, the previous screen, and the responses clock of the last full evaluation
    screen_offsets: list[float] = field(default_factory=list)
    screen_last: float | None = None
    last_full_at: int = 0
    eval_points: int = 0  # schedule points reached after step 0, evaluated or not (the sparse schedule)


class Trainer:
    def __init__(self, cfg: Config, derived: Derived, run_dir: Path, components, sinks=(), log=print):
        self.cfg, self.derived, self.run_dir = cfg, derived, run_dir
        self.task = components.task
        self.model, self.tokenizer = components.model, components.tokenizer
        self.ref_model = components.ref_model
        self.engine = components.engine
        self.device = components.device
        # data parallelism (distributed.py): a single process is world size 1 with the model itself
        self.dist: DistEnv = getattr(components, "dist", None) or DistEnv()
        parallel = getattr(components, "parallel", None)
        if parallel is None or parallel.strategy == "none":
            parallel = Parallel("none", self.model, self.model, self.model)
        self.parallel: Parallel = parallel
        # theta_old, unsharded: what the engine generates with and the per-rank log-prob passes use
        self.full_model = self.parallel.full_module
        self.n_params = sum(p.numel() for p in self.full_model.parameters())
        self.sinks = list(sinks)
        self.log = log
        self.clocks = Clocks()
        # the phases of a cycle; what each configuration needs is decided and checked here, at start-up
        self.baseline_needs = NEEDS[cfg.baseline.name]
        # the weights that generate rollouts (the trainer's own, or stale ones) and the engine using them
        self.behaviour = BehaviourPolicy(cfg.rollout.staleness, self.full_model, self.engine)
        if cfg.rollout.staleness:
            log(f"[staleness] {self.behaviour.describe()}")
        self.collector = Collector(
            cfg, derived, self.task, self.behaviour.rollout_engine, self.dist, self.baseline_needs
        )
        self.advantage_phase = AdvantagePhase(
            cfg, self.full_model, self.ref_model, self.device, self.n_params, self.baseline_needs
        )
        self.per_sample_noise = PerSampleNoise(
            cfg, self.full_model, self.device, self.n_params, self.advantage_phase.exact
        )
        described = (self.advantage_phase.describe(), self.per_sample_noise.describe())
        log(f"[gradients] {'; '.join(d for d in described if d)}")
        self.theta_old = ThetaOldInstruments(
            cfg, self.full_model, self.device, self.dist, derived.minibatch_responses, parallel.strategy
        )
        log(f"[instruments] {self.theta_old.describe()}")
        if note := instruments_off_note(cfg.noise, self.n_params):
            log(f"[instruments] {note}")
        self.logprobs = LogprobPhase(
            cfg, self.full_model, self.ref_model, self.engine, self.device, self.dist, self.behaviour.module
        )
        log(f"[old log-probs] {self.logprobs.describe()}")
        self.optim = PolicyOptimizer(cfg, derived, self.parallel, self.device, self.dist, self.clocks)
        self.evaluator = Evaluator(cfg, self.task, self.engine, self.dist, self.logprobs)
        self.flop_meter = accounting.FlopMeter.for_trainer(self.parallel, self.ref_model, self.engine)
        self.flop_meter.attach(self.behaviour.module)  # the stale copy that generates (staleness > 0)
        self.monitor = FailureMonitor(cfg.failure)
        self.state = TrainerState(targets={_target_key(t): None for t in cfg.eval.targets})
        # rank 0 alone writes the run directory; the other ranks count rows so control flow agrees
        self.metrics = MetricsLog(run_dir / "metrics.jsonl") if self.dist.is_main else _CountingLog()
        # the per-problem record of every evaluation (evaluation.py), truncated with the metrics on resume
        main = self.dist.is_main
        self.eval_problems = MetricsLog(run_dir / EVAL_PROBLEMS) if main else _CountingLog()
        self.samples = SampleLog(cfg.logger.samples, run_dir, enabled=self.dist.is_main, log=log)
        self.stop_signal: int | None = None
        self.failure: dict[str, Any] | None = None
        self.resumed_from: str | None = None
        self._screen_now: float | None = None  # the screen at the current evaluation point
        self._last_rollout_s = 0.0  # the last rollout's seconds (a budgeted instrument's first cost)
        self.progress = ProgressDisplay(
            cfg.train.max_responses, cfg.run.progress and self.dist.is_main, log=log
        )

    # ------------------------------------------------------------------ public

    def run(self) -> str:
        """Train until the budget, a target stop, a failure, or a stop signal. Returns the final state."""
        self._resume()
        self._install_signal_handlers()
        self._write_status("running")
        if self.clocks.rollout == 0 and self.metrics.lines == 0:
            # the step-0 screen calibrates the screen against the step-0 evaluation (logged in its row)
            screen = self._screen() if self.evaluator.screening else {}
            self._evaluate_and_log(
                extra={**{f"derived/{k}": v for k, v in self.derived.as_dict().items()}, **screen}
            )
        state = "completed"
        while self.failure is None:
            if self.clocks.responses >= self.cfg.train.stop_point:
                break
            if self.cfg.train.stop_at_targets and self._all_targets_reached():
                break
            if self._accuracy_reached():
                break
            if self._stop_requested():
                state = "preempted"
                break
            if self.cfg.run.stop_after_rollouts and self.clocks.rollout >= self.cfg.run.stop_after_rollouts:
                state = "preempted"
                break
            self._rollout()
            if self.clocks.rollout % self.cfg.run.checkpoint_every_rollouts == 0:
                self._checkpoint()
        if self.failure is not None:
            state = "failed"
        self._checkpoint()
        self._write_status(state)
        self._write_summary()
        self.metrics.close()
        self.eval_problems.close()
        self.progress.close()
        self.dist.barrier()
        if state == "preempted" and self.stop_signal is not None and callable(self._chained_handler):
            self._chained_handler(self.stop_signal, None)  # submitit: requeue this job and exit
        return state

    # ------------------------------------------------------------------ one rollout

    def _rollout(self) -> None:
        r = self.clocks.rollout
        started = time.perf_counter()
        self.flop_meter.start()  # the `flops` clock: the work of the passes that run until `account`
        batch = self.collector.collect(r)  # allocate + generate + score
        advantages, adv_row = self.advantage_phase.compute(batch)  # (+ optimal-baseline weights)
        rng = torch.Generator(device="cpu").manual_seed(derived_seed(self.cfg.seed, "rollout", r))
        plan = self.optim.plan(len(batch.gen), advantages, rng)  # K minibatches (drawn before log-probs)
        t = time.perf_counter()
        noise_due = self.per_sample_noise.due(r)
        logps = self.logprobs.compute(batch.gen, plan, all_rows=noise_due)  # pi_old, pi_ref, entropy
        batch.perf["old_logprob_s"] = time.perf_counter() - t
        per_sample = self._per_sample_noise(batch, advantages, logps, noise_due)  # at theta_old
        self.clocks.tick()
        self.theta_old.wall = self.clocks.wall_seconds  # what a budgeted cadence compares its spending with
        self.theta_old.cycle = self._last_rollout_s
        with self.flop_meter.paused():  # noise/ and curv/ at theta_old (instruments: not on the clock)
            at_old = self.theta_old.before_steps(batch.gen, advantages, r, batch.perf)
        estimates = {k.removeprefix("noise/"): v for k, v in at_old.items() if k.startswith("noise/")}
        with self.flop_meter.paused():  # noise/adam_*, noise/all_* over all prompts (noise.adam_noise)
            at_old.update(
                self.theta_old.adam_noise(batch.gen, advantages, r, self.optim.optimizer, batch.perf)
            )
        t = time.perf_counter()
        train = self.optim.run(  # K steps
            batch.gen, advantages, logps.old, logps.ref, plan, logps.is_weights, {**estimates, **per_sample}
        )
        batch.perf["train_s"] = time.perf_counter() - t
        t = time.perf_counter()
        self._sync_weights()
        batch.perf["sync_s"] = time.perf_counter() - t
        t = time.perf_counter()
        train.update(self._final_drift(batch.gen, logps.old, plan))  # KL(pi_old || pi_theta) after step K
        batch.perf["drift_s"] = time.perf_counter() - t
        with self.flop_meter.paused():
            at_old.update(self.theta_old.after_steps(batch.perf))  # curvature along the update, when due
        flops = self.flop_meter.stop(self.dist)
        accounting.charge(self.clocks, batch, self.n_params, self.cfg, self.ref_model is not None, flops)
        # an evaluation point: the screen (when the schedule is screened) runs now and is logged in this
        # row as eval/screen_*; the full evaluation, when the screen asks for it, after the detectors
        eval_due = self.failure is None and self.clocks.responses >= self.state.next_eval_at
        screen = self._screen() if eval_due and self.evaluator.screening else {}
        row = {
            **accounting.training_row(batch, advantages, logps.entropy_mean, int(logps.needed.numel())),
            **logps.stats,  # engine/trainer mismatch and truncated-IS weights, when pi_old is recomputed
            **train,
            **{f"noise/{k}": v for k, v in per_sample.items()},
            **at_old,
            **adv_row,
            **{f"opt/{k}": v for k, v in self.optim.lr_rule.stats().items()},
            **{f"perf/{k}": round(v, 4) for k, v in batch.perf.items()},
            "perf/responses_per_s": len(batch.gen) / max(sum(batch.perf.values()), 1e-9),
            **screen,
        }
        self._log_row(row)
        self.samples.write(batch, advantages, self.clocks, self.sinks)  # samples.jsonl, when due
        self.progress.update(
            self.clocks.responses,
            reward=row["train/reward_mean"],
            lr=row["opt/lr"],
            rate=self.clocks.responses / max(self.clocks.wall_seconds, 1e-9),
        )
        self._detect(row)
        self._last_rollout_s = time.perf_counter() - started  # (before the evaluation)
        if self.failure is None and eval_due and self.cfg.eval.sparse_every > 1:
            self.state.eval_points += 1
            last = self.clocks.responses >= self.cfg.train.stop_point
            if sparse_due(self.cfg.eval, self.state, self.state.eval_points, last):
                self._evaluate_and_log()
            else:
                self.state.next_eval_at = self.evaluator.next_at(self.clocks.responses)
        elif self.failure is None and eval_due:
            if not screen or full_needed(
                self.cfg.eval, self.state, screen["eval/screen_accuracy"], self.clocks.responses
            ):
                self._evaluate_and_log()
            else:
                self.state.next_eval_at = self.evaluator.next_at(self.clocks.responses)
                self._screen_now = None
            if screen:
                self.state.screen_last = screen["eval/screen_accuracy"]

    def _screen(self) -> dict[str, Any]:
        """The evaluation screen at this point (evaluation.py), its responses on ``eval_responses``."""
        with self.behaviour.current_policy():
            screen = self.evaluator.screen()
        self.clocks.eval_responses += screen["eval/screen_responses"]
        self._screen_now = screen["eval/screen_accuracy"]
        if self.clocks.rollout == 0:
            self.state.screen_last = self._screen_now
        return screen

    def _per_sample_noise(self, batch, advantages, logps, due: bool) -> dict[str, float]:
        """Exact per-sample gradient noise at theta_old (``per_sample_*``, logged under ``noise/``),
        when due; the K steps get it too (an LR rule with ``lr.source=per_sample`` reads it)."""
        if not due:
            return {}
        t = time.perf_counter()
        estimates = self.per_sample_noise.estimate(batch.gen, advantages, logps.old, logps.ref)
        batch.perf["per_sample_noise_s"] = time.perf_counter() - t
        return estimates

    def _final_drift(self, gen, old_logp, plan) -> dict[str, float]:
        """The drift after the rollout's last step, measured with the synced weights on a simple random
        sample of the rollout's loss rows: the first n = min(B/K, ``DRIFT_RESPONSES``) of them in the
        plan's (uniformly random) order, one no-grad forward. Each rank measures the sampled rows whose
        pi_old log-probs it holds (its blocks of the steps' rows), so the ranks together measure the
        one-process sample; the sums scaled by N / n estimate the rollout's without bias (see
        ``PolicyOptimizer.final_drift``)."""
        if not plan:
            return {}
        steps = [a for _, a in plan[: self.derived.steps_per_rollout]]  # the first epoch: each row once
        order = torch.cat(steps)
        n = min(plan[0][0].numel(), DRIFT_RESPONSES, order.numel())
        sample = order[:n]
        held = torch.cat([a[self.dist.block(a.numel())] for a in steps])
        rows = sample[torch.isin(sample, held)] if self.dist.enabled else sample
        comp = gen.completion_mask[:, gen.prompt_width :]
        counts = {"tokens": float(comp[order].sum()), "rows": float(comp[order].any(1).sum())}
        lc = comp.shape[1]
        logp = torch.zeros((rows.numel(), lc))
        if rows.numel():
            was_training = self.full_model.training
            self.full_model.eval()
            with torch.no_grad():  # one plain forward: cheaper than the shared-prompt path at this size
                ids, mask, start = trim_padding(
                    gen.input_ids[rows], gen.attention_mask[rows], gen.prompt_width
                )
                lp, _ = completion_logprobs(
                    self.full_model,
                    ids.to(self.device),
                    mask.to(self.device),
                    start,
                    self.cfg.rollout.temperature,
                )
            self.full_model.train(was_training)
            logp[:, : lp.shape[1]] = lp.float().cpu()
        scale = order.numel() / n if n else 0.0
        return self.optim.final_drift(logp, old_logp[rows], comp[rows], scale=scale, population=counts)

    def _sync_weights(self) -> None:
        """Weight sync: free for the HF engine (shared model), an in-place push for vLLM; under FSDP the
        full weights are gathered from the shards into every rank's engine copy first. Under
        ``rollout.staleness`` the new weights are queued and the engine gets those s updates old."""
        self.parallel.refresh_full()
        self.behaviour.sync()

    # ------------------------------------------------------------------ evaluation

    @torch.no_grad()
    def _evaluate_and_log(self, extra: dict[str, Any] | None = None) -> None:
        with self.behaviour.current_policy():  # validation measures the current weights
            row = {**self.evaluator.evaluate(self.clocks.responses), **(extra or {})}
        self.clocks.eval_responses += self.evaluator.responses_of(row)
        acc = row["eval/accuracy"]
        if self._screen_now is not None:  # this point's screen: calibrates the screen against the full
            self.state.screen_offsets.append(acc - self._screen_now)
            self._screen_now = None
        self.state.last_full_at = self.clocks.responses
        for a in self.cfg.eval.targets:
            key = _target_key(a)
            if self.state.targets.get(key) is None and acc >= a:
                self.state.targets[key] = self.clocks.responses
        self.state.last_eval = {"eval/accuracy": acc, "eval/reward": row["eval/reward"]}
        self.state.best_accuracy = max(acc, self.state.best_accuracy or -1.0)
        self.state.next_eval_at = self.evaluator.next_at(self.clocks.responses)
        self._log_row(row)
        clocks = {"rollout": self.clocks.rollout, "responses": self.clocks.responses}
        self.eval_problems.write({**clocks, **self.evaluator.last_record})
        self._detect(row)
        self.progress.update(self.clocks.responses, accuracy=acc)
        self.progress.line(
            f"[eval] rollout {self.clocks.rollout} responses {self.clocks.responses} "
            f"accuracy {acc:.3f} lr {self.optim.current_lr():.3g} "
            f"({self.clocks.responses / max(self.clocks.wall_seconds, 1e-9):.0f} responses/s)"
        )

    # ------------------------------------------------------------------ helpers

    def _stop_requested(self) -> bool:
        """A stop signal on any rank stops every rank at the same rollout boundary."""
        flag = 1.0 if self.stop_signal is not None else 0.0
        if self.dist.enabled:
            flag = self.dist.all_reduce_sum([flag])[0]
            if flag > 0 and self.stop_signal is None:  # another rank got it: act as if this one had
                self.stop_signal = self._handled_signals[0]
        return flag > 0

    def _log_row(self, row: dict[str, Any]) -> None:
        full = {**self.clocks.as_dict(), **row}
        self.metrics.write(full)
        if not self.dist.is_main:
            return
        for sink in self.sinks:
            sink.log(full)

    def _detect(self, row: dict[str, Any]) -> None:
        if self.failure is not None:
            return
        fired = self.monitor.observe({**self.clocks.as_dict(), **row})
        if fired is not None:
            name, event = fired
            self.failure = {
                "detector": name,
                "reason": event.reason,
                "responses": self.clocks.responses,  # when the detector decided
                "rollout": self.clocks.rollout,
                "onset_responses": event.onset_responses,  # the first row of the sustained condition
                "onset_rollout": event.onset_rollout,
                # the condition began after this responses clock (None: unknown)
                "onset_lower_responses": event.onset_lower_responses,
            }
            self.progress.line(
                f"[failure] {name}: {event.reason} at {self.clocks.responses} responses "
                f"(onset {event.onset_responses})"
            )

    def _accuracy_reached(self) -> bool:
        """``train.stop_at_accuracy`` is set and an evaluation has reached it."""
        stop, best = self.cfg.train.stop_at_accuracy, self.state.best_accuracy
        return stop is not None and best is not None and best >= stop

    def _all_targets_reached(self) -> bool:
        return bool(self.state.targets) and all(v is not None for v in self.state.targets.values())

    # ------------------------------------------------------------------ persistence

    def _trainer_state(self) -> dict[str, Any]:
        return {
            "clocks": self.clocks.as_dict(),
            "state": self.state.__dict__
            | {"metrics_lines": self.metrics.lines, "eval_problem_lines": self.eval_problems.lines},
            "failure": self.failure,
            "detectors": self.monitor.state_dict(),
            "collector": self.collector.state_dict(),
            "behaviour": self.behaviour.state_dict(),
            "instruments": self.theta_old.state_dict(),  # a budgeted cadence's spending so far
            **self.optim.state_dict(),
        }

    def _checkpoint(self) -> None:
        t = time.perf_counter()
        save_checkpoint(
            self.run_dir,
            f"rollout-{self.clocks.rollout:07d}",
            self.parallel.params_module,
            self.optim.optimizer,
            self._trainer_state(),
            dist_env=self.dist,
            tensor_files={**self.behaviour.tensor_files(), **self.theta_old.tensor_files()},
        )
        self._write_status("running" if self.failure is None else "failed")
        self.last_checkpoint_s = time.perf_counter() - t

    def _resume(self) -> None:
        path = latest_checkpoint(self.run_dir)
        if path is None:
            if self.metrics.lines or self.eval_problems.lines:
                self.metrics.truncate(0)  # rows from a run that died before its first checkpoint
                self.eval_problems.truncate(0)
            return
        saved = load_checkpoint(path, self.model, self.optim.optimizer, self.full_model, self.dist)
        self.parallel.refresh_full()
        self.engine.sync_weights(self.full_model)
        self.clocks.restore(saved["clocks"])
        self.state = TrainerState(**saved["state"])
        # entries and fields an older checkpoint lacks take their defaults (TrainerState, Clocks too)
        self.failure = saved.get("failure")
        self.monitor.load_state_dict(saved.get("detectors", {}))
        self.optim.load_state_dict(saved)
        self.collector.load_state_dict(saved.get("collector", {}))
        self.behaviour.load(path, saved.get("behaviour"))
        self.theta_old.load(path)  # the curvature power iteration's warm start
        self.theta_old.load_state_dict(saved.get("instruments", {}))
        self.metrics.truncate(self.state.metrics_lines)
        self.eval_problems.truncate(self.state.eval_problem_lines)
        self.resumed_from = path.name
        self.log(
            f"[resume] from {path.name}: rollout {self.clocks.rollout}, responses {self.clocks.responses}"
        )

    def _install_signal_handlers(self) -> None:
        """Stop signals end the run at the next rollout boundary with a checkpoint.

        Standalone: SIGTERM and SIGUSR1 -> checkpoint, ``state: preempted``, return (re-run the
        command to resume). Under submitit (SLURM): its preemption/time-out signal (SIGUSR2 unless
        ``SUBMITIT_PREEMPT_SIGNAL`` says otherwise) -> checkpoint, then submitit's own handler, which
        requeues the job and exits; the requeued job resumes from that checkpoint. SIGTERM stays
        submitit's (ignored): a hard requeue (``scontrol requeue``) kills the job, which then resumes
        from its last periodic checkpoint.
        """

        def handler(signum, _frame):
            self.stop_signal = signum
            self.progress.line(f"[signal] {signal.Signals(signum).name}: checkpointing after this rollout")

        self._chained_handler = None
        if os.environ.get("SUBMITIT_EXECUTOR"):
            name = os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2").upper().removeprefix("SIG")
            signals = [getattr(signal, f"SIG{name}")]
            self._chained_handler = signal.getsignal(signals[0])
        else:
            signals = [signal.SIGTERM, signal.SIGUSR1]
        self._handled_signals = signals
        for sig in signals:
            try:
                signal.signal(sig, handler)
            except ValueError:  # not the main thread
                pass

    def _write_status(self, state: str) -> None:
        from .provenance import provenance

        if not self.dist.is_main:
            return
        atomic_write_json(
            self.run_dir / "status.json",
            {"state": state, "failure": self.failure, "clocks": self.clocks.as_dict(), **provenance()},
        )

    def _write_summary(self) -> None:
        if not self.dist.is_main:
            return
        final = {"responses": self.clocks.responses, **self.state.last_eval, "clocks": self.clocks.as_dict()}
        atomic_write_json(
            self.run_dir / "summary.json",
            {
                "derived": self.derived.as_dict(),
                "targets": {
                    k: {"responses": v, "reached": v is not None} for k, v in self.state.targets.items()
                },
                "failure": {
                    "responses": self.failure["responses"] if self.failure else None,
                    "onset_responses": self.failure["onset_responses"] if self.failure else None,
                    # absent from the failure record of an older run: unknown
                    "onset_lower_responses": self.failure.get("onset_lower_responses")
                    if self.failure
                    else None,
                    "failed": self.failure is not None,
                    "detector": self.failure["detector"] if self.failure else None,
                },
                "final": final,
                "best": {"eval/accuracy": self.state.best_accuracy},
                "model": {"parameters": self.n_params},
            },
        )


class _CountingLog:
    """What ranks other than 0 hold instead of the metrics file: a row count (control flow that
    depends on it must agree on every rank), no writes."""

    def __init__(self) -> None:
        self.lines = 0

    def write(self, row: dict[str, Any]) -> None:
        self.lines += 1

    def truncate(self, n_lines: int) -> None:
        self.lines = n_lines

    def close(self) -> None:
        pass
