"""A tuning run whose disk fills up (a small tmpfs): MetaSchedule's JSONDatabase appends with an unchecked
C++ ofstream, so records were silently dropped while the run went on measuring. Now the run stops with one
line (exit 2), what was written before is intact, and after space is freed the same command resumes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {res.stderr.strip()[:200]}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def _tune(wd: str, trials: int) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "autotune.tune", "--model", "tiny_mlp", "--trials", str(trials),
           "--trials-per-round", "4", "--cost-model", "stock", "--work-dir", wd, "--skip-untuned",
           "--bench-rounds", "1"]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def _fill(path: str, leave: int) -> None:
    """Write a filler file until ``leave`` bytes are free (tmpfs counts in pages)."""
    st = os.statvfs(os.path.dirname(path))
    free = st.f_bavail * st.f_frsize
    with open(path, "wb") as f:
        f.write(b"\0" * max(free - leave, 0))


def test_full_disk_stops_the_run_keeps_records_and_resumes(small_disk):
    from autotune.db import scan_database

    wd = str(small_disk / "wd")
    first = _tune(wd, 8)
    assert first.returncode == 0, first.stderr[-3000:]
    before = scan_database(wd)
    assert len(before.record_lines) == 8 and not before.issues
    filler = str(small_disk / "filler")
    _fill(filler, leave=0)
    full = _tune(wd, 40)
    assert full.returncode == 2 and "Traceback" not in full.stderr, full.stderr[-3000:]
    errors = [line for line in full.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, full.stderr[-3000:]
    assert "disk full" in errors[0] or "no space left" in errors[0], errors[0]
    after = scan_database(wd)
    assert after.record_lines[:8] == before.record_lines  # nothing written before was lost
    assert not after.fatal, [str(i) for i in after.issues]
    os.remove(filler)
    resumed = _tune(wd, 40)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    final = scan_database(wd)
    assert len(final.record_lines) == 40 and not [i for i in final.issues if i.kind != "torn_tail"], \
        [str(i) for i in final.issues]
