"""``make train-costmodel`` end to end on the committed tiny dataset (features cached: no TVM)."""

import json
import os

import pytest

from tests.conftest import ROOT

TEST_DATASET = os.path.join(ROOT, "tests", "data", "tiny_dataset")


def test_train_costmodel_quick(cli, tmp_path):
    models, results = tmp_path / "models", tmp_path / "results"
    res = cli("autotune.costmodel.train", "--dataset", TEST_DATASET, "--held-out", "tiny", "--quick",
              "--models", "xgb,ms-xgb,ms-mlp,seq,random", "--models-dir", str(models), "--results", str(results),
              timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    comparison = json.loads((results / "comparison.json").read_text())
    kinds = [r["kind"] for r in comparison["rows"]]
    assert kinds == ["xgb", "ms-xgb", "ms-mlp", "seq", "random"]
    for row in comparison["rows"]:
        m = row["metrics"]["tiny"]
        assert 0 < m["top1"] <= 1 and m["top1"] <= m["top5"] + 1e-12 and 0 <= m["pairwise"] <= 1
        assert row["predict_programs_per_s"] > 0
    hw = comparison["hardware_id"]
    for kind in kinds:
        card = json.loads((models / hw / kind / "card.json").read_text())
        assert card["dataset_manifest_sha256"] == comparison["dataset_manifest_sha256"]
        assert card["hardware"]["hardware_id"] == hw and card["train"]["programs"] > 0
        assert (models / hw / kind / "model.json").exists()
    assert "| xgb |" in (results / "comparison.md").read_text()
    assert (results / "pred_vs_measured_xgb.png").stat().st_size > 1000
    for row in comparison["rows"]:
        lo, hi = row["metrics"]["tiny"]["top1_interval90"]
        assert lo <= row["metrics"]["tiny"]["top1"] <= hi


def test_train_costmodel_over_seeds(cli, tmp_path):
    """--seeds N: every model trained N times; mean and spread reported, the first seed's model saved."""
    res = cli("autotune.costmodel.train", "--dataset", TEST_DATASET, "--held-out", "tiny", "--quick",
              "--models", "xgb,random", "--seeds", "3", "--models-dir", str(tmp_path / "m"),
              "--results", str(tmp_path / "r"), timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    comparison = json.loads((tmp_path / "r" / "comparison.json").read_text())
    for row in comparison["rows"]:
        over = row["metrics"]["over_seeds"]
        assert over["n"] == 3 and all(over["sd"][k] >= 0 for k in ("top1", "top5", "pairwise"))
    random_row = [r for r in comparison["rows"] if r["kind"] == "random"][0]
    assert random_row["metrics"]["over_seeds"]["sd"]["pairwise"] > 0  # different seeds, different scores
    assert "over 3 seeds" in (tmp_path / "r" / "comparison.md").read_text()
    # retraining one model keeps the other models' rows (same dataset and split) and replaces its own
    res = cli("autotune.costmodel.train", "--dataset", TEST_DATASET, "--held-out", "tiny", "--quick",
              "--models", "xgb", "--models-dir", str(tmp_path / "m"), "--results", str(tmp_path / "r"), timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    again = json.loads((tmp_path / "r" / "comparison.json").read_text())
    assert [r["kind"] for r in again["rows"]] == ["xgb", "random"]
    assert again["rows"][1] == random_row
    assert "over_seeds" not in again["rows"][0]["metrics"]


@pytest.mark.parametrize("args, expected", [
    (["--models", "nope"], "--models"),
    (["--held-out", "not_a_model"], "--held-out"),
])
def test_train_bad_input(cli, tmp_path, args, expected):
    res = cli("autotune.costmodel.train", "--dataset", TEST_DATASET, *args, "--models-dir", str(tmp_path),
              "--results", str(tmp_path), timeout=300)
    assert res.returncode == 2 and expected in res.stderr and "Traceback" not in res.stderr
