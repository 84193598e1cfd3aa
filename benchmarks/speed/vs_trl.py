"""Side-by-side speed of our rollout cycle and Hugging Face TRL's GRPOTrainer on the same machine.

    python benchmarks/speed/vs_trl.py [--cycles 5] [--warmup 1] [--threads 2] [--cases forced16,eos]
    python benchmarks/speed/vs_trl.py --model smollm2_135m [--engine hf|vllm] [--cycles 4]

Reference cycle (the issue's, ``--model tiny``, the default): the embedded tiny Llama, warm-started for
the default task (the model ``rlvr-train`` would use), B = 256 responses = 32 prompts x G = 8, K = 8
optimizer steps on minibatches of 32, at most 16 new tokens, temperature 1, no KL term, ``--threads``
torch threads.

``--model smollm2_135m``: the preset's own recipe (``model=smollm2_135m``, docs/real_model.md):
SmolLM2-135M-Instruct in fp32, B = 16 = 4 prompts x G = 4, K = 2 steps on minibatches of 8, at most 32
new tokens, T = 0.5, eta = 5e-6, chat prompts of task chain_sum read by the chat answer reader; case
``eos`` only (completions end at ``<|im_end|>``, the tokenizer's EOS, on both sides). TRL gets the
prompts as one-message conversations and renders them with the same chat template; the script checks
that TRL's own prompt tokenization (``GRPOTrainer._tokenize_prompts``) gives exactly our engine's ids.
``--engine vllm`` generates our side with the vLLM engine (``rollout.engine=vllm
rollout.vllm.max_num_seqs=32``; needs vLLM installed, e.g. the CPU build); TRL generates with
transformers' ``generate`` either way.

Both sides run in this one process, on their own copy of the same model directory, alternating:
TRL trains for (warmup + cycles) x K steps (it generates once every K steps), and at the end of each
K-step block a TrainerCallback runs one of our cycles (``Trainer._rollout()``), so TRL block i and our
cycle i are adjacent in time and see the same machine load; the ratio is taken per pair.

* Our cycle: wall time of ``Trainer._rollout()`` (generate, reward, advantages, old log-probs, K steps,
  weight sync, drift pass, clocks, logging; no evaluation, no checkpoint).
* TRL cycle: wall time from the end of the previous block (or of our cycle run after it) to
  ``on_step_end`` of the K-th step: one generation of B completions, reward, TRL's old-log-prob
  pass, K optimizer steps and all of TRL's per-step overhead (dataloader, metrics).  The callback
  checks that every block holds exactly one reward call with B completions.

Cases (each starts from fresh copies of the model on both sides):

* ``forced16`` (tiny model, HF engine): every completion runs 16 tokens. EOS can never be sampled on
  either side: TRL gets ``generation_kwargs={"min_new_tokens": 16}`` (transformers'
  MinNewTokensLengthLogitsProcessor sets the EOS logit to -inf for the first 16 tokens); ours gets the
  same -inf on the EOS logit from a forward hook on ``lm_head`` that is installed only while the engine
  samples (training and old-log-prob forwards see the unmodified model), plus ``engine.eos_id = -1`` as
  a backstop. Verified: mean completion length 16.0 and zero EOS tokens among completion tokens, on
  both sides.
* ``eos``: completions stop at EOS as in a real run (~3-5 tokens for the warm-started tiny model).

Output: per case a table of responses/s (min / median / max), completion tokens/s (median), the per-pair
ratio ours/TRL, mean completion lengths, the fraction of completions ending at EOS, zero-advantage group
fractions, our phase breakdown from our metrics rows, and TRL's (generation, scoring with its
old-log-prob pass, training) from timers around two of its methods. The last line is ``ratio=<min over the cases of
the median per-pair ratio>`` (the conservative one).

TRL is a benchmark-only optional dependency (``pip install trl==1.16.0``), never a runtime one.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks._common import REPO, trl_grpo_arguments  # noqa: E402

# The reference cycle of the issue (--model tiny).
REFERENCE = {"prompts": 32, "group": 8, "steps": 8, "max_new_tokens": 16}

# --model: our side's overrides (TRL takes the same shape, sampling and optimizer settings from the composed
# config) and the cases each model runs. smollm2_135m is the preset's recipe as composed, nothing changed.
MODELS = {
    "tiny": {
        "overrides": [
            f"rollout.prompts_per_rollout={REFERENCE['prompts']}",
            f"rollout.group_size={REFERENCE['group']}",
            f"optim.steps_per_rollout={REFERENCE['steps']}",
            f"rollout.max_new_tokens={REFERENCE['max_new_tokens']}",
        ],
        "cases": ("forced16", "eos"),
    },
    "smollm2_135m": {"overrides": ["model=smollm2_135m"], "cases": ("eos",)},
}
# --engine: our side's generation engine. max_num_seqs=32 for SmolLM2 is the setting the documented
# measurement ran with (it predates the engine's chunked-prefill fix, docs/real_model.md; the rollouts
# of B = 16 are one scheduler step either way).
ENGINES = {
    "hf": [],
    "vllm": ["rollout.engine=vllm"],
}
ENGINE_MODEL_OVERRIDES = {("vllm", "smollm2_135m"): ["rollout.vllm.max_num_seqs=32"]}


def load_text() -> str:
    try:
        up = subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except Exception:  # noqa: BLE001 - uptime is informational only
        up = ""
    la = os.getloadavg()
    return up or f"load average: {la[0]:.2f}, {la[1]:.2f}, {la[2]:.2f}"


def source_text() -> str:
    """Which code was measured: the git commit, and a digest of rlvr_scaling/ and conf/ as they are on disk."""
    import hashlib

    root = REPO
    h = hashlib.sha256()
    for path in sorted([*root.glob("rlvr_scaling/**/*.py"), *root.glob("conf/**/*.yaml")]):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "rlvr_scaling", "conf"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except Exception:  # noqa: BLE001 - informational only
        head, dirty = "?", ""
    return f"commit {head or '?'}{' + uncommitted changes' if dirty else ''}, rlvr_scaling+conf digest {h.hexdigest()[:12]}"


def compose_config(prompts: int, group: int, steps: int, max_new_tokens: int, extra=()):
    """The default Hydra config as ``rlvr-train`` composes it, with the cycle's overrides."""
    shape = [
        f"rollout.prompts_per_rollout={prompts}",
        f"rollout.group_size={group}",
        f"optim.steps_per_rollout={steps}",
        f"rollout.max_new_tokens={max_new_tokens}",
    ]
    return compose_overrides(shape, extra)


