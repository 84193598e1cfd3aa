"""Compositions of character-level string transforms (``task.kind: compose``), generated locally.

A problem names transforms by one upper-case letter each and a lower-case string; the transforms
apply left to right and the answer is the final string::

    RU:abcde=    ->  edcba (R: reverse)  ->  fedcb (U: shift every letter by +1)  ->  answer "fedcb"
    completion (task.scratchpad=tagged):  Redcba>Ufedcb

The transform set (:data:`TRANSFORMS`; ``task.transforms`` picks a subset):

- ``R`` reverse; ``L`` rotate left by one (``abcde`` -> ``bcdea``); ``T`` rotate right by one;
- ``S`` swap adjacent pairs (``abcde`` -> ``badce``; an odd last letter stays);
- ``U`` / ``D`` shift every letter by +1 / -1 within ``task.alphabet`` (cyclic: the last letter
  shifts to the first); ``M`` mirrors every letter in the alphabet (``a`` <-> ``h``, ``b`` <-> ``g``).

``R L T S`` are position transforms (:data:`POSITION`: they permute the positions); ``U D M`` are
letter-wise, so each commutes with every position transform.

**Compositions and splits.** A composition is a sequence of transforms with neighbours different and
no two neighbours undoing each other (``LT``, ``UD``: the identity; :func:`compositions`): 26 depth-2
ones with the six transforms. A seeded draw puts ``task.heldout_pairs`` unordered pairs ``{a, b}`` on
the held-out side *in both orders* (a letter shift commutes with every position transform, so a pair
trained in one order would give the other order's function away), each transform keeping at least one
training pair in each position (:func:`split_pairs`). RL prompts (``train_example``) are depth-2
problems over the *training* pairs only; ``validation()`` (``eval/accuracy``) are depth-2 problems
over the *held-out* pairs only; ``extra_validation()["depth3"]`` (``eval/depth3_accuracy``) are
depth-3 problems, never trained on. ``task.form`` restricts the compositions (:func:`compositions`):
``any`` (the default) as above; ``mixed``: one position transform and one letter-wise one per pair, in
either order (depth 3: letter-wise, position, letter-wise); ``letter_first``: letter-wise transforms
first, the one position transform last. Strings are drawn afresh per item (length ``min_len`` ..
``max_len`` over ``alphabet``); the splits are disjoint by composition, and therefore by prompt text.
**Completions** (``task.scratchpad``, :func:`scratchpad_completion`): by default (``tagged``) the
completion shows its work, each step the code of its transform and the string that results,
``>``-separated (``RU:abcde=`` -> ``Redcba>Ufedcb``); the reward reads the last segment
(:func:`final_segment_reward`). ``none`` is the answer alone; ``steps`` and ``rewrite`` are other
written-out forms (docs/tasks.md, *What was tried*). :meth:`ComposeTaskParams.completion_chars` is
the longest gold completion, which ``validate()`` checks ``max_new_tokens`` against.

**Warm start** (``warm_start_example``): the supervised warm start sees the *atomic* transforms
(``R:abcde=`` -> ``Redcba``) and, in a share ``warm_start_depth2`` of its examples (1 %), depth-2
problems over the training pairs written out step by step, never a held-out pair and never depth 3.
RL must then learn to compose: the held-out pairs are solved only by a model that applies two skills
it knows in sequence, which the warm start shows rarely and never for those pairs.

Every item is a pure function of ``(seed, split, index)`` (a seeded ``random.Random`` per item): no
download, no state, the same problems on every machine. Reward: the last segment of the stripped
completion (the whole of it with ``scratchpad: none``) must equal the answer exactly.
"""

from __future__ import annotations

import copy
import functools
import itertools
import random
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .base import Example, Task, check, register_task

MAX_ANSWER_CHARS = 256  # longer stripped completions score 0 without comparing
STEP_SEPARATOR = ">"  # between the intermediate strings of a scratchpad completion (task.scratchpad)


