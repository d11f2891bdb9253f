"""``--batch-selection``: an active-learning sampler picks which of the evolutionary search's proposals
are measured (issue 13 item 3). Unit checks of the selector on synthetic features (no TVM), then a real
tuning run on a tiny model and the flag's bad inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _feats(n: int, rng: np.random.Generator, stores: int = 3) -> list[np.ndarray]:
    return [rng.random((stores, 164)).astype(np.float32) for _ in range(n)]


def test_greedy_keeps_the_search_order():
    from autotune.tuning.selection import BatchSelector

    sel = BatchSelector("greedy")
    assert sel.proposals_per_round == 1
    assert list(sel.choose("t", _feats(10, np.random.default_rng(0)), np.arange(10.0), 4)) == [0, 1, 2, 3]


def test_topk_biased_picks_among_the_predicted_best_and_never_a_copy():
    from autotune.tuning.selection import BatchSelector

    rng = np.random.default_rng(1)
    feats = _feats(16, rng)
    feats[15] = feats[14].copy()  # an exact copy of the best-scored program
    scores = np.arange(16.0)  # higher = predicted faster: 15 and 14 are the best
    sel = BatchSelector("topk-biased", oversample=4)
    picked = sel.choose("t", feats, scores, 4)
    assert len(set(picked.tolist())) == 4 and picked.max() < 16
    assert not {14, 15} <= set(picked.tolist())  # not both copies
    assert set(picked.tolist()) <= set(range(4, 16))  # within the bias x k best (3 x 4 = 12 of 16)


def test_rdu_waits_for_measurements_then_prefers_uncovered_programs():
    from autotune.tuning.selection import MIN_MEASURED_FOR_SPREAD, BatchSelector

    rng = np.random.default_rng(2)
    sel = BatchSelector("rdu", oversample=4)
    proposals = _feats(12, rng)
    assert list(sel.choose("t", proposals, np.zeros(12), 3)) == [0, 1, 2]  # no spread yet: greedy
    assert sel.stats["fallback_rounds"] == 1
    measured = _feats(MIN_MEASURED_FOR_SPREAD + 4, rng)
    sel.record("t", measured, [1e-3 * (1 + i % 5) for i in range(len(measured))])
    # half of the proposals are copies of measured programs: covered, so rdu leaves them
    proposals = [measured[i].copy() for i in range(6)] + _feats(6, rng)
    picked = sel.choose("t", proposals, np.zeros(12), 3)
    assert sel.stats["selected_rounds"] == 1 and len(set(picked.tolist())) == 3
    assert all(i >= 6 for i in picked), picked


@pytest.mark.tvm
@pytest.mark.slow  # a real tuning run (~27 s): CI runs it with the slow cases
def test_tune_with_rdu_batch_selection(tmp_path):
    from autotune.db import scan_database

    wd = str(tmp_path / "wd")
    cmd = [sys.executable, "-m", "autotune.tune", "--model", "tiny_mlp", "--trials", "40", "--trials-per-round", "4",
           "--batch-selection", "rdu", "--cost-model", "stock", "--work-dir", wd, "--skip-untuned",
           "--bench-rounds", "1"]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    with open(os.path.join(wd, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    assert report["search"]["batch_selection"] == "rdu"
    sel = report["batch_selection"]
    assert sel["name"] == "rdu" and sel["selected_rounds"] >= 1, sel  # picked by the sampler, not only greedy
    assert report["trials"]["in_database"] == 40
    done = [row[0] for row in report["history"]["rows"]]
    batches = [b - a for a, b in zip([0] + done, done)]
    assert max(batches) <= 4, batches  # the sampler picks --trials-per-round, not all 4x proposals
    scan = scan_database(wd)
    assert not scan.issues and len(scan.record_lines) == 40


@pytest.mark.tvm
@pytest.mark.parametrize("args, expected", [
    (["--batch-selection", "nope"], "--batch-selection: unknown 'nope'; valid: greedy, random"),
    (["--batch-selection", "rdu", "--strategy", "optuna"], "--strategy optuna has none"),
    (["--selection-oversample", "0"], "--selection-oversample must be a positive integer"),
])
def test_bad_batch_selection_is_one_line_exit_2(tmp_path, args, expected):
    cmd = [sys.executable, "-m", "autotune.tune", "--model", "tiny_mlp", "--trials", "4",
           "--work-dir", str(tmp_path / "wd"), *args]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and expected in errors[0], res.stderr[-2000:]