def compose_overrides(base, extra=()):
    """The Hydra config as ``rlvr-train`` composes it: ``base``, evaluation out of reach, then ``extra``."""
    from rlvr_scaling.cli.compose import compose
    from rlvr_scaling.config import derive

    cfg = compose([*base, "eval.every_responses=100000000", "run.progress=false", *extra])
    return cfg, derive(cfg)


# --------------------------------------------------------------------------------------------- ours


def ban_token_hook(token_id: int):
    def hook(_module, _inputs, output):
        output[..., token_id] = -math.inf
        return output

    return hook


@dataclass
class CycleResult:
    wall_s: float
    responses: int
    row: dict = field(default_factory=dict)
    eos_in_completions: int = 0

    @property
    def rps(self) -> float:
        return self.responses / self.wall_s


class OursCycle:
    """One of our trainers on a fresh copy of the warm-started model; ``cycle()`` times one rollout."""

    def __init__(self, cfg, derived, forced: bool, log=lambda *_: None):
        from rlvr_scaling.run import build_components
        from rlvr_scaling.trainer import Trainer

        self.cfg, self.derived, self.forced = cfg, derived, forced
        self.components = build_components(cfg, log=log)
        self.run_dir = Path(tempfile.mkdtemp(prefix="rlvr_vs_trl_"))
        self.trainer = Trainer(cfg, derived, self.run_dir, self.components, log=log)
        self.trainer.state.next_eval_at = 1 << 60  # no evaluation inside a timed cycle
        self.eos = self.components.tokenizer.eos_token_id
        self._eos_seen = 0
        engine = self.trainer.engine
        if forced:
            gen_model = getattr(engine, "model", self.trainer.model)
            inner_generate = engine.generate

            def generate(*args, **kwargs):
                handle = gen_model.lm_head.register_forward_hook(ban_token_hook(self.eos))
                try:
                    gen = inner_generate(*args, **kwargs)
                finally:
                    handle.remove()
                comp = gen.completion_mask.bool()
                self._eos_seen += int(((gen.input_ids == self.eos) & comp).sum())
                return gen

            engine.generate = generate  # instance attribute: shadows the method for this engine only
            if hasattr(engine, "eos_id"):
                engine.eos_id = -1  # backstop: never stop early even if a sampled token were EOS

    def cycle(self) -> CycleResult:
        self._eos_seen = 0
        n0 = self.trainer.clocks.responses
        t = time.perf_counter()
        self.trainer._rollout()
        wall = time.perf_counter() - t
        row = json.loads((self.run_dir / "metrics.jsonl").read_text().splitlines()[-1])
        return CycleResult(wall, self.trainer.clocks.responses - n0, row, self._eos_seen)

    def close(self) -> None:
        self.trainer.metrics.close()
        self.components.task.close()


