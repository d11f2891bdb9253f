"""``python -m autotune.data.stats DATASET [--markdown FILE]``: statistics of a dataset (TVM-free).

Records per task, latency spread per task (max/min of valid programs), failure rate by kind,
samplers, collection throughput (programs/hour, build/run split) from the manifest.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections import Counter

import numpy as np

from autotune.errors import UserError

from .store import mean_latency, read_manifest, read_records, read_tasks


def dataset_stats(root: str) -> dict:
    manifest = read_manifest(root)
    tasks = read_tasks(root)
    table = read_records(root)
    lat = mean_latency(table)
    keys = np.array(table.column("task_key").to_pylist())
    status = Counter(table.column("status").to_pylist())
    per_task = Counter(keys.tolist())
    spreads = []
    for key in per_task:
        valid = lat[(keys == key) & np.isfinite(lat)]
        if len(valid) >= 2:
            spreads.append(float(valid.max() / valid.min()))
    programs = _distinct_programs(keys, table.column("trace").to_pylist(), lat)
    programs["row_repeat_cv"] = _row_repeat_cv(table.column("run_secs").to_pylist())
    models = Counter(m for k in per_task for m in tasks[k]["models"] if not m.startswith("synthetic:"))
    stamps = np.sort(np.asarray(table.column("timestamp").to_pylist(), dtype=float))
    gaps = np.diff(stamps)
    active_s = float(gaps[gaps < 120].sum()) if len(gaps) else 0.0  # pauses between runs excluded
    runs = manifest.get("collection_runs", [])
    measured = sum(r["programs"] for r in runs)
    wall = sum(r["wall_s"] for r in runs)
    return {
        "hardware_id": manifest["hardware"]["hardware_id"],
        "target": manifest["hardware"]["target"],
        "records": int(table.num_rows),
        "valid": int(status.get("ok", 0)),
        "failure_rate": 1 - status.get("ok", 0) / max(table.num_rows, 1),
        "status": dict(status),
        "tasks_in_pool": len(tasks),
        "tasks_measured": len(per_task),
        "tasks_by_source": dict(Counter(tasks[k]["source"] for k in per_task)),
        "records_per_task": {"min": min(per_task.values(), default=0), "median": float(np.median(list(per_task.values()) or [0])),
                             "max": max(per_task.values(), default=0)},
        "programs": programs,
        "latency_spread_per_task": {"median": float(np.median(spreads)) if spreads else None,
                                    "p90": float(np.percentile(spreads, 90)) if spreads else None},
        "tasks_per_zoo_model": dict(models),
        "samplers": dict(Counter(table.column("sampler").to_pylist())),
        "throughput": {
            "programs_per_hour": measured / wall * 3600 if wall else None,
            "build_share": sum(r["build_s"] for r in runs) / wall if wall else None,
            "run_share": sum(r["run_s"] for r in runs) / wall if wall else None,
            "collection_wall_hours": wall / 3600,
            "programs_per_hour_from_timestamps": len(stamps) / active_s * 3600 if active_s else None,
            "active_hours_from_timestamps": active_s / 3600,
            "runs": len(runs),
        },
    }


def _distinct_programs(keys: np.ndarray, traces: list[str], lat: np.ndarray) -> dict:
    """Valid rows as distinct programs (task, trace): how many, how many rows repeat one already measured,
    tasks whose every valid row is one schedule, distinct programs per task, and the repeatability of the
    measurement (max/min of the mean latencies of one program's copies, median and p90)."""
    by_program: dict[tuple[str, str], list[float]] = {}
    for key, trace, t in zip(keys.tolist(), traces, lat.tolist()):
        if np.isfinite(t) and t > 0:
            by_program.setdefault((key, trace), []).append(t)
    per_task = Counter(key for key, _ in by_program)
    repeats = [max(v) / min(v) for v in by_program.values() if len(v) >= 2]
    return {
        "distinct": len(by_program),
        "repeated_rows": sum(len(v) - 1 for v in by_program.values()),
        "single_program_tasks": sum(1 for n in per_task.values() if n == 1),
        "per_task": {"min": min(per_task.values(), default=0), "median": float(np.median(list(per_task.values()) or [0])),
                     "max": max(per_task.values(), default=0)},
        "repeat_spread": {"programs": len(repeats), "median": float(np.median(repeats)) if repeats else None,
                          "p90": float(np.percentile(repeats, 90)) if repeats else None},
    }


def _row_repeat_cv(run_secs: list) -> dict:
    """Coefficient of variation of one row's repeats (one measurement: its repeats run back to back)."""
    cvs = [float(np.std(r) / np.mean(r)) for r in run_secs if r and len(r) >= 2 and np.mean(r) > 0]
    return {"rows": len(cvs), "median": float(np.median(cvs)) if cvs else None,
            "p90": float(np.percentile(cvs, 90)) if cvs else None}


def markdown(s: dict) -> str:
    t = s["throughput"]
    pph = f"{t['programs_per_hour']:.0f}" if t["programs_per_hour"] else "-"
    share = (f"{t['build_share']:.0%} build, {t['run_share']:.0%} run" if t["build_share"] is not None else "-")
    lines = [
        f"### {s['hardware_id']} (`{s['target']}`)", "",
        "| statistic | value |", "|---|---|",
        f"| records (valid) | {s['records']} ({s['valid']}) |",
        f"| failure rate | {s['failure_rate']:.1%} ({s['status']}) |",
        f"| tasks measured / in pool | {s['tasks_measured']} / {s['tasks_in_pool']} ({s['tasks_by_source']}) |",
        f"| records per task (min / median / max) | {s['records_per_task']['min']} / {s['records_per_task']['median']:.0f} / {s['records_per_task']['max']} |",
        f"| distinct valid programs (rows repeating one: merged for training) | {s['programs']['distinct']} ({s['programs']['repeated_rows']}) |",
        f"| distinct programs per task (min / median / max); tasks with one | {s['programs']['per_task']['min']} / {s['programs']['per_task']['median']:.0f} / {s['programs']['per_task']['max']}; {s['programs']['single_program_tasks']} |",
        _cv_line(s["programs"]["row_repeat_cv"]),
        _repeat_line(s["programs"]["repeat_spread"]),
        f"| latency spread per task, max/min (median / p90) | {s['latency_spread_per_task']['median'] or 0:.1f}x / {s['latency_spread_per_task']['p90'] or 0:.1f}x |",
        f"| tasks per zoo model | {s['tasks_per_zoo_model']} |",
        f"| samplers | {s['samplers']} |",
        f"| collection throughput (runs that closed cleanly) | {pph} programs/hour ({share}), {t['collection_wall_hours']:.2f} h in {t['runs']} runs |",
        f"| collection throughput (all rows, from timestamps) | {t['programs_per_hour_from_timestamps'] or 0:.0f} programs/hour over {t['active_hours_from_timestamps']:.2f} active hours |",
        "",
    ]
    return "\n".join(lines)


def _cv_line(r: dict) -> str:
    if not r["rows"]:
        return "| repeats within one measurement, coefficient of variation | - |"
    return f"| repeats within one measurement, coefficient of variation (median / p90) | {r['median']:.1%} / {r['p90']:.1%} |"


def _repeat_line(r: dict) -> str:
    if not r["programs"]:
        return "| one program measured again, max/min of its copies | - (no program measured twice) |"
    return (f"| one program measured again, max/min of its copies (median / p90) | {r['median']:.2f}x / {r['p90']:.2f}x "
            f"over {r['programs']} programs |")


def main(argv=None) -> int:
    from autotune.cli import run_main

    ap = argparse.ArgumentParser(prog="python -m autotune.data.stats", description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset", help="a dataset folder written by autotune.collect")
    ap.add_argument("--markdown", default=None, help="also write the table to this file")
    args = ap.parse_args(argv)

    def body() -> int:
        text = markdown(dataset_stats(args.dataset))  # DatasetError is a UserError: one line, exit 2
        print(text)
        if args.markdown:
            tmp = args.markdown + ".tmp"
            try:
                with open(tmp, "w", encoding="utf-8") as f:
                    f.write(text)
                os.replace(tmp, args.markdown)
            except OSError as err:
                with contextlib.suppress(OSError):
                    os.remove(tmp)
                raise UserError(f"--markdown {args.markdown}: cannot write ({err.strerror})") from None
        return 0

    return run_main(body)


if __name__ == "__main__":
    raise SystemExit(main())
