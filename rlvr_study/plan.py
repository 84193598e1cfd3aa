"""How many runs, at which rollout sizes, for an exponent to a stated precision (``rlvr-plan``:
:mod:`rlvr_study.plan_cli`; docs/study.md).

**Model.** The fit of :mod:`analysis.fits.fit`: ``log R = a + alpha log B + sigma eps`` with
``eps ~ N(0, 1)``, a run at size ``B`` observed only through the evaluation grid of that size. Its
crossing falls in one of the intervals ``(0, t_1], (t_1, t_2], ..., (t_{m-1}, t_m]`` between its
evaluations (``t_i`` on rollout boundaries: a crossing is known to one rollout at most, and to one
evaluation spacing, whichever is coarser: the *resolution*) or beyond the last one ``t_m`` (the run ends
at its budget: *right-censored*). The observation is discrete, so its expected Fisher information is a
finite sum, computed exactly rather than by quadrature or simulation::

    I_B(theta) = sum_k  grad p_k grad p_k^T / p_k,    p_k = Phi(z_k) - Phi(z_{k-1}),
    z_k = (log t_k - a - alpha log B) / sigma,         theta = (a, alpha, log sigma)

A design with ``n_B`` seeds at size ``B`` has information ``sum_B n_B I_B``; the variance of the
exponent is ``V = [I^{-1}]_{alpha alpha}`` (resolution and censoring both make ``I_B`` smaller than the
uncensored ``n_B (1, log B)(1, log B)^T / sigma^2``, so they cost seeds). The **planned width** is the
median width of the interval the fit will report::

    width = 2 * t_nu(0.975) * sqrt(V) * sqrt(median(chi2_nu) / nu)

or, with an **assurance** level q (``--assurance``; the study's default 0.8), the width met in a share
q of repetitions: the q-quantile of chi2_nu in place of its median. ``nu`` is the degrees of freedom of
the interval the report prints for that design (:mod:`analysis.fits.fit`, :mod:`analysis.fits.seed_blocks`):

* **seeds as clusters** (the report's default where the design has at least 5 seeds and every size
  two of them; seed ``s`` runs at every size holding more than ``s`` runs, as a study adds them): the
  interval is the seed-cluster bootstrap scaled by ``sqrt(S / (S - 1)) t_{S-1}(0.975) / z(0.975)``, i.e.
  ``alpha ± t_{S-1} s_u / sqrt(S)`` with ``s_u`` the spread of the seeds' contributions to the
  estimate, and ``s_u^2 / S`` is distributed as ``V chi2_{S-1} / (S - 1)`` for S seeds that carry
  equal information. Where seeds carry unequal information (extra seeds at the extreme sizes only)
  ``nu`` is Satterthwaite's ``(S - 1) (sum_s v_s)^2 / (S sum_s v_s^2)``, ``v_s`` the expected variance of
  seed s's contribution, ``sum_s [I^{-1} I_b I^{-1}]_{alpha alpha}`` over its runs (our reading of the
  small-sample correction of a cluster variance, Bell & McCaffrey 2002, *Survey Methodology* 28:169;
  it is ``S - 1`` for complete seeds);
* **runs within sizes** (fewer seeds, or ``resample="runs"``): the bootstrap scaled to a Student-t pivot
  with ``nu = N - m`` degrees of freedom (N runs at m sizes).

The interval is proportional to the estimated spread, whose q-quantile is ``sqrt(V)`` times the last
factor. Before the seed clusters were planned the plan assumed ``N - m`` for every design, and for 5
seeds x 5 sizes its "80 %" width was met in under half of the repetitions
(``benchmarks/study/assurance_check.py``; figures in docs/study.md). γ (the failure clock) is planned the same
way (:func:`failure_truth`): onsets bracketed by whole rollouts, right-censored at the horizon. Expected
information was chosen over a simulation-based plan because it is exact for the discretised
observation and costs microseconds per design, so the allocation can be searched seed by seed; the
simulation is kept for checking (:func:`simulate_widths`: the widths of the project's own fit on sweeps
drawn at the planned design, ``tests/analysis/test_analysis_plan.py``, ``benchmarks/study/plan_check.py``,
``benchmarks/study/assurance_check.py``).

**Allocation.** Greedy in seeds: every candidate size starts with ``min_seeds`` (default 2) runs, and
each further run goes to the size whose run lowers ``V`` the most per response spent, until the planned
width is met. For a straight line the extremes carry most of the information, so extra seeds collect at
the smallest and largest sizes; the interior sizes keep ``min_seeds`` each, because the lack-of-fit test
and the broken-power-law check (:mod:`analysis.fits.gof`) need them and a bent line would bias a two-size
design. A size where the run would be censored with probability above ``max_censored`` (default 0.9)
at the budget is dropped (its runs cost the budget and carry almost no information), and said so.

**Difference of two conditions** ``alpha_1 - alpha_2`` with the same design in both: variance
``V_1 + V_2 - 2 rho sqrt(V_1 V_2)``, ``rho`` the correlation of the two exponents' estimates (0 for
independent seeds; with paired seeds it is about the correlation of the same seed's residuals between
the conditions); ``N_1 + N_2 - 2m`` degrees of freedom, or with seeds as clusters (the two conditions
share their seed ids, and the report pairs them) the S − 1 of the seeds' contributions to the difference.

**Cost.** A run costs its budget in responses (rounded up to whole rollouts); the wall time of a run at
``B`` is responses times seconds per response at ``B`` (the pilot's ``wall_seconds`` clock, fitted as
``seconds per rollout = s0 + s1 B``, or ``--throughput B:rps`` points: :mod:`analysis.fits.which_b`), summed
over runs (serial: divide by the runs you can run at once). GPU-hours are total responses divided by
``--responses-per-second`` (the rate of one GPU on your hardware). ``--throughput-from RUN_DIR`` replaces
the wall-time model by a measured run's rate and adds its FLOPs on one H100 (:mod:`rlvr_study.price`).

Assumptions: the log-normal line holds over the sizes (check the pilot's lack of fit), sigma does not
depend on B, the seeds of a condition are independent, failures are not modelled (a run that fails
first is censored earlier than its budget: plan with a smaller ``--budget`` if many do).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.special import log_ndtr, ndtr, stdtrit
from scipy.stats import chi2

from analysis.fits.fit import fit_power_law
from analysis.fits.seed_blocks import MIN_SEEDS, RESAMPLING, resample_weights
from rlvr_scaling.eval_schedule import schedule_point

_SQRT_2PI = math.sqrt(2 * math.pi)


# ---------------------------------------------------------------------------------- evaluation grid
@dataclass(frozen=True)
class Schedule:
    """The trainer's evaluation schedule (``eval.schedule``) under the planner's names; its points are the
    trainer's own (:func:`rlvr_scaling.eval_schedule.schedule_point`)."""

    kind: str = "linear"  # linear | geometric
    every: float = 2048  # eval.every_responses (geometric: the largest spacing)
    first: float = 64  # eval.first_responses (geometric)
    points_per_doubling: int = 4  # eval.points_per_doubling (geometric)

    def next_point(self, responses: float) -> float:
        """The first scheduled point strictly after ``responses``."""
        return schedule_point(
            responses,
            schedule=self.kind,
            every_responses=self.every,
            first_responses=self.first,
            points_per_doubling=self.points_per_doubling,
        )


