"""Pool workers die with their parent (imported before TVM by the worker entry point: no tvm here)."""

from __future__ import annotations

import ctypes
import os
import signal

PARENT_ENV = "AUTOTUNE_POOL_PARENT"  # the pid of the process that started the worker
PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None = None) -> bool:
    """Have Linux SIGKILL this process when its parent dies (``prctl(PR_SET_PDEATHSIG)``).

    Without it a SIGKILLed tuner leaves its builder and runner workers alive until they next write to
    the dead pipe, which is after the build or kernel in hand ends (minutes for a slow one). Linux sends
    the signal when the *thread* that started the worker ends; pool threads live as long as the pool.
    ``parent`` (default: ``$AUTOTUNE_POOL_PARENT``) catches a parent that died before the prctl: then
    this process exits at once. Returns False where prctl is missing (not Linux): the workers then end
    as before, on the broken pipe.
    """
    if parent is None:
        parent = int(os.environ.get(PARENT_ENV, "0")) or os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent:
        os._exit(1)
    return True
