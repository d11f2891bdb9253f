"""The task pool's synthetic operator generator (real TVM task extraction for a few ops)."""

import collections

import pytest
import torch

pytestmark = pytest.mark.tvm


def test_synthetic_ops_are_varied_distinct_and_reproducible():
    from autotune.collection.taskpool import synthetic_ops

    ops = synthetic_ops(200, seed=3)
    assert len(ops) == 200 and len({o.name for o in ops}) == 200
    families = collections.Counter(o.name.split("_")[0] for o in ops)
    assert {"dense", "conv", "bmm", "dwconv", "softmax", "layernorm"} <= set(families)
    assert [o.name for o in synthetic_ops(50, seed=3)] == [o.name for o in ops[:50]]


def test_synthetic_ops_extract_tasks():
    from autotune.collection.taskpool import synthetic_ops, tasks_of_module
    from autotune.tvmrt.target import parse_target

    target = parse_target("llvm")
    for op in synthetic_ops(7, seed=0):
        inputs = tuple(torch.randn(s) for s in op.inputs)
        tasks = tasks_of_module(op.module(), inputs, target)
        assert tasks, f"{op.name} gave no tasks"
        assert max(t.flops for t in tasks) > 0
