"""Synthetic runs with known exponents, to test the analysis and to validate a setup.

Writes complete run directories in the trainer's format (docs/design.md §6: ``config.yaml``, ``.hydra/``,
``metrics.jsonl``, ``status.json``, ``summary.json``, ``checkpoints/``), and optionally the same runs as
wandb offline runs (logged the way the trainer logs them). Run ``rlvr-analyze`` on the folder and the
exponents in ``exponents.csv`` should cover the values in ``synthetic_truth.json``::

    python -m analysis.synthetic runs/synth --alpha 0.3 --gamma 0.0 --sizes 32 64 128 256 --seeds 3
    rlvr-analyze runs/synth --out runs/synth-analysis

Model of one run with rollout size B (seed i):

* time scale ``s = c * B**alpha * exp(sigma * eps) / kappa(a0)`` (with ``b_crit`` set, McCandlish's
  ``c * (1 + B / b_crit)`` in place of ``c * B**alpha``: ``c`` is then R_min, :mod:`analysis.fits.bcrit`), validation accuracy
  ``acc(r) = acc_start + (acc_max - acc_start) * (1 - exp(-r / s))`` at ``r`` responses (or, with
  ``curve="sigmoid"``, ScaleRL's ``acc_start + (acc_max - acc_start) / (1 + (s / r)**curve_b)``), so
  the continuous crossing of target ``a`` is ``c * (kappa(a) / kappa(a0)) * B**alpha * exp(sigma * eps)``
  with ``kappa(a) = -log(1 - f)`` (sigmoid: ``(f / (1 - f))**(1 / curve_b)``),
  ``f = (a - acc_start) / (acc_max - acc_start)`` and ``a0`` the first target: every target has
  exponent ``alpha``, the first one prefactor ``c``;
* failure onset at ``d * B**gamma * exp(failure_sigma * eps')`` responses (``gamma=None``: never
  fails), with ``eps' = rho * eps + sqrt(1 - rho**2) * eps''``: ``rho`` is the correlation between the
  log time to target and the log time to failure (competing risks that are not independent);
  ``dependence`` replaces that bivariate normal (:func:`dependent_normals`): ``"clayton"`` or
  ``"gumbel"`` copulas of ``(eps, eps')`` with standard normal margins (``dependence_param`` = Kendall's
  tau; a negative tau rotates the copula by 90 degrees: ``eps' -> -eps'``), or ``"frailty"``, a shared
  gamma frailty on the time scale (both log times gain ``log Z - E log Z``, ``Z ~ Gamma`` with mean 1 and
  variance ``dependence_param``; the margins are then no longer log-normal);
* rollouts of B responses until ``train.max_responses`` (budget-based censoring) or the failure; the
  detector fires ``detection_delay`` rollouts after the onset rollout (``status.json`` carries both,
  as the trainer does); an evaluation at step 0, at the first rollout boundary past every scheduled
  point (every ``eval_every`` responses, or geometric ``eval_every * eval_growth**k`` when
  ``eval_growth > 1``), and at the end; a failing run stops at the rollout where the detector fires,
  before its evaluation. Measured clocks are therefore quantised to the evaluation grid, like real ones;
* training rows carry the gradient-noise instruments (``noise/grad_norm_sq``, ``noise/trace_cov``,
  ``noise/snr``, ``noise/b_noise``) as the trainer's K-minibatch estimator gives them: per rollout,
  unbiased but noisy, for a true noise scale ``b_noise`` (tr Sigma / |G|^2, in responses); with
  ``adam_b_noise`` also ``noise/adam_*`` (tr(P Sigma), G'PG and their ratio, unbiased and noisy).

``truth`` holds, per run, the continuous times (``target:<a>_true``, ``failure_true``) and the measured
ones as the analysis should find them (``target:<a>`` = (value, censored), ``target:<a>:lower`` = the
clock of the last evaluation below the target before the crossing, ``failure`` = (onset, censored)).
"""

from __future__ import annotations

import argparse
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from analysis.data.load import RunRecord