def eval_grid(size: float, budget: float, schedule: Schedule | None) -> np.ndarray:
    """Responses at each evaluation after step 0 of a run of rollout size ``size`` that stops at the
    first rollout boundary at or past ``budget``: the first boundary at or past every scheduled point,
    and the end. ``schedule=None``: an evaluation after every rollout."""
    n_rollouts = max(math.ceil(budget / size), 1)
    end = n_rollouts * size
    if schedule is None:
        return size * np.arange(1, n_rollouts + 1, dtype=float)
    out, last = [], 0.0
    while True:
        at = math.ceil(schedule.next_point(last) / size) * size
        if at >= end:
            break
        out.append(float(at))
        last = at
    out.append(float(end))
    return np.asarray(out)


# ------------------------------------------------------------------------------- expected information
@dataclass(frozen=True)
class Truth:
    """What the plan assumes about one condition and target."""

    alpha: float  # exponent
    intercept: float  # a = log c (log of the median crossing at B = 1)
    sigma: float  # scatter of log R at a size
    budget: float = math.inf  # train.max_responses (inf: never censored)
    schedule: Schedule | None = None  # evaluation schedule (None with an infinite budget: exact times)
    # ((B, budget), ...): the budget at those sizes where it differs by size (a study's per-size horizons)
    budgets: tuple[tuple[float, float], ...] = ()


