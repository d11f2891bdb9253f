"""``python -m autotune.calibrate``: task choice (TVM-free), bad input, and a real tiny calibration: two tasks
measured on this CPU, the CPU-spanning model adapted to them, saved, and picked by ``--cost-model auto``."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from autotune import calibrate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLICE = os.path.join(ROOT, "experiments", "transfer", "data", "cpu-znver3-2c")


def test_choose_tasks_covers_operator_kinds_and_leaves_test_networks_out():
    tasks = calibrate.pool_tasks(os.path.join(ROOT, "datasets"))
    assert tasks and all(float(t["flops"]) > 0 for t in tasks.values())
    chosen = calibrate.choose_tasks(tasks, 48, seed=0, exclude_models=("resnet50", "mobilenet_v2", "bert_base"))
    assert len(chosen) == 48 and chosen == calibrate.choose_tasks(tasks, 48, seed=0,
                                                                  exclude_models=("resnet50", "mobilenet_v2", "bert_base"))
    assert not any({"resnet50", "mobilenet_v2", "bert_base"} & set(tasks[k]["models"]) for k in chosen)
    names = " ".join(tasks[k]["name"] for k in chosen)
    for op in ("conv2d", "matmul", "softmax", "pool"):  # coverage: every common operator kind is in
        assert op in names


@pytest.mark.parametrize("argv, says", [(["--minutes", "0"], "--minutes"), (["--tasks", "1"], "--tasks"),
                                        (["--programs-per-task", "1"], "--programs-per-task")])
def test_bad_input_is_one_line_and_exit_2(argv, says, capsys):
    assert calibrate.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0]


def _pooled_base(models_dir: str) -> None:
    from autotune.costmodel.data import load_training_data
    from autotune.costmodel.xgb import XGBCostModel

    data = load_training_data(SLICE)
    model = XGBCostModel(n_estimators=30, max_depth=4, nthread=1, hardware_features=True)
    model.fit(data.batch, data.y, data.groups)
    path = os.path.join(models_dir, calibrate.POOLED, "xgb")
    model.save(path)
    with open(os.path.join(path, "card.json"), "w", encoding="utf-8") as f:
        json.dump({"kind": "xgb", "hardware": None, "dataset_manifest_sha256": "slice"}, f)


@pytest.mark.tvm
@pytest.mark.slow
def test_tiny_calibration_measures_adapts_and_is_used_by_auto(tmp_path, monkeypatch, capsys):
    from autotune.costmodel import load
    from autotune.costmodel.data import load_training_data
    from autotune.tuning.costmodels import resolve
    from autotune.tvmrt.target import hardware_id, parse_target

    models_dir, out = str(tmp_path / "models"), str(tmp_path / "ds")
    _pooled_base(models_dir)
    tasks = calibrate.pool_tasks(os.path.join(ROOT, "datasets"))
    small = sorted((k for k, t in tasks.items() if t["name"] in ("softmax", "mean")), key=lambda k: tasks[k]["flops"])[:2]
    monkeypatch.setattr(calibrate, "choose_tasks", lambda *a, **k: small)  # two quick tasks instead of 96
    argv = ["--out", out, "--models-dir", models_dir, "--programs-per-task", "3", "--minutes", "3"]
    assert calibrate.main(argv) == 0
    hw = hardware_id(parse_target("llvm"))
    path = os.path.join(models_dir, hw, "xgb")
    card = json.load(open(os.path.join(path, "card.json"), encoding="utf-8"))
    data = load_training_data(out)
    assert set(data.task_keys) == set(small) and len(data) >= 4
    assert card["calibrated"]["base"] and card["calibrated"]["programs"] == len(data)
    assert card["hardware_descriptor"]["caches_source"] == "recorded"  # a new dataset records its caches
    model = load(path)
    assert model.hardware_features and model.hardware is not None
    assert np.isfinite(model.predict(data.batch)).all()
    capsys.readouterr()
    assert calibrate.main(argv) == 0 and "has its model" in capsys.readouterr().out  # nothing redone
    used = resolve("auto", parse_target("llvm"), models_dir=models_dir).used
    assert "calibrated on this CPU" in used and hw in used  # what make tune then says
