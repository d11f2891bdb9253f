"""experiments/costmodel/offline_vs_tuning.py: the rank agreement on hand-made results, and the script on the
committed result files."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SCRIPT = os.path.join(ROOT, "experiments", "costmodel", "offline_vs_tuning.py")
spec = importlib.util.spec_from_file_location("offline_vs_tuning", SCRIPT)
ovt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ovt)


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