def _rotate_left(s: str) -> str:
    return s[1:] + s[:1]


def _rotate_right(s: str) -> str:
    return s[-1:] + s[:-1]


def _swap_pairs(s: str) -> str:
    out = list(s)
    for i in range(0, len(s) - 1, 2):
        out[i], out[i + 1] = out[i + 1], out[i]
    return "".join(out)


def _shift(s: str, alphabet: str, k: int) -> str:
    n = len(alphabet)
    return "".join(alphabet[(alphabet.index(c) + k) % n] for c in s)


def _mirror(s: str, alphabet: str) -> str:
    n = len(alphabet)
    return "".join(alphabet[n - 1 - alphabet.index(c)] for c in s)


# code -> (description, function of (string, alphabet))
TRANSFORMS: dict[str, tuple[str, Callable[[str, str], str]]] = {
    "R": ("reverse", lambda s, a: s[::-1]),
    "L": ("rotate left by 1", lambda s, a: _rotate_left(s)),
    "T": ("rotate right by 1", lambda s, a: _rotate_right(s)),
    "S": ("swap adjacent pairs", lambda s, a: _swap_pairs(s)),
    "U": ("shift letters by +1", lambda s, a: _shift(s, a, 1)),
    "D": ("shift letters by -1", lambda s, a: _shift(s, a, -1)),
    "M": ("mirror letters in the alphabet", _mirror),
}
# Transforms that move letters (permutations of positions); the others map each letter on its own
# (letter-wise), so a letter-wise transform commutes with every position transform.
POSITION = frozenset("RLTS")


def apply_transforms(codes: str, text: str, alphabet: str) -> str:
    """Apply the transforms named by ``codes`` to ``text``, left to right."""
    for code in codes:
        text = TRANSFORMS[code][1](text, alphabet)
    return text


def exact_string_reward(completion: str, gold: str) -> float:
    """1.0 if ``completion.strip()`` equals ``gold`` character for character, else 0.0. Never raises."""
    try:
        if not isinstance(completion, str) or len(completion) > MAX_ANSWER_CHARS:
            return 0.0
        return 1.0 if completion.strip() == gold else 0.0
    except Exception:  # defensive: the contract is "never raises"
        return 0.0


def final_segment_reward(completion: str, gold: str, separator: str = STEP_SEPARATOR) -> float:
    """:func:`exact_string_reward` on the last ``separator``-separated segment of the completion,
    without the transform code a tagged step starts with (the answer of a scratchpad completion:
    ``edcba>fedcb``, ``Redcba>Ufedcb``, or with ``=``, ``U:edcba=fedcb``; a completion without separator
    is its own last segment). Never raises."""
    if not isinstance(completion, str) or len(completion) > MAX_ANSWER_CHARS:
        return 0.0
    last = completion.strip().rsplit(separator, 1)[-1]
    return exact_string_reward(last.lstrip(string.ascii_uppercase), gold)


# none: the answer alone; steps / tagged: every intermediate string, ">"-separated, tagged with its
# transform's code; rewrite: the problem rewritten one transform at a time (scratchpad_completion)
SCRATCHPADS = ("none", "steps", "tagged", "rewrite")


def scratchpad_completion(codes: str, text: str, alphabet: str, mode: str = "steps") -> str:
    """The completion that shows its work (``mode`` from :data:`SCRATCHPADS`; ``RU`` on ``abcde``):

    - ``steps``: every intermediate string, ``>``-separated: ``edcba>fedcb``;
    - ``tagged``: each after its transform's code: ``Redcba>Ufedcb``;
    - ``rewrite``: the problem left after each transform, written as a problem, then the answer:
      ``U:edcba=fedcb`` (``RSU:dehbe=`` -> ``SU:ebhed=U:beehd=cffae``): one rewrite rule, the same at
      every depth, whose last step is an atomic problem;
    - ``none``: the answer alone."""
    if mode == "none":
        return apply_transforms(codes, text, alphabet)
    if mode == "rewrite":
        out = []
        for k, code in enumerate(codes):
            text = TRANSFORMS[code][1](text, alphabet)
            out.append(f"{codes[k + 1 :]}:{text}=" if k + 1 < len(codes) else text)
        return "".join(out)
    steps = []
    for code in codes:
        text = TRANSFORMS[code][1](text, alphabet)
        steps.append(code + text if mode == "tagged" else text)
    return STEP_SEPARATOR.join(steps)


