"""The fold rotation (every network held out once) on the committed tiny dataset: folds exclude their network's
tasks from training, the summary is the mean ± sd over folds, a rerun fits nothing, the comparison shows it."""

import json
import os

from tests.conftest import ROOT

TEST_DATASET = os.path.join(ROOT, "tests", "data", "tiny_dataset")


def test_fold_split_keeps_every_task_of_the_held_out_network_out():
    from autotune.costmodel.data import load_training_data
    from autotune.costmodel.folds import fold_networks, fold_split

    data = load_training_data(TEST_DATASET)
    assert fold_networks(data) == ["tiny", "tiny_mlp"]  # synthetic tasks are no network
    for net in fold_networks(data):
        train, held = fold_split(data, net)
        assert held and not any(net in data.tasks[k]["models"] for k in train)
        assert sorted(train + held) == sorted(data.task_keys)


def test_folds_cli_summary_resume_and_comparison(tmp_path, cli):
    import numpy as np

    from autotune.costmodel.comparison import folds_lines, folds_reading

    args = ["autotune.costmodel.folds", "--dataset", TEST_DATASET, "--models", "ms-xgb", "--quick",
            "--results", str(tmp_path)]
    res = cli(*args)
    assert res.returncode == 0, res.stderr[-2000:]
    result = json.loads((tmp_path / "folds.json").read_text())
    rows = result["rows"]
    assert sorted(r["network"] for r in rows) == ["tiny", "tiny_mlp"]
    s = result["summary"]["ms-xgb"]
    top1 = [r["top1"] for r in sorted(rows, key=lambda r: r["network"])]
    assert abs(s["top1_mean"] - np.mean(top1)) < 1e-12 and abs(s["top1_sd"] - np.std(top1, ddof=1)) < 1e-12
    stamp = (tmp_path / "folds.json").stat().st_mtime_ns
    assert cli(*args).returncode == 0 and (tmp_path / "folds.json").stat().st_mtime_ns == stamp  # nothing refitted
    reading = folds_reading(str(tmp_path), result["dataset_manifest_sha256"])
    assert reading == result["summary"] and folds_reading(str(tmp_path), "another-dataset") is None
    table = "\n".join(folds_lines({"folds": reading, "dataset": TEST_DATASET}))
    assert "| ms-xgb | 2 | 0 |" in table and "| tiny | tiny_mlp |" in table
    bad = cli("autotune.costmodel.folds", "--dataset", TEST_DATASET, "--models", "nope", "--results", str(tmp_path))
    assert bad.returncode == 2 and "--models" in bad.stderr and "Traceback" not in bad.stderr
