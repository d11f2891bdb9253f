"""Candidate build folders a killed run leaves behind are removed by the next run; a live run's never are."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from autotune.tvmrt import artifacts


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_sweep_removes_only_folders_of_ended_owners(tmp_path):
    dead = _dead_pid()
    orphan = tmp_path / f"autotune_build_{dead}_abc"
    live = tmp_path / f"autotune_build_{os.getpid()}_def"
    old_legacy = tmp_path / "autotune_build_x1y2z3"
    new_legacy = tmp_path / "autotune_build_q9w8e7"
    unrelated = tmp_path / f"other_{dead}_abc"
    for d in (orphan, live, old_legacy, new_legacy, unrelated):
        d.mkdir()
        (d / "candidate.so").write_bytes(b"x" * 100)
    day_ago = time.time() - artifacts.LEGACY_MAX_AGE_S - 60
    os.utime(old_legacy, (day_ago, day_ago))

    assert artifacts.sweep_orphans(str(tmp_path)) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [live.name, new_legacy.name, unrelated.name])
    assert artifacts.sweep_orphans(str(tmp_path)) == 0


def test_artifact_dir_is_named_for_the_pool_owner(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setenv("AUTOTUNE_POOL_PARENT", "4242")
    assert os.path.basename(artifacts.artifact_dir()).startswith("autotune_build_4242_")
    monkeypatch.delenv("AUTOTUNE_POOL_PARENT")
    assert os.path.basename(artifacts.artifact_dir()).startswith(f"autotune_build_{os.getpid()}_")


CHILD = """
import sys
from autotune.tvmrt.startup import fast_start
fast_start("llvm")
from tvm import te
from tvm.s_tir.meta_schedule.builder import BuilderInput
from autotune.tvmrt.measure import PooledBuilder
from autotune.tvmrt.target import parse_target
a = te.placeholder((64,), "float32", name="a")
b = te.compute((64,), lambda i: a[i] + 1.0, name="b")
mod = __import__("tvm").IRModule({"main": te.create_prim_func([a, b])})
res = PooledBuilder(max_workers=1).build([BuilderInput(mod, parse_target("llvm"))])[0]
print(res.artifact_path, flush=True)
sys.stdin.read()  # built, not yet run: killed here
"""


@pytest.mark.tvm
@pytest.mark.slow
def test_a_killed_runs_candidate_is_swept_by_the_next(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stdin=subprocess.PIPE,
                            text=True, env=env)
    try:
        path = proc.stdout.readline().strip()
        assert path.startswith(str(tmp_path)) and os.path.exists(path), path
        assert os.path.basename(os.path.dirname(path)).startswith(f"autotune_build_{proc.pid}_")
        assert artifacts.sweep_orphans(str(tmp_path)) == 0  # its owner is alive: kept
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        proc.kill()
    assert os.path.exists(path)
    assert artifacts.sweep_orphans(str(tmp_path)) == 1
    assert not os.path.exists(os.path.dirname(path))
