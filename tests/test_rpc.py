"""Measuring through a TVM RPC tracker + server (the measurement-farm path), on this machine."""

import json
import os

import pytest

from autotune.data.store import read_manifest, read_records

pytestmark = pytest.mark.tvm


@pytest.fixture(scope="module")
def tracker():
    from autotune.tvmrt.farm import local_farm

    key = "autotune-test"
    with local_farm(key) as addr:
        yield addr, key


@pytest.mark.slow
def test_collect_through_rpc(tmp_path, cli, tracker):
    addr, key = tracker
    out = str(tmp_path / "ds")
    res = cli("autotune.collect", "--out", out, "--models", "tiny_mlp", "--synthetic", "0", "--pass-size", "4",
              "--programs-per-task", "4", "--rpc-tracker", addr, "--rpc-key", key, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    table = read_records(out)
    # tiny_mlp: 2 tasks x 4 proposed programs, every one measured on the server without failing. A task's small
    # design space can propose a program twice in a batch; it is measured once (CI saw 7 of 8 that way)
    traces = table.column("trace").to_pylist()
    assert 6 <= table.num_rows <= 8 and len(set(traces)) == table.num_rows
    assert read_records(out, valid_only=True).num_rows == table.num_rows
    assert len(set(table.column("task_key").to_pylist())) == 2
    manifest = read_manifest(out)
    assert manifest["hardware"]["measured_via"] == f"rpc:{key}"
    run = manifest["collection_runs"][-1]
    assert run["programs"] == table.num_rows and run["run_s"] > 0


@pytest.mark.slow
def test_tune_through_rpc(tmp_path, cli, tracker):
    addr, key = tracker
    wd = str(tmp_path / "wd")
    res = cli("autotune.tune", "--model", "tiny_mlp", "--trials", "8", "--trials-per-round", "4", "--work-dir", wd,
              "--skip-untuned", "--bench-rounds", "1", "--rpc-tracker", addr, "--rpc-key", key, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.load(open(os.path.join(wd, "report.json")))
    assert report["trials"]["this_run"] == 8 and report["trials"]["failed"] == 0
    assert report["numerics"]["max_rel_error"] < 1e-4


def test_rpc_flags_must_come_together(cli):
    res = cli("autotune.tune", "--model", "tiny", "--rpc-tracker", "127.0.0.1:9190")
    assert res.returncode == 2 and "--rpc-key" in res.stderr and "Traceback" not in res.stderr

