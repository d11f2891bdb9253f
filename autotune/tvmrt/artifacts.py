"""Where builders put compiled candidates, and the sweep that removes those a killed run left behind.

A builder worker writes each candidate into its own folder ``<tmp>/autotune_build_<owner pid>_<random>``
(``owner``: the process that started the worker pool, ``$AUTOTUNE_POOL_PARENT``); the ``Measurer`` removes
the folder once the candidate ran. A run killed between build and run (SIGKILL, a power cut, a test
battery killing tuners on purpose) leaves its folders: 46 of them gathered in one day of CI and
collection here. ``sweep_orphans`` (called when a ``Measurer`` starts) removes the folders whose owner
process is gone; a live owner's folders are never touched, so concurrent runs are safe. Folders of the
older naming (no owner pid) are removed once a day old. No TVM import here.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import time

from .pdeath import PARENT_ENV

logger = logging.getLogger(__name__)

PREFIX = "autotune_build_"
_OWNED = re.compile(rf"^{PREFIX}(\d+)_")
LEGACY_MAX_AGE_S = 24 * 3600


def artifact_dir() -> str:
    """A new folder for one candidate, named for the process that owns this worker (or this process)."""
    owner = os.environ.get(PARENT_ENV) or str(os.getpid())
    return tempfile.mkdtemp(prefix=f"{PREFIX}{int(owner)}_")


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def sweep_orphans(tmp: str | None = None, now: float | None = None) -> int:
    """Removes the candidate folders under ``tmp`` (default: the system temp folder) whose owner process
    has ended, and folders of the old naming over a day old. Returns how many were removed."""
    tmp = tmp or tempfile.gettempdir()
    now = time.time() if now is None else now
    try:
        names = [n for n in os.listdir(tmp) if n.startswith(PREFIX)]
    except OSError:
        return 0
    removed = 0
    for name in names:
        path = os.path.join(tmp, name)
        m = _OWNED.match(name)
        try:
            if m:
                if _alive(int(m.group(1))):
                    continue
            elif now - os.path.getmtime(path) < LEGACY_MAX_AGE_S:
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed += not os.path.exists(path)
    if removed:
        logger.info("removed %d candidate build folders left by runs that were killed", removed)
    return removed
