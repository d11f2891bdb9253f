"""The programmatic API on a tiny MLP with real TVM."""

import pytest
import torch

pytestmark = pytest.mark.tvm


def test_tune_and_compile_torch(tmp_path):
    from autotune.api import compile_torch, tune_torch
    from autotune.zoo import get_model

    model, inputs = get_model("tiny_mlp", batch_size=4)
    ref = model(*inputs)
    tm = tune_torch(model, inputs, trials=8, work_dir=str(tmp_path / "wd"), trials_per_round=4)
    assert tm.tuning_seconds > 0 and tm.compile_seconds > 0
    torch.testing.assert_close(tm(*inputs), ref, rtol=1e-4, atol=1e-5)
    warm = compile_torch(model, inputs, database_dir=str(tmp_path / "wd"))
    torch.testing.assert_close(warm(*inputs), ref, rtol=1e-4, atol=1e-5)
    cold = compile_torch(model, inputs)
    torch.testing.assert_close(cold(*inputs), ref, rtol=1e-4, atol=1e-5)
    assert min(tm.time(inputs, repeat=2)) > 0
