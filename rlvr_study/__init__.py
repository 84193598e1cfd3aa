"""The study: how many runs, at which sizes, for an exponent to a stated precision, and the adaptive
rounds that run them (``rlvr-plan``, ``rlvr-study``; docs/study.md).

The top floor of the project (docs/design.md §5): it reads run directories with ``analysis`` and
launches runs through ``rlvr-train`` (``rlvr_scaling``); neither of those imports it.

- :mod:`rlvr_study.plan`: the planner's model (expected information of a run, the greedy allocation of
  seeds to sizes, the simulation that checks it) and its inputs from pilot fits;
- :mod:`rlvr_study.plan_cli`: ``rlvr-plan``;
- :mod:`rlvr_study.study_file`: the study file, its validation, :class:`~rlvr_study.study_file.StudyError`;
- :mod:`rlvr_study.measure`: the widths after a round (the folder fitted as ``rlvr-analyze`` fits it);
- :mod:`rlvr_study.rounds`: the next round (cost model, wanted runs, the budget's allocation) and why a
  study stops;
- :mod:`rlvr_study.cli`: ``rlvr-study``, the side that launches rounds and keeps the study's state.
"""
