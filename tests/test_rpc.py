"""Measuring through a TVM RPC tracker + server (the measurement-farm path), on this machine."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from autotune.data.store import read_manifest, read_records

pytestmark = pytest.mark.tvm


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _registered(port: int, key: str) -> bool:
    from tvm import rpc

    try:
        summary = rpc.connect_tracker("127.0.0.1", port).summary()
    except (RuntimeError, OSError):
        return False
    return summary.get("queue_info", {}).get(key, {}).get("free", 0) > 0


@pytest.fixture(scope="module")
def tracker():
    port, key = _free_port(), "autotune-test"
    procs = [subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port",
                               str(port), "--port-end", str(port + 20)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    time.sleep(2)
    server_port = _free_port()
    procs.append(subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_server", "--tracker", f"127.0.0.1:{port}",
                                   "--key", key, "--host", "127.0.0.1", "--port", str(server_port),
                                   "--port-end", str(server_port + 20)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        deadline = time.time() + 60
        while not _registered(port, key):
            assert time.time() < deadline, "RPC server did not register with the tracker"
            assert all(p.poll() is None for p in procs), "tracker or server exited"
            time.sleep(1)
        yield f"127.0.0.1:{port}", key
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=30)


def test_collect_through_rpc(tmp_path, cli, tracker):
    addr, key = tracker
    out = str(tmp_path / "ds")
    res = cli("autotune.collect", "--out", out, "--models", "tiny_mlp", "--synthetic", "0", "--pass-size", "4",
              "--programs-per-task", "4", "--rpc-tracker", addr, "--rpc-key", key, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    table = read_records(out, valid_only=True)
    assert table.num_rows == 8  # tiny_mlp: 2 tasks x 4 programs, all measured on the server
    manifest = read_manifest(out)
    assert manifest["hardware"]["measured_via"] == f"rpc:{key}"
    run = manifest["collection_runs"][-1]
    assert run["programs"] == 8 and run["run_s"] > 0


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

