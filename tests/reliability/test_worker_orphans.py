"""A SIGKILLed tuner takes its pool workers with it, even one in the middle of a long call.

Before: the workers (builder pool, runner) lived on until they next wrote to the dead pipe, i.e. after
the build or kernel in hand ended (the kill battery counted 3 alive 1 s after every kill)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

pytestmark = pytest.mark.tvm

CHILD = """
import sys, time
from autotune.tvmrt.pool import LeanPopenPool
pool = LeanPopenPool(max_workers=2, timeout=None)
busy = pool.submit(time.sleep, 600)     # a worker in the middle of a long call (a slow build)
pool.warm_up(2)[0].result()
time.sleep(1.0)
import psutil
print(' '.join(str(p.pid) for p in psutil.Process().children()), flush=True)
busy.result()
"""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_workers_die_with_a_killed_parent():
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2 and all(_alive(p) for p in pids), pids
        os.kill(proc.pid, signal.SIGKILL)  # the main process only, as the OOM killer would
        proc.wait()
        deadline = time.time() + 2.0
        while time.time() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.05)
        assert not [p for p in pids if _alive(p)], "pool workers outlived their killed parent"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_die_with_parent_exits_when_the_parent_is_already_gone():
    code = ("import os; from autotune.tvmrt.pdeath import die_with_parent; "
            "die_with_parent(parent=os.getppid() + 999999); print('survived')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 1 and "survived" not in out.stdout