@dataclass(frozen=True)
class SyntheticSpec:
    sizes: tuple[int, ...] = (32, 64, 128, 256)  # rollout sizes B
    seeds: int = 3  # runs per size
    alpha: float = 0.3  # exponent of responses-to-target (all targets)
    b_crit: float | None = None  # set: McCandlish's R_T = c * (1 + B / b_crit) in place of c * B**alpha
    prefactor: float = 2000.0  # c: median responses to the first target is c * B**alpha
    sigma: float = 0.25  # log-normal scatter of responses-to-target
    gamma: float | None = 0.0  # exponent of responses-to-failure; None: no run fails
    failure_prefactor: float = 20000.0  # d: median responses to failure is d * B**gamma
    failure_sigma: float = 0.4  # log-normal scatter of responses-to-failure
    rho: float = 0.0  # correlation of log time to target and log time to failure (dependence="normal")
    dependence: str = "normal"  # joint law of the two clocks' noises: normal, clayton, gumbel, frailty
    dependence_param: float = 0.0  # clayton/gumbel: Kendall's tau (< 0: rotated); frailty: Var Z
    seed_corr: float = 0.0  # share of the target-time scatter that belongs to the seed (all sizes, all
    # conditions with the same seed_stream): the correlation of one seed's log times between sizes
    seed_size_corr: float = 0.0  # share that belongs to the (seed, B) pair, shared by the conditions with
    # the same seed_stream only at that B (same data order and sampling keys): the correlation of one
    # seed's log times between conditions at one size is seed_corr + seed_size_corr
    seed_stream: int = 0  # conditions with the same stream share their seed effects
    detection_delay: int = 0  # rollouts from failure onset to the detector's decision
    b_noise: float | None = 200.0  # true gradient-noise scale tr Sigma / |G|^2 (None: no noise/ rows)
    adam_b_noise: float | None = None  # true tr(P Sigma) / G'PG: noise/adam_* rows (None: none)
    targets: tuple[float, ...] = (0.3, 0.5)  # eval.targets
    budget: int = 30000  # train.max_responses: runs still going there are censored
    eval_every: int = 256  # eval.every_responses
    eval_growth: float = 1.0  # > 1: geometric evaluation schedule eval_every * eval_growth**k
    group_size: int = 8  # G (P = B / G)
    steps_per_rollout: int = 8  # K
    acc_start: float = 0.05  # accuracy at step 0
    acc_max: float = 0.8  # accuracy plateau
    acc_noise: float = 0.0  # sd of additive noise on each evaluation (0: smooth curves)
    curve: str = "exponential"  # accuracy curve: "exponential" saturation or ScaleRL's "sigmoid"
    curve_b: float = 1.5  # the sigmoid's exponent b (curve="sigmoid")
    seed: int = 0  # random seed of the whole sweep
    overrides: tuple[tuple[str, Any], ...] = ()  # dotted config keys setting the condition
    sweep: str = "synthetic"  # run.sweep (the wandb group)
    train_rows: str = "eval"  # "eval": one train row per evaluation (small files); "all": every rollout


@dataclass
class SyntheticRun:
    config: dict[str, Any]
    rows: list[dict[str, Any]]
    status: dict[str, Any]
    summary: dict[str, Any]
    truth: dict[str, Any] = field(default_factory=dict)  # continuous and expected measured clocks


def _kappa(a: float, spec: SyntheticSpec) -> float:
    """Crossing time of target ``a`` in units of the run's time scale."""
    frac = (a - spec.acc_start) / (spec.acc_max - spec.acc_start)
    if not 0 < frac < 1:
        raise ValueError(f"target {a} outside (acc_start, acc_max)")
    if spec.curve == "sigmoid":
        return (frac / (1 - frac)) ** (1 / spec.curve_b)
    return -math.log1p(-frac)


