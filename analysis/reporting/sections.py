"""Every section of ``report.md``, each a function returning its lines (:func:`analysis.reporting.markdown.write_report`
puts them in order). The fitting modules return tables only; their sections are rendered from those tables,
one module per family of sections, all importable from here:

- :mod:`analysis.reporting.sections_runs`: the header, the exponents and their flags (degenerate, unreached,
  warnings), goodness of fit, sigmoids, skipped and flagged runs, figures, symbols and method;
- :mod:`analysis.reporting.sections_failure`: competing risks, incidences, the failure clock per rollout;
- :mod:`analysis.reporting.sections_across`: the common α, comparisons, trends, gain targets, seeds as blocks;
- :mod:`analysis.reporting.sections_theory`: the noise scale, the theory, B_crit, the recommendation, which B.

The small number-and-verdict helpers they share are in :mod:`analysis.reporting.text`."""

from __future__ import annotations

from analysis.reporting.sections_across import (  # noqa: F401
    _reference_lines,
    blocks_lines,
    common_lines,
    comparisons_lines,
    gain_lines,
    trend_lines,
)
from analysis.reporting.sections_failure import (  # noqa: F401
    competing_lines,
    hazard_fit_lines,
    hazard_lines,
    incidence_lines,
)
from analysis.reporting.sections_runs import (  # noqa: F401
    degenerate_lines,
    exponents_lines,
    goodness_of_fit_lines,
    plots_lines,
    run_notes_lines,
    sigmoid_lines,
    skipped_lines,
    summary_lines,
    symbols_and_method_lines,
    unreached_lines,
    warnings_lines,
)
from analysis.reporting.sections_theory import (  # noqa: F401
    _bcrit_cell,
    bcrit_lines,
    bcrit_theory_lines,
    noise_lines,
    recommend_lines,
    theory_lines,
    which_b_lines,
)
