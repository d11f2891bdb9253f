"""MetaSchedule JSON databases that survive a kill: repair a torn last line before loading."""

from __future__ import annotations

import json
import logging
import os

from autotune.errors import UserError

from .startup import fast_start

fast_start("llvm")

from tvm.s_tir import meta_schedule as ms  # noqa: E402

logger = logging.getLogger(__name__)

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"


def repair_json_lines(path: str) -> int:
    """Drop a torn (unparsable) *last* line left by a killed writer. Returns lines dropped.

    Corruption before the last line is not guessed at: it raises ValueError naming the file.
    """
    if not os.path.exists(path):
        return 0
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    bad = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            json.loads(line)
        except ValueError:
            bad.append(i)
    if not bad:
        return 0
    if bad != [len(lines) - 1]:
        raise ValueError(f"{path}: corrupt JSON on line {bad[0] + 1} (not a torn last line); fix or remove it")
    with open(path, "wb") as f:
        f.write(b"\n".join(lines[:-1]) + (b"\n" if len(lines) > 1 else b""))
        f.flush()
        os.fsync(f.fileno())
    logger.warning("%s: dropped a torn last line left by an interrupted run", path)
    return 1


def refuse_damaged(work_dir: str) -> None:
    """One line (UserError) naming the first line TVM's loader would stop at, and the repair command.

    TVM's own loader raises a C++ check failure with a traceback on such files; a torn last line
    is not damage (``repair_json_lines`` drops it)."""
    from autotune.db import repair_hint, scan_database

    scan = scan_database(work_dir)
    if scan.fatal:
        first, more = scan.fatal[0], len(scan.fatal) - 1
        raise UserError(
            f"{os.path.join(work_dir, first.file)} line {first.line}: {first.kind} ({first.detail})"
            f"{f' and {more} more damaged lines' if more else ''}; TVM cannot load this database: run "
            f"{repair_hint(work_dir)} (keeps every valid line, backs up first)"
        )
    dups = sum(1 for i in scan.issues if i.kind == "duplicate")
    if dups:
        logger.warning("%s: %d duplicate tuning records (harmless; %s removes them)", work_dir, dups,
                       repair_hint(work_dir))


def open_json_database(work_dir: str) -> ms.database.JSONDatabase:
    os.makedirs(work_dir, exist_ok=True)
    wl, rec = os.path.join(work_dir, WORKLOAD_FILE), os.path.join(work_dir, RECORD_FILE)
    if os.path.exists(wl) or os.path.exists(rec):
        refuse_damaged(work_dir)
    repair_json_lines(wl)
    repair_json_lines(rec)
    return ms.database.JSONDatabase(path_workload=wl, path_tuning_record=rec, allow_missing=True)


def check_committed(work_dir: str, records: int) -> None:
    """Raise a UserError unless ``records`` complete lines reached the record file.

    TVM's JSONDatabase appends with a C++ ofstream and ignores write errors: on a full disk it
    "commits" records that never reach the file. Count what is there after writing."""
    path = os.path.join(work_dir, RECORD_FILE)
    with open(path, "rb") as f:
        written = f.read().count(b"\n")
    if written < records:
        free = os.statvfs(work_dir).f_bavail * os.statvfs(work_dir).f_frsize
        raise UserError(f"{path}: only {written} of {records} records reached the file ({free} bytes free on "
                        "its device: disk full?); free space and write into an empty folder again")


FAILED_RUN_SECS = 1e10  # MetaSchedule's marker for a failed candidate


def record_from_row(trace: str, run_secs: list[float] | None, target: dict, args_info: list,
                    workload: ms.database.Workload) -> ms.database.TuningRecord:
    """A dataset row (trace JSON text, run_secs, the task's target and args_info) as a MetaSchedule
    TuningRecord of ``workload``; a failed row (no run_secs) gets the failure marker."""
    obj = [json.loads(trace), list(run_secs) if run_secs else [FAILED_RUN_SECS], target, args_info]
    return ms.database.TuningRecord.from_json(obj, workload)


def record_latency(record) -> float | None:
    """Mean run time of a record in seconds, or None for a failed one."""
    secs = [float(getattr(s, "value", s)) for s in (record.run_secs or [])]
    if not secs or min(secs) >= FAILED_RUN_SECS:
        return None
    return sum(secs) / len(secs)


def to_py(obj):
    """TVM JSON-ish objects (ffi Arrays/Maps, IntImm/FloatImm, or plain lists) to plain Python."""
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if hasattr(obj, "value") and not hasattr(obj, "items"):
        return obj.value
    if hasattr(obj, "items"):
        return {str(to_py(k)): to_py(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple) or hasattr(obj, "__len__"):
        return [to_py(x) for x in obj]
    raise TypeError(f"cannot convert {type(obj).__name__} to JSON")
