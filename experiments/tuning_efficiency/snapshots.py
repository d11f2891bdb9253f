"""Measured, not reconstructed: the compiled model's latency from a tuning database at budget fractions.

    python experiments/tuning_efficiency/snapshots.py WORK_DIR [WORK_DIR ...] --model resnet50 [--fractions 0.125,0.25,0.5,1]
    python experiments/tuning_efficiency/snapshots.py WORK_DIR [WORK_DIR ...] --estimate-only   # TVM-free, times nothing

For each fraction f the first ceil(f x N) tuning records (database order = measurement order, for
autotune's loop and stock MetaSchedule's alike) go into a temporary JSONDatabase; the model is
compiled with it (``compile_relax``, untuned where a task has no record yet) and every snapshot of every
work dir given (the arms of one model and seed) is timed in alternating rounds in one process (a sitting; its
reading of a snapshot is the fastest round, see Sittings). The wall time at which each
snapshot's last record was measured comes from the run's report.json history. Writes
WORK_DIR/snapshots.json for each.

Sittings: one call is one sitting. On this shared VM the same databases timed in two sittings differed by
10-25 % (bert_base, stop 25), more than the arms differ, so the protocol times every group (the arms of one
model and seed) in ``MIN_SITTINGS`` sittings and reads each snapshot's latency as the **median over the
sittings** of the sitting's **minimum over its rounds** (``sitting_latency``). The minimum, not the median
(the rule until 2026-12-05, kept as the secondary ``latency_ms_median_rule``): the rounds of one sitting are
bimodal here — episodes of interference slow every program timed during them by 10-20 %, torch eager and
torch.compile in the same rounds alike (bert_base seed 0, one process: stock-ms 121.0-138.2 ms, torch eager
147.5-187.0 ms) — so a median over 5 rounds reads the share of rounds that fell in an episode, not the
program. Interference only adds time, so the fastest round is the estimate of the program's own speed
(Chen & Revels 2016, "Robust benchmarking in noisy environments"; BenchmarkTools.jl's minimum); the median
over sittings keeps one sitting's odd state from deciding. A call adds a sitting to WORK_DIR/snapshots.json
when the database and fractions are those of the sittings recorded there; otherwise (database grew, other
fractions, or a file written before sittings were recorded) it starts the list afresh.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

from autotune.cli import loadavg, write_json  # noqa: E402

FRACTIONS = (0.125, 0.25, 0.5, 1.0)
# protocol v2 (issue 47): from 1/32 of the budget, so "reaches the baseline's final with k x fewer trials" can be
# read up to 32x (the v1 grid's first point, 1/8, capped every reading at 8x)
FRACTIONS_V2 = (1 / 32, 1 / 16, 0.125, 0.25, 0.5, 1.0)
MIN_SITTINGS = 3  # sittings per group before its latencies are read (median over sittings)
RECORDS = "database_tuning_record.json"
WORKLOADS = "database_workload.json"


def sitting_latency(rounds_ms: list[float]) -> float:
    """One sitting's reading of a snapshot: the fastest of its rounds (interference only adds time)."""
    return min(rounds_ms)


def record_lines(work_dir: str) -> list[bytes]:
    with open(os.path.join(work_dir, RECORDS), "rb") as f:
        return [line for line in f.read().split(b"\n") if line.strip()]


def elapsed_at(report: dict, n: int) -> float | None:
    """Seconds since tuning started when the database held n records (report history rows start with the
    records in the database: autotune's loop counts earlier runs' records too, stock runs start empty)."""
    for row in (report.get("history") or {}).get("rows") or []:
        if row[0] >= n:
            return float(row[1])
    return None


