"""task=compose: the transforms do what their names say, items are a pure function of the seed, the
held-out compositions never reach RL prompts or the warm start, the reward is exact, and the preset
composes with Hydra (its own model and eval presets, command-line choices still winning)."""

from __future__ import annotations

import pytest

from rlvr_scaling.cli.compose import compose
from rlvr_scaling.config import validate
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.tasks import ComposeTask, ComposeTaskParams, build_task
from rlvr_scaling.tasks.compose import (
    POSITION,
    TRANSFORMS,
    apply_transforms,
    compositions,
    exact_string_reward,
    final_segment_reward,
    scratchpad_completion,
    split_pairs,
)


@pytest.fixture(scope="module")
def task():
    return build_task(compose(["task=compose"]).task)


@pytest.mark.parametrize(
    "codes,text,expected",
    [
        ("R", "abcde", "edcba"),
        ("L", "abcde", "bcdea"),
        ("T", "abcde", "eabcd"),
        ("S", "abcde", "badce"),
        ("S", "abcd", "badc"),
        ("U", "abgh", "bcha"),  # h wraps to a in the alphabet a..h
        ("D", "abgh", "hafg"),
        ("M", "abgh", "hgba"),  # a <-> h, b <-> g in the alphabet a..h
        ("UM", "abgh", "gfah"),
        ("RU", "abcde", "fedcb"),
        ("LS", "abcde", "cbeda"),  # bcdea, then swap pairs
        ("SL", "abcde", "adceb"),  # badce, then rotate left
        ("RLT", "abcd", "dcba"),
    ],
)
def test_transforms_do_what_they_say(codes, text, expected):
    assert apply_transforms(codes, text, "abcdefgh") == expected


def test_pairs_exclude_repeats_and_inverses():
    pairs = compositions(list("RLTSUD"), 2)
    assert "RR" not in pairs and {"LT", "TL", "UD", "DU"}.isdisjoint(pairs)
    assert len(pairs) == 6 * 5 - 4
    triples = compositions(list("RLTSUD"), 3)
    assert all(t[:2] in pairs and t[1:] in pairs for t in triples)
    assert len(triples) == len(set(triples)) > 100
    assert compositions(list(TRANSFORMS), 2) == compositions(list(TRANSFORMS), 2, form="any")
    assert len(compositions(list(TRANSFORMS), 2)) == 7 * 6 - 4


def test_forms_with_one_position_transform():
    """mixed: one position and one letter-wise transform per pair, in both orders, depth 3 letter-wise,
    position, letter-wise; letter_first: letter-wise transforms first, the one position transform last."""
    t, letter = list(TRANSFORMS), [c for c in TRANSFORMS if c not in POSITION]
    assert POSITION == set("RLTS") and letter == ["U", "D", "M"]
    mixed = compositions(t, 2, form="mixed")
    assert len(mixed) == 4 * 3 * 2 and all(sum(c in POSITION for c in p) == 1 for p in mixed)
    triples = compositions(t, 3, form="mixed")
    assert len(triples) == 3 * 4 * 3 and all(p[1] in POSITION for p in triples)
    assert all(p[0] not in POSITION and p[2] not in POSITION for p in triples)
    first = compositions(t, 2, form="letter_first")
    assert len(first) == 12 and all(p[0] in letter and p[1] in POSITION for p in first)
    triples = compositions(t, 3, form="letter_first")
    assert len(triples) == 4 * 4 and all(p[2] in POSITION and p[:2] not in ("UD", "DU") for p in triples)
    for form, pairs in (("mixed", mixed), ("letter_first", first)):
        train, held = split_pairs(t, 4, 0, form)
        assert sorted(train + held) == pairs and all(p[::-1] in held for p in held if p[::-1] in pairs)
        assert {(c, k) for p in train for k, c in enumerate(p)} == {
            (c, k) for p in pairs for k, c in enumerate(p)
        }
    assert split_pairs(list("RLTSUD"), 4, 0) == split_pairs(list("RLTSUD"), 4, 0, "any")
    with pytest.raises(ConfigError, match="heldout_pairs"):  # 3 of 8 pairs left cannot cover 4 positions
        ComposeTaskParams(form="letter_first", heldout_pairs=5).validate()


def test_items_are_a_pure_function_of_the_seed(task):
    again = build_task(compose(["task=compose"]).task)
    for i in (0, 1, 777, 49_999):
        assert again.train_example(i) == task.train_example(i)
        assert again.warm_start_example(i) == task.warm_start_example(i)
    assert again.validation() == task.validation()
    assert again.extra_validation() == task.extra_validation()
    assert task.train_example(50_000 + 5) == task.train_example(5)  # wraps at train_size
    other = build_task(compose(["task=compose", "task.seed=1"]).task)
    assert other.heldout_pairs != task.heldout_pairs
    assert [other.train_example(i) for i in range(8)] != [task.train_example(i) for i in range(8)]