def _default_transforms() -> list[str]:
    return list("RLTSUD")


@dataclass  # not frozen: Hydra overrides write into it
class ComposeTaskParams:
    """Compositions of string transforms: the transform set, strings, splits and warm-start mix."""

    name: str = "compose"  # display name of the preset (run names, logs)
    kind: str = "compose"  # registry key in TASKS
    transforms: list[str] = field(default_factory=_default_transforms)  # codes from TRANSFORMS
    alphabet: str = "abcdefgh"  # letters of the strings (and the cycle of the shifts)
    min_len: int = 4
    max_len: int = 5
    # which compositions exist (compositions(form=...)): any | mixed | letter_first
    form: str = "any"
    heldout_pairs: int = 4  # pairs {a, b} of transforms kept out of training, in both orders
    warm_start_depth2: float = 0.01  # share of warm-start examples that are training-pair compositions
    # none: the completion is the answer; steps: every intermediate string ("RU:abcde=" ->
    # "edcba>fedcb"); tagged: each after its code ("Redcba>Ufedcb"); rewrite: the problem rewritten
    # ("U:edcba=fedcb"). The reward reads the last segment (scratchpad_completion).
    scratchpad: str = "tagged"
    seed: int = 0  # problem stream and the held-out draw
    train_size: int = 50_000  # RL pool; train_example(i) wraps around at this size
    val_size: int = 256  # held-out depth-2 problems (eval/accuracy)
    depth3_size: int = 128  # depth-3 problems (eval/depth3_accuracy); 0 = none

    def completion_chars(self, depth: int) -> int:
        """The longest gold completion of a depth-``depth`` problem, in characters (= tokens of the
        embedded model's character tokenizer): what ``max_new_tokens`` must allow."""
        mode = self.scratchpad
        if mode == "none":
            return self.max_len
        if mode == "rewrite":
            return sum(depth - k - 1 + self.max_len + 2 for k in range(depth - 1)) + self.max_len
        return depth * (self.max_len + (mode == "tagged")) + depth - 1

    def validate(self, prefix: str = "task") -> None:
        known = ", ".join(TRANSFORMS)
        for code in self.transforms:
            check(code in TRANSFORMS, f"{prefix}.transforms: unknown transform {code!r}; valid: {known}")
        check(
            len(set(self.transforms)) == len(self.transforms) >= 3,
            f"{prefix}.transforms: at least 3 different transforms needed (got {list(self.transforms)})",
        )
        check(
            len(self.alphabet) >= 2
            and len(set(self.alphabet)) == len(self.alphabet)
            and all(c in string.ascii_lowercase for c in self.alphabet),
            f"{prefix}.alphabet must be >= 2 different lower-case ASCII letters (got {self.alphabet!r})",
        )
        check(
            2 <= self.min_len <= self.max_len <= 32,
            f"{prefix}.min_len / {prefix}.max_len: need 2 <= min_len <= max_len <= 32 "
            f"(got {self.min_len}, {self.max_len})",
        )
        check(
            self.scratchpad in SCRATCHPADS,
            f"{prefix}.scratchpad must be one of {', '.join(SCRATCHPADS)} (got {self.scratchpad!r})",
        )
        check(self.form in FORMS, f"{prefix}.form must be one of {', '.join(FORMS)} (got {self.form!r})")
        n_pairs = len({"".join(sorted(p)) for p in compositions(self.transforms, 2, form=self.form)})
        check(
            1 <= self.heldout_pairs < n_pairs,
            f"{prefix}.heldout_pairs must be in [1, {n_pairs - 1}] for {len(self.transforms)} transforms "
            f"({n_pairs} unordered pairs; got {self.heldout_pairs})",
        )
        check(
            0 <= self.warm_start_depth2 <= 1,
            f"{prefix}.warm_start_depth2 must be in [0, 1] (got {self.warm_start_depth2})",
        )
        check(self.seed >= 0, f"{prefix}.seed must be >= 0 (got {self.seed})")
        check(self.train_size > 0, f"{prefix}.train_size must be > 0 (got {self.train_size})")
        check(self.val_size > 0, f"{prefix}.val_size must be > 0 (got {self.val_size})")
        check(self.depth3_size >= 0, f"{prefix}.depth3_size must be >= 0 (got {self.depth3_size})")
        try:
            split_pairs(self.transforms, self.heldout_pairs, self.seed, self.form)
        except ValueError as err:
            check(False, f"{prefix}.heldout_pairs: {err}")


