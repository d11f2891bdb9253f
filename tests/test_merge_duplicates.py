"""Copies of one schedule measured more than once are one program for training and evaluation. No TVM."""

import os

import numpy as np
import pytest

from autotune.costmodel.data import load_training_data, merge_duplicates
from autotune.data.stats import dataset_stats
from tests.conftest import ROOT

TINY = os.path.join(ROOT, "tests", "data", "tiny_dataset")


def test_merge_by_hand():
    keys = ["a", "a", "a", "a", "b", "b", "a"]
    traces = ["t1", "t2", "t1", "t1", "t1", "t1", "t3"]
    latency = np.array([1.0, 5.0, 3.0, 8.0, 2.0, 4.0, np.nan])
    ok = np.isfinite(latency)
    sampler = np.array(["random", "random", "evolutionary", "random", "random", "random", "random"], dtype=object)
    got_ok, lat, smp, copies = merge_duplicates(keys, traces, latency, ok, sampler)
    # a/t1: rows 0, 2, 3 -> row 0, median(1, 3, 8) = 3, one copy came from the search; b/t1 is another
    # task's program: rows 4, 5 -> row 4, median(2, 4) = 3; a/t3 failed (NaN): not a program, not merged
    assert got_ok.tolist() == [True, True, False, False, True, False, False]
    assert lat[[0, 1, 4]].tolist() == [3.0, 5.0, 3.0]
    assert smp[0] == "evolutionary" and smp[1] == "random" and smp[4] == "random"
    assert copies[[0, 1, 4]].tolist() == [3, 1, 2]
    assert latency[0] == 1.0 and sampler[0] == "random" and ok[2]  # inputs untouched


def test_tiny_dataset_rows_become_programs():
    rows = load_training_data(TINY, merge=False)
    merged = load_training_data(TINY)
    names = {i: merged.tasks[k]["name"] for i, k in enumerate(merged.task_keys)}
    # the reshape and the two broadcast_to tasks hold 7 copies of their one schedule each: no longer tasks
    assert {"reshape", "broadcast_to", "broadcast_to1"} <= {names[g] for g in np.unique(rows.groups)}
    assert not {"reshape", "broadcast_to", "broadcast_to1"} & {names[g] for g in np.unique(merged.groups)}
    assert len(rows) - len(merged) == 3 * 7 + 3  # + mean, fused_matmul_add2, fused_matmul_add: one copy each
    assert int(merged.copies.sum()) == len(rows) - 3 * 7 and merged.copies.max() == 2
    assert len(merged.subset(merged.copies == 2)) == 3
    assert merged.y.max() == pytest.approx(1.0)


def test_stats_count_distinct_programs_and_repeat_spread():
    s = dataset_stats(TINY)
    p = s["programs"]
    assert s["valid"] == 141 and p["distinct"] == 120 and p["repeated_rows"] == 21
    assert p["single_program_tasks"] == 3 and p["per_task"] == {"min": 1, "median": 12.0, "max": 12}
    assert p["repeat_spread"]["programs"] == 6 and p["repeat_spread"]["median"] > 1.0
    assert p["row_repeat_cv"]["rows"] == 141 and 0 < p["row_repeat_cv"]["median"] <= p["row_repeat_cv"]["p90"]


def test_duplicates_script_scores_a_saved_model_both_ways(tmp_path):
    import json
    import subprocess
    import sys

    from autotune.costmodel import create

    data = load_training_data(TINY)
    create("xgb-reg", n_estimators=20).fit(data.batch, data.y, data.groups).save(
        str(tmp_path / "models" / "cpu-znver3-2c" / "xgb-reg"))
    script = os.path.join(ROOT, "experiments", "costmodel", "duplicates.py")
    args = [sys.executable, script, "--datasets", TINY, "--held-out", "tiny", "--models-dir", str(tmp_path / "models"),
            "--out", str(tmp_path / "out")]
    res = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    d = json.loads((tmp_path / "out" / "duplicates.json").read_text())["datasets"][0]
    assert d["programs"]["distinct"] == 120
    # tiny: 5 tasks; its reshape is 7 copies of one schedule, so 4 tasks remain; mean and fused_matmul_add2
    # hold one copy each
    assert d["scoring"]["rows"]["held_out_tasks"] == {"tiny": 5}
    assert d["scoring"]["merged"]["held_out_tasks"] == {"tiny": 4}
    assert d["scoring"]["rows"]["held_out_programs"] - d["scoring"]["merged"]["held_out_programs"] == 7 + 2
    [row] = d["models"]
    assert row["kind"] == "xgb-reg" and 0 < row["merged"]["mean"]["top1"] <= 1 and 0 < row["rows"]["tiny"]["top5"] <= 1
    assert "| xgb-reg |" in (tmp_path / "out" / "duplicates.md").read_text()
    bad = subprocess.run(args[:-2] + ["--held-out", "nope", "--out", str(tmp_path / "b")], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "--held-out" in bad.stderr and "Traceback" not in bad.stderr