def phases(row: dict) -> dict[str, float]:
    """Our phase times (seconds) from a metrics row: every ``perf/<phase>_s`` field (not rates)."""
    return {
        k[len("perf/") : -2]: float(v)
        for k, v in row.items()
        if k.startswith("perf/") and k.endswith("_s") and not k.endswith("per_s")
    }


# --------------------------------------------------------------------------------------------- TRL


class TrlSide:
    """TRL's GRPOTrainer on its own copy of the model; its reward function is our task's verifier."""

    def __init__(self, cfg, derived, model_dir: str, forced: bool, n_blocks: int, out_dir: Path):
        from datasets import Dataset
        from trl import GRPOConfig, GRPOTrainer

        from rlvr_scaling.models import load_hf
        from rlvr_scaling.tasks import build_task

        self.task = build_task(cfg.task)
        self.group = derived.group_size
        self.per_block = derived.responses_per_rollout
        model, tokenizer = load_hf(model_dir, cfg.model.dtype, torch.device("cpu"))
        self.eos = tokenizer.eos_token_id
        n_examples = max(4096, n_blocks * derived.prompts_per_rollout)
        self.examples = [self.task.train_example(i) for i in range(n_examples)]
        # chat models (model.prompt_format=chat): one user message, rendered by TRL through the tokenizer's
        # chat template with the assistant turn opened, as our engines render it (models.encode_prompt)
        self.chat = cfg.model.prompt_format == "chat"
        prompts = [self.as_prompt(e.prompt) for e in self.examples]
        dataset = Dataset.from_dict({"prompt": prompts, "idx": list(range(n_examples))})
        gen_kwargs = {"min_new_tokens": cfg.rollout.max_new_tokens} if forced else None
        args = GRPOConfig(
            output_dir=str(out_dir),
            **trl_grpo_arguments(
                group=derived.group_size,
                minibatch=derived.minibatch_responses,
                steps=derived.steps_per_rollout,
                max_new_tokens=cfg.rollout.max_new_tokens,
                max_steps=n_blocks * derived.steps_per_rollout,
                seed=cfg.seed,
            ),
            bf16=False,
            fp16=False,
            gradient_checkpointing=False,
            use_cpu=True,
            temperature=cfg.rollout.temperature,
            top_p=cfg.rollout.top_p,
            epsilon=cfg.loss.clip,
            max_grad_norm=cfg.optim.grad_clip or 0.0,
            learning_rate=derived.lr,
            lr_scheduler_type="constant",
            weight_decay=cfg.optim.weight_decay,
            adam_beta1=cfg.optim.betas[0],
            adam_beta2=cfg.optim.betas[1],
            adam_epsilon=cfg.optim.eps,
            generation_kwargs=gen_kwargs,
        )
        self.calls: list[dict] = []  # one entry per reward call (= per generation)

        def task_reward(prompts, completions, completion_ids, idx, **_):
            examples = [self.examples[i] for i in idx]
            assert all(self.as_prompt(e.prompt) == p for e, p in zip(examples, prompts)), "prompt mismatch"
            if self.chat:  # conversational completions: [{"role": "assistant", "content": text}]
                completions = [c[-1]["content"] for c in completions]
            rewards = self.task.score(completions, examples)
            vals = [math.nan if r is None else float(r) for r in rewards]
            groups = [vals[s : s + self.group] for s in range(0, len(vals), self.group)]
            same_prompt = all(len(set(idx[s : s + self.group])) == 1 for s in range(0, len(idx), self.group))
            zero = sum(1 for g in groups if max(g) - min(g) < 1e-12) if same_prompt else math.nan
            self.calls.append(
                {
                    "n": len(completions),
                    "length": statistics.fmean(len(c) for c in completion_ids),
                    "eos_in_completions": sum(c.count(self.eos) for c in completion_ids)
                    if forced
                    else sum(1 for c in completion_ids if c and c[-1] == self.eos),
                    "tokens": sum(len(c) for c in completion_ids),
                    "eos_frac": statistics.fmean(bool(c) and c[-1] == self.eos for c in completion_ids),
                    "zero_group_frac": zero / len(groups) if groups else math.nan,
                    "reward_mean": statistics.fmean(v for v in vals if v == v) if vals else math.nan,
                }
            )
            return rewards

        self.tokenizer = tokenizer
        self.trainer = GRPOTrainer(
            model=model,
            reward_funcs=task_reward,
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
        )
        # TRL's phases, timed around two of its own methods (what they do is unchanged): the generation
        # (``_generate``: sampling and decoding) inside ``_generate_and_score_completions`` (that, plus
        # rewards, advantages, its old-log-prob pass and its metrics); the rest of a block is its K steps.
        self.timers = {"generate": 0.0, "generate_and_score_completions": 0.0}
        for name in self.timers:
            setattr(self.trainer, f"_{name}", self._timed(name, getattr(self.trainer, f"_{name}")))

    def _timed(self, name: str, method):
        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.timers[name] += time.perf_counter() - t

        return timed

    def take_phases(self, wall: float) -> dict[str, float]:
        """TRL's phases (seconds) since the last call: generate, score (rewards, advantages, the old-log-prob
        pass, metrics) and train (the K steps and the per-step overhead: the rest of the block)."""
        gen, both = self.timers["generate"], self.timers["generate_and_score_completions"]
        self.timers = dict.fromkeys(self.timers, 0.0)
        return {"generate": gen, "score": both - gen, "train": wall - both}

    def as_prompt(self, text: str):
        return [{"role": "user", "content": text}] if self.chat else text

    def prompt_ids(self, texts: list[str]) -> list[list[int]]:
        """TRL's own prompt token ids: its tokenizer call for plain prompts (``add_special_tokens=True``),
        the chat template for conversations, through ``GRPOTrainer._tokenize_prompts`` (TRL 1.16.0)."""
        ids = self.trainer._tokenize_prompts([self.as_prompt(t) for t in texts])[0]
        return [list(x) for x in ids]


