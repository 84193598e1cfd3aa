"""The pieces data parallelism rests on, in one process: rank shares partition the work, keyed
sampling does not depend on how prompts are batched, and a world larger than the prompts is refused."""

from __future__ import annotations

import pytest
import torch

from rlvr_scaling.distributed import DistEnv
from rlvr_scaling.engines.base import SampleKeys, SamplingParams
from rlvr_scaling.errors import ConfigError


@pytest.mark.parametrize("world", [1, 2, 3, 8])
@pytest.mark.parametrize("n", [0, 1, 7, 32])
def test_blocks_partition_items_in_order(world, n):
    blocks = [list(DistEnv(r, world).block(n)) for r in range(world)]
    assert sum(blocks, []) == list(range(n))
    assert max(map(len, blocks)) - min(map(len, blocks)) <= 1
    for j in range(n):
        assert j in blocks[DistEnv(0, world).owner(j, n)]


def test_sample_keys_are_per_response_streams():
    keys = SampleKeys(seed=7, prompt_keys=(0, 1, 2, 3))
    u = keys.uniforms([2, 2, 2, 2], steps=5)
    assert u.shape == (8, 5) and float(u.min()) >= 0.0 and float(u.max()) < 1.0
    # a subset of the prompts, asked for on its own (another rank, another batch), draws the same rows
    part = SampleKeys(seed=7, prompt_keys=(2, 3)).uniforms([2, 2], steps=5)
    torch.testing.assert_close(part, u[4:], rtol=0, atol=0)
    # other seeds, prompts or responses give other numbers; the numbers look uniform
    assert not torch.equal(SampleKeys(seed=8, prompt_keys=(0, 1, 2, 3)).uniforms([2, 2, 2, 2], 5), u)
    assert len({tuple(r.tolist()) for r in u}) == 8
    big = SampleKeys(seed=1, prompt_keys=tuple(range(100))).uniforms([100] * 100, steps=4)
    assert abs(float(big.mean()) - 0.5) < 0.01 and abs(float(big.var()) - 1 / 12) < 0.005


def test_hf_engine_generation_does_not_depend_on_batching(cache_dir):
    from rlvr_scaling.run import build_components
    from tests.conftest import tiny_config

    comps = build_components(tiny_config(cache_dir), log=lambda *_: None)
    prompts = [comps.task.train_example(i).prompt for i in range(6)]
    params = SamplingParams(max_new_tokens=6, temperature=1.0)
    whole = comps.engine.generate(prompts, [3] * 6, params, SampleKeys(11, tuple(range(6))))
    first = comps.engine.generate(prompts[:2], [3] * 2, params, SampleKeys(11, (0, 1)))
    rest = comps.engine.generate(prompts[2:], [3] * 4, params, SampleKeys(11, (2, 3, 4, 5)))
    assert whole.texts == first.texts + rest.texts
    assert len(set(whole.texts)) > 3  # real sampling, not one repeated answer
    comps.task.close()


def test_world_larger_than_prompts_is_a_config_error(cache_dir, monkeypatch):
    from rlvr_scaling.run import train
    from tests.conftest import tiny_config

    monkeypatch.setenv("WORLD_SIZE", "8")
    with pytest.raises(ConfigError, match="rollout.prompts_per_rollout=4"):
        train(tiny_config(cache_dir), cache_dir / "never", log=lambda *_: None)
    assert not (cache_dir / "never").exists()  # refused before anything was written
