"""A measurement farm of one on this machine: a TVM RPC tracker + one server (tests, benchmarks)."""

from __future__ import annotations

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


def _registered(port: int, key: str) -> bool:
    from tvm import rpc

    try:
        summary = rpc.connect_tracker("127.0.0.1", port).summary()
    except (RuntimeError, OSError):
        return False
    return summary.get("queue_info", {}).get(key, {}).get("free", 0) > 0


@contextmanager
def local_farm(key: str, timeout: float = 60.0) -> Iterator[str]:
    """Start a tracker and one server registered under ``key``; yields the tracker's "host:port".

    Ports are chosen free; ``--port-end`` is passed because TVM's default search range ends at 9199.
    """
    port, server_port = free_port(), free_port()
    procs = [subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port",
                               str(port), "--port-end", str(port + 20)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        time.sleep(2)
        procs.append(subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_server", "--tracker",
                                       f"127.0.0.1:{port}", "--key", key, "--host", "127.0.0.1", "--port",
                                       str(server_port), "--port-end", str(server_port + 20)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.time() + timeout
        while not _registered(port, key):
            if time.time() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError("RPC tracker/server did not start or register")
            time.sleep(1)
        yield f"127.0.0.1:{port}"
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=30)
