"""``python -m autotune.db check|repair WORK_DIR``: MetaSchedule JSON databases a crash or an editor damaged.

A work dir's database is two JSON-lines files (TVM-free to read):

    database_workload.json        [shash, base64 IRModule]               one workload a line
    database_tuning_record.json   [workload_index, [trace, run_secs, target, args_info]]

``workload_index`` is the 0-based line of the workload in the workload file, as the writer numbered
them (a blank line, which stops TVM's loader, is taken as inserted by an editor and not counted). ``check`` reports a torn last line (a
writer killed mid-line; resume drops it on its own), corrupt lines before the last (stock TVM and
autotune refuse to load such a file), records whose workload is missing and duplicate records.
``repair`` keeps every valid line, renumbers records when a workload line had to go, drops
duplicates and records without a workload, copies both files to ``WORK_DIR/db-backup-<time>/``
first and replaces them atomically. Exit codes: 0 healthy (check) or repaired, 1 damage found
(check), 2 bad input (no such folder, no database in it, folder in use).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field

from autotune.errors import UserError

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
FAILED_RUN_SECS = 1e10

# what a problem means for loading: "fatal" ones make stock TVM (and autotune) refuse the database
FATAL = ("corrupt", "bad_shape", "missing_workload")


@dataclass(frozen=True)
class Issue:
    file: str  # file name inside the work dir
    line: int  # 1-based line number in that file
    kind: str  # torn_tail | corrupt | bad_shape | missing_workload | duplicate | duplicate_workload
    detail: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.kind}: {self.detail}"


@dataclass
class Scan:
    """What is in a work dir's database, and what ``repair`` would write."""

    work_dir: str
    issues: list[Issue] = field(default_factory=list)
    workload_lines: list[bytes] = field(default_factory=list)  # valid, deduplicated, in order
    record_lines: list[bytes] = field(default_factory=list)  # valid, renumbered, deduplicated
    failed_records: int = 0

    @property
    def fatal(self) -> list[Issue]:
        return [i for i in self.issues if i.kind in FATAL]

    def summary(self) -> str:
        return (f"{self.work_dir}: {len(self.workload_lines)} workloads, {len(self.record_lines)} records "
                f"({self.failed_records} failed runs), {len(self.issues)} problems")


def _lines(path: str, name: str, issues: list[Issue]) -> list[tuple[int, bytes]]:
    """(1-based line number, bytes) of every non-blank line. A blank line stops TVM's loader (it is
    not JSON): it is reported, and not counted in the workload numbering (an editor inserted it)."""
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for i, line in enumerate(lines):
        if line.strip():
            out.append((i + 1, line))
        else:
            issues.append(Issue(name, i + 1, "corrupt", "blank line (TVM's loader stops at it)"))
    return out


def _parse(name: str, lines: list[tuple[int, bytes]], issues: list[Issue]) -> list[tuple[int, bytes, object]]:
    out = []
    for pos, (lineno, raw) in enumerate(lines):
        try:
            out.append((lineno, raw, json.loads(raw)))
        except ValueError as err:
            last = pos == len(lines) - 1
            kind = "torn_tail" if last else "corrupt"
            what = "unfinished last line (a writer was killed)" if last else f"not valid JSON ({err.msg})"
            issues.append(Issue(name, lineno, kind, what))
            out.append((lineno, raw, None))
    return out


def _workload_ok(row) -> bool:
    return (isinstance(row, list) and len(row) == 2 and isinstance(row[0], str | int)
            and isinstance(row[1], str) and len(row[1]) > 0)


def _record_ok(row) -> bool:
    if not (isinstance(row, list) and len(row) == 2 and isinstance(row[0], int) and not isinstance(row[0], bool)):
        return False
    body = row[1]
    if not (isinstance(body, list) and 1 <= len(body) <= 4):
        return False
    trace = body[0]
    secs = body[1] if len(body) > 1 else None
    return (isinstance(trace, list) and len(trace) == 2
            and (secs is None or (isinstance(secs, list) and all(isinstance(s, int | float) for s in secs))))


def _scan_workloads(scan: Scan, path: str) -> dict[int, int]:
    """Old workload index -> new index (valid lines only; a duplicate maps to its first copy)."""
    remap: dict[int, int] = {}
    seen: dict[bytes, int] = {}
    for old, (lineno, raw, row) in enumerate(_parse(WORKLOAD_FILE, _lines(path, WORKLOAD_FILE, scan.issues), scan.issues)):
        if row is None:
            continue
        if not _workload_ok(row):
            scan.issues.append(Issue(WORKLOAD_FILE, lineno, "bad_shape", "not a [shash, base64 IRModule] pair"))
            continue
        key = json.dumps(row).encode()
        if key in seen:
            scan.issues.append(Issue(WORKLOAD_FILE, lineno, "duplicate_workload",
                                     f"same workload as index {seen[key]} (harmless; repair merges them)"))
            remap[old] = seen[key]
            continue
        seen[key] = remap[old] = len(scan.workload_lines)
        scan.workload_lines.append(raw.rstrip(b"\r"))
    return remap


