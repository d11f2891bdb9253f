"""``--strategy optuna``: TPE over MetaSchedule's trace decisions, with real TVM on a small matmul."""

import math

import pytest

pytestmark = pytest.mark.tvm


def _matmul_task():
    from autotune.tvmrt.startup import fast_start

    fast_start()
    import tvm
    from tvm import te

    from autotune.frontend.relax import Task
    from autotune.tvmrt.target import parse_target

    a = te.placeholder((64, 96), name="A")
    b = te.placeholder((96, 48), name="B")
    k = te.reduce_axis((0, 96), name="k")
    c = te.compute((64, 48), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    mod = tvm.IRModule({"main": te.create_prim_func([a, b, c])})
    target = parse_target("llvm")
    return Task("matmul", mod, 1, 2 * 64 * 96 * 48, target), target


def test_suggested_tiles_are_valid_factorizations():
    import optuna

    from autotune.tuning.optuna_search import space_params, suggest_decisions
    from autotune.tvmrt.startup import fast_start

    fast_start()
    from tvm.s_tir import meta_schedule as ms

    task, target = _matmul_task()
    ctx = ms.TuneContext(mod=task.mod, target=target, space_generator="post-order-apply", task_name="mm",
                         num_threads=2)
    trace = ctx.generate_design_space()[0].trace
    params = space_params(trace)
    assert {p[2] for p in params} == {"tile", "cat"}
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(30):
        trial = study.ask()
        decisions = suggest_decisions(trial, 0, params)
        for _i, inst, kind, info in params:
            d = decisions[inst]
            if kind == "tile":
                extent, n, max_inner = info
                assert len(d) == n and math.prod(d) == extent and all(x >= 1 for x in d)
                assert d[-1] <= max_inner
            else:
                assert 0 <= d < info
        study.tell(trial, 1.0)


def test_optuna_strategy_tunes_and_learns(monkeypatch):
    from tvm.s_tir import meta_schedule as ms

    from autotune.tuning.costmodels import resolve
    from autotune.tuning.optuna_search import OptunaSearch
    from autotune.tuning.search import Optuna
    from autotune.tuning.tuner import SearchConfig, tune
    from autotune.tvmrt.measure import Measurer

    task, target = _matmul_task()
    strategy = OptunaSearch()
    monkeypatch.setattr(Optuna, "create", lambda self, config: strategy)  # keep a handle on the study
    search = SearchConfig(kind="optuna", num_trials_per_iter=8)
    measurer = Measurer(target)
    db = ms.database.MemoryDatabase()
    try:
        states, stats = tune([task], target, db, measurer, work_dir="/tmp/autotune-test-optuna", max_trials=24,
                             search=search, cost_model=resolve("auto", target, uses_cost_model=search.uses_cost_model))
    finally:
        measurer.close()
    state = states[0]
    assert state.trials == 24 and state.failures == 0 and math.isfinite(state.best_s)
    done = [t for t in strategy.study.trials if t.state.name == "COMPLETE"]
    assert len(done) == 24  # every measured program was told back to the study, with its latency
    assert min(t.value for t in done) == pytest.approx(state.best_s, rel=1e-6)
    records = db.get_all_tuning_records()
    traces = {str(r.trace.as_json(remove_postproc=True)) for r in records}
    assert len(traces) == 24  # no program measured twice
