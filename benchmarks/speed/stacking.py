"""What several seeds trained as one stacked model could buy a small rollout: one optimizer step's parts.

    python benchmarks/speed/stacking.py [--seeds 1,8,16] [--rows 3] [--row-tokens 8] [--threads 1] [--reps 30]
                                  [--compile]

A B = 32 run of the embedded default takes K = 8 optimizer steps on minibatches of 4 responses, of
which ~0.6 reach the loss (zero-advantage rows are skipped) at ~8 tokens a row: a forward and backward
over ~20 tokens. Stacking S seeds of one condition would run their S minibatches as one batched
computation. This prints, per seed and per optimizer step (milliseconds, median of ``--reps``):

- ``hf``: the trainer's packed forward (:func:`rlvr_scaling.policy.completion_logprobs_packed`) and
  backward on one seed's minibatch, S times one after another (today);
- ``vmap``: :func:`torch.func.vmap` of the same transformers model over S stacked parameter sets
  (``torch.func.stack_module_state``), one forward and backward for all S;
- ``bmm``: a functional Llama of the same architecture written for stacked weights (``[S, in, out]``
  batched matrix products, fused q/k/v and gate/up projections), one forward and backward for all S;
- ``adamw``: the fused AdamW step over S stacked copies of the parameters (the part of a step that
  streams every weight, gradient and moment through memory: it does not shrink per seed when stacked).

``--compile``: also one seed's step through ``torch.compile(model, dynamic=True)`` (the HF model,
the same packed forward), with the seconds its first call spends compiling (inductor's on-disk cache
makes a second process faster than the first).

The model is the embedded one as runs build it (tied input and output embeddings), at its
initialisation (the timings do not depend on the weights).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
import warnings

import torch
import torch.nn.functional as F


def timed(fn, reps: int) -> float:
    for _ in range(3):
        fn()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out) * 1e3


def llama(vocab: int):
    """The embedded model as runs build it (``build_embedded_model``: tied input and output embeddings)."""
    from rlvr_scaling.models import EmbeddedModelConfig, build_embedded_model, build_tokenizer

    tok = build_tokenizer()
    assert len(tok) == vocab, (len(tok), vocab)
    return build_embedded_model(EmbeddedModelConfig(), tok)


def stacked_weights(models) -> dict:
    """The S models' weights as ``[S, in, out]`` tensors (q/k/v and gate/up fused), leaves with grad."""

    def st(get):
        return torch.stack([get(m) for m in models]).detach().requires_grad_()

    layers = []
    for i in range(len(models[0].model.layers)):

        def lay(m, i=i):
            return m.model.layers[i]

        layers.append(
            {
                "n1": st(lambda m: lay(m).input_layernorm.weight),
                "qkv": st(
                    lambda m: torch.cat(
                        [
                            lay(m).self_attn.q_proj.weight,
                            lay(m).self_attn.k_proj.weight,
                            lay(m).self_attn.v_proj.weight,
                        ]
                    ).t()
                ),
                "o": st(lambda m: lay(m).self_attn.o_proj.weight.t()),
                "n2": st(lambda m: lay(m).post_attention_layernorm.weight),
                "gu": st(lambda m: torch.cat([lay(m).mlp.gate_proj.weight, lay(m).mlp.up_proj.weight]).t()),
                "d": st(lambda m: lay(m).mlp.down_proj.weight.t()),
            }
        )
    return {
        "emb": st(lambda m: m.model.embed_tokens.weight),
        "layers": layers,
        "nf": st(lambda m: m.model.norm.weight),
    }


