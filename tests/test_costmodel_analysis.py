"""experiments/costmodel/offline_vs_tuning.py (rank agreement on hand-made results, the script on the committed
result files) and top1_analysis.py (loss shares on a hand-computed case)."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT

SCRIPT = os.path.join(ROOT, "experiments", "costmodel", "offline_vs_tuning.py")
spec = importlib.util.spec_from_file_location("offline_vs_tuning", SCRIPT)
ovt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ovt)
spec = importlib.util.spec_from_file_location("top1_analysis", SCRIPT.replace("offline_vs_tuning", "top1_analysis"))
t1a = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t1a)


def _rescored(scores: dict) -> dict:
    return {"rows": [{"kind": k, "views": {v: {"m": {"top1": s, "top5": s, "pairwise": s}} for v in ("all", "search")}}
                     for k, s in scores.items()]}


def test_same_order_is_tau_one_and_reversed_minus_one():
    tuning = {"summary": {"m": {"a": {"final_latency_ms": 1.0}, "b": {"final_latency_ms": 2.0},
                                "c": {"final_latency_ms": 3.0}}}}
    same = ovt.compare(_rescored({"a": 0.9, "b": 0.5, "c": 0.1}), tuning)["m"]
    assert same["best_by_tuning"] == "a"
    assert same["metrics"]["top1 (all)"]["kendall_tau"] == pytest.approx(1.0)
    assert same["metrics"]["top1 (all)"]["agrees_on_best"]
    rev = ovt.compare(_rescored({"a": 0.1, "b": 0.5, "c": 0.9}), tuning)["m"]["metrics"]["top1 (all)"]
    assert rev["kendall_tau"] == pytest.approx(-1.0) and not rev["agrees_on_best"]


def test_script_on_the_committed_results(tmp_path):
    res = subprocess.run([sys.executable, SCRIPT, "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads((tmp_path / "offline_vs_tuning.json").read_text())
    assert set(out["per_model"]) == {"resnet50", "mobilenet_v2", "bert_base"}
    for entry in out["per_model"].values():
        for m in entry["metrics"].values():
            assert -1.0 <= m["kendall_tau"] <= 1.0
    bad = subprocess.run([sys.executable, SCRIPT, "--tuning", str(tmp_path / "none.json")], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "none.json" in bad.stderr


class _Part:
    """The fields per_task_losses reads from a TrainingData."""

    def __init__(self, latency, groups, weights):
        self.latency, self.groups, self.task_keys = np.asarray(latency), np.asarray(groups), ["t0", "t1"]
        self._w = weights

    def weights_for(self, model):
        return self._w


def test_loss_shares_add_up_to_one_minus_top1():
    # task 0 (weight 2): best 1.0, the model picks 4.0; task 1 (weight 1): best 2.0 and picked
    part = _Part([1.0, 4.0, 2.0, 3.0], [0, 0, 1, 1], {0: 2.0, 1: 1.0})
    rows = t1a.per_task_losses(part, np.array([0.0, 1.0, 1.0, 0.0]), "m")
    # weighted picks 2*4 + 1*2 = 10, best 2*1 + 1*2 = 4: top-1 0.4, task 0 loses 2*(4-1)/10
    assert rows[0]["task"] == "t0" and rows[0]["loss_share"] == pytest.approx(0.6)
    assert rows[0]["pick_over_best"] == pytest.approx(4.0)
    assert rows[1]["loss_share"] == pytest.approx(0.0)
    from autotune.costmodel.metrics import top_k_score

    top1 = top_k_score(part.latency, np.array([0.0, 1.0, 1.0, 0.0]), part.groups, {0: 2.0, 1: 1.0}, 1)
    assert 1 - sum(r["loss_share"] for r in rows) == pytest.approx(top1)
    z = t1a.zscore_per_task(np.array([1.0, 3.0, 10.0, 30.0]), part.groups)
    np.testing.assert_allclose(z, [-1, 1, -1, 1])


def test_variants_script_runs_resumes_and_refuses_bad_specs(tmp_path):
    script = os.path.join(ROOT, "experiments", "costmodel", "variants.py")
    out = tmp_path / "v.jsonl"
    args = [sys.executable, script, "--dataset", os.path.join(ROOT, "tests", "data", "tiny_dataset"), "--held-out",
            "tiny", "--spec", 'q:ms-xgb:{"n_estimators": 20}', "--seeds", "0,1", "--out", str(out)]
    res = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["name"], r["seed"]) for r in rows] == [("q", 0), ("q", 1)]
    assert all(0 < r["all_top1"] <= 1 for r in rows)
    table = (tmp_path / "v.md").read_text()
    assert "| q | ms-xgb |" in table and "0,1" in table
    assert subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300).returncode == 0
    assert len(out.read_text().splitlines()) == 2  # resumed: nothing retrained
    for bad in ("q:nope:{}", "q:seq:[1]", "q-no-colons"):
        res = subprocess.run(args[:-6] + ["--spec", bad, "--out", str(out)], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
        assert res.returncode == 2 and f"--spec {bad!r}" in res.stderr, (bad, res.stderr)


@pytest.mark.parametrize("script", ["experiments/costmodel/variants.py", "experiments/tuning_efficiency/run.py",
                                    "experiments/tuning_efficiency/real_budget.py",
                                    "experiments/active_learning/real_collection.py"])
def test_experiment_scripts_refuse_bad_seeds(script):
    """Every experiment script reads --seeds with autotune.cli.seed_list: a bad list is one line naming --seeds,
    exit 2, before anything is fitted, tuned or collected."""
    res = subprocess.run([sys.executable, os.path.join(ROOT, script), "--seeds", "0,x"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "--seeds" in res.stderr and "Traceback" not in res.stderr, res.stderr[-2000:]
