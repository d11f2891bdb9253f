"""experiments/costmodel/remeasure.py: the noise ceiling by hand, and the script re-measuring real programs of
the committed tiny dataset (resumable, refuses another machine's dataset and bad arguments)."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SCRIPT = os.path.join(ROOT, "experiments", "costmodel", "remeasure.py")
spec = importlib.util.spec_from_file_location("remeasure", SCRIPT)
rm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rm)


def _line(task, program, first, second, kind="top"):
    return {"task_key": task, "program": program, "kind": kind, "first_s": first, "second_s": second,
            "status": "ok" if second else "run_error"}


def test_ceiling_by_hand():
    tasks = {"t0": {"model_weights": {"m": 1}}, "t1": {"model_weights": {"m": 2}}}
    lines = [_line("t0", "a", 1.0, 2.0), _line("t0", "b", 1.5, 1.2, "random"),
             _line("t1", "c", 1.0, 1.0), _line("t1", "d", 2.0, 2.2), _line("t1", "e", 3.0, None)]
    s = rm.summarize(lines, tasks, {"m": ["t0", "t1"]})
    # t0: the stored best (a) measures 2.0 the second time, b 1.2: 1.2 / 2.0; t1 keeps its best (c).
    # weighted: (1 * 1.2 + 2 * 1.0) / (1 * 2.0 + 2 * 1.0) = 0.8; top-5 holds every program: 1
    assert s["ceiling"]["m"]["top1"] == pytest.approx(0.8) and s["ceiling"]["m"]["top5"] == pytest.approx(1.0)
    assert s["best_still_fastest"] == pytest.approx(0.5) and s["failed"] == 1 and s["tasks"] == 2
    assert s["ratio"]["top"]["n"] == 3 and s["ratio"]["top"]["median"] == pytest.approx(1.1)
    assert s["ratio"]["random"]["median"] == pytest.approx(0.8)


def test_pick_takes_the_fastest_then_a_seeded_draw():
    programs = [(f"p{i}", float(i)) for i in (5, 1, 4, 2, 3)]
    got = rm.pick(programs, 2, 2, seed=0)
    assert [(t, k) for t, _, k in got[:2]] == [("p1", "top"), ("p2", "top")]
    assert {t for t, _, _ in got[2:]} <= {"p3", "p4", "p5"} and len(got) == 4
    assert got == rm.pick(programs, 2, 2, seed=0)


@pytest.mark.tvm
def test_script_remeasures_tiny_programs(tmp_path):
    data = tmp_path / "tiny"
    shutil.copytree(os.path.join(ROOT, "tests", "data", "tiny_dataset"), data)
    out = tmp_path / "out"
    args = [sys.executable, SCRIPT, "--dataset", str(data), "--held-out", "tiny", "--top", "2", "--random", "1",
            "--out", str(out)]
    res = subprocess.run(args + ["--any-hardware"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = [json.loads(x) for x in (out / "remeasure.jsonl").read_text().splitlines()]
    assert len(lines) == 4 * 3  # tiny's 4 tasks with >= 2 programs (its reshape is one schedule), 2 + 1 each
    assert sum(1 for x in lines if x["second_s"]) >= 10
    s = json.loads((out / "remeasure.json").read_text())["summary"]
    assert 0 < s["ceiling"]["tiny"]["top1"] <= 1 and s["ratio"]["top"]["n"] >= 6
    assert "--any-hardware" in (out / "remeasure.md").read_text()
    res = subprocess.run(args + ["--any-hardware"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and len((out / "remeasure.jsonl").read_text().splitlines()) == 12  # resumed
    manifest = json.loads((data / "manifest.json").read_text())
    manifest["hardware"]["hardware_id"] = "cpu-nowhere-2c"
    (data / "manifest.json").write_text(json.dumps(manifest))
    for extra, word in ((["--out", str(tmp_path / "o2")], "cpu-nowhere-2c"), (["--top", "0"], "--top")):
        bad = subprocess.run(args + extra, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert bad.returncode == 2 and word in bad.stderr and "Traceback" not in bad.stderr, bad.stderr[-2000:]
