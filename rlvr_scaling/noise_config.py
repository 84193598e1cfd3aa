"""The schema of the gradient-noise and curvature instruments (config group ``noise``).

The instruments themselves are phases (``noise.py``, ``curvature.py``); their settings live here, on
the floor of the other config schemas, so that ``config.py`` imports no phase (docs/design.md §5).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import ConfigError

NOISE_MODES = ("auto", "on", "off")
HVP_KINDS = ("auto", "double_backward", "finite_difference")
# the instruments that cost extra passes, as ``noise.off_reasons`` names them
COSTLY_INSTRUMENTS = ("at_theta_old", "adam_noise", "curvature")
# From this size on, the start-up log says why the instruments that cost extra passes are off
# (docs/real_model.md: their cost on SmolLM2-135M on CPU).
LARGE_MODEL_PARAMETERS = 50_000_000
# what each costs, said when it is off on a large model and the config gives no measured reason
GENERIC_REASONS = {
    "at_theta_old": "an extra forward and backward over the rollout, as dear as the K steps",
    "adam_noise": "rides on the noise at theta_old",
    "curvature": "Hessian-vector products: a double backward through every layer, GBs of graph",
}
LABELS = {"at_theta_old": "noise at theta_old", "adam_noise": "Adam noise", "curvature": "curvature"}


@dataclass
class NoiseParams:
    """The gradient-noise instruments (config group ``noise``).

    Read from ``cfg.noise`` when the config has that node, else these defaults apply.
    """

    # on | off | auto (on up to max_parameters model parameters). Off by default: one exact pass costs
    # ~+64 % of a cycle on the embedded model (~8 % at every 8th rollout); the minibatch estimator
    # (noise/grad_norm_sq, trace_cov, snr, b_noise) is always on at ~3 %.
    per_sample: str = "off"
    max_parameters: int = 2_000_000  # auto: on for models up to this size (the embedded default)
    every_rollouts: int = 8  # run on every n-th rollout (1 when lr.source=per_sample)
    # noise/grad_norm_sq, trace_cov(_within, _between), snr, b_noise from gradients at theta_old
    # (curvature.py); off: those keys are not logged (the multistep_* estimates still are)
    at_theta_old: bool = True
    prompts_at_theta_old: int = 0  # prompts in its subsample (0: B / (K G), one minibatch's worth, >= 2)
    # the cadences: on every n-th rollout (noise also whenever curvature runs; curvature 0 = off), or
    # null = from `budget` (instrument_budget.InstrumentBudget); curvature needs at_theta_old
    at_theta_old_every_rollouts: int | None = None
    curvature_every_rollouts: int | None = None
    # the fraction of the run's wall time that the cadences left null may spend (shared equally): a
    # measurement runs when the instrument's seconds so far plus its expected cost stay within its share
    budget: float = 0.03
    hvp: str = "auto"  # double_backward | finite_difference | auto (double backward in one fp32 process)
    hvp_eps: float = (
        1e-4  # finite-difference step h = hvp_eps * |theta| / |v| (above the weights' dtype resolution)
    )
    power_iterations: int = 3  # top-eigenvalue power iterations per measurement (0: not measured)
    # noise/adam_* (tr(P Sigma), G'PG, their ratio: the noise scale of Adam's preconditioned update, P from
    # the optimizer's state) and noise/all_* (the SGD trace version), from cells over ALL the rollout's
    # prompts, whenever the noise at theta_old runs: about one more backward pass over the rollout
    adam_noise: bool = False
    # why a model preset turns an instrument off, with its measured cost (keys: at_theta_old, adam_noise,
    # curvature): quoted in the start-up log while that instrument is off (instruments_off_note)
    off_reasons: dict[str, str] = field(default_factory=dict)

    def validate(self, prefix: str = "noise") -> None:
        if self.per_sample not in NOISE_MODES:
            raise ConfigError(
                f"{prefix}.per_sample must be one of {', '.join(NOISE_MODES)} (got {self.per_sample!r})"
            )
        if self.every_rollouts < 1:
            raise ConfigError(f"{prefix}.every_rollouts must be >= 1 (got {self.every_rollouts})")
        if self.prompts_at_theta_old != 0 and self.prompts_at_theta_old < 2:
            raise ConfigError(
                f"{prefix}.prompts_at_theta_old must be 0 (auto) or >= 2 (got {self.prompts_at_theta_old})"
            )
        if self.at_theta_old_every_rollouts is not None and self.at_theta_old_every_rollouts < 1:
            raise ConfigError(
                f"{prefix}.at_theta_old_every_rollouts must be >= 1 or null (got {self.at_theta_old_every_rollouts})"
            )
        if not 0 < self.budget < 1:
            raise ConfigError(f"{prefix}.budget must be a fraction in (0, 1) (got {self.budget})")
        if self.curvature_every_rollouts is not None and self.curvature_every_rollouts < 0:
            raise ConfigError(
                f"{prefix}.curvature_every_rollouts must be >= 0 (got {self.curvature_every_rollouts})"
            )
        if self.curvature_every_rollouts and not self.at_theta_old:
            raise ConfigError(
                f"{prefix}.curvature_every_rollouts needs {prefix}.at_theta_old=true (set it to 0 to turn "
                "curvature off)"
            )
        if self.hvp not in HVP_KINDS:
            raise ConfigError(f"{prefix}.hvp must be one of {', '.join(HVP_KINDS)} (got {self.hvp!r})")
        if not self.hvp_eps > 0:
            raise ConfigError(f"{prefix}.hvp_eps must be > 0 (got {self.hvp_eps})")
        if self.adam_noise and not self.at_theta_old:
            raise ConfigError(f"{prefix}.adam_noise needs {prefix}.at_theta_old=true")
        if self.power_iterations < 0:
            raise ConfigError(f"{prefix}.power_iterations must be >= 0 (got {self.power_iterations})")
        for key in self.off_reasons:
            if key not in COSTLY_INSTRUMENTS:
                raise ConfigError(
                    f"{prefix}.off_reasons.{key}: not an instrument; use {', '.join(COSTLY_INSTRUMENTS)}"
                )


def instruments_off_note(noise: NoiseParams, n_params: int) -> str | None:
    """Why the costly scaling instruments are off (None when none is off, or when the model is small and
    the config gives no reason): the start-up log's answer to 'where are noise/... and curv/...?'. A
    measured reason (``noise.off_reasons``, set by a model preset) is quoted; otherwise, from
    ``LARGE_MODEL_PARAMETERS`` on, what the instrument costs in passes."""
    off = [
        key
        for key, is_off in (
            ("at_theta_old", not noise.at_theta_old),
            ("adam_noise", not noise.adam_noise),
            ("curvature", noise.curvature_every_rollouts == 0),
        )
        if is_off and (key in noise.off_reasons or n_params >= LARGE_MODEL_PARAMETERS)
    ]
    if not off:
        return None
    said = [f"{LABELS[k]} ({noise.off_reasons.get(k) or GENERIC_REASONS[k]})" for k in off]
    return (
        f"off at {n_params:,} parameters: {'; '.join(said)}; the minibatch estimator (noise/multistep_*) "
        "stays on. noise.at_theta_old=true, noise.adam_noise=true, noise.curvature_every_rollouts=N measure them"
    )
