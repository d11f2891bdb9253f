"""--conv-layout: convolutions converted to NHWC before tuning.

Real TVM: a conv/BN/ReLU6/depthwise model converted and compiled against torch. A CLI run in NHWC, its
database applied by stock TVM and the API, and a contradicting resume: tests/test_layout_rewrite.py."""


import numpy as np
import pytest
import torch
from torch import nn

pytestmark = pytest.mark.tvm


class _ConvRelu6(nn.Module):
    """mobilenet_v2's pattern: conv+BN+ReLU6, depthwise conv+BN+ReLU6, 1x1 conv."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU6(),
            nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), nn.BatchNorm2d(8), nn.ReLU6(),
            nn.Conv2d(8, 4, 1),
        )

    def forward(self, x):
        return self.body(x)


def _bound(model, x):
    from autotune.frontend import relax as fe

    mod, params = fe.import_exported(fe.export_torch(model.eval(), (x,)))
    return fe.bind_and_simplify(mod, params)


def test_nhwc_conversion_matches_torch_without_transposes_around_relu6():
    import tvm_ffi

    from autotune.frontend import relax as fe
    from autotune.tvmrt.target import parse_target

    torch.manual_seed(0)
    model, x = _ConvRelu6(), torch.randn(1, 3, 16, 16)
    with torch.no_grad():
        for m in model.modules():  # BN statistics that are not the identity
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
        ref = model.eval()(x).numpy()
    mod = _bound(model, x)
    before = mod.script()
    nhwc = fe.convert_conv_layout(mod, "nhwc")
    assert mod.script() == before  # the caller's module is not changed
    assert tvm_ffi.structural_equal(fe.convert_conv_layout(nhwc, "nhwc"), nhwc)  # idempotent
    assert fe.convert_conv_layout(mod, "nchw") is mod
    target = parse_target("llvm")
    tasks = {layout: fe.extract_tasks(m, target) for layout, m in (("nchw", mod), ("nhwc", nhwc))}
    scripts = {layout: "".join(t.mod.script() for t in ts) for layout, ts in tasks.items()}
    assert '"conv2d_nhwc"' in scripts["nhwc"] and '"group_conv2d_nhwc"' in scripts["nhwc"]
    assert "nchw" not in scripts["nhwc"] and '"conv2d_nchw"' in scripts["nchw"]
    # ReLU6 became maximum/minimum fused into the convolutions: no clip wrapped in transposes
    assert not [t.name for t in tasks["nhwc"] if "clip" in t.name]
    assert len(tasks["nhwc"]) <= len(tasks["nchw"]) + 2  # at most the input and output transposes
    for m in (mod, nhwc):
        out = fe.VMRunner(fe.compile_with_database(m, target))(x)[0]
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="nchwc"):
        fe.convert_conv_layout(mod, "nchwc")


def test_conv_layout_flag_checked():
    from autotune.errors import UserError
    from autotune.tuning.config import CONV_LAYOUT_DEFAULT, TuneConfig, resolve_conv_layout

    with pytest.raises(UserError, match="--conv-layout"):
        TuneConfig(conv_layout="nchwc")
    assert resolve_conv_layout("auto", "llvm", "nhwc", "wd") == "nhwc"  # a work dir keeps its layout
    assert resolve_conv_layout("auto", "llvm", "nchw", "wd") == "nchw"
    assert resolve_conv_layout("nhwc", "llvm", None, "wd") == "nhwc"
    assert resolve_conv_layout("auto", "llvm", None, "wd") == CONV_LAYOUT_DEFAULT.get("llvm", "nchw")
    assert resolve_conv_layout("auto", "cuda", None, "wd") == "nchw"
    with pytest.raises(UserError, match="tuned with --conv-layout nchw"):
        resolve_conv_layout("nhwc", "llvm", "nchw", "wd")


def test_bad_conv_layout_flag_is_one_line(cli, tmp_path):
    res = cli("autotune.tune", "--model", "tiny", "--trials", "4", "--work-dir", str(tmp_path / "wd"),
              "--conv-layout", "nchwc")
    assert res.returncode == 2 and "--conv-layout" in res.stderr and "nhwc" in res.stderr
    assert "Traceback" not in res.stderr


def test_vm_profile_times_the_compiled_models_calls():
    """VMRunner.profile: every kernel of the compiled model is timed inside a real call (the VM's
    instrument hook), the calls account for most of the call's time and none for more than all of it,
    and the runner is unchanged afterwards (the hook is removed)."""
    from autotune.frontend import relax as fe
    from autotune.tvmrt.target import parse_target

    torch.manual_seed(0)
    model, x = _ConvRelu6(), torch.randn(1, 3, 32, 32)
    runner = fe.VMRunner(fe.compile_with_database(_bound(model, x), parse_target("llvm")))
    prof = runner.profile([x], runs=3)
    calls = prof["calls"]
    kernels = [k for k in calls if "conv2d" in k]
    assert kernels, list(calls)
    assert all(c["count"] >= 1 and c["ms"] > 0 for c in calls.values())
    assert list(calls) == sorted(calls, key=lambda k: -calls[k]["ms"])  # heaviest first
    assert 0 < sum(c["ms"] for c in calls.values()) <= prof["total_ms"]  # nested in the calls, one at a time
    with torch.no_grad():
        np.testing.assert_allclose(runner(x)[0], model.eval()(x).numpy(), rtol=1e-4, atol=1e-4)
