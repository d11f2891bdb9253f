"""One writer per work dir or dataset folder: an advisory ``fcntl.flock`` on ``FOLDER/autotune.lock``.

The lock file holds the holder's pid, host, start time and command (JSON) so that a second run can
say who has the folder. The kernel drops a ``flock`` when its holder dies (SIGKILL included), so a
lock file left by a killed run is taken over safely: only a living process can hold the lock, and
the stale holder's details are logged. The file itself stays (removing it would race with a process
that has it open); an empty or stale file is harmless.

Limits: advisory (a program that does not take the lock is not stopped) and local (``flock`` on
NFS is not reliable across hosts: do not share one work dir between machines).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Iterator

from autotune.errors import UserError

logger = logging.getLogger(__name__)

LOCK_FILE = "autotune.lock"


class FolderLocked(UserError):
    """Another living process holds the folder's lock."""


def _holder_text(info: dict) -> str:
    if not info:
        return "another process (no details in the lock file)"
    started = info.get("started")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if isinstance(started, int | float) else "?"
    return f"pid {info.get('pid', '?')} on {info.get('host', '?')} since {when} ({info.get('command', '?')})"


def _read_info(fd: int) -> dict:
    with contextlib.suppress(OSError, ValueError):
        os.lseek(fd, 0, os.SEEK_SET)
        data = os.read(fd, 1 << 16)
        info = json.loads(data) if data.strip() else {}
        return info if isinstance(info, dict) else {}
    return {}


class FolderLock:
    """``with FolderLock(path, "--work-dir"):`` — exclusive use of ``path`` by this process."""

    def __init__(self, folder: str, what: str = "folder") -> None:
        self.folder = folder
        self.what = what
        self.path = os.path.join(folder, LOCK_FILE)
        self._fd: int | None = None

    def acquire(self) -> FolderLock:
        if os.path.exists(self.folder) and not os.path.isdir(self.folder):
            raise UserError(f"{self.what} {self.folder} is a file; a folder (new, or one autotune made) is expected")
        try:
            os.makedirs(self.folder, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as err:
            raise UserError(f"{self.what} {self.folder}: cannot create {self.path} ({err.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder_text(_read_info(fd))
            os.close(fd)
            raise FolderLocked(
                f"{self.what} {self.folder} is in use by {holder}; wait for that run to finish "
                f"or use another {self.what} (one writer per folder)"
            ) from None
        except OSError as err:
            os.close(fd)
            raise UserError(f"{self.what} {self.folder}: cannot lock {self.path} ({err.strerror}); "
                            "a local file system that supports flock is needed") from None
        stale = _read_info(fd)
        if stale and stale.get("pid") != os.getpid():
            logger.info("%s: took over the lock left by %s (that process is gone)", self.folder, _holder_text(stale))
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(),
                "command": " ".join([os.path.basename(sys.executable), *sys.argv])[:300]}
        try:
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, json.dumps(info).encode() + b"\n")
            os.fsync(fd)
        except OSError as err:  # e.g. a full disk: the lock is held all the same, only the details are missing
            logger.warning("%s: could not write the lock holder's details (%s)", self.path, err.strerror)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __del__(self) -> None:  # a lock held by a dropped object is released with it
        self.release()

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


@contextlib.contextmanager
def folder_lock(folder: str, what: str = "folder") -> Iterator[FolderLock]:
    lock = FolderLock(folder, what)
    lock.acquire()
    try:
        yield lock
    finally:
        lock.release()
