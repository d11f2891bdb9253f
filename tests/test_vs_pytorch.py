"""benchmarks/vs_pytorch.py on real tuned work dirs: two databases of one model timed in the same rounds."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.tvm, pytest.mark.slow]


def test_two_work_dirs_of_one_model_share_the_torch_timings(cli, tmp_path):
    wds = []
    for mode in ("off", "on"):
        wd = str(tmp_path / mode)
        res = cli("autotune.tune", "--model", "tiny_mlp", "--trials", "8", "--work-dir", wd, "--bench-rounds", "1",
                  "--skip-untuned", "--layout-rewrite", mode)
        assert res.returncode == 0, res.stderr[-3000:]
        wds.append(wd)
    out = str(tmp_path / "vs")
    res = subprocess.run([sys.executable, "benchmarks/vs_pytorch.py", *wds, "--rounds", "2", "--out", out],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    with open(out + ".json") as f:
        results = json.load(f)
    rows = results["models"]
    assert not [r for r in rows if "failed" in r], rows
    roof = results["roofline"]
    assert roof["gemm_gflops"] > 1 and roof["copy_gb_s"] > 0.1
    for r in rows:  # every measured task of both databases placed against this CPU's roofline
        assert r["tasks"] and all(t["bytes"] > 0 and t["of_roofline"] > 0 for t in r["tasks"]), r["tasks"]
    assert [r["layout_rewrite"] for r in rows] == [False, True]
    assert rows[0]["latency_ms"]["torch_eager"] == rows[1]["latency_ms"]["torch_eager"]  # one torch timing
    assert rows[0]["latency_ms"]["tvm_tuned"] != rows[1]["latency_ms"]["tvm_tuned"]
    assert all(r["max_abs_error_vs_eager"]["tvm_tuned"] < 1e-4 and len(r["latency_ms_rounds"]["tvm_tuned"]) == 2
               for r in rows)
    assert os.path.getsize(out + ".md") > 0
    for r in rows:  # the peers a CPU user would pick: built, checked against eager, timed in the same rounds
        assert {"torch_compile_frozen", "onnxruntime"} <= set(r["latency_ms"]) and r["statistic"] == "fastest round"
        assert all(r["max_abs_error_vs_eager"][k] < 1e-4 for k in ("torch_compile_frozen", "onnxruntime"))
        assert r["latency_ms"]["onnxruntime"] == min(r["latency_ms_rounds"]["onnxruntime"])
        best = min((k for k in r["latency_ms"] if k != "tvm_tuned"), key=r["latency_ms"].get)
        assert r["best_peer"] == best and r["tvm_vs_best_peer"] == r["latency_ms"][best] / r["latency_ms"]["tvm_tuned"]
    for r in rows:  # the compiled model's own time by call: its tuned kernels are there, timed
        calls = r["compiled_profile"]["calls"]
        assert [k for k in calls if not k.startswith("vm.builtin.") and calls[k]["ms"] > 0], calls
    # a database without a task table in its report (stock MetaSchedule's) gets one read off the database:
    # the same bests the tuner reported
    code = ("import json, sys; sys.path.insert(0, 'benchmarks')\n"
            "from autotune.tvmrt.startup import fast_start\nfast_start('llvm')\n"
            "import vs_pytorch as vs\nfrom autotune.frontend import relax as fe\n"
            "from autotune.frontend.models import load_model\nfrom autotune.tvmrt.target import parse_target\n"
            "m = load_model('tiny_mlp'); mod = fe.bind_and_simplify(*fe.import_exported(m.exported))\n"
            "rep = json.load(open(sys.argv[1] + '/report.json'))\n"
            "tasks = fe.extract_tasks(fe.convert_conv_layout(mod, rep.get('conv_layout') or 'nchw'), parse_target('llvm'))\n"
            "print(json.dumps({t['name']: t['best_latency_ms'] for t in vs.db_tasks(sys.argv[1], tasks)}))\n")
    res = subprocess.run([sys.executable, "-c", code, wds[0]], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    from_db = json.loads(res.stdout.strip().splitlines()[-1])
    with open(os.path.join(wds[0], "report.json")) as f:
        reported = {t["name"]: t["best_latency_ms"] for t in json.load(f)["tasks"] if t["best_latency_ms"]}
    assert from_db and set(from_db) == set(reported), (from_db, reported)
    for name, ms in reported.items():
        assert abs(from_db[name] - ms) <= 1e-6 + 1e-6 * ms, (name, from_db[name], ms)