def budget_at(truth: Truth, size: float) -> float:
    """The responses a run at rollout size ``size`` is read to: its size's in ``truth.budgets``, else
    ``truth.budget``."""
    return next((h for b, h in truth.budgets if b == size), truth.budget)


def _edges(size: float, truth: Truth) -> np.ndarray:
    """Log-space interval edges of the observation at ``size``: -inf, log t_1, ..., log t_m, +inf;
    exact observation (no finite edges) when the budget is infinite and there is no schedule."""
    budget = budget_at(truth, size)
    if not math.isfinite(budget):
        return np.array([-np.inf, np.inf])
    return np.concatenate([[-np.inf], np.log(eval_grid(size, budget, truth.schedule)), [np.inf]])


def size_information(size: float, truth: Truth) -> tuple[np.ndarray, float]:
    """Expected Fisher information ``[3, 3]`` of one run at ``size`` about ``(a, alpha, log sigma)``,
    and the probability that the run is right-censored (module docstring)."""
    x = math.log(size)
    mu = truth.intercept + truth.alpha * x
    edges = _edges(size, truth)
    if edges.size == 2:  # exact log-normal observation
        info = np.array([[1, x, 0], [x, x * x, 0], [0, 0, 2.0 * truth.sigma**2]]) / truth.sigma**2
        return info, 0.0
    z = (edges - mu) / truth.sigma
    finite = np.isfinite(z)
    zf = np.where(finite, z, 0.0)
    dens = np.where(finite, np.exp(-0.5 * zf * zf) / _SQRT_2PI, 0.0)
    # d z / d theta at each edge: (-1/sigma, -x/sigma, -z); zero contribution where z is infinite
    dz = np.stack([np.full_like(zf, -1 / truth.sigma), np.full_like(zf, -x / truth.sigma), -zf], 1)
    dphi = dens[:, None] * dz  # d Phi(z_k) / d theta
    cdf = ndtr(z)
    p = np.diff(cdf)
    grad = np.diff(dphi, axis=0)
    keep = p > 1e-300
    info = (grad[keep, :, None] * grad[keep, None, :] / p[keep, None, None]).sum(0)
    p_censored = float(np.exp(log_ndtr(-z[-2])))
    return info, p_censored


def width_factor(df: float, assurance: float = 0.5) -> float:
    """``2 t_df(0.975) sqrt(q_assurance(chi2_df) / df)``: planned width per unit standard error.

    The fit's interval is proportional to the estimated spread, distributed as
    ``sqrt(V chi2_df / df)`` (``df``: :func:`interval_df`); at ``assurance = 0.5`` the planned width is
    the median width the fit will report, at ``assurance = 0.8`` the width it stays under in 80 % of
    repetitions (the "assurance" of sample-size planning: Kupper & Hafner 1989, *Am. Stat.* 43:101; here
    the only random factor modelled is the spread's estimate)."""
    if not df >= 1:
        return math.inf
    return float(2 * stdtrit(df, 0.975) * math.sqrt(chi2.ppf(assurance, df) / df))


