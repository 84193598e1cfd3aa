"""The dataset presets (conf/task/{gsm8k,math500,amc,olympiadbench,deepmath}.yaml) on small files in
each dataset's own column layout, written here (all items made up), under a temporary $RLVR_DATA_DIR:
they compose, find their columns, extract the gold answers and score with math-verify."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlvr_scaling.cli.compose import compose
from rlvr_scaling.tasks import Example, build_task

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "math"

MATH500 = [  # problem / solution / answer, like HuggingFaceH4/MATH-500
    ("What is $2+3$?", "Add: $2+3=\\boxed{5}$.", "5"),
    ("Simplify $\\frac{6}{8}$.", "Divide by 2: $\\boxed{\\dfrac{3}{4}}$.", "\\dfrac{3}{4}"),
    ("Solve $x^2=9$ for $x>0$.", "So $x=\\boxed{3}$.", "3"),
]
AMC = [("Compute $11\\cdot 13-1$.", 142.0), ("How many primes are below $10$?", 4.0)]
OLYMPIAD = [  # question / final_answer (a list), like Hothan/OlympiadBench OE_TO_maths_en_COMP
    ("Find the positive root of $2x^2=x$.", ["$\\frac{1}{2}$"]),
    ("Find all real $x$ with $x^2=4$.", ["$-2$", "$2$"]),
    ("Determine the interval where $x(1-x)>0$.", ["$(0,1)$"]),
]
DEEPMATH = [  # question / final_answer, like zwhe99/DeepMath-103K
    ("Evaluate $\\lim_{n\\to\\infty} (1+1/n)^{2n}$.", "e^2"),
    ("Compute $\\int_0^1 2x\\,dx$.", "1"),
    ("Is $97$ prime?", "Yes"),
    ("Find the sum of the infinite series $\\sum_{k\\ge1} 2^{-k}$.", "1"),
]


def _write(path: Path, rows: dict[str, list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(rows), path)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("rlvr_data")
    gsm = [json.loads(line) for line in (FIXTURES / "gsm8k_tiny.jsonl").read_text().splitlines()]
    _write(root / "gsm8k/train.parquet", {k: [r[k] for r in gsm[:14]] for k in ("question", "answer")})
    _write(root / "gsm8k/test.parquet", {k: [r[k] for r in gsm[14:]] for k in ("question", "answer")})
    boxed = pq.read_table(FIXTURES / "boxed_tiny.parquet").to_pydict()  # problem / solution / level
    _write(root / "math/train.parquet", {**boxed, "type": ["Algebra"] * len(boxed["problem"])})
    _write(
        root / "math500/test.parquet",
        {
            "problem": [r[0] for r in MATH500],
            "solution": [r[1] for r in MATH500],
            "answer": [r[2] for r in MATH500],
            "unique_id": [f"test/x/{i}.json" for i in range(len(MATH500))],
        },
    )
    _write(
        root / "amc/validation.parquet",
        {"id": list(range(len(AMC))), "problem": [r[0] for r in AMC], "answer": [r[1] for r in AMC]},
    )
    _write(
        root / "olympiadbench/test.parquet",
        {"question": [r[0] for r in OLYMPIAD], "final_answer": [r[1] for r in OLYMPIAD]},
    )
    _write(
        root / "deepmath/train.parquet",
        {
            "question": [r[0] for r in DEEPMATH],
            "final_answer": [r[1] for r in DEEPMATH],
            "difficulty": [5.0] * len(DEEPMATH),
        },
    )
    return root


def _task_params(preset: str, data_dir: Path, monkeypatch, *overrides: str):
    monkeypatch.setenv("RLVR_DATA_DIR", str(data_dir))
    return compose([f"task={preset}", *overrides]).task


# preset -> (training rows, validation golds in file order, a correct boxed answer per validation row)
EXPECTED = {
    "gsm8k": (14, None, None),
    "math500": (10, ["5", "\\dfrac{3}{4}", "3"], ["5", "0.75", "3"]),
    "amc": (10, ["142.0", "4.0"], ["142", "4"]),
    "olympiadbench": (10, ["$\\frac{1}{2}$", "$-2$, $2$", "$(0,1)$"], ["0.5", "2, -2", "(0, 1)"]),
    "deepmath": (4, ["5", "\\dfrac{3}{4}", "3"], ["5", "3/4", "3"]),
}


@pytest.mark.parametrize("preset", sorted(EXPECTED))
def test_dataset_preset_reads_its_native_columns_and_scores(preset, data_dir, monkeypatch):
    params = _task_params(preset, data_dir, monkeypatch)
    assert params.path.startswith(str(data_dir))
    n_train, golds, answers = EXPECTED[preset]
    with build_task(params) as task:
        assert task.num_train() == n_train
        val = task.validation()
        example = task.train_example(0)
        assert example.prompt.startswith("Question: ")
        assert example.prompt.endswith("put your final answer within \\boxed{}.\nAnswer:")
        if golds is None:  # GSM8K: golds are the numbers after ####
            assert all(e.answer.lstrip("-").isdigit() for e in val) and len(val) == 6
            golds = [e.answer for e in val]
            answers = golds
        assert [e.answer for e in val] == golds
        right = [f"Step by step ... so the answer is \\boxed{{{a}}}." for a in answers]
        wrong = ["\\boxed{12345}"] * len(val)
        assert task.score(right, val) == [1.0] * len(val)
        assert task.score(wrong, val) == [0.0] * len(val)


def test_missing_data_names_the_path_and_the_variable(tmp_path, monkeypatch):
    from rlvr_scaling.errors import ConfigError

    params = _task_params("gsm8k", tmp_path, monkeypatch)
    with pytest.raises(ConfigError, match=r"task\.path: file not found: .*gsm8k/train\.parquet"):
        params.validate("task")


def test_a_datasets_folder_replaces_a_file(data_dir, tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets", reason="the optional 'datasets' package is not installed")
    folder = tmp_path / "deepmath_train"
    datasets.Dataset.from_dict(
        {"question": [r[0] for r in DEEPMATH], "final_answer": [r[1] for r in DEEPMATH]}
    ).save_to_disk(str(folder))
    params = _task_params("deepmath", data_dir, monkeypatch, f"task.path={folder}")
    with build_task(params) as task:
        assert task.num_train() == len(DEEPMATH)
        assert sorted(task.train_example(i).answer for i in range(4)) == sorted(r[1] for r in DEEPMATH)


# Gold answers as the preset datasets store them (AMC floats, OlympiadBench $-wrapped lists, MATH
# \dfrac and intervals, DeepMath text and closed forms) against model answers: the reward path of
# the math_file task (final-answer extraction, integer fast path, math-verify in worker processes).
GOLD_TABLE = [
    ("142.0", "\\boxed{142}", 1.0),
    ("142", "\\boxed{142.0}", 1.0),
    ("4.0", "so there are 4 primes", 1.0),
    ("$\\frac{1}{2}$", "\\boxed{\\frac12}", 1.0),
    ("$\\frac{1}{2}$", "\\boxed{0.5}", 1.0),
    ("$-2$, $2$", "\\boxed{2, -2}", 1.0),
    ("$-2$, $2$", "\\boxed{2}", 0.0),
    ("\\dfrac{3}{4}", "\\boxed{0.75}", 1.0),
    ("\\dfrac{3}{4}", "\\boxed{\\frac{4}{3}}", 0.0),
    ("[0, 1)", "\\boxed{[0,1)}", 1.0),
    ("[0, 1)", "\\boxed{[0,1]}", 0.0),
    ("$(0,1)$", "\\boxed{(0, 1)}", 1.0),
    ("e^2", "\\boxed{e^{2}}", 1.0),
    ("e^2", "\\boxed{2e}", 0.0),
    ("\\frac{\\pi}{4}", "\\boxed{\\pi/4}", 1.0),
    ("3\\sqrt{3}", "\\boxed{\\sqrt{27}}", 1.0),
    ("\\frac{\\sqrt{3}}{2}", "\\boxed{\\frac{1}{2}\\sqrt{3}}", 1.0),
    ("10^{-3}", "\\boxed{0.001}", 1.0),
    ("2^{10}", "\\boxed{1024}", 1.0),
    ("\\infty", "\\boxed{\\infty}", 1.0),
    ("Yes", "\\boxed{Yes}", 1.0),
    ("Yes", "\\boxed{No}", 0.0),
    ("x=3", "\\boxed{3}", 1.0),
    ("90^\\circ", "\\boxed{90}", 1.0),
    ("\\$18", "\\boxed{18}", 1.0),
    ("\\text{(C)}", "\\boxed{C}", 1.0),
    ("\\{1,2\\}", "\\boxed{\\{2,1\\}}", 1.0),
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\boxed{\\begin{pmatrix}1\\\\2\\end{pmatrix}}", 1.0),
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\boxed{\\begin{pmatrix}2\\\\1\\end{pmatrix}}", 0.0),
    ("\\frac{1}{3}", "\\boxed{0.333}", 0.0),
    ("5", "\\boxed{5.01}", 0.0),
    ("5", "\\boxed{}", 0.0),
]


def test_dataset_style_golds_verify(data_dir, monkeypatch):
    params = _task_params("amc", data_dir, monkeypatch, "task.timeout_s=30")
    with build_task(params) as task:
        examples = [Example("q", gold, f"x:{i}") for i, (gold, _, _) in enumerate(GOLD_TABLE)]
        got = task.score([completion for _, completion, _ in GOLD_TABLE], examples)
    wrong = [(row, r) for row, r in zip(GOLD_TABLE, got) if r != row[2]]
    assert not wrong, wrong


def test_a_datasets_folder_with_several_splits_or_wrong_columns_is_refused(data_dir, tmp_path, monkeypatch):
    from rlvr_scaling.errors import ConfigError

    datasets = pytest.importorskip("datasets", reason="the optional 'datasets' package is not installed")
    rows = {"question": ["Is 2 even?"], "final_answer": ["Yes"]}
    both = tmp_path / "both"
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_dict(rows), "test": datasets.Dataset.from_dict(rows)}
    ).save_to_disk(str(both))
    with pytest.raises(ConfigError, match=r"holds several splits \(train, test\); point at one split"):
        build_task(_task_params("deepmath", data_dir, monkeypatch, f"task.path={both}"))
    other = tmp_path / "other"
    datasets.Dataset.from_dict({"problem": ["Is 2 even?"], "final_answer": ["Yes"]}).save_to_disk(str(other))
    with pytest.raises(
        ConfigError, match=r"column 'question' not in .*other \(columns: problem, final_answer\)"
    ):
        build_task(_task_params("deepmath", data_dir, monkeypatch, f"task.path={other}"))