def make_callback(trl: TrlSide, steps_per_block: int, between_blocks):
    """Times each TRL block of ``steps_per_block`` optimizer steps; calls ``between_blocks(i)`` after it."""
    from transformers import TrainerCallback

    class BlockTimer(TrainerCallback):
        def __init__(self):
            self.blocks: list[dict] = []
            self.t0 = None
            self.calls_before = 0

        def on_train_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if state.global_step % steps_per_block:
                return
            wall = time.perf_counter() - self.t0
            new = trl.calls[self.calls_before :]
            self.calls_before = len(trl.calls)
            if len(new) != 1 or new[0]["n"] != trl.per_block:
                raise RuntimeError(
                    f"TRL block {len(self.blocks)}: expected one generation of {trl.per_block} completions, "
                    f"got reward calls {[c['n'] for c in new]}"
                )
            phases = trl.take_phases(wall)
            self.blocks.append({"wall_s": wall, "rps": trl.per_block / wall, "phases": phases, **new[0]})
            between_blocks(len(self.blocks) - 1)
            self.t0 = time.perf_counter()  # the next block starts after our cycle

    return BlockTimer()


# --------------------------------------------------------------------------------------------- report


def stats(xs: list[float]) -> tuple[float, float, float]:
    return min(xs), statistics.median(xs), max(xs)


