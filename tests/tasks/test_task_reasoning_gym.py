"""reasoning-gym tasks: determinism, disjoint splits, compact prompts, both verifiers."""

import logging
import re
import time

import pytest

from rlvr_scaling.tasks import Example, ReasoningGymTaskParams, build_task


def make(**overrides):
    return build_task(ReasoningGymTaskParams(**{"train_size": 4000, "val_size": 128, **overrides}))


@pytest.fixture(scope="module")
def chain_sum():
    with make() as task:
        yield task


def test_deterministic_for_a_seed(chain_sum):
    again = make()
    assert again.validation() == chain_sum.validation()
    assert [again.train_example(i) for i in range(300)] == [chain_sum.train_example(i) for i in range(300)]
    other = make(seed=1)
    assert other.validation() != chain_sum.validation()
    assert [other.train_example(i) for i in range(50)] != [chain_sum.train_example(i) for i in range(50)]


def test_train_wraps_around_with_stable_ids(chain_sum):
    n = chain_sum.num_train()
    assert n == 4000
    assert chain_sum.train_example(n + 7) == chain_sum.train_example(7)
    assert chain_sum.train_example(7).id == "train:7"
    assert [e.id for e in chain_sum.validation()[:3]] == ["val:0", "val:1", "val:2"]


def test_train_and_validation_are_disjoint_by_prompt(chain_sum):
    train = {chain_sum.train_example(i).prompt for i in range(chain_sum.num_train())}
    val = {e.prompt for e in chain_sum.validation()}
    assert len(chain_sum.validation()) == 128
    assert not train & val


def test_validation_follows_the_generator_distribution():
    # 2 and 3 terms are equally likely; dropping repeated or train-seen problems would starve the
    # small 2-term sub-space. The hash split keeps the proportion.
    task = make(val_size=512)
    two_terms = sum(len(re.findall(r"[+-]", e.prompt)) == 1 for e in task.validation()) / 512
    assert 0.42 < two_terms < 0.58, two_terms


def test_compact_prompts_and_gold_completion(chain_sum):
    for ex in chain_sum.validation() + [chain_sum.train_example(i) for i in range(100)]:
        assert re.fullmatch(r"[0-9]{1,2}([+-][0-9]{1,2}){1,2}=", ex.prompt), ex.prompt
        assert int(ex.answer) == eval(ex.prompt[:-1])  # noqa: S307 - digits and +/- only, checked above
        assert chain_sum.sft_completion(ex) == ex.answer
    assert chain_sum.info()["prompt_format"] == "compact"


def test_exact_verifier_on_the_task(chain_sum):
    examples = chain_sum.validation()[:4]
    gold = [chain_sum.sft_completion(e) for e in examples]
    assert chain_sum.score(gold, examples) == [1.0] * 4
    assert chain_sum.score(["#" + g for g in gold], examples) == [0.0] * 4  # the warm-start deficit
    assert chain_sum.score([g + " " for g in gold], examples) == [1.0] * 4
    assert chain_sum.score(["", "x" * 100_000, "9**9**9**9", "ⅷ"], examples) == [0.0] * 4
    with pytest.raises(ValueError):
        chain_sum.score(gold, examples[:2])


def test_native_prompts():
    task = make(prompt_format="native", val_size=16, train_size=100)
    ex = task.validation()[0]
    assert ex.prompt.startswith("State the final answer to the following arithmetic problem:")
    assert task.sft_completion(ex) == " " + ex.answer
    assert task.score([task.sft_completion(ex)], [ex]) == [1.0]


def test_compact_falls_back_to_native_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        task = make(name="gcd", dataset="gcd", dataset_config={}, val_size=16, train_size=100)
    assert task.info()["prompt_format"] == "native"
    assert "no compact form" in caplog.text
    assert "GCD" in task.validation()[0].prompt


def test_basic_arithmetic_compact():
    task = make(name="basic_arithmetic", dataset="basic_arithmetic", val_size=32, train_size=200)
    for ex in task.validation():
        assert " " not in ex.prompt and ex.prompt.endswith("=")
        assert task.score([ex.answer], [ex]) == [1.0]


def test_exact_verifier_refuses_non_numeric_datasets():
    with pytest.raises(ValueError, match=r"task\.verifier.*verifier=dataset"):
        make(name="spell", dataset="spell_backward", dataset_config={}, val_size=8, train_size=50)


def test_dataset_verifier_runs_score_answer_in_workers():
    with make(verifier="dataset", val_size=8, train_size=50, num_workers=1) as task:
        examples = task.validation()[:3] + [task.train_example(5)]
        gold = [e.answer for e in examples]
        rewards = task.score([gold[0], " +0" + gold[1] + ".00 ", "#" + gold[2], "nonsense"], examples)
        assert rewards[:2] == [1.0, 1.0]  # chain_sum's own scorer is lenient about number format
        assert rewards[3] == 0.0
        assert task.score(["1"], [Example("1+1=", "2", "elsewhere:0")]) == [None]  # not one of ours


def test_dataset_verifier_partial_credit():
    # reasoning-gym's default scorer (gcd uses it): a longer answer containing the gold earns
    # len(gold)/len(answer) -- partial credit that the exact verifier never gives.
    params = dict(name="gcd", dataset="gcd", dataset_config={}, verifier="dataset", val_size=4, train_size=20)
    with make(**params, num_workers=1) as task:
        ex = task.validation()[0]
        right, padded, wrong = task.score([ex.answer, ex.answer + " or 1", "x"], [ex, ex, ex])
        assert right == 1.0
        assert padded == pytest.approx(len(ex.answer) / (len(ex.answer) + 5))
        assert wrong == 0.0


def test_dataset_verifier_time_limit_on_a_hanging_scorer():
    # countdown's scorer runs sympy on the model's expression: 9**9**9**9 would never finish.
    params = dict(name="countdown", dataset="countdown", dataset_config={}, verifier="dataset")
    with make(**params, val_size=1, train_size=2, timeout_s=2.0, num_workers=1) as task:
        ex = task.validation()[0]
        assert task.score([ex.answer], [ex]) == [1.0]
        t = time.perf_counter()
        assert task.score(["9**9**9**9"], [ex]) in ([None], [0.0])
        assert time.perf_counter() - t < 2.0 + 2.0 + 1.0  # the soft limit, else the hard one, + slack
        assert task.score([ex.answer, "1+1"], [ex, ex])[0] == 1.0  # the pool still works
