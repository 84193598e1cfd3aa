"""The price of a study design from a measured run (``rlvr-plan --throughput-from RUN_DIR``).

A completed (or stopped) run directory gives, from its last metrics row's clocks (docs/design.md §3):

- **responses/s over the whole run**: ``responses / wall_seconds``. The ``wall_seconds`` clock runs
  from the start of training (model loading and the first run's weight conversion are before it) and
  includes every evaluation, at the measured run's evaluation schedule;
- **responses/s without evaluation**: ``responses / (wall_seconds - evaluation seconds)``, the
  evaluation seconds summed over the rows' ``perf/eval_s`` and ``perf/eval_screen_s``;
- **FLOPs per response**: ``flops / responses``, the ``flops`` clock (docs/flops.md: the model FLOPs of
  the generation and training forwards and backwards that ran, counted by
  ``rlvr_scaling.accounting.FlopMeter``; evaluation is not charged).

A design of R responses then costs ``R / rate`` serial seconds on the measured hardware, and
``R * FLOPs per response / (peak * MFU)`` seconds of one H100. The peak is H100 SXM's dense BF16 tensor
rate from NVIDIA's datasheet (989 TFLOP/s; 1,979 is with 2:4 sparsity, which the trainer does not
use); the MFU, 10 %, is an assumption of ours (docs/flops.md, "From FLOPs to hours"), not a
measurement. Both are flags. The rate and FLOPs per response are the measured run's averages, applied at
every rollout size of the design as measured (its B, its prompt and completion lengths, its share of
rows skipped for zero advantage).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

#: H100 SXM, dense BF16 tensor throughput (NVIDIA H100 datasheet), FLOP/s.
H100_PEAK_FLOPS = 989e12
#: Model-FLOPs utilisation assumed for the H100 figure (docs/flops.md): a choice of ours.
ASSUMED_MFU = 0.10
FLAG = "--throughput-from"
EVAL_SECONDS = ("perf/eval_s", "perf/eval_screen_s")


@dataclass(frozen=True)
class MeasuredPrice:
    """What one run measured (module docstring)."""

    run: str
    responses: float
    tokens: float
    wall_seconds: float
    eval_seconds: float
    flops: float
    size: float | None = None  # the run's B
    parameters: int | None = None

    @property
    def rate(self) -> float:
        """Responses per second over the whole run, evaluation included."""
        return self.responses / self.wall_seconds

    @property
    def rate_no_eval(self) -> float:
        """Responses per second without the evaluations' seconds."""
        return self.responses / (self.wall_seconds - self.eval_seconds)

    @property
    def flops_per_response(self) -> float:
        return self.flops / self.responses

    def seconds_per_response(self, size: float) -> float:
        """The planner's wall-time model (``seconds_per_response(B)``): the measured rate at every B."""
        return 1.0 / self.rate


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def read_price(run_dir: str | Path) -> MeasuredPrice:
    """The measured price of the run at ``run_dir``; ValueError naming ``--throughput-from`` when it
    cannot be read or has not trained (no responses, no wall time, no ``flops`` clock)."""
    from analysis.data.load import RunReadError, read_run_dir

    path = Path(run_dir)
    if not path.is_dir():
        raise ValueError(f"{FLAG} {run_dir}: not a run directory")
    try:
        record = read_run_dir(path, path.name)
    except RunReadError as err:
        raise ValueError(f"{FLAG} {run_dir}: {err}") from err
    last = record.rows[-1]
    clocks = {k: _number(last.get(k)) for k in ("responses", "tokens", "wall_seconds", "flops")}
    missing = [k for k, v in clocks.items() if v is None or (k != "tokens" and v <= 0)]
    if missing:
        raise ValueError(
            f"{FLAG} {run_dir}: its last metrics row has no positive {', '.join(missing)} clock "
            f"(at {last.get('responses')} responses): not a run that trained"
        )
    eval_s = sum(_number(r.get(k)) or 0.0 for r in record.rows for k in EVAL_SECONDS)
    derived = (record.summary or {}).get("derived") or {}
    size = _number(derived.get("responses_per_rollout")) or _number(
        record.rows[0].get("derived/responses_per_rollout")
    )
    parameters = ((record.summary or {}).get("model") or {}).get("parameters")
    return MeasuredPrice(
        run=str(run_dir),
        responses=clocks["responses"],
        tokens=clocks["tokens"],
        wall_seconds=clocks["wall_seconds"],
        eval_seconds=min(eval_s, clocks["wall_seconds"]),
        flops=clocks["flops"],
        size=size,
        parameters=int(parameters) if isinstance(parameters, int) else None,
    )


def h100_seconds(responses: float, flops_per_response: float, peak: float, mfu: float) -> float:
    """Seconds of one accelerator of ``peak`` FLOP/s at model-FLOPs utilisation ``mfu``."""
    return responses * flops_per_response / (peak * mfu)


def price_columns(responses: float, price: MeasuredPrice, peak: float, mfu: float) -> dict:
    """The cost columns of a design of ``responses`` responses at the measured price."""
    return {
        "wall_hours_serial": responses / price.rate / 3600,
        "hours_no_eval": responses / price.rate_no_eval / 3600,
        "flops": responses * price.flops_per_response,
        "h100_hours": h100_seconds(responses, price.flops_per_response, peak, mfu) / 3600,
    }


def describe(price: MeasuredPrice, peak: float, mfu: float) -> list[str]:
    """The lines ``rlvr-plan`` prints above its tables: what was measured and what is assumed."""
    size = f"B = {price.size:g}, " if price.size else ""
    params = f"{price.parameters:,} parameters, " if price.parameters else ""
    per_response = h100_seconds(1.0, price.flops_per_response, peak, mfu)
    return [
        f"Measured on {price.run} ({params}{size}{price.responses:,.0f} responses, "
        f"{price.tokens:,.0f} tokens, {price.wall_seconds:,.0f} s of which evaluation "
        f"{price.eval_seconds:,.0f} s):",
        f"  {price.rate:.3g} responses/s over the whole run (wall_hours_serial), "
        f"{price.rate_no_eval:.3g} without evaluation (hours_no_eval);",
        f"  {price.flops_per_response:.3g} FLOPs per response (the flops clock: generation and training, "
        "evaluation not charged).",
        f"One H100 (h100_hours): {peak / 1e12:,.0f} TFLOP/s peak (dense BF16) at an assumed {mfu * 100:g} % MFU, "
        f"{per_response:.3g} s per response; evaluation not included. Both rates are applied at every B.",
    ]
