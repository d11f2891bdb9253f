"""``python -m autotune.costmodel.transfer`` and experiments/transfer/run.py on the committed slice pair
(experiments/transfer/data: the same tasks measured on cpu-znver3-2c and cpu-x86-64-v2-1c). No TVM."""

import json
import os
import subprocess
import sys

import pytest

from autotune.costmodel import create, load
from autotune.costmodel.transfer.domains import load_domain
from tests.conftest import ROOT, run_cli

DATA = os.path.join(ROOT, "experiments", "transfer", "data")
SRC, DST = os.path.join(DATA, "cpu-znver3-2c"), os.path.join(DATA, "cpu-x86-64-v2-1c")
HELD = ["resnet50", "mobilenet_v2", "bert_base"]


@pytest.fixture(scope="module")
def source_dir(tmp_path_factory):
    """A small xgb source model trained on the source slice, with a card naming its dataset."""
    models = tmp_path_factory.mktemp("models")
    src = load_domain(SRC, HELD)
    path = models / "cpu-znver3-2c" / "xgb"
    create("xgb", n_estimators=40, nthread=1).fit(src.train.batch, src.train.y, src.train.groups).save(str(path))
    (path / "card.json").write_text(json.dumps({"dataset": SRC, "hardware": {"hardware_id": "cpu-znver3-2c"}}))
    return models


def test_transfer_writes_the_target_hardware_model_and_card(source_dir):
    res = run_cli("autotune.costmodel.transfer", "--source", str(source_dir / "cpu-znver3-2c" / "xgb"),
                  "--target-dataset", DST, "--method", "ckd", "--fraction", "0.25", "--seed", "1",
                  "--models-dir", str(source_dir), "--param", "rounds=20", timeout=300)
    assert res.returncode == 0, res.stderr
    out = source_dir / "cpu-x86-64-v2-1c" / "xgb"
    model = load(str(out))
    assert model.name == "xgb"
    card = json.loads((out / "card.json").read_text())
    assert card["transfer"]["method"] == "ckd" and card["transfer"]["fraction"] == 0.25 and card["transfer"]["seed"] == 1
    assert card["transfer"]["method_params"]["rounds"] == 20
    # folders under the repository are recorded relative to it: the card means the same folders in another clone
    assert card["source"]["hardware_id"] == "cpu-znver3-2c" and card["source"]["dataset"] == os.path.relpath(SRC, ROOT)
    assert card["dataset"] == os.path.relpath(DST, ROOT)
    assert card["hardware"]["hardware_id"] == "cpu-x86-64-v2-1c"
    assert len(card["dataset_manifest_sha256"]) == 64 and len(card["source"]["dataset_manifest_sha256"]) == 64
    assert set(card["metrics"]["target"]) >= {"resnet50", "mean"} and "forgetting_top1" in card["metrics"]
    assert 0 < card["transfer"]["measured_programs"] < card["transfer"]["target_train_programs"]
    assert str(out) in res.stdout and "top-1" in res.stdout


def test_a_card_from_another_clone_finds_its_dataset_here(tmp_path, monkeypatch):
    """Cards written before paths were recorded relative (``/work/main/datasets/X``) still find their dataset
    in another clone, under datasets/ by name; a folder outside the working directory stays absolute."""
    from autotune.data.store import portable_path, recorded_dataset

    monkeypatch.chdir(tmp_path)
    (tmp_path / "datasets" / "cpu-znver3-2c").mkdir(parents=True)
    assert recorded_dataset("/elsewhere/clone/datasets/cpu-znver3-2c") == os.path.join("datasets", "cpu-znver3-2c")
    assert recorded_dataset("/elsewhere/clone/datasets/cpu-znver9-2c") is None and recorded_dataset(None) is None
    assert recorded_dataset("datasets/cpu-znver3-2c/") == "datasets/cpu-znver3-2c/"
    assert portable_path(str(tmp_path / "datasets" / "cpu-znver3-2c")) == os.path.join("datasets", "cpu-znver3-2c")
    assert portable_path("/") == "/" and portable_path(str(tmp_path)) == str(tmp_path)


@pytest.mark.parametrize("extra, message", [
    (["--method", "distill"], "--method 'distill': unknown; valid: zero-shot, scratch"),
    (["--fraction", "0"], "--fraction 0.0: must be in (0, 1]"),
    (["--fraction", "1.5"], "--fraction 1.5: must be in (0, 1]"),
    (["--param", "nope=3"], "--param 'nope=3': expected KEY=VALUE with KEY one of:"),
    (["--method", "mtl"], "mtl cannot transfer a 'xgb' model"),
    (["--target-dataset", "/nonexistent"], "--target-dataset /nonexistent: not a folder"),
    (["--source-dataset", "/nonexistent"], "--source-dataset /nonexistent: not a folder"),
])
def test_bad_input_is_one_line_and_exit_2(source_dir, extra, message):
    args = ["--source", str(source_dir / "cpu-znver3-2c" / "xgb"), "--target-dataset", DST, "--models-dir",
            str(source_dir)]
    for i in range(0, len(extra), 2):  # later flags win in argparse; replace to keep the command readable
        if extra[i] in args:
            args[args.index(extra[i]) + 1] = extra[i + 1]
        else:
            args += extra[i : i + 2]
    res = run_cli("autotune.costmodel.transfer", *args, timeout=300)
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and message in lines[0], res.stderr


def test_bad_source_model_folder(tmp_path):
    (tmp_path / "model.json").write_text("{not json")
    res = run_cli("autotune.costmodel.transfer", "--source", str(tmp_path), "--target-dataset", DST, timeout=120)
    assert res.returncode == 2 and "corrupt model card" in res.stderr and "Traceback" not in res.stderr
    res = run_cli("autotune.costmodel.transfer", "--source", str(tmp_path / "none"), "--target-dataset", DST)
    assert res.returncode == 2 and "not a folder" in res.stderr


def _runner(*args, timeout=600):
    return subprocess.run([sys.executable, os.path.join(ROOT, "experiments", "transfer", "run.py"), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_experiment_resumes_and_redoes_a_torn_line(tmp_path):
    args = ["--quick", "--kinds", "xgb", "--methods", "zero-shot,finetune", "--fractions", "0.5", "--out", str(tmp_path)]
    first = _runner(*args)
    assert first.returncode == 0, first.stderr
    lines = (tmp_path / "runs.jsonl").read_text().splitlines()
    assert len(lines) == 2  # zero-shot once, finetune at 50%
    again = _runner(*args)
    assert again.returncode == 0 and (tmp_path / "runs.jsonl").read_text().splitlines() == lines
    (tmp_path / "runs.jsonl").write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])  # killed mid-write
    third = _runner(*args)
    assert third.returncode == 0
    redone = (tmp_path / "runs.jsonl").read_text().splitlines()
    assert len(redone) == 2 and redone[0] == lines[0] and json.loads(redone[1])["method"] == "finetune"
    result = json.loads((tmp_path / "results.json").read_text())
    assert result["meta"]["missing_runs"] == 0
    assert result["aggregate"]["cpu-znver3-2c->cpu-x86-64-v2-1c"]["xgb"]["finetune"]["0.5"]["top1"]["n"] == 1
    assert (tmp_path / "top1_vs_fraction_cpu-znver3-2c_to_cpu-x86-64-v2-1c.png").stat().st_size > 1000
    bad = _runner("--pairs", "nocolon", "--out", str(tmp_path))
    assert bad.returncode == 2 and "expected SOURCE_DATASET:TARGET_DATASET" in bad.stderr
