"""Faulty candidates and workers (issue 16, item 3), with real TVM programs made to fail: a kernel that
hangs, one that kills the runner process, one that cannot be loaded, and builder workers killed between
batches. Each costs one failed trial with its error kind; the candidates around it are measured and the
pools recover (the next batch measures normally)."""

from __future__ import annotations

import os
import signal

import pytest

pytestmark = [pytest.mark.tvm, pytest.mark.slow]


def _programs():
    """``b = a + f()`` where ``f`` is nothing (good), or a libc call: ``sleep(1000)`` hangs, ``abort()`` kills
    the runner process, and an undefined symbol links into the shared object but fails to load."""
    from autotune.tvmrt.startup import fast_start

    fast_start("llvm")
    from tvm import te, tirx

    def make(extra):
        a = te.placeholder((1024,), "float32", name="a")
        b = te.compute((1024,), lambda i: a[i] + extra(), name="b")
        return te.create_prim_func([a, b])

    return {
        "good": make(lambda: tirx.const(1.0, "float32")),
        "hang": make(lambda: tirx.Cast("float32", tirx.call_extern("int32", "sleep", 1000))),
        "crash": make(lambda: tirx.Cast("float32", tirx.call_extern("int32", "abort"))),
        "unloadable": make(lambda: tirx.call_extern("float32", "autotune_no_such_symbol_anywhere")),
    }


def _sleeper(seconds: int):
    """``b = a + 1`` that calls libc ``sleep(seconds)`` first: a good kernel that keeps its runner busy."""
    from autotune.tvmrt.startup import fast_start

    fast_start("llvm")
    from tvm import te, tirx

    a = te.placeholder((1,), "float32", name="a")  # one element: one sleep per kernel call
    b = te.compute((1,), lambda i: a[i] + tirx.Cast("float32", tirx.call_extern("int32", "sleep", seconds)) * 0.0
                   + 1.0, name="b")
    return te.create_prim_func([a, b])


def _candidate(func):
    import tvm
    from tvm.s_tir import meta_schedule as ms

    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": func}))
    return ms.MeasureCandidate(sch, ms.arg_info.ArgInfo.from_prim_func(func))


@pytest.fixture(scope="module")
def measurer():
    from autotune.tvmrt.measure import Measurer
    from autotune.tvmrt.target import parse_target

    m = Measurer(parse_target("llvm"), build_timeout_sec=60, run_timeout_sec=4)
    yield m
    m.close()


def test_each_fault_costs_one_trial_and_the_pools_recover(measurer):
    progs = _programs()
    order = ["good", "hang", "good", "crash", "good", "unloadable", "good"]
    outcomes, _, runner_results = measurer.measure([_candidate(progs[name]) for name in order])
    kinds = [o.error_kind for o in outcomes]
    assert kinds == ["ok", "run_timeout", "ok", "run_error", "ok", "run_error", "ok"], \
        list(zip(order, kinds, [o.error_msg[:200] for o in outcomes]))
    for i in (3, 5):  # abort(); an unresolved symbol (lazy binding: the process dies at the call)
        assert "runner process died" in outcomes[i].error_msg, outcomes[i]
    assert all(r.run_secs is None and r.error_msg for r, o in zip(runner_results, outcomes) if not o.ok)
    again, _, _ = measurer.measure([_candidate(progs["good"]) for _ in range(3)])
    assert [o.error_kind for o in again] == ["ok"] * 3


def _worker_pids(pool) -> list[int]:
    return [w._proc.pid for w in pool._worker_map.values() if getattr(w, "_proc", None) is not None]


def test_builder_workers_killed_between_batches(measurer):
    progs = _programs()
    measurer.measure([_candidate(progs["good"]) for _ in range(2)])  # workers up
    pids = _worker_pids(measurer.builder._pool)
    assert pids, "no builder worker to kill"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    batch = [_candidate(progs["good"]) for _ in range(4)]
    outcomes, _, _ = measurer.measure(batch)
    failed = [o for o in outcomes if not o.ok]
    assert len(failed) <= len(pids), [o.error_msg[:200] for o in failed]  # at most the batch a dead worker held
    assert all(o.error_kind == "build_error" for o in failed)
    again, _, _ = measurer.measure([_candidate(progs["good"]) for _ in range(4)])
    assert [o.error_kind for o in again] == ["ok"] * 4
    assert set(_worker_pids(measurer.builder._pool)).isdisjoint(pids)


def test_runner_worker_killed_between_batches(measurer):
    progs = _programs()
    measurer.measure([_candidate(progs["good"])])
    pids = _worker_pids(measurer.runner.pool)
    assert pids
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    outcomes, _, _ = measurer.measure([_candidate(progs["good"]) for _ in range(3)])
    assert sum(not o.ok for o in outcomes) <= 1 and outcomes[-1].ok, [o.error_msg[:200] for o in outcomes]