def seed_variances(counts, infos, rho: float = 0.0) -> np.ndarray:
    """Expected variance ``v_s`` of each seed's contribution to the exponent (to the difference of two
    conditions' exponents with ``infos`` of length 2, correlation ``rho``), ``[S]``: seed ``s`` runs at
    every size holding more than ``s`` runs; ``infos`` ``[c, m, 3, 3]`` one run's information per size."""
    counts = np.asarray(counts, int)
    held = np.arange(int(counts.max()))[:, None] < counts[None, :]  # [S, m]
    per = []
    for info in infos:
        total = np.einsum("m,mij->ij", counts.astype(float), info)
        try:
            row = np.linalg.inv(total)[1]
        except np.linalg.LinAlgError:
            return np.full(held.shape[0], np.nan)
        per.append(held @ np.einsum("i,mij,j->m", row, info, row))  # influence variance of one run
    if len(per) == 1:
        return per[0]
    return per[0] + per[1] - 2 * rho * np.sqrt(per[0] * per[1])


def interval_df(counts, infos, rho: float = 0.0, resample: str = "seeds") -> float:
    """Degrees of freedom of the interval the report prints for a design of ``counts`` runs per size
    (module docstring): seeds as clusters where :mod:`analysis.fits.seed_blocks` resamples them (at
    least ``MIN_SEEDS`` seeds, every size with two; ``resample="seeds"``, the report's default),
    Satterthwaite's ``(S - 1) (sum v_s)^2 / (S sum v_s^2)`` (:func:`seed_variances`; ``S - 1`` for
    complete seeds); otherwise the within-size bootstrap's ``N - m`` per condition."""
    if resample not in RESAMPLING:
        raise ValueError(f"resample must be one of {RESAMPLING}, got {resample!r}")
    counts = np.asarray(counts, int)
    kept = counts[counts > 0]
    S = int(counts.max()) if counts.size else 0
    if resample == "seeds" and S >= MIN_SEEDS and (kept >= 2).all():
        v = seed_variances(counts, infos, rho)
        if np.isfinite(v).all() and v.sum() > 0:
            return float(max((S - 1) * v.sum() ** 2 / (S * (v * v).sum()), 1.0))
    return float(len(infos) * (int(counts.sum()) - int(kept.size)))


def alpha_variance(info: np.ndarray) -> float:
    try:
        return float(np.linalg.inv(info)[1, 1])
    except np.linalg.LinAlgError:
        return math.inf


# -------------------------------------------------------------------------------------- allocation
@dataclass
class Design:
    """Seeds per size and what they buy."""

    sizes: np.ndarray  # rollout sizes kept
    seeds: np.ndarray  # runs per size
    width: float  # planned median width of the 95 % interval
    se: float  # sqrt of the expected-information variance of the exponent
    p_censored: np.ndarray  # probability a run at each size is right-censored at the budget
    resolution: np.ndarray  # coarsest evaluation bracket near the median crossing, relative (t_k/t_{k-1} - 1)
    responses: float = math.nan  # total responses of the design
    wall_seconds: float = math.nan  # serial wall time
    dropped: list[str] = field(default_factory=list)
    reached: bool = True  # the requested width is met within max_runs

    @property
    def n_runs(self) -> int:
        return int(self.seeds.sum())

    def allocation(self) -> str:
        return " ".join(f"{b:g}:{n}" for b, n in zip(self.sizes, self.seeds))


def run_responses(size: float, budget: float) -> float:
    """Responses one run spends: its budget rounded up to whole rollouts."""
    return max(math.ceil(budget / size), 1) * size if math.isfinite(budget) else math.nan


def _resolution(size: float, truth: Truth) -> float:
    edges = _edges(size, truth)
    if edges.size == 2:
        return 0.0
    t = np.exp(edges[1:-1])
    median = math.exp(truth.intercept + truth.alpha * math.log(size))
    k = int(np.searchsorted(t, median))
    if k >= t.size:
        return math.nan
    lower = t[k - 1] if k > 0 else 0.0
    return float(t[k] / lower - 1) if lower > 0 else math.inf


