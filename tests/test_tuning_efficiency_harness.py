"""The tuning-efficiency harness's bookkeeping (TVM-free): a finished run made with an older
pretrained model is recognised as stale and measured again."""

import json
import os
import sys
import time

from tests.conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "experiments", "tuning_efficiency"))
import run as te  # noqa: E402


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f)


def test_stale_when_the_pretrained_model_was_retrained(tmp_path):
    model_dir = tmp_path / "models" / "cpu-x-2c" / "seq"
    _write(str(model_dir / "card.json"), {"kind": "seq", "trained": "2026-12-02T18:00:00Z"})
    report = str(tmp_path / "run" / "report.json")
    used = {"path": str(model_dir), "trained": "2026-12-02T18:00:00Z"}
    _write(report, {"target": {"mcpu": "x", "num-cores": 2}, "cost_model_card": used})
    assert te.stale_reason(report, "seq") is None
    assert te.stale_reason(report, "seq:blend") is None
    _write(str(model_dir / "card.json"), {"kind": "seq", "trained": "2026-12-02T19:00:00Z"})
    assert "retrained" in te.stale_reason(report, "seq")
    assert te.stale_reason(report, "ms-xgb") is None  # stock model: nothing pretrained to go stale


def test_old_reports_without_a_card_are_judged_by_time(tmp_path):
    model_dir = tmp_path / "models" / "cpu-x-2c" / "xgb"
    report = str(tmp_path / "run" / "report.json")
    _write(report, {"target": {"mcpu": "x", "num-cores": 2}, "cost_model_card": {"path": str(model_dir)}})
    made = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(os.path.getmtime(report)))
    _write(str(model_dir / "card.json"), {"kind": "xgb", "trained": "2000-01-01T00:00:00Z"})
    assert te.stale_reason(report, "xgb") is None
    _write(str(model_dir / "card.json"), {"kind": "xgb", "trained": "2999-01-01T00:00:00Z"})
    assert made in te.stale_reason(report, "xgb")


def test_the_card_is_found_through_the_reports_hardware_id(tmp_path, monkeypatch):
    # a report without the card's path: the card is looked up under models/<hardware_id>/<kind>
    monkeypatch.setattr(te, "ROOT", str(tmp_path))
    _write(str(tmp_path / "models" / "cuda-sm_90" / "seq" / "card.json"),
           {"kind": "seq", "trained": "2026-12-02T19:00:00Z"})
    report = str(tmp_path / "run" / "report.json")
    _write(report, {"target": {"kind": "cuda", "arch": "sm_90"}, "hardware_id": "cuda-sm_90",
                    "cost_model_card": {"trained": "2026-12-02T18:00:00Z"}})
    assert "retrained" in te.stale_reason(report, "seq")
    _write(report, {"target": {"kind": "cuda", "arch": "sm_90"},  # old report: CPU-style id, no card there
                    "cost_model_card": {"trained": "2026-12-02T18:00:00Z"}})
    assert te.stale_reason(report, "seq") is None