def run_case(case: str, args, log=print) -> float:
    forced = case == "forced16"
    cfg, d = compose_overrides(
        MODELS[args.model]["overrides"],
        # forced: the engine samples from an EOS-banned distribution, so its recorded log-probs are not
        # the model's; pi_old is recomputed from the unmodified model, as TRL does
        [
            *ENGINES[args.engine],
            *ENGINE_MODEL_OVERRIDES.get((args.engine, args.model), []),
            *(["optim.old_logprobs=recompute"] if forced else []),
            *args.override,
        ],
    )
    torch.manual_seed(cfg.seed)
    log(
        f"\n[{case}] preparing both sides (a warm start or a model conversion is built on first use: minutes)"
    )
    ours = OursCycle(cfg, d, forced)
    n_blocks = args.warmup + args.cycles
    trl = TrlSide(cfg, d, ours.components.model_dir, forced, n_blocks, Path(tempfile.mkdtemp(prefix="trl_")))
    # Same prompt token ids on both sides (plain prompts: our tokenizer adds a BOS through its
    # post-processor, TRL calls the tokenizer with add_special_tokens=True; chat prompts: the same template).
    sample = [e.prompt for e in trl.examples[:64]]
    if trl.prompt_ids(sample) != [list(x) for x in ours.trainer.engine.encode(sample)]:
        raise RuntimeError("TRL and our engine tokenize the prompts differently")
    # Same stop tokens: ours (models.stop_token_ids) and TRL's generation config's eos ids
    stops, trl_stops = set(ours.trainer.engine.stop_ids), set(trl.trainer.eos_token_ids)
    if stops != trl_stops:
        raise RuntimeError(f"stop ids differ: ours {sorted(stops)}, TRL {sorted(trl_stops)}")
    ours_results: list[CycleResult] = []
    loads: list[float] = []

    def between(i: int) -> None:
        ours_results.append(ours.cycle())
        loads.append(os.getloadavg()[0])

    timer = make_callback(trl, d.steps_per_rollout, between)
    trl.trainer.add_callback(timer)
    load_start = load_text()
    t = time.perf_counter()
    trl.trainer.train()
    total = time.perf_counter() - t
    ours.close()
    w = args.warmup
    trl_b, our_c = timer.blocks[w:], ours_results[w:]
    if len(trl_b) != args.cycles or len(our_c) != args.cycles:
        raise RuntimeError(f"expected {args.cycles} timed pairs, got {len(trl_b)} TRL / {len(our_c)} ours")
    log(
        f"\n== model {args.model}, our engine {args.engine}, case {case}: B={d.responses_per_rollout} "
        f"(P={d.prompts_per_rollout} x G={d.group_size}), K={d.steps_per_rollout} (minibatch "
        f"{d.minibatch_responses}), max {cfg.rollout.max_new_tokens} new tokens, T={cfg.rollout.temperature}, "
        f"lr {d.lr:.3g}, {cfg.model.dtype}, {args.cycles} timed pairs after {w} warm-up ({total:.0f} s in all)"
    )
    log(f"   load at start: {load_start}")
    log(f"   1-min load during pairs: {', '.join(f'{x:.2f}' for x in loads[w:])}")
    ratio = report_sides(our_c, trl_b, trl.per_block, forced, log)
    report_phases(our_c, log)
    trl_phases = {k: [b["phases"][k] for b in trl_b] for k in trl_b[0]["phases"]}
    t_mean = statistics.fmean(b["wall_s"] for b in trl_b)
    log(
        f"   TRL's phases (s per cycle, median; share of its mean cycle {t_mean:.3f} s): "
        + ", ".join(
            f"{k} {statistics.median(v):.3f} ({100 * statistics.fmean(v) / t_mean:.1f} %)"
            for k, v in trl_phases.items()
        )
        + f"; generation {statistics.median(b['tokens'] / b['phases']['generate'] for b in trl_b):.1f} "
        "completion tokens/s"
    )
    if forced:
        o_len = statistics.fmean(o.row["train/completion_length"] for o in our_c)
        t_len = statistics.fmean(b["length"] for b in trl_b)
        o_eos = sum(o.eos_in_completions for o in our_c)
        t_eos = sum(b["eos_in_completions"] for b in trl_b)
        n = cfg.rollout.max_new_tokens
        if abs(o_len - n) > 1e-9 or abs(t_len - n) > 1e-9 or o_eos or t_eos:
            raise RuntimeError(
                f"forced case not forced: lengths ours {o_len}, TRL {t_len}; EOS {o_eos}/{t_eos}"
            )
    return ratio