def is_identity(codes: str, alphabet: str, max_len: int) -> bool:
    """Whether the composition ``codes`` maps every string of length 2 .. ``max_len`` to itself
    (checked on strings whose letters are all different, or on the alphabet cycled)."""
    for n in range(2, max_len + 1):
        text = "".join(alphabet[i % len(alphabet)] for i in range(n))
        if apply_transforms(codes, text, alphabet) != text:
            return False
    return True


FORMS = ("any", "mixed", "letter_first")


def compositions(
    transforms: Sequence[str], depth: int, alphabet: str = "abcdefgh", max_len: int = 8, form: str = "any"
) -> list[str]:
    """The compositions of ``depth`` transforms of the given ``form``, in sorted order. Always:
    neighbours different and no two neighbours undoing each other (``LT``, ``UD``: the identity).

    - ``any``: nothing else;
    - ``mixed``: at most one position transform (:data:`POSITION`), never two letter-wise ones in a
      row (depth 2: one of each kind, in either order; depth 3: letter-wise, position, letter-wise);
    - ``letter_first``: exactly one position transform, last (depth 2: letter-wise then position;
      depth 3: two letter-wise then position)."""
    if form not in FORMS:
        raise ValueError(f"unknown composition form {form!r}; valid: {', '.join(FORMS)}")
    out = []
    for t in itertools.product(transforms, repeat=depth):
        position = [c in POSITION for c in t]
        if form == "mixed" and (
            sum(position) > 1 or any(not a and not b for a, b in itertools.pairwise(position))
        ):
            continue
        if form == "letter_first" and position != [False] * (depth - 1) + [True]:
            continue
        if all(a != b and not is_identity(a + b, alphabet, max_len) for a, b in itertools.pairwise(t)):
            out.append("".join(t))
    return sorted(out)


def split_pairs(
    transforms: Sequence[str], heldout: int, seed: int, form: str = "any"
) -> tuple[list[str], list[str]]:
    """``(training pairs, held-out pairs)`` of ``compositions(transforms, 2, form=form)``: ``heldout``
    unordered pairs ``{a, b}`` of transforms are drawn (seeded) for the held-out side *in both orders*
    where both occur (``ab`` and ``ba``; so a held-out composition is never trained as its mirror
    either, which for commuting transforms such as ``RU`` / ``UR`` would be the same function), such
    that every transform keeps a training pair in each place (first, second) it takes in some pair.
    Both lists sorted."""
    pairs = compositions(transforms, 2, form=form)
    unordered = sorted({"".join(sorted(p)) for p in pairs})
    places = {(t, k) for p in pairs for k, t in enumerate(p)}
    rng = random.Random(f"compose-split:{seed}")
    for _ in range(10_000):
        held_sets = set(rng.sample(unordered, heldout))
        held = [p for p in pairs if "".join(sorted(p)) in held_sets]
        train = [p for p in pairs if p not in held]
        if places == {(t, k) for p in train for k, t in enumerate(p)}:
            return sorted(train), sorted(held)
    raise ValueError(f"no draw of {heldout} of {len(unordered)} pairs keeps every transform trained")


