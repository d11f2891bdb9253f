"""Quick checks of the survey reproduction (experiments/survey) at tiny sizes, with real torch.compile.

The entry points run in subprocesses (they pin threads and grad mode for their whole process);
the qualitative assertions are the ones the CI quick mode makes: compiled output matches eager,
static mode compiles one graph per shape and dynamic mode one graph, the elementwise chain is
faster compiled, a warm cache compiles faster than a cold one.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from experiments.survey import timing  # noqa: E402
from experiments.survey.workloads import WORKLOADS, build  # noqa: E402


def run_entry(module: str, *args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", f"experiments.survey.{module}", *args]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return proc


def test_alternate_ranks_arms_and_records_load():
    res = timing.alternate({"slow": lambda: time.sleep(0.002), "fast": lambda: time.sleep(0.0005)},
                           baseline="slow", rounds=3, block_s=0.01, warmup=1)
    assert res["ratio"]["fast"]["median"] > 1.5
    assert res["ratio"]["slow"]["median"] == pytest.approx(1.0)
    assert res["rounds"] == 3 and len(res["loadavg"]) == 3


def test_break_even_and_json_safety(tmp_path):
    assert timing.break_even(10.0, 0.02, 0.01) == pytest.approx(1000)
    assert math.isinf(timing.break_even(10.0, 0.01, 0.02))
    path = timing.write_json(tmp_path / "x.json", {"n_star": float("inf"), "nested": [float("nan")]})
    assert json.loads(path.read_text()) == {"n_star": "inf", "nested": ["nan"]}


def test_compare_catches_mismatch():
    ref = torch.ones(4)
    assert timing.compare(ref + 1e-7, ref, 1e-5, 1e-5)["ok"]
    assert not timing.compare(ref + 1e-2, ref, 1e-5, 1e-5)["ok"]
    assert not timing.compare(torch.ones(5), ref, 1e-5, 1e-5)["ok"]


def test_every_workload_builds_and_runs_eager():
    assert len(WORKLOADS) >= 8
    kinds = {w.kind for w in WORKLOADS.values()}
    assert kinds == {"fusion", "compute"}
    with torch.no_grad():
        for name in WORKLOADS:
            model, inputs = build(name, batch=1)
            out = model(*inputs)
            assert torch.isfinite(out).all(), name
    with pytest.raises(KeyError, match="valid"):
        build("nope")


def test_gpu_script_rejects_bad_arguments():
    assert subprocess.run(["bash", "-n", "experiments/survey/gpu_run.sh"], cwd=REPO).returncode == 0
    bad = subprocess.run(["bash", "experiments/survey/gpu_run.sh", "--bogus"], cwd=REPO, capture_output=True)
    assert bad.returncode == 2


@pytest.fixture(scope="module")
def quick_dir(tmp_path_factory):
    """E1 (elementwise chain, Inductor + TVM untuned), E2 and E3 at tiny sizes into one folder."""
    d = tmp_path_factory.mktemp("survey")
    run_entry("e1_graph_opt", "--quick", "--workloads", "ew_chain_4M,tiny_graph", "--tvm", "untuned",
              "--rounds", "4", "--check", "--out", str(d / "e1_cpu.json"))
    run_entry("e2_compile_overhead", "--dry-run", "--check", "--out", str(d / "e2_cpu.json"))
    run_entry("e3_dynamic_shapes", "--dry-run", "--tvm", "untuned", "--check", "--out", str(d / "e3_cpu.json"))
    return d


def load(d: Path, name: str) -> dict:
    return json.loads((d / name).read_text())


@pytest.mark.slow
@pytest.mark.tvm
def test_e1_compiled_matches_eager_and_chain_is_faster(quick_dir):
    d = load(quick_dir, "e1_cpu.json")
    assert d["complete"] and d["env"]["torch_threads"] == 1 and d["env"]["TVM_NUM_THREADS"] == "1"
    for rec in d["workloads"]:
        assert rec["check"]["inductor"]["ok"], rec["check"]
        assert rec["check"]["tvm_untuned"]["ok"], rec["check"]
        assert len(rec["timing"]["loadavg"]) == 3
    chain = next(r for r in d["workloads"] if r["workload"] == "ew_chain_4M")
    assert chain["timing"]["ratio"]["inductor"]["median"] > 1.0


@pytest.mark.slow
@pytest.mark.tvm
def test_e2_warm_cache_hits_and_beats_cold(quick_dir):
    row = load(quick_dir, "e2_cpu.json")["inductor"][0]
    cold, warm = row["runs"]["cold"][0], row["runs"]["warm"][0]
    assert cold["inductor_counters"].get("fxgraph_cache_hit", 0) == 0
    assert warm["inductor_counters"].get("fxgraph_cache_hit", 0) > 0
    assert float(warm["compile_s"]) < float(cold["compile_s"])
    assert cold["check"]["ok"] and warm["check"]["ok"]


@pytest.mark.slow
@pytest.mark.tvm
def test_e3_one_graph_per_shape_static_one_graph_dynamic(quick_dir):
    d = load(quick_dir, "e3_cpu.json")
    n = d["config"]["n"]
    for rep in d["inductor"]["repeats"]:
        assert rep["arms"]["static"]["backend_compiles"] == n
        assert rep["arms"]["static"]["dynamo_unique_graphs"] == n
        assert rep["arms"]["dynamic"]["backend_compiles"] == 1
        assert rep["arms"]["dynamic"]["dynamo_unique_graphs"] == 1
    assert d["inductor"]["summary"][-1]["reduction"] > 0
    assert d["tvm"]["compiles"] == {"static": n, "dynamic": 1}
    assert all(c["ok"] for c in d["checks"])


@pytest.mark.slow
@pytest.mark.tvm
def test_report_writes_tables_and_plots(quick_dir):
    run_entry("report", "--dir", str(quick_dir), "--no-readme", "--strict")
    for key in ("e1", "e2", "e3"):
        text = (quick_dir / f"{key}_cpu.md").read_text()
        assert "Side by side with the paper" in text
    for png in ("cpu_e1_speedup.png", "cpu_e2_nstar.png", "cpu_e3_cumulative.png"):
        assert (quick_dir / png).stat().st_size > 10_000
