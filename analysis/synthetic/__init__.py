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

The package, one concern a module: :mod:`~analysis.synthetic.spec` (the parameters, the config),
:mod:`~analysis.synthetic.draws` (the dependent noises, the noise instruments),
:mod:`~analysis.synthetic.simulate` (the runs, in memory), :mod:`~analysis.synthetic.write` (run
directories, wandb offline runs, sweeps) and :mod:`~analysis.synthetic.cli` (the command line); their
public names are importable from here.
"""

from analysis.synthetic.cli import main
from analysis.synthetic.draws import DEPENDENCE, dependent_normals
from analysis.synthetic.simulate import records, simulate
from analysis.synthetic.spec import SyntheticRun, SyntheticSpec, make_config
from analysis.synthetic.write import write_run_dirs, write_sweep, write_wandb_offline

__all__ = [
    "DEPENDENCE",
    "SyntheticRun",
    "SyntheticSpec",
    "dependent_normals",
    "main",
    "make_config",
    "records",
    "simulate",
    "write_run_dirs",
    "write_sweep",
    "write_wandb_offline",
]
