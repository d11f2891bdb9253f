"""--conv-layout: convolutions converted to NHWC before tuning, and every compile path finding that out.

Real TVM: a conv/BN/ReLU6/depthwise model converted and compiled against torch; the CLI tunes the tiny zoo
model in NHWC, the API compiles its database, a contradicting resume is refused."""

import json
import os

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


def test_cli_tunes_in_nhwc_and_the_api_compiles_it_the_same_way(cli, tmp_path):
    from tvm.s_tir import meta_schedule as ms

    from autotune.api import compile_torch
    from autotune.frontend import relax as fe
    from autotune.frontend.models import load_model
    from autotune.tvmrt.target import parse_target

    wd = str(tmp_path / "wd")
    res = cli("autotune.tune", "--model", "tiny", "--trials", "12", "--work-dir", wd, "--bench-rounds", "1",
              "--skip-untuned", "--conv-layout", "nhwc")
    assert res.returncode == 0, res.stderr[-3000:]
    with open(os.path.join(wd, "report.json")) as f:
        report = json.load(f)
    assert report["conv_layout"] == "nhwc" and report["numerics"]["max_rel_error"] < 1e-4
    db = ms.database.JSONDatabase(work_dir=wd)
    assert fe.tuned_conv_layout(db) == "nhwc"
    # a resume in the other layout would tune tasks the database does not hold: refused, nothing lost
    with open(os.path.join(wd, "database_tuning_record.json")) as f:
        before = f.read()
    res = cli("autotune.tune", "--model", "tiny", "--trials", "16", "--work-dir", wd, "--conv-layout", "nchw")
    assert res.returncode == 2 and "--conv-layout nchw" in res.stderr and "Traceback" not in res.stderr
    with open(os.path.join(wd, "database_tuning_record.json")) as f:
        assert f.read() == before
    # the API reads the layout off the database: its tuned convolutions are found and the numbers match
    m = load_model("tiny")
    compiled = compile_torch(m.module, m.inputs, database_dir=wd)
    np.testing.assert_allclose(compiled(*m.inputs).numpy(), m.module(*m.inputs).detach().numpy(), rtol=1e-4,
                               atol=1e-4)
    mod, params = fe.import_exported(m.exported)
    nhwc = fe.convert_conv_layout(fe.bind_and_simplify(mod, params), "nhwc")
    tasks = fe.extract_tasks(nhwc, parse_target("llvm"), layout_rewrite=report["layout_rewrite"])
    assert all(db.has_workload(t.mod) for t in tasks if "conv" in t.name)
    # stock TVM applies it to the converted module (layout rewrite on: cpu_weight_prepack's pipeline)
    import tvm
    from tvm import relax

    assert report["layout_rewrite"] is True
    stock = relax.pipeline.static_shape_tuning_pipeline(0, parse_target("llvm"), work_dir=wd,
                                                        cpu_weight_prepack=True)(nhwc)
    out = fe.VMRunner(tvm.compile(stock, target=parse_target("llvm")))(*m.inputs)[0]
    np.testing.assert_allclose(out, m.module(*m.inputs).detach().numpy(), rtol=1e-4, atol=1e-4)


def test_bad_conv_layout_flag_is_one_line(cli, tmp_path):
    res = cli("autotune.tune", "--model", "tiny", "--trials", "4", "--work-dir", str(tmp_path / "wd"),
              "--conv-layout", "nchwc")
    assert res.returncode == 2 and "--conv-layout" in res.stderr and "nhwc" in res.stderr
    assert "Traceback" not in res.stderr