@register_task("compose")
class ComposeTask(Task):
    Params = ComposeTaskParams

    def __init__(self, params: ComposeTaskParams):
        self.params = params = copy.deepcopy(params)  # params are mutable (Hydra); keep our own copy
        self.name = params.name
        self.transforms = list(params.transforms)
        self.train_pairs, self.heldout_pairs = split_pairs(
            self.transforms, params.heldout_pairs, params.seed, params.form
        )
        self.triples = compositions(self.transforms, 3, form=params.form)
        self._train_item = functools.lru_cache(maxsize=65536)(self._make_train_item)
        self._val = [self._item("val", j, self.heldout_pairs, f"val:{j}") for j in range(params.val_size)]
        self._depth3 = [
            self._item("depth3", j, self.triples, f"depth3:{j}") for j in range(params.depth3_size)
        ]

    # ------------------------------------------------------------------ items

    def _item(self, split: str, index: int, compositions: Sequence[str], id_: str) -> Example:
        p = self.params
        rng = random.Random(f"compose:{p.seed}:{split}:{index}")
        codes = rng.choice(compositions)
        text = "".join(rng.choice(p.alphabet) for _ in range(rng.randint(p.min_len, p.max_len)))
        return Example(prompt=f"{codes}:{text}=", answer=apply_transforms(codes, text, p.alphabet), id=id_)

    def _make_train_item(self, index: int) -> Example:
        return self._item("train", index, self.train_pairs, f"train:{index}")

    @staticmethod
    def codes_of(example: Example) -> str:
        """The transform codes of a problem (``"RU"`` for ``RU:abcde=``)."""
        return example.prompt.split(":", 1)[0]

    # ------------------------------------------------------------------ Task

    def train_example(self, index: int) -> Example:
        return self._train_item(index % self.params.train_size)

    def num_train(self) -> int:
        return self.params.train_size

    def validation(self) -> list[Example]:
        return list(self._val)

    def extra_validation(self) -> dict[str, list[Example]]:
        return {"depth3": list(self._depth3)} if self._depth3 else {}

    def warm_start_example(self, index: int) -> Example:
        """Warm-start item ``index``: an atomic transform, or (share ``warm_start_depth2``, decided per
        index) a training-pair composition; never a held-out pair, never depth 3."""
        p = self.params
        rng = random.Random(f"compose:{p.seed}:warm:{index}")
        if rng.random() < p.warm_start_depth2:
            return self._item("warm2", index, self.train_pairs, f"warm:{index}")
        return self._item("warm1", index, self.transforms, f"warm:{index}")

    def sft_completion(self, example: Example) -> str:
        codes, text = example.prompt.rstrip("=").split(":", 1)
        return scratchpad_completion(codes, text, self.params.alphabet, self.params.scratchpad)

    def score(self, completions: Sequence[str], examples: Sequence[Example]) -> list[float | None]:
        if len(completions) != len(examples):
            raise ValueError(f"score: {len(completions)} completions for {len(examples)} examples")
        mode = self.params.scratchpad
        if mode == "none":
            return [exact_string_reward(c, e.answer) for c, e in zip(completions, examples)]
        sep = "=" if mode == "rewrite" else STEP_SEPARATOR
        return [final_segment_reward(c, e.answer, sep) for c, e in zip(completions, examples)]

    def info(self) -> dict[str, Any]:
        p = self.params
        return {
            "name": p.name,
            "kind": p.kind,
            "transforms": "".join(self.transforms),
            "train_pairs": " ".join(self.train_pairs),
            "heldout_pairs": " ".join(self.heldout_pairs),
            "num_train": p.train_size,
            "num_val": len(self._val),
            "num_depth3": len(self._depth3),
            "scratchpad": p.scratchpad,
        }