def plan_design(
    sizes,
    truths: list[Truth],
    width: float,
    *,
    rho: float = 0.0,
    min_seeds: int = 2,
    max_runs: int = 2000,
    max_censored: float = 0.9,
    seconds_per_response=None,
    assurance: float = 0.5,
    resample: str = "seeds",
) -> Design:
    """Greedy allocation (module docstring) for one condition (``truths`` of length 1) or for the
    difference of two conditions run with the same design (length 2, correlation ``rho``); ``resample``:
    the report's bootstrap (:func:`interval_df`)."""
    sizes = np.asarray(sorted({float(b) for b in sizes}), float)
    infos = np.stack([[size_information(b, t)[0] for b in sizes] for t in truths])  # [c, m, 3, 3]
    pcens = np.array([[size_information(b, t)[1] for b in sizes] for t in truths]).max(0)
    keep = pcens <= max_censored
    dropped = [
        f"B={b:g} dropped: a run there is censored at the budget with probability {p:.2f}"
        for b, p in zip(sizes[~keep], pcens[~keep])
    ]
    if keep.sum() < 2:
        keep = np.argsort(pcens)[:2]
        keep = np.isin(np.arange(sizes.size), keep)
        dropped.append("fewer than 2 sizes below the censoring limit: the 2 least censored kept")
    sizes, infos, pcens = sizes[keep], infos[:, keep], pcens[keep]
    budgets = [budget_at(truths[0], b) for b in sizes]
    finite = all(math.isfinite(h) for h in budgets)
    cost = np.array([run_responses(b, h) if finite else 1.0 for b, h in zip(sizes, budgets)])
    n = np.full(sizes.size, min_seeds, dtype=int)

    def variance(counts: np.ndarray) -> float:
        vs = [alpha_variance(np.einsum("m,mij->ij", counts.astype(float), info)) for info in infos]
        if len(vs) == 1:
            return vs[0]
        return vs[0] + vs[1] - 2 * rho * math.sqrt(vs[0] * vs[1])

    def planned(counts: np.ndarray, v: float) -> float:
        df = interval_df(counts, infos, rho, resample)
        return width_factor(df, assurance) * math.sqrt(v) if v >= 0 else math.nan

    v = variance(n)
    while planned(n, v) > width and n.sum() < max_runs:
        gains = []
        for j in range(sizes.size):
            trial = n.copy()
            trial[j] += 1
            gains.append((v - variance(trial)) / cost[j])
        j = int(np.argmax(gains))
        n[j] += 1
        v = variance(n)
    w = planned(n, v)
    design = Design(
        sizes=sizes,
        seeds=n,
        width=w,
        se=math.sqrt(v),
        p_censored=pcens,
        resolution=np.array([_resolution(b, truths[0]) for b in sizes]),
        dropped=dropped,
        reached=w <= width,
    )
    if finite:
        per_run = cost
        design.responses = float(len(truths) * (n * per_run).sum())
        if seconds_per_response is not None:
            spr = np.array([seconds_per_response(b) for b in sizes])
            design.wall_seconds = float(len(truths) * (n * per_run * spr).sum())
    return design


def design_width(sizes, seeds, truth: Truth, assurance: float = 0.5, resample: str = "seeds") -> float:
    """Planned width of a given design (no search), met with probability ``assurance`` by the interval
    the report prints (``resample``: its bootstrap, :func:`interval_df`)."""
    sizes, seeds = np.asarray(sizes, float), np.asarray(seeds, int)
    infos = np.stack([[size_information(b, truth)[0] for b in sizes]])
    info = np.einsum("m,mij->ij", seeds.astype(float), infos[0])
    return width_factor(interval_df(seeds, infos, 0.0, resample), assurance) * math.sqrt(alpha_variance(info))


def failure_truth(gamma: float, prefactor: float, sigma: float, horizon: float) -> Truth:
    """What the plan assumes about γ's fit (the failure clock): onsets ``d B^gamma`` with log-normal
    scatter ``sigma``, each known to the rollout it falls in (the detector's onset row; the window a
    smoothed statistic adds is ignored) and right-censored at ``horizon``, the responses the runs are
    read to. An evaluation after every rollout is the observation model of :func:`size_information`."""
    return Truth(alpha=gamma, intercept=math.log(prefactor), sigma=sigma, budget=horizon, schedule=None)