def _set(config: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    for part in parts[:-1]:
        config = config.setdefault(part, {})
    config[parts[-1]] = value


def make_config(spec: SyntheticSpec, size: int, seed: int) -> dict[str, Any]:
    """A config with the trainer's tree (docs/design.md §2, §6), the condition set by ``spec.overrides``."""
    group = min(spec.group_size, size)
    if size % group:
        raise ValueError(f"B={size} is not a multiple of group_size={group}")
    suffix = "".join(f"_{k.split('.')[-1]}{v}" for k, v in spec.overrides)
    config: dict[str, Any] = {
        "seed": seed,
        "model": {"name": "tiny-llama", "hidden_size": 128, "num_layers": 4},
        "task": {"name": "chain_sum", "train_size": 10000, "eval_size": 128},
        "rollout": {
            "prompts_per_rollout": size // group,
            "group_size": group,
            "engine": "hf",
            "temperature": 1.0,
            "max_new_tokens": 16,
        },
        "optim": {"name": "adamw", "steps_per_rollout": spec.steps_per_rollout, "epochs": 1},
        "lr": {"rule": "power", "ref_lr": 1.0e-6, "ref_responses": 64, "power": 0.5},
        "loss": {"clip": None, "kl_coef": 0.0, "aggregation": "token_mean"},
        "baseline": {"name": "grpo", "scale": "group_std"},
        "allocator": {"name": "uniform"},
        "eval": {
            "every_responses": spec.eval_every,
            "targets": list(spec.targets),
            "size": 128,
            "samples": 1,
        },
        "failure": {
            "non_finite": {},
            "accuracy_collapse": {"drop_frac": 0.5, "min_peak": 0.2},
            "reward_collapse": {"drop_frac": 0.5, "min_peak": 0.2},
            "kl_blowup": None,
            "entropy_collapse": None,
        },
        "train": {"max_responses": spec.budget, "stop_at_targets": False},
        "logger": {"wandb": {"mode": "offline", "project": "rlvr-scaling"}},
        "run": {"sweep": spec.sweep, "name": f"B{size}_seed{seed}{suffix}", "threads": 1, "device": "cpu"},
    }
    for key, value in spec.overrides:
        _set(config, key, value)
    return config


DEPENDENCE = ("normal", "clayton", "gumbel", "frailty")


def _check_dependence(spec: SyntheticSpec) -> None:
    if spec.dependence not in DEPENDENCE:
        raise ValueError(f"dependence={spec.dependence!r}: expected one of {', '.join(DEPENDENCE)}")
    if spec.dependence in ("clayton", "gumbel") and not -1 < spec.dependence_param < 1:
        raise ValueError(f"dependence_param={spec.dependence_param} (Kendall's tau) must lie in (-1, 1)")
    if spec.dependence == "frailty" and not spec.dependence_param > 0:
        raise ValueError(f"dependence_param={spec.dependence_param} (frailty variance) must be > 0")
    if spec.dependence == "normal" and not -1 <= spec.rho <= 1:
        raise ValueError(f"rho={spec.rho} must lie in [-1, 1]")


def dependent_normals(spec: SyntheticSpec, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` draws of the noises ``(eps, eps')`` of the time to target and the time to failure under
    ``spec.dependence`` (module docstring). Copulas are sampled by the Marshall–Olkin frailty construction
    (Marshall & Olkin 1988): ``U_i = psi(E_i / V)`` with ``E_i ~ Exp(1)`` and ``V`` the variable whose
    Laplace transform is the generator ``psi``: Clayton ``psi(t) = (1 + t)**(-1 / theta)``,
    ``V ~ Gamma(1 / theta)``, ``theta = 2 tau / (1 - tau)``; Gumbel ``psi(t) = exp(-t**(1 / theta))``,
    ``V`` positive stable of index ``1 / theta`` (Kanter's 1975 representation), ``theta = 1 / (1 - tau)``;
    then ``eps = Phi^-1(U_1)``, ``eps' = Phi^-1(U_2)``. The normal case is the bivariate normal with
    correlation ``spec.rho``."""
    from scipy.special import digamma, ndtri

    _check_dependence(spec)
    kind, tau = spec.dependence, spec.dependence_param
    if kind == "normal":
        eps = rng.standard_normal(n)
        return eps, spec.rho * eps + math.sqrt(1.0 - spec.rho**2) * rng.standard_normal(n)
    if kind == "frailty":
        shape = 1.0 / tau
        log_z = np.log(rng.gamma(shape, tau, n)) - (digamma(shape) + math.log(tau))
        eps, eps_f = rng.standard_normal(n), rng.standard_normal(n)
        return eps + log_z / spec.sigma, eps_f + log_z / spec.failure_sigma
    e = rng.exponential(size=(2, n))
    a = abs(tau)
    if a == 0:
        u = np.exp(-e)
    elif kind == "clayton":
        theta = 2 * a / (1 - a)
        v = rng.gamma(1 / theta, 1.0, n)
        u = (1 + e / v) ** (-1 / theta)
    else:
        alpha = 1 - a  # 1 / theta
        ang, w = rng.uniform(0, math.pi, n), rng.exponential(size=n)
        v = (np.sin(alpha * ang) / np.sin(ang) ** (1 / alpha)) * (np.sin((1 - alpha) * ang) / w) ** (
            (1 - alpha) / alpha
        )
        u = np.exp(-((e / v) ** alpha))
    u = np.clip(u, 1e-300, 1 - 1e-16)
    eps, eps_f = ndtri(u[0]), ndtri(u[1])
    return eps, (-eps_f if tau < 0 else eps_f)


def simulate(spec: SyntheticSpec) -> list[SyntheticRun]:
    """All runs of one condition: every size times ``spec.seeds`` seeds."""
    _check_dependence(spec)
    rng = np.random.default_rng(spec.seed)
    kappas = [_kappa(a, spec) for a in spec.targets]
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
                row.update(_noise_row(spec, size, k, rng, seed))
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


def _noise_row(
    spec: SyntheticSpec, size: int, k: int, rng: np.random.Generator, run_seed: int = 0
) -> dict[str, float]:
    """Per-rollout noise instruments as the K-minibatch estimator gives them (rlvr_scaling/noise.py):
    ``tr Sigma`` estimated from K minibatch gradients (chi-square with K - 1 degrees of freedom around
    the truth), ``|G|^2`` unbiased with the estimator's sampling noise, NaN when K = 1."""
    K = spec.steps_per_rollout
    if K < 2:
        return {
            name: math.nan for name in ("noise/grad_norm_sq", "noise/trace_cov", "noise/snr", "noise/b_noise")
        }
    grad_sq = 1e-3 * math.exp(-k * size / (4.0 * spec.budget))  # the gradient shrinks as training goes
    trace = spec.b_noise * grad_sq
    b = size / K
    trace_hat = trace * rng.chisquare(K - 1) / (K - 1)
    grad_hat = grad_sq + math.sqrt(2.0 / K) * (trace / b) * rng.standard_normal()
    row = {
        "noise/grad_norm_sq": grad_hat,
        "noise/trace_cov": trace_hat,
        "noise/snr": grad_hat / (trace_hat / b) if trace_hat > 0 else math.inf,
        "noise/b_noise": trace_hat / grad_hat if grad_hat > 0 else math.inf,
    }
    if spec.adam_b_noise is not None:  # Adam's, over all prompts (own stream: the others' draws unchanged)
        own = np.random.default_rng([spec.seed, size, run_seed, k, 31])
        signal = 0.05 * math.exp(-k * size / (4.0 * spec.budget))
        trace = spec.adam_b_noise * signal
        signal_hat = signal + math.sqrt(2.0) * (trace / size) * own.standard_normal()
        trace_hat = trace * own.chisquare(8) / 8
        row.update(
            {
                "noise/adam_grad_norm_sq": signal_hat,
                "noise/adam_trace_cov": trace_hat,
                "noise/adam_b_noise": trace_hat / signal_hat if signal_hat > 0 else math.inf,
            }
        )
    return row


def _json_row(row: dict[str, Any]) -> dict[str, Any]:
    """Non-finite floats as the trainer writes them (``"nan"``, ``"inf"``, ``"-inf"``: JSON has none)."""
    return {
        k: (
            ("nan" if math.isnan(v) else "inf" if v > 0 else "-inf")
            if isinstance(v, float) and not math.isfinite(v)
            else v
        )
        for k, v in row.items()
    }


def write_run_dirs(runs: list[SyntheticRun], out: Path) -> list[Path]:
    """Write each run as a run directory ``out/<run.name>/``."""
    paths = []
    for run in runs:
        path = Path(out) / run.config["run"]["name"]
        (path / ".hydra").mkdir(parents=True, exist_ok=True)
        (path / "checkpoints").mkdir(exist_ok=True)
        text = yaml.safe_dump(run.config, sort_keys=False)
        (path / "config.yaml").write_text(text)
        (path / ".hydra" / "config.yaml").write_text(text)
        (path / "metrics.jsonl").write_text("".join(json.dumps(_json_row(r)) + "\n" for r in run.rows))
        (path / "status.json").write_text(json.dumps(run.status, indent=1))
        (path / "summary.json").write_text(json.dumps(run.summary, indent=1))
        paths.append(path)
    return paths


def write_wandb_offline(runs: list[SyntheticRun], wandb_dir: Path, project: str = "rlvr-scaling") -> None:
    """Log each run to wandb offline under ``wandb_dir/wandb/offline-run-*``, as the trainer does."""
    os.environ.setdefault("WANDB_SILENT", "true")
    import wandb

    settings = wandb.Settings(
        silent=True, console="off", x_disable_stats=True, disable_git=True, save_code=False
    )
    Path(wandb_dir).mkdir(parents=True, exist_ok=True)
    for run in runs:
        wb = wandb.init(
            project=project,
            dir=str(wandb_dir),
            mode="offline",
            config=run.config,
            group=run.config["run"]["sweep"],
            name=run.config["run"]["name"],
            tags=["synthetic"],
            settings=settings,
        )
        for row in run.rows:
            wb.log(row)
        wb.summary["state"] = run.status["state"]
        wb.summary["failure"] = run.status["failure"]
        wb.summary["derived"] = run.summary["derived"]
        wb.finish()


def write_sweep(
    out: Path, specs: list[SyntheticSpec] | SyntheticSpec, wandb: bool = False
) -> list[SyntheticRun]:
    """Write the runs of one or more conditions under ``out`` and their truth to ``synthetic_truth.json``."""
    specs = [specs] if isinstance(specs, SyntheticSpec) else specs
    out = Path(out)
    runs: list[SyntheticRun] = []
    truth = []
    for spec in specs:
        spec_runs = simulate(spec)
        write_run_dirs(spec_runs, out)
        if wandb:
            write_wandb_offline(spec_runs, out / "_wandb")
        runs.extend(spec_runs)
        truth.append({"spec": asdict(spec), "runs": [r.truth for r in spec_runs]})
    (out / "synthetic_truth.json").write_text(json.dumps(truth, indent=1, default=str))
    return runs


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


if __name__ == "__main__":
    raise SystemExit(main())
