"""Index inputs (embedding lookups) are measured, not crashed: integer tensors are zero-filled."""

import math

import pytest

pytestmark = pytest.mark.tvm


def test_take_task_measures_without_crashing(tmp_path):
    from autotune.tvmrt.startup import fast_start

    fast_start()
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    from autotune.frontend.relax import Task
    from autotune.tuning.costmodels import resolve
    from autotune.tuning.tuner import SearchConfig, tune
    from autotune.tvmrt.measure import Measurer
    from autotune.tvmrt.target import parse_target

    table = te.placeholder((30522, 64), name="table")
    ids = te.placeholder((128,), dtype="int64", name="ids")
    out = te.compute((128, 64), lambda i, j: table[ids[i], j], name="take")
    mod = tvm.IRModule({"main": te.create_prim_func([table, ids, out])})
    target = parse_target("llvm")
    measurer = Measurer(target)
    try:
        states, _ = tune([Task("take", mod, 1, 0, target)], target, ms.database.MemoryDatabase(), measurer,
                         work_dir=str(tmp_path), max_trials=4, cost_model=resolve("auto", target, uses_cost_model=False),
                         search=SearchConfig(kind="replay-trace",
                                                                                   num_trials_per_iter=4))
    finally:
        measurer.close()
    state = states[0]
    # the take's schedule space is tiny: ReplayTrace proposes the same program several times and the tuner
    # measures each distinct program once (tests/test_tuner_dedupe.py), so 1 to 4 trials, every one distinct
    assert 1 <= state.trials <= 4 and state.trials == len(state.measured)
    assert state.failures == 0 and math.isfinite(state.best_s) and state.best_s > 0
