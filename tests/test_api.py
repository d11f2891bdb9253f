"""The programmatic API on a tiny MLP with real TVM."""

import os
import subprocess
import sys

import pytest
import torch

from tests.conftest import ROOT

pytestmark = pytest.mark.tvm


def test_tune_and_compile_torch(tmp_path):
    from autotune.api import compile_torch, tune_torch
    from autotune.zoo import get_model

    model, inputs = get_model("tiny_mlp", batch_size=4)
    ref = model(*inputs)
    tm = tune_torch(model, inputs, trials=8, work_dir=str(tmp_path / "wd"), trials_per_round=4)
    assert tm.tuning_seconds > 0 and tm.compile_seconds > 0
    assert tm.cost_model_used  # what --cost-model auto resolved to, in words
    torch.testing.assert_close(tm(*inputs), ref, rtol=1e-4, atol=1e-5)
    warm = compile_torch(model, inputs, database_dir=str(tmp_path / "wd"))
    torch.testing.assert_close(warm(*inputs), ref, rtol=1e-4, atol=1e-5)
    cold = compile_torch(model, inputs)
    torch.testing.assert_close(cold(*inputs), ref, rtol=1e-4, atol=1e-5)
    assert min(tm.time(inputs, repeat=2)) > 0


def test_compiled_model_runs_with_the_targets_threads():
    """Issue 15: compile_torch ran with one runtime thread (TVM's default is half the logical CPUs)."""
    code = (
        "from autotune.api import compile_torch; from autotune.zoo import get_model;"
        "m, x = get_model('tiny_mlp', batch_size=2); cm = compile_torch(m, x); cm(*x);"
        "from autotune.tvmrt.target import parse_target, target_cores; import tvm;"
        "print(tvm.runtime.num_threads(), target_cores(parse_target('llvm')))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TVM_NUM_THREADS", "OMP_NUM_THREADS")}
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    threads, cores = map(int, res.stdout.split()[-2:])
    assert threads == cores
