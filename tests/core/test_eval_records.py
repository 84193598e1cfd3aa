"""The per-problem record of every evaluation (``eval_problems.jsonl``; ``rlvr_scaling/evaluation.py``)
and its replay (``analysis/data/eval_records.py``): the full replay is the logged ``eval/accuracy``, a
thinner one is the mean over its subset, and a run that evaluates fewer samples per problem logs exactly
the replay of the full record (common random numbers); a resumed run's record is the uninterrupted one's."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analysis.data.eval_records import EVAL_PROBLEMS, decode, problem_subset, read_eval_records, replay
from rlvr_scaling.evaluation import problem_record
from rlvr_scaling.run import train
from tests.conftest import tiny_config


def _run(cache_dir, path, samples: int, **kw) -> list[dict]:
    """A tiny run evaluated every 16 responses with ``samples`` sampled responses per problem; its eval
    rows. Nothing stops it early (no targets stop, no accuracy-collapse detector), so the training is
    the same whatever ``samples`` is."""
    cfg = tiny_config(cache_dir, **{"train.max_responses": 96, "eval.every_responses": 16, **kw})
    cfg.eval.samples = samples
    cfg.eval.targets = [0.3, 0.6]
    cfg.failure.accuracy_collapse = None
    train(cfg, path, log=lambda *_: None)
    rows = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if "eval/accuracy" in r]


@pytest.fixture(scope="module")
def runs(cache_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("eval_records")
    return {k: (root / str(k), _run(cache_dir, root / str(k), k)) for k in (4, 2)}


def test_the_full_replay_is_the_logged_accuracy(runs):
    path, rows = runs[4]
    rec = read_eval_records(path)
    assert rec is not None and rec.samples == 4 and rec.problems == rows[0]["eval/problems"] == 16
    assert list(rec.responses) == [r["responses"] for r in rows] and list(rec.rollout) == [
        r["rollout"] for r in rows
    ]
    full = replay(rec)
    assert list(full["accuracy"]) == [r["eval/accuracy"] for r in rows]  # exactly, not approximately
    assert (full["n"] == [r["eval/responses"] for r in rows]).all()
    assert 0 < full["accuracy"].max()  # the check sees correct responses at all
    lines = [json.loads(x) for x in (path / EVAL_PROBLEMS).read_text().splitlines()]
    assert [sum(x["counts"]) for x in lines] == list(full["correct"])


def test_a_thinner_evaluation_is_the_mean_over_its_subset(runs):
    path, rows = runs[4]
    rec = read_eval_records(path)
    problems = problem_subset(rec.problems, 6, seed=3)
    assert len(set(problems)) == 6 and (problems == problem_subset(rec.problems, 6, seed=3)).all()
    thin = replay(rec, problems=problems, samples=3, every=2)
    assert list(thin["responses"]) == [r["responses"] for r in rows][::2]
    for k, r in zip(range(0, len(rows), 2), thin.itertuples()):
        assert r.accuracy == rec.correct[k][problems][:, :3].mean() and r.n == 18
    with pytest.raises(ValueError, match="samples"):
        replay(rec, samples=5)
    with pytest.raises(ValueError, match="problems"):
        replay(rec, problems=[16])


def test_fewer_samples_per_problem_log_the_replay_of_the_full_record(runs):
    """Response j of problem q draws from (seed, q, j) alone: the 2-sample run's evaluations are the first
    2 responses per problem of the 4-sample run's, point by point."""
    (full_path, _), (_, thin_rows) = runs[4], runs[2]
    replayed = replay(read_eval_records(full_path), samples=2)
    assert list(replayed["responses"]) == [r["responses"] for r in thin_rows]
    assert list(replayed["accuracy"]) == [r["eval/accuracy"] for r in thin_rows]
    assert replayed["accuracy"].nunique() > 1  # the curve moves: the check compares more than one number


def test_a_resumed_run_records_what_an_uninterrupted_one_records(cache_dir, runs, tmp_path):
    path, _ = runs[2]
    _run(cache_dir, tmp_path / "resumed", 2, **{"run.stop_after_rollouts": 3})
    _run(cache_dir, tmp_path / "resumed", 2)
    assert (tmp_path / "resumed" / EVAL_PROBLEMS).read_text() == (path / EVAL_PROBLEMS).read_text()


def test_the_record_round_trips_and_a_bad_one_is_reported(tmp_path):
    rng = np.random.default_rng(0)
    m = rng.random((5, 11)) < 0.4
    index = [q for q in range(5) for _ in range(11)]
    rewards = [1.0 if x else (None if i % 7 == 0 else 0.0) for i, x in enumerate(m.ravel())]
    rec = problem_record(index, rewards, 5, 11)
    assert (decode(rec) == m).all() and rec["counts"] == m.sum(1).tolist()
    notes: list[str] = []
    assert read_eval_records(tmp_path, notes) is None and "no eval_problems.jsonl" in notes[0]
    (tmp_path / EVAL_PROBLEMS).write_text(
        json.dumps({**rec, "rollout": 0, "responses": 0, "counts": [0] * 5})
    )
    assert read_eval_records(tmp_path, notes) is None and "counts disagree" in notes[1]
