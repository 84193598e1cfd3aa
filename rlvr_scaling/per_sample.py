"""Per-sample gradients of a rollout: exact norms from one batched backward pass, and a cheap proxy.

For response i with completion tokens o_i1..o_iT, a *per-sample objective* is
f_i(theta) = sum_t c_it * log pi_theta(o_it | prefix), with fixed (detached) coefficients c_it. Its
gradient g_i = grad f_i is what two instruments need:

- the optimal baseline of OBLR-PO (``baseline=optimal``): w_i = |grad log pi_theta(o_i)|^2, i.e. c_it = 1;
- the per-sample gradient-noise estimates (``noise/per_sample_*``): g_i is response i's contribution to
  the policy-gradient at theta_old, so that the rollout gradient is mean_i g_i (see :func:`noise_from_norms`).

**Exact norms** (:class:`PerSampleGradients`). Responses do not interact in a causal LM, so one backward
pass of sum_i f_i yields, at every layer, the per-sample activations a_i and output gradients d_i
(captured with module hooks). From them, without ever materialising B copies of the model's gradient:

- ``nn.Linear`` (weight [out, in]): grad_i = sum_t d_it a_it^T. Its squared Frobenius norm is taken either
  directly (materialise [n, out, in], cost T*in*out per sample) or as the "ghost norm"
  sum_{t,s} (d_it . d_is)(a_it . a_is) (Goodfellow 2015; Li et al. 2022; cost T^2*(in+out)), whichever
  is cheaper for the layer. Bias: |sum_t d_it|^2.
- ``nn.Embedding``: grad_i = sum_t e_{x_it} d_it^T, |grad_i|^2 = sum_{t,s} [x_it = x_is] (d_it . d_is),
  skipping ``padding_idx`` (whose row gets no gradient).
- element-wise affine modules (RMSNorm, LayerNorm: 1-D parameters of the size of the last output
  dimension): grad_i = sum_t d_it * dy/dw, with dy/dw (the normalised input) from one forward-mode
  ``torch.func.jvp`` of the module.
- a parameter used by several modules (tied input/output embeddings) has its per-sample gradients
  materialised per use and summed before the norm (norms of the uses are not additive).

Any trainable parameter outside these cases makes the model unsupported (a ``ConfigError`` at start-up,
not at step 500). The output gradients d_i come from ``torch.autograd.grad`` with respect to the
captured module outputs, so the weight-gradient matmuls run only when the sum of the g_i is wanted (the
noise instrument), not for the baseline's weights. Rows whose coefficients are all zero (zero
advantage) have g_i = 0 and are skipped. Cost: about one forward and backward pass over the rollout's
non-zero rows plus the norm contractions, measured on the embedded default by ``experiments/methods.py``
(``experiments/results/methods_summary.txt``).

**Proxy** (:func:`logit_grad_norms`): w_i ~ sum_t |d log pi(o_it) / d logits_t|^2
= sum_t |e_{o_it} - pi_t|^2 / T^2 (temperature T), one no-grad forward pass. It is the exact squared
gradient norm with respect to the logits treated as free parameters: it drops the Jacobian of the
logits with respect to theta and the cross-terms between positions. Cheap at any model size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .errors import ConfigError
from .policy import completion_logprobs, trim_padding

# Materialise a linear layer's per-sample gradients at most this many floats at a time.
_MATERIALISE_FLOATS = 1 << 24


@dataclass
class PerSampleResult:
    norms_sq: torch.Tensor  # [N] float64: |g_i|^2
    grad_sum: list[torch.Tensor]  # sum_i g_i, one tensor per trainable parameter (float32)

    @property
    def sum_norm_sq(self) -> float:
        return float(sum(g.double().pow(2).sum() for g in self.grad_sum))


class _Use:
    """One module that owns a parameter (a tied parameter has several uses)."""

    def __init__(self, module: torch.nn.Module, pname: str, kind: str):
        self.module, self.pname, self.kind = module, pname, kind


class PerSampleGradients:
    """Exact per-sample gradient norms of a model, from module hooks (see the module docstring)."""

    def __init__(self, model: torch.nn.Module, linear_method: str = "auto"):
        if linear_method not in ("auto", "ghost", "direct"):
            raise ValueError(f"linear_method must be auto, ghost or direct (got {linear_method!r})")
        self.model = model
        self.linear_method = linear_method
        self.params = [p for p in model.parameters() if p.requires_grad]
        uses: dict[int, list[_Use]] = {id(p): [] for p in self.params}
        self.modules: list[tuple[torch.nn.Module, str]] = []
        unsupported = []
        for mname, module in model.named_modules(remove_duplicate=False):
            own = {n: p for n, p in module._parameters.items() if p is not None and p.requires_grad}
            if not own:
                continue
            kind = _module_kind(module, own)
            if kind is None:
                unsupported += [f"{mname}.{n} ({type(module).__name__})" for n in own]
                continue
            if any(m is module for m, _ in self.modules):
                continue
            self.modules.append((module, kind))
            for n, p in own.items():
                uses[id(p)].append(_Use(module, n, kind))
        if unsupported:
            raise ConfigError(
                "exact per-sample gradient norms are not supported for parameters of "
                + ", ".join(unsupported[:5])
                + " (supported: Linear, Embedding, element-wise norm layers); use the logit-gradient proxy"
            )
        self.uses = [uses[id(p)] for p in self.params]

    def compute(
        self,
        input_ids: torch.Tensor,  # [N, L]
        attention_mask: torch.Tensor,  # [N, L]
        prompt_width: int,
        coefficients: torch.Tensor,  # [N, L - prompt_width] c_it (zero off completion tokens)
        temperature: float,
        device: torch.device,
        chunk: int | None = None,
        need_sum: bool = True,
    ) -> PerSampleResult:
        """|g_i|^2 for every row and (``need_sum``) sum_i g_i, with g_i = grad sum_t c_it log pi(o_it).

        Rows whose coefficients are all zero have g_i = 0 exactly and are skipped (norm 0).
        """
        n = input_ids.shape[0]
        norms = torch.zeros(n, dtype=torch.float64)
        grad_sum = [torch.zeros_like(p, dtype=torch.float32) for p in self.params] if need_sum else []
        todo = (coefficients != 0).any(dim=1).nonzero().squeeze(-1)
        chunk = chunk or max(int(todo.numel()), 1)
        was_training = self.model.training
        self.model.eval()
        try:
            for s in range(0, todo.numel(), chunk):
                rows = todo[s : s + chunk]
                ids, mask, start = trim_padding(input_ids[rows], attention_mask[rows], prompt_width)
                coef = coefficients[rows][:, : ids.shape[1] - start].to(device)
                norms[rows], grads = self._chunk(
                    ids.to(device), mask.to(device), start, coef, temperature, need_sum
                )
                for acc, g in zip(grad_sum, grads or []):
                    acc += g.float()
        finally:
            self.model.train(was_training)
        return PerSampleResult(norms, grad_sum)

    def _chunk(
        self, ids, mask, start, coef, temperature, need_sum: bool
    ) -> tuple[torch.Tensor, Sequence[torch.Tensor] | None]:
        captured: dict[int, list[list[torch.Tensor]]] = {id(m): [] for m, _ in self.modules}
        outputs: list[torch.Tensor] = []
        entries: list[list[torch.Tensor]] = []

        def hook(module, inputs, kwargs, output):
            x = inputs[0] if inputs else next(iter(kwargs.values()))
            entry = [x.detach(), None]
            captured[id(module)].append(entry)
            entries.append(entry)
            outputs.append(output)

        handles = [m.register_forward_hook(hook, with_kwargs=True) for m, _ in self.modules]
        try:
            with torch.enable_grad():
                logp, _ = completion_logprobs(self.model, ids, mask, start, temperature)
                objective = (coef.to(logp.dtype) * logp).sum()
        finally:
            for h in handles:
                h.remove()
        # Gradients with respect to the module outputs give every per-sample quantity; the parameter
        # gradients (the weight-gradient matmuls) are computed only when their sum is wanted.
        wanted = (self.params if need_sum else []) + outputs
        got = torch.autograd.grad(objective, wanted, allow_unused=True)
        grads = None
        if need_sum:
            grads = [torch.zeros_like(p) if g is None else g for p, g in zip(self.params, got)]
            got = got[len(self.params) :]
        for entry, out, g in zip(entries, outputs, got):
            entry[1] = torch.zeros_like(out) if g is None else g.detach()
        n = ids.shape[0]
        norms = torch.zeros(n, dtype=torch.float64, device=ids.device)
        for p, uses in zip(self.params, self.uses):
            calls = [(u, c) for u in uses for c in captured[id(u.module)]]
            if not calls:
                continue
            if len(uses) == 1:
                u = uses[0]
                norms += _norm_sq(u, [c for _, c in calls], p, self.linear_method).double()
            else:  # tied parameter: sum the materialised per-sample gradients of every use
                total = None
                for u, c in calls:
                    g = _materialise(u, c, p)
                    total = g if total is None else total + g
                norms += total.flatten(1).double().pow(2).sum(1)
        return norms.cpu(), grads


def _module_kind(module: torch.nn.Module, own: dict[str, torch.nn.Parameter]) -> str | None:
    if isinstance(module, torch.nn.Linear):
        return "linear"
    if isinstance(module, torch.nn.Embedding) and set(own) == {"weight"}:
        return "embedding"
    if all(p.dim() == 1 for p in own.values()) and len({p.shape for p in own.values()}) == 1:
        return "elementwise"
    return None


def _flat(t: torch.Tensor) -> torch.Tensor:
    """[n, ..., d] -> [n, T, d]: every non-batch, non-feature dimension is a 'token' of the sum."""
    return t.reshape(t.shape[0], -1, t.shape[-1])


def _norm_sq(use: _Use, calls: list[list[torch.Tensor]], p: torch.Tensor, method: str) -> torch.Tensor:
    """Per-sample |grad|^2 of parameter ``p`` owned by one module (possibly called several times)."""
    if use.kind == "linear":
        a = torch.cat([_flat(x).float() for x, _ in calls], dim=1)  # [n, T, in]
        d = torch.cat([_flat(g).float() for _, g in calls], dim=1)  # [n, T, out]
        if use.pname == "bias":
            return d.sum(1).pow(2).sum(1)
        n, t, i = a.shape
        o = d.shape[-1]
        ghost = t * t * (i + o) < t * i * o if method == "auto" else method == "ghost"
        if ghost:
            return ((a @ a.transpose(1, 2)) * (d @ d.transpose(1, 2))).sum((1, 2))
        out = torch.empty(n, dtype=torch.float32, device=a.device)
        step = max(1, _MATERIALISE_FLOATS // (i * o))
        for s in range(0, n, step):
            out[s : s + step] = (d[s : s + step].transpose(1, 2) @ a[s : s + step]).pow(2).sum((1, 2))
        return out
    if use.kind == "embedding":
        ids = torch.cat([x.reshape(x.shape[0], -1) for x, _ in calls], dim=1)  # [n, T]
        d = torch.cat([_flat(g).float() for _, g in calls], dim=1)  # [n, T, dim]
        pad = use.module.padding_idx
        if pad is not None:
            d = d * (ids != pad).unsqueeze(-1)
        same = (ids[:, :, None] == ids[:, None, :]).float()
        return (same * (d @ d.transpose(1, 2))).sum((1, 2))
    return _materialise(use, calls[0], p, calls).pow(2).sum(1)


def _materialise(use: _Use, call, p: torch.Tensor, calls=None) -> torch.Tensor:
    """Per-sample gradient of ``p`` from one module use: [n, *p.shape] (float32)."""
    calls = calls if calls is not None else [call]
    if use.kind == "linear":
        total = None
        for x, g in calls:
            a, d = _flat(x).float(), _flat(g).float()
            part = d.sum(1) if use.pname == "bias" else d.transpose(1, 2) @ a
            total = part if total is None else total + part
        return total
    if use.kind == "embedding":
        total = None
        for x, g in calls:
            ids = x.reshape(x.shape[0], -1)
            d = _flat(g).float()
            n, t = ids.shape
            vocab, dim = p.shape
            if use.module.padding_idx is not None:
                d = d * (ids != use.module.padding_idx).unsqueeze(-1)
            out = torch.zeros(n * vocab, dim, dtype=torch.float32, device=d.device)
            rows = (torch.arange(n, device=ids.device)[:, None] * vocab + ids).reshape(-1)
            out.index_add_(0, rows, d.reshape(-1, dim))
            part = out.view(n, vocab, dim)
            total = part if total is None else total + part
        return total
    # element-wise: d y / d w at every position from a forward-mode derivative in direction ones
    module = use.module
    total = None
    for x, g in calls:
        params = dict(module.named_parameters(recurse=False))
        tangent = {k: torch.zeros_like(v) for k, v in params.items()}
        tangent[use.pname] = torch.ones_like(params[use.pname])

        def f(ps, x=x):
            return torch.func.functional_call(module, ps, (x,))

        with torch.no_grad():
            _, dy_dw = torch.func.jvp(f, (params,), (tangent,))
        if dy_dw.shape[-1] != p.shape[0]:
            raise ConfigError(
                f"exact per-sample gradient norms: {type(module).__name__}.{use.pname} is not element-wise "
                "over the last dimension; use the logit-gradient proxy"
            )
        part = (_flat(g).float() * _flat(dy_dw).float()).sum(1)  # [n, d]
        total = part if total is None else total + part
    return total


@torch.no_grad()
def logit_grad_norms(
    model,
    input_ids: torch.Tensor,  # [N, L]
    attention_mask: torch.Tensor,  # [N, L]
    completion_mask: torch.Tensor,  # [N, L - prompt_width] bool
    prompt_width: int,
    temperature: float,
    device: torch.device,
    chunk: int | None = None,
) -> torch.Tensor:
    """Proxy weights sum_t |e_{o_t} - pi_t|^2 / T^2 per response, [N] float64 (one forward pass)."""
    n = input_ids.shape[0]
    chunk = chunk or n
    out = torch.zeros(n, dtype=torch.float64)
    was_training = model.training
    model.eval()
    try:
        for s in range(0, n, chunk):
            rows = slice(s, min(s + chunk, n))
            ids, mask, start = trim_padding(input_ids[rows], attention_mask[rows], prompt_width)
            ids, mask = ids.to(device), mask.to(device)
            logits = (
                model(
                    input_ids=ids,
                    attention_mask=mask,
                    logits_to_keep=ids.shape[1] - start + 1,
                    use_cache=False,
                )
                .logits[:, :-1]
                .float()
            )
            probs = torch.softmax(logits / temperature, dim=-1)
            taken = probs.gather(-1, ids[:, start:, None]).squeeze(-1)
            sq = 1.0 - 2.0 * taken + probs.pow(2).sum(-1)  # |e_y - pi|^2
            comp = completion_mask[rows][:, : sq.shape[1]].to(device)
            out[rows] = (torch.where(comp, sq, torch.zeros_like(sq)).sum(1) / temperature**2).double().cpu()
    finally:
        model.train(was_training)
    return out


def noise_from_norms(norms_sq: torch.Tensor, sum_norm_sq: float, minibatch: float) -> dict[str, float]:
    """Unbiased gradient-noise estimates from N i.i.d. per-sample gradients g_i.

    With E g_i = G and Cov g_i = Sigma, E|g_i|^2 = |G|^2 + tr Sigma and E|g_bar|^2 = |G|^2 + tr Sigma / N
    for g_bar = mean_i g_i, so (the two-batch-size estimator of McCandlish et al. 2018 with b = 1):

        tr Sigma ~ N / (N - 1) * (mean_i |g_i|^2 - |g_bar|^2),    |G|^2 ~ |g_bar|^2 - tr Sigma / N.

    ``sum_norm_sq`` is |sum_i g_i|^2. SNR is reported for a minibatch of ``minibatch`` responses,
    |G|^2 / (tr Sigma / b), comparable with ``noise/snr``; B_noise = tr Sigma / |G|^2.
    """
    n = int(norms_sq.numel())
    if n < 2:
        return {"grad_norm_sq": math.nan, "trace_cov": math.nan, "snr": math.nan, "b_noise": math.nan}
    mean_sq = float(norms_sq.double().mean())
    gbar_sq = sum_norm_sq / n**2
    trace = (mean_sq - gbar_sq) * n / (n - 1)
    signal = gbar_sq - trace / n
    return {
        "grad_norm_sq": signal,
        "trace_cov": trace,
        "snr": signal / (trace / minibatch) if trace > 0 else math.inf,
        "b_noise": trace / signal if signal > 0 else math.inf,
    }


# ----------------------------------------------------------------------------------------------
# what the trainer computes from per-sample gradients each rollout

NOISE_MODES = ("auto", "on", "off")


@dataclass
class PerSampleNoiseParams:
    """The exact per-sample gradient-noise instrument (``noise/per_sample_*``).

    Read from ``cfg.noise`` when the config has that node, else these defaults apply.
    """

    # on | off | auto (on up to max_parameters model parameters). Off by default: one exact pass costs
    # ~+64 % of a cycle on the embedded model (~8 % at every 8th rollout); the minibatch estimator
    # (noise/grad_norm_sq, trace_cov, snr, b_noise) is always on at ~3 %.
    per_sample: str = "off"
    max_parameters: int = 2_000_000  # auto: on for models up to this size (the embedded default)
    every_rollouts: int = 8  # run on every n-th rollout (1 when lr.source=per_sample)

    def validate(self, prefix: str = "noise") -> None:
        if self.per_sample not in NOISE_MODES:
            raise ConfigError(
                f"{prefix}.per_sample must be one of {', '.join(NOISE_MODES)} (got {self.per_sample!r})"
            )
        if self.every_rollouts < 1:
            raise ConfigError(f"{prefix}.every_rollouts must be >= 1 (got {self.every_rollouts})")


class RolloutGradients:
    """Per rollout: the optimal baseline's weights w_i and the per-sample noise estimates.

    Built once by the trainer; everything a configuration needs is decided (and checked) here, at
    start-up: which weights the baseline gets (``exact`` / ``proxy`` / none) and whether the per-sample
    noise instrument runs.
    """

    def __init__(self, cfg, model, ref_model, device, n_params: int, needs: frozenset[str]):
        self.cfg, self.model, self.ref_model, self.device = cfg, model, ref_model, device
        self.weights_kind: str | None = None
        exact: PerSampleGradients | None = None
        if "grad_weights" in needs:
            kind = getattr(cfg.baseline, "weights", "auto")
            if kind == "auto":
                kind = "exact" if n_params <= cfg.baseline.exact_max_parameters else "proxy"
                if kind == "exact":
                    try:
                        exact = PerSampleGradients(model)
                    except ConfigError:
                        kind = "proxy"
            elif kind == "exact":
                exact = PerSampleGradients(model)  # raises ConfigError for an unsupported model
            self.weights_kind = kind
        noise = getattr(cfg, "noise", None) or PerSampleNoiseParams()
        noise.validate()
        on = noise.per_sample == "on" or (noise.per_sample == "auto" and n_params <= noise.max_parameters)
        if on and exact is None:
            try:
                exact = PerSampleGradients(model)
            except ConfigError:
                if noise.per_sample == "on":
                    raise
                on = False
        self.noise_on = on
        self.exact = exact
        self.every = noise.every_rollouts
        if getattr(cfg.lr, "source", None) == "per_sample":
            if not self.noise_on:
                raise ConfigError(
                    "lr.source=per_sample needs the per-sample noise instrument (noise.per_sample=on, or "
                    "auto on a model with at most noise.max_parameters parameters)"
                )
            self.every = 1  # the LR rule reads a fresh estimate every rollout
        k = cfg.optim.steps_per_rollout
        self.minibatch = cfg.rollout.prompts_per_rollout * cfg.rollout.group_size / k
        self.chunk = cfg.optim.micro_batch_responses or max(
            cfg.rollout.prompts_per_rollout * cfg.rollout.group_size // k, 64
        )

    def describe(self) -> str:
        parts = []
        if self.weights_kind:
            parts.append(f"optimal-baseline weights: {self.weights_kind}")
        parts.append(f"per-sample noise: {f'every {self.every} rollout(s)' if self.noise_on else 'off'}")
        return "; ".join(parts)

    def noise_due(self, rollout: int) -> bool:
        """Whether the per-sample noise instrument runs on this rollout (0-based index)."""
        return self.noise_on and rollout % self.every == 0

    def _comp(self, gen) -> torch.Tensor:
        return gen.completion_mask[:, gen.prompt_width :]

    def baseline_weights(self, gen, rewards: torch.Tensor) -> torch.Tensor | None:
        """w_i = |grad log pi_theta(o_i)|^2 (exact) or the logit-gradient proxy, [N] float64.

        Exact weights are computed only where they can change an advantage: scorable responses in
        groups whose rewards are not all equal (without a KL term, a constant group has A = 0 whatever
        its baseline); the others get w = 0, which no baseline reads.
        """
        if self.weights_kind is None:
            return None
        t = self.cfg.rollout.temperature
        comp = self._comp(gen)
        if self.weights_kind == "exact":
            rows = ~torch.isnan(rewards)
            if self.cfg.loss.kl_coef == 0:
                from .algorithms.allocators import reward_variance

                n_groups = int(gen.prompt_index.max()) + 1
                rows &= (reward_variance(rewards, gen.prompt_index, n_groups) > 0)[gen.prompt_index]
            coef = (comp & rows[:, None]).to(torch.float32)
            res = self.exact.compute(
                gen.input_ids, gen.attention_mask, gen.prompt_width, coef, t, self.device, self.chunk, False
            )
            return res.norms_sq
        return logit_grad_norms(
            self.model, gen.input_ids, gen.attention_mask, comp, gen.prompt_width, t, self.device, self.chunk
        )

    @torch.no_grad()
    def kl_logratio(self, gen) -> torch.Tensor | None:
        """sum_t log(pi_theta / pi_ref)(o_it) per response at theta_old, when the KL term is on."""
        if self.weights_kind is None or self.ref_model is None or self.cfg.loss.kl_coef == 0:
            return None
        out = torch.zeros(len(gen), dtype=torch.float64)
        comp = self._comp(gen)
        for sign, model in ((1.0, self.model), (-1.0, self.ref_model)):
            for s in range(0, len(gen), self.chunk):
                rows = slice(s, s + self.chunk)
                ids, mask, start = trim_padding(
                    gen.input_ids[rows], gen.attention_mask[rows], gen.prompt_width
                )
                lp, _ = completion_logprobs(
                    model, ids.to(self.device), mask.to(self.device), start, self.cfg.rollout.temperature
                )
                c = comp[rows][:, : lp.shape[1]].to(lp.device)
                out[rows] += sign * torch.where(c, lp, torch.zeros_like(lp)).sum(1).double().cpu()
        return out

    def noise(self, gen, advantages, old_logp, ref_logp) -> dict[str, float]:
        """Per-sample noise estimates of the first step's gradient at theta_old (see noise_from_norms).

        g_i = N * sum_t w_it * grad l_it at ratio 1, with w_it the loss's token weights over the whole
        rollout, so that the rollout gradient is mean_i g_i: grad l_it = (-A_i + beta * (1 - pi_ref/pi)) *
        grad log pi(o_it) (the clip is inactive at ratio 1; the k3 term's gradient).
        """
        from .algorithms.loss import token_weights

        cfg = self.cfg
        comp = self._comp(gen)
        n = len(gen)
        constant = cfg.loss.constant_normalizer or cfg.rollout.max_new_tokens
        w = token_weights(comp, cfg.loss.aggregation, constant) * n
        coef = -advantages.float()[:, None] * torch.ones_like(w)
        if cfg.loss.kl_coef > 0 and ref_logp is not None:
            coef = coef + cfg.loss.kl_coef * (1.0 - torch.exp(ref_logp - old_logp))
        coef = torch.where(comp, w * coef, torch.zeros_like(w))
        if not bool((coef != 0).any()):
            return noise_from_norms(torch.zeros(n, dtype=torch.float64), 0.0, self.minibatch)
        res = self.exact.compute(
            gen.input_ids,
            gen.attention_mask,
            gen.prompt_width,
            coef,
            cfg.rollout.temperature,
            self.device,
            self.chunk,
        )
        return noise_from_norms(res.norms_sq, res.sum_norm_sq, self.minibatch)

    def baseline_diagnostics(self, inputs, advantages: torch.Tensor) -> dict[str, float]:
        """Which weights ran, and the baseline's effect on the per-sample gradient second moment.

        ``train/baseline_var_ratio`` = sum_i w_i A_i^2 / sum_i w_i (r_i - mean_q r)^2: with exact weights,
        sum_i |A_i grad log pi(o_i)|^2 under this baseline relative to the plain group-mean baseline on the
        same responses (< 1: the weighted baseline lowered the gradient's second moment).
        """
        if self.weights_kind is None or inputs.grad_weights is None:
            return {}
        from .algorithms.baselines import GRPOParams, compute_advantages

        centred = compute_advantages(GRPOParams(scale="none"), inputs)
        w = inputs.grad_weights.double()
        ref = float((w * centred.double() ** 2).sum())
        got = float((w * advantages.double() ** 2).sum())
        return {
            "train/baseline_weights_exact": 1.0 if self.weights_kind == "exact" else 0.0,
            "train/baseline_var_ratio": got / ref if ref > 0 else math.nan,
            "train/baseline_weight_cv": _cv(w[w > 0]),
        }


def _cv(w: torch.Tensor) -> float:
    """Coefficient of variation of the (computed, positive) weights: 0 means the plain group mean."""
    return float(w.std() / w.mean()) if w.numel() > 1 else 0.0
