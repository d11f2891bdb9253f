"""RPC farm faults on loopback: an unreachable tracker, a port that is not a tracker and a server that
never registers each end in one clear line (exit 2 from the CLIs) well within 30 s, not in 60 s of
retries and a run that "succeeds" having measured nothing."""

from __future__ import annotations

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
    from autotune.tvmrt.farm import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(port),
                             "--port-end", str(port + 1)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
        proc.terminate()
        proc.wait(timeout=30)


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
