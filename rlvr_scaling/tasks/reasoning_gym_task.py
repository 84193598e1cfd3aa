"""reasoning-gym procedural generators as tasks (``task.kind: reasoning_gym``).

Prompts. ``compact`` rebuilds the problem from ``metadata["expression"]`` with whitespace removed and
``=`` appended (``47+8-3=``; gold completion ``52``): about 10x fewer tokens than the English template
with a character tokenizer. It exists for the datasets in :data:`COMPACT_DATASETS`, whose expression is
the whole problem; any other dataset falls back to ``native`` with a warning (``info()`` reports the
format in effect). ``native`` is the dataset's question verbatim; its gold completion is ``" " + answer``. ``chat`` is
for chat models (``model.prompt_format=chat``): the problem as an instruction with the answer format
asked for, ``Calculate 47 + 8 - 3. Give the final answer as 'Answer: <number>'.`` for the compact
datasets (the expression with its spaces), the dataset's question followed by that sentence otherwise;
its gold completion is ``Answer: 52``. The split (below) does not depend on the format: the same
problems are held out whatever the prompts look like.

Train / validation split. Every problem is assigned to a side by a seeded hash of its *problem key*
(the compact expression where there is one, else the question): 1 in 8 keys belong to validation.
``train_example(i)`` is item ``i`` of the train stream (dataset seed ``seed``), redrawn from reserve
streams if its key belongs to validation; the validation set is the first ``val_size``
validation-side items of the val stream (seed ``seed + 1_000_003``). The sides are disjoint by prompt
text. Unlike dropping validation items that happen to occur in the train pool, the split biases
neither side towards rare problems (repeats are kept in validation for the same reason), does not
depend on ``train_size``, and lets train items be generated lazily (then cached): 50k chain_sum items
take ~1.4 s on first touch instead of at start-up.

Verifiers. ``exact`` (in-process, see :mod:`~rlvr_scaling.tasks.exact`): the stripped completion must
be the gold number, so ``#57`` scores 0. ``dataset``: reasoning-gym's own ``score_answer`` on the
stripped completion, run in worker processes under ``timeout_s`` (some scorers call sympy). Its
semantics vary by dataset; the default gives 1.0 for an exact match and *partial credit*
len(gold)/len(answer) when the answer merely contains the gold (``"52 or 53"`` earns 0.25 for ``52``;
basic_arithmetic and gcd use it); chain_sum compares numbers leniently (``+052.0`` is right).
``answer`` (in-process, :func:`~rlvr_scaling.tasks.exact.chat_answer_reward`): a chat model's answer as
its users read it (the last ``\\boxed{}``, else an ``Answer:`` line, else the final number) equal to
the gold number; the one a ``chat`` prompt needs, whose answers are prose (``exact`` is refused with it).
"""

from __future__ import annotations

import copy
import difflib
import functools
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from .base import Example, Task, check, register_task
from .exact import chat_answer_reward, exact_number_reward, parse_strict_number
from .pool import PooledVerifier, VerifierPool

log = logging.getLogger(__name__)

COMPACT_DATASETS = frozenset({"chain_sum", "basic_arithmetic", "products", "decimal_chain_sum"})
PROMPT_FORMATS = ("compact", "native", "chat")
VERIFIERS = ("exact", "dataset", "answer")
# what a chat prompt asks for (task.prompt_format=chat); task.verifier=answer reads it
CHAT_ANSWER_FORMAT = "Give the final answer as 'Answer: <number>'."
# Datasets that suit tiny models (named in the error for an unknown dataset).
SUGGESTED_DATASETS = (
    "chain_sum",
    "basic_arithmetic",
    "products",
    "simple_equations",
    "number_sequence",
    "gcd",
    "lcm",
    "count_bits",
)
VAL_SEED_OFFSET = 1_000_003
RESERVE_SEED_OFFSET = 2_000_006
VAL_BUCKETS = 8  # 1 in VAL_BUCKETS problem keys belong to the validation side
_MAX_REDRAWS = 64
_MAX_DATASET_COMPLETION_CHARS = 16384  # longer completions score 0 under verifier=dataset
_CACHE_ITEMS = 65536


