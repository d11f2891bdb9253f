"""``python -m autotune.db check|repair``: every kind of damage found, every valid line kept, and
stock TVM loads what ``repair`` writes (records still point at their own workloads)."""

from __future__ import annotations

import json
import os

import pytest

from autotune.db import RECORD_FILE, WORKLOAD_FILE, repair_database, scan_database
from autotune.errors import UserError


def _write(path, lines, end=b"\n"):
    with open(path, "wb") as f:
        f.write(b"\n".join(lines) + end)


def _record(idx, tag, secs=(0.001,)):
    trace = [[["GetSBlock", [], [tag, "main"], ["b0"]]], []]
    return json.dumps([idx, [trace, list(secs), {"kind": "llvm"}, []]]).encode()


def _synthetic(tmp_path):
    wls = [json.dumps([str(i), f"bW9k{i}"]).encode() for i in range(3)]
    recs = [_record(i % 3, f"t{i}") for i in range(6)]
    _write(tmp_path / WORKLOAD_FILE, wls)
    _write(tmp_path / RECORD_FILE, recs)
    return wls, recs


def test_clean_database_has_no_issues(tmp_path):
    _synthetic(tmp_path)
    scan = scan_database(str(tmp_path))
    assert scan.issues == [] and len(scan.workload_lines) == 3 and len(scan.record_lines) == 6


@pytest.mark.parametrize("damage, kind, line, kept_records", [
    ("torn_tail", "torn_tail", 7, 6),
    ("corrupt_mid", "corrupt", 3, 5),
    ("blank_mid", "corrupt", 3, 6),
    ("bad_shape", "bad_shape", 2, 5),
    ("missing_workload", "missing_workload", 7, 6),
    ("duplicate", "duplicate", 7, 6),
])
def test_each_damage_is_found_and_repaired(tmp_path, damage, kind, line, kept_records):
    _, recs = _synthetic(tmp_path)
    recs = list(recs)
    if damage == "torn_tail":
        recs.append(_record(0, "x")[:40])
    elif damage == "corrupt_mid":
        recs[2] = recs[2][:30]
    elif damage == "blank_mid":
        recs.insert(2, b"")
    elif damage == "bad_shape":
        recs[1] = b'{"a": 1}'
    elif damage == "missing_workload":
        recs.append(_record(9, "orphan"))
    elif damage == "duplicate":
        recs.append(recs[0])
    _write(tmp_path / RECORD_FILE, recs, end=b"" if damage == "torn_tail" else b"\n")
    before = (tmp_path / RECORD_FILE).read_bytes()
    scan = scan_database(str(tmp_path))
    assert [(i.kind, i.line) for i in scan.issues] == [(kind, line)]
    _, backup = repair_database(str(tmp_path))
    assert open(os.path.join(backup, RECORD_FILE), "rb").read() == before  # the original, byte for byte
    after = scan_database(str(tmp_path))
    assert after.issues == [] and len(after.record_lines) == kept_records


def test_dropped_workload_renumbers_records(tmp_path):
    wls, recs = _synthetic(tmp_path)
    _write(tmp_path / WORKLOAD_FILE, [wls[0], b"[oops", wls[1], wls[2]])
    # written when "[oops" was workload 1: records of workloads 2 and 3 must move down by one
    _write(tmp_path / RECORD_FILE, [_record(0, "a"), _record(1, "lost"), _record(2, "b"), _record(3, "c")])
    scan = scan_database(str(tmp_path))
    assert sorted(i.kind for i in scan.issues) == ["corrupt", "missing_workload"]
    repair_database(str(tmp_path))
    rows = [json.loads(x) for x in (tmp_path / RECORD_FILE).read_bytes().splitlines()]
    assert [(r[0], r[1][0][0][0][2][0]) for r in rows] == [(0, "a"), (1, "b"), (2, "c")]
    assert (tmp_path / WORKLOAD_FILE).read_bytes().splitlines() == wls


def test_no_database_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no such folder"):
        scan_database(str(tmp_path / "missing"))
    with pytest.raises(UserError, match="no MetaSchedule database"):
        scan_database(str(tmp_path))


def test_cli_exit_codes(tmp_path, cli):
    _, recs = _synthetic(tmp_path)
    assert cli("autotune.db", "check", str(tmp_path)).returncode == 0
    _write(tmp_path / RECORD_FILE, [recs[0], b"garbage", recs[1]])
    res = cli("autotune.db", "check", str(tmp_path))
    assert res.returncode == 1 and f"{RECORD_FILE}:2: corrupt" in res.stdout and "autotune.db repair" in res.stdout
    res = cli("autotune.db", "repair", str(tmp_path))
    assert res.returncode == 0 and "kept 3 workloads and 2 records" in res.stdout, res.stdout + res.stderr
    assert cli("autotune.db", "check", str(tmp_path)).returncode == 0
    res = cli("autotune.db", "check", str(tmp_path / "nope"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr


def _matmul(te, tvm, n):
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c])})


def _real_database(work_dir):
    """3 workloads (te matmuls), 2 records each, written by stock TVM."""
    from autotune.tvmrt.startup import fast_start

    fast_start("llvm")
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    db = ms.database.JSONDatabase(work_dir=str(work_dir))
    target = tvm.target.Target({"kind": "llvm"})
    for n in (16, 32, 64):
        mod = _matmul(te, tvm, n)
        wl = db.commit_workload(mod)
        for factor in (2, 4):
            sch = tvm.s_tir.Schedule(mod)
            i, _, _ = sch.get_loops(sch.get_sblock("C"))
            sch.split(i, factors=[None, factor])
            db.commit_tuning_record(ms.database.TuningRecord(
                sch.trace, wl, [float(n * factor) * 1e-6], target, ms.arg_info.ArgInfo.from_prim_func(mod["main"])))
    return ms


@pytest.mark.tvm
def test_stock_tvm_loads_the_repaired_database(tmp_path):
    ms = _real_database(tmp_path)
    wl_lines = (tmp_path / WORKLOAD_FILE).read_bytes().splitlines()
    rec_lines = (tmp_path / RECORD_FILE).read_bytes().splitlines()
    assert len(wl_lines) == 3 and len(rec_lines) == 6
    # damage: workload 0 corrupt (its 2 records go), a record corrupt, a duplicate, a torn tail
    _write(tmp_path / WORKLOAD_FILE, [wl_lines[0][:100]] + wl_lines[1:])
    _write(tmp_path / RECORD_FILE, rec_lines[:3] + [b"#"] + rec_lines[3:] + [rec_lines[4], rec_lines[5][:60]], end=b"")
    with pytest.raises(Exception):  # noqa: B017 - stock TVM refuses the damaged files (tvm.error.InternalError)
        ms.database.JSONDatabase(work_dir=str(tmp_path))
    scan, _ = repair_database(str(tmp_path))
    assert sorted(i.kind for i in scan.issues) == ["corrupt", "corrupt", "duplicate", "missing_workload",
                                                   "missing_workload", "torn_tail"]
    db = ms.database.JSONDatabase(work_dir=str(tmp_path))
    recs = db.get_all_tuning_records()
    assert len(recs) == 4  # 6 - 2 of the lost workload; corrupt, duplicate and torn lines are not records
    # each record still belongs to its own workload: run_secs encode n * factor, n = the matmul size
    for rec in recs:
        n = int(ms.arg_info.ArgInfo.from_prim_func(rec.workload.mod["main"])[0].shape[0])
        assert round(float(rec.run_secs[0]) * 1e6) in (n * 2, n * 4)
