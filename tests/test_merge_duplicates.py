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