def _scan_records(scan: Scan, path: str, remap: dict[int, int]) -> None:
    seen: set[bytes] = set()
    for lineno, raw, row in _parse(RECORD_FILE, _lines(path, RECORD_FILE, scan.issues), scan.issues):
        if row is None:
            continue
        if not _record_ok(row):
            scan.issues.append(Issue(RECORD_FILE, lineno, "bad_shape",
                                     "not a [workload_index, [trace, run_secs, target, args_info]] record"))
            continue
        if row[0] not in remap:
            scan.issues.append(Issue(RECORD_FILE, lineno, "missing_workload",
                                     f"workload index {row[0]} is not a valid line of {WORKLOAD_FILE}"))
            continue
        body = row[1]
        key = json.dumps([remap[row[0]], body[0], body[2] if len(body) > 2 else None]).encode()
        if key in seen:
            scan.issues.append(Issue(RECORD_FILE, lineno, "duplicate", "same workload, trace and target as an "
                                     "earlier record (counts twice toward trials; repair keeps the first)"))
            continue
        seen.add(key)
        secs = body[1] if len(body) > 1 else None
        if not secs or min(secs) >= FAILED_RUN_SECS:
            scan.failed_records += 1
        if remap[row[0]] != row[0]:
            raw = json.dumps([remap[row[0]], body], separators=(",", ":")).encode()
        scan.record_lines.append(raw.rstrip(b"\r"))


def scan_database(work_dir: str) -> Scan:
    """Read both files (no TVM) and list every problem; raises UserError when there is no database."""
    if not os.path.isdir(work_dir):
        raise UserError(f"{work_dir}: no such folder; a tuning work dir (holding {WORKLOAD_FILE} and "
                        f"{RECORD_FILE}) is expected")
    wl, rec = os.path.join(work_dir, WORKLOAD_FILE), os.path.join(work_dir, RECORD_FILE)
    if not os.path.exists(wl) and not os.path.exists(rec):
        raise UserError(f"{work_dir}: no MetaSchedule database here ({WORKLOAD_FILE}, {RECORD_FILE}); "
                        "a tuning work dir is expected")
    scan = Scan(work_dir)
    try:
        _scan_records(scan, rec, _scan_workloads(scan, wl))
    except OSError as err:
        raise UserError(f"{err.filename}: cannot read ({err.strerror})") from None
    return scan


def _write_atomic(path: str, lines: list[bytes]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(b"".join(line + b"\n" for line in lines))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def repair_database(work_dir: str) -> tuple[Scan, str | None]:
    """Rewrite both files with every valid line; returns the scan and the backup folder (None: nothing
    to do). The caller holds the work dir's lock."""
    scan = scan_database(work_dir)
    if not scan.issues:
        return scan, None
    backup = os.path.join(work_dir, time.strftime("db-backup-%Y%m%d-%H%M%S"))
    os.makedirs(backup, exist_ok=True)
    for name in (WORKLOAD_FILE, RECORD_FILE):
        src = os.path.join(work_dir, name)
        if os.path.exists(src):
            shutil.copy2(src, os.path.join(backup, name))
            with open(os.path.join(backup, name), "rb") as f:
                os.fsync(f.fileno())
    _write_atomic(os.path.join(work_dir, WORKLOAD_FILE), scan.workload_lines)
    _write_atomic(os.path.join(work_dir, RECORD_FILE), scan.record_lines)
    dir_fd = os.open(work_dir, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return scan, backup


def repair_hint(work_dir: str) -> str:
    return f"python -m autotune.db repair {work_dir}"


def _check(work_dir: str) -> int:
    scan = scan_database(work_dir)
    print(scan.summary())
    for issue in scan.issues:
        print(f"  {issue}")
    if scan.fatal:
        print(f"TVM will not load this database; {repair_hint(work_dir)} keeps every valid line (backup first)")
    elif scan.issues:
        print(f"loads, but {repair_hint(work_dir)} would clean it up")
    return 1 if scan.issues else 0


def _repair(work_dir: str) -> int:
    from autotune.lock import FolderLock

    with FolderLock(work_dir, "work dir"):
        scan, backup = repair_database(work_dir)
    if backup is None:
        print(f"{scan.summary()}: nothing to repair")
        return 0
    kinds: dict[str, int] = {}
    for issue in scan.issues:
        kinds[issue.kind] = kinds.get(issue.kind, 0) + 1
    print(f"repaired {work_dir}: kept {len(scan.workload_lines)} workloads and {len(scan.record_lines)} records; "
          f"dropped/merged {', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}; originals in {backup}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from autotune.cli import run_main

    p = argparse.ArgumentParser(prog="python -m autotune.db", description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=("check", "repair"))
    p.add_argument("work_dir")
    args = p.parse_args(argv)
    return run_main(lambda: (_check if args.command == "check" else _repair)(args.work_dir))


if __name__ == "__main__":
    sys.exit(main())
