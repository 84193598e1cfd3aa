"""Simulating a synthetic condition (the model in :mod:`analysis.synthetic`): every run's metrics rows on
the trainer's rollout and evaluation schedule, its ``status.json``, ``summary.json`` and truth
(:func:`simulate`), and the runs as the loader's records in memory (:func:`records`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from analysis.data.load import RunRecord
from analysis.synthetic.draws import check_dependence, dependent_normals, noise_row
from analysis.synthetic.spec import SyntheticRun, SyntheticSpec, crossing_scale, make_config


def simulate(spec: SyntheticSpec) -> list[SyntheticRun]:
    """All runs of one condition: every size times ``spec.seeds`` seeds."""
    check_dependence(spec)
    rng = np.random.default_rng(spec.seed)
    kappas = [crossing_scale(a, spec) for a in spec.targets]
    runs = []
    seed_effect = (
        [
            float(np.random.default_rng([spec.seed_stream, 7919, seed]).standard_normal())
            for seed in range(spec.seeds)
        ]
        if spec.seed_corr
        else [0.0] * spec.seeds
    )
    for size in spec.sizes:
        for seed in range(spec.seeds):
            if spec.dependence == "normal":  # the original draws, in the original order
                eps = rng.standard_normal()
                eps_f_noise = rng.standard_normal()
            else:
                eps, eps_f_noise = (float(v[0]) for v in dependent_normals(spec, 1, rng))
            if spec.seed_corr or spec.seed_size_corr:  # a seed is a block shared by sizes and conditions
                pair = float(np.random.default_rng([spec.seed_stream, 7927, seed, size]).standard_normal())
                own = 1.0 - spec.seed_corr - spec.seed_size_corr
                eps = (
                    math.sqrt(spec.seed_corr) * seed_effect[seed]
                    + math.sqrt(spec.seed_size_corr) * pair
                    + math.sqrt(own) * eps
                )
            if spec.dependence == "normal":
                eps_f = spec.rho * eps + math.sqrt(1.0 - spec.rho**2) * eps_f_noise
            else:
                eps_f = eps_f_noise
            shape = (1 + size / spec.b_crit) if spec.b_crit is not None else size**spec.alpha
            rt0 = spec.prefactor * shape * math.exp(spec.sigma * eps)
            rf = math.inf
            if spec.gamma is not None:
                rf = spec.failure_prefactor * size**spec.gamma * math.exp(spec.failure_sigma * eps_f)
            noise_seed = int(rng.integers(2**31))
            runs.append(_one_run(spec, size, seed, rt0 / kappas[0], rf, kappas, noise_seed))
    return runs


def records(*specs: SyntheticSpec) -> list[RunRecord]:
    """The simulated runs of ``specs`` as the loader's records, in memory: what reading their run
    directories would give, without writing them."""
    return [
        RunRecord(
            run=r.config["run"]["name"],
            path="",
            source="dir",
            config=r.config,
            rows=r.rows,
            status=r.status,
            summary=r.summary,
        )
        for spec in specs
        for r in simulate(spec)
    ]


def _one_run(spec, size, seed, scale, rf, kappas, noise_seed) -> SyntheticRun:
    config = make_config(spec, size, seed)
    rng = np.random.default_rng(noise_seed)
    lr = config["lr"]["ref_lr"] * (size / config["lr"]["ref_responses"]) ** config["lr"]["power"]
    n_rollouts = math.ceil(spec.budget / size)
    onset_at = math.ceil(rf / size) if math.isfinite(rf) else None
    fail_at = onset_at + spec.detection_delay if onset_at is not None else None
    failed = fail_at is not None and fail_at <= n_rollouts
    last = fail_at if failed else n_rollouts
    schedule = _eval_schedule(spec)
    tokens_per_response = 24.0 * math.exp(0.1 * rng.standard_normal())

    def clocks(k: int, n_evals: int) -> dict[str, Any]:
        tokens = round(k * size * tokens_per_response)
        return {
            "rollout": k,
            "responses": k * size,
            "tokens": tokens,
            "optimizer_steps": k * spec.steps_per_rollout,
            "wall_seconds": round(k * (0.5 + 0.01 * size), 3),
            "flops": float(8.0e6 * tokens),
            "eval_responses": n_evals * 128,
        }

    def accuracy(r: float) -> float:
        if spec.curve == "sigmoid":  # ScaleRL's R0 + (A - R0) / (1 + (C_mid / C)^b), C_mid = scale
            shape = 1 / (1 + (scale / r) ** spec.curve_b) if r > 0 else 0.0
        else:
            shape = 1 - math.exp(-r / scale)
        value = spec.acc_start + (spec.acc_max - spec.acc_start) * shape
        if spec.acc_noise:
            value += spec.acc_noise * rng.standard_normal()
        return float(min(max(value, 0.0), 1.0))

    rows: list[dict[str, Any]] = []
    n_evals = 0

    def evaluate(k: int) -> None:
        nonlocal n_evals
        n_evals += 1
        acc = accuracy(k * size)
        row = clocks(k, n_evals)
        row.update(
            {
                "eval/accuracy": acc,
                "eval/reward": acc,
                "eval/length": 12.0,
                "eval/entropy": 0.5,
                "eval/responses": 128,
            }
        )
        rows.append(row)

    evaluate(0)
    for k in range(1, last + 1):
        fails_now = failed and k == last
        after_onset = onset_at is not None and k >= onset_at
        due = _crosses(schedule, (k - 1) * size, k * size) or k == n_rollouts
        if spec.train_rows == "all" or due or fails_now:
            reward = accuracy(k * size)
            row = clocks(k, n_evals)
            row.update(
                {
                    "train/reward_mean": 0.0 if after_onset else reward,
                    "loss/policy": -0.01,
                    "opt/lr": lr,
                    "rollout/response_length": tokens_per_response,
                    "perf/rollout_seconds": 0.5 + 0.01 * size,
                }
            )
            if spec.b_noise is not None:
                row.update(noise_row(spec, size, k, rng, seed))
            rows.append(row)
        if fails_now:
            break
        if due:
            evaluate(k)

    return _finish_run(spec, config, rows, size, seed, scale, rf, kappas, onset_at, last, failed, lr)


def _finish_run(
    spec, config, rows, size, seed, scale, rf, kappas, onset_at, last, failed, lr
) -> SyntheticRun:
    """A simulated run's status, summary and truth from its rows (``truth``: see the module docstring)."""
    evals = [r for r in rows if "eval/accuracy" in r]
    final = rows[-1]["responses"]
    targets, truth = {}, {"B": size, "seed": seed, "failure_true": rf}
    for a, kappa in zip(spec.targets, kappas):
        idx = next((i for i, r in enumerate(evals) if r["eval/accuracy"] >= a), None)
        hit = evals[idx]["responses"] if idx is not None else None
        targets[f"{a:g}"] = {"responses": hit, "reached": hit is not None}
        truth[f"target:{a:g}_true"] = scale * kappa
        # a run that failed before reaching a is censored at its failure onset (the competing event)
        censor_at = onset_at * size if failed else evals[-1]["responses"]
        truth[f"target:{a:g}"] = (hit if hit is not None else censor_at, hit is None)
        # the continuous latent crossing lies in (evaluation below, evaluation at or above]: the
        # generator's truth is that latent time (analysis.data.clock_tables' discrete brackets read the rollout-
        # quantised time instead, ``--continuous-brackets`` this one)
        truth[f"target:{a:g}:lower"] = evals[idx - 1]["responses"] if idx else (0 if idx == 0 else math.nan)
    onset = onset_at * size if failed else None
    truth["failure"] = (onset if failed else final, not failed)
    truth["failure:detection"] = final if failed else None
    failure = None
    if failed:
        failure = {
            "detector": "reward_collapse",
            "reason": "train/reward_mean fell",
            "responses": final,
            "rollout": last,
            "onset_responses": onset,
            "onset_rollout": onset_at,
        }
    status = {
        "state": "failed" if failed else "completed",
        "failure": failure,
        "clocks": {k: v for k, v in rows[-1].items() if "/" not in k},
        "git": None,
        "versions": {"analysis.synthetic": "1"},
        "host": "synthetic",
    }
    summary = {
        "derived": {
            "responses_per_rollout": size,
            "prompts_per_rollout": config["rollout"]["prompts_per_rollout"],
            "group_size": config["rollout"]["group_size"],
            "steps_per_rollout": spec.steps_per_rollout,
            "lr": lr,
            "minibatch_responses": size // spec.steps_per_rollout,
        },
        "targets": targets,
        "failure": {"responses": final if failed else None, "failed": failed, "onset_responses": onset},
        "final": {"responses": final, "eval/accuracy": evals[-1]["eval/accuracy"]},
    }
    if spec.parameters is not None:
        summary["model"] = {"parameters": int(spec.parameters)}
    return SyntheticRun(config, rows, status, summary, truth)


def _eval_schedule(spec: SyntheticSpec) -> np.ndarray:
    """Scheduled evaluation points in responses (the trainer evaluates at the first rollout past each)."""
    if spec.eval_growth > 1:
        n = int(math.log(max(spec.budget / spec.eval_every, 1.0)) / math.log(spec.eval_growth)) + 2
        points = spec.eval_every * spec.eval_growth ** np.arange(n)
    else:
        points = spec.eval_every * np.arange(1, spec.budget // spec.eval_every + 2)
    return np.asarray(points, float)


def _crosses(schedule: np.ndarray, before: float, now: float) -> bool:
    """A scheduled point lies in ``(before, now]``."""
    return bool(
        np.searchsorted(schedule, now, side="right") > np.searchsorted(schedule, before, side="right")
    )
