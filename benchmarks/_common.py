"""What benchmark scripts of different folders share. A script reaches it with the repository root on
``sys.path`` (``sys.path.insert(0, str(Path(__file__).resolve().parents[2]))``, then
``from benchmarks._common import ...``); helpers of one folder live in that folder's ``_*.py``."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def trl_grpo_arguments(
    *, group: int, minibatch: int, steps: int, max_new_tokens: int, max_steps: int, seed: int
) -> dict:
    """The keyword arguments of TRL's ``GRPOConfig`` that give our rollout cycle's shape, as both TRL sides
    run it (``speed/vs_trl.py`` on CPU, ``gpu/gpu_check.py`` on a GPU): one generation of ``group``
    responses per prompt every ``steps`` optimizer steps on minibatches of ``minibatch`` responses, one pass
    over each generation, no KL term, no vLLM; nothing logged, saved, evaluated, reported or drawn as a
    progress bar, data loaded in the main process (so that the timed blocks are the cycle's work). Each side
    adds its precision, sampling and optimizer settings."""
    return dict(
        num_generations=group,
        per_device_train_batch_size=minibatch,
        gradient_accumulation_steps=1,
        steps_per_generation=steps,
        num_iterations=1,
        max_completion_length=max_new_tokens,
        beta=0.0,
        use_vllm=False,
        max_steps=max_steps,
        logging_strategy="no",
        save_strategy="no",
        eval_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=seed,
    )
