"""When the instruments at theta_old measure: a cadence in rollouts, or a share of the run's wall time
(:class:`InstrumentBudget`), with the expected cost of a first measurement and the fixed cadences an LR
rule that reads the estimates gets."""

from __future__ import annotations


class InstrumentBudget:
    """The cadence of an instrument whose ``every_rollouts`` is left null: it measures whenever its
    seconds so far plus the expected seconds of one more measurement stay within ``share`` of the
    run's wall time so far (the trainer's clock: evaluations and checkpoints included), so that it
    spends at most that share, whatever B, K, the model or the machine. The expected seconds are those
    of its last measurement; before the first, ``prior_cycles`` times the last rollout's seconds (what
    a measurement cost in docs/theory.md, "Cost and checks"), so a run too short to afford even one
    measurement makes none. Measured online from the phase timers: which rollouts measure depends on
    wall time (like ``perf/``), nothing else does; the training trajectory does not depend on the
    instruments (an LR rule that reads them gets a fixed cadence, see :class:`ThetaOldInstruments`).
    The totals are part of the checkpoint.

    What one measurement costs is everything that runs on its rollout: on a rollout where curvature is
    due the noise at theta_old, Adam's noise scale and the preconditioned sharpness run with it, and the
    whole is charged to the curvature (:class:`rlvr_scaling.curvature.ThetaOldInstruments`), so that
    its next expected cost is the whole rollout's, not a part of it."""

    def __init__(self, share: float, prior_cycles: float):
        self.share, self.prior_cycles = share, prior_cycles
        self.spent = 0.0  # seconds of all measurements so far
        self.last = 0.0  # seconds of the last measurement (0: none yet)
        self.rollout = -1  # the rollout of the last measurement (its parts on one rollout add up)

    def due(self, wall: float, cycle: float) -> bool:
        """``wall``: the run's wall time so far; ``cycle``: the last rollout's seconds (0: none yet)."""
        expected = self.last if self.last > 0 else self.prior_cycles * cycle
        return expected > 0 and self.spent + expected <= self.share * wall

    def charge(self, seconds: float, rollout: int | None = None) -> None:
        """Add ``seconds`` of measuring; several charges on one ``rollout`` are one measurement (the
        noise at theta_old and Adam's noise scale, say), whose total is the next one's expected cost."""
        self.spent += seconds
        same = rollout is not None and rollout == self.rollout
        self.last = self.last + seconds if same else seconds
        self.rollout = rollout if rollout is not None else -1

    def state_dict(self) -> dict[str, float]:
        return {"spent": self.spent, "last": self.last, "rollout": self.rollout}

    def load_state_dict(self, state: dict) -> None:
        self.spent, self.last = float(state.get("spent", 0.0)), float(state.get("last", 0.0))
        self.rollout = int(state.get("rollout", -1))


# the expected cost of a first measurement, in rollouts (docs/theory.md, "Cost and checks": noise at
# theta_old 0.21-0.33 of a cycle, a curvature measurement 1.8-2.7 cycles), rounded up
PRIOR_CYCLES = {"noise": 0.35, "curvature": 3.0}
# the same with Adam's noise scale (noise.adam_noise), which runs over all of the rollout's prompts with
# the noise, and the preconditioned sharpness, which runs with the curvature: measured on the reference
# study's runs (docs/theory.md, "Cost and checks"), a noise rollout 1.1-1.5 cycles (median by size,
# B = 32..512; at most 2.75), a curvature rollout 7.8-11.4 (at most 15.6); the medians, rounded up.
# (With the priors above these rollouts cost 3-4 times what was expected, and a short run's first
# measurements alone took it past its share: 4-8 % of the wall time at a 3 % budget.)
PRIOR_CYCLES_ADAM = {"noise": 1.6, "curvature": 12.0}


def prior_cycles(adam_noise: bool) -> dict[str, float]:
    """The expected cost of each instrument's first measurement, in rollouts (above)."""
    return dict(PRIOR_CYCLES_ADAM if adam_noise else PRIOR_CYCLES)


# the cadences an LR rule that reads the noise estimates gets when they are left null (the previous
# fixed defaults): its learning rates must not depend on wall time
READ_BY_LR_EVERY = {"at_theta_old": 8, "curvature": 128}