def estimated_ms(work_dir: str, report: dict, ns: list[int]) -> list[tuple[float, int]]:
    """The secondary, estimated view of snapshots (TVM-free): for each n of ``ns``, the sum over the report's
    tasks of weight x the best mean run time among the database's first n records, in ms, and how many tasks
    have no valid record yet (left out of the sum). It tells kernel quality apart from what compiling the whole
    model adds. The database is read once (``run.task_records``)."""
    from run import task_records  # beside this file

    records = task_records(work_dir, report)
    weights = [float(t.get("weight") or 1) for t in report["tasks"]]
    out = []
    for n in ns:
        best: dict[int, float] = {}
        for task, sec in records[:n]:
            if task is not None and sec != float("inf"):
                best[task] = min(best.get(task, sec), sec)
        out.append((sum(weights[t] * b * 1e3 for t, b in best.items()), len(weights) - len(best)))
    return out


def snapshot_dirs(work_dir: str, fractions, tmp: str) -> list[tuple[float, int, str]]:
    lines = record_lines(work_dir)
    out = []
    for f in fractions:
        n = min(len(lines), max(1, math.ceil(f * len(lines))))
        d = os.path.join(tmp, f"f{f}")
        os.makedirs(d)
        with open(os.path.join(work_dir, WORKLOADS), "rb") as src, open(os.path.join(d, WORKLOADS), "wb") as dst:
            dst.write(src.read())
        with open(os.path.join(d, RECORDS), "wb") as dst:
            dst.write(b"\n".join(lines[:n]) + b"\n")
        out.append((f, n, d))
    return out


def measure_snapshots(work_dirs: list[str], model_name: str, fractions=FRACTIONS, rounds: int = 5,
                      seed: int = 0) -> list[dict]:
    """Compile every work dir's snapshots, then time all of them together in alternating rounds (one
    process: arms of one model and seed are compared under the same conditions, not across processes)."""
    from autotune.tvmrt.startup import fast_start

    fast_start("llvm")
    from tvm.s_tir import meta_schedule as ms

    from autotune.frontend import relax as fe
    from autotune.frontend.models import load_model
    from autotune.tvmrt.target import parse_target, target_json

    target = parse_target("llvm")
    os.environ.setdefault("TVM_NUM_THREADS", str(target_json(target).get("num-cores", 1)))
    model = load_model(model_name, seed=seed)
    mod, params = fe.import_exported(model.exported)
    mod = fe.bind_and_simplify(mod, params)
    reports, rows, runners = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for k, work_dir in enumerate(work_dirs):
            with open(os.path.join(work_dir, "report.json"), encoding="utf-8") as f:
                reports.append(json.load(f))
            rows.append([])
            dirs = snapshot_dirs(work_dir, fractions, os.path.join(tmp, str(k)))
            estimates = iter(estimated_ms(work_dir, reports[-1], [n for _, n, _ in dirs]))
            for frac, n, d in dirs:
                t0 = time.time()
                db = ms.database.JSONDatabase(work_dir=d, allow_missing=False)
                # the run's conv layout from its report (an early snapshot may hold no convolution to tell)
                exe = fe.compile_with_database(mod, target, db, conv_layout=reports[-1].get("conv_layout"))
                est, untuned = next(estimates)
                rows[-1].append({"fraction": frac, "records": n, "compile_s": time.time() - t0,
                                 "elapsed_s": elapsed_at(reports[-1], n), "estimated_ms": est,
                                 "untuned_tasks": untuned})
                runners.append(fe.VMRunner(exe))
    samples = [[] for _ in runners]
    for r in runners:  # warm-up
        r.time(model.inputs, repeat=1, min_repeat_ms=50)
    for _ in range(rounds):  # alternating rounds: each snapshot of each work dir once per round
        for i, r in enumerate(runners):
            time.sleep(0.3)
            samples[i].append(r.time(model.inputs, repeat=1, min_repeat_ms=100)[0])
    results, flat, load, when = [], iter(samples), loadavg(), time.strftime("%Y-%m-%dT%H:%M:%S")
    for work_dir, report, wd_rows in zip(work_dirs, reports, rows):
        sitting = {"at": when, "loadavg": load, "rounds": rounds,
                   "timed_with": [os.path.relpath(w, os.path.dirname(work_dir)) for w in work_dirs],
                   "latency_ms": [], "latency_ms_rounds": []}
        for _ in wd_rows:
            s = [x * 1e3 for x in next(flat)]
            sitting["latency_ms"].append(sitting_latency(s))
            sitting["latency_ms_rounds"].append(s)
        n_records = len(record_lines(work_dir))
        sittings = earlier_sittings(os.path.join(work_dir, "snapshots.json"), n_records, wd_rows) + [sitting]
        result = {"work_dir": work_dir, "model": model.name, "arm": report.get("arm") or report.get("cost_model"),
                  "seed": report.get("seed"), "records": n_records, "rounds": rounds,
                  "timed_with": sitting["timed_with"], "loadavg": load,
                  "snapshots": combine_sittings(wd_rows, sittings), "sittings": sittings}
        write_json(os.path.join(work_dir, "snapshots.json"), result)
        results.append(result)
    return results


