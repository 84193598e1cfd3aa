"""Gradient noise and curvature at one point, theta_old: the inputs of the two-clock theory.

**Why at one point.** The minibatch estimator of :mod:`rlvr_scaling.noise` compares the K minibatch
gradients of a rollout, taken at K successive parameters; the drift between them inflates tr Sigma by
about b * K / (K - 1) * Var_k(G_k). Here every gradient is taken at theta_old, before the first step,
so the estimates are unbiased for exchangeable samples at that point.

**Design (cells).** A subsample of S prompts of the rollout (``noise.prompts_at_theta_old``; default
B / (K G), one minibatch's worth of responses, at least 2), each with c_q >= 2 responses, is split
twice: the prompts into two sets A and B (alternately), and the responses of every prompt into two
halves 1 and 2 (c_q1 = floor(c_q / 2), c_q2 = c_q - c_q1). One backward pass per cell h in
{A1, A2, B1, B2} gives the cell vector

    V_h = sum_{q in h} mean_{i in q, half h} g_i

where g_i is response i's per-sample gradient, scaled so that the rollout gradient is mean_i g_i (as in
``noise/per_sample_*``): g_i = N * sum_t w_it * (-A_i) * grad rho_it at ratio rho = pi_theta / pi_old = 1,
with w_it the loss's token weights over the rollout. Model: g_i = G + a_q + e_i with a_q (the prompt's
effect, covariance Sigma_b) and e_i (the response's, Sigma_w) independent, so that a single response has
covariance Sigma = Sigma_w + Sigma_b. For any symmetric X (the identity, or the Hessian H), with
D_A = (V_A1 - V_A2) / |A|, M_A = (V_A1 + V_A2) / (2 |A|) and likewise for B:

    E[D_A' X D_A]               = tr(X Sigma_w) * kappa_A,     kappa_A = sum_{q in A} (1/c_q1 + 1/c_q2) / |A|^2
    E[(M_A - M_B)' X (M_A - M_B)] = tr(X Sigma_b) (1/|A| + 1/|B|) + tr(X Sigma_w) (kappa_A + kappa_B) / 4
    E[M_A' X M_B]               = G' X G                        (A and B are independent)

which :func:`cell_estimates` inverts. With X = I: ``noise/trace_cov_within``, ``noise/trace_cov_between``,
``noise/trace_cov`` (their sum, per response), ``noise/grad_norm_sq`` (|G|^2), ``noise/snr`` (for a
minibatch of b = B/K responses) and ``noise/b_noise`` = tr Sigma / |G|^2. GRPO's group-centred
advantages couple the responses of a prompt; within the model that coupling is an (even negative)
between-prompt covariance, so ``trace_cov_between`` may come out negative, which is itself a
measurement. The previous (trajectory) estimates stay logged as ``noise/multistep_*``.

**Curvature** (every ``noise.curvature_every_rollouts`` rollouts; ``curv/...``). H is the Hessian of the
rollout's (unclipped) surrogate objective at theta_old, L(theta) = -(1/N) sum_i sum_t N w_it A_i rho_it,
restricted to the subsample (the clip is inactive in a neighbourhood of rho = 1; the k3 KL term is left
out). Hessian-vector products H v come from double backward (``noise.hvp=double_backward``) or a central
finite difference of gradients, (grad L(theta + eps v) - grad L(theta - eps v)) / (2 eps) with
eps = ``noise.hvp_eps`` * |theta| / |v| (``finite_difference``, which needs no second derivatives, so it
runs on any model and under data parallelism; the weights are restored bit for bit afterwards). With
X = H in the cell estimates:

- ``curv/gHg`` = G'HG / |G|^2, the curvature along the gradient (from M_A' H M_B, unbiased);
- ``curv/trace_hsigma`` = tr(H Sigma) (``_within`` / ``_between`` parts), Hutchinson-style with the
  cells' difference vectors as probes;
- ``curv/b_crit`` = tr(H Sigma) / (G' H G), the critical batch of McCandlish et al. (2018, eq. 2.9/
  appendix A), beside ``noise/b_noise`` (its simple form tr Sigma / |G|^2, equal when H is isotropic);
- ``curv/uHu`` = u'Hu / |u|^2 along the rollout's actual update u = theta_new - theta_old, as the secant
  u' (grad L(theta_new) - grad L(theta_old)) / |u|^2 on the same subsample (the mean curvature along
  the segment; exact for a quadratic): one extra backward after the K steps;
- ``curv/top_eig``: the top Hessian eigenvalue of the subsample objective by ``noise.power_iterations``
  steps of power iteration, warm started from the previous measurement's vector (a Rayleigh quotient;
  with few iterations a lower bound on the largest-magnitude eigenvalue of the subsample Hessian).

Data-parallel: the subsample's prompts are split into per-rank blocks; cell vectors and Hessian-vector
products are summed over the ranks (all-reduce), so every rank holds the one-process value. The passes
use the unsharded module holding theta_old (``Parallel.full_module``) and never touch ``.grad``,
the optimizer or any random stream, so the training trajectory is the same with the instruments on
or off.

**Where each part lives.** This module is the measurement at theta_old (:class:`ThetaOldInstruments`:
when it runs, the cells' gradients, the noise, the curvature, the secant after the steps, Adam's noise
scale); the cell design and its estimators are :mod:`rlvr_scaling.noise_cells`, the surrogate objective,
Hessian-vector products and power iteration :mod:`rlvr_scaling.hessian`, the cadence within a share of
the wall time :mod:`rlvr_scaling.instrument_budget`. Their names are importable from here too.
"""

