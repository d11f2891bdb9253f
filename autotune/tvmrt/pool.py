"""A PopenPoolExecutor whose workers start lean (no torch) and fast (see _worker_main)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from tvm.support.popen_pool import PopenPoolExecutor, PopenWorker

from autotune.tvmrt.pdeath import PARENT_ENV

WORKER_MODULE = "autotune.tvmrt._worker_main"


class LeanPopenWorker(PopenWorker):
    def _start(self):
        if self._proc is not None:
            return
        main_read, worker_write = os.pipe()
        worker_read, main_write = os.pipe()
        cmd = [sys.executable, "-m", WORKER_MODULE, str(worker_read), str(worker_write)]
        env = dict(os.environ, **{PARENT_ENV: str(os.getpid())})
        self._proc = subprocess.Popen(
            cmd, pass_fds=(worker_read, worker_write), stdout=self._stdout, stderr=self._stderr, env=env
        )
        os.close(worker_read)
        os.close(worker_write)
        self._reader = os.fdopen(main_read, "rb")
        self._writer = os.fdopen(main_write, "wb")


class LeanPopenPool(PopenPoolExecutor):
    """Same contract as PopenPoolExecutor; workers are LeanPopenWorkers."""

    def _worker_run(self, fn, args, kwargs):
        with self._lock:
            tid = threading.get_ident()
            proc = self._worker_map.get(tid)
            if proc is None:
                proc = LeanPopenWorker(
                    self._initializer, self._initargs, self._maximum_process_uses, self._stdout, self._stderr
                )
                self._worker_map[tid] = proc
        proc.send(fn, args, kwargs, self._timeout)
        return proc.recv()

    def warm_up(self, n: int) -> list:
        """Start ``n`` workers in the background; returns futures to wait on if wanted."""
        return [self.submit(_noop) for _ in range(n)]


def _noop() -> int:
    return os.getpid()