def test_answers_are_the_transformed_strings(task):
    for ex in [task.train_example(i) for i in range(200)] + task.validation()[:50]:
        codes, rest = ex.prompt.split(":")
        assert rest.endswith("=") and 4 <= len(rest) - 1 <= 5
        assert ex.answer == apply_transforms(codes, rest[:-1], task.params.alphabet)
        assert task.sft_completion(ex).endswith(ex.answer)


def test_held_out_pairs_reach_neither_rl_prompts_nor_the_warm_start(task):
    train, held = set(task.train_pairs), set(task.heldout_pairs)
    assert len(held) == 2 * task.params.heldout_pairs and train.isdisjoint(held)
    assert all(p[::-1] in held for p in held)  # held out in both orders
    assert train | held == set(compositions(task.transforms, 2))
    rl = {ComposeTask.codes_of(task.train_example(i)) for i in range(20_000)}
    assert rl == train  # every training pair occurs, no held-out one
    warm = [ComposeTask.codes_of(task.warm_start_example(i)) for i in range(20_000)]
    assert set(warm) == set(task.transforms) | train
    share = sum(len(c) == 2 for c in warm) / len(warm)
    assert share == pytest.approx(task.params.warm_start_depth2, abs=0.01)
    val = {ComposeTask.codes_of(e) for e in task.validation()}
    assert val == held and len(task.validation()) == 256
    depth3 = task.extra_validation()["depth3"]
    assert len(depth3) == 128 and all(len(ComposeTask.codes_of(e)) == 3 for e in depth3)
    # each transform is trained first and second in some pair
    for t in task.transforms:
        assert any(p[0] == t for p in train) and any(p[1] == t for p in train)


def test_split_is_seeded_and_keeps_every_transform_trained():
    t = list("RLTSUD")
    assert split_pairs(t, 4, 0) == split_pairs(t, 4, 0)
    for seed in range(20):
        train, held = split_pairs(t, 6, seed)
        assert len(held) == 12 and all(any(p[0] == x for p in train) for x in t)
        assert all(any(p[1] == x for p in train) for x in t)


@pytest.mark.parametrize(
    "completion,reward",
    [
        ("fedcb", 1.0),
        ("  fedcb\n", 1.0),
        ("fedc", 0.0),
        ("fedcba", 0.0),
        ("FEDCB", 0.0),
        ("#fedcb", 0.0),
        ("fedcb x", 0.0),
        ("", 0.0),
        (None, 0.0),
        ("fedcb" * 100, 0.0),
    ],
)
def test_reward_is_exact_match(completion, reward):
    assert exact_string_reward(completion, "fedcb") == reward


def test_score_uses_the_exact_reward(task):
    val = task.validation()[:3]
    assert task.score([e.answer for e in val], val) == [1.0, 1.0, 1.0]
    assert task.score(["", e := val[0].answer + "a", val[2].answer[::-1] + "?"], val) == [0.0, 0.0, 0.0]
    assert e
    with pytest.raises(ValueError):
        task.score(["a"], val)


@pytest.mark.parametrize(
    "completion,reward",
    [
        ("edcba>fedcb", 1.0),
        ("Redcba>Ufedcb", 1.0),
        ("fedcb", 1.0),  # the answer alone is the last segment
        ("Ufedcb", 1.0),
        (" Redcba>Ufedcb\n", 1.0),
        ("xxxxx>fedcb", 1.0),  # the verifier reads the last segment only
        ("Redcba>Ufedcb>", 0.0),
        ("Redcba>Ufedc", 0.0),
        ("Redcba>Uf edcb", 0.0),
        ("Redcba>ufedcb", 0.0),
        ("fedcb>edcba", 0.0),
        (None, 0.0),
        ("a>" * 200 + "fedcb", 0.0),
    ],
)
def test_scratchpad_reward_reads_the_last_segment(completion, reward):
    assert final_segment_reward(completion, "fedcb") == reward


