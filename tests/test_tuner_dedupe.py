"""A program proposed twice in one batch is measured once (ReplayTrace samples with replacement; the kill
battery found such a pair in a collection of tiny_mlp): the copy is told the same result."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytestmark = pytest.mark.tvm


def _candidates():
    from autotune.tvmrt.startup import fast_start

    fast_start("llvm")
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    a = te.placeholder((256,), "float32", name="a")
    func = te.create_prim_func([a, te.compute((256,), lambda i: a[i] + 1.0, name="b")])

    def cand(inner):  # one workload, programs told apart by their trace (the split)
        sch = tvm.s_tir.Schedule(tvm.IRModule({"main": func}))
        sch.split(sch.get_loops(sch.get_sblock("b"))[0], [None, inner])
        return ms.MeasureCandidate(sch, ms.arg_info.ArgInfo.from_prim_func(func))

    return cand(4), cand(4), cand(8), cand(16)  # the first two: the same program, two objects


def test_same_program_twice_in_a_batch_is_measured_once():
    from tvm.s_tir import meta_schedule as ms

    from autotune.tuning.tuner import _TuneRun, trace_key

    c1, c1_again, c2, c3 = _candidates()
    run = object.__new__(_TuneRun)
    run.selector = SimpleNamespace(sampler=None)
    state = SimpleNamespace(measured={trace_key(c3.sch.trace): [2e-6]}, task=SimpleNamespace(name="t"))
    told, fresh, feats = run._choose(state, [c1, c1_again, c2, c3], cap=4)
    assert told == [c1, c1_again, c2, c3] and fresh == [c1, c2] and feats is None
    r1, r2 = ms.runner.RunnerResult([1e-6], None), ms.runner.RunnerResult([3e-6], None)
    results = _TuneRun._with_repeats(state, told, fresh, [r1, r2], run._keys)
    assert results[0] is r1 and results[1] is r1 and results[2] is r2
    assert [float(x) for x in results[3].run_secs] == [2e-6]  # measured by an earlier run: stored time
