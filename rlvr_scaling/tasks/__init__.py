"""Tasks and rewards: prompts, reference answers, verifiers.

Public API (what the trainer uses): :class:`Example`, :class:`Task`, :data:`TASKS` (kind -> Task
class), :data:`TASK_PARAMS` (kind -> params dataclass, the Hydra schemas of the ``task`` group) and
:func:`build_task`. Registered kinds:

- ``reasoning_gym`` (:class:`ReasoningGymTaskParams`): procedural reasoning-gym generators, compact or
  native prompts, strict exact-number or the dataset's own verifier;
- ``math_file`` (:class:`MathFileTaskParams`): question/answer rows from a local JSONL/Parquet file,
  verified with math-verify in time-limited worker processes;
- ``compose`` (:class:`ComposeTaskParams`): compositions of character-level string transforms,
  generated locally, split by composition (held-out pairs, depth 3), exact-match reward.

Importing this package is cheap: reasoning-gym, math-verify and pyarrow are imported when a task is
validated or built.
"""

from .answers import as_math, extract_final_answer, extract_gold
from .base import TASK_PARAMS, TASKS, Example, Task, build_task
from .compose import ComposeTask, ComposeTaskParams
from .exact import exact_number_reward, parse_strict_number
from .math_file import MathFileTask, MathFileTaskParams
from .pool import PoolStats, VerifierPool
from .reasoning_gym_task import ReasoningGymTask, ReasoningGymTaskParams

__all__ = [
    "TASKS",
    "TASK_PARAMS",
    "ComposeTask",
    "ComposeTaskParams",
    "Example",
    "MathFileTask",
    "MathFileTaskParams",
    "PoolStats",
    "ReasoningGymTask",
    "ReasoningGymTaskParams",
    "Task",
    "VerifierPool",
    "as_math",
    "build_task",
    "exact_number_reward",
    "extract_final_answer",
    "extract_gold",
    "parse_strict_number",
]
