"""The generation-trainer mismatch with vLLM's CPU engine: logged on every rollout (pi_old recomputed),
real in bf16, ~0 in fp32, and corrected by truncated importance sampling (``loss.tis``)."""

from __future__ import annotations

import json

import pytest
from vllm_utils import VLLM_TINY, pytestmark  # noqa: F401  (marks every test `vllm`; skips without vLLM)

from rlvr_scaling.run import train
from tests.conftest import tiny_config

KEYS = (
    "rollout/mismatch_logp_abs_mean",
    "rollout/mismatch_logp_abs_max",
    "rollout/mismatch_ratio_outside_frac",
    "rollout/mismatch_kl",
)


def _train_rows(cache_dir, run_dir, **overrides) -> list[dict]:
    cfg = tiny_config(
        cache_dir,
        **VLLM_TINY,
        **{"rollout.engine": "vllm", "rollout.max_new_tokens": 8, "train.max_responses": 48},
        **overrides,
    )
    assert train(cfg, run_dir, log=lambda *_: None) == "completed"
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "train/reward_mean" in r]
    assert len(rows) == 3
    for r in rows:
        assert all(k in r for k in KEYS), sorted(r)
    return rows


def _mean(rows, key):
    return sum(r[key] for r in rows) / len(rows)


def test_mismatch_is_logged_real_in_bf16_and_tis_corrects_it(cache_dir, tmp_path, varied_rewards):
    fp32 = _train_rows(cache_dir, tmp_path / "fp32", **{"rollout.vllm.dtype": "float32"})
    bf16 = _train_rows(
        cache_dir, tmp_path / "bf16", **{"rollout.vllm.dtype": "bfloat16", "loss.tis": "token"}
    )
    mixed = _train_rows(
        cache_dir,
        tmp_path / "mixed",
        **{"model.dtype": "bfloat16", "loss.tis": "sequence", "loss.tis_cap": 1.5},
    )
    report = {
        name: {
            k.split("/")[1]: round(_mean(rows, k), 6)
            for k in KEYS + ("rollout/tis_weight_mean",)
            if k in rows[0]
        }
        for name, rows in (
            ("vllm fp32 / trainer fp32", fp32),
            ("vllm bf16 / trainer fp32", bf16),
            ("vllm bf16 / trainer bf16+master", mixed),
        )
    }
    print(f"\n[vllm mismatch] {json.dumps(report, indent=1)}")
    # fp32 on both sides: the same numbers up to float rounding
    assert max(r["rollout/mismatch_logp_abs_max"] for r in fp32) < 1e-3
    assert "rollout/tis_weight_mean" not in fp32[0]
    # bf16 engine: a real, bounded disagreement; TIS weights near 1, logged
    for rows in (bf16, mixed):
        assert 1e-4 < _mean(rows, "rollout/mismatch_logp_abs_mean") < 0.1
        assert _mean(rows, "rollout/mismatch_logp_abs_mean") > 10 * _mean(
            fp32, "rollout/mismatch_logp_abs_mean"
        )
        assert all(r["rollout/mismatch_logp_abs_max"] >= r["rollout/mismatch_logp_abs_mean"] for r in rows)
        assert all(0.5 < r["rollout/tis_weight_mean"] <= r.get("loss/tis_cap", 2.0) for r in rows)
        assert all(0 <= r["rollout/tis_capped_frac"] <= 1 for r in rows)
    assert all(r["rollout/tis_weight_mean"] <= 1.5 for r in mixed)


def test_top_p_behaviour_logprobs_are_refused_and_recomputation_is_exact(cache_dir, tmp_path, varied_rewards):
    """vLLM reports log-probs renormalised over the nucleus: with top_p < 1 they are systematically
    above the policy's (log of the nucleus mass), which the mismatch shows; the trainer's recomputed
    pi_old is the policy's own, and old_logprobs=behaviour is refused before any compute."""
    from rlvr_scaling.errors import ConfigError

    with pytest.raises(ConfigError, match="old_logprobs=behaviour with rollout.engine=vllm"):
        _train_rows(
            cache_dir,
            tmp_path / "refused",
            **{"rollout.top_p": 0.8, "optim.old_logprobs": "behaviour", "rollout.vllm.dtype": "float32"},
        )
    assert not (tmp_path / "refused" / "metrics.jsonl").exists()
    rows = _train_rows(
        cache_dir, tmp_path / "top_p", **{"rollout.top_p": 0.8, "rollout.vllm.dtype": "float32"}
    )
    # d = log pi_trainer - log pi_engine = log(nucleus mass) <= 0 at every token, < 0 where mass < 1
    assert _mean(rows, "rollout/mismatch_kl") > 0
    assert _mean(rows, "rollout/mismatch_logp_abs_mean") > 1e-3
