"""RPC farm faults on loopback: an unreachable tracker, a port that is not a tracker and a server that
never registers each end in one clear line (exit 2 from the CLIs) well within 30 s, not in 60 s of
retries and a run that "succeeds" having measured nothing."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

pytestmark = pytest.mark.tvm


def test_tune_with_no_tracker_fails_fast(cli, tmp_path):
    t0 = time.time()
    res = cli("autotune.tune", "--model", "tiny", "--trials", "4", "--rpc-tracker", "127.0.0.1:1", "--rpc-key", "cpu",
              "--work-dir", str(tmp_path / "wd"), timeout=120)
    elapsed = time.time() - t0
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-3000:]
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no TVM RPC tracker answers" in errors[0] and "127.0.0.1:1" in errors[0]
    assert elapsed < 30, f"took {elapsed:.0f} s"


def test_port_that_is_not_a_tracker():
    from autotune.errors import UserError
    from autotune.tvmrt.measure import RPCSettings, check_rpc

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    accepted = []
    threading.Thread(target=lambda: accepted.append(silent.accept()), daemon=True).start()
    t0 = time.time()
    with pytest.raises(UserError, match="no TVM RPC tracker answers"):
        check_rpc(RPCSettings("127.0.0.1", silent.getsockname()[1], "cpu"), timeout_sec=2)
    assert time.time() - t0 < 10
    silent.close()


@pytest.fixture
def bare_tracker():
    from autotune.tvmrt.farm import free_port, kill_server, start_tracker

    port = free_port()
    proc = start_tracker(port, port + 1)
    try:
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.time() < deadline and proc.poll() is None, "tracker did not start"
                time.sleep(0.5)
        yield port
    finally:
        kill_server(proc, signal.SIGTERM)


def test_server_that_never_registers(bare_tracker):
    from autotune.errors import UserError
    from autotune.tvmrt.measure import RPCSettings, check_rpc

    t0 = time.time()
    with pytest.raises(UserError) as err:
        check_rpc(RPCSettings("127.0.0.1", bare_tracker, "gpu-box"), wait_sec=3)
    msg = str(err.value)
    assert "no RPC server registered under this key" in msg and "keys there: none" in msg
    assert "python -m tvm.exec.rpc_server" in msg and "--key gpu-box" in msg
    assert 3 <= time.time() - t0 < 15


@pytest.mark.slow
def test_registered_server_passes():
    from autotune.tvmrt.farm import local_farm
    from autotune.tvmrt.measure import RPCSettings, check_rpc

    with local_farm("rel-key") as addr:
        host, port = addr.split(":")
        check_rpc(RPCSettings(host, int(port), "rel-key"), wait_sec=1)


def _records(wd: str) -> int:
    path = os.path.join(wd, "database_tuning_record.json")
    return sum(1 for line in open(path, "rb") if line.strip()) if os.path.exists(path) else 0


def _wait_records(proc, wd: str, n: int, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while _records(wd) < n:
        assert proc.poll() is None, f"the run ended (rc {proc.returncode}) before {n} records"
        assert time.time() < deadline, f"fewer than {n} records after {timeout} s"
        time.sleep(0.5)


@pytest.mark.slow
def test_servers_killed_mid_run(tmp_path):
    """Two servers: one SIGKILLed mid-run costs at most the candidates it held, the run goes on on the
    other. Then the last one killed: the run stops with one line and exit 2 (it used to wait for a
    session forever), keeps its records, and resumes once a server is back."""
    from autotune.db import scan_database
    from autotune.tvmrt.farm import kill_server, local_farm_servers, start_server, wait_registered

    wd = str(tmp_path / "wd")
    with local_farm_servers("kill-key", 2) as (addr, servers):
        cmd = [sys.executable, "-m", "autotune.tune", "--model", "tiny_mlp", "--trials", "16", "--trials-per-round",
               "4", "--cost-model", "stock", "--work-dir", wd, "--skip-untuned", "--bench-rounds", "1",
               "--rpc-tracker", addr, "--rpc-key", "kill-key"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _wait_records(proc, wd, 4)
        kill_server(servers[0])
        _wait_records(proc, wd, 8)
        kill_server(servers[1])
        t0 = time.time()
        _out, err = proc.communicate(timeout=300)
        assert proc.returncode == 2 and "Traceback" not in err, err[-3000:]
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "no RPC server left under this key" in errors[0], err[-3000:]
        assert time.time() - t0 < 120
        stopped = scan_database(wd)
        assert len(stopped.record_lines) >= 8 and not stopped.fatal
        failed_before = stopped.failed_records
        assert failed_before <= 8, f"{failed_before} failed trials: more than the batches the dead servers held"
        port = int(addr.split(":")[1])
        servers.append(start_server(port, "kill-key"))
        wait_registered(port, "kill-key", 1, servers[-1:])
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stderr[-3000:]
    final = scan_database(wd)
    assert len(final.record_lines) == 16 and not [i for i in final.issues if i.kind == "duplicate"]


@pytest.mark.slow
def test_one_session_per_server_at_a_time(tmp_path):
    """Three servers: the runner opens one session per connected server, so candidates run at once (the
    tracker's count of free servers drops to 1 or 0 while they sleep), not one after the other."""
    from autotune.tvmrt.farm import _free_servers, local_farm_servers
    from autotune.tvmrt.measure import Measurer, RPCSettings
    from autotune.tvmrt.target import parse_target

    from .test_faulty_candidates import _candidate, _sleeper

    with local_farm_servers("par-key", 3) as (addr, _servers):
        host, port = addr.split(":")
        m = Measurer(parse_target("llvm"), rpc=RPCSettings(host, int(port), "par-key"))
        try:
            assert m.rpc_workers == 3
            # the runner's workers start lazily and import TVM for seconds: on a loaded machine the third
            # started after the first session ended (CI saw 2 at once). One quick batch starts all three.
            warm, _, _ = m.measure([_candidate(_sleeper(0)) for _ in range(3)])
            assert [o.error_kind for o in warm] == ["ok"] * 3
            free, stop = [], threading.Event()

            def watch():
                while not stop.is_set():
                    free.append(_free_servers(int(port), "par-key"))
                    time.sleep(0.2)

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            outcomes, _, _ = m.measure([_candidate(_sleeper(3)) for _ in range(3)])
            stop.set()
            watcher.join()
        finally:
            m.close()
    assert [o.error_kind for o in outcomes] == ["ok"] * 3, [o.error_msg[:300] for o in outcomes]
    # parallel, not one after the other: at least two of the three servers busy at once. All three at once
    # depends on how the 2 cores schedule the builds and the workers' session setup (CI on a loaded clone
    # saw 2 at most, twice), so it is not required
    assert min(free) <= 1, f"free servers seen while measuring: {sorted(set(free))} (sessions not parallel)"