# ----------------------------------------------------------------------------------------- checking
def simulate_crossings(sizes, seeds, truth: Truth, rng: np.random.Generator):
    """One sweep at the design, measured as :mod:`analysis.data.clock_tables` measures it: per run the rollout
    size, the clock at the first evaluation at or past the crossing (or the last evaluation when it is
    never reached), censored, and the evaluation before it (0: the step-0 one)."""
    B, values, censored, lower = [], [], [], []
    for b, n in zip(sizes, seeds):
        r = np.exp(truth.intercept + truth.alpha * math.log(b) + truth.sigma * rng.standard_normal(int(n)))
        if not math.isfinite(budget_at(truth, b)):
            B += [b] * int(n)
            values += list(r)
            censored += [False] * int(n)
            lower += [math.nan] * int(n)
            continue
        grid = eval_grid(b, budget_at(truth, b), truth.schedule)
        k = np.searchsorted(grid, r, side="left")  # first evaluation with clock >= crossing
        cens = k >= grid.size
        kk = np.minimum(k, grid.size - 1)
        B += [b] * int(n)
        values += list(grid[kk])
        censored += list(cens)
        lower += list(np.where(cens, np.nan, np.where(kk > 0, grid[np.maximum(kk - 1, 0)], 0.0)))
    return np.array(B), np.array(values), np.array(censored), np.array(lower)


def simulate_widths(
    sizes, seeds, truth: Truth, n_sweeps: int = 100, n_boot: int = 200, seed: int = 0, resample: str = "seeds"
) -> np.ndarray:
    """Widths of the 95 % interval the report prints (:func:`analysis.fits.fit.fit_power_law` on the
    resamples of :func:`analysis.fits.seed_blocks.resample_weights`: seed ``k`` of a size is the k-th run
    there, seeds as clusters where the design allows) on ``n_sweeps`` sweeps simulated at the design."""
    rng = np.random.default_rng(seed)
    out = np.empty(n_sweeps)
    ids = np.concatenate([np.arange(int(n)) for n in seeds])
    for i in range(n_sweeps):
        B, v, c, lo = simulate_crossings(sizes, seeds, truth, rng)
        runs = pd.DataFrame({"B": B, "seed": ids})
        W, _, clusters, _ = resample_weights(runs, n_boot, seed + i, resample, "plan")
        fit = fit_power_law(B, v, c, lower=lo, n_boot=n_boot, weights=W, n_clusters=clusters)
        out[i] = fit.ci_high - fit.ci_low
    return out


# ------------------------------------------------------------------------------------ pilot inputs
@dataclass
class PilotCondition:
    condition: str
    target: str
    truth: Truth
    sizes: np.ndarray  # sizes of the pilot
    have: dict[float, int]  # pilot runs per size
    seconds_per_response: object = None  # callable B -> seconds, or None


def schedule_of(runs: pd.DataFrame) -> Schedule:
    """The evaluation schedule from the runs' config columns (``eval.*``); linear when not recorded."""

    def value(key, default):
        if key in runs.columns and runs[key].notna().any():
            return runs[key].dropna().iloc[0]
        return default

    return Schedule(
        kind=str(value("eval.schedule", "linear")),
        every=float(value("eval.every_responses", 2048)),
        first=float(value("eval.first_responses", 64)),
        points_per_doubling=int(value("eval.points_per_doubling", 4)),
    )


