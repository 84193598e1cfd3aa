"""Curvature of the rollout's surrogate objective at theta_old: the objective itself, Hessian-vector
products (double backward or central finite differences of gradients), power iteration for the top
eigenvalue, and the same on Adam's preconditioned Hessian with its stability threshold. What each
measures and how: :mod:`rlvr_scaling.curvature`'s docstring, "Curvature"."""

from __future__ import annotations

import math

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from .noise_cells import dot
from .policy import completion_logprobs, trim_padding


class SurrogateObjective:
    """The subsample's surrogate objective sum_rows weight_i * sum_t coef_it * rho_it and its gradient,
    with rho = exp(log pi_theta - log pi_theta_old); log pi_theta_old is fixed by the first evaluation,
    which must be at theta_old."""

    def __init__(self, model, gen, rows: torch.Tensor, coef: torch.Tensor, temperature: float, device):
        self.model, self.device, self.temperature = model, device, temperature
        self.params = [p for p in model.parameters()]
        ids, mask, start = trim_padding(gen.input_ids[rows], gen.attention_mask[rows], gen.prompt_width)
        self.ids, self.mask, self.start = ids.to(device), mask.to(device), start
        self.coef = coef[:, : ids.shape[1] - start].to(device)
        self.active = bool((self.coef != 0).any())
        # log pi_theta_old, kept from the first forward (the cell gradient at theta_old, which always
        # comes first): no separate pass
        self.logp0: torch.Tensor | None = None

    def _logp(self) -> torch.Tensor:
        logp, _ = completion_logprobs(self.model, self.ids, self.mask, self.start, self.temperature)
        return logp

    def value(self) -> torch.Tensor:
        logp = self._logp()
        if self.logp0 is None:
            self.logp0 = logp.detach()
        return (self.coef.to(logp.dtype) * torch.exp(logp - self.logp0)).sum()

    def anchor(self) -> None:
        """Fix log pi_theta_old now (one no-grad forward; the parameters must be theta_old)."""
        if self.logp0 is None and self.active:
            with torch.no_grad():
                self.logp0 = self._logp().detach()

    def grad(self, create_graph: bool = False) -> list[torch.Tensor]:
        if not self.active:
            return [torch.zeros_like(p, dtype=torch.float32) for p in self.params]
        with torch.enable_grad():
            got = torch.autograd.grad(self.value(), self.params, create_graph=create_graph, allow_unused=True)
        return [torch.zeros_like(p) if g is None else g for p, g in zip(self.params, got)]


