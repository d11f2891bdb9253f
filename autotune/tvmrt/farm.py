"""A measurement farm on this machine: a TVM RPC tracker + servers on loopback (tests, benchmarks)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _free_servers(port: int, key: str) -> int:
    from tvm import rpc

    try:
        summary = rpc.connect_tracker("127.0.0.1", port).summary()
    except (RuntimeError, OSError):
        return 0
    return int(summary.get("queue_info", {}).get(key, {}).get("free", 0))


@contextmanager
def local_farm(key: str, timeout: float = 60.0) -> Iterator[str]:
    """Start a tracker and one server registered under ``key``; yields the tracker's "host:port"."""
    with local_farm_servers(key, 1, timeout) as (addr, _servers):
        yield addr


def start_tracker(port: int, port_end: int) -> subprocess.Popen:
    """A TVM RPC tracker on 127.0.0.1 in a session of its own: ``tvm.exec.rpc_tracker`` serves from a
    PopenWorker child that outlives a signal to the parent alone (each test farm left one behind, ~0.5 GB,
    until they were stopped by process group with ``kill_server``)."""
    return subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(port),
                             "--port-end", str(port_end)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def start_server(tracker_port: int, key: str) -> subprocess.Popen:
    """One RPC server on 127.0.0.1 registered at the tracker under ``key`` (``--port-end`` is passed
    because TVM's default search range ends at 9199)."""
    port = free_port()
    return subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_server", "--tracker", f"127.0.0.1:{tracker_port}",
                             "--key", key, "--host", "127.0.0.1", "--port", str(port), "--port-end", str(port + 20)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def kill_server(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Kill a server started by ``start_server`` (or a tracker by ``start_tracker``) with its process group:
    TVM's ``rpc_server`` serves from a child process, which outlives a signal to the parent alone."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    proc.wait(timeout=30)


def wait_registered(tracker_port: int, key: str, n: int, procs: list, timeout: float = 60.0) -> None:
    deadline = time.time() + timeout
    while _free_servers(tracker_port, key) < n:
        if time.time() > deadline or any(p.poll() is not None for p in procs):
            raise RuntimeError("RPC tracker/server did not start or register")
        time.sleep(1)


@contextmanager
def local_farm_servers(key: str, n: int, timeout: float = 60.0) -> Iterator[tuple[str, list]]:
    """A tracker and ``n`` servers under ``key``; yields ("host:port", the servers' Popen objects), so a
    test can kill servers mid-run. Servers the caller appends to that list are stopped too."""
    port = free_port()
    procs = [start_tracker(port, port + 20)]
    servers: list = []
    try:
        time.sleep(2)
        servers += [start_server(port, key) for _ in range(n)]
        procs += servers
        wait_registered(port, key, n, procs, timeout)
        yield f"127.0.0.1:{port}", servers
    finally:
        for p in procs[1:] + [p for p in servers if p not in procs]:
            kill_server(p, signal.SIGTERM)
        kill_server(procs[0], signal.SIGTERM)  # the tracker, with the child it serves from