from __future__ import annotations

import contextlib
import math
import time

import torch

from .hessian import (
    HessianVectorProducts,
    SurrogateObjective,
    adam_threshold,
    hessian_vector_product,
    power_iteration,
    preconditioned_power_iteration,
)
from .instrument_budget import PRIOR_CYCLES, READ_BY_LR_EVERY, InstrumentBudget, prior_cycles
from .noise_cells import CELLS, CellDesign, cell_estimates, design_cells, dot, gram, noise_row

#: the instruments' parts, one module each; their names stay importable from here
__all__ = [
    "CELLS",
    "PRIOR_CYCLES",
    "READ_BY_LR_EVERY",
    "TENSOR_FILE",
    "CellDesign",
    "HessianVectorProducts",
    "InstrumentBudget",
    "SurrogateObjective",
    "ThetaOldInstruments",
    "adam_threshold",
    "cell_estimates",
    "design_cells",
    "gram",
    "hessian_vector_product",
    "noise_row",
    "power_iteration",
    "preconditioned_power_iteration",
]

TENSOR_FILE = "curvature.safetensors"


class ThetaOldInstruments:
    """Noise at theta_old (when ``noise.at_theta_old``) and curvature when due: on every n-th rollout
    (``noise.*_every_rollouts``) or within ``noise.budget`` of the wall time (:class:`InstrumentBudget`)."""

    def __init__(self, cfg, model, device, dist, minibatch: float, strategy: str = "none"):
        self.cfg, self.model, self.device, self.dist = cfg, model, device, dist
        noise = cfg.noise
        self.on = noise.at_theta_old
        self.curvature_every = noise.curvature_every_rollouts
        self.every = noise.at_theta_old_every_rollouts
        if getattr(cfg.lr, "rule", None) == "snr" and getattr(cfg.lr, "source", None) == "minibatch":
            # the LR rule reads this rollout's estimates at theta_old: a fixed cadence keeps it reproducible
            self.every = READ_BY_LR_EVERY["at_theta_old"] if self.every is None else self.every
            if self.curvature_every is None:
                self.curvature_every = READ_BY_LR_EVERY["curvature"]
        budgeted = [x is None for x in (self.every, self.curvature_every)]
        share = noise.budget / max(sum(budgeted), 1)
        priors = prior_cycles(bool(getattr(noise, "adam_noise", False)))
        self.budget = {name: InstrumentBudget(share, prior) for name, prior in priors.items()}
        self.wall = 0.0  # the run's wall time at the current rollout (set by the trainer)
        self.cycle = 0.0  # the last rollout's seconds (set by the trainer; 0 before the first)
        self._due: tuple[int, bool, bool] | None = None  # (rollout, noise due, curvature due)
        self.hvp_kind = noise.hvp
        if self.hvp_kind == "auto":  # second derivatives in fp32 on one process; gradients otherwise
            fp32 = all(p.dtype == torch.float32 for p in model.parameters())
            self.hvp_kind = "double_backward" if strategy == "none" and fp32 else "finite_difference"
        self.eps = noise.hvp_eps
        self.iterations = noise.power_iterations
        k = cfg.optim.steps_per_rollout
        g = cfg.rollout.group_size
        self.prompts = noise.prompts_at_theta_old or max(2, round(minibatch / g))
        self.minibatch = minibatch
        self.k = k
        self.eig_vector: list[torch.Tensor] | None = None  # power iteration's warm start
        self._pending: tuple | None = None  # what the after-steps secant needs

    def describe(self) -> str:
        if not self.on:
            return "noise at theta_old: off"

        def cadence(every: int | None, name: str) -> str:
            if every is None:
                return f"within {self.budget[name].share:.1%} of the wall time"
            return f"every {every} rollout(s)" if every else "off"

        return (
            f"noise at theta_old: {cadence(self.every, 'noise')}, {self.prompts} prompts; "
            f"curvature: {cadence(self.curvature_every, 'curvature')} ({self.hvp_kind})"
        )

    def _decide(self, rollout: int) -> tuple[bool, bool]:
        """(noise due, curvature due) on this rollout, decided once per rollout."""
        if self._due is None or self._due[0] != rollout:
            every, curv = self.every, self.curvature_every
            c = self.on and (
                self.budget["curvature"].due(self.wall, self.cycle)
                if curv is None
                else curv > 0 and rollout % curv == 0
            )
            n = self.on and (
                self.budget["noise"].due(self.wall, self.cycle) if every is None else rollout % every == 0
            )
            if self.on and None in (every, curv) and self.dist is not None and self.dist.enabled:
                # the ranks' timers differ: one decision for all (the passes all-reduce), due if any says so
                n, c = (x > 0 for x in self.dist.all_reduce_sum([float(n), float(c)]))
            self._due = (rollout, n, c)
        return self._due[1], self._due[2]

    def curvature_due(self, rollout: int) -> bool:
        return self._decide(rollout)[1]

    def _charged(self, rollout: int) -> InstrumentBudget:
        """The budget a rollout's measurement is charged to, all of it: the curvature's where curvature
        is due (the noise and Adam's noise scale run with it), else the noise's (:class:`InstrumentBudget`)."""
        return self.budget["curvature" if self._decide(rollout)[1] else "noise"]

    def state_dict(self) -> dict:
        return {name: b.state_dict() for name, b in self.budget.items()}

    def load_state_dict(self, state: dict) -> None:
        for name, b in self.budget.items():
            b.load_state_dict(state.get(name, {}))

    # ------------------------------------------------------------------ before the K steps

    def _coefficients(self, gen, advantages) -> torch.Tensor:
        from .algorithms.loss import token_weights

        cfg = self.cfg
        comp = gen.completion_mask[:, gen.prompt_width :]
        n = len(gen)
        constant = cfg.loss.constant_normalizer or cfg.rollout.max_new_tokens
        w = token_weights(comp, cfg.loss.aggregation, constant) * n
        coef = -advantages.float()[:, None] * w
        return torch.where(comp, coef, torch.zeros_like(coef))

    def _cell_parts(self, gen, advantages, design: CellDesign) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per cell: this rank's rows and their coefficients (the loss's, times 1 / c_qh)."""
        coef = self._coefficients(gen, advantages)
        out = []
        for rows, weights in zip(design.rows, design.weights):
            prompts = gen.prompt_index[rows]
            # data-parallel: this rank's block of the subsample's prompts (whole prompts per rank)
            order = torch.unique(prompts)
            mine = set(order[list(self.dist.block(order.numel()))].tolist()) if self.dist.enabled else None
            keep = torch.tensor([mine is None or int(p) in mine for p in prompts.tolist()], dtype=torch.bool)
            r, w = rows[keep], weights[keep]
            out.append((r, coef[r] * w[:, None].float()))
        return out

    @contextlib.contextmanager
    def _measuring(self):
        """The model in eval mode with every parameter requiring grad (an unsharded FSDP copy is
        frozen) for one measurement; both restored after it."""
        was_training = self.model.training
        self.model.eval()
        frozen = [p for p in self.model.parameters() if not p.requires_grad]
        for p in frozen:
            p.requires_grad_(True)
        try:
            yield
        finally:
            self.model.train(was_training)
            for p in frozen:
                p.requires_grad_(False)

    def _cells(self, gen, advantages, design):
        """The cells' rows and coefficients, their objectives and their gradients at theta_old (summed
        over the ranks). One small pass per cell: per-cell backward passes through one batched forward
        cost more (each walks the whole batch's graph), and the cells' own padding is trimmed tighter."""
        parts = self._cell_parts(gen, advantages, design)
        objectives = [self._objective(gen, r, c) for r, c in parts]
        return parts, objectives, [self._reduce(o.grad()) for o in objectives]

    def _objective(self, gen, rows: torch.Tensor, coef: torch.Tensor) -> SurrogateObjective:
        return SurrogateObjective(self.model, gen, rows, coef, self.cfg.rollout.temperature, self.device)

    def _reduce(self, vecs: list[torch.Tensor]) -> list[torch.Tensor]:
        if not self.dist.enabled:
            return vecs
        import torch.distributed as tdist

        flat = torch.cat([v.reshape(-1).float() for v in vecs])
        flat = flat.to(self.dist._collective_device())
        tdist.all_reduce(flat, op=tdist.ReduceOp.SUM)
        flat = flat.to(vecs[0].device)
        out, i = [], 0
        for v in vecs:
            out.append(flat[i : i + v.numel()].view_as(v).to(v.dtype))
            i += v.numel()
        return out

    def before_steps(self, gen, advantages, rollout: int, perf: dict[str, float]) -> dict[str, float]:
        """The noise estimates at theta_old (and curvature when due), logged under ``noise/`` and
        ``curv/``; the noise keys (without prefix) are also returned for the LR rule."""
        self._pending = None
        noise_due, curvature_due = self._decide(rollout)
        if not (noise_due or curvature_due):
            return {}
        t = time.perf_counter()
        design = design_cells(gen.prompt_index, self.prompts)
        if design is None:
            return {}
        with self._measuring():
            parts, objectives, cells = self._cells(gen, advantages, design)
            out = {
                f"noise/{k}": v
                for k, v in noise_row(cell_estimates(gram(cells, cells), design), self.minibatch).items()
            }
            perf["noise_theta_old_s"] = time.perf_counter() - t
            self._charged(rollout).charge(perf["noise_theta_old_s"], rollout)
            if curvature_due:
                t = time.perf_counter()
                # the Hessian of the sum of the cells' objectives is that of one objective over their
                # rows: one pass per Hessian-vector product instead of one per cell
                union = self._objective(
                    gen, torch.cat([r for r, _ in parts]), torch.cat([c for _, c in parts])
                )
                union.anchor()
                out.update(self._curvature(union, objectives, cells, design, out["noise/grad_norm_sq"]))
                perf["curvature_s"] = time.perf_counter() - t
        return out

    # ------------------------------------------------------------------ Adam's noise scale

    def adam_noise(
        self, gen, advantages, rollout: int, optimizer, perf: dict[str, float]
    ) -> dict[str, float]:
        """``noise/adam_*`` and ``noise/all_*`` (``noise.adam_noise``): the cell estimates over **all** the
        rollout's prompts (two independent halves of prompts A and B, each prompt's responses in halves 1
        and 2) with X = P, the diagonal preconditioner of the optimizer's state
        (:func:`rlvr_scaling.noise.adam_preconditioner`), and with X = I: G'PG from the cross product of
        the two half means, tr(P Sigma) per response, and their ratio (docs/theory.md, "B_noise for Adam").
        Runs on the rollouts where the noise at theta_old runs; ``adam_*`` are NaN before the first step."""
        from .noise import adam_preconditioner

        due = any(self._decide(rollout))  # where the noise at theta_old (or curvature) runs
        if not (self.on and getattr(self.cfg.noise, "adam_noise", False) and due):
            return {}
        t = time.perf_counter()
        design = design_cells(gen.prompt_index, int(gen.prompt_index.max()) + 1)
        if design is None:
            return {}
        with self._measuring():
            parts, objectives, cells = self._cells(gen, advantages, design)
            params = objectives[0].params
            P = adam_preconditioner(optimizer, params)
            sharp = (
                self._adam_sharpness(gen, parts, P, cells, optimizer) if self.curvature_due(rollout) else {}
            )
        out = {}
        plain = cell_estimates(gram(cells, cells), design)
        out.update({f"noise/all_{k}": v for k, v in noise_row(plain, self.minibatch).items()})
        out.update(sharp)
        keys = ("grad_norm_sq", "trace_cov", "trace_cov_within", "trace_cov_between", "b_noise")
        if P is None:
            out.update({f"noise/adam_{k}": math.nan for k in keys})
        else:
            weighted = [[w.to(c.dtype) * c for w, c in zip(P, cell)] for cell in cells]
            pre = noise_row(cell_estimates(gram(cells, weighted), design), self.minibatch)
            out.update({f"noise/adam_{k}": pre[k] for k in keys})
        perf["noise_adam_s"] = time.perf_counter() - t
        # within the instruments' budget, with the rest of this rollout's measurement
        self._charged(rollout).charge(perf["noise_adam_s"], rollout)
        return out

    def _adam_sharpness(self, gen, parts, P, cells, optimizer) -> dict[str, float]:
        """``curv/adam_top_eig`` (the eigenvalue of P H of largest magnitude, signed as ``curv/top_eig``, on
        the rollout's objective: ``noise.power_iterations`` steps from the first cell's gradient) and
        ``curv/adam_edge`` = eta * that / Adam's threshold (:func:`adam_threshold`), eta the optimizer's
        current rate: the rate in units of the edge of stability (meaningful when the eigenvalue is
        positive)."""
        if P is None or self.iterations < 1:
            return {"curv/adam_top_eig": math.nan, "curv/adam_edge": math.nan}
        union = self._objective(gen, torch.cat([r for r, _ in parts]), torch.cat([c for _, c in parts]))
        union.anchor()
        with HessianVectorProducts([union], self.hvp_kind, self.eps, self._reduce) as hvp:
            value = preconditioned_power_iteration(hvp, P, [c.float() for c in cells[0]], self.iterations)
        group = optimizer.param_groups[0]
        return {
            "curv/adam_top_eig": value,
            "curv/adam_edge": group["lr"] * value / adam_threshold(group["betas"][0]),
        }

    # ------------------------------------------------------------------ curvature

    def hvp(self, objectives: list[SurrogateObjective], v: list[torch.Tensor]) -> list[torch.Tensor]:
        """H v for the Hessian of the sum of ``objectives``, summed over the ranks."""
        return hessian_vector_product(objectives, v, self.hvp_kind, self.eps, self._reduce)

    def _curvature(self, union, objectives, cells, design, grad_norm_sq: float) -> dict[str, float]:
        """``union``: the subsample's objective (this rank's rows of all cells); ``objectives``: the
        cells' own, whose gradients at theta_old are ``cells`` (kept for the secant after the steps)."""
        # all products at theta_old: double backward keeps the gradient's graph between them
        with HessianVectorProducts([union], self.hvp_kind, self.eps, self._reduce) as hvp:
            h_cells = [hvp(c) for c in cells]
            q = gram(cells, h_cells)
            q = 0.5 * (q + q.T)
            est = cell_estimates(q, design)
            out = {
                "curv/gHg_abs": est["signal"],
                "curv/gHg": est["signal"] / grad_norm_sq if grad_norm_sq > 0 else math.nan,
                "curv/trace_hsigma": est["total"],
                "curv/trace_hsigma_within": est["within"],
                "curv/trace_hsigma_between": est["between"],
                "curv/b_crit": est["total"] / est["signal"] if est["signal"] > 0 else math.inf,
            }
            out["curv/top_eig"] = self._power_iteration(hvp, cells)
        # the secant along the actual update needs the gradient at theta_old of the whole subsample
        g0 = [sum(parts) for parts in zip(*cells)]
        self._pending = (objectives, g0, [p.detach().clone() for p in objectives[0].params])
        return out

    def _power_iteration(self, hvp, cells) -> float:
        if self.iterations < 1:
            return math.nan
        v = self.eig_vector
        if v is None or any(a.shape != b.shape for a, b in zip(v, cells[0])):
            # the first start: the gradient's direction plus a deterministic perturbation (no RNG draw)
            v = [
                c.float() + 1e-3 * torch.cos(torch.arange(c.numel(), dtype=torch.float32)).view_as(c)
                for c in cells[0]
            ]
        value, self.eig_vector = power_iteration(hvp, v, self.iterations)
        return value

    # ------------------------------------------------------------------ after the K steps

    def after_steps(self, perf: dict[str, float]) -> dict[str, float]:
        """u'Hu / |u|^2 along the rollout's update (the secant on the same subsample), when curvature ran."""
        if self._pending is None:
            return {}
        t = time.perf_counter()
        objectives, g0, theta0 = self._pending
        self._pending = None
        with self._measuring():
            total = None
            for o in objectives:
                g = o.grad()
                total = g if total is None else [a + b for a, b in zip(total, g)]
            g1 = self._reduce(total)
        u = [p.detach().float() - s.float() for p, s in zip(objectives[0].params, theta0)]
        uu = dot(u, u)
        perf["curvature_s"] = perf.get("curvature_s", 0.0) + time.perf_counter() - t
        # the measurement's both parts, on the rollout it was decided for
        self.budget["curvature"].charge(perf["curvature_s"], self._due[0] if self._due else None)
        if uu == 0:
            return {"curv/uHu": math.nan}
        return {
            "curv/uHu": dot(u, [a.float() - b.float() for a, b in zip(g1, g0)]) / uu,
            "curv/update_norm": math.sqrt(uu),
        }

    def tensor_files(self) -> dict[str, dict[str, torch.Tensor]]:
        """The power iteration's warm start, so that a resumed run measures what an uninterrupted one does."""
        if self.eig_vector is None:
            return {}
        return {
            TENSOR_FILE: {f"eig.{i}": v.detach().cpu().contiguous() for i, v in enumerate(self.eig_vector)}
        }

    def load(self, path) -> None:
        from pathlib import Path

        from safetensors.torch import load_file

        file = Path(path) / TENSOR_FILE
        self.eig_vector = None
        if file.is_file():
            tensors = load_file(str(file))
            self.eig_vector = [tensors[f"eig.{i}"].to(self.device) for i in range(len(tensors))]