def _default_dataset_config() -> dict[str, Any]:
    return {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2}


@dataclass  # not frozen: Hydra overrides write into it
class ReasoningGymTaskParams:
    """A reasoning-gym generator as a task: prompt format, split sizes, verifier."""

    name: str = "chain_sum"  # display name of the preset (run names, logs)
    kind: str = "reasoning_gym"  # registry key in TASKS
    dataset: str = "chain_sum"  # reasoning-gym dataset name
    dataset_config: dict[str, Any] = field(default_factory=_default_dataset_config)  # generator options
    seed: int = 0  # train stream seed; validation uses seed + 1_000_003
    train_size: int = 50_000  # training pool; train_example(i) wraps around at this size
    val_size: int = 256  # held-out problems
    # compact ("47+8-3=") | native (the dataset's question) | chat (an instruction with the answer format)
    prompt_format: str = "compact"
    # exact (strict number, in-process) | dataset (score_answer, partial credit) | answer (a chat model's
    # final number: last \boxed{}, an "Answer:" line, the last number; in-process)
    verifier: str = "exact"
    timeout_s: float = 2.0  # per-item time limit of verifier=dataset
    num_workers: int = 2  # verifier worker processes (verifier=dataset only)

    def validate(self, prefix: str = "task") -> None:
        check(self.train_size > 0, f"{prefix}.train_size must be > 0 (got {self.train_size})")
        check(self.val_size > 0, f"{prefix}.val_size must be > 0 (got {self.val_size})")
        check(self.seed >= 0, f"{prefix}.seed must be >= 0 (got {self.seed})")
        check(
            self.prompt_format in PROMPT_FORMATS,
            f"{prefix}.prompt_format must be one of {', '.join(PROMPT_FORMATS)} (got {self.prompt_format!r})",
        )
        check(
            self.verifier in VERIFIERS,
            f"{prefix}.verifier must be one of {', '.join(VERIFIERS)} (got {self.verifier!r})",
        )
        check(
            not (self.prompt_format == "chat" and self.verifier == "exact"),
            f"{prefix}.verifier=exact wants the whole completion to be the number, but "
            f"{prefix}.prompt_format=chat asks a chat model, which answers in prose: use {prefix}.verifier=answer",
        )
        check(self.timeout_s > 0, f"{prefix}.timeout_s must be > 0 (got {self.timeout_s})")
        check(self.num_workers >= 1, f"{prefix}.num_workers must be >= 1 (got {self.num_workers})")
        from reasoning_gym.factory import DATASETS

        if self.dataset not in DATASETS:
            close = difflib.get_close_matches(self.dataset, list(DATASETS), n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            check(
                False,
                f"{prefix}.dataset: unknown reasoning-gym dataset {self.dataset!r}{hint}; "
                f"{len(DATASETS)} available, e.g. {', '.join(SUGGESTED_DATASETS)} "
                "(all: reasoning_gym.factory.DATASETS)",
            )
        config_cls = DATASETS[self.dataset][1]
        valid = [f.name for f in fields(config_cls) if f.name not in ("seed", "size")]
        for key in self.dataset_config:
            check(
                key not in ("seed", "size"),
                f"{prefix}.dataset_config.{key}: set {prefix}.seed / "
                f"{prefix}.train_size / {prefix}.val_size instead",
            )
            check(
                key in valid,
                f"{prefix}.dataset_config.{key}: not an option of reasoning-gym "
                f"{self.dataset!r}; valid: {', '.join(valid)}",
            )
        try:
            config = config_cls(**dict(self.dataset_config), seed=self.seed, size=self.train_size)
            if hasattr(config, "validate"):
                config.validate()
        except (AssertionError, TypeError, ValueError) as err:
            check(False, f"{prefix}.dataset_config: rejected by reasoning-gym {self.dataset!r}: {err}")


@register_task("reasoning_gym")
class ReasoningGymTask(PooledVerifier, Task):
    Params = ReasoningGymTaskParams

    def __init__(self, params: ReasoningGymTaskParams):
        import reasoning_gym

        self.params = params = copy.deepcopy(params)  # params are mutable (Hydra); keep our own copy
        self.name = params.name
        self._create = functools.partial(
            reasoning_gym.create_dataset, params.dataset, **dict(params.dataset_config)
        )
        self.chat = params.prompt_format == "chat"
        self.compact = params.prompt_format == "compact" and params.dataset in COMPACT_DATASETS
        if params.prompt_format == "compact" and not self.compact:
            log.warning(
                "task %s: reasoning-gym %r has no compact form (only %s); using native prompts",
                params.name,
                params.dataset,
                ", ".join(sorted(COMPACT_DATASETS)),
            )
        self.prompt_format = "chat" if self.chat else "compact" if self.compact else "native"
        self._streams: dict[int, Any] = {0: self._create(seed=params.seed, size=params.train_size)}
        self._train_item = functools.lru_cache(maxsize=_CACHE_ITEMS)(self._make_train_item)
        self._val, self._val_entries = self._make_validation()
        if params.verifier in ("exact", "answer"):
            for ex in self._val:
                check(
                    parse_strict_number(ex.answer) is not None,
                    f"task.verifier: {params.verifier!r} needs numeric answers, but reasoning-gym {params.dataset!r} "
                    f"gave {ex.answer!r} for {ex.id}; use verifier=dataset",
                )
        for i in range(min(params.train_size, 64)):  # surface generator problems now, not at step 500
            self._train_item(i)

    # ------------------------------------------------------------------ items

    def _key(self, entry: dict) -> str:
        expression = entry.get("metadata", {}).get("expression")
        if self.params.dataset in COMPACT_DATASETS and isinstance(expression, str):
            return "".join(expression.split())
        return str(entry["question"])

    def _is_val_side(self, key: str) -> bool:
        digest = hashlib.blake2b(f"{self.params.seed}\x00{key}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little") % VAL_BUCKETS == 0

    def _example(self, entry: dict, key: str, id_: str) -> Example:
        if self.chat:
            prompt = self._chat_prompt(entry)
        else:
            prompt = key + "=" if self.compact else str(entry["question"])
        answer = entry.get("answer")
        return Example(prompt=prompt, answer="" if answer is None else str(answer), id=id_)

    def _chat_prompt(self, entry: dict) -> str:
        expression = entry.get("metadata", {}).get("expression")
        if self.params.dataset in COMPACT_DATASETS and isinstance(expression, str):
            return f"Calculate {' '.join(expression.split())}. {CHAT_ANSWER_FORMAT}"
        return f"{entry['question']}\n{CHAT_ANSWER_FORMAT}"

    def _stream(self, attempt: int) -> Any:
        if attempt not in self._streams:
            seed = self.params.seed + RESERVE_SEED_OFFSET * attempt
            self._streams[attempt] = self._create(seed=seed, size=self.params.train_size)
        return self._streams[attempt]

    def _make_train_item(self, index: int) -> tuple[Example, dict | None]:
        for attempt in range(_MAX_REDRAWS):
            entry = self._stream(attempt)[index]
            key = self._key(entry)
            if not self._is_val_side(key):
                keep = entry if self.params.verifier == "dataset" else None
                return self._example(entry, key, f"train:{index}"), keep
        raise ValueError(
            f"task.dataset_config: train item {index} of reasoning-gym {self.params.dataset!r} fell "
            f"on the validation side {_MAX_REDRAWS} times; the problem space is too small"
        )

    def _make_validation(self) -> tuple[list[Example], list[dict]]:
        p = self.params
        max_draws = 64 * p.val_size + 1000
        stream = self._create(seed=p.seed + VAL_SEED_OFFSET, size=max_draws)
        examples: list[Example] = []
        entries: list[dict] = []
        # Repeated problems are kept: the set then follows the generator's distribution (dropping
        # repeats would under-weight small sub-spaces such as 2-term 1-digit sums).
        for j in range(max_draws):
            entry = stream[j]
            key = self._key(entry)
            if not self._is_val_side(key):
                continue
            examples.append(self._example(entry, key, f"val:{len(examples)}"))
            entries.append(entry)
            if len(examples) == p.val_size:
                distinct = len({e.prompt for e in examples})
                if distinct < p.val_size // 2:
                    log.warning(
                        "task %s: the validation set has only %d distinct problems among %d; "
                        "the problem space is small (widen task.dataset_config for a sharper estimate)",
                        p.name,
                        distinct,
                        p.val_size,
                    )
                return examples, entries
        raise ValueError(
            f"task.val_size: only {len(examples)} held-out problems in {max_draws} draws of "
            f"reasoning-gym {p.dataset!r}; the problem space is too small: widen task.dataset_config"
        )

    # ------------------------------------------------------------------ Task

    def train_example(self, index: int) -> Example:
        return self._train_item(index % self.params.train_size)[0]

    def num_train(self) -> int:
        return self.params.train_size

    def validation(self) -> list[Example]:
        return list(self._val)

    def sft_completion(self, example: Example) -> str:
        if not example.answer:
            raise ValueError(
                f"reasoning-gym {self.params.dataset!r} has no single reference answer for "
                f"{example.id}; it cannot be used for a supervised warm start"
            )
        if self.chat:
            return f"Answer: {example.answer}"
        return example.answer if self.compact else " " + example.answer

    def score(self, completions: Sequence[str], examples: Sequence[Example]) -> list[float | None]:
        if len(completions) != len(examples):
            raise ValueError(f"score: {len(completions)} completions for {len(examples)} examples")
        if self.params.verifier == "exact":
            return [exact_number_reward(c, e.answer) for c, e in zip(completions, examples)]
        if self.params.verifier == "answer":
            return [chat_answer_reward(c, e.answer) for c, e in zip(completions, examples)]
        try:
            return self._score_dataset(completions, examples)
        except Exception:  # a bug of ours must not crash the trainer: the batch is unscorable
            log.exception("task %s: scoring failed; %d items unscored", self.name, len(completions))
            return [None] * len(completions)

    def _entry(self, example: Example) -> dict | None:
        try:
            split, index = example.id.split(":")
            if split == "val":
                return self._val_entries[int(index)]
            if split == "train":
                return self._train_item(int(index) % self.params.train_size)[1]
        except (ValueError, IndexError, AttributeError):
            pass
        return None

    def _score_dataset(self, completions: Sequence[str], examples: Sequence[Example]) -> list[float | None]:
        rewards: list[float | None] = [None] * len(completions)
        payloads, where = [], []
        for i, (completion, example) in enumerate(zip(completions, examples)):
            try:
                entry = self._entry(example)
                if entry is None:
                    continue  # not one of ours: unscorable
                if not isinstance(completion, str) or len(completion) > _MAX_DATASET_COMPLETION_CHARS:
                    rewards[i] = 0.0
                    continue
                payloads.append((completion.strip(), entry))
                where.append(i)
            except Exception:
                log.exception("task %s: could not prepare item %d for scoring", self.name, i)
        if payloads:
            for i, reward in zip(where, self.verifier_pool().map(payloads)):
                rewards[i] = reward
        return rewards

    def _new_verifier_pool(self) -> VerifierPool:
        from .verifiers import init_reasoning_gym, reasoning_gym_reward

        kwargs = dict(self.params.dataset_config, seed=self.params.seed, size=self.params.train_size)
        return VerifierPool(
            reasoning_gym_reward,
            num_workers=self.params.num_workers,
            timeout_s=self.params.timeout_s,
            initializer=init_reasoning_gym,
            initargs=(self.params.dataset, kwargs),
        )

    def info(self) -> dict[str, Any]:
        p = self.params
        return {
            "name": p.name,
            "kind": p.kind,
            "dataset": p.dataset,
            "prompt_format": self.prompt_format,
            "verifier": p.verifier,
            "num_train": p.train_size,
            "num_val": len(self._val),
            "val_side_fraction": 1 / VAL_BUCKETS,
        }
