"""``rlvr-grid`` composes once per set of config-group choices and derives the jobs from it
(``JobComposer``): every job it lists equals the job composed by Hydra from scratch (``compose_one``),
run directory and typed config, for every shipped sweep and for grids that mix group axes, launcher
settings, list values and overrides that need a composition of their own; a bad value raises Hydra's own
error. The speed is measured in benchmarks/speed/grid_listing.py."""

from __future__ import annotations

import pytest
from hydra.errors import ConfigCompositionException

from rlvr_scaling.cli.compose import REPO_ROOT
from rlvr_scaling.cli.grid import JobComposer, compose_one, list_jobs

SWEEPS = sorted(p.stem for p in (REPO_ROOT / "sweeps").glob("*.yaml"))


def _spread(n: int, k: int = 3) -> list[int]:
    """``k`` job indices spread over ``n`` jobs, the first and the last included."""
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def _check(jobs) -> None:
    for i in _spread(len(jobs)):
        assert jobs[i] == compose_one(list(jobs[i].overrides)), jobs[i].overrides


@pytest.mark.parametrize("sweep", SWEEPS)
def test_every_sweep_lists_the_jobs_hydra_composes(sweep, sweep_jobs):
    jobs = sweep_jobs(sweep)
    assert len({j.run_dir for j in jobs}) == len(jobs)  # one directory per job
    assert all(j.run_dir.parent.name == sweep for j in jobs)
    _check(jobs)


def test_mixed_grid_lists_the_jobs_hydra_composes():
    # the group axis (loss) varies fastest, so consecutive jobs alternate between two shared trees
    jobs = list_jobs(
        [
            "sweeps=demo",
            "slurm=gpu",
            "hydra.launcher.timeout_min=5",
            "eval.targets=[0.2,0.3],[0.25]",
            "seed=0,1",
            "loss=clipped,unclipped",
        ]
    )
    assert len(jobs) == 4 * 2 * 2 * 2  # the sweep file's four sizes x targets x seeds x losses
    assert [j.config.loss.clip for j in jobs[:2]] == [0.2, None]
    assert jobs[0].run_dir.name == "eval.targets=[0.2,0.3],loss=clipped,rollout.prompts_per_rollout=4,seed=0"
    _check(jobs)
    for job in jobs[-4:]:
        assert job == compose_one(list(job.overrides))


def test_overrides_outside_the_shared_tree_are_composed_by_hydra():
    composer = JobComposer()
    for job in (["seed=1", "++run.name=x"], ["+noise.extra=1"], ["seed=2", "run=default"]):
        try:
            expected = compose_one(job)
        except ConfigCompositionException as err:
            with pytest.raises(ConfigCompositionException, match=str(err.__cause__ or err)[:40]):
                composer(job)
            continue
        assert composer(job) == expected


def test_a_bad_value_raises_hydras_error_and_leaves_the_other_jobs_intact():
    composer = JobComposer()
    good = composer(["sweeps=demo", "rollout.group_size=4"])
    with pytest.raises(ConfigCompositionException) as fast:
        composer(["sweeps=demo", "rollout.group_size=four"])
    with pytest.raises(ConfigCompositionException) as slow:
        compose_one(["sweeps=demo", "rollout.group_size=four"])
    assert str(fast.value.__cause__) == str(slow.value.__cause__) and "group_size" in str(
        slow.value.__cause__
    )
    assert composer(["sweeps=demo", "rollout.group_size=4"]) == good
    assert composer(["sweeps=demo", "rollout.group_size=16"]).config.rollout.group_size == 16
