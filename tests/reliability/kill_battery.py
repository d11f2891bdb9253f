"""Kill battery: SIGKILL ``autotune.tune`` and ``autotune.collect`` at random moments, resume, check.

    .venv/bin/python -m tests.reliability.kill_battery --kills 20 --out benchmarks/results/reliability.md

Each cycle starts the command on its work dir / dataset, kills the main process with SIGKILL after a
random delay (start-up, search, build, run, database write or compile, whichever it is in), then
reads what is on disk. Checks after every cycle and at the end:
- nothing committed before a kill is missing afterwards (records are compared as sets of
  (workload, trace, run_secs) for tune and (task, trace, timestamp) for collect);
- no duplicate records (``autotune.db`` scan for the database; identical rows for the dataset);
- every cycle that was not killed exits 0 (a resume never refuses its own work dir);
- at the end, after a clean run: stock TVM's ``JSONDatabase`` loads every record, the dataset's
  shards verify against the manifest (sha256) and the manifest counts match the rows.
The tune workload is the ``tiny`` zoo model (5 tasks); the dataset is ``tiny_mlp``'s 2 tasks.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = sys.executable


def _tune_cmd(wd: str, trials: int) -> list[str]:
    return [PY, "-m", "autotune.tune", "--model", "tiny", "--trials", str(trials), "--trials-per-round", "4",
            "--skip-untuned", "--bench-rounds", "1", "--cost-model", "stock", "--work-dir", wd]


def _collect_cmd(out: str, programs: int) -> list[str]:
    return [PY, "-m", "autotune.collect", "--out", out, "--models", "tiny_mlp", "--synthetic", "0",
            "--programs-per-task", str(programs), "--pass-size", "4"]


def db_records(wd: str) -> list[str]:
    """Complete record lines of the work dir's database as (workload shash, trace, run_secs) keys."""
    wl_path = os.path.join(wd, "database_workload.json")
    rec_path = os.path.join(wd, "database_tuning_record.json")
    if not os.path.exists(rec_path):
        return []
    with open(wl_path, "rb") as f:
        shash = [json.loads(line)[0] for line in f.read().split(b"\n") if line.endswith(b"]")]
    with open(rec_path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")[:-1]  # the part after the last newline is a line being written
    out = []
    for line in lines:
        row = json.loads(line)
        out.append(json.dumps([shash[row[0]], row[1][0], row[1][1]]))
    return out


def dataset_rows(root: str) -> list[str]:
    from autotune.data.store import read_records

    if not os.path.exists(os.path.join(root, "manifest.json")):
        return []
    table = read_records(root, verify=True)  # every shard's sha256 against the manifest
    return [json.dumps([k, t, ts]) for k, t, ts in zip(table.column("task_key").to_pylist(),
                                                      table.column("trace").to_pylist(),
                                                      table.column("timestamp").to_pylist())]


def _last_log_line(folder: str) -> str:
    path = os.path.join(folder, "logs", "autotune.log")
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 4000))
            lines = [x for x in f.read().decode(errors="replace").splitlines() if x.strip()]
        return lines[-1][:160] if lines else ""
    except OSError:
        return ""


def classify(phase: str, started: float | None = None) -> str:
    """Where a kill landed, from the last log line: start-up (no line from this run yet), search/build/run,
    compile, benchmark, collection pool extraction or measuring."""
    if not phase:
        return "start-up"
    if not phase[:4].isdigit():  # a continuation line (a warning printed while the model is imported)
        return "start-up"
    done = re.search(r"tuning \S+: (\d+)/(\d+) trials", phase)
    if done and done.group(1) == done.group(2):
        return "compile/benchmark"  # no trials left: after this line the run compiles and times
    if started is not None:
        try:
            stamp = time.mktime(time.strptime(phase[:19], "%Y-%m-%d %H:%M:%S"))
            if stamp < started - 1:
                return "start-up"
        except ValueError:
            pass
    text = phase.lower()
    for key, name in (("tuning curve", "finishing (report written)"), ("report:", "finishing (report written)"),
                      ("task pool", "task-pool extraction"), ("compil", "compile"), ("latency", "benchmark"),
                      ("numerics", "benchmark"), ("tuning", "search/build/run"), ("visit", "measuring"),
                      ("pass", "measuring")):
        if key in text:
            return name
    return "other: " + phase[24:80]


