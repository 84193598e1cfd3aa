"""The failure sections of ``report.md``: competing risks, cumulative incidences and the failure clock per
rollout (hazard table and fit)."""

from __future__ import annotations

from analysis.reporting.text import markdown_table
from analysis.reporting.text import number_text as _f


def competing_lines(exponents) -> list[str]:
    """Sensitivity of α to runs that failed first: bounds and the joint model."""
    lines: list[str] = []
    targets_rows = exponents[(exponents["clock"] != "failure") & (exponents["n_censored_failure"] > 0)]
    if len(targets_rows):
        lines += [
            "",
            "## Competing risks: sensitivity of α to runs that failed first",
            "",
            "The cause-specific fit (α) treats a run that failed before reaching the target as censored at its "
            "failure time (a crossing seen after the onset counts as failed first, as in the incidence below), "
            "which assumes failure and slow learning are independent. Bounds: **never** — "
            "the failed runs would never have reached it (right-censored at the budget); **at failure** — they "
            "would have reached it right at their failure onset (interval between their last evaluation and "
            "the onset). The envelope of the three 95 % intervals is the sensitivity interval. The joint model "
            "fits both clocks as one bivariate log-normal draw with correlation ρ (`analysis/fits/joint.py`, Wald "
            "interval): a sensitivity analysis, not a bias fix — no run shows its time to target after it "
            "failed, so ρ is identified only by the bivariate normal form, and α joint is right only if that "
            "form holds (under other dependence see docs/analysis.md).",
            "",
        ]
        rows = [
            [
                r.condition,
                r.clock,
                f"{r.n_censored_failure}/{r.n_runs}",
                f"{_f(r.exponent)} [{_f(r.ci_low)}, {_f(r.ci_high)}]",
                f"{_f(r.exponent_never)} [{_f(r.ci_low_never)}, {_f(r.ci_high_never)}]",
                f"{_f(r.exponent_at_failure)} [{_f(r.ci_low_at_failure)}, {_f(r.ci_high_at_failure)}]",
                f"[{_f(r.sensitivity_low)}, {_f(r.sensitivity_high)}]",
                f"{_f(r.exponent_joint)} [{_f(r.ci_low_joint)}, {_f(r.ci_high_joint)}], ρ = {_f(r.rho_joint, 2)}",
            ]
            for r in targets_rows.itertuples()
        ]
        lines.append(
            markdown_table(
                [
                    "condition",
                    "clock",
                    "failed first",
                    "α cause-specific",
                    "α never",
                    "α at failure",
                    "envelope",
                    "α joint model",
                ],
                rows,
            )
        )
    return lines


def incidence_lines(inc) -> list[str]:
    """The Aalen–Johansen incidences per condition, B and target."""
    lines: list[str] = []
    if inc is not None and len(inc):
        lines += [
            "",
            "## Reaching the target before failing (Aalen–Johansen)",
            "",
            "Per condition, B and target: runs that reached it first, failed first, or ended by budget; the "
            "cumulative incidence of reaching it (before failing) and of failing first at the end of follow-up. "
            "Curves in `incidence.csv` and the `incidence_*` figures.",
            "",
        ]
        rows = [
            [
                r.condition,
                f"{r.B:g}",
                f"{r.target:g}",
                str(r.n_runs),
                str(r.n_reached),
                str(r.n_failed_first),
                str(r.n_censored_budget + r.n_censored_incomplete),
                _f(r.cif_reached_end),
                _f(r.cif_failed_end),
            ]
            for r in inc.itertuples()
        ]
        lines.append(
            markdown_table(
                [
                    "condition",
                    "B",
                    "target",
                    "runs",
                    "reached",
                    "failed first",
                    "censored (budget)",
                    "CIF reached",
                    "CIF failed",
                ],
                rows,
            )
        )
    return lines