def pilot_conditions(
    source: str, targets=None, n_boot: int = 200, throughput=None, ignore_keys=(), crossing: str = "interval"
):
    """Fit the pilot runs at ``source`` and return one :class:`PilotCondition` per condition and target.

    sigma is pooled over the conditions of a target whose runs mostly reached it (at most half of them
    censored; all conditions when none qualifies), ``sqrt(sum_i n_i s_i^2 / sum_i (n_i - 2))`` with
    ``s_i`` the maximum-likelihood scatter of condition ``i`` fitted on ``n_i`` runs (the divisor undoes
    the MLE's ``(n - 2) / n`` shrinkage, which a pilot's few runs make large): a pilot has few runs per
    condition, and the scatter is a property of the setup more than of one learning rate. Raises
    ValueError when the source holds no readable run."""
    from analysis.data.clock_tables import ClockOptions, build_tables
    from analysis.data.load import load_source
    from analysis.fits.exponents import fit_conditions

    loaded = load_source(source)
    opts = ClockOptions(
        targets=tuple(targets) if targets else None, ignore_keys=tuple(ignore_keys), crossing=crossing
    )
    tables = build_tables(loaded.runs, opts)
    if tables.runs.empty:
        raise ValueError(f"no readable run in {source}")
    exps, _ = fit_conditions(tables, n_boot=n_boot, joint_model=False)
    return pilots_from_fits(tables, exps, throughput)


def pilots_from_fits(tables, exps: pd.DataFrame, throughput=None) -> list[PilotCondition]:
    """:func:`pilot_conditions` without the reading and fitting: ``tables`` from
    ``analysis.data.clock_tables.build_tables``, ``exps`` the exponents table ``analysis.fits.exponents.fit_conditions``
    gives for them (``benchmarks/study/study_vs_uniform.py`` feeds it simulated sweeps)."""
    from analysis.data.clock_tables import target_label
    from analysis.fits.which_b import seconds_per_response_model

    exps = exps[exps["clock"] != "failure"]
    out = []
    for clock in [target_label(a) for a in tables.targets]:
        rows = exps[(exps["clock"] == clock) & np.isfinite(exps["exponent"]) & np.isfinite(exps["sigma"])]
        for r in exps[(exps["clock"] == clock) & ~exps.index.isin(rows.index)].itertuples():
            print(
                f"note: {r.condition} {clock}: no exponent from the pilot ({r.warnings or 'not fitted'}); no plan"
            )
        if rows.empty:
            continue
        # pooled over the conditions whose runs mostly reached the target: where most runs were censored
        # (failed first, or ran out of budget) the fitted scatter rests on a few crossings and the
        # competing risk, and would inflate every other condition's plan
        regular = rows[rows["n_censored"] <= 0.5 * rows["n_runs"]] if "n_censored" in rows else rows
        regular = regular if len(regular) else rows
        n = regular["n_runs"].to_numpy(float)
        dof = np.maximum(n - 2, 0).sum()
        pooled = (
            float(np.sqrt((n * regular["sigma"].to_numpy(float) ** 2).sum() / dof)) if dof > 0 else math.nan
        )
        for r in rows.itertuples():
            runs = tables.runs[(tables.runs["condition"] == r.condition) & tables.runs["in_fit"]]
            budget = float(np.nanmedian(runs["budget"])) if runs["budget"].notna().any() else math.inf
            per_size = {}
            if "horizon" in runs and np.isfinite(runs["horizon"]).any():
                per_size = {b: min(budget, float(h.min())) for b, h in runs["horizon"].groupby(runs["B"])}
                budget = min(budget, float(np.nanmin(runs["horizon"])))  # read no further than it
            truth = Truth(
                alpha=float(r.exponent),
                intercept=float(math.log(r.prefactor)),
                sigma=pooled,
                budget=budget,
                schedule=schedule_of(runs),
                # a horizon per size (a study's horizon_per_size): each size read to its own
                budgets=tuple(sorted(per_size.items())) if len(set(per_size.values())) > 1 else (),
            )
            spr = seconds_per_response_model(tables, r.condition, throughput)
            out.append(
                PilotCondition(
                    condition=r.condition,
                    target=clock,
                    truth=truth,
                    sizes=np.unique(runs["B"].to_numpy(float)),
                    have={float(b): int(c) for b, c in runs["B"].value_counts().items()},
                    seconds_per_response=spr,
                )
            )
    return out