class HessianVectorProducts:
    """H v at the current parameters for several v, for the Hessian of sum_o o.value() with respect to
    the shared ``o.params``.

    ``double_backward``: grad(grad L . v). The first-order gradient and its graph are built once (one
    forward and one backward with ``create_graph``) and kept, so every further product is one more
    backward pass through that graph. ``finite_difference``: (grad L(theta + h v) - grad L(theta - h v))
    / (2 h) with h = eps * max(|theta|, 1) / |v| (exact for a quadratic up to rounding; the parameters are
    restored bit for bit; log pi_theta_old is fixed first, at the unperturbed parameters). ``reduce`` sums
    each result over ranks (data-parallel). Call :meth:`close` (or use as a context manager) to drop the
    kept graph.
    """

    def __init__(self, objectives, kind: str, eps: float, reduce=None):
        self.objectives = [o for o in objectives]
        self.kind, self.eps = kind, eps
        self.reduce = reduce or (lambda x: x)
        self.params = self.objectives[0].params
        self._grads: list[list[torch.Tensor]] | None = None  # double backward: grad L with its graph

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.close()

    def close(self) -> None:
        self._grads = None

    def __call__(self, v: list[torch.Tensor]) -> list[torch.Tensor]:
        if self.kind == "double_backward":
            return self.reduce(self._double_backward(v))
        return self._finite_difference(v)

    def _double_backward(self, v):
        active = [o for o in self.objectives if o.active]
        if not active:
            return [torch.zeros_like(x) for x in v]
        # the math attention kernel: the fused ones have no second derivative
        with torch.enable_grad(), sdpa_kernel(SDPBackend.MATH):
            if self._grads is None:
                self._grads = [o.grad(create_graph=True) for o in active]
            dot = sum((gi * vi.to(gi.dtype)).sum() for g in self._grads for gi, vi in zip(g, v))
            if not dot.requires_grad:  # no parameter reaches the objective's second derivative
                return [torch.zeros_like(p) for p in self.params]
            hv = torch.autograd.grad(dot, self.params, retain_graph=True, allow_unused=True)
        return [torch.zeros_like(p) if h is None else h.detach() for p, h in zip(self.params, hv)]

    def _finite_difference(self, v):
        for o in self.objectives:
            if hasattr(o, "anchor"):
                o.anchor()
        params = self.params
        saved = [p.detach().clone() for p in params]
        norm_v = math.sqrt(dot(v, v))
        if norm_v == 0:
            return [torch.zeros_like(x) for x in v]
        h = self.eps * max(math.sqrt(dot(saved, saved)), 1.0) / norm_v
        grads = []
        try:
            for sign in (1.0, -1.0):
                with torch.no_grad():
                    for p, s, x in zip(params, saved, v):
                        p.copy_(s + sign * h * x.to(s.dtype))
                total = None
                for o in self.objectives:
                    g = o.grad()
                    total = g if total is None else [a + b for a, b in zip(total, g)]
                grads.append(total)
        finally:
            with torch.no_grad():
                for p, s in zip(params, saved):
                    p.copy_(s)
        up = [torch.promote_types(a.dtype, torch.float32) for a in grads[0]]  # bf16 gradients: in fp32
        return self.reduce([(a.to(t) - b.to(t)) / (2 * h) for a, b, t in zip(*grads, up)])


def hessian_vector_product(objectives, v: list[torch.Tensor], kind: str, eps: float, reduce=None):
    """One H v (see :class:`HessianVectorProducts`, which keeps what several products at one point share)."""
    with HessianVectorProducts(objectives, kind, eps, reduce) as hvp:
        return hvp(v)


def power_iteration(hvp, v: list[torch.Tensor], iterations: int) -> tuple[float, list[torch.Tensor] | None]:
    """The Rayleigh quotient v'Hv of the last of ``iterations`` power-iteration steps from ``v`` (the
    eigenvalue of largest magnitude, signed, as the steps converge) and the next (normalised) vector."""
    rayleigh = math.nan
    for _ in range(iterations):
        norm = math.sqrt(dot(v, v))
        if norm == 0:
            return math.nan, None
        v = [x / norm for x in v]
        hv = hvp(v)
        rayleigh = dot(v, hv)
        v = hv
    norm = math.sqrt(dot(v, v))
    return rayleigh, ([x / norm for x in v] if norm > 0 else None)


def preconditioned_power_iteration(
    hvp, P: list[torch.Tensor], v: list[torch.Tensor], iterations: int
) -> float:
    """The top eigenvalue of P^(1/2) H P^(1/2) (the spectrum of P H, Adam's preconditioned Hessian) by
    :func:`power_iteration` on v -> P^(1/2) H (P^(1/2) v); a Rayleigh quotient after ``iterations`` steps."""
    root = [w.sqrt() for w in P]

    def product(x):
        hx = hvp([r.to(t.dtype) * t for r, t in zip(root, x)])
        return [r.to(h.dtype) * h for r, h in zip(root, hx)]

    value, _ = power_iteration(product, v, iterations)
    return value


def adam_threshold(beta1: float) -> float:
    """Adam's stability threshold of eta * lambda_max(P H): 2 (1 + beta1) / (1 - beta1) (38 at beta1 = 0.9;
    Cohen et al. 2022, "Adaptive gradient methods at the edge of stability")."""
    return 2.0 * (1.0 + beta1) / (1.0 - beta1)
