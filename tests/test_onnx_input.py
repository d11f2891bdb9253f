"""``--model model.onnx``: an ONNX file goes through TVM's Relax ONNX front end into the same bind / layout / fuse
flow as a torch model, and its numerics and speed are read against ONNX Runtime (issue 50 item 5)."""

import json
import os

import pytest

pytestmark = pytest.mark.tvm


def _export(tmp_path, name: str) -> str:
    import torch

    from autotune.zoo import get_model

    model, inputs = get_model(name)
    path = str(tmp_path / f"{name}.onnx")
    torch.onnx.export(model, tuple(inputs), path, dynamo=True, optimize=True, verbose=False)
    return path


# the CNN (convolutions through the ONNX front end) with the slow cases: make test keeps the MLP
@pytest.mark.parametrize("name", ["tiny_mlp", pytest.param("tiny", marks=pytest.mark.slow)])
def test_tune_an_onnx_model_checked_against_onnxruntime(cli, tmp_path, name):
    path = _export(tmp_path, name)
    wd = str(tmp_path / "wd")
    res = cli("autotune.tune", "--model", path, "--trials", "4", "--work-dir", wd, "--bench-rounds", "1",
              "--skip-untuned")
    assert res.returncode == 0, res.stderr[-3000:]
    with open(os.path.join(wd, "report.json")) as f:
        report = json.load(f)
    assert report["model"] == name and report["trials"]["in_database"] >= 1
    assert report["numerics"]["max_abs_error"] < 1e-4  # the tuned model against ONNX Runtime on the same inputs
    assert report["latency_ms"]["onnxruntime"] > 0 and "torch_eager" not in report["latency_ms"]
    assert report["speedup"]["tuned_vs_onnxruntime"] > 0
    assert os.path.exists(os.path.join(wd, f"{name}.so"))


@pytest.mark.slow  # ~20 s of tuning; make test keeps the CLI's ONNX case
def test_tune_onnx_api_runs_the_cli_pipeline(tmp_path):
    """autotune.api.tune_onnx: the same session as --model x.onnx (report.json, numerics against ONNX Runtime), a
    callable that agrees with ONNX Runtime."""
    import numpy as np
    import onnxruntime as ort
    import torch

    from autotune.api import tune_onnx
    from autotune.frontend.models import load_model

    path = _export(tmp_path, "tiny_mlp")
    wd = str(tmp_path / "wd")
    om = tune_onnx(path, trials=4, work_dir=wd, trials_per_round=4)
    with open(os.path.join(wd, "report.json")) as f:
        report = json.load(f)
    assert report["model"] == "tiny_mlp" and report["latency_ms"]["onnxruntime"] > 0 and om.cost_model_used
    inputs = load_model(path).inputs
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    want = sess.run(None, {i.name: np.asarray(x) for i, x in zip(sess.get_inputs(), inputs)})[0]
    got = om(*[torch.as_tensor(np.asarray(x)) for x in inputs])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)