def hazard_lines(hazard) -> list[str]:
    """The failure clock per rollout: hazard per size, first-update failures against η(B), the
    cloglog slope and γ apart from the first-update outcome (``analysis/fits/hazard.py``)."""
    if hazard is None:
        return []
    table, fit, notes = hazard
    lines = [
        "",
        "## The failure clock per rollout",
        "",
        "The policy changes only at rollout boundaries, so a failure happens at a whole rollout: a run whose "
        "onset is at k·B responses survived k − 1 rollouts and failed in the k-th; an interval-censored onset "
        "gives a range of rollouts, over which the likelihood sums. h(B) is the constant hazard per rollout "
        "(95 % likelihood-ratio interval); **unstable at the first updates** is a failure onset within the first "
        "2 rollouts (≤ 2·B responses), a per-run outcome (Clopper–Pearson interval), shown against the per-step "
        "rate η(B); *possible* counts the onsets whose interval reaches into those 2 rollouts. The hazard after "
        "the first updates is that of the runs that survived them, counted from rollout 3. Detectors: which one "
        "ended each failed run. Tables: `hazard.csv`, `hazard_fit.csv`.",
        "",
    ]
    lines += [f"- note: {n}" for n in notes]
    if table is None or table.empty:
        return lines
    rows = [
        [
            r.condition,
            f"{r.B:g}",
            _f(r.eta),
            str(r.runs),
            str(r.rollouts_at_risk),
            str(r.failures),
            f"{_f(r.hazard)} [{_f(r.ci_low)}, {_f(r.ci_high)}]",
            f"{r.first_update_failures}/{r.runs} = {_f(r.first_update_frac, 2)} "
            f"[{_f(r.first_update_low, 2)}, {_f(r.first_update_high, 2)}]",
            str(r.first_update_possible),
            f"{_f(r.hazard_after_first_updates)} [{_f(r.after_ci_low)}, {_f(r.after_ci_high)}]",
            str(r.detectors) if isinstance(r.detectors, str) and r.detectors else "–",
        ]
        for r in table.itertuples()
    ]
    header = [
        "condition",
        "B",
        "η(B)",
        "runs",
        "rollouts at risk",
        "failures",
        "h per rollout",
        "failed in first 2 rollouts",
        "possible",
        "h after first updates",
        "detectors",
    ]
    lines.append(markdown_table(header, rows))
    return lines + hazard_fit_lines(fit)


def hazard_fit_lines(fit) -> list[str]:
    """The cloglog slope across sizes and gamma apart from the first-update outcome (``hazard_fit.csv``)."""
    lines: list[str] = []
    if fit is not None and len(fit):
        lines += [
            "",
            "cloglog(h) = a + b·log B across sizes (maximum likelihood; b: profile-likelihood 95 % interval, and "
            "the percentile bootstrap, seed blocks where they apply, else runs within each size: `resampling` in "
            "`hazard_fit.csv`; with 3 runs per size the bootstrap covers about 83 %, the profile 93 %, "
            "docs/failure.md). For a hazard constant in time, b = 1 − γ "
            "(the integrated hazard of a rollout is λ(B)·B): γ = 1 − b is that reading. γ (log-normal) is "
            "the fit of `exponents.csv` on all runs (unchanged) and, on the runs that survived the first "
            "updates, the same model left-truncated at 2·B (profile-likelihood interval).",
            "",
        ]
        fit_rows = [
            [
                r.condition,
                "all runs" if r.sample == "all" else "after first updates",
                f"{r.n_failures}/{r.n_runs}",
                f"{_f(r.slope)} [{_f(r.slope_low)}, {_f(r.slope_high)}]",
                f"[{_f(r.boot_low)}, {_f(r.boot_high)}]" if r.n_boot else "–",
                f"{_f(r.gamma_constant_hazard)} [{_f(r.gamma_constant_hazard_low)}, "
                f"{_f(r.gamma_constant_hazard_high)}]",
                f"{_f(r.gamma)} [{_f(r.gamma_low)}, {_f(r.gamma_high)}]",
                str(r.note) if isinstance(r.note, str) else "",
            ]
            for r in fit.itertuples()
        ]
        lines.append(
            markdown_table(
                [
                    "condition",
                    "runs",
                    "failed",
                    "slope b (profile)",
                    "b (bootstrap)",
                    "γ = 1 − b",
                    "γ (log-normal)",
                    "note",
                ],
                fit_rows,
            )
        )
    return lines
