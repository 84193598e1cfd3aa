"""Math word problems from a local file, verified with math-verify (``task.kind: math_file``).

Sources: JSON Lines (``.jsonl``), a JSON array (``.json``), Parquet (``.parquet``), or a
``datasets.save_to_disk`` folder of one split (only if the optional ``datasets`` package is installed).
Nothing is downloaded. ``question_key`` / ``answer_key`` name the columns (``val_question_key`` /
``val_answer_key`` those of ``val_path`` when it is another dataset, e.g. training on DeepMath and
validating on MATH-500); a list-valued answer cell (OlympiadBench's ``final_answer``) is joined with
", ". The prompt is ``prompt_template`` with ``{question}`` replaced (no other braces are interpreted,
so LaTeX is safe). Presets for the usual datasets: ``conf/task/{gsm8k,math500,amc,olympiadbench,deepmath}``.

Gold answers come from the answer column by ``answer_format`` (GSM8K ``#### 72``, the last
``\\boxed{...}`` with nested braces, or the plain field; ``auto`` picks per row; see
:mod:`~rlvr_scaling.tasks.answers`). Rows without a gold answer are dropped with a warning. The gold
completion for the warm start is the whole answer field (the worked solution, for GSM8K and MATH).

Split: ``val_path`` if given (a seeded sample of ``val_size`` rows if it has more), else a seeded
held-out slice of ``val_size`` rows of ``path``. Training rows whose prompt text also appears in the
validation set are dropped, so the two are disjoint by prompt. ``train_example(i)`` walks a seeded
permutation of the remaining rows.

Reward: the model's final answer is extracted in-process (last ``\\boxed{}``, else ``#### x``, else a
bare answer, else the last ``$...$``, else the last number) and compared with math-verify,
``verify(parse(gold), parse(answer))`` with both wrapped in ``$...$``, in worker processes under
``timeout_s`` per item: 1.0 / 0.0, ``None`` on a time-out or crash. No answer found -> 0.0. When gold
and answer are both plain integers (most GSM8K responses) they are compared in-process instead, which
is what math-verify would decide, without the round trip.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from .answers import ANSWER_FORMATS, MAX_ANSWER_CHARS, extract_final_answer, extract_gold
from .base import Example, Task, check, register_task
from .pool import PooledVerifier, VerifierPool

log = logging.getLogger(__name__)

FILE_SUFFIXES = (".jsonl", ".json", ".parquet")
_INTEGER = re.compile(r"-?[0-9]{1,300}")


@dataclass  # not frozen: Hydra overrides write into it
class MathFileTaskParams:
    """Question/answer rows from a local file; rewards by math-verify."""

    name: str = "gsm8k_local"  # display name of the preset (run names, logs)
    kind: str = "math_file"  # registry key in TASKS
    path: str = ""  # .jsonl / .json / .parquet file, or a datasets.save_to_disk folder
    val_path: Optional[str] = None  # held-out file; null = a seeded slice of `path`  # noqa: UP045
    question_key: str = "question"  # column holding the question
    answer_key: str = "answer"  # column holding the answer / worked solution
    val_question_key: Optional[str] = None  # question column of val_path; null = question_key  # noqa: UP045
    val_answer_key: Optional[str] = None  # answer column of val_path; null = answer_key  # noqa: UP045
    prompt_template: str = "Question: {question}\nAnswer:"  # must contain {question}
    answer_format: str = "auto"  # auto | gsm8k ("#### 72") | boxed ("\boxed{..}") | plain
    val_size: int = 256  # validation rows
    seed: int = 0  # split and training order
    timeout_s: float = 2.0  # per-item math-verify time limit (seconds)
    num_workers: int = 2  # math-verify worker processes

    def validate(self, prefix: str = "task") -> None:
        check(
            bool(self.path),
            f"{prefix}.path must be set (a .jsonl, .json or .parquet file, or a "
            "datasets.save_to_disk folder)",
        )
        _check_source(self.path, f"{prefix}.path", self, prefix)
        if self.val_path:
            _check_source(self.val_path, f"{prefix}.val_path", self, prefix, val=True)
        check(
            "{question}" in self.prompt_template,
            f"{prefix}.prompt_template must contain {{question}} (got {self.prompt_template!r})",
        )
        check(
            self.answer_format in ANSWER_FORMATS,
            f"{prefix}.answer_format must be one of {', '.join(ANSWER_FORMATS)} (got {self.answer_format!r})",
        )
        check(self.val_size > 0, f"{prefix}.val_size must be > 0 (got {self.val_size})")
        check(self.seed >= 0, f"{prefix}.seed must be >= 0 (got {self.seed})")
        check(self.timeout_s > 0, f"{prefix}.timeout_s must be > 0 (got {self.timeout_s})")
        check(self.num_workers >= 1, f"{prefix}.num_workers must be >= 1 (got {self.num_workers})")


# ---------------------------------------------------------------------- reading files


def _datasets_available() -> bool:
    try:
        import datasets  # noqa: F401
    except ImportError:
        return False
    return True


def _check_source(path: str, label: str, params: MathFileTaskParams, prefix: str, val: bool = False) -> None:
    """Cheap checks: the file exists, has a known format, and has the two columns."""
    if os.path.isdir(path):
        check(
            _datasets_available(),
            f"{label}: {path} is a folder (datasets.save_to_disk format) but the optional "
            "'datasets' package is not installed; install it or convert to JSONL/Parquet",
        )
        return
    check(os.path.isfile(path), f"{label}: file not found: {path}")
    check(
        path.endswith(FILE_SUFFIXES),
        f"{label}: {path}: unsupported format; use {', '.join(FILE_SUFFIXES)} "
        "or a datasets.save_to_disk folder",
    )
    columns = _columns(path, label)
    for key_name in ("question_key", "answer_key"):
        key = getattr(params, key_name)
        if val and getattr(params, f"val_{key_name}"):
            key_name = f"val_{key_name}"
            key = getattr(params, key_name)
        check(
            key in columns,
            f"{prefix}.{key_name}: column {key!r} not in {path} (columns: {', '.join(map(str, columns))})",
        )


def _columns(path: str, label: str) -> list[str]:
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        try:
            return list(pq.read_schema(path).names)
        except Exception as err:
            check(False, f"{label}: {path}: not a readable Parquet file ({err})")
    rows = _read_json(path, label, limit=1)
    check(bool(rows), f"{label}: {path} holds no rows")
    return list(rows[0])


def _read_json(path: str, label: str, limit: int | None = None) -> list[dict]:
    rows: list[dict] = []
    with open(path, encoding="utf-8") as f:
        if path.endswith(".json"):
            text = f.read()
            try:
                data = json.loads(text)
                check(isinstance(data, list), f"{label}: {path}: expected a JSON array of objects")
                rows = data[:limit] if limit else data
            except json.JSONDecodeError:  # JSON Lines in a .json file
                rows = _parse_lines(text.splitlines(), path, label, limit)
        else:
            rows = _parse_lines(f, path, label, limit)
    for n, row in enumerate(rows):
        check(isinstance(row, dict), f"{label}: {path}: row {n + 1} is not a JSON object")
    return rows


def _parse_lines(lines, path: str, label: str, limit: int | None) -> list[dict]:
    rows = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as err:
            check(False, f"{label}: {path} line {n} is not valid JSON ({err})")
        if limit and len(rows) >= limit:
            break
    return rows


def read_rows(
    path: str, question_key: str, answer_key: str, label: str = "task.path"
) -> list[tuple[str, str]]:
    """``(question, answer)`` string pairs of a file; rows missing either value are skipped."""
    if os.path.isdir(path):
        import datasets

        data = datasets.load_from_disk(path)
        if not isinstance(data, datasets.Dataset):  # (the message may only be built for a DatasetDict)
            check(
                False,
                f"{label}: {path} holds several splits ({', '.join(data)}); point at one split's folder",
            )
        for key in (question_key, answer_key):
            check(
                key in data.column_names,
                f"{label}: column {key!r} not in {path} (columns: {', '.join(data.column_names)})",
            )
        columns = {question_key: data[question_key], answer_key: data[answer_key]}
    elif path.endswith(".parquet"):
        import pyarrow.parquet as pq

        columns = pq.read_table(path, columns=[question_key, answer_key]).to_pydict()
    else:
        rows = _read_json(path, label)
        columns = {k: [row.get(k) for row in rows] for k in (question_key, answer_key)}
    return [
        (str(q), _answer_text(a))
        for q, a in zip(columns[question_key], columns[answer_key])
        if q is not None and a is not None
    ]


def _answer_text(value: Any) -> str:
    """An answer cell as text: lists (OlympiadBench's ``final_answer``) joined with ", "."""
    if hasattr(value, "tolist"):  # numpy arrays from Parquet readers
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


# ---------------------------------------------------------------------- the task


@dataclass(frozen=True)
class _Row:
    prompt: str
    gold: str
    solution: str  # the full answer field


@register_task("math_file")
class MathFileTask(PooledVerifier, Task):
    Params = MathFileTaskParams

    def __init__(self, params: MathFileTaskParams):
        self.params = params = copy.deepcopy(params)  # params are mutable (Hydra); keep our own copy
        self.name = params.name
        rng = random.Random(params.seed)
        rows = self._load(params.path, "task.path")
        if params.val_path:
            val_rows = self._load(
                params.val_path,
                "task.val_path",
                params.val_question_key or params.question_key,
                params.val_answer_key or params.answer_key,
            )
            if len(val_rows) > params.val_size:
                val_rows = [val_rows[i] for i in sorted(rng.sample(range(len(val_rows)), params.val_size))]
            train_rows = rows
        else:
            check(
                len(rows) > params.val_size,
                f"task.val_size ({params.val_size}) must be smaller than the "
                f"{len(rows)} usable rows of task.path when task.val_path is not set",
            )
            order = list(range(len(rows)))
            rng.shuffle(order)
            val_rows = [rows[i] for i in order[: params.val_size]]
            train_rows = [rows[i] for i in order[params.val_size :]]
        unique: dict[str, _Row] = {}
        for row in val_rows:  # distinct prompts, first occurrence kept
            unique.setdefault(row.prompt, row)
        val_rows = list(unique.values())
        seen = set(unique)
        n_before = len(train_rows)
        train_rows = [r for r in train_rows if r.prompt not in seen]
        if len(train_rows) < n_before:
            log.warning(
                "task %s: dropped %d training rows whose prompt is in the validation set",
                params.name,
                n_before - len(train_rows),
            )
        check(bool(train_rows), "task.path: no training rows left after holding out the validation set")
        order = list(range(len(train_rows)))
        random.Random(params.seed + 1).shuffle(order)
        self._train = [train_rows[i] for i in order]
        self._val_rows = val_rows
        self._val = [Example(r.prompt, r.gold, f"val:{j}") for j, r in enumerate(val_rows)]

    def _load(
        self, path: str, label: str, question_key: str | None = None, answer_key: str | None = None
    ) -> list[_Row]:
        p = self.params
        question_key, answer_key = question_key or p.question_key, answer_key or p.answer_key
        out, dropped = [], 0
        for question, answer in read_rows(path, question_key, answer_key, label):
            gold = extract_gold(answer, p.answer_format)
            if not gold or len(gold) > MAX_ANSWER_CHARS:
                dropped += 1
                continue
            out.append(_Row(p.prompt_template.replace("{question}", question), gold, answer))
        check(
            bool(out),
            f"task.answer_format: no gold answer found in any row of {path} "
            f"(answer_format={p.answer_format!r}, answer_key={answer_key!r})",
        )
        if dropped:
            log.warning(
                "task %s: %s: dropped %d of %d rows without a gold answer (answer_format=%r)",
                p.name,
                path,
                dropped,
                dropped + len(out),
                p.answer_format,
            )
        return out

    # ------------------------------------------------------------------ Task

    def train_example(self, index: int) -> Example:
        i = index % len(self._train)
        row = self._train[i]
        return Example(row.prompt, row.gold, f"train:{i}")

    def num_train(self) -> int:
        return len(self._train)

    def validation(self) -> list[Example]:
        return list(self._val)

    def sft_completion(self, example: Example) -> str:
        row = self._row(example)
        solution = row.solution.strip() if row is not None else example.answer
        return solution if example.prompt[-1:].isspace() else " " + solution

    def _row(self, example: Example) -> _Row | None:
        try:
            split, index = example.id.split(":")
            row = (self._train if split == "train" else self._val_rows)[int(index)]
        except (ValueError, IndexError, AttributeError):
            return None
        return row if row.prompt == example.prompt else None

    def score(self, completions: Sequence[str], examples: Sequence[Example]) -> list[float | None]:
        if len(completions) != len(examples):
            raise ValueError(f"score: {len(completions)} completions for {len(examples)} examples")
        rewards: list[float | None] = [None] * len(completions)
        try:
            payloads, where = [], []
            for i, (completion, example) in enumerate(zip(completions, examples)):
                answer = extract_final_answer(completion) if isinstance(completion, str) else None
                if answer is None:
                    rewards[i] = 0.0
                    continue
                if _INTEGER.fullmatch(answer) and _INTEGER.fullmatch(example.answer):
                    rewards[i] = float(
                        int(answer) == int(example.answer)
                    )  # what math-verify says, ~100x faster
                    continue
                payloads.append((example.answer, answer))
                where.append(i)
            if payloads:
                for i, reward in zip(where, self.verifier_pool().map(payloads)):
                    rewards[i] = reward
        except Exception:  # a bug of ours must not crash the trainer: the rest stays unscored
            log.exception("task %s: scoring failed", self.name)
        return rewards

    def _new_verifier_pool(self) -> VerifierPool:
        from .verifiers import init_math_verify, math_verify_reward

        return VerifierPool(
            math_verify_reward,
            num_workers=self.params.num_workers,
            timeout_s=self.params.timeout_s,
            initializer=init_math_verify,
        )

    def info(self) -> dict[str, Any]:
        p = self.params
        return {
            "name": p.name,
            "kind": p.kind,
            "path": p.path,
            "val_path": p.val_path,
            "answer_format": p.answer_format,
            "num_train": len(self._train),
            "num_val": len(self._val),
        }
