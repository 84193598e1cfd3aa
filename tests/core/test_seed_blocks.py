"""Seeds as blocks in the trainer: the streams a seed shares across sizes and conditions
(docs/study.md, "Seeds as blocks")."""

from __future__ import annotations

from tests.conftest import tiny_config


def test_a_seed_draws_the_same_data_order_at_every_size_and_condition(cache_dir):
    # the data order is the one stream that is shared across sizes: after R responses every size has
    # drawn the same first R / G prompts; and across conditions (here eta_ref) at one size
    from rlvr_scaling.collect import Collector
    from rlvr_scaling.config import derive
    from rlvr_scaling.tasks import build_task

    def prompts(seed, P, lr, n_rollouts):
        cfg = tiny_config(cache_dir, seed=seed, **{"rollout.prompts_per_rollout": P, "lr.ref_lr": lr})
        task = build_task(cfg.task)
        collector = Collector(cfg, derive(cfg), task, None, None, frozenset())
        return [e.prompt for r in range(n_rollouts) for e in collector.examples_of(r, P)]

    small, large = prompts(0, 2, 1e-3, 8), prompts(0, 8, 1e-3, 2)
    assert small == large  # 16 prompts: 8 rollouts of 2 = 2 rollouts of 8
    assert prompts(0, 8, 1e-2, 2) == large  # another condition, same seed
    assert prompts(1, 8, 1e-3, 2) != large  # another seed: another block


def test_sampling_numbers_are_shared_across_sizes(cache_dir):
    # the sampling numbers are keyed by the prompt's position in the data order: with one policy (the
    # warm start, before any update), the first rollout of P = 2 draws exactly the responses that the
    # first rollout of P = 4 draws for its first two prompts, and the second rollout of P = 2 those of
    # its last two; another seed draws other responses
    from rlvr_scaling.collect import Collector
    from rlvr_scaling.config import derive
    from rlvr_scaling.distributed import DistEnv
    from rlvr_scaling.run import build_components

    def texts(seed, P, rollout):
        cfg = tiny_config(cache_dir, seed=seed, **{"rollout.prompts_per_rollout": P})
        comps = build_components(cfg, log=lambda *_: None)
        collector = Collector(cfg, derive(cfg), comps.task, comps.engine, DistEnv(), frozenset())
        batch = collector.collect(rollout)
        comps.task.close()
        return [(int(q), t) for q, t in zip(batch.gen.prompt_index.tolist(), batch.gen.texts, strict=True)]

    large = texts(0, 4, 0)
    first, second = texts(0, 2, 0), texts(0, 2, 1)
    assert first == [(q, t) for q, t in large if q < 2]
    assert [(q + 2, t) for q, t in second] == [(q, t) for q, t in large if q >= 2]
    assert len({t for _, t in large}) > 3  # real sampling, not one repeated answer
    assert texts(1, 4, 0) != large