@pytest.mark.parametrize(
    "mode,ru,rsu",
    [
        ("none", "fedcb", "cffae"),
        ("steps", "edcba>fedcb", "ebhed>beehd>cffae"),
        ("tagged", "Redcba>Ufedcb", "Rebhed>Sbeehd>Ucffae"),
        ("rewrite", "U:edcba=fedcb", "SU:ebhed=U:beehd=cffae"),
    ],
)
def test_scratchpad_completions_show_every_step_and_score_one(mode, ru, rsu):
    assert scratchpad_completion("RU", "abcde", "abcdefgh", mode) == ru
    assert scratchpad_completion("RSU", "dehbe", "abcdefgh", mode) == rsu
    typed = compose(["task=compose", f"task.scratchpad={mode}", "rollout.max_new_tokens=22"])
    validate(typed)
    t = build_task(typed.task)
    longest = {2: 0, 3: 0}
    for e in [*t.validation()[:40], *t.extra_validation()["depth3"][:40], t.warm_start_example(3)]:
        gold = t.sft_completion(e)
        codes = ComposeTask.codes_of(e)
        assert t.score([gold, e.answer], [e, e]) == [1.0, 1.0]  # the answer alone also counts
        assert gold.endswith(e.answer) and (mode != "none" or gold == e.answer)
        if mode in ("steps", "tagged"):
            steps = gold.split(">")
            assert len(steps) == len(codes)
            assert (
                [s[0] for s in steps] == list(codes) if mode == "tagged" else all(s.islower() for s in steps)
            )
            assert t.score([">".join(steps[:-1]) + ">x"], [e]) == [0.0]
        if len(codes) in longest:
            longest[len(codes)] = max(longest[len(codes)], len(gold))
    # the longest completions seen reach what the task declares (and never exceed it)
    assert longest == {2: typed.task.completion_chars(2), 3: typed.task.completion_chars(3)}


def test_plain_mode_scores_the_whole_completion():
    plain = build_task(compose(["task=compose", "task.scratchpad=none"]).task)
    e = plain.validation()[0]
    assert plain.sft_completion(e) == e.answer and plain.score(["x>" + e.answer], [e]) == [0.0]


@pytest.mark.parametrize(
    "overrides,key",
    [
        (["rollout.max_new_tokens=12"], "rollout.max_new_tokens"),
        (["rollout=default"], "rollout.max_new_tokens"),
        (["rollout.max_new_tokens=19"], "rollout.max_new_tokens"),  # depth 3 needs 20 at evaluation
        (["eval.max_new_tokens=19"], "eval.max_new_tokens"),
    ],
)
def test_too_few_new_tokens_name_the_key(overrides, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        validate(compose(["task=compose", *overrides]))
    validate(compose(["task=compose", "task.depth3_size=0", "rollout.max_new_tokens=13"]))


def test_preset_brings_its_model_and_eval_presets():
    typed = compose(["task=compose"])
    validate(typed)
    assert typed.task.kind == "compose" and isinstance(typed.task, ComposeTaskParams)
    assert typed.model.path == "embedded" and typed.model.warm_start.deficit_frac == 0.0
    assert list(typed.eval.targets) == [0.2, 0.3, 0.4]
    assert typed.lr.rule == "power" and typed.lr.power == 0.5 and typed.lr.ref_lr == 3e-5
    chosen = compose(["task=compose", "model=tiny", "eval=default"])  # the command line wins
    assert chosen.model.embedded.hidden_size == 32 and list(chosen.eval.targets) == [0.22, 0.25, 0.28]
    default = compose([])
    assert default.task.kind == "reasoning_gym" and default.model.warm_start.deficit_frac == 0.5


@pytest.mark.parametrize(
    "override,key",
    [
        ("task.transforms=[R,X,U]", "task.transforms"),
        ("task.transforms=[R,U]", "task.transforms"),
        ("task.alphabet=ABC", "task.alphabet"),
        ("task.min_len=6", "task.min_len"),
        ("task.heldout_pairs=13", "task.heldout_pairs"),
        ("task.form=zigzag", "task.form"),
        ("task.heldout_pairs=0", "task.heldout_pairs"),
        ("task.warm_start_depth2=1.5", "task.warm_start_depth2"),
        ("task.val_size=0", "task.val_size"),
        ("task.scratchpad=yes", "task.scratchpad"),
    ],
)
def test_bad_values_name_the_key(override, key):
    typed = compose(["task=compose", override])
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        validate(typed)


def test_misspelt_key_fails_at_composition():
    with pytest.raises(Exception, match="heldout_pair"):
        compose(["task=compose", "task.heldout_pair=3"])


def test_a_run_logs_the_depth3_set_beside_the_held_out_pairs(tmp_path):
    """A tiny run on the task: every evaluation row carries eval/depth3_accuracy (a fraction of its
    set) beside eval/accuracy, and the eval_responses clock counts both sets."""
    import json

    from rlvr_scaling.run import train
    from tests.conftest import tiny_config

    cfg = tiny_config(tmp_path / "cache")
    cfg.task = ComposeTaskParams(train_size=500, val_size=16, depth3_size=8)
    cfg.rollout.max_new_tokens = 20  # the tagged scratchpad at depth 3 (completion_chars)
    assert train(cfg, tmp_path / "run", log=lambda *_: None) in ("completed", "failed")
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "eval/accuracy" in r]
    assert len(evals) >= 2
    for r in evals:
        assert r["eval/responses"] == 16 and r["eval/depth3_responses"] == 8 and r["eval/problems"] == 16
        assert 0.0 <= r["eval/depth3_accuracy"] <= 1.0 and r["eval/depth3_accuracy"] * 8 % 1 == 0
    assert evals[-1]["eval_responses"] == len(evals) * (16 + 8)
