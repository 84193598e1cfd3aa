"""math_file tasks: JSONL and Parquet loading, splits, gold completions verified by math-verify."""

import json
from pathlib import Path

import pytest

from rlvr_scaling.tasks import MathFileTaskParams, build_task

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "math"
GSM8K = str(FIXTURES / "gsm8k_tiny.jsonl")
BOXED = str(FIXTURES / "boxed_tiny.parquet")


@pytest.fixture(scope="module")
def gsm8k():
    with build_task(MathFileTaskParams(path=GSM8K, val_size=5, timeout_s=30.0)) as task:
        yield task


def test_jsonl_loads_and_splits(gsm8k):
    assert gsm8k.num_train() == 15 and len(gsm8k.validation()) == 5
    ex = gsm8k.validation()[0]
    assert ex.prompt.startswith("Question: ") and ex.prompt.endswith("\nAnswer:")
    assert ex.id == "val:0"
    train = {gsm8k.train_example(i).prompt for i in range(gsm8k.num_train())}
    assert len(train) == 15
    assert not train & {e.prompt for e in gsm8k.validation()}
    assert gsm8k.train_example(15) == gsm8k.train_example(0)
    golds = {gsm8k.train_example(i).answer for i in range(15)} | {e.answer for e in gsm8k.validation()}
    assert "5000" in golds and "-7" in golds  # "#### 5,000" and "#### -7"


def test_deterministic_for_a_seed(gsm8k):
    again = build_task(MathFileTaskParams(path=GSM8K, val_size=5))
    assert again.validation() == gsm8k.validation()
    assert [again.train_example(i) for i in range(15)] == [gsm8k.train_example(i) for i in range(15)]
    other = build_task(MathFileTaskParams(path=GSM8K, val_size=5, seed=1))
    assert other.validation() != gsm8k.validation()


def test_gold_completions_score_one_and_wrong_ones_zero(gsm8k):
    examples = gsm8k.validation() + [gsm8k.train_example(i) for i in range(gsm8k.num_train())]
    gold = [gsm8k.sft_completion(e) for e in examples]
    assert all(c.startswith(" ") and "####" in c for c in gold)
    assert gsm8k.score(gold, examples) == [1.0] * 20
    ex = examples[0]
    completions = [
        f"#### {ex.answer}1",
        "I don't know",
        "",
        "1" * 100_000,
        "9**9**9**9",
        f"So \\boxed{{{ex.answer}}}",
    ]
    rewards = gsm8k.score(completions, [ex] * len(completions))
    assert rewards[:4] == [0.0] * 4 and rewards[4] in (0.0, None) and rewards[5] == 1.0
    assert gsm8k.score(gold[:3], examples[:3]) == [1.0] * 3  # still working


def test_parquet_with_boxed_answers():
    params = MathFileTaskParams(
        name="boxed",
        path=BOXED,
        question_key="problem",
        answer_key="solution",
        answer_format="boxed",
        prompt_template="Problem: {question}\nSolution:",
        val_size=3,
        timeout_s=30.0,
        num_workers=1,
    )
    with build_task(params) as task:
        assert task.num_train() == 7 and len(task.validation()) == 3
        examples = task.validation() + [task.train_example(i) for i in range(7)]
        golds = {e.answer for e in examples}
        assert {"\\frac{11}{12}", "5\\sqrt{2}", "\\frac{2}{3}", "(-2, 2)", "x^2 + 2x + 1"} <= golds
        assert task.score([task.sft_completion(e) for e in examples], examples) == [1.0] * 10
        assert task.score(
            ["\\boxed{\\frac{22}{24}}"], [next(e for e in examples if e.answer == "\\frac{11}{12}")]
        ) == [1.0]


def test_val_path_and_duplicate_prompts_are_dropped_from_train(tmp_path):
    rows = [json.loads(line) for line in open(GSM8K)]
    val = tmp_path / "val.jsonl"
    val.write_text("".join(json.dumps(r) + "\n" for r in rows[:4]))
    task = build_task(MathFileTaskParams(path=GSM8K, val_path=str(val), val_size=10))
    assert len(task.validation()) == 4
    assert task.num_train() == 16  # the 4 validation questions also sit in the training file
    assert not {task.train_example(i).prompt for i in range(16)} & {e.prompt for e in task.validation()}


def test_rows_without_gold_are_dropped(tmp_path, caplog):
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        json.dumps({"question": "q1", "answer": "so #### 4"})
        + "\n"
        + json.dumps({"question": "q2", "answer": "no marker"})
        + "\n\n"
        + json.dumps({"question": "q3", "answer": "#### 9"})
        + "\n"
    )
    task = build_task(MathFileTaskParams(path=str(path), answer_format="gsm8k", val_size=1))
    assert task.num_train() + len(task.validation()) == 2
    assert "dropped 1 of 3 rows" in caplog.text


def test_json_array_file(tmp_path):
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([{"q": f"What is {i}+1?", "a": str(i + 1)} for i in range(6)]))
    task = build_task(MathFileTaskParams(path=str(path), question_key="q", answer_key="a", val_size=2))
    assert task.num_train() == 4
    assert task.sft_completion(task.validation()[0]) == " " + task.validation()[0].answer
