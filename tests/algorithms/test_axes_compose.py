"""The new axes compose with every baseline, allocator, LR rule, aggregation and engine: as Hydra
configs (composition and validation), and as real tiny runs of the trainer."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import yaml

from rlvr_scaling.algorithms.allocators import VigorParams
from rlvr_scaling.algorithms.baselines import OptimalParams, RLOOParams
from rlvr_scaling.algorithms.loss import OBJECTIVES
from rlvr_scaling.algorithms.lr_rules import SNRLRParams
from rlvr_scaling.cli.compose import CONF_DIR, compose
from rlvr_scaling.config import derive, validate
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.run import train
from tests.algorithms.test_dynamic_sampling import no_detectors
from tests.conftest import tiny_config

NEW_LOSSES = ("gspo", "gspo_token", "cispo", "dual_clip")
OTHER_AXES = [f"baseline={p.stem}" for p in sorted((CONF_DIR / "baseline").glob("*.yaml"))]
OTHER_AXES += [f"allocator={p.stem}" for p in sorted((CONF_DIR / "allocator").glob("*.yaml"))]
OTHER_AXES += [f"lr={p.stem}" for p in sorted((CONF_DIR / "lr").glob("*.yaml"))]
OTHER_AXES += [f"loss.aggregation={a}" for a in ("token_mean", "sequence_mean", "constant")]
OTHER_AXES += ["rollout=vllm", "rollout.staleness=2", "loss.kl_coef=0.04"]


def test_every_objective_has_a_preset():
    names = {yaml.safe_load(p.read_text()).get("name", "ppo") for p in (CONF_DIR / "loss").glob("*.yaml")}
    assert names == set(OBJECTIVES.names())


@pytest.mark.parametrize("loss", NEW_LOSSES)
def test_new_losses_compose_with_every_axis(loss):
    for other in OTHER_AXES:
        typed = compose([f"loss={loss}", other])
        validate(typed)
        derive(typed)
        assert typed.loss.name == ("ppo" if loss == "dual_clip" else loss)


@pytest.mark.parametrize(
    "override", [o for o in OTHER_AXES if not o.startswith(("allocator=vigor", "rollout.staleness"))]
)
def test_dynamic_sampling_and_staleness_compose(override):
    typed = compose(["rollout.dynamic_sampling=true", "rollout.staleness=1", override])
    validate(typed)
    assert typed.rollout.dynamic_sampling and typed.rollout.staleness == 1


def test_presets_carry_the_papers_defaults():
    gspo, cispo, dual = (compose([f"loss={n}"]).loss for n in ("gspo", "cispo", "dual_clip"))
    assert (gspo.clip, gspo.clip_high, gspo.aggregation) == (3e-4, 4e-4, "sequence_mean")
    assert (cispo.clip, cispo.clip_high, cispo.aggregation) == (1.0, 0.28, "token_mean")
    assert (dual.clip, dual.dual_clip) == (0.2, 3.0)
    with pytest.raises(ConfigError, match=r"loss\.dual_clip applies to"):
        validate(compose(["loss=cispo", "loss.dual_clip=3"]))


@pytest.mark.parametrize("loss", NEW_LOSSES)
def test_new_losses_train_with_adaptive_methods(cache_dir, tmp_path, varied_rewards, loss):
    """Each loss inside the trainer with the optimal baseline, VIGOR, the SNR rule, the constant
    normaliser and staleness 1; and with RLOO under dynamic sampling: finite rows, real gradients."""
    preset = compose([f"loss={loss}"]).loss
    for variant in ("adaptive", "dynamic"):
        cfg_loss = dataclasses.replace(preset)
        if variant == "adaptive":
            cfg = tiny_config(
                cache_dir,
                baseline=OptimalParams(),
                allocator=VigorParams(),
                lr=SNRLRParams(ref_lr=1e-2, ref_responses=16),
            )
            cfg.rollout.group_size = 8
            cfg.rollout.staleness = 1
            cfg_loss.aggregation = "constant"
        else:
            cfg = tiny_config(cache_dir, baseline=RLOOParams())
            cfg.rollout.dynamic_sampling = True
        cfg.loss = cfg_loss
        cfg.train.max_responses = 96
        no_detectors(cfg)
        run_dir = tmp_path / variant
        assert train(cfg, run_dir, log=lambda *_: None) == "completed"
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        rows = [r for r in rows if "train/reward_mean" in r]
        assert len(rows) >= 2 and any(r["opt/grad_norm"] > 0 for r in rows)
        for r in rows:
            assert math.isfinite(r["loss/policy"]) and "loss/clip_frac" in r
            assert ("loss/dual_clip_frac" in r) == (loss == "dual_clip")