def earlier_sittings(path: str, n_records: int, rows: list[dict]) -> list[dict]:
    """The sittings already recorded in ``path`` for this database (same record count, same snapshot
    grid); none when the file is missing, predates sittings, or was timed on another database or grid."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        old = json.load(f)
    grid = [(r["fraction"], r["records"]) for r in rows]
    if old.get("records") != n_records or [(r["fraction"], r["records"]) for r in old.get("snapshots", [])] != grid:
        return []
    return [s for s in old.get("sittings") or [] if len(s.get("latency_ms", [])) == len(rows)]


def combine_sittings(rows: list[dict], sittings: list[dict]) -> list[dict]:
    """Each snapshot's latency: the median over the sittings of each sitting's reading (``sitting_latency`` of
    its rounds; a sitting without its rounds: its recorded latency), the readings kept; beside it
    ``latency_ms_median_rule``, the rule until 2026-12-05 (the median over sittings of each sitting's median
    over its rounds), for the secondary view."""
    out = []
    for i, row in enumerate(rows):
        rounds = [s["latency_ms_rounds"][i] if s.get("latency_ms_rounds") else None for s in sittings]
        per = [sitting_latency(r) if r else s["latency_ms"][i] for r, s in zip(rounds, sittings)]
        medians = [statistics.median(r) if r else s["latency_ms"][i] for r, s in zip(rounds, sittings)]
        out.append(dict(row, latency_ms=statistics.median(per), latency_ms_sittings=per, sittings=len(per),
                        latency_ms_median_rule=statistics.median(medians)))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("work_dirs", nargs="+", metavar="WORK_DIR", help="one or more runs of the same model")
    ap.add_argument("--model", help="the zoo model the work dirs tuned (needed to compile and time)")
    ap.add_argument("--fractions", default=",".join(str(f) for f in FRACTIONS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--estimate-only", action="store_true",
                    help="print each snapshot's estimated latency (sum of weight x best per task; TVM-free), time nothing")
    args = ap.parse_args(argv)
    fractions = [float(x) for x in args.fractions.split(",")]
    if args.estimate_only:
        for work_dir in args.work_dirs:
            with open(os.path.join(work_dir, "report.json"), encoding="utf-8") as f:
                report = json.load(f)
            n_all = len(record_lines(work_dir))
            ns = [min(n_all, max(1, math.ceil(frac * n_all))) for frac in fractions]
            cells = [f"{frac:g}: {est:.1f} ms" + (f" ({untuned} tasks untuned)" if untuned else "")
                     for frac, (est, untuned) in zip(fractions, estimated_ms(work_dir, report, ns))]
            print(f"{work_dir}: " + ", ".join(cells))
        return 0
    if not args.model:
        ap.error("--model is needed to compile and time the snapshots (only --estimate-only goes without)")
    for res in measure_snapshots(args.work_dirs, args.model, fractions, args.rounds):
        print(f"{res['work_dir']} (sitting {len(res['sittings'])})")
        for row, now in zip(res["snapshots"], res["sittings"][-1]["latency_ms"]):
            print(f"{row['fraction']:>6} {row['records']:>6} records  {now:.3f} ms this sitting (fastest round), median of "
                  f"{row['sittings']}: {row['latency_ms']:.3f} ms  "
                  f"at {row['elapsed_s'] if row['elapsed_s'] is not None else '-'} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
