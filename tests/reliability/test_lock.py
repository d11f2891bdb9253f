"""The work-dir / dataset lock, with real processes: a second holder is refused (one line, exit 2),
and a lock whose holder was SIGKILLed is taken over."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from autotune.lock import LOCK_FILE, FolderLock, FolderLocked

HOLD = (
    "import sys, time\n"
    "from autotune.lock import FolderLock\n"
    "lock = FolderLock(sys.argv[1], '--work-dir').acquire()\n"
    "print('held', flush=True)\n"
    "time.sleep(600)\n"
)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _holder(folder) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_second_process_is_refused_then_takes_over_after_sigkill(tmp_path):
    holder = _holder(tmp_path)
    try:
        with pytest.raises(FolderLocked) as err:
            FolderLock(str(tmp_path), "--work-dir").acquire()
        msg = str(err.value)
        assert f"pid {holder.pid}" in msg and "--work-dir" in msg and "\n" not in msg
        info = json.loads((tmp_path / LOCK_FILE).read_text())
        assert info["pid"] == holder.pid
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # the dead holder's details are still in the file; the kernel released its flock
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == holder.pid
    with FolderLock(str(tmp_path)) as lock:
        assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
        assert lock.path == str(tmp_path / LOCK_FILE)
    # released: another process gets it at once
    again = _holder(tmp_path)
    again.kill()
    again.wait()


def test_lock_released_on_exit_and_reusable(tmp_path):
    for _ in range(3):
        with FolderLock(str(tmp_path / "new" / "dir")):
            pass
    assert (tmp_path / "new" / "dir" / LOCK_FILE).read_text() == ""


def test_two_locks_in_one_process_conflict(tmp_path):
    with FolderLock(str(tmp_path)), pytest.raises(FolderLocked):
        FolderLock(str(tmp_path)).acquire()


def test_holder_killed_while_blocked_waiter_retries(tmp_path):
    """Kill the holder at a random moment in a loop: each time the next acquire succeeds at once."""
    for _ in range(3):
        holder = _holder(tmp_path)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        t0 = time.time()
        with FolderLock(str(tmp_path)):
            assert time.time() - t0 < 1.0


def test_folder_that_is_a_file_is_a_user_error(tmp_path):
    from autotune.errors import UserError

    (tmp_path / "f").write_text("x")
    with pytest.raises(UserError, match="is a file"):
        FolderLock(str(tmp_path / "f"), "--work-dir").acquire()


def test_dropped_lock_is_released(tmp_path):
    lock = FolderLock(str(tmp_path)).acquire()
    del lock
    FolderLock(str(tmp_path)).acquire().release()


@pytest.mark.tvm
@pytest.mark.slow
def test_second_tune_on_a_held_work_dir(tmp_path, cli):
    """A real second ``autotune.tune`` on a work dir another process holds: one line, exit 2, and the
    holder's files are not touched (no work-dir metadata, no database written)."""
    wd = tmp_path / "wd"
    holder = _holder(wd)
    try:
        res = cli("autotune.tune", "--model", "tiny", "--trials", "4", "--work-dir", str(wd), timeout=300)
    finally:
        holder.kill()
        holder.wait()
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert len(errors) == 1 and f"pid {holder.pid}" in errors[0] and "--work-dir" in errors[0]
    assert sorted(os.listdir(wd)) == [LOCK_FILE]
