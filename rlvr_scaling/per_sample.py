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