def bmm_forward(w: dict, ids: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor, cfg) -> torch.Tensor:
    """Logits ``[S, T, V]`` of S stacked Llamas on S packed sequences (block-causal ``mask`` [T, T])."""
    s, t = ids.shape
    nh = cfg.num_attention_heads
    hd = cfg.hidden_size // nh
    eps = cfg.rms_norm_eps

    def rms(x, g):
        return g[:, None] * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    def rot(x):
        return torch.cat((-x[..., hd // 2 :], x[..., : hd // 2]), -1)

    x = torch.gather(w["emb"], 1, ids[..., None].expand(s, t, cfg.hidden_size))
    inv = 1.0 / (cfg.rope_parameters["rope_theta"] ** (torch.arange(0, hd, 2).float() / hd))
    f = pos[..., None].float() * inv
    e = torch.cat((f, f), -1)
    cos, sin = e.cos()[:, None], e.sin()[:, None]
    for lw in w["layers"]:
        q, k, v = torch.bmm(rms(x, lw["n1"]), lw["qkv"]).view(s, t, 3, nh, hd).permute(2, 0, 3, 1, 4)
        q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + torch.bmm(a.transpose(1, 2).reshape(s, t, -1), lw["o"])
        g, u = torch.bmm(rms(x, lw["n2"]), lw["gu"]).chunk(2, -1)
        x = x + torch.bmm(F.silu(g) * u, lw["d"])
    return torch.bmm(rms(x, w["nf"]), w["emb"].transpose(1, 2))  # tied: the head is the embedding


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="1,8,16")
    ap.add_argument("--rows", type=int, default=3, help="rows of a minibatch that reach the loss")
    ap.add_argument("--row-tokens", type=int, default=8, help="tokens of a row (prompt and completion)")
    ap.add_argument("--completion", type=int, default=3, help="completion tokens of a row")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--compile", action="store_true", help="also time a compiled step (see above)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    from rlvr_scaling.models import CHARACTERS, SPECIAL_TOKENS

    vocab = len(CHARACTERS) + len(SPECIAL_TOKENS)
    n, lr, lc = args.rows, args.row_tokens, args.completion
    t = n * lr
    print(
        f"one seed's step: {n} rows x {lr} tokens ({t} tokens), {args.threads} thread(s); "
        f"ms per seed and step (median of {args.reps})"
    )
    print(f"{'S':>4} {'hf':>8} {'vmap':>8} {'bmm':>8} {'adamw':>8}")
    for s in [int(x) for x in args.seeds.split(",")]:
        row = per_seed(s, n, lr, lc, vocab, args.reps)
        print(f"{s:>4} " + " ".join(f"{x:8.2f}" for x in row))
    if args.compile:
        compiled(n, lr, lc, vocab, args.reps)


def compiled(n: int, lr: int, lc: int, vocab: int, reps: int) -> None:
    """One seed's step, eager and through ``torch.compile(dynamic=True)``, and the compilation's seconds."""
    from rlvr_scaling.models import SPECIAL_TOKENS
    from rlvr_scaling.policy import completion_logprobs_packed

    torch.manual_seed(0)
    model = llama(vocab)
    ids = torch.randint(len(SPECIAL_TOKENS), vocab, (n, lr))
    mask = torch.ones((n, lr), dtype=torch.long)

    def step(m):
        completion_logprobs_packed(m, ids, mask, lr - lc, 1.0).sum().backward()

    eager = timed(lambda: step(model), reps)
    fast = torch.compile(model, dynamic=True)
    t = time.perf_counter()
    step(fast)
    first = time.perf_counter() - t
    print(
        f"compiled: eager {eager:.2f} ms, compiled {timed(lambda: step(fast), reps):.2f} ms, first call {first:.1f} s"
    )


def per_seed(s: int, n: int, lr: int, lc: int, vocab: int, reps: int) -> list[float]:
    """Milliseconds per seed of one step for S = ``s`` seeds: hf, vmap, bmm, adamw (module docstring)."""
    from torch.func import functional_call, stack_module_state, vmap

    from rlvr_scaling.models import SPECIAL_TOKENS
    from rlvr_scaling.policy import completion_logprobs_packed

    t = n * lr
    seg = torch.arange(n).repeat_interleave(lr)
    ar = torch.arange(t)
    block = (seg[:, None] == seg[None, :]) & (ar[:, None] >= ar[None, :])
    pos = torch.arange(lr).repeat(n)
    torch.manual_seed(0)
    models = [llama(vocab) for _ in range(s)]
    ids = torch.randint(len(SPECIAL_TOKENS), vocab, (s, n, lr))
    mask = torch.ones((n, lr), dtype=torch.long)

    def hf():
        for i, m in enumerate(models):
            completion_logprobs_packed(m, ids[i], mask, lr - lc, 1.0).sum().backward()

    params, bufs = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")
    flat_ids, flat_pos = ids.view(s, 1, t), pos.expand(s, 1, t).contiguous()
    mask4 = block[None, None].expand(s, 1, 1, t, t).contiguous()

    def one(p, b, x, ps, mk):
        p = {**p, "lm_head.weight": p["model.embed_tokens.weight"]}  # the tied head, passed explicitly
        kw = dict(input_ids=x, position_ids=ps, attention_mask=mk, use_cache=False)
        return functional_call(base, (p, b), (), kw).logits

    def vm():
        vmap(one)(params, bufs, flat_ids, flat_pos, mask4).logsumexp(-1).sum().backward()

    w = stacked_weights(models)
    cfg = models[0].config

    def bm():
        bmm_forward(w, ids.view(s, t), pos.expand(s, t), block, cfg).logsumexp(-1).sum().backward()

    stacked = [p.detach().clone().requires_grad_() for p in params.values()]
    for p in stacked:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(stacked, lr=1e-5, fused=True)
    return [timed(f, reps) / s for f in (hf, vm, bm)] + [timed(opt.step, reps) / s]


if __name__ == "__main__":
    main()
