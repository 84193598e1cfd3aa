"""The cells at theta_old and their estimators: the design that splits a rollout's prompts into two sets
A and B and each prompt's responses into two halves, and the unbiased tr(X Sigma_w), tr(X Sigma_b) and
G'XG from the cell vectors' products (the derivation: :mod:`rlvr_scaling.curvature`'s docstring, "Design
(cells)"). Pure functions of tensors: X = I gives the noise at theta_old, X = H the curvature, X = P
Adam's noise scale (:class:`rlvr_scaling.curvature.ThetaOldInstruments` measures all three)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

CELLS = ("A1", "A2", "B1", "B2")


@dataclass(frozen=True)
class CellDesign:
    """Which rows form each cell and the counts the estimators need."""

    rows: tuple[torch.Tensor, ...]  # per cell (A1, A2, B1, B2): row indices into the rollout
    weights: tuple[torch.Tensor, ...]  # per cell: 1 / c_qh of each row's prompt half
    kappa_a: float
    kappa_b: float
    n_a: int  # |A| prompts
    n_b: int  # |B|


def design_cells(prompt_index: torch.Tensor, n_prompts: int) -> CellDesign | None:
    """Cells over the first ``n_prompts`` prompts (by prompt index) that have at least 2 responses;
    None when fewer than 2 such prompts exist."""
    counts = torch.bincount(
        prompt_index, minlength=int(prompt_index.max()) + 1 if prompt_index.numel() else 0
    )
    eligible = [q for q in range(counts.numel()) if counts[q] >= 2][:n_prompts]
    if len(eligible) < 2:
        return None
    rows: dict[str, list[int]] = {c: [] for c in CELLS}
    weights: dict[str, list[float]] = {c: [] for c in CELLS}
    kappa = {"A": 0.0, "B": 0.0}
    sizes = {"A": 0, "B": 0}
    for j, q in enumerate(eligible):
        side = "A" if j % 2 == 0 else "B"
        mine = (prompt_index == q).nonzero().squeeze(-1).tolist()
        c1 = len(mine) // 2
        halves = (mine[:c1], mine[c1:])
        for h, part in zip("12", halves):
            rows[side + h] += part
            weights[side + h] += [1.0 / len(part)] * len(part)
        kappa[side] += 1.0 / len(halves[0]) + 1.0 / len(halves[1])
        sizes[side] += 1
    return CellDesign(
        rows=tuple(torch.tensor(rows[c], dtype=torch.long) for c in CELLS),
        weights=tuple(torch.tensor(weights[c], dtype=torch.float64) for c in CELLS),
        kappa_a=kappa["A"] / sizes["A"] ** 2,
        kappa_b=kappa["B"] / sizes["B"] ** 2,
        n_a=sizes["A"],
        n_b=sizes["B"],
    )


def cell_estimates(q: torch.Tensor, design: CellDesign) -> dict[str, float]:
    """Unbiased tr(X Sigma_w), tr(X Sigma_b) and G'XG from the 4x4 matrix q[h, k] = V_h' X V_k of the cell
    vectors (A1, A2, B1, B2); see :mod:`rlvr_scaling.curvature`'s docstring."""
    q = q.double()
    na, nb = design.n_a, design.n_b
    da = torch.tensor([1.0, -1.0, 0.0, 0.0], dtype=torch.float64) / na
    db = torch.tensor([0.0, 0.0, 1.0, -1.0], dtype=torch.float64) / nb
    ma = torch.tensor([1.0, 1.0, 0.0, 0.0], dtype=torch.float64) / (2 * na)
    mb = torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=torch.float64) / (2 * nb)

    def form(u, v):
        return float(u @ q @ v)

    within = (form(da, da) + form(db, db)) / (design.kappa_a + design.kappa_b)
    diff = ma - mb
    between = (form(diff, diff) - within * (design.kappa_a + design.kappa_b) / 4) / (1 / na + 1 / nb)
    signal = 0.5 * (form(ma, mb) + form(mb, ma))
    return {"within": within, "between": between, "total": within + between, "signal": signal}


def noise_row(est: dict[str, float], minibatch: float) -> dict[str, float]:
    """``noise/...`` keys from the identity-weighted cell estimates."""
    trace, signal = est["total"], est["signal"]
    return {
        "grad_norm_sq": signal,
        "trace_cov": trace,
        "trace_cov_within": est["within"],
        "trace_cov_between": est["between"],
        "snr": signal / (trace / minibatch) if trace > 0 else math.inf,
        "b_noise": trace / signal if signal > 0 else math.inf,
    }


def dot(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """a'b (float64) of two lists of parameter-shaped tensors."""
    return float(sum((x.double() * y.double()).sum() for x, y in zip(a, b)))


def gram(a: list[list[torch.Tensor]], b: list[list[torch.Tensor]]) -> torch.Tensor:
    """The matrix [a_h' b_k] (float64) of two lists of parameter-shaped vectors: one matrix product per
    parameter tensor instead of one dot product per pair (16 for the four cells)."""
    out = torch.zeros(len(a), len(b), dtype=torch.float64)
    for xs, ys in zip(zip(*a), zip(*b)):
        x = torch.stack([t.reshape(-1) for t in xs]).double()
        y = torch.stack([t.reshape(-1) for t in ys]).double()
        out += (x @ y.T).cpu()
    return out
