"""Task params: validation messages name the key; registry and schemas agree; presets compose."""

from dataclasses import fields
from pathlib import Path

import pytest

from rlvr_scaling.tasks import TASK_PARAMS, TASKS, MathFileTaskParams, ReasoningGymTaskParams, build_task

ROOT = Path(__file__).resolve().parents[2]
GSM8K = str(ROOT / "tests" / "fixtures" / "math" / "gsm8k_tiny.jsonl")


def test_registry_and_schemas_agree():
    assert TASKS.names() == sorted(TASK_PARAMS) == ["compose", "math_file", "reasoning_gym"]
    for kind, params in TASK_PARAMS.items():
        assert TASKS.get(kind).Params is params
        assert params().kind == kind
        assert [f.name for f in fields(params)][:2] == ["name", "kind"]


def test_params_are_structured_configs():
    omegaconf = pytest.importorskip("omegaconf")
    for params in TASK_PARAMS.values():
        cfg = omegaconf.OmegaConf.structured(params)
        obj = omegaconf.OmegaConf.to_object(cfg)
        assert obj == params()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (ReasoningGymTaskParams(val_size=0), r"task\.val_size must be > 0 \(got 0\)"),
        (ReasoningGymTaskParams(train_size=-1), r"task\.train_size must be > 0"),
        (
            ReasoningGymTaskParams(prompt_format="verbose"),
            r"task\.prompt_format must be one of compact, native",
        ),
        (ReasoningGymTaskParams(verifier="fuzzy"), r"task\.verifier must be one of exact, dataset"),
        (ReasoningGymTaskParams(timeout_s=0), r"task\.timeout_s"),
        (
            ReasoningGymTaskParams(dataset="chain_sun"),
            r"task\.dataset: unknown reasoning-gym dataset 'chain_sun' "
            r"\(did you mean chain_sum.*\); \d+ available, e\.g\. chain_sum",
        ),
        (
            ReasoningGymTaskParams(dataset_config={"max_term": 3}),
            r"task\.dataset_config\.max_term: not an option.*"
            r"valid: min_terms, max_terms",
        ),
        (ReasoningGymTaskParams(dataset_config={"seed": 3}), r"task\.dataset_config\.seed: set task\.seed"),
        (
            ReasoningGymTaskParams(dataset_config={"min_terms": 3, "max_terms": 2}),
            r"task\.dataset_config: rejected",
        ),
        (MathFileTaskParams(), r"task\.path must be set"),
        (
            MathFileTaskParams(path="/nonexistent/train.jsonl"),
            r"task\.path: file not found: /nonexistent/train\.jsonl",
        ),
        (
            MathFileTaskParams(path=GSM8K, val_path="/nope.parquet"),
            r"task\.val_path: file not found: /nope\.parquet",
        ),
        (MathFileTaskParams(path=GSM8K, val_size=0), r"task\.val_size must be > 0 \(got 0\)"),
        (
            MathFileTaskParams(path=GSM8K, question_key="problem"),
            r"task\.question_key: column 'problem' not in .*"
            r"columns: question, answer",
        ),
        (
            MathFileTaskParams(path=GSM8K, answer_format="latex"),
            r"task\.answer_format must be one of auto, gsm8k",
        ),
        (
            MathFileTaskParams(path=GSM8K, prompt_template="Q: {q}"),
            r"task\.prompt_template must contain \{question\}",
        ),
        (MathFileTaskParams(path=str(ROOT / "pyproject.toml")), r"task\.path: .*unsupported format"),
    ],
)
def test_bad_params_name_the_key(params, message):
    with pytest.raises(ValueError, match=message):
        params.validate("task")


def test_folder_needs_the_optional_datasets_package(tmp_path):
    try:
        import datasets  # noqa: F401
    except ImportError:
        with pytest.raises(
            ValueError, match=r"task\.path: .* is a folder .* 'datasets' package is not installed"
        ):
            MathFileTaskParams(path=str(tmp_path)).validate()
    else:
        pytest.skip("datasets is installed")


def test_build_time_errors_name_the_key(tmp_path):
    with pytest.raises(ValueError, match=r"task\.val_size \(20\) must be smaller than the 20 usable rows"):
        build_task(MathFileTaskParams(path=GSM8K, val_size=20))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "#### 1"}\nnot json\n')
    with pytest.raises(ValueError, match=r"task\.path: .*bad\.jsonl line 2 is not valid JSON"):
        build_task(MathFileTaskParams(path=str(bad), val_size=1))
    with pytest.raises(ValueError, match=r"task\.answer_format: no gold answer found"):
        build_task(MathFileTaskParams(path=GSM8K, answer_format="boxed", val_size=1))
    with pytest.raises(
        ValueError, match=r"task\.kind: unknown task kind 'nope'; valid: compose, math_file, reasoning_gym"
    ):
        build_task(ReasoningGymTaskParams(kind="nope"))
    # single digits: a 10-problem space, none of whose keys falls on the validation side for seed 0
    with pytest.raises(ValueError, match=r"task\.val_size: only 0 held-out problems"):
        build_task(
            ReasoningGymTaskParams(
                dataset_config={"min_terms": 1, "max_terms": 1, "max_digits": 1}, train_size=10, val_size=20
            )
        )


def test_task_presets_match_the_schema():
    omegaconf = pytest.importorskip("omegaconf")
    presets = sorted((ROOT / "conf" / "task").glob("*.yaml"))
    if not presets:
        pytest.skip("no conf/task presets")
    for preset in presets:
        cfg = omegaconf.OmegaConf.to_container(omegaconf.OmegaConf.load(preset))
        cfg.pop("defaults", None)
        cfg = {k: v for k, v in cfg.items() if v != "???"}
        params = TASK_PARAMS[cfg["kind"]](**cfg)  # unknown keys would raise TypeError
        if cfg["kind"] == "reasoning_gym":
            params.validate("task")