def _run_once(cmd: list[str], folder: str, kill_after: float | None, log) -> dict:
    t0 = time.time()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        rc = proc.wait(timeout=kill_after)
        killed = False
    except subprocess.TimeoutExpired:
        phase = _last_log_line(folder)
        os.kill(proc.pid, signal.SIGKILL)  # the main process only, as the OOM killer would
        proc.wait()
        time.sleep(1.0)
        orphans = _group_members(proc.pid)
        if orphans:
            os.killpg(proc.pid, signal.SIGKILL)  # do not let orphaned workers eat the 2 cores
        return {"killed": True, "after_s": round(time.time() - t0, 1), "phase": phase, "rc": -9,
                "orphans": len(orphans), "where": classify(phase, t0)}
    return {"killed": killed, "after_s": round(time.time() - t0, 1), "phase": "", "rc": rc, "orphans": 0}


def _group_members(pgid: int) -> list[int]:
    """Live members of the process group (zombies are dead: killed workers wait there to be reaped)."""
    out = subprocess.run(["ps", "-o", "pid=,stat=", "-g", str(pgid)], capture_output=True, text=True,
                         check=False).stdout
    return [int(line.split()[0]) for line in out.splitlines() if line.split() and not line.split()[1].startswith("Z")]


def _check(before: set[str], rows: list[str]) -> dict:
    now = set(rows)
    return {"rows": len(rows), "lost": len(before - now), "duplicates": len(rows) - len(now)}


def battery(kind: str, kills: int, seed: int, work: str, delays: tuple[float, float],
            compile_fraction: float = 0.25) -> dict:
    rng = random.Random(seed)
    folder = os.path.join(work, kind)
    log_path = os.path.join(work, f"{kind}.log")
    read = db_records if kind == "tune" else dataset_rows
    cycles, seen = [], set()
    with open(log_path, "a") as log:
        i, landed = 0, 0
        while True:  # until `kills` kills landed (a run may end before its delay), then one clean resume
            final = landed >= kills or i >= 2 * kills
            have = len(read(folder))
            if kind == "tune":  # some cycles only compile (no trials left): kills land in compile too
                goal = have + 4 if final else (have if rng.random() < compile_fraction and have else have + 400)
                cmd = _tune_cmd(folder, goal)
            else:
                # tiny_mlp has 2 tasks: always more to measure than a cycle can, so every cycle is killed
                per_task = have // 2 + (4 if final else 400)
                cmd = _collect_cmd(folder, per_task)
            log.write(f"\n===== cycle {i} {' '.join(cmd[2:])}\n")
            log.flush()
            res = _run_once(cmd, folder, None if final else rng.uniform(*delays), log)
            rows = read(folder)
            res.update(_check(seen, rows), cycle=i, final=final)
            seen |= set(rows)
            cycles.append(res)
            print(json.dumps({kind: res}), flush=True)
            landed += res["killed"]
            i += 1
            if final:
                break
    summary = {"kills": sum(c["killed"] for c in cycles), "lost": sum(c["lost"] for c in cycles),
               "duplicates": max(c["duplicates"] for c in cycles), "final_rows": cycles[-1]["rows"],
               "unkilled_failures": sum(1 for c in cycles if not c["killed"] and c["rc"] != 0),
               "orphaned_workers": sum(c["orphans"] for c in cycles),
               "load_1min_at_end": round(os.getloadavg()[0], 2)}
    summary.update(_final_checks(kind, folder))
    return {"kind": kind, "cycles": cycles, "summary": summary}


def _final_checks(kind: str, folder: str) -> dict:
    if kind == "tune":
        from autotune.db import scan_database

        scan = scan_database(folder)
        code = ("import sys\nfrom autotune.tvmrt.startup import fast_start\nfast_start('llvm')\n"
                "from tvm.s_tir import meta_schedule as ms\n"
                "db = ms.database.JSONDatabase(work_dir=sys.argv[1], allow_missing=False)\n"
                "print(len(db.get_all_tuning_records()))\n")
        res = subprocess.run([PY, "-c", code, folder], cwd=ROOT, capture_output=True, text=True, check=False)
        stock = int(res.stdout.split()[-1]) if res.returncode == 0 and res.stdout.split() else None
        report = os.path.join(folder, "report.json")
        compiled = os.path.exists(report)
        return {"db_issues": [str(i) for i in scan.issues], "stock_tvm_loads": stock,
                "stock_tvm_error": res.stderr[-300:] if stock is None else "", "report_written": compiled}
    from autotune.data.store import read_manifest, read_records

    manifest = read_manifest(folder)
    table = read_records(folder, verify=True)
    return {"shards_verified": len(manifest["shards"]), "manifest_records": manifest["counts"].get("records"),
            "rows_read": table.num_rows, "journal_rows": _journal_rows(folder)}


def _journal_rows(folder: str) -> int:
    path = os.path.join(folder, "journal.jsonl")
    return sum(1 for line in open(path, "rb") if line.strip()) if os.path.exists(path) else 0