def report_sides(our_c: list[CycleResult], trl_b: list[dict], per_block: int, forced: bool, log) -> float:
    """The side-by-side table and the per-pair ratios; returns the median per-pair ratio."""
    ratios = [o.rps / b["rps"] for o, b in zip(our_c, trl_b)]
    log(
        f"   {'side':<6} {'resp/s min':>10} {'median':>8} {'max':>8} {'tok/s med':>10} {'cycle s (med)':>14} "
        f"{'mean len':>9} {'EOS frac':>9} {'EOS in comp':>11} {'zero-adv groups':>16}"
    )
    sides = {
        "ours": {
            "rps": [o.rps for o in our_c],
            "tps": [o.row["rollout/tokens"] / o.wall_s for o in our_c],
            "wall": [o.wall_s for o in our_c],
            "len": [o.row["train/completion_length"] for o in our_c],
            "eos_frac": [o.row["train/finished_frac"] for o in our_c],
            "eos": sum(o.eos_in_completions for o in our_c),
            "zero": [o.row["train/zero_adv_frac"] for o in our_c],
        },
        "TRL": {
            "rps": [b["rps"] for b in trl_b],
            "tps": [b["tokens"] / b["wall_s"] for b in trl_b],
            "wall": [b["wall_s"] for b in trl_b],
            "len": [b["length"] for b in trl_b],
            "eos_frac": [b["eos_frac"] for b in trl_b],
            "eos": sum(b["eos_in_completions"] for b in trl_b),
            "zero": [b["zero_group_frac"] for b in trl_b],
        },
    }
    for name, v in sides.items():
        rps = stats(v["rps"])
        log(
            f"   {name:<6} {rps[0]:>10.2f} {rps[1]:>8.2f} {rps[2]:>8.2f} {statistics.median(v['tps']):>10.1f} "
            f"{statistics.median(v['wall']):>14.3f} {statistics.fmean(v['len']):>9.2f} "
            f"{statistics.fmean(v['eos_frac']):>9.3f} {v['eos'] if forced else '-':>11} "
            f"{statistics.fmean(v['zero']):>16.2f}"
        )
    r = stats(ratios)
    agg = (sum(o.responses for o in our_c) / sum(o.wall_s for o in our_c)) / (
        per_block * len(trl_b) / sum(b["wall_s"] for b in trl_b)
    )
    log(
        f"   per-pair ratio ours/TRL: min {r[0]:.2f}  median {r[1]:.2f}  max {r[2]:.2f}   "
        f"[{', '.join(f'{x:.2f}' for x in ratios)}];  all pairs pooled (total responses / total time): {agg:.2f}"
    )
    log(
        "   (tok/s: completion tokens per second of the whole cycle; EOS frac: completions ending at EOS; "
        "our zero-adv is the fraction of responses with advantage 0, TRL's the fraction of groups whose "
        "rewards are identical)"
    )
    return r[1]