def markdown(results: list[dict], command: str) -> str:
    lines = ["# Reliability: kill battery", "",
             f"Reproduce: `{command}` (2-core machine; `load_1min_at_end` below).", "",
             "Each cycle SIGKILLs the main process after a random delay, then reads the work dir / dataset; "
             "the next cycle resumes it. `lost` = rows on disk before the kill that are gone after; "
             "`duplicates` = rows written twice (same workload/task, trace and timing); `where` = the phase "
             "the kill landed in, from the last line of the run's log (a line older than the run: start-up); "
             "`orphaned workers` = TVM worker processes alive 1 s after the kill. Tune: the `tiny` zoo model "
             "(5 tasks); collect: `tiny_mlp`'s 2 tasks.", ""]
    for res in results:
        s = res["summary"]
        lines += [f"## {res['kind']}", ""]
        if res.get("command") and res["command"] != command:
            lines += [f"This section: `{res['command']}`.", ""]
        lines += ["| summary | value |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in s.items()]
        wheres: dict[str, int] = {}
        for c in res["cycles"]:
            if c["killed"]:
                wheres[c["where"]] = wheres.get(c["where"], 0) + 1
        lines += [f"| kills by phase | {', '.join(f'{k}: {v}' for k, v in sorted(wheres.items()))} |"]
        lines += ["", "| cycle | killed after (s) | where | rc | rows | lost | duplicates | orphaned workers | "
                  "last log line |", "|---|---|---|---|---|---|---|---|---|"]
        for c in res["cycles"]:
            phase = c["phase"].replace("|", "/")[11:120]
            lines.append(f"| {c['cycle']}{' (final)' if c['final'] else ''} | {c['after_s'] if c['killed'] else '-'} "
                         f"| {c.get('where', '-') if c['killed'] else '-'} | {c['rc']} | {c['rows']} | {c['lost']} "
                         f"| {c['duplicates']} | {c['orphans']} | {phase} |")
        lines.append("")
    return "\n".join(lines)


def _write_report(out: str, results: list[dict], command: str, notes: str | None) -> None:
    for res in results:  # a last line repeated from the previous cycle means start-up
        prev = ""
        for c in res["cycles"]:
            if c["killed"] and c.get("where") != "start-up":
                c["where"] = "start-up" if c["phase"] == prev else classify(c["phase"])
            prev = c["phase"] or prev
    text = markdown(results, command)
    if notes:
        with open(notes, encoding="utf-8") as f:
            text += "\n" + f.read()
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)


def _kept_results(path: str, rerun: set[str]) -> list[dict]:
    """The commands of an earlier report that this run did not repeat (``--commands collect`` after a
    full battery keeps the tune section), each with the command that produced it."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        old = json.load(f)
    kept = [r for r in old.get("results", []) if r["kind"] not in rerun]
    for r in kept:
        r.setdefault("command", old.get("command", ""))
    return kept


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.reliability.kill_battery", description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=20, help="kills per command")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", default=os.path.join(ROOT, "runs", "kill_battery"))
    ap.add_argument("--commands", default="tune,collect")
    ap.add_argument("--min-delay", type=float, default=4.0)
    ap.add_argument("--max-delay", type=float, default=45.0)
    ap.add_argument("--compile-fraction", type=float, default=0.25,
                    help="share of tune cycles with no trials left (a kill lands in compile or benchmark)")
    ap.add_argument("--out", default=None, help="markdown report (and .json beside it)")
    ap.add_argument("--report-only", default=None, help="rewrite --out from this results JSON, run nothing")
    ap.add_argument("--notes", default=None, help="a markdown file appended to the report (observations)")
    args = ap.parse_args(argv)
    if args.report_only:
        with open(args.report_only, encoding="utf-8") as f:
            data = json.load(f)
        _write_report(args.out, data["results"], data["command"], args.notes)
        return 0
    os.makedirs(args.work, exist_ok=True)
    results = [battery(kind, args.kills, args.seed, args.work, (args.min_delay, args.max_delay), args.compile_fraction)
               for kind in args.commands.split(",")]
    if args.out:
        command = "python -m tests.reliability.kill_battery " + " ".join(argv if argv is not None else sys.argv[1:])
        kept = _kept_results(os.path.splitext(args.out)[0] + ".json", {r["kind"] for r in results})
        for res in results:
            res["command"] = command
        with open(os.path.splitext(args.out)[0] + ".json", "w", encoding="utf-8") as f:
            json.dump({"command": command, "results": kept + results}, f, indent=1)
        _write_report(args.out, kept + results, command, args.notes)
    bad = [r["kind"] for r in results if r["summary"]["lost"] or r["summary"]["duplicates"]
           or r["summary"]["unkilled_failures"] or r["summary"]["orphaned_workers"]
           or any("duplicate" in i for i in r["summary"].get("db_issues", []))]
    print(json.dumps({r["kind"]: r["summary"] for r in results}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