def report_phases(our_c: list[CycleResult], log) -> None:
    """Our phase times per cycle (median, mean, share of the mean cycle) from our metrics rows."""
    ph = [phases(o.row) for o in our_c]
    keys = list(dict.fromkeys(k for p in ph for k in p))  # a phase may run on some rollouts only
    med = {k: statistics.median(p.get(k, 0.0) for p in ph) for k in keys}
    mean = {k: statistics.fmean(p.get(k, 0.0) for p in ph) for k in keys}
    o_mean_wall = statistics.fmean(o.wall_s for o in our_c)
    runs = {k: sum(k in p for p in ph) for k in keys}
    gen_tps = [o.row["rollout/tokens"] / max(p.get("generate", 0.0), 1e-9) for o, p in zip(our_c, ph)]
    log(
        f"   our phases (s per cycle; share of our mean cycle {o_mean_wall:.3f} s; generation "
        f"{statistics.median(gen_tps):.1f} completion tokens/s, median):"
    )
    log(f"     {'phase':<20} {'median':>7} {'mean':>7} {'share':>7}  ran in")
    for k in keys:
        log(
            f"     {k:<20} {med[k]:7.3f} {mean[k]:7.3f} {100 * mean[k] / o_mean_wall:6.1f} %  "
            f"{runs[k]}/{len(ph)} cycles"
        )
    other = o_mean_wall - sum(mean.values())
    log(
        f"     {'other':<20} {'':>7} {other:7.3f} {100 * other / o_mean_wall:6.1f} %  "
        "(advantages, clocks, logging, detectors)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=5, help="timed pairs per case (after warm-up)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed pairs per case")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", choices=sorted(MODELS), default="tiny", help="tiny: the reference cycle")
    ap.add_argument("--engine", choices=sorted(ENGINES), default="hf", help="our side's generation engine")
    ap.add_argument(
        "--cases", default=None, help="forced16,eos (tiny, HF engine); eos otherwise (the default)"
    )
    ap.add_argument(
        "--override",
        action="append",
        default=[],
        help="extra Hydra override for our side (repeatable), e.g. optim.skip_zero_advantage=false",
    )
    args = ap.parse_args()
    allowed = MODELS[args.model]["cases"] if args.engine == "hf" else ("eos",)  # forcing hooks HF's lm_head
    cases = [c.strip() for c in (args.cases or ",".join(allowed)).split(",") if c.strip()]
    if unknown := set(cases) - set(allowed):
        ap.error(f"cases {sorted(unknown)} do not run with --model {args.model} --engine {args.engine}")
    try:
        import trl
    except ImportError:
        sys.exit("benchmarks/speed/vs_trl.py needs TRL, a benchmark-only dependency: pip install trl==1.16.0")
    import transformers

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(args.threads)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    log = functools.partial(print, flush=True)
    log(
        f"vs_trl: torch {torch.__version__}, transformers {transformers.__version__}, trl {trl.__version__}, "
        f"{torch.get_num_threads()} torch threads, {os.cpu_count()} CPUs, "
        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}"
        + f", model {args.model}, our engine {args.engine}"
        + (f", our overrides {args.override}" if args.override else "")
    )
    log(f"code: {source_text()}")
    log(f"load: {load_text()}")
    medians = {case: run_case(case, args, log) for case in cases}
    print(f"\nload at end: {load_text()}")
    print(
        "median per-pair ratio ours/TRL: "
        + ", ".join(f"{c} {m:.2f}" for c, m in medians.items())
        + " -> reported: the min over cases (conservative)"
    )
    print(f"ratio={min(medians.values()):.2f}")


if __name__ == "__main__":
    main()
